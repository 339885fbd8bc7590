"""The datasets' per-process memory: what each process keeps of the batches and episodes it read.

One job: :class:`_LRU` (a least-recently-used cache bounded by its entries' cost) and
:class:`_WholeParts` (one process's decoded batches, for the episodes that one batch holds
whole), sized by :data:`DEFAULT_CACHE_BYTES` and :data:`ROWS_CACHE`; what an item is made of
them is :mod:`gym_recorder.training.datasets`'.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..read.episode import BatchInfo, EpisodePart
from ..read.reader import Episode, RecordingReader
from .transitions import tree_leaves

__all__ = ["DEFAULT_CACHE_BYTES", "ROWS_CACHE"]

# Episodes spread over several batches whose checked references are kept per process (an LRU
# of small objects: an item of such an episode reads its own rows through them).
ROWS_CACHE = 256
# Bytes of decoded batches kept in memory per process (an LRU; the batch read last is always
# kept): items of the episodes a batch holds whole are rows of its decoding.
DEFAULT_CACHE_BYTES = 128 << 20


def _nbytes(tree: Any) -> int:
    """Bytes of the arrays of a tree (a list of values counts 64 bytes a row)."""
    return sum(int(leaf.nbytes) if isinstance(leaf, np.ndarray) else 64 * len(leaf)
               for _, leaf in tree_leaves(tree))


def _held(ep: Episode | EpisodePart) -> int:
    """The bytes an episode (or part) holds: its observations, actions and step columns."""
    return _nbytes(ep.observations) + _nbytes(ep.actions) + 17 * len(ep.rewards)


class _LRU:
    """A least-recently-used cache of at most ``limit`` in total cost (each entry's given cost;
    the entry put last is always kept)."""

    def __init__(self, limit: float) -> None:
        self._limit = limit
        self._total = 0
        self._items: OrderedDict[int, tuple[Any, int]] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self._items

    def get(self, key: int) -> Any:
        """The value of ``key`` (made the most recently used), or None."""
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: int, value: Any, cost: int = 1) -> Any:
        """Keeps ``value`` under ``key``, dropping the least recently used beyond the limit."""
        self._items[key] = (value, cost)
        self._total += cost
        while self._total > self._limit and len(self._items) > 1:
            self._total -= self._items.popitem(last=False)[1][1]
        return value


class _WholeParts:
    """One process's decoded batches, for the episodes that one batch holds whole.

    Args:
        reader: this process's reader.
        cache_bytes: bytes of decoded batches to keep (the last one is always kept).
    """

    def __init__(self, reader: RecordingReader, cache_bytes: int) -> None:
        self._infos: list[BatchInfo] = reader.batches()
        n = len(reader)
        count = np.zeros(n, dtype=np.int64)
        batch = np.full(n, -1, dtype=np.int64)
        for j, info in enumerate(self._infos):
            held = np.fromiter(info.episodes, dtype=np.int64, count=len(info.episodes))
            held = held[(held >= 0) & (held < n)]
            np.add.at(count, held, 1)
            batch[held] = j
        batch[count != 1] = -1
        self._batch = batch  # per reader index: the one batch that holds it, or -1
        self._cache = _LRU(cache_bytes)  # batch position -> {reader index: its part}

    def part(self, reader: RecordingReader, index: int) -> EpisodePart | None:
        """The episode of reader index ``index`` as its one part, or None if it has several."""
        j = int(self._batch[index]) if 0 <= index < len(self._batch) else -1
        if j < 0:
            return None
        parts: dict[int, EpisodePart] | None = self._cache.get(j)
        if parts is None:
            parts = {p.episode: p for p in reader.read_batch(self._infos[j])}
            self._cache.put(j, parts, sum(_held(p) for p in parts.values()))
        part = parts.get(index)
        return part if part is not None and part.part == 0 else None
