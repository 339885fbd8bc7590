"""The writer's file I/O, and its choices about the page cache and the thread (measured by
benchmarks/bench_ale.py).

``WRITEBACK`` (what a .bin leaves in the page cache) and ``WRITE_MODE`` (which thread writes) are
read when a :class:`~gym_recorder.record.writer.BatchWriter` starts; see docs/recorder-policies.md.

:func:`put_file` writes a batch's files with as few system calls as it can (one ``writev`` for
all of a file's pieces, no buffered file object, no random name from the kernel per file): each
system call releases the GIL, and a writer thread waits to get it back while the stepping thread
runs (up to the interpreter's switch interval when the env steps in C holding the GIL, as ALE
does), so the number of calls, not their cost, bounds how fast the thread writes beside an env.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["WRITEBACK_POLICIES", "DEFAULT_WRITEBACK", "WRITE_MODES", "DEFAULT_WRITE_MODE",
           "Writeback", "TempNames", "Gathered", "put_file", "write_buffers", "AutoMode"]

# What the writer does with the page cache a .bin leaves behind (see Writeback):
# "keep": nothing (written back by the kernel when it likes, fsynced at flush and close);
# "sync-drop": fdatasync the .bin, then drop its pages (POSIX_FADV_DONTNEED), in the writer thread;
# "lazy-drop": ask for writeback as soon as the .bin is written (DONTNEED starts it without
#     waiting), and drop the previous .bin's pages (clean by then) when the next one is written.
# "lazy-drop" is the default: measured on 210x160x3 frames, the writes cost 45-49 us of CPU a step
# against 71-80 with "keep" (pages freed by DONTNEED are reused instead of new ones allocated),
# the worst batch 22-28 ms against 48-101, and on ALE the added time and its spread were the lowest
# (see docs/recorder-policies.md and benchmarks/bench_ale.py --variants).
WRITEBACK_POLICIES = ("keep", "sync-drop", "lazy-drop")
DEFAULT_WRITEBACK = "lazy-drop"
# Where batches are written: "thread" (a background thread; the stepping thread only hands the
# batch over) or "inline" (in the thread that submits it, as the seed's design did: no Python
# runs beside the env, which matters for envs that hold the GIL while they step, like ALE).
# "handoff": a background thread that, while it writes a batch, shortens the interpreter's switch
# interval (sys.setswitchinterval) so that it gets the GIL back after each system call within
# HANDOFF_SWITCH_INTERVAL instead of 5 ms, when the stepping thread holds the GIL in C (ALE).
# "auto": the thread while it keeps up; written inline while the stepping thread would only wait
# for it anyway (see AutoMode).
# "process": a child process writes (record/writeprocess): the buffers' array columns are in
# shared memory, and no Python of the writer's runs in the stepping process (envs that hold the
# GIL, like ALE).
WRITE_MODES = ("thread", "inline", "handoff", "auto", "process")
DEFAULT_WRITE_MODE = "thread"
HANDOFF_SWITCH_INTERVAL = 1e-4


def _drop_pages(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


class Writeback:
    """Bounds the page cache a writer leaves dirty (policy: one of WRITEBACK_POLICIES).

    :meth:`written` is called with a .bin's descriptor once its bytes are written, and
    :meth:`done` once it is renamed into place: the policy closes the descriptor then, or keeps
    it (lazy-drop: until the next .bin's, to drop its pages without opening it again).
    """

    def __init__(self, policy: str) -> None:
        if policy not in WRITEBACK_POLICIES:
            raise ValueError(f"writeback policy must be one of {WRITEBACK_POLICIES}, got {policy!r}")
        self.policy = policy
        self._previous: int | None = None

    def written(self, fd: int) -> None:
        """Called with a .bin's descriptor once its bytes are written."""
        if self.policy == "keep":
            return
        if self.policy == "sync-drop":
            getattr(os, "fdatasync", os.fsync)(fd)
        _drop_pages(fd)  # (lazy-drop: starts the writeback, drops nothing dirty)

    def done(self, fd: int) -> None:
        """Called with a .bin's descriptor once the file is renamed into place."""
        if self.policy != "lazy-drop":
            os.close(fd)
            return
        previous, self._previous = self._previous, fd
        if previous is not None:
            try:
                _drop_pages(previous)  # (clean by now: its writeback started a batch ago)
            finally:
                os.close(previous)

    def close(self) -> None:
        """Closes a descriptor kept for later (lazy-drop)."""
        previous, self._previous = self._previous, None
        if previous is not None:
            os.close(previous)


# A new file, exclusively, never following a symlink, with the permissions open() gives.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(
    os, "O_NOFOLLOW", 0)
_TEMP_TRIES = 100
# Buffers per writev call (the kernel's IOV_MAX is 1024 on Linux).
_IOV = 1024


