"""RecordingWrapper behaviour: episode boundaries, empty recordings, many episodes and batches,
several writers in one directory, flush/close/exit, copying, infos that cannot be stored, and
arrays that outlive the reader."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest
from conftest import (ROOT, TruthCollector, assert_episode_matches, assert_recording_matches,
                      assert_same)
from gymnasium import spaces

import gym_recorder
from gym_recorder import (RecordingClosedError, RecordingReader, RecordingWrapper,
                          UnsupportedValueError)

SUBPROCESS_TIMEOUT = 60  # seconds; each script runs in well under one


def fixed(episode_length: int = 5, **kwargs) -> gym.Env:
    return gym.make("sample_envs/FixedLength-v0", episode_length=episode_length, **kwargs)


def fixed_truth_obs(seed: int, length: int, shape=(4,), dtype="float32") -> np.ndarray:
    """The observations FixedLength-v0 returns in an episode reset with ``seed``."""
    env = fixed(length, obs_shape=shape, obs_dtype=dtype)
    rows = [env.reset(seed=seed)[0]]
    for _ in range(length):
        rows.append(env.step(0)[0])
    return np.stack(rows)


def run_script(code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT, check=True)


# ---------------------------------------------------------------------------------------------
# Episode boundaries


def test_early_reset_and_zero_length_episodes(tmp_path):
    truth = TruthCollector(gym.make("sample_envs/NestedDict-v0", episode_length=10))
    env = RecordingWrapper(truth, tmp_path)
    env.action_space.seed(0)
    env.reset(seed=1)
    for _ in range(3):
        env.step(env.action_space.sample())
    env.reset(seed=2)          # early reset after 3 steps
    env.reset()                # reset, reset: the episode of seed 2 has length 0
    env.step(env.action_space.sample())
    env.reset(options={"x": 1})  # reset, close: length 0
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert [len(ep) for ep in reader] == [3, 0, 1, 0]
        assert [ep.end for ep in reader] == ["reset", "reset", "reset", "close"]
        assert [ep.seed for ep in reader] == [1, 2, None, None]
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)
        for k in (1, 3):
            ep = reader[k]
            assert ep.observations["grid"].shape == (1, 5, 5)
            assert ep.observations["nested"]["pair"][1].shape == (1,)
            assert ep.actions["move"].shape == (0, 2) and ep.actions["move"].dtype == np.float32
            assert ep.actions["choice"].shape == (0,) and ep.actions["choice"].dtype == np.int64
            assert ep.rewards.shape == (0,) and ep.terminations.shape == (0,)
            assert ep.infos == [{}]
        assert reader[3].options == {"x": 1}


def test_zero_length_episode_of_a_box_env(tmp_path):
    env = RecordingWrapper(fixed(obs_shape=(2, 3), obs_dtype="int16"), tmp_path)
    obs, _ = env.reset(seed=0)
    env.close()
    with RecordingReader(tmp_path) as reader:
        [ep] = list(reader)
    assert_same(ep.observations, obs[None])
    assert_same(ep.actions, np.zeros((0,), np.int64))
    assert ep.end == "close" and ep.seed == 0


def test_close_without_any_reset_is_an_empty_recording(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "empty")
    env.close()
    [manifest] = list((tmp_path / "empty").glob("*.manifest.json"))
    doc = json.loads(manifest.read_bytes())
    assert doc["batches"] == [] and doc["complete"] is True and doc["env_id"] == "CartPole-v1"
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == [manifest.name]
    with RecordingReader(tmp_path / "empty") as reader:
        assert len(reader) == 0 and list(reader) == []
        assert reader.observation_space == gym.make("CartPole-v1").observation_space
        with pytest.raises(IndexError):
            reader[0]


def test_step_before_reset_raises_reset_needed(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    with pytest.raises(gym_recorder.ResetNeeded, match="reset"):
        env.step(0)
    env.reset(seed=0)
    env.step(0)
    env.close()
    with pytest.raises(RecordingClosedError):
        env.step(0)
    with pytest.raises(RecordingClosedError):
        env.reset()
    with RecordingReader(tmp_path) as reader:
        assert [len(ep) for ep in reader] == [1]


class EndlessEnv(gym.Env):
    """Terminates at every third step but lets the caller step on without a reset."""

    observation_space = spaces.Box(-10, 10, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0, -1], np.float32), {"reset": True}

    def step(self, action):
        self.t += 1
        return (np.array([self.t, action], np.float32), float(self.t), self.t % 3 == 0, False,
                {"t": self.t})


def _stepped_on(env: gym.Env, directory) -> list:
    """Records seven steps of ``env`` after one reset (seed 4), whatever ends; its episodes."""
    recorder = RecordingWrapper(env, directory)
    recorder.reset(seed=4)
    for t in range(1, 8):
        recorder.step(t % 3)
    recorder.close()
    with RecordingReader(directory) as reader:
        return list(reader)


def test_steps_after_termination_without_reset(tmp_path):
    """A step after the episode ended, on an env that goes on without a reset, is a transition
    like any other: the first of an episode marked no_reset, which starts from the last
    observation (found by an independent reader: it was taken for the env's own reset and its
    action and reward dropped)."""
    eps = _stepped_on(EndlessEnv(), tmp_path)  # terminates at t = 3 and t = 6, steps on
    assert [len(ep) for ep in eps] == [3, 3, 1]
    assert [ep.end for ep in eps] == ["terminated", "terminated", "close"]
    assert [ep.no_reset for ep in eps] == [False, True, True]
    assert [ep.seed for ep in eps] == [4, None, None]
    assert eps[1].observations.tolist() == [[3, 0], [4, 1], [5, 2], [6, 0]]
    assert eps[1].actions.tolist() == [1, 2, 0]
    assert eps[1].rewards.tolist() == [4.0, 5.0, 6.0]
    assert eps[2].observations.tolist() == [[6, 0], [7, 1]]
    assert eps[2].actions.tolist() == [1] and eps[2].rewards.tolist() == [7.0]
    assert [info for info in eps[1].infos] == [{}, {"t": 4}, {"t": 5}, {"t": 6}]


def test_steps_after_termination_under_autoreset_are_resets(tmp_path):
    """Under gymnasium.wrappers.Autoreset the step after the end is the env's own reset."""
    eps = _stepped_on(gym.wrappers.Autoreset(EndlessEnv()), tmp_path)
    # (the step at t = 4 is Autoreset's reset; the env counts 1, 2, 3 again and terminates)
    assert [len(ep) for ep in eps] == [3, 3]
    assert [ep.no_reset for ep in eps] == [False, False]
    assert eps[1].observations[0].tolist() == [0, -1]  # the reset observation, not a step's
    assert eps[1].actions.tolist() == [2, 0, 1]


