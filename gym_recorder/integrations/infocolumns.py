"""Numeric infos as columns of the flat exports (npz, Parquet): one row per step.

Each step's info (the one ``step`` returned, not the reset's) gives a row. A key whose values
are numbers in every step that has it (Python bool, int, float; numpy scalars, or 0-d arrays,
of kinds b, i, u, f) becomes a column, nested dicts giving one column per numeric leaf, named
by its path (``reward_ctrl``, ``stats/speed``); a step without the key has no value there (a
``present`` mask). Any other key (strings, arrays, None, a number in some steps and not in
others) is left out, named once with the reason. MuJoCo's ``x_velocity`` and ``reward_ctrl``
are such columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..format import exact_in

__all__ = ["InfoColumns", "info_columns"]

# Python scalar types and the dtype their column gets.
_PY_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass
class InfoColumns:
    """The numeric step infos of a selection of episodes, one row per step.

    Attributes:
        values: column path (keys joined by ``/``) -> array of S rows (0 where absent).
        present: column path -> bool array of S rows, only for columns some step lacks.
        left_out: info key path -> why it is not a column.
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    present: dict[str, np.ndarray] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)


def _leaves(info: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in info.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def _dtype(value: Any) -> np.dtype[Any] | str:
    """The dtype of a numeric info value, or the name of what it is instead."""
    t = type(value)
    if t is int and not _INT64_MIN <= value <= _INT64_MAX:
        return "an integer beyond int64"
    if t in _PY_DTYPES:
        return _PY_DTYPES[t]
    if isinstance(value, (np.generic, np.ndarray)) and value.shape == () \
            and value.dtype.kind in "biuf" and value.dtype.itemsize <= 8:
        dtype: np.dtype[Any] = value.dtype.newbyteorder("=")
        return dtype
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"a {t.__name__}"


def info_columns(step_infos: Iterable[list[dict[str, Any]]]) -> InfoColumns:
    """The numeric info columns of episodes, given each episode's step infos in turn.

    Args:
        step_infos: per episode, its N step infos (an episode's ``infos[1:]``).
    """
    rows: dict[str, list[tuple[int, Any]]] = {}
    dtypes: dict[str, list[np.dtype[Any]]] = {}
    out = InfoColumns()
    total = 0
    for infos in step_infos:
        for info in infos:
            for path, value in _leaves(info):
                if path in out.left_out:
                    continue
                kind = _dtype(value)
                if isinstance(kind, str):
                    out.left_out[path] = f"not a number ({kind} at step row {total})"
                    rows.pop(path, None)
                    continue
                rows.setdefault(path, []).append((total, value))
                dtypes.setdefault(path, []).append(kind)
            total += 1
    for path, items in rows.items():
        kinds = list(dict.fromkeys(dtypes[path]))
        dtype = np.result_type(*kinds) if len(kinds) > 1 else kinds[0]
        at = np.fromiter((r for r, _ in items), dtype=np.int64, count=len(items))
        column = np.zeros(total, dtype=dtype)
        exact = True
        for k in kinds:  # every value of each recorded dtype kept exactly (no int64 -> float)
            mine = [v for v, d in zip((v for _, v in items), dtypes[path]) if d == k]
            exact = exact and exact_in(np.asarray(mine, dtype=k), dtype)
        if not exact:
            out.left_out[path] = (f"its values ({', '.join(map(str, kinds))}) have no one "
                                  f"dtype that holds them all exactly")
            continue
        column[at] = np.asarray([v for _, v in items], dtype=dtype)
        out.values[path] = column
        if len(at) != total:
            mask = np.zeros(total, dtype=np.bool_)
            mask[at] = True
            out.present[path] = mask
    return out
