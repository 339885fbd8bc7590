"""The queue between the stepping thread and the writer thread, with backpressure in bursts.

A plain bounded queue wakes a blocked producer as soon as one slot frees: when the writer is the
bottleneck (the disk, or page-cache pressure from another process), the stepping thread then
sleeps and wakes once per batch, and on a loaded machine every wake-up waits for a core and for
the GIL. :class:`BatchQueue` blocks a full producer until the queue has drained to ``low`` items,
so that it sleeps once per ``maxsize - low`` batches, while the writer always keeps a batch in
hand. Memory stays bounded by ``maxsize`` waiting batches, as before.
"""

from __future__ import annotations

import queue
import time
from typing import Any

__all__ = ["BatchQueue"]


class BatchQueue(queue.Queue[Any]):
    """A ``queue.Queue`` whose ``put`` waits, once the queue is full, until ``low`` items remain.

    ``get``, ``task_done`` and ``join`` keep their meaning; ``get`` wakes a blocked ``put`` only
    when the queue has drained to ``low`` items.

    Args:
        maxsize: the most items waiting (at least 1).
        low: a blocked ``put`` resumes when at most this many items wait (0 <= low < maxsize).

    Raises:
        ValueError: if the bounds are not as described.
    """

    def __init__(self, maxsize: int, low: int = 0) -> None:
        if maxsize < 1 or not 0 <= low < maxsize:
            raise ValueError(f"need maxsize >= 1 and 0 <= low < maxsize, got {maxsize}, {low}")
        super().__init__(maxsize)
        self.low = low

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Puts an item; when the queue is full, first waits until ``low`` items remain."""
        with self.not_full:
            if self._qsize() >= self.maxsize:
                if not block:
                    raise queue.Full
                deadline = None if timeout is None else time.monotonic() + timeout
                while self._qsize() > self.low:
                    if deadline is None:
                        self.not_full.wait()
                    else:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise queue.Full
                        self.not_full.wait(remaining)
            self._put(item)
            self.unfinished_tasks += 1
            self.not_empty.notify()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """Removes and returns an item; wakes a blocked ``put`` once ``low`` items remain."""
        with self.not_empty:
            if not block:
                if not self._qsize():
                    raise queue.Empty
            elif timeout is None:
                while not self._qsize():
                    self.not_empty.wait()
            else:
                if timeout < 0:
                    raise ValueError("'timeout' must be a non-negative number")
                deadline = time.monotonic() + timeout
                while not self._qsize():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0.0:
                        raise queue.Empty
                    self.not_empty.wait(remaining)
            item = self._get()
            if self._qsize() <= self.low:
                self.not_full.notify()
            return item
