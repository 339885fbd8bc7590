"""Map-style datasets (``__len__`` / ``__getitem__`` returning numpy) for PyTorch and friends.

They never import torch: ``torch.utils.data.DataLoader(TransitionDataset(dir), batch_size=256,
shuffle=True, num_workers=4)`` collates the dicts of numpy arrays they return into tensors.
A dataset holds only the recording's location, the selected episodes and their lengths; it is
picklable, and each process opens its own :class:`RecordingReader` on first use (a reader opened
before a fork is never used in the child, so no open file or thread is shared across fork or
spawn). Constructing one reads the episodes' summaries (their rewards), never their
observations. Each process keeps its last few episodes in memory, so neighbouring items are
cheap; shuffled access reads one episode per item.

Example:
    >>> from gym_recorder.datasets import TransitionDataset, WindowDataset
    >>> ds = TransitionDataset("recordings/cartpole")                  # doctest: +SKIP
    >>> ds[0]["obs"].dtype, len(ds)                                    # doctest: +SKIP
    (dtype('float32'), 215)
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import replace
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import EmptySelectionError, FormatError
from .reader import Episode, RecordingReader
from .selection import episode_indices, writer_positions
from .transitions import tree_map

__all__ = ["TransitionDataset", "EpisodeDataset", "WindowDataset"]

# Episodes kept in memory per process (an LRU), so that items of one episode read it once.
EPISODE_CACHE = 8


def _row(tree: Any, k: int) -> Any:
    return tree_map(lambda leaf: leaf[k], tree)


def _cut(ep: Episode, n: int) -> Episode:
    """``ep`` with its first ``n`` steps only (and their ``n + 1`` observations and infos)."""
    return replace(ep, observations=tree_map(lambda leaf: leaf[:n + 1], ep.observations),
                   actions=tree_map(lambda leaf: leaf[:n], ep.actions), rewards=ep.rewards[:n],
                   terminations=ep.terminations[:n], truncations=ep.truncations[:n],
                   infos=ep.infos[:n + 1], end=None)


class _RecordingDataset:
    """Location, selection and per-process reader shared by the datasets."""

    def __init__(self, location: str | os.PathLike[str], episodes: Sequence[int] | None,
                 verify: bool) -> None:
        self.location = os.fspath(location)
        self.verify = bool(verify)
        self._reader_pid: int | None = None
        self._reader_obj: RecordingReader | None = None
        self._cache: OrderedDict[int, Episode] = OrderedDict()
        self._writers: list[str] = []  # (set below: until then a reader needs no resolving)
        reader = self._reader()
        self.episodes = np.asarray(episode_indices(reader, episodes), dtype=np.int64)
        if len(self.episodes) == 0:
            raise EmptySelectionError(f"no episodes selected in {self.location}")
        n = len(reader)
        every = np.fromiter((s.length for s in reader.summaries()), dtype=np.int64, count=n)
        self.lengths = every[self.episodes]
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
            self._cache = OrderedDict()
            reader = RecordingReader(self.location, verify=self.verify)
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

    def _episode(self, e: int) -> Episode:
        """The ``e``-th selected episode, cut to the steps it had when the dataset was made."""
        reader = self._reader()
        ep = self._cache.get(e)
        if ep is None:
            assert self._resolved is not None
            ep = reader[int(self._resolved[e])]
            n = int(self.lengths[e])
            if len(ep.rewards) > n:  # an episode still being recorded has grown since
                ep = _cut(ep, n)
            self._cache[e] = ep
            if len(self._cache) > EPISODE_CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(e)
        return ep

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_reader_obj=None, _reader_pid=None, _cache=OrderedDict())
        return state

    def close(self) -> None:
        """Closes this process's reader (it is reopened on the next item)."""
        if self._reader_obj is not None and self._reader_pid == os.getpid():
            self._reader_obj.close()
        self._reader_obj, self._reader_pid, self._cache = None, None, OrderedDict()

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
        episodes: reader indices to use (e.g. from :func:`gym_recorder.selection.select` or
            :func:`~gym_recorder.selection.split`); all by default.
        verify: check checksums while reading.
    """

    def __init__(self, location: str | os.PathLike[str], episodes: Sequence[int] | None = None, *,
                 verify: bool = False) -> None:
        super().__init__(location, episodes, verify)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = self._check_index(i, len(self))
        e = int(np.searchsorted(self.starts, i, side="right")) - 1
        k = i - int(self.starts[e])
        ep = self._episode(e)
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
                 verify: bool = False) -> None:
        super().__init__(location, episodes, verify)

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, i: int) -> dict[str, Any]:
        i = self._check_index(i, len(self))
        ep = self._episode(i)
        return {"observations": ep.observations, "actions": ep.actions, "rewards": ep.rewards,
                "terminations": ep.terminations, "truncations": ep.truncations,
                "episode": self.episodes[i],
                "seed": np.int64(-1 if ep.seed is None else ep.seed)}


class WindowDataset(_RecordingDataset):
    """One item per window of ``length`` consecutive steps of one episode, as
    :class:`gym_recorder.sampling.Windows` (same windows, same ``mask``, same padding).

    Args:
        location: the recording directory.
        length: steps per window.
        stride: steps between window starts within an episode.
        complete_only: only windows that lie inside their episode.
        episodes, verify: as :class:`TransitionDataset`.

    Raises:
        EmptySelectionError: if ``length`` exceeds every selected episode's length.
    """

    def __init__(self, location: str | os.PathLike[str], length: int, stride: int = 1, *,
                 complete_only: bool = False, episodes: Sequence[int] | None = None,
                 verify: bool = False) -> None:
        for name, v in (("length", length), ("stride", stride)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        super().__init__(location, episodes, verify)
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
        ep = self._episode(e)
        n = len(ep.rewards)
        rows = int(self.offsets[i]) + np.arange(self.length, dtype=np.int64)
        mask = rows < n
        rows = np.minimum(rows, n - 1)

        def take(leaf: Any, shift: int = 0) -> Any:
            if isinstance(leaf, np.ndarray):
                return leaf[rows + shift]
            return [leaf[int(r) + shift] for r in rows]

        return {"obs": tree_map(take, ep.observations),
                "next_obs": tree_map(lambda x: take(x, 1), ep.observations),
                "action": tree_map(take, ep.actions), "reward": ep.rewards[rows],
                "terminated": ep.terminations[rows], "truncated": ep.truncations[rows],
                "episode": np.full(self.length, self.episodes[e], dtype=np.int64), "step": rows,
                "mask": mask}
