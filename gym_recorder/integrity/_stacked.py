"""A batch's stacked arrays as verify checks them: placed by the batch's plan, and held to the
batch's index.

The reader resolves each batch into one plan (:mod:`gym_recorder.read.plan`): every entry's
array in every stacked column (each observation and action leaf, rewards, terminations,
truncations), its offset, rows, dtype and shape, checked column by column with the rules of
:func:`~gym_recorder.format.parse_ref` and the writer's spaces, and inside the .bin.
:func:`planned_arrays` makes that plan for :func:`~gym_recorder.integrity._checks.check_batch`
from the batch JSON it has parsed, so that verify checks each stacked array (its CRC-32) where the
reader reads it; any reference the plan does not place (infos, values, compressed arrays, and
every reference of a batch that has no plan: a leaf stored as values, a reference any rule
refuses) is checked by ``parse_ref`` itself, one by one, as before. A plan exists only when
every reference it covers passes ``parse_ref`` and lies in the file, so either way a reference
gets the same verdict and the same message. :func:`index_problems` holds a batch index to the
entries (a whole column at once through the plan); :func:`walk_refs` finds every reference of an
entry, stacked or not.
"""

from __future__ import annotations

import os
from itertools import repeat
from math import prod
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format import INDEX_TABLE_WIDTH, MAX_NESTING, IndexColumn, parse_batch_index
from ..format import fileio
from ..format.spaces import ArrayLeaf
from ..read.batchfile import EntryRefs
from ..read.batchindex import exclusive_cumsum
from ..read.manifest import Manifest
from ..read.plan import BatchPlan, plan_batch

__all__ = ["PLANNED_MIN_ENTRIES", "MAX_WALK_DEPTH", "walk_refs", "PlannedArrays", "planned_arrays", "index_problems",
           "index_columns"]

# A batch of fewer entries has every reference checked by parse_ref, one by one: a plan checks a
# column at once, for about 40 us a column and a little per entry, where parse_ref takes about
# 3 us a reference (the verdicts and messages are the same either way).
PLANNED_MIN_ENTRIES = 32
# How deep verify walks a batch's JSON looking for array references: a VALUE sits about 8 levels
# down in a batch and nests at most MAX_NESTING itself, so this is far deeper than any batch we
# write, and still bounds the recursion on a hostile file.
MAX_WALK_DEPTH = 4 * MAX_NESTING


def walk_refs(obj: Any, where: str, out: list[tuple[dict[str, Any], str]],
              depth: int = 0) -> None:
    """Collects every array reference (``{"__type": "ndarray", ...}``) inside a JSON value."""
    if depth > MAX_WALK_DEPTH:
        raise FormatError(f"{where}: nested too deeply")
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            out.append((obj, where))
            return
        for key, value in obj.items():
            walk_refs(value, f"{where}.{key}", out, depth + 1)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            walk_refs(value, f"{where}[{i}]", out, depth + 1)


