"""Batch writing: turns batches into a .bin, a .json and a manifest entry, in that order.

A background thread does the writing, so that the process stepping the environment only copies
values into memory. At most :data:`MAX_PENDING_BATCHES` batches wait for the thread; beyond that
:meth:`BatchWriter.submit` blocks, which bounds memory. Errors from the thread are raised as
:class:`WriteError` from the next ``submit``, ``flush`` or ``close``; the batches that could not be
written are kept in memory and retried by ``flush()`` and ``close()``.
"""

from __future__ import annotations

import datetime
import math
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import atomicwrites
import numpy as np

from ._version import __version__
from . import format
from .batchqueue import BatchQueue
from .buffer import Batch
from .errors import (RecorderError, RecordingClosedError, UnsupportedValueError, WriteError,
                     write_error)
from .format import (ALIGNMENT, FORMAT_NAME, FORMAT_VERSION, LEGACY_PREFIX, batch_stem,
                     check_prefix, dumps, encode_value, manifest_name)
from .spaces import DictNode, Layout, TupleNode

__all__ = ["BatchWriter", "default_prefix", "MAX_PENDING_BATCHES"]

# Batches handed to the writer thread and not yet written; submit() blocks beyond this, so memory
# stays within (MAX_PENDING_BATCHES + 2) batches.
MAX_PENDING_BATCHES = 2
# The manifest is rewritten at most this often (seconds) while batches stream in, so that one
# rewrite commits several batches; written batches wait at most this long for their commit.
MIN_COMMIT_INTERVAL = 0.05
# ...and at least this many times as long as the last rewrite took (a manifest listing 20,000
# batches takes ~50 ms to rewrite; rewrites then stay under 5% of the writer's time).
COMMIT_COST_FACTOR = 20
# ...and at most this many batches wait for one commit.
MAX_COALESCED_BATCHES = 16
# A column whose rows are not a multiple of ALIGNMENT bytes is written whole when entries can
# start at multiples of lcm(row bytes, ALIGNMENT) no larger than this (padding stays small).
MAX_PACKED_ALIGN = 64
# Arrays smaller than this are gathered in memory and written SMALL_WRITE_CHUNK bytes at a time.
SMALL_WRITE_BYTES = 1 << 16
SMALL_WRITE_CHUNK = 1 << 20
_ZEROS = bytes(ALIGNMENT)
# Batch headers longer than this (bytes of JSON) carry the spaces in the first batch only.
MAX_REPEATED_HEADER_BYTES = 4096
MAX_REPEATED_FIELD_BYTES = 1024
# An ARRAY reference as JSON text; dtype strings and file names are plain ASCII (no escaping).
_REF_TEXT = ('{"__type":"ndarray","shape":[%s],"order":"C","dtype":"%s","npyfile":"%s",'
             '"npyoff":%d,"size":%d,"crc32":%d}')
_NO_RESET = ',"no_reset":true'
_counter = 0
_counter_lock = threading.Lock()


def default_prefix() -> str:
    """Returns a new writer prefix, unique across processes and hosts sharing a directory."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    # Kept short: every array reference repeats the .bin name that starts with it.
    return f"{LEGACY_PREFIX}{stamp}.{os.getpid()}.{secrets.token_hex(3)}{n:02d}"


def _tree_template(layout: Layout) -> str:
    """A %-format string that lays out one TREE from the JSON texts of its leaves, in order."""
    def build(node: Any) -> str:
        if isinstance(node, DictNode):
            return "{" + ",".join(_text(k).replace("%", "%%") + ":" + build(c)
                                  for k, c in zip(node.keys, node.children)) + "}"
        if isinstance(node, TupleNode):
            return "[" + ",".join(build(c) for c in node.children) + "]"
        return "%s"

    return build(layout.root)


def _column_texts(sink: _BinSink, col: np.ndarray | list[Any], lo: np.ndarray, hi: np.ndarray,
                  where: str) -> list[str]:
    """The JSON text of each entry's rows of a leaf column: an ARRAY, or a ``values`` object."""
    if isinstance(col, np.ndarray):
        return _column_refs(sink, col, lo, hi)
    return [_text({"__type": "values", "values": [encode_value(v, sink, where) for v in col[a:b]]})
            for a, b in zip(lo.tolist(), hi.tolist())]


