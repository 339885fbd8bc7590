"""The vector wrapper follows the single-env wrapper's policies (one recorder shell, record/shell):
write errors deferred to the next call, values that do not fit their column kept as values,
copies and forked children recording as new writers. Real vector envs (make_vec CartPole)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import TransformObservation

from gym_recorder import RecordingReader, RecordingVectorWrapper
from gym_recorder.errors import OutsideSpaceWarning, RecorderWarning, WriteError
from gym_recorder.integrity import verify
from test_write_errors import Faults, enospc, temp_files

ROOT = Path(__file__).resolve().parent.parent
N = 2


def make(mode="sync", n=N):
    return gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode=mode)


def sub_env_observations(directory, n=N):
    """Per sub-env, every observation recorded, its episodes one after another."""
    with RecordingReader(directory, verify=True) as reader:
        eps = list(reader)  # (in the order episodes started)
        return [np.concatenate([ep.observations for ep in eps if ep.sub_env == i])
                for i in range(n)]


class Caller:
    """Plays a vector env through the recorder and keeps what the caller saw, and a twin env
    stepped with exactly the calls that returned (a call that raised must not touch the env)."""

    def __init__(self, env, twin):
        self.env, self.twin = env, twin
        self.seen: list[np.ndarray] = []
        self.errors: list[WriteError] = []
        self.rng = np.random.default_rng(0)

    def reset(self, seed):
        while True:
            try:
                obs, _ = self.env.reset(seed=seed)
                break
            except WriteError as e:
                self.errors.append(e)
        np.testing.assert_array_equal(obs, self.twin.reset(seed=seed)[0])
        self.seen.append(obs.copy())

    def step(self):
        actions = self.rng.integers(0, 2, N)
        for _ in range(2):  # a deferred error is raised once, by the call after the one it met
            try:
                obs = self.env.step(actions)[0]
                break
            except WriteError as e:
                self.errors.append(e)
        else:
            raise AssertionError("step() raised twice in a row")
        np.testing.assert_array_equal(obs, self.twin.step(actions)[0])
        self.seen.append(obs.copy())


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_write_error_in_step_is_raised_by_the_next_call_and_loses_nothing(
        tmp_path, monkeypatch, vectorization):
    faults = Faults(monkeypatch)
    env = RecordingVectorWrapper(make(vectorization), tmp_path, target_batch_bytes=1_500,
                                 flush_interval=None)
    caller = Caller(env, make("sync"))
    caller.reset(seed=0)
    for _ in range(30):
        caller.step()
    env.flush()
    faults.bin_error = enospc()
    for _ in range(60):
        caller.step()
    assert caller.errors, "a full disk must not pass silently"
    assert "No space left on device" in str(caller.errors[0])
    faults.clear()
    for _ in range(10):
        caller.step()
    env.close()
    assert temp_files(tmp_path) == [] and verify(tmp_path) == []
    recorded = sub_env_observations(tmp_path)
    seen = np.stack(caller.seen)
    for i in range(N):  # every step the caller saw, once, and nothing it did not see
        np.testing.assert_array_equal(recorded[i], seen[:, i])


def test_write_error_in_reset_is_raised_by_the_next_call(tmp_path, monkeypatch):
    faults = Faults(monkeypatch)
    env = RecordingVectorWrapper(make(), tmp_path, flush_interval=1e-6)  # commits every call
    caller = Caller(env, make())
    caller.reset(seed=0)
    caller.step()
    env.flush()
    faults.bin_error = enospc()
    caller.step()  # its batch fails in the writer thread
    deadline = time.monotonic() + 30
    while not faults.raised and time.monotonic() < deadline:
        time.sleep(0.01)
    obs, _ = env.reset(seed=7)  # meets the error: returns the reset, recorded
    np.testing.assert_array_equal(obs, caller.twin.reset(seed=7)[0])
    caller.seen.append(obs.copy())
    with pytest.raises(WriteError, match="No space left on device"):
        env.step(np.zeros(N, np.int64))  # raised before the env is touched
    faults.clear()
    caller.step()
    env.close()
    recorded = sub_env_observations(tmp_path)
    seen = np.stack(caller.seen)
    for i in range(N):
        np.testing.assert_array_equal(recorded[i], seen[:, i])
    with RecordingReader(tmp_path) as reader:
        assert sorted(ep.seed for ep in reader) == [0, 1, 7, 8]


def _appended(obs):
    return np.concatenate([obs, obs[:, :1] * 2], axis=1)  # (n, 5): the space says (4,)


def test_observations_of_another_shape_are_kept_exactly(tmp_path):
    envs = TransformObservation(make(), _appended)  # the space is not updated
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with RecordingVectorWrapper(envs, tmp_path, target_batch_bytes=2_000) as env:
            seen.append(env.reset(seed=0)[0].copy())
            for t in range(40):
                seen.append(env.step(np.array([t % 2, 1 - t % 2]))[0].copy())
    outside = [w for w in caught if issubclass(w.category, OutsideSpaceWarning)]
    assert len(outside) == 1 and "shape" in str(outside[0].message)
    recorded = sub_env_observations(tmp_path)
    seen = np.stack(seen)
    for i in range(N):
        np.testing.assert_array_equal(recorded[i], seen[:, i])


def test_values_no_dtype_holds_exactly_are_kept_as_values(tmp_path):
    big = 2 ** 60  # int64 beyond float64's integers: no dtype holds it and float32 exactly
    envs = TransformObservation(make(), lambda o: (o * 1000).astype(np.int64) + big)
    seen = []
    with pytest.warns(OutsideSpaceWarning, match="no common dtype"):
        with RecordingVectorWrapper(envs, tmp_path, target_batch_bytes=2_000) as env:
            seen.append(env.reset(seed=0)[0].copy())
            for t in range(30):
                seen.append(env.step(np.array([t % 2, 1]))[0].copy())
    recorded = sub_env_observations(tmp_path)
    seen = np.stack(seen)
    for i in range(N):
        assert recorded[i].dtype == np.int64
        np.testing.assert_array_equal(recorded[i], seen[:, i])


def test_a_deep_copy_records_as_a_new_writer_from_its_next_reset(tmp_path):
    env = RecordingVectorWrapper(make(), tmp_path, target_batch_bytes=10_000)
    env.reset(seed=0)
    env.step(np.array([0, 1]))
    twin = copy.deepcopy(env)
    with pytest.warns(RecorderWarning, match="copy made mid-episode"):
        twin.step(np.array([1, 1]))  # not recorded
    env.step(np.array([1, 1]))
    twin.reset(seed=10)
    for _ in range(3):
        twin.step(np.array([0, 0]))
    assert twin.file_prefix != env.file_prefix
    twin.close()
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader.writers) == 2 and all(w["complete"] for w in reader.writers)
        lengths = {ep.seed: len(ep) for ep in reader}
    assert lengths == {0: 2, 1: 2, 10: 3, 11: 3}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_records_on_its_own_and_nothing_twice(tmp_path):
    script = tmp_path / "fork_vector.py"
    script.write_text(textwrap.dedent('''
        import os, sys
        import gymnasium as gym
        import numpy as np
        from gym_recorder import RecordingVectorWrapper

        d = sys.argv[1]
        env = RecordingVectorWrapper(
            gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync"), d,
            flush_interval=None)
        env.reset(seed=1)
        env.step(np.array([0, 0]))
        env.flush()
        env.step(np.array([1, 1]))   # buffered, not written, when the child is forked
        pid = os.fork()
        if pid == 0:
            env.step(np.array([0, 1]))   # passes through: recorded from the next reset
            env.reset(seed=11)
            for t in range(5):
                env.step(np.array([t % 2, 1]))
            env.close()                  # the child's last steps are written
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("the child failed")
        env.step(np.array([0, 0]))
        env.close()
    '''))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "rec")], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=180,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with RecordingReader(tmp_path / "rec", verify=True) as reader:
        assert len(reader.writers) == 2 and all(w["complete"] for w in reader.writers)
        lengths = sorted((ep.seed, len(ep)) for ep in reader)
    assert lengths == [(1, 3), (2, 3), (11, 5), (12, 5)]
