"""Large arrays handed out on recycled pages.

An episode of several parts (an Atari episode of 500 frames is 50 MB) is read into one new
array. Memory that large comes straight from the kernel (``mmap``) and goes back to it when the
array is freed, so every such episode pays to fault in and zero its pages again before a byte
is read into them: about as much as the read itself. Smaller arrays do not pay this: the C
allocator keeps memory freed below 32 MB and hands it out again.

A :class:`PageRecycler` does the same for arrays of at least :data:`RECYCLE_BYTES`: each is
made on a block of anonymous memory (huge pages advised) that comes back to a short free list
once the last array using it is gone (the array, or any view of it: they all hold the block's
own ``memoryview``, whose end a weak reference reports). The next episode is then read into
pages already mapped. The process has one, :data:`PAGES`, which every reader uses, as the C
allocator is one: at most :data:`KEEP_BLOCKS` free blocks of at most :data:`KEEP_BYTES` in all
are kept; :meth:`PageRecycler.release` unmaps them.

The arrays are ordinary writable ndarrays; only their ``base`` differs (not None: a view of
that ``memoryview``), and ``ndarray.resize`` refuses them, as it refuses any view.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from math import prod
from typing import Any

import numpy as np

__all__ = ["PageRecycler", "PAGES", "RECYCLE_BYTES", "KEEP_BLOCKS", "KEEP_BYTES"]

# Arrays of at least this many bytes are made on recycled blocks (numpy's own threshold for
# advising huge pages, and well above where the C allocator stops keeping freed memory).
RECYCLE_BYTES = 4 << 20
# Free blocks kept for the next arrays: one being read into while the caller holds the last.
KEEP_BLOCKS = 2
KEEP_BYTES = 256 << 20
# Blocks are whole huge pages; a free block is reused for an array of at least this fraction
# of its size (so a long episode's block does not hold a short one's few pages).
_BLOCK = 2 << 20
_MIN_FILL = 0.75
# (None where mmap has no private anonymous maps, Windows: arrays are then numpy's own)
_PRIVATE = (mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            if hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS") else None)


class PageRecycler:
    """Makes large arrays on blocks of memory that come back when the arrays are gone."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # (a block can come back while one is handed out)
        self._free: list[mmap.mmap] = []
        self._out: dict[int, weakref.ref[memoryview]] = {}
        self._pid = os.getpid()
        self._released = False

    def empty(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
        """A new, uninitialised array (``np.empty``; on a recycled block when it is large).

        Raises:
            MemoryError, ValueError: as ``np.empty`` does.
        """
        nbytes = prod(shape) * dtype.itemsize
        if nbytes < RECYCLE_BYTES or dtype.hasobject or _PRIVATE is None:
            return np.empty(shape, dtype)
        size = -(-nbytes // _BLOCK) * _BLOCK
        block = self._take(size)
        if block is None:
            try:
                # (private: an anonymous map is shared memory by default, without huge pages)
                block = mmap.mmap(-1, size, flags=_PRIVATE)
            except OSError as e:
                raise MemoryError(f"cannot map {size} bytes") from e
            if hasattr(mmap, "MADV_HUGEPAGE"):
                try:
                    block.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass  # (a kernel without transparent huge pages: small pages then)
        flat = np.frombuffer(memoryview(block), dtype, prod(shape))
        # The object the array (and every view of it) keeps alive: numpy's memoryview of the
        # block. Were it ever the block itself, nothing could report the arrays' end: the
        # block is then not recycled (it lives as long as the array).
        base = flat.base
        if not isinstance(base, memoryview) or base.obj is not block:
            return flat.reshape(shape)
        with self._lock:
            ref = weakref.ref(base, lambda r, b=block: self._back(r, b))
            self._out[id(ref)] = ref
        out: np.ndarray = flat.reshape(shape)
        return out

    def release(self) -> None:
        """Unmaps the free blocks; blocks in use are unmapped when their arrays are gone."""
        with self._lock:
            free, self._free = self._free, []
            self._released = True
        for block in free:
            block.close()

    def _take(self, size: int) -> mmap.mmap | None:
        """A free block for an array of ``size`` bytes (rounded up to whole blocks)."""
        with self._lock:
            if self._pid != os.getpid():  # (a forked child: its own blocks from now on)
                self._pid, self._free, self._out = os.getpid(), [], {}
            self._released = False
            for k, block in enumerate(self._free):
                if _MIN_FILL * len(block) <= size <= len(block):
                    return self._free.pop(k)
        return None

    def _back(self, ref: weakref.ref[memoryview], block: mmap.mmap) -> None:
        """The last array on ``block`` is gone: keep the block, or unmap it."""
        with self._lock:
            self._out.pop(id(ref), None)
            if not self._released and self._pid == os.getpid():
                self._free.append(block)
                while len(self._free) > KEEP_BLOCKS or \
                        sum(len(b) for b in self._free) > KEEP_BYTES:
                    self._free.pop(0).close()
                return
        block.close()


PAGES = PageRecycler()
