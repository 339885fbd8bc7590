"""WRITE_MODE "process" (record/writeprocess): a child process writes the batches, fed through
shared-memory columns. Recordings read back exactly; errors keep thread mode's policy; a killed
recording process leaves every committed batch readable and no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import WriteError
from gym_recorder.integrity import verify
from gym_recorder.record import writer as writer_module
from gym_recorder.record.writechild import SLOW_ENV
from gym_recorder.record.writeprocess import FAIL_ENV, ProcessWriter
from sample_envs.envs import ImageEnv
from conftest import image_episode
from test_write_errors import step_collecting_errors, temp_files

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def process_mode(monkeypatch):
    monkeypatch.setattr(writer_module, "WRITE_MODE", "process")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_image_frames_read_back_exactly_through_shared_memory(tmp_path, process_mode):
    env = RecordingWrapper(ImageEnv(height=16, width=16, episode_length=50), tmp_path,
                           target_batch_bytes=20_000, flush_interval=None)
    writer = env._session.writer
    assert isinstance(writer, ProcessWriter)
    for seed in range(4):
        env.reset(seed=seed)
        for t in range(50):
            env.step(t % 4)
    env.close()
    # (pickled: only a short last batch's copy)
    assert writer.columns_shared >= 8 and writer.columns_pickled <= 2
    assert not _alive(writer._proc.pid)
    assert temp_files(tmp_path) == [] and verify(tmp_path) == []
    assert len(list(tmp_path.glob("*.bin"))) > 3  # several batches
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader) == 4
        for seed in range(4):
            frames, actions, rewards = image_episode(seed, 16, 50)
            np.testing.assert_array_equal(reader[seed].observations, frames)
            np.testing.assert_array_equal(reader[seed].actions, actions)
            np.testing.assert_array_equal(reader[seed].rewards, rewards)


def test_cartpole_reads_back_exactly(tmp_path, process_mode):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=2_000)
    episodes, obs = [], [env.reset(seed=0)[0]]
    acts = []
    for t in range(600):
        o, _, term, trunc, _ = env.step(t % 2)
        obs.append(o)
        acts.append(t % 2)
        if term or trunc:
            episodes.append((np.stack(obs), np.array(acts)))
            obs, acts = [env.reset()[0]], []
    episodes.append((np.stack(obs), np.array(acts)))
    env.close()
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader) == len(episodes)
        for entry, (o, a) in zip(reader, episodes):
            np.testing.assert_array_equal(entry.observations, o)
            np.testing.assert_array_equal(entry.actions, a)


def test_a_write_error_in_the_writer_process_is_raised_and_the_batch_kept(
        tmp_path, process_mode, monkeypatch):
    monkeypatch.setenv(FAIL_ENV, "2,3")  # the child's .bin writes 2, 3 and 4 fail (ENOSPC)
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=200), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    frames = [env.reset(seed=0)[0].copy()]
    errors = step_collecting_errors(env, frames, 120)
    assert errors and "No space left on device" in str(errors[0])
    assert errors[0].errno == 28
    for _ in range(2):  # the fault holds for two more writes: flush() fails, keeping the batches
        with pytest.raises(WriteError, match="No space left"):
            env.flush()
    env.flush()
    env.close()
    assert temp_files(tmp_path) == [] and verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        np.testing.assert_array_equal(reader[0].observations, np.stack(frames))


def test_a_slow_writer_process_bounds_the_column_sets_outstanding(
        tmp_path, process_mode, monkeypatch):
    monkeypatch.setenv(SLOW_ENV, "0.02")
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=400), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    writer = env._session.writer
    frames = [env.reset(seed=0)[0].copy()]
    most = 0
    for t in range(120):
        frames.append(env.step(t % 4)[0].copy())
        most = max(most, len(writer._pending))
    assert most == writer_module.MAX_PENDING_BATCHES + 1  # (submit waited beyond it)
    env.close()
    with RecordingReader(tmp_path, verify=True) as reader:
        np.testing.assert_array_equal(reader[0].observations, np.stack(frames))


def test_a_dead_writer_process_is_named(tmp_path, process_mode):
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=500), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    env.reset(seed=0)
    env.step(0)
    env.flush()
    writer = env._session.writer
    os.kill(writer._proc.pid, signal.SIGKILL)
    with pytest.raises(WriteError, match=f"writer process \\(pid {writer._proc.pid}\\)"):
        for t in range(400):
            env.step(t % 4)
        env.flush()
    with pytest.raises(WriteError):
        env.close()


def test_ctrl_c_in_the_terminal_does_not_stop_the_writer_process(tmp_path, process_mode):
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=50), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    env.reset(seed=0)
    os.kill(env._session.writer._proc.pid, signal.SIGINT)  # (as the terminal sends it)
    for t in range(50):
        env.step(t % 4)
    env.close()
    with RecordingReader(tmp_path, verify=True) as reader:
        np.testing.assert_array_equal(reader[0].observations, image_episode(0, 8, 50)[0])


CHILD = textwrap.dedent("""
    import sys
    from gym_recorder import RecordingWrapper
    from gym_recorder.record import writer as writer_module
    from sample_envs.envs import ImageEnv

    writer_module.WRITE_MODE = "process"
    env = RecordingWrapper(ImageEnv(height=16, width=16, episode_length=40), sys.argv[1],
                           target_batch_bytes=5_000, flush_interval=0.05)
    print(env._session.writer._proc.pid, flush=True)
    for ep in range(10**9):
        env.reset(seed=ep)
        for t in range(40):
            env.step(t % 4)
        print(ep, flush=True)
