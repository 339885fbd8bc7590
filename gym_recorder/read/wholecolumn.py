"""Whole-recording columns: one field of many episodes, joined in order, one array a leaf.

One job: :func:`read_column` (behind :meth:`RecordingReader.column`) checks that the episodes'
writers lay the field out alike, then :func:`stacked_column` allocates each leaf's array once
and reads every part of every episode straight into its rows (with
:mod:`gym_recorder.read.assemble`'s reads); fields it cannot stack (gym-recording writers,
leaves stored as values) are joined from the episodes themselves (:func:`join_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .assemble import PartsLookup, _joined_dtype, allocate, checked_refs, tree
from .gather import ReadJob, read_rows
from .decode import Decoder
from .entries import act_layout, obs_layout
from .episode import Episode
from ..errors import FormatError, UnsupportedSpaceError
from ..format import ArrayRef
from .manifest import Manifest
from .outside import join_leaf
from ..format.spaces import ArrayLeaf, Layout

__all__ = ["COLUMN_KINDS", "read_column", "stacked_column", "join_rows"]

# The Episode fields a whole-recording column can be built of, and their kind of slot.
COLUMN_KINDS = {"observations": "obs", "actions": "act", "rewards": "rewards",
                "terminations": "terminations", "truncations": "truncations"}


def read_column(dec: Decoder, where: str, name: str, located: list[tuple[int, Manifest, int]],
                parts: PartsLookup, episode: Callable[[int], Episode]) -> Any:
    """The ``name`` field of the located episodes (index, writer, number), joined in order.

    Array leaves of this format's writers are read by :func:`stacked_column`; anything else
    (gym-recording writers, leaves stored as values) is joined from the episodes themselves.

    Raises:
        UnsupportedSpaceError: if the episodes' writers lay the field out differently.
    """
    kind = COLUMN_KINDS[name]
    writers = {m.name: m for _, m, _ in located}  # each writer once (episodes share them)
    layouts = {key: (None if m.legacy else
                     obs_layout(m) if kind == "obs" else act_layout(m) if kind == "act"
                     else None) for key, m in writers.items()}
    signatures = {key: _signature(m.legacy, layouts[key]) for key, m in writers.items()}
    first_name = located[0][1].name
    for writer, sig in signatures.items():
        if sig != signatures[first_name]:
            raise UnsupportedSpaceError(f"{where}: writers {first_name} and {writer} "
                                        f"record {name} of different spaces; select the "
                                        "episodes of one of them")
    layout = layouts[first_name]
    count = 1 if layout is None else len(layout.leaves)
    leaves = None
    if not any(m.legacy for _, m, _ in located):
        leaves = stacked_column(dec, kind, count, ((m, number) for _, m, number in located),
                                parts)
    if leaves is None:
        flatten: Callable[[Any], list[Any]] = (_one_leaf if layout is None
                                               else layout.flattener())
        values = [flatten(getattr(episode(index), name)) for index, _, _ in located]
        # (rows of other shapes: a gym-recording writer's refused by name; this format's
        # leaves outside their space come back as lists of rows)
        join = (join_rows if any(m.legacy for _, m, _ in located)
                else lambda where, name, cols: join_leaf(where, cols))
        leaves = [join(where, name, [v[k] for v in values]) for k in range(count)]
    return leaves[0] if layout is None else tree(layout, leaves)


def _one_leaf(value: Any) -> list[Any]:
    return [value]


def join_rows(where: str, name: str, columns: list[Any]) -> Any:
    """join_leaf, refusing by name arrays whose rows do not stack (gym-recording writers
    declare no space: their episodes may hold anything).

    Raises:
        UnsupportedSpaceError: naming ``where`` and ``name``, for rows that do not stack.
    """
    for c in columns:
        if not isinstance(c, (np.ndarray, list)) or (isinstance(c, np.ndarray) and c.ndim == 0):
            raise UnsupportedSpaceError(f"{where}: an episode holds {name} that are not rows "
                                        f"(a {type(c).__name__} of shape {np.shape(c)}); read "
                                        "its episodes one by one")
    arrays = [c for c in columns if isinstance(c, np.ndarray)]
    if len(arrays) == len(columns) and len({a.shape[1:] for a in arrays}) > 1:
        raise UnsupportedSpaceError(f"{where}: the episodes hold {name} rows of different "
                                    f"shapes ({', '.join(sorted({str(a.shape[1:]) for a in arrays}))}); "
                                    "select episodes of one shape")
    return join_leaf(where, columns)


def _signature(legacy: bool, layout: Layout | None) -> Any:
    """What two writers must share for one column of their episodes: each leaf's path and form
    (shape and dtype: int64 and uint64 leaves would meet in float64, which rounds)."""
    if layout is None:
        return "legacy" if legacy else None
    return [(path, (leaf.shape, str(leaf.dtype)) if isinstance(leaf, ArrayLeaf) else "values")
            for path, leaf in zip(layout.leaf_paths(), layout.leaves)]


_STEP_KINDS = ("rewards", "terminations", "truncations")


def stacked_column(dec: Decoder, kind: str, leaves: int,
                   episodes: Iterable[tuple[Manifest, int]],
                   parts: PartsLookup) -> list[np.ndarray] | None:
    """One stacked kind (``"obs"``, ``"act"``, ``"rewards"``...) of many episodes, one array a leaf.

    Every part of every episode (writer, number) is planned and checked first, keeping only
    the references of ``kind`` (through its batch's plan when it has one, see
    :mod:`gym_recorder.read.plan`); then each leaf's array is allocated once, the
    episodes' rows one after another, and every part's bytes are read (or copied) straight
    into their rows. None when some part does not store every leaf of ``kind`` as an array (a
    Text leaf, values outside the space): the caller then joins the episodes' own values.
    """
    wanted = frozenset((kind,))
    columns: list[list[tuple[str, ArrayRef, str]]] = [[] for _ in range(leaves)]
    first_where = ""
    for m, number in episodes:
        for binfo, entry, part_no, batch in parts(m, number):
            plan = None if dec.verify else batch.plan
            pos = entry["index"] - binfo["first"]
            if plan is not None and plan.usable(pos):
                # (through the batch's plan: its references checked once, for every entry)
                dec.batch_size(batch, binfo)
                where = f"{binfo['fn']} entry {entry.get('index')}"
                first_where = first_where or where
                n_obs = plan.n_obs
                cols = (range(n_obs) if kind == "obs"
                        else range(n_obs, len(plan.dtypes) - 3) if kind == "act"
                        else [len(plan.dtypes) - 3 + _STEP_KINDS.index(kind)])
                for column, c in zip(columns, cols):
                    column.append((binfo["bin"], plan.ref(c, pos), where))
                continue
            part = dec.plan_part(m, binfo, entry, part_no)
            first_where = first_where or part.where
            found = 0
            refs = checked_refs(dec, part, dec.batch_size(batch, binfo), wanted)
            for (slot_kind, k, _), ref, (_, w) in zip(part.slots, refs, part.refs):
                if ref is not None and slot_kind == kind:
                    columns[k].append((binfo["bin"], ref, w))
                    found += 1
            if found != leaves:
                return None
    held = [[ref for _, ref, _ in column] for column in columns]
    joined = [_joined_dtype(first_where, column) for column in held]
    dtypes = [dtype for dtype in joined if dtype is not None]
    if len(dtypes) != len(joined):
        return None  # (the episodes' own leaves are joined, exactly or as rows)
    dests = [allocate(dec, first_where, column, dtype) for column, dtype in zip(held, dtypes)]
    jobs: list[ReadJob] = []
    for column, out in zip(columns, dests):
        row = 0
        tail = out.shape[1:]
        for bin_name, ref, where in column:
            if ref.shape[1:] != tail:
                raise FormatError(f"{first_where}: the episodes store one {kind} leaf in rows "
                                  f"of different shapes ({ref.shape[1:]}, {tail})")
            jobs.append((bin_name, ref, where, out, row))
            row += ref.shape[0]
    read_rows(dec, jobs, sum(job[1].size for job in jobs))
    return dests