def test_steps_without_reset_after_an_episode_cut_across_batches(tmp_path):
    """The episode's end lies in an earlier batch than the step that starts the next one."""
    env = RecordingWrapper(EndlessEnv(), tmp_path, target_batch_bytes=60)
    env.reset(seed=0)
    for t in range(1, 11):
        env.step(t % 3)
    env.close()
    with RecordingReader(tmp_path) as reader:
        eps = list(reader)
        assert len(reader.writers) == 1 and reader.writers[0]["batches"] > 3
    # Each episode after the first starts from the last observation, which lies in an earlier
    # batch than its first step.
    assert [len(ep) for ep in eps] == [3, 3, 3, 1]
    assert [ep.no_reset for ep in eps] == [False, True, True, True]
    rows = [[0, -1]] + [[t, t % 3] for t in range(1, 11)]
    for k, ep in enumerate(eps):
        assert_same(ep.observations, np.array(rows[3 * k:3 * k + 4], np.float32))
        assert_same(ep.actions, np.array([t % 3 for t in range(3 * k + 1, 3 * k + 4)
                                          if t <= 10]))
    assert_same(np.concatenate([ep.rewards for ep in eps]), np.arange(1.0, 11.0))


# ---------------------------------------------------------------------------------------------
# Many episodes, many batches, long episodes


def test_many_short_episodes(tmp_path):
    lengths = [k % 4 for k in range(2000)]  # includes 500 zero-length episodes
    env = RecordingWrapper(fixed(3, obs_shape=(2,), obs_dtype="int32"), tmp_path)
    for k, n in enumerate(lengths):
        env.reset(seed=k)
        for _ in range(n):
            env.step(k % 2)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 2000
        eps = list(reader)
    assert [len(ep) for ep in eps] == lengths
    assert [ep.seed for ep in eps] == list(range(2000))
    assert [ep.end for ep in eps] == ["reset" if n < 3 else "terminated" for n in lengths]
    assert lengths[-1] == 3  # ends by itself: nothing left for close()
    for k in (0, 3, 7, 1234, 1999):
        assert_same(eps[k].observations, fixed_truth_obs(k, 3, (2,), "int32")[:lengths[k] + 1])
        assert_same(eps[k].actions, np.full(lengths[k], k % 2, np.int64))


