"""The reader's parsed batches, kept in memory between reads.

Reading in order needs few of them: :data:`BATCH_CACHE_SIZE` is enough to iterate and to stitch
an episode whose parts span consecutive batches, and sequential readers (iteration, exports,
``transitions``, Ray read tasks) stay at that. Reading at random (``reader[i]`` for random
``i``) would parse a batch again at nearly every call on a recording of more batches than that:
a batch of 2,300 short CartPole episodes takes about 20 ms to parse and plan, for an episode
of 20 µs. So once a batch that was evicted is asked for
again, the cache grows to :data:`BATCH_CACHE_BYTES` of estimated memory before it evicts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from .batchfile import Batch

__all__ = ["BatchCache", "BATCH_CACHE_SIZE", "BATCH_CACHE_BYTES", "PARSED_JSON_FACTOR"]

# Parsed batch files always kept: enough to iterate in order and to stitch an episode whose
# parts span consecutive batches.
BATCH_CACHE_SIZE = 4
# Estimated memory the cache may hold once the reader reads at random.
BATCH_CACHE_BYTES = 128 << 20
# Python objects of a parsed batch JSON per byte of it (measured: 2.6 MB of CartPole entries
# parse to ~12.7 MB); a batch also holds its .bin when its entries are small.
PARSED_JSON_FACTOR = 5

Key = tuple[str, int]


class BatchCache:
    """A least-recently-used cache of parsed batches (see the module's docstring).

    Args:
        limit_bytes: estimated memory it may grow to once a batch is asked for again after
            being evicted (it never holds fewer than :data:`BATCH_CACHE_SIZE` batches).
    """

    def __init__(self, limit_bytes: int = BATCH_CACHE_BYTES) -> None:
        self._limit = limit_bytes
        self._items: OrderedDict[Key, tuple[Batch, int]] = OrderedDict()
        self._total = 0
        self._evicted: set[Key] = set()
        self._random = False  # a batch was asked for again after its eviction

    def get(self, key: Key, load: Callable[[], tuple[Batch, int]]) -> Batch:
        """The batch of ``key`` (made the most recently used), loaded by ``load`` (the batch
        and its estimated bytes: :func:`estimated_bytes`) when not held."""
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
            return item[0]
        batch, cost = load()
        if key in self._evicted:
            self._random = True
        self._items[key] = (batch, cost)
        self._total += cost
        while len(self._items) > BATCH_CACHE_SIZE and (not self._random
                                                       or self._total > self._limit):
            old_key, (old, old_cost) = self._items.popitem(last=False)
            self._total -= old_cost
            self._evicted.add(old_key)
            old.close()
        return batch

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Drops (and closes) every batch; what was evicted before is forgotten."""
        items = list(self._items.values())
        self._items.clear()
        self._total = 0
        self._evicted.clear()
        self._random = False
        for batch, _ in items:
            batch.close()


def estimated_bytes(json_size: int, bin_size: int) -> int:
    """The memory a batch may hold parsed: its JSON's objects and, at most, its whole .bin."""
    return json_size * PARSED_JSON_FACTOR + bin_size
