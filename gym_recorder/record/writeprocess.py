"""WRITE_MODE "process": batches are written by a child process, fed through shared memory.

For envs that hold the GIL while they step (ALE), a writer thread costs the stepping thread
every time it runs Python; a writer process does not. The step buffer allocates its array
columns in anonymous shared memory (``os.memfd_create``, each sent once to the child with
``socket.send_fds``: no file in /dev/shm, nothing left behind when a process is killed), so
:meth:`ProcessWriter.submit` sends only a small description of each batch (and pickles what is
not in shared memory: value lists, rewards, flags, infos, segments). The child
(``python -m gym_recorder.record.writeprocess``, which imports only gym_recorder and its
dependencies) runs an inline :class:`~gym_recorder.record.writer.BatchWriter`: it writes each
batch it receives, commits at the usual pacing, and tells the parent which batches are written
(their column sets are reused then). On EOF (the parent closed or was killed) it writes what it
has, commits and exits; the manifest is completed only on an explicit close.

Errors keep thread mode's policy: a batch that cannot be written stays in the child for a retry
by ``flush()``/``close()``, and the error is raised as :class:`WriteError` by the parent's next
``submit``/``flush``/``close``; a dead child is a WriteError naming it.

The child's side is :mod:`gym_recorder.record.writechild` (with a test hook to make its
writes fail).
"""

from __future__ import annotations

import os
import pickle
import select
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import RecordingClosedError, write_error
from ..format.codecs import Codec
from ..format.spaces import Layout
from . import writer as writer_module
from .batch import Batch
from .writechild import FAIL_ENV, HEAD, segment_values, send

__all__ = ["ProcessWriter", "FAIL_ENV"]

# -- the parent ---------------------------------------------------------------------------------


