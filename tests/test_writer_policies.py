"""The writer's page-cache policies and write modes (record/writer WRITEBACK, WRITE_MODE): every
combination records the same bytes, and a write error in "inline" mode follows the same policy
(deferred to the next call, nothing lost)."""

from __future__ import annotations

import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.integrity import verify
from gym_recorder.record import writer as writer_module
from sample_envs.envs import ImageEnv
from test_write_errors import Faults, enospc, step_collecting_errors, temp_files


@pytest.fixture
def policy(monkeypatch):
    def use(writeback: str, mode: str) -> None:
        monkeypatch.setattr(writer_module, "WRITEBACK", writeback)
        monkeypatch.setattr(writer_module, "WRITE_MODE", mode)
    return use


def _play(env, steps, seed=0):
    frames = [env.reset(seed=seed)[0].copy()]
    for t in range(steps):
        frames.append(env.step(t % 4)[0].copy())
    return np.stack(frames)


@pytest.mark.parametrize("mode", writer_module.WRITE_MODES)
@pytest.mark.parametrize("writeback", writer_module.WRITEBACK_POLICIES)
def test_every_policy_records_the_same_frames(tmp_path, policy, writeback, mode):
    policy(writeback, mode)
    with RecordingWrapper(ImageEnv(height=16, width=16, episode_length=200), tmp_path,
                          target_batch_bytes=8_000) as env:
        frames = _play(env, 120)
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader.batches()) > 5
        np.testing.assert_array_equal(reader[0].observations, frames)


def test_unknown_writeback_policy_is_named(tmp_path, policy):
    policy("fastest", "thread")
    with pytest.raises(ValueError, match="writeback policy"):
        RecordingWrapper(ImageEnv(height=8, width=8), tmp_path)


def test_inline_write_error_is_deferred_to_the_next_call(tmp_path, monkeypatch, policy):
    policy("keep", "inline")
    faults = Faults(monkeypatch)
    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=100), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    frames = [env.reset(seed=0)[0].copy()]
    faults.bin_error = enospc()
    errors = step_collecting_errors(env, frames, 40)
    assert errors and "No space left on device" in str(errors[0])
    faults.clear()
    env.close()
    assert temp_files(tmp_path) == [] and verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        np.testing.assert_array_equal(reader[0].observations, np.stack(frames))


def test_auto_mode_switches_between_thread_and_inline_and_keeps_the_order(
        tmp_path, policy, monkeypatch):
    """The "auto" write mode writes inline while the stepping thread would wait for the thread
    (here: always, by the threshold), and tries the thread again; the batches stay in order."""
    from gym_recorder.record.writeback import AutoMode

    policy("lazy-drop", "auto")
    monkeypatch.setattr(AutoMode, "BLOCKED_PER_BATCH", -1.0)  # any wait counts: go inline
    monkeypatch.setattr(AutoMode, "PROBE_BATCHES", 2)
    monkeypatch.setattr(AutoMode, "INLINE_BATCHES", 3)
    modes = []
    took = AutoMode.took

    def noted(self, seconds):
        modes.append(self.inline)
        took(self, seconds)

    monkeypatch.setattr(AutoMode, "took", noted)
    with RecordingWrapper(ImageEnv(height=16, width=16, episode_length=300), tmp_path,
                          target_batch_bytes=8_000) as env:
        frames = _play(env, 250)
    assert True in modes and modes.index(True) == 2  # two thread batches, then inline
    assert False in modes[2:]  # and the thread again
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader.batches()) > 10
        # (one episode over every batch: its parts join only in the order they were written)
        np.testing.assert_array_equal(reader[0].observations, frames)
