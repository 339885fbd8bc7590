"""The recording wrapper: the only place that knows Gymnasium's reset/step protocol."""

from __future__ import annotations

import json
import math
import os
import time
import weakref
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym

from .buffer import StepBuffer
from .errors import RecordingClosedError, RecorderError, WriteError
from .spaces import Layout, describe_space
from .writer import BatchWriter

__all__ = ["RecordingWrapper", "DEFAULT_TARGET_BATCH_BYTES", "DEFAULT_FLUSH_INTERVAL"]

_monotonic = time.monotonic

# About 5 MB per batch file: big enough that per-file costs vanish, small enough to buffer and to
# parse when a reader fetches one episode.
DEFAULT_TARGET_BATCH_BYTES = 5_000_000
# Buffered steps are committed at least this often (seconds), so a slow env loses at most this
# much on a crash.
DEFAULT_FLUSH_INTERVAL = 10.0


class ResetNeeded(RecorderError, RuntimeError):
    """``step()`` was called on a recording wrapper before any ``reset()``."""


def env_header(env: gym.Env | gym.vector.VectorEnv, observation_space: gym.Space,
               action_space: gym.Space) -> dict:
    """The manifest fields that describe the environment: id, spec, spaces."""
    spec = getattr(env, "spec", None)
    env_spec = None
    if spec is not None:
        env_spec = {"id": spec.id, "max_episode_steps": spec.max_episode_steps, "kwargs": None}
        try:
            json.dumps(spec.kwargs, allow_nan=False)
            env_spec["kwargs"] = dict(spec.kwargs)
        except (TypeError, ValueError):
            pass  # kwargs that JSON cannot hold are left out; the id is still recorded
    return {"env_id": spec.id if spec is not None else None, "env_spec": env_spec,
            "observation_space": describe_space(observation_space),
            "action_space": describe_space(action_space), "vector": None}


def _check_options(directory: Any, target_batch_bytes: Any, flush_interval: Any) -> None:
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a path, got {type(directory).__name__}")
    if type(target_batch_bytes) is not int or target_batch_bytes <= 0:
        raise ValueError(f"target_batch_bytes must be a positive int, got {target_batch_bytes!r}")
    if flush_interval is not None and not (
            isinstance(flush_interval, (int, float)) and flush_interval > 0):
        raise ValueError(f"flush_interval must be a positive number or None, got {flush_interval!r}")


def _finish(buffer: StepBuffer, writer: BatchWriter) -> None:
    """Writes what is buffered and closes the writer (at exit, or when the wrapper is collected)."""
    buffer.end_episode("close")
    batch = buffer.take()
    if batch is not None:
        writer.submit(batch)
    writer.close()


