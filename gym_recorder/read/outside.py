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

__all__ = ["join_leaf"]

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


def join_leaf(where: str, columns: list[Any]) -> Any:
    """Joins one leaf's columns of consecutive parts: one array if all are arrays and one dtype
    holds them exactly (:func:`~gym_recorder.format.join_arrays`), else a list of rows."""
    if all(isinstance(c, np.ndarray) for c in columns):
        return join_arrays(where, columns)
    rows: list[Any] = []
    for c in columns:
        rows.extend(list(c))
    return rows
