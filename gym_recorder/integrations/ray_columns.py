"""How a batch's leaves become Ray columns: dotted names, which spaces have a column form, and
the one dtype a leaf widened in some batches gets in every block.

:func:`check_columnar` refuses a space with no column form; :func:`flatten` names a stacked
tree's leaves ``obs.key.0``; :func:`column_dtypes` finds leaves stored in different dtypes from
each batch's plan (the reader's, :mod:`gym_recorder.read.plan`) and :func:`conform` gives every
block their joint dtype;
:func:`to_block` makes Ray's block of the columns.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import FormatError, UnsupportedSpaceError, UnsupportedValueError
from ..format import exact_in, join_dtype, parse_dtype, parse_ref
from ..format.layout import Layout
from ..read.assemble import tree
from ..read.batchfile import parse_batch
from ..read.batchindex import read_index
from ..read.decode import Decoder
from ..read.entries import act_layout, obs_layout
from ..read.manifest import Manifest
from ..read.plan import index_plan
from ..read.storage import Storage

__all__ = ["check_columnar", "column_dtypes", "batch_forms", "conform", "flatten", "ragged",
           "to_block"]


def _stackable(space: Any) -> bool:
    from gymnasium import spaces

    return isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                              spaces.MultiBinary))


def check_columnar(space: Any, where: str, _named: set[str] | None = None) -> None:
    """Refuses a space with leaves that have no column form (Sequence, Graph, OneOf...), or
    two leaves of one dotted column name (a Dict key holding "." beside a nested key).

    Raises:
        UnsupportedValueError: naming the leaf.
        UnsupportedSpaceError: naming the column two leaves would share.
    """
    from gymnasium import spaces

    named: set[str] = set() if _named is None else _named
    if isinstance(space, spaces.Dict):
        for k, s in space.spaces.items():
            check_columnar(s, f"{where}.{k}", named)
    elif isinstance(space, spaces.Tuple):
        for i, s in enumerate(space.spaces):
            check_columnar(s, f"{where}.{i}", named)
    elif not (_stackable(space) or isinstance(space, spaces.Text)):
        raise UnsupportedValueError(f"{where}: a {type(space).__name__} space has no column form "
                                    f"in a Ray dataset (read it with RecordingReader)")
    elif where in named:
        raise UnsupportedSpaceError(f"column {where}: two leaves of the space have this dotted "
                                    f"name (a Dict key holding '.' beside a nested key); Ray "
                                    f"columns need distinct names")
    else:
        named.add(where)


def flatten(tree: Any, prefix: str) -> dict[str, Any]:
    """The leaves of a stacked tree as ``{dotted name: array or list}``, in the space's order."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}"))
        return out
    if isinstance(tree, tuple):
        out = {}
        for i, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: tree}


def _column(values: Any) -> Any:
    """A column for a block: arrays as they are; lists of str as a numpy str-object array."""
    if isinstance(values, np.ndarray):
        return values
    return np.array(values, dtype=object)


def to_block(columns: dict[str, Any]) -> Any:
    from ray.data.block import BlockAccessor

    return BlockAccessor.batch_to_block({k: _column(v) for k, v in columns.items()})


def ragged(arrays: list[Any]) -> np.ndarray:
    """An object array of per-episode arrays (a variable-shaped tensor column)."""
    out = np.empty(len(arrays), dtype=object)
    for i, a in enumerate(arrays):
        out[i] = a
    return out


# -- read tasks ------------------------------------------------------------------------------


# Batches whose dtypes are found at once (object storage: a request or two a batch).
HINT_THREADS = 8


def _leaf_names(layout: Layout, prefix: str) -> list[str]:
    """Each leaf's dotted column name, in leaf order (as :func:`flatten` names a value's)."""
    return list(flatten(tree(layout, list(range(len(layout.leaves)))), prefix))


def batch_forms(storage: Storage, m: Manifest, b: int) -> list[set[str]]:
    """How batch b of writer ``m`` stores each observation and action leaf (in leaf order): the
    dtype strings of its arrays, or ``"values"``, as the reader reads the batch. From the
    batch's plan (:mod:`gym_recorder.read.plan`): its index alone when it has one (every entry
    of a column has the column's dtype), else the plan of its parsed JSON; a batch without a
    plan (a leaf stored as values, compressed arrays) entry by entry, each reference held to
    :func:`~gym_recorder.format.parse_ref`'s rules by the reader's own checks.

    Raises:
        FormatError: what the reader raises for the batch (its index, JSON or references);
            for a gym-recording writer's, which has no spaces.
    """
    binfo = m.batches[b]
    n = len(obs_layout(m).leaves) + len(act_layout(m).leaves)  # (FormatError: gym-recording)
    index = read_index(storage, m, b)
    plan = None if index is None else index_plan(m, index, binfo["bin"], binfo["bin_size"])
    if plan is None:
        batch = parse_batch(storage, m, b)
        plan = batch.plan
        if plan is None:
            return _entry_forms(storage, m, b, batch.entries, n)
    return [{dtype.str} for dtype in plan.dtypes[:n]]