def test_many_batches(tmp_path):
    truth = TruthCollector(gym.make("sample_envs/ChangingInfo-v0", episode_length=7))
    env = RecordingWrapper(truth, tmp_path, target_batch_bytes=100)
    env.action_space.seed(3)
    for k in range(40):
        env.reset(seed=k)
        for _ in range(7 if k % 5 else 2):
            env.step(env.action_space.sample())
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert reader.writers[0]["batches"] >= 100
        assert len(list(tmp_path.glob("*.bin"))) == reader.writers[0]["batches"]
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)


def test_long_episode_split_across_batches(tmp_path):
    n = 5000
    truth = TruthCollector(fixed(n, obs_shape=(8,), obs_dtype="float64"))
    env = RecordingWrapper(truth, tmp_path, target_batch_bytes=20_000)
    env.reset(seed=9)
    for t in range(n):
        env.step(t % 2)
    env.reset(seed=10)
    env.step(1)
    env.close()
    manifest = json.loads(next(tmp_path.glob("*.manifest.json")).read_bytes())
    assert len(manifest["batches"]) > 20
    entries = [e for b in manifest["batches"]
               for e in json.loads((tmp_path / b["fn"]).read_bytes())["episodes"]]
    first = [e for e in entries if e["episode"] == 0]
    assert len(first) > 20 and [e["part"] for e in first] == list(range(len(first)))
    assert sum(e["steps"] for e in first) == n
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 2
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)
        ep = reader[0]
    assert ep.observations.shape == (n + 1, 8) and ep.end == "terminated"
    assert_same(ep.observations, fixed_truth_obs(9, n, (8,), "float64"))


# ---------------------------------------------------------------------------------------------
# Several writers in one directory


def test_two_wrappers_in_one_process_share_a_directory(tmp_path):
    truths = [TruthCollector(fixed(4)), TruthCollector(gym.make("sample_envs/Text-v0",
                                                                episode_length=3))]
    envs = [RecordingWrapper(t, tmp_path, target_batch_bytes=500) for t in truths]
    assert envs[0].file_prefix != envs[1].file_prefix
    for k in range(6):  # interleaved
        for env in envs:
            env.reset(seed=k)
            for _ in range(2 + k % 3):
                _, _, term, trunc, _ = env.step(1)
                if term or trunc:
                    break
    for env in envs:
        env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 12
        writers = [w["prefix"] for w in reader.writers]
        assert writers == [e.file_prefix for e in envs]  # ordered by creation time
        eps = list(reader)
        assert [ep.writer for ep in eps] == [writers[0]] * 6 + [writers[1]] * 6
        assert [ep.env_id for ep in eps] == ["sample_envs/FixedLength-v0"] * 6 + [
            "sample_envs/Text-v0"] * 6
        for i, truth in enumerate(truths):
            for k, t in enumerate(truth.episodes):
                assert_episode_matches(eps[6 * i + k], t, truth.observation_space,
                                       truth.action_space)
        assert reader.observation_space == truths[0].observation_space  # the first writer's


WRITER_SCRIPT = """
    import os, sys, time
    import gymnasium as gym
    import sample_envs
    from gym_recorder import RecordingWrapper
    directory, base, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=6),
                           directory, target_batch_bytes=300)
    deadline = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.002)
    for k in range(25):
        env.reset(seed=base + k)
        for t in range(6):
            env.step(t % 2)
    env.close()
    print(env.file_prefix)
"""


