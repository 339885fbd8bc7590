"""Decoding a whole batch at once: every entry's array references checked column by column.

The writer lays a batch out column by column (see "Batch" in :mod:`gym_recorder.format`): the
observations of every entry, then their actions, rewards, terminations and truncations. Checking
each entry's references one by one (:meth:`~gym_recorder.read.decode.Decoder.plan_part`) costs tens
of microseconds of Python per entry, far more than the bytes of a short episode. Here the
references of one column of all entries are checked together, with the same rules as
:func:`~gym_recorder.format.parse_ref` and the decoder's shape, dtype and bounds checks, and
each entry's arrays are then views of the batch's bytes, read once.

This is only a fast path. An entry it does not handle (infos, options, values outside the
space, a leaf that is not an array) is left out of the result, and when any check of a column
fails the whole batch is left to the entry-by-entry path, which raises the precise error (or
reads the entries it can). So nothing is accepted here that the entry-by-entry path rejects.
"""

from __future__ import annotations

from itertools import chain
from math import prod
from operator import itemgetter
from typing import Any

import numpy as np

from ..format import fileio as _fileio
from ..errors import FormatError
from ..format import ALIGNMENT, ENDS, MAX_DIM, MAX_NDIM, parse_dtype
from .manifest import Manifest
from ..format.spaces import ArrayLeaf

__all__ = ["FastPart", "decode_columns"]

_INT = {int}
_INT_OR_NONE = {int, type(None)}
_LIST = {list}
_FLOAT64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
# A reference's keys: the first four every reference of a column shares, the rest differ.
_REF = itemgetter("__type", "order", "npyfile", "dtype", "shape", "npyoff", "size", "crc32")
_NDARRAY = {"ndarray"}
_C_ORDER = {"C"}


class FastPart:
    """One entry decoded by :func:`decode_columns`: views of the batch's bytes and metadata.

    ``info_rows`` empty info dicts are what its infos hold (entries with info keys are not
    decoded here).
    """

    __slots__ = ("obs", "act", "rewards", "terminations", "truncations", "info_rows", "seed",
                 "end", "sub_env", "no_reset")

    def __init__(self, obs: list[np.ndarray], act: list[np.ndarray], rewards: np.ndarray, terminations: np.ndarray,
                 truncations: np.ndarray, info_rows: int, seed: int | None, end: str | None,
                 sub_env: int | None, no_reset: bool) -> None:
        self.obs = obs
        self.act = act
        self.rewards = rewards
        self.terminations = terminations
        self.truncations = truncations
        self.info_rows = info_rows
        self.seed = seed
        self.end = end
        self.sub_env = sub_env
        self.no_reset = no_reset


def decode_columns(m: Manifest, bin_name: str, entries: list[Any], file_size: int,
                   data: np.ndarray, verify: bool) -> dict[int, FastPart]:
    """Decodes the plain entries of a (structurally checked, non-legacy) batch at once.

    Args:
        m: the batch's writer.
        bin_name: the batch's .bin file name.
        entries: the batch's entries (as :func:`~gym_recorder.read.batchfile.parse_batch` checked them).
        file_size: the .bin's size, checked against the manifest.
        data: the whole .bin's bytes.
        verify: check every array's CRC-32.

    Returns:
        Entry position -> its arrays (views of ``data``) and metadata, for the entries this
        path handles; empty when any check fails (the caller then decodes entry by entry).
    """
    lay_o, lay_a = m.obs_layout, m.act_layout
    if lay_o is None or lay_a is None:
        return {}  # a gym-recording writer: not in this format
    leaves_o, leaves_a = lay_o.leaves, lay_a.leaves
    if not all(isinstance(leaf, ArrayLeaf) for leaf in chain(leaves_o, leaves_a)):
        return {}
    single_o, single_a = lay_o.single, lay_a.single
    positions: list[int] = []
    metas: list[tuple[int, int, Any, Any, Any, bool]] = []
    obs_objs: list[list[Any]] = []
    act_objs: list[list[Any]] = []
    for pos, e in enumerate(entries):
        steps = e.get("steps")
        if type(steps) is not int or steps < 0:
            continue
        rows = steps + 1 if e["part"] == 0 else steps
        infos = e.get("infos")
        if type(infos) is not dict or infos.get("keys") != [] or infos.get("rows") != rows:
            continue
        seed, sub_env, end = e.get("seed"), e.get("sub_env"), e.get("end")
        if ((seed is not None and type(seed) is not int) or e.get("options") is not None
                or (sub_env is not None and type(sub_env) is not int)
                or (end is not None and end not in ENDS)):
            continue
        try:
            o = [e.get("observations")] if single_o else [
                obj for obj, _ in lay_o.tree_leaves(e.get("observations"), "")]
            a = [e.get("actions")] if single_a else [
                obj for obj, _ in lay_a.tree_leaves(e.get("actions"), "")]
        except FormatError:
            continue
        positions.append(pos)
        metas.append((steps, rows, seed, None if e.get("continues") is True else end, sub_env,
                      e.get("no_reset") is True))
        obs_objs.append(o)
        act_objs.append(a)
    if not positions:
        return {}
    steps_l = [meta[0] for meta in metas]
    rows_l = [meta[1] for meta in metas]
    columns: list[list[np.ndarray] | None] = []
    try:
        for k, leaf in enumerate(leaves_o):
            columns.append(_column([o[k] for o in obs_objs], rows_l, leaf.shape, None, bin_name,
                                   file_size, data, verify))
        for k, leaf in enumerate(leaves_a):
            columns.append(_column([a[k] for a in act_objs], steps_l, leaf.shape, None,
                                   bin_name, file_size, data, verify))
        for name, want in (("rewards", _FLOAT64), ("terminations", _BOOL),
                           ("truncations", _BOOL)):
            columns.append(_column([entries[pos].get(name) for pos in positions], steps_l, (),
                                   want, bin_name, file_size, data, verify))
    except (FormatError, TypeError, ValueError, OverflowError):
        return {}  # anything odd: the entry-by-entry path says what is wrong
    if any(col is None for col in columns):
        return {}
    n_o = len(leaves_o)
    cols: list[list[np.ndarray]] = [col for col in columns if col is not None]
    # Each entry's leaves, transposed from the columns at once.
    obs_rows = zip(*cols[:n_o])
    act_rows = zip(*cols[n_o:-3])
    out: dict[int, FastPart] = {}
    for pos, meta, o, a, r, t, u in zip(positions, metas, obs_rows, act_rows, *cols[-3:]):
        _, rows, seed, end, sub_env, no_reset = meta
        out[pos] = FastPart(list(o), list(a), r, t, u, rows, seed, end, sub_env, no_reset)
    return out