class TempNames:
    """Names for temporary files beside the files written: "tmp" and 8 hex digits, as
    :class:`~gym_recorder.format.fileio.AtomicWriter` names them (repair knows them), counted
    from one random start (a random name per file cost a system call, and a GIL wait, each)."""

    def __init__(self) -> None:
        self._next = int.from_bytes(os.urandom(4), "little")

    def __call__(self, directory: str) -> str:
        n, self._next = self._next, (self._next + 1) & 0xFFFFFFFF
        return os.path.join(directory, "tmp%08x" % n)


def write_buffers(fd: int, buffers: list[Any], path: str) -> None:
    """Writes the buffers to ``fd`` in order (``path``: the file they are for), with
    ``os.writev``, again after a short write."""
    views = [memoryview(b) for b in buffers]
    i = 0
    while i < len(views):
        chunk = views[i:i + _IOV]
        n = os.writev(fd, chunk)
        for v in chunk:
            if n >= v.nbytes:
                n -= v.nbytes
                i += 1
            else:
                views[i] = v.cast("B")[n:]
                break


# (os.replace; a name of its own, for tests that make renames fail)
rename_into_place = os.replace


def put_file(path: str, buffers: list[Any], names: TempNames, *, fsync: bool,
             writeback: Writeback | None = None) -> None:
    """Writes a new file atomically: the buffers into a temporary file in the same directory
    (fsynced when ``fsync``), renamed over ``path``; the temporary file is removed on any error.
    ``writeback`` (for a .bin) then has the descriptor (see :class:`Writeback`)."""
    directory = os.path.dirname(path)
    for _ in range(_TEMP_TRIES):
        temp = names(directory)
        try:
            fd = os.open(temp, _CREATE, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{directory}: no free temporary file name in {_TEMP_TRIES} tries")
    try:
        write_buffers(fd, buffers, path)
        if fsync:
            os.fsync(fd)
        if writeback is not None:
            writeback.written(fd)
        rename_into_place(temp, path)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if writeback is not None:
        writeback.done(fd)
    else:
        os.close(fd)


class Gathered:
    """A file-like sink that keeps what is written (for :func:`put_file`)."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []

    def write(self, data: Any) -> int:
        self.buffers.append(data)
        return len(data)


class SwitchInterval:
    """Shortens the interpreter's switch interval while at least one writer is writing a batch
    (the "handoff" write mode); the interval in force before the first is restored after the
    last."""

    _lock = threading.Lock()
    _active = 0
    _saved = 0.005

    @classmethod
    def enter(cls) -> None:
        with cls._lock:
            if cls._active == 0:
                cls._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(cls._saved, HANDOFF_SWITCH_INTERVAL))
            cls._active += 1

    @classmethod
    def leave(cls) -> None:
        with cls._lock:
            cls._active -= 1
            if cls._active == 0:
                sys.setswitchinterval(cls._saved)


class AutoMode:
    """The "auto" write mode's choice, batch by batch: hand the batch to the writer thread, or
    write it in the stepping thread.

    The thread helps when it writes while the env steps; it does not when the stepping thread
    ends up waiting for it in ``submit()`` (the disk or the page cache is the bound: writing
    5 MB takes longer than making 5 MB of cheap frames), or when it cannot run beside the env
    (an env that holds the GIL while it steps, or a machine whose cores are busy): then the
    stepping thread pays the writes anyway, plus the thread's hand-overs. So: in thread mode,
    every PROBE_BATCHES batches, the mean time ``submit()`` blocked per batch is compared with
    the mean time an inline write took (or, before any, with BLOCKED_PER_BATCH); beyond it,
    batches are written inline for INLINE_BATCHES batches, then the thread is tried again.
    """

    PROBE_BATCHES = 6
    INLINE_BATCHES = 16
    BLOCKED_PER_BATCH = 1e-3  # seconds; before an inline write was measured

    def __init__(self) -> None:
        self.inline = False
        self._count = 0
        self._seconds = 0.0
        self._inline_mean: float | None = None

    def took(self, seconds: float) -> None:
        """Called after each batch with the seconds ``submit()`` took for it (blocked in thread
        mode, writing in inline mode)."""
        self._count += 1
        self._seconds += seconds
        if self.inline:
            if self._count >= self.INLINE_BATCHES:
                self._inline_mean = self._seconds / self._count
                self._switch(False)
        elif self._count >= self.PROBE_BATCHES:
            blocked = self._seconds / self._count
            limit = self.BLOCKED_PER_BATCH if self._inline_mean is None else self._inline_mean / 2
            self._switch(blocked > limit)

    def _switch(self, inline: bool) -> None:
        self.inline = inline
        self._count = 0
        self._seconds = 0.0
