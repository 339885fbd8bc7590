"""The vector buffer's row work: a vector step's values split into per-leaf rows and checked,
and a filled batch's rows grouped into entries (segment by segment) for the encoder.

Helpers of :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer`; no I/O, no Gymnasium.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .batch import Segment
from ..errors import UnsupportedValueError
from ..format.spaces import ArrayLeaf, Layout
from ..format.values import snapshot

__all__ = ["VectorSegment", "vector_leaves", "single_leaves", "flat", "group_rows", "entries"]


def _flatten(value: Any, flatten: Callable[[Any], list[Any]] | None, what: str) -> list[Any]:
    """The leaves of a value (``flatten`` None: the value is the one leaf), or a named error."""
    try:
        return [value] if flatten is None else flatten(value)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise UnsupportedValueError(f"{what}: does not match the space ({e})") from e


def vector_leaves(value: Any, flatten: Callable[[Any], list[Any]] | None, layout: Layout, n: int,
                   what: str) -> list[Any]:
    """Flattens a batched value of ``n`` sub-envs into per-leaf ``(n, ...)`` arrays (of any
    dtype and shape: :meth:`VectorStepBuffer._put` fits them) or lists of values, checked."""
    values = _flatten(value, flatten, what)
    out = []
    for j, (leaf, v) in enumerate(zip(layout.leaves, values)):
        if not isinstance(leaf, ArrayLeaf):
            if len(v) != n:
                raise UnsupportedValueError(
                    f"{what} leaf {j}: {len(v)} values for {n} sub-envs")
            out.append([snapshot(x, f"{what} leaf {j}[{k}]") for k, x in enumerate(v)])
            continue
        if type(v) is not np.ndarray:
            try:
                v = np.asarray(v)
            except ValueError:  # (ragged)
                v = _rows(v, n, f"{what} leaf {j}")
        if v.ndim == 0 or v.shape[0] != n:
            raise UnsupportedValueError(f"{what} leaf {j}: shape {v.shape}, expected {n} rows "
                                        f"(one per sub-env) of {leaf.shape}")
        if v.dtype.hasobject:
            v = _rows(v, n, f"{what} leaf {j}")  # (checked and copied now)
        elif v.dtype.kind not in "biufcUS":
            raise UnsupportedValueError(f"{what} leaf {j}: numpy arrays of dtype {v.dtype} "
                                        "cannot be stored")
        out.append(v)
    return out


def _rows(v: Any, n: int, what: str) -> np.ndarray:
    """The ``n`` per-sub-env values of a leaf numpy cannot stack, as an object array."""
    try:
        rows = list(v)
    except TypeError:
        rows = []
    if len(rows) != n:
        raise UnsupportedValueError(f"{what}: {type(v).__name__}, expected {n} rows (one per "
                                    "sub-env)")
    out = np.empty(n, object)
    out[:] = [snapshot(x, f"{what}[{k}]") for k, x in enumerate(rows)]
    return out


def single_leaves(value: Any, flatten: Callable[[Any], list[Any]] | None, layout: Layout,
                   where: str) -> list[Any]:
    """Flattens one sub-env's observation into per-leaf values, copied (fitted by ``_put``)."""
    values = _flatten(value, flatten, where)
    out: list[Any] = []
    for j, (leaf, v) in enumerate(zip(layout.leaves, values)):
        if not isinstance(leaf, ArrayLeaf):
            out.append(snapshot(v, f"{where} leaf {j}"))
            continue
        try:
            arr = np.array(v)  # a copy
        except ValueError:  # (ragged: a value)
            out.append(snapshot(v, f"{where} leaf {j}"))
            continue
        if type(v) in (bool, int, float) and arr.dtype != leaf.dtype:
            # A Python number: the space's dtype when it holds it exactly (as the vector
            # env's batched observation would).
            try:
                cast = np.array(v, dtype=leaf.dtype)
            except (OverflowError, ValueError):
                cast = None
            if cast is not None and cast.item() == v:
                arr = cast
        out.append(arr if not arr.dtype.hasobject else snapshot(v, f"{where} leaf {j}"))
    return out


