"""BatchQueue: a full queue blocks put() until it has drained to ``low`` items (real threads)."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from gym_recorder.record.batchqueue import BatchQueue


def test_items_come_out_in_order_and_join_waits_for_task_done():
    q = BatchQueue(2, low=0)
    out = []

    def consume():
        while (item := q.get()) is not None:
            out.append(item)
            q.task_done()
        q.task_done()

    t = threading.Thread(target=consume)
    t.start()
    for i in range(50):
        q.put(i)
    q.join()
    assert out == list(range(50))
    q.put(None)
    t.join(5)
    assert not t.is_alive()


def test_full_put_waits_until_drained_to_low():
    q = BatchQueue(3, low=1)
    for i in range(3):
        q.put(i)
    done = threading.Event()
    sizes = []

    def producer():
        q.put(3)
        done.set()

    t = threading.Thread(target=producer)
    t.start()
    assert q.get() == 0  # 2 left > low: the producer stays blocked
    assert not done.wait(0.2)
    sizes.append(q.qsize())
    assert q.get() == 1  # 1 left == low: it resumes
    assert done.wait(5)
    t.join(5)
    assert sizes == [2]
    assert [q.get(), q.get()] == [2, 3]


def test_non_blocking_and_timeouts_raise_queue_errors():
    q = BatchQueue(1)
    with pytest.raises(queue.Empty):
        q.get(block=False)
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    q.put("a")
    with pytest.raises(queue.Full):
        q.put("b", block=False)
    t0 = time.monotonic()
    with pytest.raises(queue.Full):
        q.put("b", timeout=0.05)
    assert time.monotonic() - t0 >= 0.05
    assert q.get() == "a"


@pytest.mark.parametrize("maxsize, low", [(0, 0), (2, 2), (2, -1)])
def test_bad_bounds(maxsize, low):
    with pytest.raises(ValueError, match="maxsize"):
        BatchQueue(maxsize, low)
