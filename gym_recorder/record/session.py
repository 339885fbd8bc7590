"""The recording session behind both wrappers: a buffer, a batch writer, and when to commit.

:class:`RecordingWrapper` and :class:`RecordingVectorWrapper` differ only in how they feed the
buffer; committing batches, ``flush()``, ``close()`` and writing at interpreter exit are here.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import RecordingClosedError, WriteError
from ..format.codecs import resolve_compression
from ..format.spaces import Layout
from ..format.values import check_metadata
from . import writer as writer_module
from .columns import empty_array
from .writer import BatchWriter

__all__ = ["RecordingSession", "check_options"]

# While steps are recorded, a wrapper looks at the clock about this many times per flush interval
# (every step for a slow env; every few thousand steps for a fast one, where a clock read per step
# would be a measurable share of the recorder's cost).
CLOCK_CHECKS_PER_INTERVAL = 100
MAX_CLOCK_SPACING = 4096  # steps between two looks at the clock, at most


def check_options(directory: Any, target_batch_bytes: Any, flush_interval: Any) -> None:
    """Checks the constructor arguments both wrappers share, before any I/O.

    Raises:
        TypeError: if ``directory`` is not a path.
        ValueError: if ``target_batch_bytes`` or ``flush_interval`` is not positive.
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a path, got {type(directory).__name__}")
    if type(target_batch_bytes) is not int or target_batch_bytes <= 0:
        raise ValueError(f"target_batch_bytes must be a positive int, got {target_batch_bytes!r}")
    if flush_interval is not None and not (
            isinstance(flush_interval, (int, float)) and flush_interval > 0):
        raise ValueError(f"flush_interval must be a positive number or None, got {flush_interval!r}")


def check_settings(directory: Any, target_batch_bytes: Any, flush_interval: Any,
                   compression: Any, metadata: Any) -> tuple[Any, dict[str, Any] | None]:
    """Checks every recorder's constructor arguments, before any I/O (:func:`check_options`,
    then the codec and the metadata); returns the resolved codec (None: raw) and the metadata.

    Raises:
        TypeError, ValueError: for an argument that is not as documented (named in the message).
        CodecUnavailableError: for compression whose binding is not installed.
    """
    check_options(directory, target_batch_bytes, flush_interval)
    return (resolve_compression(compression),
            check_metadata(metadata) if metadata is not None else None)


def _finish(buffer: Any, writer: BatchWriter, end_all: Callable[[str], None]) -> None:
    """Writes what is buffered and closes the writer (at exit, or when the wrapper is collected)."""
    end_all("close")
    batch = buffer.take()
    if batch is not None:
        writer.submit(batch)
    writer.close()


