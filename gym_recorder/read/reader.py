"""The reader: opens a recording, validates everything, hands out episodes.

A recording is untrusted input. Every manifest, batch and array reference is checked before use
(see :mod:`gym_recorder.format`); problems raise :class:`FormatError` naming the file. Arrays are
read into memory the arrays own (only an episode's rows, straight into its arrays, through its
batches' plans; while iterating, copied out of each batch's .bin read once), so they stay valid
after the reader is closed. Nothing is ever unpickled.

The steps of reading live in modules of their own: :mod:`~gym_recorder.read.storage` (where the bytes
come from), :mod:`~gym_recorder.read.manifest` (the writers and their batches),
:mod:`~gym_recorder.read.batchfile` (a batch's JSON) and :mod:`~gym_recorder.read.plan` (where its
arrays lie), :mod:`~gym_recorder.read.decode` (a batch without a plan, entry by entry),
:mod:`~gym_recorder.read.assemble` (parts into an episode), :mod:`~gym_recorder.read.legacy`
(gym-recording files) and
:mod:`~gym_recorder.read.batches` (a recording batch by batch). This module holds the reader itself:
its lifetime, refresh, indexing and iteration; :mod:`~gym_recorder.read.bulk` its columns, rows,
batch-by-batch reading and summaries.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from .assemble import PartItem, make_episode, plan_episode, stitched_episode
from .batchcache import BATCH_CACHE_BYTES, BatchCache, estimated_bytes
from .batches import OpenEpisodes, episode_items, hold_bin, iterate
from .bulk import BulkReading, naming_urls_method as _naming_urls
from .batchfile import Batch, parse_batch
from .decode import Decoder
from .episode import BatchInfo, Episode, EpisodePart, EpisodeSummary
from ..errors import FormatError, RecordingClosedError
from ..format import ENDS
from .legacy import legacy_episode
from ..format.edits import EditState
from .manifest import Manifest, load_edits, load_manifests
from ..format.spaces import build_space
from .storage import Storage, located, open_storage

__all__ = ["RecordingReader", "Episode", "EpisodeSummary", "BatchInfo", "EpisodePart",
           "scan_recorded_traces", "ENDS"]


_UNKNOWN_SIZE = 1 << 20


# The validated manifest, under the name code written against the one-module reader imports.
_Manifest = Manifest


class RecordingReader(BulkReading):
    """Reads a recording directory: every writer's episodes, in a deterministic order.

    Writers are ordered by their manifest's creation time, then prefix (legacy recordings first,
    by name); episodes by their number within a writer. Opening reads only the manifests;
    fetching an episode parses only the batches that hold it.

    Example:
        >>> with RecordingReader(tmp_dir) as reader:
        ...     for episode in reader:
        ...         print(episode.length, episode.total_reward)

    Args:
        location: the recording directory, or a URL (``s3://bucket/run``, read through fsspec:
            see :func:`gym_recorder.read.storage.open_storage`), or a
            :class:`~gym_recorder.read.storage.Storage`.
        verify: check every array's CRC-32 while reading (raises :class:`ChecksumError`).
        storage_options: fsspec options for a URL (credentials, endpoint).
        cache_bytes: estimated memory of parsed batch files the reader may keep once it reads
            at random (asks again for a batch it let go); it always keeps the few needed to
            read in order. 0 keeps only those (a reader whose caller caches, as the datasets
            and Ray's read tasks do). See :mod:`gym_recorder.read.batchcache`.

    Raises:
        FormatError: if a manifest is malformed or of an unsupported version.
        FileNotFoundError: if the directory does not exist.
    """

    def __init__(self, location: str | os.PathLike[str] | Storage, *, verify: bool = False,
                 storage_options: dict[str, Any] | None = None,
                 cache_bytes: int = BATCH_CACHE_BYTES, show_deleted: bool = False) -> None:
        if type(cache_bytes) is not int or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, not {cache_bytes!r}")
        self._storage: Storage = open_storage(location, storage_options)
        self._directory = self._storage.location
        self._decoder = Decoder(self._storage, verify)
        self._cache = BatchCache(cache_bytes)
        self._closed = False
        self._show_deleted = show_deleted
        self._manifests: list[Manifest] = []
        self._starts: list[int] = []
        self._count = 0
        self.refresh()

    # -- the directory ------------------------------------------------------------------------

    @_naming_urls
    def refresh(self) -> None:
        """Re-reads the manifests, to see batches committed since the reader was opened.

        The reader always shows a consistent snapshot: only batches listed in a manifest.
        """
        self._check_open()
        forget = getattr(self._storage, "forget", None)
        if forget is not None:
            forget()  # files replaced since (by repair) are opened anew
        self._edits = load_edits(self._storage)
        shown = self._edits
        if self._show_deleted:
            shown = EditState(self._edits.generation, {}, self._edits.replaced,
                              self._edits.pending)
        manifests = load_manifests(self._storage, shown)
        self._manifests = manifests
        self._starts = []
        count = 0
        for m in manifests:
            self._starts.append(count)
            count += m.shown  # (episodes deleted by an edit are not shown)
        self._count = count
        self._by_prefix = {m.prefix: k for k, m in enumerate(manifests)}
        self._open = OpenEpisodes(self._batch)
        self._clear_cache()

    @property
    def edits(self) -> EditState:
        """The recording's edit state as of the last :meth:`refresh` (see
        :mod:`gym_recorder.edit`): the episodes it hides, by writer and number."""
        return self._edits

    def stable_id(self, index: int) -> tuple[str, int]:
        """An episode's stable id: its writer's prefix and its number within the writer (an
        index shifts when an edit deletes or restores an earlier episode; this does not)."""
        _, m, number = self._locate(index)
        return m.prefix, number

    @property
    def directory(self) -> str:
        """The recording directory (or URL)."""
        return self._directory

    @property
    def storage(self) -> Storage:
        """Where the reader reads every byte from."""
        return self._storage

    @property
    def writers(self) -> list[dict[str, Any]]:
        """One dict per writer: prefix, env_id, episodes (shown), recorded (its episodes before
        edits), deleted (hidden by an edit), batches, complete, and its manifest."""
        return [_writer_entry(m) for m in self._manifests]

    def _first_described(self) -> Manifest | None:
        return next((m for m in self._manifests if not m.legacy), None)

    @property
    def observation_space(self) -> gym.Space[Any] | None:
        """The observation space rebuilt from the recording (the first writer's), or None."""
        m = self._first_described()
        return None if m is None else build_space(m.observation_space_desc,
                                                  f"{m.name} observation_space")

    @property
    def action_space(self) -> gym.Space[Any] | None:
        """The action space rebuilt from the recording (the first writer's), or None."""
        m = self._first_described()
        return None if m is None else build_space(m.action_space_desc, f"{m.name} action_space")

    @property
    def env_id(self) -> str | None:
        """The env id of the first writer that recorded one."""
        return next((m.env_id for m in self._manifests if m.env_id), None)

    # -- episodes --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _locate(self, index: int) -> tuple[int, Manifest, int]:
        """The episode's normalised index, its writer, and its number within the writer."""
        self._check_open()
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"episode indices must be integers, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"episode {index} out of range ({self._count} episodes)")
        k = bisect.bisect_right(self._starts, index) - 1
        m = self._manifests[k]
        return index, m, m.number(index - self._starts[k])

    @_naming_urls
    def __getitem__(self, index: int) -> Episode:
        index, m, number = self._locate(index)
        b = m.first_batch(number)
        if m.legacy:
            return legacy_episode(self._decoder, m, self._batch(m, b), b, number - m.starts[b],
                                  index)
        items = self._parts(m, number)
        batch = items[0][3]
        batch.fetches += 1
        if batch.fetches == 2:  # (read at random: a batch's small entries copied from memory)
            hold_bin(self._decoder, batch, items[0][0])
        episode = plan_episode(self._decoder, m, items, index)
        if episode is not None:
            return episode
        if len(items) > 1:
            return stitched_episode(self._decoder, m, items, index)
        binfo, entry, part_no, batch = items[0]
        dec = self._decoder
        p = dec.load_part(m, dec.plan_part(m, binfo, entry, part_no),
                          dec.batch_size(batch, binfo), data=batch.data)
        return make_episode(m, index, p, p, p.obs, p.act, *p.columns(), p.infos)

    def __iter__(self) -> Iterator[Episode]:
        """Every episode in order, as indexing gives them.

        (Its FormatErrors name a remote recording's files by URL, as indexing's do.)
        """
        episodes = self._episodes()
        storage = self._storage
        while True:
            try:
                episode = next(episodes)
            except StopIteration:
                return
            except FormatError as e:
                named = located(e, storage)
                if named is e:
                    raise
                raise named from e
            yield episode

    def _episodes(self) -> Iterator[Episode]:
        """Every episode in order, as indexing gives them (see :func:`iterate`)."""
        self._check_open()
        manifests = self._manifests
        return iterate(manifests, self._starts, self._count, self._decoder, self._batch,
                       self.__getitem__,
                       lambda: self._manifests is not manifests or self._closed)

    def close(self) -> None:
        """Releases cached batches and closes their files. Episodes already returned stay valid."""
        self._clear_cache()
        self._storage.close()
        self._closed = True

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RecordingClosedError("the RecordingReader is closed")

    # -- loading ------------------------------------------------------------------------------

    def _batch(self, m: Manifest, b: int) -> Batch:
        """Batch b of writer m, parsed (kept in the reader's :class:`BatchCache`)."""
        def load() -> tuple[Batch, int]:
            info = m.batches[b]
            sizes = [info.get(name) for name in ("json_size", "bin_size")]
            # (a gym-recording manifest has neither: a batch then counts as 1 MiB of each)
            cost = estimated_bytes(*(x if type(x) is int else _UNKNOWN_SIZE for x in sizes))
            return parse_batch(self._storage, m, b), cost

        return self._cache.get((m.name, b), load)

    def _clear_cache(self) -> None:
        self._cache.clear()

    def _parts(self, m: Manifest, number: int) -> list[PartItem]:
        """(batch info, entry, part number, batch) for each part of a writer's episode."""
        return episode_items(m, number, self._batch)


def _writer_entry(m: Manifest) -> dict[str, Any]:
    return {"prefix": m.prefix, "env_id": m.env_id, "episodes": m.shown,
            "recorded": m.episodes, "deleted": m.episodes - m.shown,
            "batches": len(m.batches), "complete": m.complete, "legacy": m.legacy,
            "manifest": m.doc}


def scan_recorded_traces(directory: str | os.PathLike[str],
                         episode_cb: Callable[[Any, Any, Any], Any],
                         max_episodes: int | None = None) -> None:
    """Calls ``episode_cb(observations, actions, rewards)`` for every episode, in order.

    The same signature as OpenAI gym-recording's function, for code that used it.

    Args:
        directory: the recording directory.
        episode_cb: called once per episode.
        max_episodes: stop after this many episodes.
    """
    with RecordingReader(directory) as reader:
        for n, episode in enumerate(reader):
            if max_episodes is not None and n >= max_episodes:
                return
            episode_cb(episode.observations, episode.actions, episode.rewards)
