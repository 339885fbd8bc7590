"""Batch writing: turns batches into a .bin, a .json and a manifest entry, in that order.

A background thread does the writing, so that the process stepping the environment only copies
values into memory. At most :data:`MAX_PENDING_BATCHES` batches wait for the thread; beyond that
:meth:`BatchWriter.submit` blocks, which bounds memory. Errors from the thread are raised as
:class:`WriteError` from the next ``submit``, ``flush`` or ``close``; the batches that could not be
written are kept in memory and retried by ``flush()`` and ``close()``. What is written, and in
which order, is :class:`~gym_recorder.record.batchfiles.BatchFiles`' job.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import RecorderError, RecordingClosedError, UnsupportedValueError, write_error
from ..format.codecs import Codec
from ..format.spaces import Layout
from .batch import Batch
from .batchfiles import BatchFiles
from .batchqueue import BatchQueue
from .prefix import default_prefix
from .writeback import (DEFAULT_WRITE_MODE, DEFAULT_WRITEBACK, WRITE_MODES, WRITEBACK_POLICIES,
                        AutoMode, SwitchInterval)

__all__ = ["BatchWriter", "default_prefix", "MAX_PENDING_BATCHES", "WRITEBACK", "WRITE_MODE",
           "WRITEBACK_POLICIES", "WRITE_MODES", "DEFAULT_WRITEBACK", "DEFAULT_WRITE_MODE"]

# Batches handed to the writer thread and not yet written; submit() blocks beyond this, so memory
# stays within (MAX_PENDING_BATCHES + 2) batches.
MAX_PENDING_BATCHES = 2
# The writer's choices (see record/writeback), read when a writer starts.
WRITEBACK = DEFAULT_WRITEBACK
WRITE_MODE = DEFAULT_WRITE_MODE


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
        self.files = BatchFiles(directory, prefix, header, obs_layout, act_layout, fsync=fsync,
                                writeback=WRITEBACK, on_batch_written=on_batch_written,
                                max_commit_interval=max_commit_interval, compression=compression)
        self.prefix = self.files.prefix
        self.directory = directory
        self._next_entry = 0
        self._dropped_steps = 0  # steps of batches that failed for a reason a retry cannot fix
        # A full queue blocks submit() until the writer has drained it (see batchqueue).
        self._queue: queue.Queue[Any] = BatchQueue(MAX_PENDING_BATCHES, low=0)
        self._lock = threading.Lock()
        self._failed: list[tuple[int, Batch]] = []  # batches not written, in order, for retry
        self._error: BaseException | None = None
        self._last_os_error: OSError | None = None  # its errno goes on later WriteErrors too
        self._closed = False
        self._inline = WRITE_MODE == "inline"
        self._handoff = WRITE_MODE == "handoff"
        self._auto = AutoMode() if WRITE_MODE == "auto" else None
        self._thread = threading.Thread(target=self._run, name=f"gym_recorder:{self.prefix}",
                                        daemon=True)
        if not self._inline:
            self._thread.start()

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
        with self._lock, self.files.commit_lock:  # (the thread may be committing: "auto")
            try:
                self.files.write_batch(first, batch)
            except OSError as e:
                self._error = e
                self._keep_failed(first, batch)
                self._raise_pending()
            except Exception as e:  # noqa: BLE001  (a retry cannot help: drop, and say so)
                self._error = e
                self._dropped_steps += batch.steps
                batch.release()
                self._raise_pending()
        if self.files.commit_due():
            try:
                self.files.commit()
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
                    self.files.write_batch(first, batch)
                except OSError as e:
                    self._error = e
                    self._raise_pending()
                except UnsupportedValueError:
                    self._failed.pop(0)
                    batch.release()
                    raise
                self._failed.pop(0)
            self._error = None
            if self.files.uncommitted:
                try:
                    self.files.commit()
                except OSError as e:
                    self._error = e
                    self._raise_pending()
        try:
            self.files.sync_all()
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
        try:
            self.files.complete()
        except OSError as e:
            raise write_error(f"cannot write {self.files.manifest_path}: {e}", e) from e

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            if self.files.uncommitted:
                # Written batches wait at most the commit interval for their commit.
                try:
                    item = self._queue.get(timeout=max(self.files.commit_wait(), 0.0))
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
                    self.files.write_batch(first, batch)
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
                if self.files.commit_due():
                    self._commit_in_thread()
            finally:
                # Drop our references before waiting for the next batch: a batch kept alive
                # keeps its columns and entry table alive too.
                item = batch = None
                self._queue.task_done()

    def _commit_in_thread(self) -> None:
        try:
            self.files.commit()
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
            f"cannot write batch {self.files.error_path or self.prefix} in {self.directory}: {cause}; "
            f"{len(self._failed)} batch(es) with {steps} steps are kept in memory and will be "
            "retried by flush() or close()", error or self._last_os_error) from error

    # -- writing ------------------------------------------------------------------------------
