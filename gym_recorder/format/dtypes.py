"""Dtypes in a recording: which dtype strings a reader accepts, and how one leaf's dtypes join.

:func:`parse_dtype` refuses object, unknown and zero-size dtypes (a recording is untrusted);
:func:`join_dtype` and :func:`join_arrays` give the dtype one leaf's parts join in (see "Trees"
in :mod:`gym_recorder.format`), keeping every value exactly (:func:`exact_dtype`,
:func:`exact_in`): a join that would round some value gives the rows as a list instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import FormatError

__all__ = ["DTYPE_CACHE_SIZE", "exact_dtype", "exact_in", "join_arrays", "join_dtype",
           "parse_dtype", "rounding_dtypes"]

# numpy dtype strings we accept: byte order, kind, item size (b1, i1..i8, u1..u8, f2..f16,
# c8..c32, U<n>, S<n>); legacy files use numpy's names ("float32", "uint8", "bool").
_DTYPE_RE = re.compile(r"[<>|=]?(?:b1|[iu][1248]|f(?:2|4|8|10|12|16)|c(?:8|16|20|24|32)|[US][0-9]{1,7})")
_DTYPE_NAMES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)
# Accepted dtype strings, parsed once: a recording uses a handful (bounded against hostile files).
DTYPE_CACHE_SIZE = 256
_DTYPE_CACHE: dict[str, np.dtype] = {}


def parse_dtype(text: object, where: str) -> np.dtype:
    """Parses a dtype string from a recording, refusing object and unknown dtypes.

    Raises:
        FormatError: if ``text`` is not a plain numeric, bool or fixed-size string dtype.
    """
    dtype = _DTYPE_CACHE.get(text) if type(text) is str else None
    if dtype is not None:
        return dtype
    if not isinstance(text, str) or not (_DTYPE_RE.fullmatch(text) or text in _DTYPE_NAMES):
        raise FormatError(f"{where}: unsupported dtype {text!r}")
    try:
        dtype = np.dtype(text)
    except TypeError as e:
        raise FormatError(f"{where}: unsupported dtype {text!r}") from e
    if dtype.kind not in "biufcUS" or dtype.hasobject or dtype.itemsize == 0:
        raise FormatError(f"{where}: unsupported dtype {text!r}")
    if len(_DTYPE_CACHE) < DTYPE_CACHE_SIZE:
        _DTYPE_CACHE[text] = dtype
    return dtype


def exact_dtype(src: np.dtype[Any], dst: np.dtype[Any]) -> bool:
    """Every value of ``src`` is exactly a value of ``dst`` (numpy's "safe" casts include
    int64 -> float64, which rounds integers beyond 2**53)."""
    if not np.can_cast(src, dst, "safe"):
        return False
    if src.kind in "iu" and dst.kind in "fc":
        return bool(src.itemsize * 8 - (src.kind == "i") <= np.finfo(dst).nmant + 1)
    return True


def exact_in(values: np.ndarray, dtype: np.dtype[Any]) -> bool:
    """True when ``values`` cast to ``dtype`` keep every value exactly (NaNs included)."""
    if exact_dtype(values.dtype, dtype):
        return True
    with np.errstate(all="ignore"):
        back = values.astype(dtype).astype(values.dtype)
    return bool(np.array_equal(back, values, equal_nan=values.dtype.kind in "fc"))


def join_dtype(dtypes: Sequence[np.dtype[Any]], where: str) -> np.dtype[Any]:
    """The dtype one leaf's parts are joined in (see "Trees"): numpy's result_type of numbers,
    of U strings or of S strings.

    Raises:
        FormatError: for other mixes (numbers with strings, U with S).
    """
    first = dtypes[0]
    if all(d == first for d in dtypes):
        return first
    kinds = {d.kind for d in dtypes}
    if not (kinds <= set("biufc") or kinds == {"U"} or kinds == {"S"}):
        raise FormatError(f"{where}: the episode's parts store one leaf with dtypes that do "
                          f"not mix: {sorted({d.str for d in dtypes})}")
    return np.result_type(*dtypes)


def rounding_dtypes(dtypes: Sequence[np.dtype[Any]], joined: np.dtype[Any]) -> set[np.dtype[Any]]:
    """Those of ``dtypes`` that ``joined`` may not hold every value of (int64 beside float64)."""
    return {d for d in set(dtypes) if not exact_dtype(d, joined)}


def join_arrays(where: str, arrays: Sequence[np.ndarray]) -> np.ndarray | list[Any]:
    """Joins one leaf's arrays of consecutive parts (or episodes), keeping every value exactly.

    One array of :func:`join_dtype` when that dtype holds every part's values exactly, else
    (64-bit integers beyond 2**53 meeting a float part, int64 meeting uint64 beyond 2**63)
    the list of their rows, each in its part's dtype, as for a leaf stored as values.
    """
    if len(arrays) == 1:
        return arrays[0]
    dtypes = [a.dtype for a in arrays]
    first = dtypes[0]
    if all(d == first for d in dtypes):
        return np.concatenate(arrays)
    dtype = join_dtype(dtypes, where)
    risky = rounding_dtypes(dtypes, dtype)
    if all(a.dtype not in risky or exact_in(a, dtype) for a in arrays):
        return np.concatenate(arrays, dtype=dtype)
    rows: list[Any] = []
    for a in arrays:
        rows.extend(a)
    return rows
