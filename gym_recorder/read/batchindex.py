"""A batch's INDEX ("Batch index" in :mod:`gym_recorder.format`), read and checked once, by
every reader of it.

:func:`read_index` reads the table from the .bin and checks it against the manifest (its CRC-32,
flags, and the counts the manifest keeps: the batch's ``len``, ``steps`` and ``episodes``), and
places every entry's array in every column inside the .bin. :func:`check_entries` holds it to the
batch JSON's entries whenever those are parsed anyway (their episode, part, steps and flags, and
each array reference's offset and dtype), so that a table edited with its CRC-32 recomputed, or
offsets changed in the manifest, is refused by name (:class:`~gym_recorder.errors.BatchIndexError`)
instead of giving another answer than the JSON would.

A lie the manifest's counts cannot show (steps moved from one entry to another, totals kept) is
seen only where the batch JSON is read: ``reader.column`` and ``transitions``, which read through
the index alone, give what it says until then (``verify`` reports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from operator import itemgetter
from typing import Any

import numpy as np

from ..errors import BatchIndexError, FormatError
from ..format import (ALIGNMENT, INDEX_FLAGS, INDEX_TABLE_WIDTH, IndexColumn, parse_batch_index,
                      parse_dtype)
from ..format import fileio as _fileio
from ..format.spaces import ArrayLeaf
from .manifest import Manifest
from .storage import Storage

__all__ = ["IndexTable", "read_index", "check_entries", "leaf_shapes", "exclusive_cumsum"]

_DTYPE = itemgetter("dtype")
_NPYOFF = itemgetter("npyoff")
STEP_DTYPES = (np.dtype("<f8"), np.dtype("|b1"), np.dtype("|b1"))
STEP_NAMES = ("rewards", "terminations", "truncations")
# Tables of at most this many entries are placed with Python's ints (faster than numpy's calls
# on arrays this short).
_FEW = 32


class IndexTable:
    """One batch's index, checked against the manifest: the table's columns (episode, part,
    steps, flags per entry), the stacked columns, and each entry's array offset in each."""

    __slots__ = ("where", "columns", "shapes", "table", "episode", "part", "steps", "flags",
                 "offsets", "ends")

    def __init__(self, where: str, columns: list[IndexColumn], shapes: list[tuple[int, ...]],
                 table: np.ndarray, bin_name: str, bin_size: int, n_obs: int) -> None:
        self.where = where
        self.columns = columns
        self.shapes = shapes  # a row's shape in each column
        self.table = table  # (episode, part, steps, flags) per entry
        self.episode, self.part, self.steps, self.flags = (table[:, j].copy()
                                                            for j in range(INDEX_TABLE_WIDTH))
        obs_rows = self.steps + (self.part == 0)
        placed = [_offsets(self, c, obs_rows if c < n_obs else self.steps, bin_name, bin_size)
                  for c in range(len(columns))]
        self.offsets = [offsets for offsets, _ in placed]
        self.ends = [end for _, end in placed]  # where each column's last array ends


def leaf_shapes(m: Manifest) -> list[tuple[int, ...]]:
    """The shape of a row of each column of a writer: its leaves', then the step columns'."""
    assert m.obs_layout is not None and m.act_layout is not None
    return [tuple(leaf.shape) for leaf in m.obs_layout.leaves + m.act_layout.leaves] + [()] * 3


def read_index(storage: Storage, m: Manifest, b: int) -> IndexTable | None:
    """Reads and checks batch b's index (None when it has none).

    Raises:
        BatchIndexError: naming the batch's index and what is wrong.
    """
    binfo = m.batches[b]
    index = binfo.get("index")
    if index is None or m.obs_layout is None or m.act_layout is None or not all(
            isinstance(leaf, ArrayLeaf) for leaf in m.obs_layout.leaves + m.act_layout.leaves):
        return None  # (a leaf stored as values has no column: the index is not one to use)
    where = f"{m.name} batch {b}"
    # Both files are there, of the manifest's sizes, as reading the batch JSON would find them
    # (a missing or truncated file is not the index's fault: named as that path names it).
    for name, key in ((binfo["fn"], "json_size"), (binfo["bin"], "bin_size")):
        size = storage.size(name)
        if size != binfo[key]:
            raise FormatError(f"{name}: file has {size} bytes, the manifest says {binfo[key]}")
    try:
        return _read(storage, m, binfo, index, where)
    except BatchIndexError:
        raise
    except FormatError as e:
        raise BatchIndexError(f"batch index: {e}") from e


