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

__all__ = ["vector_segment", "vector_leaves", "single_leaves", "flat", "group_rows", "segment_infos",
           "entries"]


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


def vector_segment(sub_env: int, episode: int, part: int, reset_row: int | None,
                   reset_info: dict[str, Any] | None, seed: int | None, options: Any,
                   no_reset: bool) -> Segment:
    """The part of one episode that lies in the batch being filled: its rows are set when the
    batch is taken (:func:`entries`)."""
    return Segment(episode, part, 0, 0, 0, seed, options, sub_env, no_reset,
                   reset_row=reset_row, reset_info=reset_info)


def group_rows(ids_flat: np.ndarray, segs: list[Segment]) -> tuple[
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
    first = np.array([s.reset_row is not None for s in segs], np.bool_)
    resets = np.array([s.reset_row for s in segs if s.reset_row is not None], np.intp)
    obs_idx = np.insert(steps_idx, step_off[:-1][first], resets)
    obs_off = np.zeros(count + 1, np.intp)
    np.cumsum(counts + first, out=obs_off[1:])
    finals = [(k, s.final_row) for k, s in enumerate(segs) if s.final_row is not None]
    if finals:
        ks, slots = zip(*finals)
        obs_idx[obs_off[np.array(ks) + 1] - 1] = slots
    return steps_idx, obs_idx, step_off, obs_off, first


def segment_infos(segs: list[Segment], ids_flat: np.ndarray, steps_idx: np.ndarray,
                  step_off: np.ndarray, first: np.ndarray,
                  step_infos: list[tuple[int, dict[str, Any]]]
                  ) -> list[list[tuple[int, dict[str, Any]]]]:
    """Each segment's infos as (row within the segment, info): its reset info at row 0, then
    the step infos (given at their flat column rows), placed as :func:`group_rows` grouped
    the rows."""
    seg_infos: list[list[tuple[int, dict[str, Any]]]] = [
        [(0, s.reset_info)] if s.reset_info else [] for s in segs]
    if step_infos:
        where = np.empty(len(ids_flat), np.intp)
        where[steps_idx] = np.arange(len(steps_idx))
        rows = np.array([f for f, _ in step_infos], np.intp)
        sid = ids_flat[rows]
        rel = where[rows] - step_off[sid] + first[sid]
        for k, r, (_, info) in zip(sid.tolist(), rel.tolist(), step_infos):
            seg_infos[k].append((r, info))
    return seg_infos


def entries(segs: list[Segment], obs_off: list[int], step_off: list[int],
            seg_infos: list[list[tuple[int, dict[str, Any]]]]) -> list[tuple[int, dict[str, Any]]]:
    """Sets each segment's rows in the batch from its offsets (see :func:`group_rows`); returns
    the batch's (row, info) pairs counted across the batch, from each segment's infos (rows
    counted in the segment)."""
    infos: list[tuple[int, dict[str, Any]]] = []
    for k, seg in enumerate(segs):
        o0, o1 = obs_off[k], obs_off[k + 1]
        seg.obs0, seg.step0, seg.info0 = o0, step_off[k], o0  # (one info a row: info rows
        seg.obs1, seg.step1, seg.info1 = o1, step_off[k + 1], o1  # are observation rows)
        infos.extend((o0 + r, info) for r, info in seg_infos[k])
    return infos
