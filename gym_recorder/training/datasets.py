"""Map-style datasets (``__len__`` / ``__getitem__`` returning numpy) for PyTorch and friends.

They never import torch: ``torch.utils.data.DataLoader(TransitionDataset(dir), batch_size=256,
shuffle=True, num_workers=4)`` collates the dicts of numpy arrays they return into tensors.
A dataset holds only the recording's location, the selected episodes and their lengths; it is
picklable, and each process opens its own :class:`RecordingReader` on first use (a reader opened
before a fork is never used in the child, so no open file or thread is shared across fork or
spawn). Constructing one reads the episodes' summaries (their rewards), never their
observations. Each process keeps the batches it decoded last in memory (up to ``cache_bytes``
of them): an item of an episode that one batch holds whole is a row of that decoded batch, so
shuffled items cost a batch decode only on a miss (the whole recording, if it fits, is decoded
once per process). An episode spread over several batches (long episodes of images) is read
whole and kept if every selected episode fits in ``cache_bytes``; otherwise an item reads its
own rows (:meth:`RecordingReader.episode_rows`), a few kB, not the episode.

Example:
    >>> from gym_recorder.training.datasets import TransitionDataset, WindowDataset
    >>> ds = TransitionDataset("recordings/cartpole")                  # doctest: +SKIP
    >>> ds[0]["obs"].dtype, len(ds)                                    # doctest: +SKIP
    (dtype('float32'), 215)
"""

from __future__ import annotations

import os
from dataclasses import replace
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..format.agents import refuse_multiagent
from ..read.episode import EpisodePart
from ..errors import EmptySelectionError, FormatError
from ..read.reader import Episode, RecordingReader
from ..read.rows import EpisodeRows
from .selection import episode_indices, writer_positions
from .itemcache import DEFAULT_CACHE_BYTES, ROWS_CACHE, _LRU, _WholeParts, _held
from .transitions import tree_map

__all__ = ["TransitionDataset", "EpisodeDataset", "WindowDataset"]


def _row(tree: Any, k: int) -> Any:
    """Row ``k`` of every leaf, as arrays of its own (never views of the cached batch)."""
    return tree_map(lambda leaf: leaf[k].copy() if isinstance(leaf, np.ndarray) else leaf[k],
                    tree)


def _copied(tree: Any) -> Any:
    """A tree's arrays (and lists of values) copied, so an item never shares the cache's."""
    return tree_map(lambda leaf: leaf.copy() if isinstance(leaf, np.ndarray) else list(leaf),
                    tree)


def _cut(ep: Episode | EpisodePart, n: int) -> Episode | EpisodePart:
    """``ep`` with its first ``n`` steps only (and their ``n + 1`` observations and infos)."""
    ended: dict[str, Any] = {"end": None} if isinstance(ep, Episode) else {"is_last": False}
    return replace(ep, observations=tree_map(lambda leaf: leaf[:n + 1], ep.observations),
                   actions=tree_map(lambda leaf: leaf[:n], ep.actions), rewards=ep.rewards[:n],
                   terminations=ep.terminations[:n], truncations=ep.truncations[:n],
                   infos=ep.infos[:n + 1], **ended)


