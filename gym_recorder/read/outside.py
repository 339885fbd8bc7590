"""Values outside their space: how an array leaf stored as one VALUE a row is recognised and read.

A value whose shape does not fit its Box (or other array) leaf is kept exactly: from then on the
writer stores that leaf as ``{"__type": "values", ...}`` (see "Trees" in :mod:`gym_recorder.format`).
These helpers let the reader tell such a leaf from an ARRAY and join an episode's parts when some
store the leaf one way and some the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..format import join_arrays
from ..format.spaces import ValuesLeaf

__all__ = ["join_leaf", "uniform_rows"]

_VALUES = ValuesLeaf("values")


def _outside_values(obj: Any) -> bool:
    """True when an array leaf's stored object is a ``values`` object (values outside the space)."""
    return isinstance(obj, dict) and obj.get("__type") == "values"


def _as_values(leaf: Any) -> ValuesLeaf:
    """The ValuesLeaf to decode a leaf's stored values with (an array leaf's are plain VALUEs)."""
    return leaf if isinstance(leaf, ValuesLeaf) else _VALUES


def _mixed_leaves(slots: list[Any], first_slots: list[Any]) -> bool:
    """True when two parts' stacked slots differ only in observation/action leaves."""
    def others(ss: list[Any]) -> list[Any]:
        return [s[:2] for s in ss if s[0] in ("rewards", "terminations", "truncations")]
    return others(slots) == others(first_slots)


def uniform_rows(rows: list[Any]) -> Any:
    """An array leaf's rows stored as values (outside its space): one array when every row is
    an array of one shape and dtype (a wrapper that changed every observation alike, and not
    its space), else the rows as they are."""
    if not rows or not all(type(r) is np.ndarray for r in rows):
        return rows
    first = rows[0]
    if first.dtype.hasobject or any(r.shape != first.shape or r.dtype != first.dtype
                                    for r in rows):
        return rows
    return np.stack(rows)


def join_leaf(where: str, columns: list[Any]) -> Any:
    """Joins one leaf's columns of consecutive parts (or episodes): one array if all are arrays
    of one row shape and one dtype holds them exactly
    (:func:`~gym_recorder.format.join_arrays`), else a list of rows."""
    # (an empty list: no rows of a leaf stored as values, e.g. a part of no steps)
    arrays = [c for c in columns if not (isinstance(c, list) and not c)]
    if arrays and all(isinstance(c, np.ndarray) for c in arrays) and len(
            {c.shape[1:] for c in arrays}) == 1:
        return join_arrays(where, arrays)
    rows: list[Any] = []
    for c in columns:
        rows.extend(list(c))
    return rows
