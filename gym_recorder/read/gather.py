"""One gather: rows of a batch's planned arrays copied into the arrays handed out.

Every stacked array a reader hands out is filled here from the arrays a
:class:`~gym_recorder.read.plan.BatchPlan` (or an entry's checked references) places in a
.bin: :func:`read_rows` reads the arrays of a few parts (an episode of several parts, a column
of episodes) straight into their rows, by :data:`READ_THREADS` threads when they are large;
:func:`gather_rows` fills one column of many entries of many batches with a few vectorised
copies a batch (the step columns of ``transitions`` and ``column`` through the batch indexes).
An entry of one part is copied by its plan (:meth:`~gym_recorder.read.plan.BatchPlan.arrays`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from math import prod

import numpy as np

from ..format import ArrayRef
from .batchindex import exclusive_cumsum
from .decode import Decoder

__all__ = ["ReadJob", "read_rows", "gather_rows", "groups", "PARALLEL_READ_BYTES",
           "READ_THREADS"]

# An episode of several parts with at least this many bytes of stacked arrays is read by
# READ_THREADS threads, part by part (page faults and copies of the fresh arrays then overlap:
# about 1.5x faster with two cores); smaller ones are read in this thread.
PARALLEL_READ_BYTES = 8 << 20
READ_THREADS = 2


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """The process's READ_THREADS reader threads (started once; a forked child starts its own)."""
    global _POOL
    pid = os.getpid()
    if _POOL is None or _POOL[0] != pid:
        _POOL = (pid, ThreadPoolExecutor(READ_THREADS, thread_name_prefix="gym_recorder-read"))
    return _POOL[1]


# One read into an allocated array: (.bin name, checked reference, where, array, first row).
ReadJob = tuple[str, ArrayRef, str, np.ndarray, int]


def read_rows(dec: Decoder, jobs: list[ReadJob], nbytes: int) -> None:
    """Runs reads into their rows: in this thread, or split over READ_THREADS threads when
    they fill at least PARALLEL_READ_BYTES. Returns when every read has ended; raises the
    first failure, in job order."""
    if nbytes < PARALLEL_READ_BYTES or len(jobs) < 2:
        for job in jobs:
            dec.read_rows(*job)
        return
    # Contiguous shares of about equal bytes, one per thread: a job goes to the share its
    # middle byte falls in (by its first byte, an episode of two 5 MB parts and a short one
    # would give one thread both large parts).
    shares: list[list[ReadJob]] = [[] for _ in range(READ_THREADS)]
    done, per = 0, nbytes / READ_THREADS
    for job in jobs:
        size = job[1].size
        shares[min(int((done + size / 2) // per), READ_THREADS - 1)].append(job)
        done += size
    futures = [_pool().submit(_run, dec, share) for share in shares if share]
    for f in futures:
        f.exception()  # waits for every share, also when one of them failed
    for f in futures:
        f.result()


def _run(dec: Decoder, jobs: list[ReadJob]) -> None:
    for job in jobs:
        dec.read_rows(*job)


def gather_rows(decoder: Decoder, names: list[str], bat: np.ndarray, src_off: np.ndarray,
            rows: np.ndarray, dtype: np.dtype, tail: tuple[int, ...]) -> np.ndarray:
    """A column of the chosen entries (their batches ``bat``, arrays at ``src_off``, of
    ``rows`` rows), their rows one after another.

    A batch whose chosen arrays follow one another in the .bin as in the output (all its
    episodes, in order) is read straight into the output; otherwise the span of the column
    they lie in is read once and their rows gathered from it.
    """
    total = int(rows.sum())
    out = decoder.pages.empty((total, *tail), dtype)
    row_bytes = dtype.itemsize * prod(tail)
    if not total or not row_bytes:
        return out
    out_rows = out.reshape(total, -1).view(np.uint8).reshape(total, row_bytes)
    unit = np.dtype((np.void, row_bytes))
    out_void = out_rows.view(unit).reshape(total)
    dst_start = exclusive_cumsum(rows)
    storage = decoder.storage
    for b, here in groups(bat):
        r = rows[here]
        keep = r > 0
        here, r = here[keep], r[keep]
        if not len(here):
            continue
        name = names[b]
        offs = src_off[here]
        dst = dst_start[here]
        nbytes = r * row_bytes
        if (offs[1:] == offs[:-1] + nbytes[:-1]).all() and (dst[1:] == dst[:-1] + r[:-1]).all():
            d, n = int(dst[0]), int(r.sum())
            storage.readinto(name, int(offs[0]), out_rows[d:d + n].reshape(-1).data)
            continue
        lo = int(offs.min())
        span = decoder.read_exact(name, lo, int((offs + nbytes).max()) - lo)
        rel = offs - lo
        if (rel % row_bytes).any():
            # (Arrays not on one grid of rows: the writer does not lay a column out so.)
            for k, o, n in zip(dst.tolist(), rel.tolist(), r.tolist()):
                out_rows[k:k + n] = span[o:o + n * row_bytes].reshape(n, row_bytes)
            continue
        src = span[:len(span) // row_bytes * row_bytes].view(unit)
        first_rows = rel // row_bytes
        if (first_rows[1:] > first_rows[:-1]).all() and (dst[1:] == dst[:-1] + r[:-1]).all():
            # In order in both, padding between: keep the rows the arrays cover (no index
            # arrays of every row to build).
            d, n = int(dst[0]), int(r.sum())
            edges = np.bincount(first_rows, minlength=len(src) + 1) - np.bincount(
                first_rows + r, minlength=len(src) + 1)
            out_void[d:d + n] = np.compress(np.cumsum(edges[:len(src)]) > 0, src)
            continue
        out_void[_ranges(dst, r)] = src[_ranges(first_rows, r)]
    return out


def groups(keys: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(key, positions of key)`` for each distinct key in ascending order (small non-negative
    ints: writer and batch numbers), positions ascending: one stable sort, no hashing."""
    if not len(keys):
        return []
    if (keys[1:] >= keys[:-1]).all():  # (already in order: every episode of a recording)
        order = np.arange(len(keys), dtype=np.int64)
        ordered = keys
    else:
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(keys)]))
    return [(int(ordered[a]), order[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, counts)])``, vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    return (np.repeat(np.asarray(starts, dtype=np.int64) - exclusive_cumsum(counts), counts)
            + np.arange(total, dtype=np.int64))