class _RecordingDataset:
    """Location, selection and per-process reader shared by the datasets."""

    def __init__(self, location: str | os.PathLike[str], episodes: Sequence[int] | None,
                 verify: bool, cache_bytes: int) -> None:
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, (int, np.integer)) \
                or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be an int >= 0, got {cache_bytes!r}")
        self.location = os.fspath(location)
        self.verify = bool(verify)
        self.cache_bytes = int(cache_bytes)
        self._reader_pid: int | None = None
        self._reader_obj: RecordingReader | None = None
        self._cache = _LRU(self.cache_bytes)  # episodes read whole, by selection position
        self._whole: _WholeParts | None = None
        self._rows = _LRU(ROWS_CACHE)  # EpisodeRows (or None: read whole), by position
        self._fits: bool | None = None  # (see _source)
        self._writers: list[str] = []  # (set below: until then a reader needs no resolving)
        reader = self._reader()
        for m in reader._manifests:  # (their rows are every agent's at once)
            refuse_multiagent(m.multiagent, f"{type(self).__name__} ({self.location})")
        self.episodes = np.asarray(episode_indices(reader, episodes), dtype=np.int64)
        if len(self.episodes) == 0:
            raise EmptySelectionError(f"no episodes selected in {self.location}")
        summaries = list(reader.summaries())
        every = np.fromiter((s.length for s in summaries), dtype=np.int64, count=len(summaries))
        self.lengths = every[self.episodes]
        self.seeds = [summaries[int(e)].seed for e in self.episodes]
        # The selection as (writer, episode number within it): another process's reader of a
        # recording still being written numbers episodes anew (an earlier writer's new episodes
        # move every later writer's indices), so items are found by writer, not by index.
        writers, self._owner, self._numbers = writer_positions(reader, self.episodes)
        self._writers = [w["prefix"] for w in writers]
        self._resolved: np.ndarray | None = self.episodes  # this process's reader indices

    def _reader(self) -> RecordingReader:
        pid = os.getpid()
        if self._reader_obj is None or self._reader_pid != pid:
            # a reader inherited through fork is dropped, not used: it belongs to the parent
            self._reader_obj, self._reader_pid = None, None
            self._cache, self._whole, self._rows = (_LRU(self.cache_bytes), None,
                                                    _LRU(ROWS_CACHE))
            # (this dataset caches what it decodes: the reader keeps only what it reads in order)
            reader = RecordingReader(self.location, verify=self.verify, cache_bytes=0)
            self._resolved = None
            if self._writers:  # (empty while __init__ makes the selection)
                self._resolved = self._resolve(reader)
            self._reader_obj, self._reader_pid = reader, pid
        return self._reader_obj

    def _resolve(self, reader: RecordingReader) -> np.ndarray:
        """This reader's indices of the selected episodes (FormatError if one is gone)."""
        start, count = {}, 0
        for w in reader.writers:
            start[w["prefix"]], count = (count, w["episodes"]), count + w["episodes"]
        firsts = np.empty(len(self._writers), dtype=np.int64)
        for k, prefix in enumerate(self._writers):
            first, have = start.get(prefix, (None, 0))
            numbers = self._numbers[self._owner == k]
            if first is None or (len(numbers) and int(numbers.max()) >= have):
                raise FormatError(f"{self.location}: writer {prefix} no longer holds the "
                                  f"episodes this dataset was made with")
            firsts[k] = first
        resolved: np.ndarray = firsts[self._owner] + self._numbers
        return resolved

    def _source(self, e: int, by_rows: bool = True) -> Episode | EpisodePart | EpisodeRows:
        """Where the ``e``-th selected episode's items come from, cut to the steps it had when
        the dataset was made: its part in a decoded batch if one batch holds it whole; else
        (``by_rows``) its rows reader if it can be read by rows
        (:meth:`RecordingReader.episode_rows`); else the Episode, read whole."""
        reader = self._reader()
        assert self._resolved is not None
        index = int(self._resolved[e])
        n = int(self.lengths[e])
        if self._whole is None:
            self._whole = _WholeParts(reader, self.cache_bytes)
        part = self._whole.part(reader, index)
        if part is not None:
            # (an episode still being recorded has grown since the dataset was made: cut)
            return part if len(part.rewards) <= n else _cut(part, n)
        if by_rows and e not in self._cache:
            rows: EpisodeRows | None = self._rows.get(e) if e in self._rows else \
                self._rows.put(e, reader.episode_rows(index))
            if rows is not None and self._fits is None:
                # Whether every selected episode, read whole, fits in cache_bytes (judged by
                # the first episode read by rows): then each is read once and kept whole.
                per_step = rows.nbytes / max(len(rows), 1)
                self._fits = per_step * float(self.lengths.sum()) <= self.cache_bytes
            if rows is not None and not self._fits:
                return rows
        ep: Episode | EpisodePart | None = self._cache.get(e)
        if ep is None:
            ep = reader[index]
            if len(ep.rewards) > n:
                ep = _cut(ep, n)
            # (no more than cache_bytes of them: long episodes of images are tens of MB each)
            self._cache.put(e, ep, _held(ep))
        return ep

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_reader_obj=None, _reader_pid=None, _cache=_LRU(self.cache_bytes),
                     _whole=None, _rows=_LRU(ROWS_CACHE))
        return state

    def close(self) -> None:
        """Closes this process's reader (it is reopened on the next item)."""
        if self._reader_obj is not None and self._reader_pid == os.getpid():
            self._reader_obj.close()
        self._reader_obj, self._reader_pid = None, None
        self._cache, self._whole, self._rows = _LRU(self.cache_bytes), None, _LRU(ROWS_CACHE)

    @staticmethod
    def _check_index(i: Any, n: int) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"dataset indices must be ints, got {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {int(i)} out of range for a dataset of {n} items")
        return int(i) % n


