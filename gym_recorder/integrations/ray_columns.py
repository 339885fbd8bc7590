"""How a batch's leaves become Ray columns: dotted names, which spaces have a column form, and
the one dtype a leaf widened in some batches gets in every block.

:func:`check_columnar` refuses a space with no column form; :func:`flatten` names a stacked
tree's leaves ``obs.key.0``; :func:`column_dtypes` reads the first entry of each batch JSON to
find leaves stored in different dtypes and :func:`conform` gives every block their joint dtype;
:func:`to_block` makes Ray's block of the columns.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import FormatError, UnsupportedSpaceError, UnsupportedValueError
from ..format import MAX_JSON_BYTES, exact_in, join_dtype, parse_dtype

__all__ = ["check_columnar", "column_dtypes", "conform", "flatten", "ragged", "to_block"]


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


# How much of a batch JSON is read to find the dtypes of its first entry (the whole file when
# that entry is longer).
HINT_BYTES = 16 << 10
HINT_THREADS = 8
_EPISODES_KEY = '"episodes":['


def _stored_forms(obj: Any, name: str, out: dict[str, str]) -> None:
    """The dtype string (or "values") of each leaf of a stored TREE, by dotted column name."""
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _stored_forms(v, f"{name}.{i}", out)
    elif isinstance(obj, dict):
        kind = obj.get("__type")
        if kind == "ndarray" and isinstance(obj.get("dtype"), str):
            out[name] = obj["dtype"]
        elif kind == "values":
            out[name] = "values"
        elif kind is None:
            for k, v in obj.items():
                _stored_forms(v, f"{name}.{k}", out)


def _first_entry(storage: Any, name: str, size: int) -> Any:
    """The first entry of a batch JSON, read from its first bytes (None when it has none)."""
    head = storage.read_range(name, 0, min(size, HINT_BYTES))
    if len(head) < size:
        text = head.decode("utf-8", "replace")
        at = text.find(_EPISODES_KEY)
        if at >= 0:
            try:
                return json.JSONDecoder().raw_decode(text, at + len(_EPISODES_KEY))[0]
            except ValueError:
                pass  # (longer than the bytes read, or not our writer's layout: all of it)
        head = storage.read_range(name, 0, size)
    doc = json.loads(head)
    entries = doc.get("episodes") if isinstance(doc, dict) else None
    return entries[0] if isinstance(entries, list) and entries else None


def column_dtypes(storage: Any, infos: list[Any],
                  entries: dict[tuple[str, str], dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The dtype every block gives each observation and action leaf that batches store in
    different dtypes (a leaf widened in some batches, see "Trees" in the format): the dtype
    they join in. Widening applies to a whole batch, so each batch's first entry tells.

    Leaves stored as values in some batch, gym-recording batches and dtypes that do not join
    are left as each batch has them (a batch that cannot be read is refused by its task).
    """
    def batch_forms(info: Any) -> dict[str, str]:
        found: dict[str, str] = {}
        size = (entries.get((info.writer, info.json_name)) or {}).get("json_size")
        if not info.bin_name or type(size) is not int or not 0 < size <= MAX_JSON_BYTES:
            return found
        try:
            entry = _first_entry(storage, info.json_name, size)
            if isinstance(entry, dict):
                _stored_forms(entry.get("observations"), "obs", found)
                _stored_forms(entry.get("actions"), "action", found)
        except (OSError, ValueError, RecursionError):
            return {}  # (a hint only: the batch's task reads and checks the whole file)
        return found

    forms: dict[str, set[str]] = {}
    with ThreadPoolExecutor(HINT_THREADS) as pool:  # (object storage: one request a batch)
        for found in pool.map(batch_forms, infos):
            for name, form in found.items():
                forms.setdefault(name, set()).add(form)
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