def _read(storage: Storage, m: Manifest, binfo: dict[str, Any], index: Any,
          where: str) -> IndexTable:
    assert m.obs_layout is not None and m.act_layout is not None
    n_obs = len(m.obs_layout.leaves)
    n_columns = n_obs + len(m.act_layout.leaves) + 3
    length = binfo["len"]
    table_at, crc, columns = parse_batch_index(index, where, length, binfo["bin_size"],
                                                n_columns)
    for col, dtype, name in zip(columns[-3:], STEP_DTYPES, STEP_NAMES):
        if col.dtype != dtype:
            raise FormatError(f"{where}: index column of {name} has dtype {col.dtype.str}, "
                              f"not {dtype.str}")
    bin_name = binfo["bin"]
    raw = np.empty(length * INDEX_TABLE_WIDTH * 8, dtype=np.uint8)
    if len(raw):
        storage.readinto(bin_name, table_at, raw.data)
    if _fileio.crc32(raw) != crc:
        raise FormatError(f"{where}: CRC-32 of the index table does not match")
    table = raw.view("<i8").reshape(length, INDEX_TABLE_WIDTH)
    if length and (table.min() < 0 or (table[:, 3] & ~INDEX_FLAGS).any()):
        raise FormatError(f"{where}: the index table holds a negative number or unknown flags")
    steps, new = int(table[:, 2].sum()), int((table[:, 1] == 0).sum())
    if steps != binfo["steps"] or new != binfo["episodes"]:
        raise FormatError(f"{where}: the index table counts {steps} steps and {new} episodes, "
                          f"the manifest {binfo['steps']} and {binfo['episodes']}")
    read = IndexTable(where, columns, leaf_shapes(m), table, bin_name, binfo["bin_size"], n_obs)
    _check_tiling(read)
    return read