class TransitionDataset(_RecordingDataset):
    """One item per step: ``obs``, ``next_obs``, ``action``, ``reward``, ``terminated``,
    ``truncated``, ``episode`` (reader index) and ``step`` (index in the episode).

    Args:
        location: the recording directory.
        episodes: reader indices to use (e.g. from :func:`gym_recorder.training.selection.select` or
            :func:`~gym_recorder.training.selection.split`); all by default.
        verify: check checksums while reading.
        cache_bytes: bytes of decoded batches (and of episodes read whole) each process keeps
            (default 128 MiB); an item of an episode that one batch holds whole is read from
            them.
    """

    def __init__(self, location: str | os.PathLike[str], episodes: Sequence[int] | None = None, *,
                 verify: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(location, episodes, verify, cache_bytes)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = self._check_index(i, len(self))
        e = int(np.searchsorted(self.starts, i, side="right")) - 1
        k = i - int(self.starts[e])
        ep = self._source(e)
        if isinstance(ep, EpisodeRows):  # a long episode: read this item's rows alone
            rows = ep
            obs = rows.rows("observations", k, k + 2)
            return {"obs": _row(obs, 0), "next_obs": _row(obs, 1),
                    "action": _row(rows.rows("actions", k, k + 1), 0),
                    "reward": rows.rows("rewards", k, k + 1)[0],
                    "terminated": rows.rows("terminations", k, k + 1)[0],
                    "truncated": rows.rows("truncations", k, k + 1)[0],
                    "episode": self.episodes[e], "step": np.int64(k)}
        return {"obs": _row(ep.observations, k), "next_obs": _row(ep.observations, k + 1),
                "action": _row(ep.actions, k), "reward": ep.rewards[k],
                "terminated": ep.terminations[k], "truncated": ep.truncations[k],
                "episode": self.episodes[e], "step": np.int64(k)}


class EpisodeDataset(_RecordingDataset):
    """One item per episode: ``observations`` (N + 1 rows), ``actions``, ``rewards``,
    ``terminations``, ``truncations`` (N rows), ``episode`` and ``seed`` (-1 for none).

    Items have different lengths: use ``DataLoader(ds, batch_size=None)`` or a collate of your
    own. Arguments as :class:`TransitionDataset`.
    """

    def __init__(self, location: str | os.PathLike[str], episodes: Sequence[int] | None = None, *,
                 verify: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__(location, episodes, verify, cache_bytes)

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = self._check_index(i, len(self))
        ep = self._source(i, by_rows=False)
        assert not isinstance(ep, EpisodeRows)
        seed = self.seeds[i]
        return {"observations": _copied(ep.observations), "actions": _copied(ep.actions),
                "rewards": ep.rewards.copy(), "terminations": ep.terminations.copy(),
                "truncations": ep.truncations.copy(),
                "episode": self.episodes[i], "seed": np.int64(-1 if seed is None else seed)}


class WindowDataset(_RecordingDataset):
    """One item per window of ``length`` consecutive steps of one episode, as
    :class:`gym_recorder.training.sampling.Windows` (same windows, same ``mask``, same padding).

    Args:
        location: the recording directory.
        length: steps per window.
        stride: steps between window starts within an episode.
        complete_only: only windows that lie inside their episode.
        episodes, verify, cache_bytes: as :class:`TransitionDataset`.

    Raises:
        EmptySelectionError: if ``length`` exceeds every selected episode's length.
    """

    def __init__(self, location: str | os.PathLike[str], length: int, stride: int = 1, *,
                 complete_only: bool = False, episodes: Sequence[int] | None = None,
                 verify: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        for name, v in (("length", length), ("stride", stride)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        super().__init__(location, episodes, verify, cache_bytes)
        if length > self.lengths.max():
            raise EmptySelectionError(f"a window of {length} steps is longer than every episode "
                                      f"(the longest has {int(self.lengths.max())})")
        self.length, self.stride = int(length), int(stride)
        span = self.lengths - (self.length - 1) if complete_only else self.lengths
        count = np.where(span > 0, (span - 1) // self.stride + 1, 0)
        self.owner = np.repeat(np.arange(len(count), dtype=np.int64), count)
        first = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
        self.offsets = (np.arange(int(first[-1]), dtype=np.int64) - first[:-1][self.owner]) \
            * self.stride

    def __len__(self) -> int:
        return len(self.owner)

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = self._check_index(i, len(self))
        e = int(self.owner[i])
        n = int(self.lengths[e])
        first = int(self.offsets[i])
        rows = first + np.arange(self.length, dtype=np.int64)
        mask = rows < n
        rows = np.minimum(rows, n - 1)
        ep = self._source(e)
        if isinstance(ep, EpisodeRows):  # a long episode: read this window's rows alone
            by_rows = ep
            stop = int(rows[-1]) + 1
            obs = by_rows.rows("observations", first, stop + 1)
            act, rew, term, trunc = (by_rows.rows(name, first, stop) for name in (
                "actions", "rewards", "terminations", "truncations"))
            local = rows - first
        else:
            obs, act, rew, term, trunc = (ep.observations, ep.actions, ep.rewards,
                                          ep.terminations, ep.truncations)
            local = rows

        def take(leaf: Any, shift: int = 0) -> Any:
            if isinstance(leaf, np.ndarray):
                return leaf[local + shift]
            return [leaf[int(r) + shift] for r in local]

        return {"obs": tree_map(take, obs), "next_obs": tree_map(lambda x: take(x, 1), obs),
                "action": tree_map(take, act), "reward": rew[local],
                "terminated": term[local], "truncated": trunc[local],
                "episode": np.full(self.length, self.episodes[e], dtype=np.int64), "step": rows,
                "mask": mask}