def _column(objs: list[Any], rows: list[int], tail: tuple[int, ...], want: np.dtype | None,
            bin_name: str, file_size: int, data: np.ndarray,
            verify: bool) -> list[np.ndarray] | None:
    """Checks one column's references (one per entry, of ``rows[j]`` rows of shape ``tail``)
    as :func:`~gym_recorder.format.parse_ref` and the decoder would; returns each entry's
    array, a view of ``data``, or None if anything is not as a well-formed batch has it."""
    if any("codec" in obj for obj in objs):
        return None  # compressed arrays: decoded entry by entry (format.codecs)
    try:
        kinds, orders, names, dtypes, shapes, offs, sizes, crcs = zip(*map(_REF, objs))
        if (set(kinds) != _NDARRAY or set(orders) != _C_ORDER or set(names) != {bin_name}
                or len(set(dtypes)) != 1):
            return None  # e.g. a leaf widened within the batch: the slow path handles it
    except (KeyError, TypeError, ValueError):
        return None  # not an object, or a key left out ("order" and "crc32" may be): one by one
    dtype_text = dtypes[0]
    dtype = parse_dtype(dtype_text, bin_name)
    if want is not None and dtype != want:
        return None
    isz = dtype.itemsize
    if dtype.kind == "U" or ALIGNMENT % dtype.alignment or not isz:
        return None  # code points to check, or views that would need a copy
    if len(tail) + 1 > MAX_NDIM or any(d > MAX_DIM for d in tail):
        return None
    # Every shape is [rows[j], *tail], of ints: checked on the shapes' items laid end to end
    # (each shape of len(tail) + 1 items, so item k of shape j is at j * ndim + k).
    ndim = len(tail) + 1
    if set(map(type, shapes)) != _LIST or set(map(len, shapes)) != {ndim}:
        return None
    items = list(chain.from_iterable(shapes))
    if not set(map(type, items)) <= _INT or items[::ndim] != rows or any(
            items[k::ndim] != [d] * len(rows) for k, d in enumerate(tail, 1)):
        return None
    max_rows = max(rows)
    nonzero = prod(d for d in tail if d) * isz
    if max_rows > MAX_DIM or max(max_rows, 1) * nonzero > MAX_DIM:
        return None
    if not (set(map(type, offs)) <= _INT and set(map(type, sizes)) <= _INT
            and set(map(type, crcs)) <= _INT_OR_NONE):
        return None
    given = [c for c in crcs if c is not None] if None in crcs else crcs
    if given and (min(given) < 0 or max(given) > 0xFFFFFFFF):
        return None
    offs_a = np.array(offs, dtype=np.int64)  # OverflowError for a huge one
    sizes_a = np.array(sizes, dtype=np.int64)
    row_bytes = prod(tail) * isz
    if ((offs_a < 0).any() or (offs_a % ALIGNMENT).any() or (offs_a > file_size).any()
            or (sizes_a != np.array(rows, dtype=np.int64) * row_bytes).any()
            or (offs_a + sizes_a > file_size).any()):
        return None
    if verify and any(c is not None and _fileio.crc32(data[o:o + s]) != c
                      for o, s, c in zip(offs, sizes, crcs)):
        return None
    if verify and dtype.kind == "b" and any(s and data[o:o + s].max() > 1
                                            for o, s in zip(offs, sizes)):
        return None  # (the part-by-part path names the bad array)
    if ALIGNMENT % isz == 0:
        flat = data[:len(data) // isz * isz].view(dtype)
        if not tail:  # a step column: the slice is already of shape (rows,) (sizes checked)
            return [flat[o // isz:(o + s) // isz] for o, s in zip(offs, sizes)]
        return [flat[o // isz:(o + s) // isz].reshape(r, *tail)
                for o, s, r in zip(offs, sizes, rows)]
    return [data[o:o + s].view(dtype).reshape(r, *tail) for o, s, r in zip(offs, sizes, rows)]