def test_two_processes_write_one_directory_at_once(tmp_path):
    directory, go = tmp_path / "rec", tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER_SCRIPT),
                               str(directory), str(base), str(go)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for base in (1000, 2000)]
    time.sleep(0.3)
    go.touch()
    outs = [p.communicate(timeout=SUBPROCESS_TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    prefixes = [out.strip() for out, _ in outs]
    with RecordingReader(directory) as reader:
        assert len(reader) == 50
        order = [(ep.writer, ep.seed) for ep in reader]
        for ep in reader:
            assert len(ep) == 6 and ep.end == "terminated"
            assert_same(ep.observations, fixed_truth_obs(ep.seed, 6))
            assert_same(ep.actions, np.array([0, 1, 0, 1, 0, 1], np.int64))
        assert sorted(w["prefix"] for w in reader.writers) == sorted(prefixes)
        assert all(w["batches"] > 5 and w["complete"] for w in reader.writers)
    with RecordingReader(directory) as again:
        assert [(ep.writer, ep.seed) for ep in again] == order  # deterministic
    by_writer = {}
    for writer, seed in order:
        by_writer.setdefault(writer, []).append(seed)
    assert sorted(by_writer.values()) == [list(range(1000, 1025)), list(range(2000, 2025))]
    # Writers are not interleaved: all of one writer's episodes, then the other's.
    assert [w for w, _ in order] == [order[0][0]] * 25 + [order[-1][0]] * 25


def test_never_closed_wrapper_writes_at_interpreter_exit(tmp_path):
    run_script("""
        import sys
        import gymnasium as gym
        import sample_envs
        from gym_recorder import RecordingWrapper
        env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=5),
                               sys.argv[1])
        for k in range(3):
            env.reset(seed=k)
            for t in range(5):
                env.step(1)
        env.reset(seed=3)
        env.step(0)
        env.step(1)
        # no close(): normal interpreter exit must write everything
    """, str(tmp_path))
    with RecordingReader(tmp_path) as reader:
        assert [len(ep) for ep in reader] == [5, 5, 5, 2]
        assert [ep.end for ep in reader] == ["terminated"] * 3 + ["close"]
        assert reader.writers[0]["complete"]
        assert_same(reader[3].observations, fixed_truth_obs(3, 5)[:3])
        assert_same(reader[3].actions, np.array([0, 1], np.int64))


# ---------------------------------------------------------------------------------------------
# The wrapper's API


def test_relative_directory_and_directory_property(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = RecordingWrapper(fixed(2), os.path.join("rel", "deeper"))
    assert env.directory == os.path.join("rel", "deeper")
    env.reset(seed=0)
    monkeypatch.chdir(tmp_path / "rel")  # the process moves; the recording stays where it began
    env.step(0)
    env.step(0)
    env.close()
    monkeypatch.chdir(tmp_path)
    with RecordingReader("rel/deeper") as reader:
        assert [len(ep) for ep in reader] == [2]
    assert RecordingWrapper(fixed(), tmp_path / "p").directory == os.fspath(tmp_path / "p")


def test_context_manager_closes_and_writes(tmp_path):
    inner = fixed(3)
    with RecordingWrapper(inner, tmp_path) as env:
        assert isinstance(env, RecordingWrapper)
        env.reset(seed=0)
        env.step(1)
    manifest = json.loads(next(tmp_path.glob("*.manifest.json")).read_bytes())
    assert manifest["complete"] is True
    with pytest.raises(RecordingClosedError):
        env.reset()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 1 and reader[0].end == "close" and len(reader[0]) == 1


def test_flush_commits_an_open_episode(tmp_path):
    env = RecordingWrapper(fixed(10), tmp_path)
    env.reset(seed=0)
    for _ in range(4):
        env.step(0)
    env.flush()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 1
        ep = reader[0]
        assert len(ep) == 4 and ep.end is None  # still running
        assert not reader.writers[0]["complete"]
    for _ in range(6):
        env.step(1)
    env.flush()
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 1 and reader.writers[0]["batches"] == 2
        ep = reader[0]
        assert ep.end == "terminated"
        assert_same(ep.observations, fixed_truth_obs(0, 10))
        assert_same(ep.actions, np.array([0] * 4 + [1] * 6, np.int64))


def test_actions_are_copied(tmp_path):
    env = RecordingWrapper(gym.make("MountainCarContinuous-v0"), tmp_path)
    env.reset(seed=0)
    action = np.zeros(1, np.float32)
    for t in range(5):
        action[0] = t / 10  # one array, changed in place
        env.step(action)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert_same(reader[0].actions, (np.arange(5, dtype=np.float32) / 10)[:, None])


# ---------------------------------------------------------------------------------------------
# Infos


class InfoEnv(gym.Env):
    observation_space = spaces.Discrete(5)
    action_space = spaces.Discrete(2)

    def __init__(self, bad_value) -> None:
        self.bad_value = bad_value

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {"ok": 1}

    def step(self, action):
        info = {"ok": 2, "callback": self.bad_value} if action else {"ok": 3}
        return 1, 0.0, False, False, info


@pytest.mark.parametrize("bad", [object(), lambda: None, {1, 2}, np.array([None], object)],
                         ids=["object", "function", "set", "object-array"])
def test_unsupported_info_value_names_the_key(tmp_path, bad):
    env = RecordingWrapper(InfoEnv(bad), tmp_path)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(UnsupportedValueError, match="callback"):
        env.step(1)
    env.step(0)
    env.close()
    with RecordingReader(tmp_path) as reader:  # nothing silently half-written
        ep = reader[0]
        assert ep.infos == [{"ok": 1}, {"ok": 3}, {"ok": 3}]


def test_info_filter_leaves_values_out(tmp_path):
    def drop_callbacks(info: dict) -> dict:
        return {k: v for k, v in info.items() if k != "callback"}

    env = RecordingWrapper(InfoEnv(object()), tmp_path, info_filter=drop_callbacks)
    env.reset(seed=0)
    env.step(1)
    env.step(0)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert reader[0].infos == [{"ok": 1}, {"ok": 2}, {"ok": 3}]


def test_record_infos_false(tmp_path):
    env = RecordingWrapper(InfoEnv(object()), tmp_path, record_infos=False)
    env.reset(seed=0)
    _, _, _, _, info = env.step(1)
    assert "callback" in info  # the caller still gets the env's info, untouched
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert reader[0].infos == [{}, {}]


# ---------------------------------------------------------------------------------------------
# The reader's arrays and spaces


def test_arrays_stay_valid_after_the_reader_is_gone(tmp_path):
    truth = TruthCollector(gym.make("sample_envs/Image-v0", height=16, width=16, episode_length=6))
    env = RecordingWrapper(truth, tmp_path, target_batch_bytes=3_000)
    env.reset(seed=0)
    for _ in range(6):
        env.step(2)
    env.reset(seed=1)
    env.step(3)
    env.close()
    reader = RecordingReader(tmp_path)
    kept = [reader[0], reader[1]]
    reader.close()
    with pytest.raises(RecordingClosedError):
        reader[0]
    junk = [np.full((16, 16, 3), 255, np.uint8) for _ in range(200)]  # reuse freed memory
    for ep, t in zip(kept, truth.episodes):
        assert_episode_matches(ep, t, truth.observation_space, truth.action_space)
    reader = RecordingReader(tmp_path)
    obs = reader[1].observations
    del reader, kept, junk
    gc.collect()
    _ = [bytearray(4096) for _ in range(100)]
    assert_same(obs, np.stack(truth.episodes[1].observations))
    for path in tmp_path.iterdir():  # even the files may go
        path.unlink()
    gc.collect()
    assert_same(obs, np.stack(truth.episodes[1].observations))


def test_reader_rebuilds_the_spaces(tmp_path):
    for name, make in [("nested", lambda: gym.make("sample_envs/NestedDict-v0")),
                       ("blackjack", lambda: gym.make("Blackjack-v1")),
                       ("text", lambda: gym.make("sample_envs/Text-v0")),
                       ("pendulum", lambda: gym.make("Pendulum-v1"))]:
        env = make()
        RecordingWrapper(env, tmp_path / name).close()
        with RecordingReader(tmp_path / name) as reader:
            assert reader.observation_space == env.observation_space, name
            assert reader.action_space == env.action_space, name
            assert reader.observation_space.dtype == env.observation_space.dtype


def test_reset_and_step_return_exactly_what_the_env_returns(tmp_path):
    returned = {}

    class Probe(EndlessEnv):
        def reset(self, *, seed=None, options=None):
            returned["reset"] = super().reset(seed=seed, options=options)
            return returned["reset"]

        def step(self, action):
            returned["step"] = super().step(action)
            return returned["step"]

    env = RecordingWrapper(Probe(), tmp_path)
    obs, info = env.reset(seed=0)
    assert obs is returned["reset"][0] and info is returned["reset"][1]
    result = env.step(np.int64(2))
    assert all(a is b for a, b in zip(result, returned["step"])) and len(result) == 5
    env.close()


def test_a_collected_wrapper_writes_what_it_buffered(tmp_path):
    env = RecordingWrapper(fixed(4), tmp_path)
    env.reset(seed=0)
    env.step(1)
    del env
    gc.collect()
    with RecordingReader(tmp_path) as reader:
        assert [len(ep) for ep in reader] == [1]
        assert reader[0].end == "close" and reader.writers[0]["complete"]


@pytest.mark.parametrize("autoreset", [False, True])
def test_batches_of_very_short_episodes_never_run_out_of_rows(tmp_path, autoreset):
    """Episodes of 0-3 steps (Blackjack, and resets in a row) in small batches: a reset takes an
    observation row and the step after it another, so a batch is committed before either runs
    out (once a bare IndexError from the buffer)."""
    truth = TruthCollector(gym.make("Blackjack-v1"))
    env = RecordingWrapper(gym.wrappers.Autoreset(truth) if autoreset else truth, tmp_path,
                           target_batch_bytes=20_000, flush_interval=None)
    env.action_space.seed(0)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps = 0
    while steps < 3000:
        if not autoreset and rng.random() < 0.3:
            env.reset()  # the open episode ends "reset" (often with 0 steps)
        terminated = truncated = False
        while not (terminated or truncated):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps += 1
        if not autoreset:
            env.reset()
        else:
            env.step(env.action_space.sample())  # the env resets itself: the next episode's reset
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader.batches()) > 20
        assert min(len(ep) for ep in reader) == 0
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)