def _entry_forms(storage: Storage, m: Manifest, b: int, entries: list[Any],
                 n: int) -> list[set[str]]:
    """:func:`batch_forms` of a batch without a plan, entry by entry: each entry's structure and
    references checked as the reader checks them before it reads their bytes
    (:meth:`~gym_recorder.read.decode.Decoder.plan_part`, ``parse_ref``, ``check_shapes``)."""
    dec = Decoder(storage)
    binfo = m.batches[b]
    n_obs = len(obs_layout(m).leaves)
    out: list[set[str]] = [set() for _ in range(n)]
    for entry in entries:
        part = dec.plan_part(m, binfo, entry, entry["part"])
        refs = [parse_ref(obj, where, file=binfo["bin"]) for obj, where in part.refs]
        dec.check_shapes(part, ((slot, ref.shape, ref.dtype, where) for slot, ref, (_, where)
                                in zip(part.slots, refs, part.refs)))
        arrays = set()
        for (kind, k, _), ref in zip(part.slots, refs):
            if kind in ("obs", "act"):
                leaf = k if kind == "obs" else n_obs + k
                out[leaf].add(ref.dtype.str)
                arrays.add(leaf)
        for leaf in set(range(n)) - arrays:  # (a leaf the entry stores as values)
            out[leaf].add("values")
    return out


def column_dtypes(storage: Storage, infos: list[Any],
                  manifests: list[Manifest]) -> tuple[tuple[str, str], ...]:
    """The dtype every block gives each observation and action leaf that batches store in
    different dtypes (a leaf widened in some batches, see "Trees" in the format): the dtype
    they join in, from each batch's plan (:func:`batch_forms`).

    Leaves stored as values in some batch, gym-recording batches and dtypes that do not join
    are left as each batch has them; so is every leaf of a batch the reader refuses (its read
    task raises the reader's error for it).
    """
    writers = {m.prefix: m for m in manifests}

    def forms_of(info: Any) -> dict[str, set[str]]:
        m = writers.get(info.writer)
        b = info.number
        if m is None or m.legacy or not 0 <= b < len(m.batches) or \
                m.batches[b]["fn"] != info.json_name:
            return {}
        assert m.obs_layout is not None and m.act_layout is not None
        names = _leaf_names(m.obs_layout, "obs") + _leaf_names(m.act_layout, "action")
        if len(names) != len(m.obs_layout.leaves) + len(m.act_layout.leaves):
            return {}  # (two leaves of one dotted name: refused by check_columnar)
        try:
            return dict(zip(names, batch_forms(storage, m, b)))
        except (FormatError, OSError):
            return {}  # (its read task reads the batch again and raises what the reader does)

    forms: dict[str, set[str]] = {}
    with ThreadPoolExecutor(HINT_THREADS) as pool:
        for found in pool.map(forms_of, infos):
            for name, seen in found.items():
                forms.setdefault(name, set()).update(seen)
    out = []
    for name, seen in forms.items():
        if len(seen) < 2 or "values" in seen:
            continue
        try:
            dtype = join_dtype([parse_dtype(d, name) for d in sorted(seen)], name)
        except FormatError:
            continue
        out.append((name, dtype.str))
    return tuple(out)


def conform(columns: dict[str, Any], dtypes: dict[str, str], where: str) -> None:
    """Gives the leaves of ``dtypes`` in that dtype (each episode's array, for episode rows).

    Raises:
        UnsupportedValueError: when that dtype would round some value (int64 beyond 2**53
            here, float64 in another batch): no one tensor dtype holds the column.
    """
    for name, col in columns.items():
        target = dtypes.get(name[5:] if name.startswith("next_") else name)
        if target is None:
            continue
        dtype = np.dtype(target)

        def cast(a: np.ndarray) -> np.ndarray:
            if a.dtype == dtype:
                return a
            if not exact_in(a, dtype):
                raise UnsupportedValueError(
                    f"{where}: column {name} holds {a.dtype} values that {dtype}, its dtype in "
                    f"other batches, would round; read this recording with RecordingReader "
                    f"(which gives such a leaf as a list of rows)")
            return a.astype(dtype)

        if isinstance(col, np.ndarray) and col.dtype != object:
            columns[name] = cast(col)
        elif isinstance(col, np.ndarray):  # episode rows: one array an episode
            for i, a in enumerate(col):
                if isinstance(a, np.ndarray) and a.dtype != object:
                    col[i] = cast(a)