class RecordingWrapper(gym.Wrapper):
    """Records every reset and step of an environment into a directory, in batches.

    ``reset`` and ``step`` return exactly what the inner environment returns. Observations,
    actions and infos are copied when recorded, so environments may reuse their buffers. Batches
    are written by a background thread; ``flush()`` and ``close()`` wait for them.

    Example:
        >>> import gymnasium as gym
        >>> from gym_recorder import RecordingWrapper, RecordingReader
        >>> with RecordingWrapper(gym.make("CartPole-v1"), tmp_dir) as env:
        ...     obs, info = env.reset(seed=0)
        ...     obs, reward, terminated, truncated, info = env.step(0)
        >>> with RecordingReader(tmp_dir) as reader:
        ...     reader[0].actions
        array([0])

    Args:
        env: the environment to record.
        directory: the recording directory (created if missing); relative paths work.
        file_prefix: this writer's file prefix; None (the default) picks a unique one, so that
            many writers can share a directory.
        target_batch_bytes: aim for batch files of about this many bytes; this also bounds the
            memory the recorder holds.
        record_infos: record the reset and step info dicts.
        info_filter: called with each non-empty info dict, returns the dict to record (e.g. to
            leave out values the format cannot store).
        flush_interval: commit buffered steps at least every this many seconds (checked at each
            step and reset); None for no time bound.
        fsync: make every batch durable (fsync) before committing it, so it survives a power
            loss; otherwise data is fsynced at ``flush()`` and ``close()``.

    Raises:
        FileExistsError: if ``file_prefix`` is already used in the directory.
    """

    def __init__(self, env: gym.Env, directory: str | os.PathLike, *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 info_filter: Callable[[dict], dict] | None = None,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
                 fsync: bool = False) -> None:
        _check_options(directory, target_batch_bytes, flush_interval)
        super().__init__(env)
        header = env_header(env, env.observation_space, env.action_space)
        obs_layout = Layout(header["observation_space"])
        act_layout = Layout(header["action_space"])
        self._buffer = StepBuffer(obs_layout, act_layout, target_batch_bytes,
                                  record_infos=record_infos, info_filter=info_filter)
        self._directory = os.fspath(directory)
        # Resolved now, so that a later chdir of the process cannot split the recording.
        self._writer = BatchWriter(os.path.abspath(self._directory), file_prefix, header,
                                   obs_layout, act_layout, fsync=fsync,
                                   on_batch_written=self._buffer.observe_batch_bytes)
        self._flush_interval = math.inf if flush_interval is None else float(flush_interval)
        self._deadline = time.monotonic() + self._flush_interval
        self._reset_done = False
        self._closed = False
        self._env_closed = False
        self._finalizer = weakref.finalize(self, _finish, self._buffer, self._writer)

    @property
    def directory(self) -> str:
        """The recording directory, as given."""
        return self._directory

    @property
    def file_prefix(self) -> str:
        """This writer's file prefix."""
        return self._writer.prefix

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the environment and starts a new recorded episode.

        An episode still open ends with ``end == "reset"`` (an early reset).
        """
        if self._closed:
            raise RecordingClosedError("reset() on a closed RecordingWrapper")
        obs, info = self.env.reset(seed=seed, options=options)
        buffer = self._buffer
        buffer.end_episode("reset")
        error = None
        if buffer.full or time.monotonic() >= self._deadline:
            try:
                self._commit()
            except WriteError as e:
                error = e  # the batch is kept; record the new episode before raising
        buffer.start_episode(obs, info, None if seed is None else int(seed), options)
        self._reset_done = True
        if error is not None:
            raise error
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the environment and records the transition."""
        if not self._reset_done:
            if self._closed:
                raise RecordingClosedError("step() on a closed RecordingWrapper")
            raise ResetNeeded("call reset() before step() on a RecordingWrapper")
        result = self.env.step(action)
        if self._buffer.add_step(action, *result) or _monotonic() >= self._deadline:
            self._commit()
        return result

    def _commit(self) -> None:
        self._deadline = time.monotonic() + self._flush_interval
        batch = self._buffer.take()
        if batch is not None:
            self._writer.submit(batch)

    def flush(self) -> None:
        """Commits every buffered step now (an open episode continues) and waits for the disk.

        Raises:
            WriteError: if a batch cannot be written; it is kept for the next flush or close.
        """
        if self._closed:
            raise RecordingClosedError("flush() on a closed RecordingWrapper")
        try:
            self._commit()
        except WriteError:
            pass  # the batch is kept; the writer's flush() below retries and reports
        self._writer.flush()

    def close(self) -> None:
        """Ends the open episode (``end == "close"``), writes everything, closes the env.

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        if not self._closed:
            self._closed = True
            self._reset_done = False
            self._finalizer.detach()
            self._buffer.end_episode("close")
            batch = self._buffer.take()
            if batch is not None:
                try:
                    self._writer.submit(batch)
                except WriteError:
                    pass  # the batch is kept; the writer's close() below retries and reports
        self._writer.close()
        if self._env_closed:
            return
        self._env_closed = True
        super().close()

    def __enter__(self) -> RecordingWrapper:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
