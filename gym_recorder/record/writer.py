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
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from .._version import __version__
from ..format import fileio
from ..format.fileio import dumps
from .batchqueue import BatchQueue
from .batch import Batch
from .encode import BatchEncoder
from .prefix import default_prefix
from . import writeback as io
from .writeback import (DEFAULT_WRITE_MODE, DEFAULT_WRITEBACK, WRITE_MODES, WRITEBACK_POLICIES,
                        AutoMode, Gathered, SwitchInterval, TempNames, Writeback)
from ..errors import RecorderError, RecordingClosedError, UnsupportedValueError, write_error
from ..format.codecs import Codec
from ..format import (RAW_FORMAT_VERSION, FORMAT_NAME, FORMAT_VERSION, batch_stem, check_prefix,
                     manifest_name)
from ..format.spaces import Layout

__all__ = ["BatchWriter", "default_prefix", "MAX_PENDING_BATCHES", "WRITEBACK", "WRITE_MODE",
           "WRITEBACK_POLICIES", "WRITE_MODES", "DEFAULT_WRITEBACK", "DEFAULT_WRITE_MODE"]

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
# The writer's choices (see record/writeback), read when a writer starts.
WRITEBACK = DEFAULT_WRITEBACK
WRITE_MODE = DEFAULT_WRITE_MODE


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchWriter:
    """Writes batches for one writer prefix into a recording directory.

    Args:
        directory: the recording directory (created if missing).
        prefix: the writer's file prefix; None for a new unique one.
        header: manifest fields describing the recording (env_id, spaces, ...).
        obs_layout: layout of the observation space.
        act_layout: layout of the action space.
        fsync: make every batch durable before it is committed (see the format's "durability").
        on_batch_written: called from the writer thread with (raw bytes of the batch's arrays
            and JSON, steps) per batch: what the buffer held, compressed or not.
        compression: compress the arrays of big leaves with this codec (see "Compressed
            arrays" in the format); None stores every array raw (format version 1).

    Raises:
        FileExistsError: if the prefix already has a manifest in the directory.
        ValueError: if the prefix is not a valid file-name prefix.
    """

    def __init__(self, directory: str, prefix: str | None, header: dict[str, Any],
                 obs_layout: Layout, act_layout: Layout, *, fsync: bool = False,
                 on_batch_written: Callable[[int, int], None] | None = None,
                 max_commit_interval: float | None = None,
                 compression: Codec | None = None) -> None:
        self.prefix = check_prefix(prefix) if prefix is not None else default_prefix()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._manifest_path = os.path.join(directory, manifest_name(self.prefix))
        if os.path.lexists(self._manifest_path):
            raise FileExistsError(
                f"{self._manifest_path} exists: the prefix {self.prefix!r} is already used in "
                "this directory (pick another file_prefix, or None for a unique one)")
        self._fsync = fsync
        self._writeback = Writeback(WRITEBACK)
        self._temp_names = TempNames()
        self._on_batch_written = on_batch_written
        self._manifest = {
            "format": FORMAT_NAME, "prefix": self.prefix,
            # (version 2 only for a writer that compresses: others stay readable by version 1)
            "version": FORMAT_VERSION if compression is not None else RAW_FORMAT_VERSION,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"),
            "writer": {"library": "gym_recorder", "library_version": __version__,
                       "hostname": socket.gethostname(), "pid": os.getpid()},
            **header,
            "batches": [], "complete": False,
        }
        # Every batch JSON repeats the manifest's header fields, so that `gym-recorder repair`
        # can rebuild a lost manifest from the batch files alone.
        self._encoder = BatchEncoder(self.prefix, {
            k: v for k, v in self._manifest.items() if k not in ("batches", "complete")},
            obs_layout, act_layout, compression)
        self._next_entry = 0
        self._uncommitted = 0  # batches written but not yet listed in the manifest on disk
        self._dropped_steps = 0  # steps of batches that failed for a reason a retry cannot fix
        self._commit_lock = threading.Lock()  # the thread and flush() may both commit
        self._last_commit = time.monotonic()
        self._commit_interval = MIN_COMMIT_INTERVAL
        # A written batch waits at most this long for its commit, however slow rewrites get
        # (the recorder's flush interval bounds what a killed process loses).
        self._max_commit_interval = math.inf if max_commit_interval is None else \
            float(max_commit_interval)
        self._unsynced: list[str] = []
        # A full queue blocks submit() until the writer has drained it (see batchqueue).
        self._queue: queue.Queue[Any] = BatchQueue(MAX_PENDING_BATCHES, low=0)
        self._lock = threading.Lock()
        self._failed: list[tuple[int, Batch]] = []  # batches not written, in order, for retry
        self._error: BaseException | None = None
        self._error_path = ""
        self._last_os_error: OSError | None = None  # its errno goes on later WriteErrors too
        self._closed = False
        self._inline = WRITE_MODE == "inline"
        self._handoff = WRITE_MODE == "handoff"
        self._auto = AutoMode() if WRITE_MODE == "auto" else None
        self._thread = threading.Thread(target=self._run, name=f"gym_recorder:{self.prefix}",
                                        daemon=True)
        if not self._inline:
            self._thread.start()
        # The manifest exists from the start (with no batches): it claims the prefix, and a
        # reader sees the recording's spaces even before the first batch.
        self._write_manifest()

    # -- public -----------------------------------------------------------------------------

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
        if self._inline:
            self._write_inline(first, batch)
        elif self._auto is None:
            self._queue.put((first, batch))
        else:
            start = time.monotonic()
            if self._auto.inline:
                self._queue.join()  # (batches are written in order)
                self._write_inline(first, batch)
            else:
                self._queue.put((first, batch))
            self._auto.took(time.monotonic() - start)

    def _write_inline(self, first: int, batch: Batch) -> None:
        """Writes a batch in the caller's thread (WRITE_MODE "inline"), committing as the
        thread would; errors are raised now, the batch kept as the thread would keep it."""
        with self._lock, self._commit_lock:  # (the thread may be committing: "auto")
            try:
                self._write_batch(first, batch)
            except OSError as e:
                self._error = e
                self._keep_failed(first, batch)
                self._raise_pending()
            except Exception as e:  # noqa: BLE001  (a retry cannot help: drop, and say so)
                self._error = e
                self._dropped_steps += batch.steps
                batch.release()
                self._raise_pending()
        if self._uncommitted and (
                self._uncommitted >= MAX_COALESCED_BATCHES
                or time.monotonic() - self._last_commit >= self._commit_interval):
            try:
                self._commit()
            except OSError as e:
                with self._lock:
                    self._error = e
                    self._raise_pending()

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
        if not self._inline:
            self._queue.put(None)
            self._thread.join()
        self._manifest["complete"] = True
        try:
            self._writeback.close()
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
                if self._handoff:
                    SwitchInterval.enter()
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
                finally:
                    if self._handoff:
                        SwitchInterval.leave()
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

    def _put(self, path: str, buffers: list[Any], writeback: Writeback | None = None) -> None:
        io.put_file(path, buffers, self._temp_names, fsync=self._fsync, writeback=writeback)

    def _write_batch(self, first: int, batch: Batch) -> None:
        stem = batch_stem(self.prefix, first)
        bin_name, json_name = stem + ".bin", stem + ".json"
        bin_path = os.path.join(self.directory, bin_name)
        json_path = os.path.join(self.directory, json_name)
        self._error_path = bin_path
        sink = Gathered()
        # (the encoder only writes: its pieces go to the file in one writev)
        encoded = self._encoder.encode(first, batch, cast(BinaryIO, sink), bin_name, json_name)
        self._put(bin_path, sink.buffers, self._writeback)
        del sink
        doc, bin_size = encoded.json, encoded.bin_size
        self._error_path = json_path
        self._put(json_path, [doc])
        self._unsynced += [bin_path, json_path]
        if self._fsync:
            # The two renames must be durable before the manifest that lists them can be.
            _fsync_path(self.directory)
        self._manifest["batches"].append({
            "first": first, "len": encoded.entries, "fn": json_name, "bin": bin_name,
            "json_size": len(doc), "bin_size": bin_size, "json_crc32": fileio.crc32(doc),
            "steps": batch.steps,
            "episodes": batch.new_episodes,
            **({} if encoded.index is None else {"index": encoded.index}),
            **({"codecs": list(encoded.codecs)} if encoded.codecs else {})})
        self._uncommitted += 1
        self._error_path = ""
        if self._on_batch_written is not None:
            # (the raw bytes: the batch target bounds what the buffer holds in memory)
            self._on_batch_written(encoded.raw_size + len(doc), batch.steps)
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
        self._commit_interval = min(self._max_commit_interval, max(
            MIN_COMMIT_INTERVAL, COMMIT_COST_FACTOR * (self._last_commit - start)))
        self._error_path = ""

    def _write_manifest(self) -> None:
        doc = dumps(self._manifest)
        if self._fsync:
            with fileio.atomic_write(self._manifest_path) as f:
                f.write(doc)
            self._unsynced.clear()
        else:
            self._put(self._manifest_path, [doc])

    def _sync_all(self) -> None:
        """fsyncs every file written since the last sync, then the directory."""
        paths, self._unsynced = self._unsynced, []
        for path in paths:
            _fsync_path(path)
        _fsync_path(self._manifest_path)
        _fsync_path(self.directory)