class ProcessWriter:
    """The session's writer in WRITE_MODE "process" (same interface as BatchWriter's
    ``prefix``, ``directory``, ``submit``, ``flush``, ``close``).

    Raises:
        WriteError: if the writer process cannot start (the reason in the message).
        FileExistsError: if the prefix already has a manifest in the directory.
    """

    def __init__(self, directory: str, prefix: str | None, header: dict[str, Any],
                 obs_layout: Layout, act_layout: Layout, *, fsync: bool = False,
                 on_batch_written: Callable[[int, int], None] | None = None,
                 max_commit_interval: float | None = None,
                 compression: Codec | None = None) -> None:
        self.directory = directory
        self._on_batch_written = on_batch_written
        # Batches sent and not yet written, beyond which submit() waits: with the one being
        # filled, MAX_PENDING_BATCHES + 2 column sets at most, as in thread mode.
        self._max_pending = writer_module.MAX_PENDING_BATCHES
        self._sock, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        try:
            # (cwd: the package's root, so that -m puts no user directory first on sys.path)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "gym_recorder.record.writeprocess",
                 str(child_end.fileno())], pass_fds=[child_end.fileno()], cwd=root, env=env,
                stdin=subprocess.DEVNULL)
        finally:
            child_end.close()
        self._pending: dict[int, Batch] = {}  # sent, not yet written
        self._seq = 0
        self._next_entry = 0
        self._inbox = bytearray()
        self._error: tuple[str, int | None] | None = None
        self._dead: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        # shared memory: data address -> (id, nbytes); memfds not yet sent; ids freed
        self._shm: dict[int, tuple[int, int]] = {}
        self._new_fds: list[tuple[int, int]] = []
        self._freed: list[int] = []
        self._next_id = 0
        self.columns_shared = 0  # array columns sent as shared memory / pickled (for tests)
        self.columns_pickled = 0
        send(self._sock, ("start", directory, prefix, header, obs_layout, act_layout, fsync,
                           max_commit_interval, compression, on_batch_written is not None))
        reply = self._wait_for("ready")
        if reply[1] == "error":
            self._shutdown()
            raise reply[2]
        self.prefix: str = reply[2]
        _LIVE.add(self)

    # -- shared memory ------------------------------------------------------------------------

    def alloc_array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A new array in shared memory (the buffers' allocator in this mode)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if dtype.hasobject or nbytes == 0 or not hasattr(os, "memfd_create"):
            return np.empty(shape, dtype)  # (pickled to the child; memfd_create: Linux only)
        import mmap

        fd = os.memfd_create("gym_recorder_columns", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            m = mmap.mmap(fd, nbytes)
        except BaseException:
            os.close(fd)
            raise
        arr: np.ndarray = np.ndarray(shape, dtype, buffer=m)
        ident, self._next_id = self._next_id, self._next_id + 1
        address = arr.__array_interface__["data"][0]
        self._shm[address] = (ident, nbytes)
        self._new_fds.append((ident, fd))
        weakref.finalize(arr, self._forget, address, ident)
        return arr

    def _forget(self, address: int, ident: int) -> None:
        if self._shm.get(address, (None,))[0] == ident:
            del self._shm[address]
        for k, (i, fd) in enumerate(self._new_fds):
            if i == ident:
                os.close(fd)
                del self._new_fds[k]
                return
        self._freed.append(ident)

    def _describe(self, col: Any) -> Any:
        if type(col) is np.ndarray and col.flags.c_contiguous and not col.dtype.hasobject:
            hit = self._shm.get(col.__array_interface__["data"][0])
            if hit is not None and col.nbytes <= hit[1]:
                self.columns_shared += 1
                return ("shm", hit[0], col.dtype.str, col.shape)
        if isinstance(col, np.ndarray):
            self.columns_pickled += 1
        return ("obj", col)

    # -- messages -----------------------------------------------------------------------------

    def _handle(self, msg: tuple[Any, ...]) -> tuple[Any, ...] | None:
        kind = msg[0]
        if kind == "released":
            batch = self._pending.pop(msg[1], None)
            if batch is not None:
                batch.release()
        elif kind == "written":
            if self._on_batch_written is not None:
                self._on_batch_written(msg[1], msg[2])
        elif kind == "error":
            if self._error is None:  # (the first says why; the next say "an earlier batch")
                self._error = (msg[1], msg[2])
        else:
            return msg
        return None

    def _receive(self, block: bool) -> tuple[Any, ...] | None:
        """Handles what the child sent; returns a reply that is not routine (or None)."""
        while True:
            while len(self._inbox) >= HEAD.size:
                size, _ = HEAD.unpack_from(self._inbox)
                if len(self._inbox) < HEAD.size + size:
                    break
                msg = pickle.loads(bytes(self._inbox[HEAD.size:HEAD.size + size]))
                del self._inbox[:HEAD.size + size]
                reply = self._handle(msg)
                if reply is not None:
                    return reply
                block = False  # (something came: the caller looks again)
            if self._dead is not None:
                return None
            if not block and not select.select([self._sock], [], [], 0)[0]:
                return None
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                self._dead = self._death()
                return None
            self._inbox += data

    def _death(self) -> str:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return f"the writer process (pid {self._proc.pid}) exited with code {code}"

    def _wait_for(self, kind: str) -> tuple[Any, ...]:
        while True:
            reply = self._receive(block=True)
            if reply is not None and reply[0] == kind:
                return reply
            if self._dead is not None:
                raise write_error(f"cannot write the recording in {self.directory}: "
                                  f"{self._dead}", None)

    def _raise_error(self) -> None:
        if self._dead is not None:
            raise write_error(f"cannot write the recording in {self.directory}: {self._dead}; "
                              f"{len(self._pending)} batch(es) were not written", None)
        if self._error is not None:
            message, code = self._error
            self._error = None
            raise write_error(message, OSError(code, message) if code is not None else None)

    # -- public -------------------------------------------------------------------------------

    def submit(self, batch: Batch) -> None:
        """Sends a batch to the writer process (blocks while more than MAX_PENDING_BATCHES
        are unwritten and nothing failed).

        Raises:
            WriteError: if an earlier batch failed (this one is kept too), or the process died.
        """
        if self._closed:
            raise RecordingClosedError("the recorder is closed")
        with self._lock:
            self._receive(block=False)
            while (len(self._pending) > self._max_pending and self._error is None
                   and self._dead is None):
                self._receive(block=True)
            if self._dead is not None:
                self._raise_error()
            first = self._next_entry
            self._next_entry += batch.entries
            seq, self._seq = self._seq, self._seq + 1
            obs = [self._describe(c) for c in batch.observations]
            act = [self._describe(c) for c in batch.actions]
            fds, self._new_fds = self._new_fds, []
            freed, self._freed = self._freed, []
            msg = ("batch", seq, first, [i for i, _ in fds], freed,
                   [segment_values(seg) for seg in batch.segments], obs, act,
                   batch.rewards, batch.terminations, batch.truncations, batch.infos,
                   batch.steps)
            self._pending[seq] = batch
            try:
                send(self._sock, msg, [fd for _, fd in fds])
            except OSError:
                self._dead = self._death()
            finally:
                for _, fd in fds:
                    os.close(fd)
            self._raise_error()

    def flush(self) -> None:
        """Waits until every submitted batch is written (retrying failed ones) and fsynced.

        Raises:
            WriteError: if a batch still cannot be written (it is kept), or the process died.
        """
        if self._closed:
            return
        self._request("flush")

    def _request(self, kind: str) -> None:
        with self._lock:
            self._receive(block=False)
            self._error = None  # (the request retries; its reply says what still fails)
            if self._dead is None:
                try:
                    send(self._sock, (kind,))
                except OSError:
                    self._dead = self._death()
            if self._dead is None:
                reply = self._wait_for(kind)
                if reply[1] is not None:
                    self._error = reply[1]
            self._raise_error()

    def close(self) -> None:
        """Writes everything, completes the manifest, and stops the writer process.

        Raises:
            WriteError: if something could not be written (kept for another close()).
        """
        if self._closed:
            return
        self._request("close")
        self._closed = True
        self._shutdown()
        for batch in self._pending.values():
            batch.release()
        self._pending.clear()
        fds, self._new_fds = self._new_fds, []
        for _, fd in fds:
            os.close(fd)

    def _shutdown(self) -> None:
        try:
            self._sock.close()
        finally:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def _forked(self) -> None:
        """In a forked child: this process's writer belongs to the parent."""
        self._closed = True
        self._dead = "forked"
        self._sock.close()


_LIVE: weakref.WeakSet[ProcessWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_LIVE):
        writer._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


if __name__ == "__main__":
    from .writechild import main

    main(sys.argv)