class RecordingSession:
    """Owns a wrapper's buffer and batch writer; decides when buffered steps are committed.

    After ``os.fork()`` the child's sessions drop what the parent buffered (the parent writes
    it) and no longer wait for the parent's writer thread at exit; a child that records again
    gets a writer of its own, with a new prefix, at its first commit (see :meth:`renew`).

    Args:
        owner: the wrapper; when it is garbage-collected unclosed, or at interpreter exit,
            whatever is buffered is still written. After a fork (or for a copy) its
            ``_renewed()`` method, if it has one, is called.
        buffer: the step buffer (``take()``, ``observe_batch_bytes()``).
        end_all: ends every open episode with the given reason (the buffer's own method).
        directory: the recording directory, as the user gave it.
        header: the manifest fields describing the env.
        obs_layout: layout of the observation space.
        act_layout: layout of the action space.
        file_prefix: the writer's prefix, or None for a unique one.
        flush_interval: seconds between commits at the latest, or None.
        fsync: make every batch durable before committing it.
        lazy: make the writer at the first commit, not now (for copies).
        compression: the writer's codec (:func:`gym_recorder.format.codecs.resolve_compression`).

    Attributes:
        buffer: the step buffer.
        writer: the batch writer (None until the first commit of a lazy session).
        deadline: ``time.monotonic()`` value at which buffered steps are due for a commit.
        closed: True once :meth:`close` was called.
    """

    def __init__(self, owner: Any, buffer: Any, end_all: Callable[[str], None],
                 directory: str | os.PathLike[str], header: dict[str, Any], obs_layout: Layout,
                 act_layout: Layout, *, file_prefix: str | None, flush_interval: float | None,
                 fsync: bool, lazy: bool = False, compression: Any = None) -> None:
        self.buffer = buffer
        self._end_all = end_all
        self._owner = weakref.ref(owner)
        # Resolved now, so that a later chdir of the process cannot split the recording.
        self._compression = compression  # a format.codecs.Codec or None
        self._writer_args = (os.path.abspath(os.fspath(directory)), header, obs_layout,
                             act_layout, fsync)
        self.writer: BatchWriter | None = None
        self._finalizer: Any = None
        self._interval = math.inf if flush_interval is None else float(flush_interval)
        if not lazy:
            self._new_writer(file_prefix)
        self.deadline = time.monotonic() + self._interval
        self._last_look = self.deadline - self._interval
        self._spacing = 1
        self.closed = False
        _LIVE.add(self)

    def _new_writer(self, prefix: str | None) -> Any:
        directory, header, obs_layout, act_layout, fsync = self._writer_args
        # Batches committed here are listed on disk within half the flush interval.
        kind: Any = BatchWriter
        if writer_module.WRITE_MODE == "process":
            from .writeprocess import ProcessWriter

            kind = ProcessWriter
        writer: Any = kind(directory, prefix, header, obs_layout, act_layout, fsync=fsync,
                      on_batch_written=self.buffer.observe_batch_bytes,
                      max_commit_interval=self._interval / 2, compression=self._compression)
        use_allocator = getattr(self.buffer, "use_allocator", None)
        if use_allocator is not None:  # (shared-memory columns for the writer process)
            use_allocator(writer.alloc_array if kind is not BatchWriter else empty_array)
        self.writer = writer
        key = (directory, repr(header.get("env_id")))
        if key not in _CHECKED_ENVS:  # (once per directory and env in a process)
            from ..read.envgroups import warn_if_other_envs
            from ..format import manifest_name

            _CHECKED_ENVS.add(key)
            warn_if_other_envs(directory, header.get("env_id"), manifest_name(writer.prefix))
        owner = self._owner()
        if owner is not None:
            self._finalizer = weakref.finalize(owner, _finish, self.buffer, writer,
                                               self._end_all)
        return writer

    @property
    def prefix(self) -> str:
        """The writer's prefix (a lazy session makes its writer now)."""
        return (self.writer or self._new_writer(None)).prefix

    def renew(self) -> None:
        """Forgets the writer and what is buffered; a new writer (new prefix) is made at the
        next commit. Used in a forked child, whose parent owns both."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self.writer = None
        discard = getattr(self.buffer, "discard", None)
        owner = self._owner()
        renewed = getattr(owner, "_renewed", None)
        if discard is None or renewed is None:
            self.closed = True  # (a wrapper that cannot start over: it is closed in the child)
            return
        discard()
        renewed()

    def due(self) -> bool:
        """True when the flush interval has passed since the last commit."""
        return time.monotonic() >= self.deadline

    def clock_spacing(self) -> int:
        """Steps to record before the clock is looked at again: doubled while looks come less
        than half the aimed gap apart (the flush interval / CLOCK_CHECKS_PER_INTERVAL), cut in
        proportion when they come further apart, so a slow env's steps are each checked."""
        now = time.monotonic()
        gap, self._last_look = now - self._last_look, now
        aim = self._interval / CLOCK_CHECKS_PER_INTERVAL
        spacing = self._spacing
        if gap * 2 < aim:
            spacing = min(spacing * 2, MAX_CLOCK_SPACING)
        elif gap > aim:
            spacing = max(1, int(spacing * aim / gap))
        self._spacing = spacing
        return spacing

    def commit(self) -> None:
        """Hands everything buffered to the writer as a batch.

        Raises:
            WriteError: if an earlier batch could not be written (this one is kept too).
        """
        self.deadline = time.monotonic() + self._interval
        batch = self.buffer.take()
        if batch is not None:
            (self.writer or self._new_writer(None)).submit(batch)

    def _commit_keeping(self) -> None:
        try:
            self.commit()
        except WriteError:
            pass  # the batch is kept; the writer's flush()/close() retries and reports

    def flush(self, what: str) -> None:
        """Commits everything buffered now and waits until it is on disk.

        Raises:
            RecordingClosedError: after :meth:`close`.
            WriteError: if a batch cannot be written; it is kept for the next flush or close.
        """
        if self.closed:
            raise RecordingClosedError(f"flush() on a closed {what}")
        self._commit_keeping()
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Ends open episodes (``end == "close"``) and writes everything; calling it again
        retries what could not be written.

        Raises:
            WriteError: if something could not be written.
        """
        if not self.closed:
            self.closed = True
            if self._finalizer is not None:
                self._finalizer.detach()
            self._end_all("close")
            self._commit_keeping()
        if self.writer is not None:
            self.writer.close()


# (directory, env id) pairs this process has checked for recordings of other envs.
_CHECKED_ENVS: set[tuple[str, str]] = set()

# Every session not yet collected, for the fork handler.
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """In a forked child: the parent's writer threads do not exist here, and what the parent
    buffered is the parent's to write. Every session starts over (see RecordingSession.renew)."""
    from . import prefix as prefix_module

    prefix_module._counter_lock = threading.Lock()  # (it may have been held by another thread)
    for session in list(_LIVE):
        session.renew()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
