"""Errors while writing (full disk, permissions): named error, nothing committed is harmed,
nothing buffered is dropped, no temporary files left behind."""

from __future__ import annotations

import errno
import json
import os
import re

import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.record import writeback as writeback_module
from gym_recorder.record import batchfiles as batchfiles_module
from gym_recorder.errors import WriteError
from gym_recorder.integrity import verify
from sample_envs.envs import ImageEnv

LENGTH = 30
SIZE = 8  # 192-byte frames; with a 2 kB target a batch is written every ~10 steps
TEMP_RE = re.compile(r"tmp[a-z0-9_]{8}")


class Faults:
    """Switchable faults in the writer's file writes, installed with monkeypatch."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin_error: OSError | None = None  # raised by writes into a .bin's temporary file
        self.commit_error: OSError | None = None  # raised instead of renaming a .json into place
        self.manifest_error: OSError | None = None
        self.raised = 0
        write_buffers = writeback_module.write_buffers
        rename = writeback_module.rename_into_place
        write_manifest = batchfiles_module.BatchFiles.write_manifest
        faults = self

        def faulty_write_buffers(fd, buffers, path):
            if faults.bin_error is not None and path.endswith(".bin"):
                os.write(fd, bytes(memoryview(buffers[0]).cast("B")[:16]))  # a partial write,
                faults.raised += 1  # then the disk is full
                raise faults.bin_error
            return write_buffers(fd, buffers, path)

        def faulty_rename(temp, path):
            if faults.commit_error is not None and path.endswith(".json"):
                faults.raised += 1
                raise faults.commit_error
            return rename(temp, path)

        def faulty_manifest(files):
            if faults.manifest_error is not None and files.manifest["batches"]:
                faults.raised += 1
                raise faults.manifest_error
            return write_manifest(files)

        monkeypatch.setattr(writeback_module, "write_buffers", faulty_write_buffers)
        monkeypatch.setattr(writeback_module, "rename_into_place", faulty_rename)
        monkeypatch.setattr(batchfiles_module.BatchFiles, "write_manifest", faulty_manifest)

    def clear(self) -> None:
        self.bin_error = self.commit_error = self.manifest_error = None


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def expected_episode(seed):
    env = ImageEnv(height=SIZE, width=SIZE, episode_length=LENGTH)
    obs, _ = env.reset(seed=seed)
    frames, rewards = [obs], []
    for t in range(LENGTH):
        obs, reward, _, _, _ = env.step(t % 4)
        frames.append(obs)
        rewards.append(reward)
    return np.stack(frames), np.array(rewards)


def new_env(directory):
    return RecordingWrapper(ImageEnv(height=SIZE, width=SIZE, episode_length=LENGTH), directory,
                            target_batch_bytes=2_000, flush_interval=None)


def play(env, seeds, errors):
    """Plays whole episodes; WriteErrors from reset/step are collected, the call is repeated.

    A reset() or step() that raises a WriteError did nothing (the env was not touched, nothing
    was recorded): the call that met the error returned its result, recorded.
    """
    for seed in seeds:
        while True:
            try:
                env.reset(seed=seed)
                break
            except WriteError as e:
                errors.append(e)
        for t in range(LENGTH):
            while True:
                try:
                    env.step(t % 4)
                    break
                except WriteError as e:
                    errors.append(e)


def assert_everything(directory, seeds):
    assert verify(directory) == []
    with RecordingReader(directory, verify=True) as reader:
        assert [ep.seed for ep in reader] == list(seeds)
        for ep in reader:
            frames, rewards = expected_episode(ep.seed)
            np.testing.assert_array_equal(ep.observations, frames)
            np.testing.assert_array_equal(ep.actions, [t % 4 for t in range(LENGTH)])
            np.testing.assert_array_equal(ep.rewards, rewards)
            assert ep.end == "truncated"


def committed(directory):
    with RecordingReader(directory, verify=True) as reader:
        return [(ep.seed, len(ep), ep.observations.copy()) for ep in reader]


def temp_files(directory):
    return [n for n in os.listdir(directory) if TEMP_RE.fullmatch(n)]


def step_collecting_errors(env, frames: list, n: int) -> list[WriteError]:
    """Steps ``env`` (actions 0, 1, 2, 3, ...) until ``frames`` holds ``n`` observations; returns
    the WriteErrors raised on the way (each before the env is touched: that step is not taken)."""
    errors: list[WriteError] = []
    t = 0
    while len(frames) < n:
        try:
            frames.append(env.step(t % 4)[0].copy())
            t += 1
        except WriteError as e:
            errors.append(e)
    return errors


def test_full_disk_in_bin_write_raises_from_step_and_keeps_everything(tmp_path, monkeypatch):
    faults = Faults(monkeypatch)
    env = new_env(tmp_path)
    errors: list[WriteError] = []
    play(env, [0, 1], errors)
    env.flush()
    before = committed(tmp_path)
    assert [(seed, n) for seed, n, _ in before] == [(0, LENGTH), (1, LENGTH)]
    faults.bin_error = enospc()
    play(env, [2, 3], errors)
    assert errors, "a full disk must not pass silently"
    message = str(errors[0])
    assert isinstance(errors[0], OSError)
    assert str(tmp_path) in message and ".bin" in message
    assert "No space left on device" in message
    assert "kept in memory" in message and "retried" in message
    assert isinstance(errors[0].__cause__, OSError) and errors[0].__cause__.errno == errno.ENOSPC
    # Committed batches are untouched, and the half-written .bin left no temporary file.
    after = committed(tmp_path)
    assert [(s, n) for s, n, _ in after[:2]] == [(s, n) for s, n, _ in before]
    for (_, _, a), (_, _, b) in zip(after, before):
        np.testing.assert_array_equal(a, b)
    assert temp_files(tmp_path) == []
    assert verify(tmp_path) == []
    with pytest.raises(WriteError, match="No space left on device"):
        env.flush()  # still failing: still kept
    assert temp_files(tmp_path) == []
    faults.clear()
    env.flush()  # the disk has room again: everything buffered is written
    play(env, [4], errors)
    env.close()
    assert temp_files(tmp_path) == []
    assert_everything(tmp_path, [0, 1, 2, 3, 4])
    manifest = next(n for n in os.listdir(tmp_path) if n.endswith(".manifest.json"))
    assert json.loads((tmp_path / manifest).read_bytes())["complete"] is True


def test_permission_error_on_rename_raises_from_flush(tmp_path, monkeypatch):
    faults = Faults(monkeypatch)
    env = new_env(tmp_path)
    errors: list[WriteError] = []
    play(env, [0], errors)
    env.flush()
    faults.commit_error = PermissionError(errno.EACCES, "Permission denied")
    env.reset(seed=1)
    for t in range(5):  # fewer steps than a batch: nothing is written before flush()
        env.step(t % 4)
    with pytest.raises(WriteError, match=r"\.json.*Permission denied") as info:
        env.flush()
    assert str(tmp_path) in str(info.value)
    assert isinstance(info.value.__cause__, PermissionError)
    assert temp_files(tmp_path) == []  # atomicwrites removed the temp file of the failed rename
    assert [(s, n) for s, n, _ in committed(tmp_path)] == [(0, LENGTH)]
    faults.clear()
    env.flush()  # batches kept after an error are retried by flush() (and close())
    for t in range(5, LENGTH):
        env.step(t % 4)
    env.close()
    assert temp_files(tmp_path) == []
    assert_everything(tmp_path, [0, 1])


def test_error_from_close_then_close_again(tmp_path, monkeypatch):
    faults = Faults(monkeypatch)
    env = new_env(tmp_path)
    errors: list[WriteError] = []
    play(env, [0], errors)
    env.reset(seed=1)
    for t in range(LENGTH):
        env.step(t % 4)
    faults.bin_error = enospc()
    with pytest.raises(WriteError, match="No space left on device"):
        env.close()
    assert temp_files(tmp_path) == []
    assert verify(tmp_path) == []
    faults.clear()
    env.close()  # retries what was kept
    assert errors == []
    assert_everything(tmp_path, [0, 1])


def test_manifest_write_failure_commits_nothing_then_retries(tmp_path, monkeypatch):
    faults = Faults(monkeypatch)
    env = new_env(tmp_path)
    errors: list[WriteError] = []
    play(env, [0], errors)
    env.flush()
    faults.manifest_error = enospc()
    play(env, [1], errors)
    with pytest.raises(WriteError, match=r"manifest\.json.*No space left on device"):
        env.flush()
    # The batch files were written but never committed: the reader does not see them.
    assert [(s, n) for s, n, _ in committed(tmp_path)] == [(0, LENGTH)]
    assert verify(tmp_path) == []
    faults.clear()
    play(env, [2], errors)
    env.close()
    assert faults.raised >= 1
    assert_everything(tmp_path, [0, 1, 2])


def test_write_error_carries_errno_and_agrees_with_what_the_caller_saw(tmp_path, monkeypatch):
    """Issue 10.11: e.errno == ENOSPC; every returned step is recorded, no other step is."""
    faults = Faults(monkeypatch)
    env = new_env(tmp_path)
    faults.bin_error = enospc()
    errors = []
    seeds = []
    for seed in range(10, 20):
        seeds.append(seed)
        play(env, [seed], errors)  # a call that raised is repeated: it had done nothing
        if len(errors) >= 2:
            break
    assert errors and all(e.errno == errno.ENOSPC for e in errors)
    faults.clear()
    env.close()
    # Every episode was stepped exactly LENGTH times by the caller, and is recorded so.
    assert_everything(tmp_path, seeds)