def flat(value: Any, n: int, name: str, dtype: type) -> np.ndarray:
    """A per-sub-env scalar (reward, flag) as an ``(n,)`` array, checked."""
    if type(value) is not np.ndarray or value.shape != (n,):
        value = np.asarray(value)
        if value.shape != (n,):
            raise UnsupportedValueError(f"{name}: shape {value.shape}, expected ({n},)")
    if dtype is np.bool_ and value.dtype != np.bool_:
        value = value.astype(np.bool_)
    flat: np.ndarray = value
    return flat


class VectorSegment:
    """The part of one episode that lies in the batch being filled (one entry when taken)."""

    __slots__ = ("sub_env", "episode", "part", "reset_idx", "final_idx", "reset_info", "seed",
                 "options", "end", "no_reset")

    def __init__(self, sub_env: int, episode: int, part: int, reset_idx: int | None,
                 reset_info: dict[str, Any] | None, seed: int | None, options: Any, no_reset: bool) -> None:
        self.sub_env = sub_env
        self.episode = episode
        self.part = part
        self.reset_idx = reset_idx    # flat observation row of the reset observation (part 0)
        self.final_idx: int | None = None  # flat row of its last observation, if not the step's
        self.reset_info = reset_info
        self.seed = seed
        self.options = options
        self.end: str | None = None
        self.no_reset = no_reset


def group_rows(ids_flat: np.ndarray, segs: list[VectorSegment]) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Finds each segment's rows, where ``ids_flat[f]`` is the segment of flat row ``f`` (or -1).

    A stable sort of the rows by segment id groups them, rows in order.

    Returns:
        (the flat step rows grouped by segment; the flat observation rows likewise, with each
        segment's reset and final observations in place; each segment's offset into the first,
        and into the second (``len(segs) + 1`` each); which segments start an episode).
    """
    count = len(segs)
    flat = np.flatnonzero(ids_flat >= 0)
    ids = ids_flat[flat]
    steps_idx = flat[np.argsort(ids, kind="stable")]  # grouped by segment, rows in order
    counts = np.bincount(ids, minlength=count)
    step_off = np.zeros(count + 1, np.intp)
    np.cumsum(counts, out=step_off[1:])
    first = np.array([s.reset_idx is not None for s in segs], np.bool_)
    resets = np.array([s.reset_idx for s in segs if s.reset_idx is not None], np.intp)
    obs_idx = np.insert(steps_idx, step_off[:-1][first], resets)
    obs_off = np.zeros(count + 1, np.intp)
    np.cumsum(counts + first, out=obs_off[1:])
    finals = [(k, s.final_idx) for k, s in enumerate(segs) if s.final_idx is not None]
    if finals:
        ks, slots = zip(*finals)
        obs_idx[obs_off[np.array(ks) + 1] - 1] = slots
    return steps_idx, obs_idx, step_off, obs_off, first


def entries(segs: list[VectorSegment], obs_off: list[int], step_off: list[int],
             seg_infos: list[list[tuple[int, dict[str, Any]]]]) -> tuple[
        list[Segment], list[tuple[int, dict[str, Any]]]]:
    """The batch's segments, and its (row, info) pairs counted across the batch, from each
    segment's row offsets (see :func:`group_rows`) and infos (rows counted in the segment)."""
    segments = []
    infos: list[tuple[int, dict[str, Any]]] = []
    for k, seg in enumerate(segs):
        part0 = seg.reset_idx is not None
        o0, o1 = obs_off[k], obs_off[k + 1]
        segments.append(Segment(  # (one info a row: info rows are observation rows)
            seg.episode, seg.part, o0, step_off[k], o0, seg.seed if part0 else None,
            seg.options if part0 else None, seg.sub_env, seg.no_reset,
            o1, step_off[k + 1], o1, seg.end))
        infos.extend((o0 + r, info) for r, info in seg_infos[k])
    return segments, infos
