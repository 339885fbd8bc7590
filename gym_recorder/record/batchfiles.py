"""A writer's files: each batch's .bin then .json, and the manifest whose rewrite commits them.

:class:`BatchFiles` owns what a writer has on disk and does it in the format's order (see
"Durability" in :mod:`gym_recorder.format`): a batch's .bin, then its .json, each to a temporary
file renamed into place, then (at most every commit interval) the manifest that lists them. It
knows nothing of threads or retries: :class:`~gym_recorder.record.writer.BatchWriter` decides
which thread calls it, and what to do when it raises.
"""

from __future__ import annotations

import datetime
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from .._version import __version__
from ..format import (FORMAT_NAME, FORMAT_VERSION, RAW_FORMAT_VERSION, batch_stem, check_prefix,
                      fileio, manifest_name)
from ..format.codecs import Codec
from ..format.fileio import dumps, fsync_path
from ..format.spaces import Layout
from . import writeback as io
from .batch import Batch
from .encode import BatchEncoder
from .prefix import default_prefix
from .writeback import Gathered, TempNames, Writeback

__all__ = ["BatchFiles", "MIN_COMMIT_INTERVAL", "COMMIT_COST_FACTOR", "MAX_COALESCED_BATCHES"]

# The manifest is rewritten at most this often (seconds) while batches stream in, so that one
# rewrite commits several batches; written batches wait at most this long for their commit.
MIN_COMMIT_INTERVAL = 0.05
# ...and at least this many times as long as the last rewrite took (a manifest listing 20,000
# batches takes ~50 ms to rewrite; rewrites then stay under 5% of the writer's time).
COMMIT_COST_FACTOR = 20
# ...and at most this many batches wait for one commit.
MAX_COALESCED_BATCHES = 16


class BatchFiles:
    """The files of one writer prefix in a recording directory: its batches and its manifest.

    Args: as :class:`~gym_recorder.record.writer.BatchWriter`'s, plus ``writeback``, the
    page-cache policy of the .bin files (see :mod:`gym_recorder.record.writeback`).

    Raises:
        FileExistsError: if the prefix already has a manifest in the directory.
        ValueError: if the prefix is not a valid file-name prefix.
    """

    def __init__(self, directory: str, prefix: str | None, header: dict[str, Any],
                 obs_layout: Layout, act_layout: Layout, *, fsync: bool, writeback: str,
                 on_batch_written: Callable[[int, int], None] | None,
                 max_commit_interval: float | None, compression: Codec | None) -> None:
        self.prefix = check_prefix(prefix) if prefix is not None else default_prefix()
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.manifest_path = os.path.join(directory, manifest_name(self.prefix))
        if os.path.lexists(self.manifest_path):
            raise FileExistsError(
                f"{self.manifest_path} exists: the prefix {self.prefix!r} is already used in "
                "this directory (pick another file_prefix, or None for a unique one)")
        self._fsync = fsync
        self._writeback = Writeback(writeback)
        self._temp_names = TempNames()
        self._on_batch_written = on_batch_written
        self.manifest = {
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
            k: v for k, v in self.manifest.items() if k not in ("batches", "complete")},
            obs_layout, act_layout, compression)
        self.uncommitted = 0  # batches written but not yet listed in the manifest on disk
        self.error_path = ""  # the file being written, for messages
        self.commit_lock = threading.Lock()  # the thread and flush() may both commit
        self._last_commit = time.monotonic()
        self._commit_interval = MIN_COMMIT_INTERVAL
        # A written batch waits at most this long for its commit, however slow rewrites get
        # (the recorder's flush interval bounds what a killed process loses).
        self._max_commit_interval = math.inf if max_commit_interval is None else \
            float(max_commit_interval)
        self._unsynced: list[str] = []
        # The manifest exists from the start (with no batches): it claims the prefix, and a
        # reader sees the recording's spaces even before the first batch.
        self.write_manifest()

    def commit_wait(self) -> float:
        """Seconds until the batches written since the last commit are due for theirs."""
        return self._last_commit + self._commit_interval - time.monotonic()

    def commit_due(self) -> bool:
        """True when one manifest rewrite should now commit the batches written since the last
        (replacing a file costs a writeback on ext4: one rewrite commits many batches)."""
        return bool(self.uncommitted) and (self.uncommitted >= MAX_COALESCED_BATCHES
                                           or self.commit_wait() <= 0)

    def write_batch(self, first: int, batch: Batch) -> None:
        """Writes a batch's .bin, then its .json, and lists it in the manifest to commit."""
        stem = batch_stem(self.prefix, first)
        bin_name, json_name = stem + ".bin", stem + ".json"
        bin_path = os.path.join(self.directory, bin_name)
        json_path = os.path.join(self.directory, json_name)
        self.error_path = bin_path
        sink = Gathered()
        # (the encoder only writes: its pieces go to the file in one writev)
        encoded = self._encoder.encode(first, batch, cast(BinaryIO, sink), bin_name, json_name)
        self._put(bin_path, sink.buffers, self._writeback)
        del sink
        doc, bin_size = encoded.json, encoded.bin_size
        self.error_path = json_path
        self._put(json_path, [doc])
        self._unsynced += [bin_path, json_path]
        if self._fsync:
            # The two renames must be durable before the manifest that lists them can be.
            fsync_path(self.directory)
        self.manifest["batches"].append({
            "first": first, "len": encoded.entries, "fn": json_name, "bin": bin_name,
            "json_size": len(doc), "bin_size": bin_size, "json_crc32": fileio.crc32(doc),
            "steps": batch.steps,
            "episodes": batch.new_episodes,
            **({} if encoded.index is None else {"index": encoded.index}),
            **({"codecs": list(encoded.codecs)} if encoded.codecs else {})})
        self.uncommitted += 1
        self.error_path = ""
        if self._on_batch_written is not None:
            # (the raw bytes: the batch target bounds what the buffer holds in memory)
            self._on_batch_written(encoded.raw_size + len(doc), batch.steps)
        batch.release()

    def commit(self) -> None:
        """Rewrites the manifest so that it lists every batch written so far."""
        with self.commit_lock:
            self.error_path = self.manifest_path
            start = time.monotonic()
            self.write_manifest()
            self.uncommitted = 0
        self._last_commit = time.monotonic()
        # The manifest grows with the recording: space rewrites so they stay a small share.
        self._commit_interval = min(self._max_commit_interval, max(
            MIN_COMMIT_INTERVAL, COMMIT_COST_FACTOR * (self._last_commit - start)))
        self.error_path = ""

    def write_manifest(self) -> None:
        """Replaces the manifest on disk by the one in memory (atomically)."""
        doc = dumps(self.manifest)
        if self._fsync:
            with fileio.atomic_write(self.manifest_path) as f:
                f.write(doc)
            self._unsynced.clear()
        else:
            self._put(self.manifest_path, [doc])

    def sync_all(self) -> None:
        """fsyncs every file written since the last sync, then the manifest and directory."""
        paths, self._unsynced = self._unsynced, []
        for path in paths:
            fsync_path(path)
        fsync_path(self.manifest_path)
        fsync_path(self.directory)

    def complete(self) -> None:
        """Marks the manifest complete, writes it, and makes every file durable."""
        self.manifest["complete"] = True
        self._writeback.close()
        self.write_manifest()
        self.sync_all()

    def _put(self, path: str, buffers: list[Any], writeback: Writeback | None = None) -> None:
        io.put_file(path, buffers, self._temp_names, fsync=self._fsync, writeback=writeback)
