"""The writer process of WRITE_MODE "process" (see :mod:`gym_recorder.record.writeprocess`),
and the messages both processes exchange: a pickle, after its length and the number of file
descriptors sent with it (``socket.send_fds``).

Pickle is safe here: each process unpickles only what its own other half sent over a socketpair
they alone hold.

Test hook: the environment variable ``GYM_RECORDER_WRITEPROCESS_FAIL_BIN`` = ``"N"`` (or
``"N,K"``) makes the child's Nth .bin write (1-based, and K-1 more after it) fail with ENOSPC;
``GYM_RECORDER_WRITEPROCESS_SLOW_BIN`` = seconds makes each .bin write wait that long first.
"""

from __future__ import annotations

import dataclasses
import errno as errno_module
import operator
import os
import pickle
import select
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .batch import Batch, Segment

__all__ = ["send", "recv_exact", "HEAD", "FAIL_ENV", "SLOW_ENV", "segment_values", "main"]

HEAD = struct.Struct("<QI")  # payload bytes, descriptors sent with it
FAIL_ENV = "GYM_RECORDER_WRITEPROCESS_FAIL_BIN"
SLOW_ENV = "GYM_RECORDER_WRITEPROCESS_SLOW_BIN"
# A segment goes as the tuple of its fields, in order (pickling the dataclass costs 10x more).
SEGMENT_FIELDS = tuple(f.name for f in dataclasses.fields(Segment))
segment_values = operator.attrgetter(*SEGMENT_FIELDS)


def send(sock: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    """Sends one message (``fds``: file descriptors that go with it)."""
    payload = pickle.dumps(obj, protocol=5)
    head = HEAD.pack(len(payload), len(fds or ()))
    if fds:
        socket.send_fds(sock, [head], fds)
        sock.sendall(payload)
    else:
        sock.sendall(head + payload)


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Reads exactly ``n`` bytes; None at EOF."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _install_fault() -> None:
    """The test hook (see the module docstring)."""
    spec = os.environ.get(FAIL_ENV)
    delay = float(os.environ.get(SLOW_ENV) or 0)
    if not spec and not delay:
        return
    from . import writeback as io

    parts = [int(p) for p in spec.split(",")] if spec else [0, 0]
    start, count = parts[0], parts[1] if len(parts) > 1 else 1
    original = io.put_file
    calls = [0]

    def put_file(path: str, buffers: list[Any], names: Any, **kw: Any) -> None:
        if path.endswith(".bin"):
            time.sleep(delay)
            calls[0] += 1
            if start <= calls[0] < start + count:
                raise OSError(errno_module.ENOSPC, os.strerror(errno_module.ENOSPC), path)
        original(path, buffers, names, **kw)

    io.put_file = put_file


class _Child:
    """The writer process: an inline BatchWriter fed with the messages of its parent."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.maps: dict[int, Any] = {}
        self.writer: Any = None

    def send(self, *msg: Any) -> None:
        try:
            send(self.sock, msg)
        except OSError:
            pass  # (the parent is gone: the batches are written all the same)

    def receive(self) -> tuple[tuple[Any, ...], list[int]] | None:
        head = b""
        fds: list[int] = []
        while len(head) < HEAD.size:
            data, got, _, _ = socket.recv_fds(self.sock, HEAD.size - len(head), 255)
            if not data:
                return None
            head += data
            fds += got
        size, _ = HEAD.unpack(head)
        payload = recv_exact(self.sock, size)
        if payload is None:
            return None
        return pickle.loads(payload), fds

    def column(self, desc: tuple[Any, ...]) -> Any:
        if desc[0] == "obj":
            return desc[1]
        _, ident, dtype, shape = desc
        return np.ndarray(shape, np.dtype(dtype), buffer=self.maps[ident])

    def releaser(self, seq: int) -> Callable[[], None]:
        return lambda: self.send("released", seq)

    def error(self, e: BaseException) -> None:
        self.send("error", str(e), getattr(e, "errno", None))

    def run(self) -> None:
        import mmap

        from . import writer as writer_module
        from .writer import BatchWriter

        writer_module.WRITE_MODE = "inline"
        first = self.receive()
        if first is None:
            return
        (_, directory, prefix, header, obs_layout, act_layout, fsync, interval, compression,
         report), _ = first
        try:
            self.writer = writer = BatchWriter(
                directory, prefix, header, obs_layout, act_layout, fsync=fsync,
                on_batch_written=(lambda n, s: self.send("written", n, s)) if report else None,
                max_commit_interval=interval, compression=compression)
        except Exception as e:  # noqa: BLE001  (raised in the parent)
            self.send("ready", "error", e)
            return
        self.send("ready", "ok", writer.prefix)
        files = writer.files
        while True:
            if files.uncommitted:
                wait = max(files.commit_wait(), 0.0)
                if not select.select([self.sock], [], [], wait)[0]:
                    try:
                        files.commit()
                    except OSError as e:
                        self.error(e)
                    continue
            got = self.receive()
            if got is None:
                break
            msg, fds = got
            if msg[0] == "batch":
                (_, seq, first_entry, ids, freed, segs, obs, act, rew, term, trunc, infos,
                 steps) = msg
                for ident, fd in zip(ids, fds):
                    self.maps[ident] = mmap.mmap(fd, 0)
                    os.close(fd)
                for ident in freed:
                    self.maps.pop(ident, None)
                batch = Batch([Segment(*v) for v in segs], [self.column(c) for c in obs],
                              [self.column(c) for c in act], rew, term, trunc, infos, steps,
                              release=self.releaser(seq))
                del obs, act
                try:
                    writer.submit(batch)
                except Exception as e:  # noqa: BLE001  (kept by the writer, or dropped)
                    self.error(e)
                del batch
            else:
                try:
                    if msg[0] == "flush":
                        writer.flush()
                    else:
                        writer.close()
                except Exception as e:  # noqa: BLE001
                    self.send(msg[0], (str(e), getattr(e, "errno", None)))
                else:
                    self.send(msg[0], None)
                    if msg[0] == "close":
                        return
        # EOF: the parent closed or died: write what can be written, commit, leave the
        # manifest incomplete.
        try:
            writer.flush()
        except Exception:  # noqa: BLE001
            pass


def main(argv: list[str]) -> None:
    """Runs the writer process on the socket whose descriptor is ``argv[1]``."""
    # Ctrl-C in a terminal interrupts the whole process group: the parent decides when this
    # process stops (it closes the socket, or dies), so that what it buffered is still written.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    _install_fault()
    _Child(sock).run()