def _check_tiling(index: IndexTable) -> None:
    """The columns lie one after another from the .bin's start, each from where the one before
    ends (its last array's end, rounded up to ALIGNMENT), as the spec says writers lay a batch
    out: an offset moved in the manifest, which no CRC-32 covers, would otherwise read
    other bytes of the right size."""
    at = 0
    for c, (col, end) in enumerate(zip(index.columns, index.ends)):
        if col.offset != at:
            raise BatchIndexError(f"{index.where}: batch index column {c} starts at {col.offset}, "
                                  f"where the column before it ends is {at}")
        at = -(-end // ALIGNMENT) * ALIGNMENT


def _offsets(index: IndexTable, c: int, rows: np.ndarray, bin_name: str,
             size_limit: int) -> tuple[np.ndarray, int]:
    """Each entry's array offset in column c (its entries' ``rows`` rows), checked to lie
    inside the .bin, and where the column's last array ends (its start when it has none)."""
    col = index.columns[c]
    row_bytes = col.dtype.itemsize * prod(index.shapes[c])
    # (Checked in Python's integers first: a hostile table's rows times a row's bytes, or their
    # sum, must not wrap around int64 into a size that looks small.)
    beyond = FormatError(f"{index.where}: index column {c} places arrays beyond the end of "
                         f"{bin_name} ({size_limit} bytes)")
    if len(rows) <= _FEW:  # (a batch of a few long episodes: Python's ints, never wrapping)
        at = end = col.offset
        starts: list[int] = []
        for n in rows.tolist():
            end = at + n * row_bytes
            if end > size_limit:
                raise beyond
            starts.append(at)
            at += -(-(end - at) // col.unit) * col.unit
        return np.array(starts, dtype=np.int64), end
    most = int(rows.max()) if len(rows) else 0
    if most * row_bytes > size_limit or float(rows.sum(dtype=np.float64)) * row_bytes > size_limit:
        raise beyond
    sizes = rows * row_bytes
    offsets = col.offset + exclusive_cumsum(-(-sizes // col.unit) * col.unit)
    if len(rows) and int((offsets + sizes).max()) > size_limit:
        raise beyond
    return offsets, int(offsets[-1] + sizes[-1]) if len(rows) else col.offset


def check_entries(index: IndexTable, table: np.ndarray, refs: Sequence[Sequence[Any]],
                  bin_size: int) -> None:
    """Holds a batch's index to its JSON entries (structurally checked, flags bools):
    ``table`` is what the entries say (episode, part, steps, flags per entry, as the index's
    table has them), ``refs[c]`` each entry's reference of column c, as stored.

    Raises:
        BatchIndexError: at the first difference, naming the entry (and the column).
    """
    mine = index.table
    bad = np.flatnonzero((table != mine).any(axis=1))
    if len(bad):
        k = int(bad[0])
        raise BatchIndexError(
            f"{index.where}: the batch index says entry {k} is (episode, part, steps, flags) "
            f"{tuple(mine[k].tolist())}, the batch JSON {tuple(table[k].tolist())}", k)
    for c, (col, objs) in enumerate(zip(index.columns, refs)):
        want = col.dtype.str
        step = c >= len(index.columns) - 3
        for k in _differing(objs, want, index.offsets[c], bin_size, step):
            obj = objs[k]
            raise BatchIndexError(
                f"{index.where}: the batch index places column {c} of entry {k} at "
                f"{int(index.offsets[c][k])} as {want}, the batch JSON at "
                f"{obj.get('npyoff')!r} as {obj.get('dtype')!r}", k)


def _differing(objs: Sequence[Any], dtype: str, offsets: np.ndarray, bin_size: int,
               step: bool) -> list[int]:
    """The entries whose reference is well formed (an ARRAY of a dtype this reader knows, at an
    aligned offset inside the .bin) and says another offset or dtype than the index. A
    reference that is not well formed is left to the entry's own checks, which name what is
    wrong with it."""
    try:  # (every batch that checks out: a few passes in C)
        if len(objs) <= _FEW:  # (or Python's ints, faster on a few entries)
            if all(o["dtype"] == dtype for o in objs) and \
                    [o["npyoff"] for o in objs] == offsets.tolist():
                return []
        elif set(map(_DTYPE, objs)) <= {dtype}:
            got = np.fromiter(map(_NPYOFF, objs), dtype=np.int64, count=len(objs))
            if np.array_equal(got, offsets):
                return []
    except (KeyError, TypeError, ValueError, OverflowError):
        pass  # (not all references, or an offset that is no int64: each looked at below)
    offs = [o.get("npyoff") if type(o) is dict else None for o in objs]
    out = []
    for k, (obj, at) in enumerate(zip(objs, offs)):
        if (type(obj) is not dict or obj.get("__type") != "ndarray" or type(at) is not int
                or not 0 <= at <= bin_size or at % ALIGNMENT):
            continue
        if obj.get("dtype") != dtype:
            try:  # (another size, or a step column's: the entry's own checks refuse it)
                other = parse_dtype(obj.get("dtype"), "")
            except (FormatError, TypeError):
                continue
            if step or other.itemsize != np.dtype(dtype).itemsize:
                continue
        elif at == int(offsets[k]):
            continue
        out.append(k)
    return out


def _short(obj: Any) -> str:
    if isinstance(obj, dict):
        return f"{obj.get('__type')!r} of dtype {obj.get('dtype')!r}"
    return type(obj).__name__


def exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values), dtype=np.int64)
    if len(values) > 1:
        np.cumsum(values[:-1], out=out[1:])
    return out