def _column_refs(sink: _BinSink, col: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """Writes the rows [lo[k], hi[k]) of a column for every entry k; returns their references.

    The entries' rows must follow one another in the column (hi[k] == lo[k + 1]).
    """
    n = len(lo)
    if n == 0:
        return []
    counts = hi - lo
    tail = "".join("," + str(d) for d in col.shape[1:])
    row_bytes = col.dtype.itemsize * math.prod(col.shape[1:])
    align = math.lcm(row_bytes, ALIGNMENT) if row_bytes else ALIGNMENT
    start, stop = int(lo[0]), int(hi[-1])
    contiguous = bool((lo[1:] == hi[:-1]).all())
    if not contiguous or align > MAX_PACKED_ALIGN:
        # Rows of odd sizes (or a layout we do not expect): one aligned write per entry.
        return [sink.text(col[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]
    block = np.ascontiguousarray(col[start:stop])
    if row_bytes % ALIGNMENT == 0 or stop == start:
        base, data = sink.put_block(block)
        rel = (lo - start) * row_bytes
    else:  # (stop > start here: some entry has rows)
        # Each entry starts at a multiple of lcm(row_bytes, 8): then rows stay whole units, and
        # one fancy-indexed copy lays the column out with its padding.
        padded = (counts * row_bytes + align - 1) // align * align
        rel = np.cumsum(padded) - padded
        unit = np.dtype((np.void, row_bytes))
        packed = np.zeros(int(padded.sum()) // row_bytes, unit)
        packed[np.repeat(rel // row_bytes - (lo - start), counts) + np.arange(stop - start)] = \
            block.reshape(stop - start, -1).view(unit).reshape(-1)
        # (No padding after the last entry: padding only lies between arrays.)
        base, data = sink.put_block(
            packed.view(np.uint8)[:int(rel[-1]) + int(counts[-1]) * row_bytes])
    # The same text as _REF_TEXT, built with one f-string per entry around the parts every
    # entry of the column shares (batches of short episodes hold thousands of references).
    crc32 = format.crc32
    mid = f'{tail}],"order":"C","dtype":"{col.dtype.str}","npyfile":"{sink.name}","npyoff":'
    sizes = (counts * row_bytes).tolist()
    return [f'{{"__type":"ndarray","shape":[{c}{mid}{base + r},"size":{size},'
            f'"crc32":{crc32(data[r:r + size])}}}'
            for r, c, size in zip(rel.tolist(), counts.tolist(), sizes)]


def _quoted(word: str) -> str:
    """An entry's ``end``: one of the format's own fixed words, which need no escaping."""
    return '"' + word + '"'


def _text(value: Any) -> str:
    """JSON text of a JSON-ready value, as the format writes it."""
    return dumps(value).decode("ascii")


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _NoSyncWriter(atomicwrites.AtomicWriter):  # type: ignore[misc]  # (untyped package)
    """An atomic writer (temp file in the same directory, then rename) that leaves fsync to us."""

    def sync(self, f: Any) -> None:
        f.flush()

    def commit(self, f: Any) -> None:
        os.replace(f.name, self._path)


class _SyncWriter(atomicwrites.AtomicWriter):  # type: ignore[misc]  # (untyped package)
    """An atomic writer that fsyncs the file, then renames (the directory is synced separately)."""

    def commit(self, f: Any) -> None:
        os.replace(f.name, self._path)


class _BinSink:
    """Writes arrays one after another into an open .bin file, aligned, and returns references.

    Small arrays are gathered in memory and written in large chunks: one system call per
    SMALL_WRITE_CHUNK bytes instead of one per array (each call also hands the GIL over).
    Call :meth:`finish` before the file is closed.
    """

    def __init__(self, f: Any, name: str) -> None:
        self.f = f
        self.name = name
        self.offset = 0
        self._pending: list[Any] = []
        self._pending_bytes = 0

    def _flush_pending(self) -> None:
        if self._pending:
            self.f.write(b"".join(self._pending))
            self._pending.clear()
            self._pending_bytes = 0

    def finish(self) -> None:
        """Writes what is still gathered in memory."""
        self._flush_pending()

    def put_block(self, arr: np.ndarray) -> tuple[int, memoryview | bytes]:
        """Writes a C-contiguous array at the next aligned offset, without a checksum.

        Returns:
            (offset, the written bytes), for the caller to checksum the pieces it references.
        """
        offset = self.offset
        pad = -offset % ALIGNMENT
        if pad:
            self._pending.append(_ZEROS[:pad])
            self._pending_bytes += pad
            offset += pad
        nbytes = arr.nbytes
        data = arr.data.cast("B") if nbytes else b""  # (arr.data is memoryview(arr))
        if nbytes < SMALL_WRITE_BYTES:
            self._pending.append(data)
            self._pending_bytes += nbytes
            if self._pending_bytes >= SMALL_WRITE_CHUNK:
                self._flush_pending()
        else:
            self._flush_pending()
            self.f.write(data)
        self.offset = offset + nbytes
        return offset, data

    def _put(self, arr: np.ndarray) -> tuple[np.ndarray, int, int]:
        """Writes one array at the next aligned offset; returns (array, offset, crc32)."""
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)  # (only when needed: it makes 0-d arrays 1-d)
        offset, data = self.put_block(arr)
        return arr, offset, format.crc32(data)

    def __call__(self, arr: np.ndarray) -> dict[str, Any]:
        """Writes an array; returns its reference as a dict."""
        arr, offset, crc = self._put(arr)
        return {"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                "dtype": arr.dtype.str, "npyfile": self.name, "npyoff": offset,
                "size": arr.nbytes, "crc32": crc}

    def text(self, arr: np.ndarray) -> str:
        """Writes an array; returns its reference as JSON text (the same as ``dumps(self(arr))``).

        Batches of many short episodes hold thousands of references: formatting them as text
        directly costs a fraction of building dicts and encoding them.
        """
        arr, offset, crc = self._put(arr)
        shape = arr.shape
        return _REF_TEXT % (",".join(map(str, shape)) if len(shape) != 1 else shape[0],
                            arr.dtype.str, self.name, offset, arr.nbytes, crc)


def _info_columns(rows: int, infos: list[tuple[int, dict[str, Any]]], sink: _BinSink, where: str) -> dict[str, Any]:
    """Encodes sparse (row, info) pairs as INFOS columns (see the format specification)."""
    columns: dict[str, tuple[list[int], list[Any]]] = {}
    for row, info in infos:
        for key, value in info.items():
            if type(key) is not str:
                raise UnsupportedValueError(
                    f"{where} row {row}: info key {key!r} is not a string")
            col = columns.get(key)
            if col is None:
                col = columns[key] = ([], [])
            col[0].append(row)
            col[1].append(value)
    out = []
    for key, (index, values) in columns.items():
        entry: dict[str, Any] = {"key": key}
        entry["index"] = None if len(index) == rows else sink(np.array(index, dtype=np.int64))
        first = values[0]
        t = type(first)
        stacked: np.ndarray | None = None
        pytype = None
        if t in (bool, int, float) and all(type(v) is t for v in values):
            pytype = t.__name__
            try:
                stacked = np.array(values, dtype={"bool": np.bool_, "int": np.int64,
                                                  "float": np.float64}[pytype])
            except OverflowError:
                stacked = None
        elif isinstance(first, (np.ndarray, np.generic)) and first.dtype.kind in "biufc" and all(
                type(v) is t and v.dtype == first.dtype and v.shape == first.shape for v in values
        ) and not (t is np.ndarray and first.ndim == 0):
            # (0-d arrays are not stacked: the reader gives a stacked (n,) column back as numpy
            # scalars, so they are kept as VALUEs, one array each.)
            # (np.stack would give native byte order: keep the dtype exactly, e.g. '>f4')
            stacked = np.stack(values).astype(first.dtype, copy=False) if t is np.ndarray \
                else np.array(values, dtype=first.dtype)
        if stacked is not None:
            entry["kind"] = "array"
            entry["pytype"] = pytype
            entry["values"] = sink(stacked)
        else:
            entry["kind"] = "values"
            entry["pytype"] = None
            entry["values"] = [encode_value(v, sink, f"{where} info[{key!r}]") for v in values]
        out.append(entry)
    return {"rows": rows, "keys": out}


class BatchWriter:
    """Writes batches for one writer prefix into a recording directory.

    Args:
        directory: the recording directory (created if missing).
        prefix: the writer's file prefix; None for a new unique one.
        header: manifest fields describing the recording (env_id, spaces, ...).
        obs_layout: layout of the observation space.
        act_layout: layout of the action space.
        fsync: make every batch durable before it is committed (see the format's "durability").
        on_batch_written: called from the writer thread with (bytes written, steps) per batch.

    Raises:
        FileExistsError: if the prefix already has a manifest in the directory.
        ValueError: if the prefix is not a valid file-name prefix.
    """

    def __init__(self, directory: str, prefix: str | None, header: dict[str, Any],
                 obs_layout: Layout, act_layout: Layout, *, fsync: bool = False,
                 on_batch_written: Callable[[int, int], None] | None = None) -> None:
        self.prefix = check_prefix(prefix) if prefix is not None else default_prefix()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._manifest_path = os.path.join(directory, manifest_name(self.prefix))
        if os.path.lexists(self._manifest_path):
            raise FileExistsError(
                f"{self._manifest_path} exists: the prefix {self.prefix!r} is already used in "
                "this directory (pick another file_prefix, or None for a unique one)")
        self._obs_layout = obs_layout
        self._act_layout = act_layout
        self._fsync = fsync
        self._on_batch_written = on_batch_written
        self._manifest = {
            "format": FORMAT_NAME, "version": FORMAT_VERSION, "prefix": self.prefix,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"),
            "writer": {"library": "gym_recorder", "library_version": __version__,
                       "hostname": socket.gethostname(), "pid": os.getpid()},
            **header,
            "batches": [], "complete": False,
        }
        # Every batch JSON repeats the manifest's header fields, so that `gym-recorder repair`
        # can rebuild a lost manifest from the batch files alone.
        self._batch_header = {k: v for k, v in self._manifest.items()
                              if k not in ("batches", "complete")}
        self._header_json = dumps(self._batch_header)
        # A large header (big space descriptions, a big env spec) is written whole in the
        # writer's first batch only; later batches leave out its fields of more than
        # MAX_REPEATED_FIELD_BYTES (see "Batch" in the format specification).
        self._later_header_json = self._header_json
        if len(self._header_json) > MAX_REPEATED_HEADER_BYTES:
            self._later_header_json = dumps({
                k: v for k, v in self._batch_header.items()
                if len(dumps(v)) <= MAX_REPEATED_FIELD_BYTES})
        self._obs_template = _tree_template(obs_layout)
        self._act_template = _tree_template(act_layout)
        self._next_entry = 0
        self._uncommitted = 0  # batches written but not yet listed in the manifest on disk
        self._dropped_steps = 0  # steps of batches that failed for a reason a retry cannot fix
        self._commit_lock = threading.Lock()  # the thread and flush() may both commit
        self._last_commit = time.monotonic()
        self._commit_interval = MIN_COMMIT_INTERVAL
        self._unsynced: list[str] = []
        # A full queue blocks submit() until the writer has drained it (see batchqueue).
        self._queue: queue.Queue[Any] = BatchQueue(MAX_PENDING_BATCHES, low=0)
        self._lock = threading.Lock()
        self._failed: list[tuple[int, Batch]] = []  # batches not written, in order, for retry
        self._error: BaseException | None = None
        self._error_path = ""
        self._last_os_error: OSError | None = None  # its errno goes on later WriteErrors too
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"gym_recorder:{self.prefix}",
                                        daemon=True)
        self._thread.start()
        # The manifest exists from the start (with no batches): it claims the prefix, and a
        # reader sees the recording's spaces even before the first batch.
        self._write_manifest()

    # -- public -----------------------------------------------------------------------------

    @property
    def batches_written(self) -> int:
        """Number of batches committed so far."""
        return len(self._manifest["batches"])

    def submit(self, batch: Batch) -> None:
        """Queues a batch for writing (blocks while MAX_PENDING_BATCHES are queued).

        Raises:
            WriteError: if an earlier batch failed to be written (it is kept for a retry).
        """
        if self._closed:
            raise RecordingClosedError("the recorder is closed")
        first = self._next_entry
        self._next_entry += batch.entries
        with self._lock:
            if self._failed or self._error is not None:
                self._keep_failed(first, batch)
                self._raise_pending()
        self._queue.put((first, batch))

    def flush(self) -> None:
        """Waits until every submitted batch is written, retrying failed ones, then fsyncs.

        Raises:
            WriteError: if a batch still cannot be written; it stays in memory for a retry.
        """
        self._queue.join()
        with self._lock:
            if self._error is not None and not isinstance(self._error, OSError):
                self._raise_pending()  # a dropped batch: say so (retries cannot help)
            while self._failed:
                first, batch = self._failed[0]
                try:
                    self._write_batch(first, batch)
                except OSError as e:
                    self._error = e
                    self._raise_pending()
                except UnsupportedValueError:
                    self._failed.pop(0)
                    batch.release()
                    raise
                self._failed.pop(0)
            self._error = None
            if self._uncommitted:
                try:
                    self._commit()
                except OSError as e:
                    self._error = e
                    self._raise_pending()
        try:
            self._sync_all()
        except OSError as e:
            raise write_error(f"cannot fsync the recording in {self.directory}: {e}", e) from e

    def close(self) -> None:
        """Writes everything, marks the manifest complete, fsyncs, and stops the thread.

        Raises:
            WriteError: if something could not be written (what was kept is in the message).
        """
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._queue.put(None)
        self._thread.join()
        self._manifest["complete"] = True
        try:
            self._write_manifest()
            self._sync_all()
        except OSError as e:
            raise write_error(f"cannot write {self._manifest_path}: {e}", e) from e

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            if self._uncommitted:
                # Written batches wait at most the commit interval for their commit.
                wait = self._last_commit + self._commit_interval - time.monotonic()
                try:
                    item = self._queue.get(timeout=max(wait, 0.0))
                except queue.Empty:
                    self._commit_in_thread()
                    continue
            else:
                item = self._queue.get()
            try:
                if item is None:
                    return
                first, batch = item
                with self._lock:
                    if self._failed or self._error is not None:
                        self._keep_failed(first, batch)
                        continue
                # Only this thread writes while the queue is not empty, so the write itself
                # runs without the lock (submit() must not wait for the disk).
                try:
                    self._write_batch(first, batch)
                except OSError as e:  # kept for a retry, and raised in the caller's thread
                    with self._lock:
                        self._error = e
                        self._keep_failed(first, batch)
                except Exception as e:  # noqa: BLE001  (a retry cannot help: drop, and say so)
                    with self._lock:
                        self._error = e
                        self._dropped_steps += batch.steps
                    batch.release()
                # One manifest rewrite commits every batch written in the last
                # commit interval (replacing a file costs a writeback on ext4).
                if self._uncommitted and (
                        self._uncommitted >= MAX_COALESCED_BATCHES
                        or time.monotonic() - self._last_commit >= self._commit_interval):
                    self._commit_in_thread()
            finally:
                # Drop our references before waiting for the next batch: a batch kept alive
                # keeps its columns and entry table alive too.
                item = batch = None
                self._queue.task_done()

    def _commit_in_thread(self) -> None:
        try:
            self._commit()
        except BaseException as e:  # raised in the caller's thread; flush() retries
            with self._lock:
                self._error = e

    def _keep_failed(self, first: int, batch: Batch) -> None:
        """Keeps a batch for retry (lock held), in entry order: submit() may keep a batch while
        earlier ones still wait in the queue, which the thread keeps after it."""
        self._failed.append((first, batch))
        self._failed.sort(key=lambda item: item[0])

    def _raise_pending(self) -> None:
        """Raises the pending error (called with the lock held); the batches stay kept."""
        error, self._error = self._error, None
        steps = sum(b.steps for _, b in self._failed)
        if error is not None and not isinstance(error, OSError):
            dropped, self._dropped_steps = self._dropped_steps, 0
            raise RecorderError(
                f"a batch of {dropped} steps could not be encoded and was dropped: {error}") from error
        if isinstance(error, OSError):
            self._last_os_error = error
        cause = error if error is not None else "an earlier batch failed"
        raise write_error(
            f"cannot write batch {self._error_path or self.prefix} in {self.directory}: {cause}; "
            f"{len(self._failed)} batch(es) with {steps} steps are kept in memory and will be "
            "retried by flush() or close()", error or self._last_os_error) from error

    # -- writing ------------------------------------------------------------------------------

    def _atomic(self, path: str, mode: str) -> Any:
        cls = _SyncWriter if self._fsync else _NoSyncWriter
        return cls(path, mode=mode, overwrite=True).open()

    def _write_batch(self, first: int, batch: Batch) -> None:
        stem = batch_stem(self.prefix, first)
        bin_name, json_name = stem + ".bin", stem + ".json"
        bin_path = os.path.join(self.directory, bin_name)
        json_path = os.path.join(self.directory, json_name)
        self._error_path = bin_path
        with self._atomic(bin_path, "wb") as f:
            sink = _BinSink(f, bin_name)
            entries = self._encode_entries(first, batch, sink, json_name)
            sink.finish()
            bin_size = sink.offset
        doc = b"".join([
            dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, "prefix": self.prefix,
                   "first": first})[:-1],
            b',"episodes":[', ",".join(entries).encode("ascii"), b'],"header":',
            self._header_json if first == 0 else self._later_header_json, b"}"])
        self._error_path = json_path
        with self._atomic(json_path, "wb") as f:
            f.write(doc)
        self._unsynced += [bin_path, json_path]
        if self._fsync:
            # The two renames must be durable before the manifest that lists them can be.
            _fsync_path(self.directory)
        self._manifest["batches"].append({
            "first": first, "len": len(entries), "fn": json_name, "bin": bin_name,
            "json_size": len(doc), "bin_size": bin_size, "json_crc32": format.crc32(doc),
            "steps": batch.steps,
            "episodes": batch.new_episodes})
        self._uncommitted += 1
        self._error_path = ""
        if self._on_batch_written is not None:
            self._on_batch_written(bin_size + len(doc), batch.steps)
        batch.release()

    def _commit(self) -> None:
        """Rewrites the manifest so that it lists every batch written so far."""
        with self._commit_lock:
            self._error_path = self._manifest_path
            start = time.monotonic()
            self._write_manifest()
            self._uncommitted = 0
        self._last_commit = time.monotonic()
        # The manifest grows with the recording: space rewrites so they stay a small share.
        self._commit_interval = max(MIN_COMMIT_INTERVAL,
                                    COMMIT_COST_FACTOR * (self._last_commit - start))
        self._error_path = ""

    def _write_manifest(self) -> None:
        doc = dumps(self._manifest)
        if self._fsync:
            with atomicwrites.atomic_write(self._manifest_path, mode="wb", overwrite=True) as f:
                f.write(doc)
            self._unsynced.clear()
        else:
            with self._atomic(self._manifest_path, "wb") as f:
                f.write(doc)

    def _sync_all(self) -> None:
        """fsyncs every file written since the last sync, then the directory."""
        paths, self._unsynced = self._unsynced, []
        for path in paths:
            _fsync_path(path)
        _fsync_path(self._manifest_path)
        _fsync_path(self.directory)

    def _encode_entries(self, first: int, batch: Batch, sink: _BinSink,
                        where: str) -> list[str]:
        """Writes a batch column by column; returns the entries as JSON text.

        Each column (an observation or action leaf, rewards, terminations, truncations) holds
        the rows of every entry in order, so it is written in one piece; when its rows are not
        a multiple of ALIGNMENT bytes, each entry's rows are first placed at aligned offsets
        (zero padding between) with one vectorised copy. The per-entry Python work left is a
        CRC-32 and a formatted reference per array, which makes batches of thousands of short
        episodes cheap to write. A leaf that does not stack (a list of values) is encoded entry
        by entry.
        """
        segs = batch.segments
        o0 = np.array([seg.obs0 for seg in segs], np.int64)
        o1 = np.array([seg.obs1 for seg in segs], np.int64)
        s0 = np.array([seg.step0 for seg in segs], np.int64)
        s1 = np.array([seg.step1 for seg in segs], np.int64)
        obs = [_column_texts(sink, col, o0, o1, f"{where} observations")
               for col in batch.observations]
        act = [_column_texts(sink, col, s0, s1, f"{where} actions") for col in batch.actions]
        rewards = _column_refs(sink, batch.rewards, s0, s1)
        terms = _column_refs(sink, batch.terminations, s0, s1)
        truncs = _column_refs(sink, batch.truncations, s0, s1)
        obs_texts = obs[0] if self._obs_layout.single else [
            self._obs_template % row for row in zip(*obs)]
        act_texts = act[0] if self._act_layout.single else [
            self._act_template % row for row in zip(*act)]
        out: list[str] = []
        append = out.append
        for k, seg, seg_infos, obs_t, act_t, rew_t, term_t, trunc_t in zip(
                range(first, first + len(segs)), segs, batch.segment_infos(), obs_texts,
                act_texts, rewards, terms, truncs):
            part = seg.part
            end = seg.end
            rows = seg.info1 - seg.info0
            seed = seg.seed if part == 0 else None
            options = seg.options if part == 0 else None
            sub_env = seg.sub_env
            # One f-string per entry (see "Batch" in the format specification): batches of
            # short episodes hold thousands of entries.
            infos = ('{"rows":%d,"keys":[]}' % rows) if not seg_infos else _text(
                _info_columns(rows, seg_infos, sink, f"{where} entry {k}"))
            opts = "null" if options is None else _text(
                encode_value(options, sink, f"{where} entry {k} options"))
            append(
                f'{{"index":{k},"episode":{seg.episode:d},"part":{part:d},'
                f'"continues":{"false" if end is not None else "true"},'
                f'"steps":{seg.step1 - seg.step0:d},"observations":{obs_t},'
                f'"actions":{act_t},"rewards":{rew_t},"terminations":{term_t},'
                f'"truncations":{trunc_t},"infos":{infos},'
                f'"seed":{"null" if seed is None else int(seed)},"options":{opts},'
                f'"end":{"null" if end is None else _quoted(end)},'
                f'"sub_env":{"null" if sub_env is None else int(sub_env)}'
                f'{_NO_RESET if seg.no_reset else ""}}}')
        return out