""")


@pytest.mark.stress
def test_kill_9_of_the_recording_process_keeps_every_committed_batch(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, text=True)
    writer_pid = int(child.stdout.readline())
    while int(child.stdout.readline()) < 15:
        pass
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    deadline = time.monotonic() + 10
    while _alive(writer_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(writer_pid)  # the writer process saw EOF, wrote what it had and left
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader) >= 15
        for entry in reader:
            frames, _, _ = image_episode(entry.seed, 16, 40)
            np.testing.assert_array_equal(entry.observations, frames[:len(entry.observations)])


def test_a_forked_child_does_not_talk_to_the_parents_writer(tmp_path, process_mode):
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=20), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    env.reset(seed=0)
    for t in range(20):
        env.step(t % 4)
    pid = os.fork()
    if pid == 0:  # the child records on its own (a new writer process, a new prefix)
        code = 1
        try:
            env.reset(seed=1)
            for t in range(20):
                env.step(t % 4)
            env.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    env.reset(seed=2)
    for t in range(20):
        env.step(t % 4)
    env.close()
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        assert sorted(e.seed for e in reader) == [0, 1, 2]
        for entry in reader:  # (the child's columns are its own: the parent's are intact)
            np.testing.assert_array_equal(entry.observations, image_episode(entry.seed, 8, 20)[0])


def _record_vector(directory: Path) -> None:
    from gym_recorder import RecordingVectorWrapper

    env = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=2,
                                              vectorization_mode="sync"),
                                 directory, target_batch_bytes=2_000)
    env.reset(seed=0)
    for t in range(300):
        env.step(np.array([t % 2, (t // 3) % 2]))
    env.close()


def test_a_vector_env_records_the_same_as_in_thread_mode(tmp_path, monkeypatch):
    _record_vector(tmp_path / "thread")
    monkeypatch.setattr(writer_module, "WRITE_MODE", "process")
    _record_vector(tmp_path / "process")
    assert verify(tmp_path / "process") == []
    assert len(list((tmp_path / "process").glob("*.bin"))) > 3
    with RecordingReader(tmp_path / "thread") as a, \
            RecordingReader(tmp_path / "process", verify=True) as b:
        assert len(a) == len(b) > 2
        for x, y in zip(a, b):
            assert (x.seed, x.sub_env) == (y.seed, y.sub_env)
            np.testing.assert_array_equal(x.observations, y.observations)
            np.testing.assert_array_equal(x.actions, y.actions)
            np.testing.assert_array_equal(x.rewards, y.rewards)


def test_the_docs_example_runs(tmp_path, monkeypatch):
    from docpages import python_block

    block = python_block('writer.WRITE_MODE = "process"')  # docs/recorder-policies.md
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(writer_module, "WRITE_MODE", writer_module.WRITE_MODE)  # (restored)
    exec(compile(block, "docs/recorder-policies.md", "exec"), {})
    assert writer_module.WRITE_MODE == writer_module.DEFAULT_WRITE_MODE
    with RecordingReader(tmp_path / "process-demo", verify=True) as reader:
        assert sum(len(episode) for episode in reader) == 100