class PlannedArrays:
    """A batch's plan (``plan``), its table (episode, part, steps, flags per entry), each
    column's references as stored (``columns``), and where the plan places every stacked
    reference (``refs``: by the ``id`` of its JSON object; its CRC-32 is the object's)."""

    __slots__ = ("plan", "table", "columns", "refs")

    def __init__(self, plan: BatchPlan, table: np.ndarray, columns: list[list[Any]]) -> None:
        self.plan = plan
        self.table = table
        self.columns = columns
        # (offset, bytes, dtype kind) of each stacked reference, by the id of its JSON object
        self.refs: dict[int, tuple[int, int, str]] = {}
        for c, objs in enumerate(columns):
            dtype = plan.dtypes[c]
            sizes = plan.rows(c) * (dtype.itemsize * prod(plan.tails[c]))
            self.refs.update(zip(map(id, objs), zip(plan.offsets[c].tolist(), sizes.tolist(),
                                                    repeat(dtype.kind))))

    def index_agrees(self, table: bytes, columns: list[IndexColumn]) -> bool:
        """Whether a batch index (its table's bytes, its checked columns) says what the plan
        says: each entry's episode, part, steps and flags, each column's dtype as the entries
        spell it, and each entry's array at the offset the index's layout gives it."""
        plan = self.plan
        said = np.frombuffer(table, dtype="<i8").reshape(self.table.shape)
        if not np.array_equal(said, self.table) or len(columns) != len(plan.dtypes):
            return False
        for c, (col, objs) in enumerate(zip(columns, self.columns)):
            if objs[0].get("dtype") != col.dtype.str:  # (one spelling a column: the plan's)
                return False
            sizes = plan.rows(c) * (plan.dtypes[c].itemsize * prod(plan.tails[c]))
            placed = col.offset + exclusive_cumsum(-(-sizes // col.unit) * col.unit)
            if not np.array_equal(placed, plan.offsets[c]):
                return False
        return True


def planned_arrays(m: Manifest, entries: list[Any], json_name: str, bin_name: str,
                   bin_size: int) -> PlannedArrays | None:
    """The plan of a parsed batch whose entries have checked out one by one (each an object
    with its ``index``, non-negative integer ``episode``, ``part`` and ``steps``, and flags
    that are bools or absent), against its .bin of ``bin_size`` bytes; None when it has none
    (see :mod:`gym_recorder.read.plan`), or fewer than :data:`PLANNED_MIN_ENTRIES` entries."""
    if m.legacy or m.obs_layout is None or m.act_layout is None or len(
            entries) < PLANNED_MIN_ENTRIES or not all(
            isinstance(leaf, ArrayLeaf) for leaf in m.obs_layout.leaves + m.act_layout.leaves):
        return None
    try:
        table = np.array([(e["episode"], e["part"], e["steps"],
                           (e.get("continues") is True) | ((e.get("no_reset") is True) << 1))
                          for e in entries], dtype=np.int64).reshape(len(entries), 4)
    except OverflowError:
        return None  # (a number no plan holds: its references are checked one by one)
    refs = EntryRefs(m, entries, json_name)
    plan = plan_batch(m, {"bin": bin_name, "bin_size": bin_size}, table, refs, None)
    if plan is None:
        return None
    try:
        columns = refs.columns()
    except FormatError:  # pragma: no cover - the plan was made of these columns
        return None
    return PlannedArrays(plan, table, columns)


def index_problems(fd: int, bin_size: int, index: Any, entries: list[Any],
                   planned: PlannedArrays | None = None
                   ) -> tuple[tuple[int, int] | None, list[tuple[bool, str]]]:
    """Checks a batch index (see "Batch index" in the format) against the batch's entries,
    whose references have checked out (against their plan, ``planned``, when the batch has
    one: a whole column at once; else, or to name what differs, entry by entry).

    Returns:
        The span of the index's table in the .bin (None if it is not one), and the problems,
        each with whether it lies in the .bin's bytes (else in what the index says).
    """
    length = len(entries)
    if planned is not None:
        n_columns = len(planned.plan.dtypes)
    else:
        columns_of = index_columns(entries)
        n_columns = len(columns_of[0]) if columns_of else 0
        if any(len(cols) != n_columns for cols in columns_of):
            return None, [(False, "the batch has a leaf stored as values in some entries: it "
                                  "cannot have one")]
    try:
        table_at, crc, columns = parse_batch_index(index, "index", length, bin_size, n_columns)
    except FormatError as e:
        return None, [(False, str(e).removeprefix("index: "))]
    span = (table_at, table_at + length * INDEX_TABLE_WIDTH * 8)
    raw = os.pread(fd, span[1] - span[0], table_at)
    if len(raw) != span[1] - span[0] or fileio.crc32(raw) != crc:
        return span, [(True, "CRC-32 of its table does not match")]
    if planned is not None:
        if planned.index_agrees(raw, columns):
            return span, []
        columns_of = index_columns(entries)  # (what differs, named as entry by entry)
    table = [tuple(int.from_bytes(raw[i:i + 8], "little", signed=True)
                   for i in range(row, row + INDEX_TABLE_WIDTH * 8, 8))
             for row in range(0, len(raw), INDEX_TABLE_WIDTH * 8)]
    offsets = [c.offset for c in columns]
    for pos, (entry, row, refs) in enumerate(zip(entries, table, columns_of)):
        said = (entry.get("episode"), entry.get("part"), entry.get("steps"),
                (entry.get("continues") is True) | ((entry.get("no_reset") is True) << 1))
        if row != said:
            return span, [(False, f"its table says entry {pos} is (episode, part, steps, "
                                  f"flags) {row}, the entry {said}")]
        for c, (ref, col) in enumerate(zip(refs, columns)):
            if ref.get("dtype") != col.dtype.str or ref.get("npyoff") != offsets[c]:
                return span, [(False, f"column {c} places entry {pos}'s array at "
                                      f"{offsets[c]} as {col.dtype.str}, the entry at "
                                      f"{ref.get('npyoff')!r} as {ref.get('dtype')!r}")]
            size = ref.get("size")
            offsets[c] += -(-size // col.unit) * col.unit if type(size) is int else 0
    return span, []


def index_columns(entries: list[Any]) -> list[list[Any]]:
    """Each entry's stacked references as the index lists them: its observation and action
    arrays in the order stored, then rewards, terminations and truncations."""
    columns_of: list[list[Any]] = []
    for entry in entries:
        found: list[tuple[dict[str, Any], str]] = []
        for key in ("observations", "actions"):
            walk_refs(entry.get(key), key, found)
        columns_of.append([obj for obj, _ in found]
                          + [entry.get(k) for k in ("rewards", "terminations", "truncations")])
    return columns_of
