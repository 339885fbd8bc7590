"""What the single-env and the vector-env buffers share: layouts, column sizing and reuse, and
the one rule that fits a value into its column (widen, else values).

:class:`ColumnBuffer` is the base of :class:`~gym_recorder.record.buffer.StepBuffer` (one row a
step) and :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer` (one row a sub-env and
vector step). No I/O and no Gymnasium here.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import OutsideSpaceWarning, user_stacklevel
from ..format import exact_in
from ..format.spaces import ArrayLeaf, Layout
from ..format.values import record_info

__all__ = ["ColumnBuffer", "steps_for_target", "worth_resizing", "row_view", "MIN_BATCH_STEPS",
           "MAX_BATCH_STEPS"]

# A batch buffers at least this many steps, so that tiny targets or huge frames still make progress.
MIN_BATCH_STEPS = 1
# ...and at most this many, so that a near-zero bytes-per-step estimate cannot allocate without bound.
MAX_BATCH_STEPS = 1 << 20
# Bytes per step assumed for a value that does not stack (Text, Sequence, ...) before the first
# batch tells the truth.
VALUES_BYTES_GUESS = 64
# JSON bytes per step assumed for rewards, flags and references before the first batch (an
# episode entry holds about 1 kB of JSON; at 16+ steps per episode, about 64 bytes a step).
STEP_OVERHEAD_GUESS = 64


def steps_for_target(target_bytes: int, bytes_per_step: float) -> int:
    """How many steps a batch buffers to come out near ``target_bytes``, within the bounds."""
    steps = int(target_bytes / max(bytes_per_step, 1.0))
    return max(MIN_BATCH_STEPS, min(MAX_BATCH_STEPS, steps))


def worth_resizing(current: int, new: int) -> bool:
    """True when a batch size estimate moved by more than a quarter (so columns are reused)."""
    return abs(new - current) * 4 > current


def row_view(col: np.ndarray | None) -> tuple[memoryview | None, int]:
    """A memoryview through which a step's value is copied into a row of ``col`` (the fast path
    of recording a step), and the row's length in items; (None, 0) when there is none.

    For a column of 1-D rows, the view is the flat column: ``view[r * k:r * k + k] = value``
    copies a value of exactly the column's dtype (buffer format) and row shape, and raises
    (ValueError, TypeError) for any other. For a column of integer scalars, the length is 0 and
    ``view[r] = value`` stores any exact integer in range, and raises for anything else.
    Columns of other rows (images: numpy's own copy is as fast) have no view.
    """
    if col is None or col.ndim not in (1, 2) or not col.flags.c_contiguous:
        return None, 0
    try:
        if col.ndim == 1:
            view = col.data
            return (view, 0) if view.format in _INT_FORMATS else (None, 0)
        view = col.reshape(-1).data
        k = col.shape[1]
        if len(col) and k:
            view[0:k] = view[0:k]  # (a format memoryview cannot copy raises here)
        return (view, k) if k else (None, 0)
    except (TypeError, ValueError, BufferError, NotImplementedError):
        return None, 0


# memoryview formats of integer scalars ("?" stores any object's truth value: left out).
_INT_FORMATS = frozenset("bBhHiIlLqQ")


def _estimate_step_bytes(obs_layout: Layout, act_layout: Layout) -> int:
    total = STEP_OVERHEAD_GUESS + 8 + 2  # reward float64, two flags
    for leaf in obs_layout.leaves + act_layout.leaves:
        if isinstance(leaf, ArrayLeaf):
            total += leaf.dtype.itemsize * math.prod(leaf.shape)
        else:
            total += VALUES_BYTES_GUESS
    return total


# Allocates an array column: (shape, dtype) -> a new array.
Allocator = Callable[[tuple[int, ...], Any], np.ndarray]


def empty_array(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """The default :data:`Allocator`: ``np.empty``."""
    return np.empty(shape, dtype)


class ColumnBuffer:
    """What the single-env and the vector-env buffers share: layouts, columns, sizing and infos.

    A buffer fills preallocated columns (one per observation and action leaf) for the batch
    being filled, sized for about ``target_batch_bytes`` per batch, and hands them out as a
    :class:`Batch`. Subclasses say how rows are addressed (:class:`StepBuffer`: one row per step;
    :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer`: one row per sub-env and vector step).

    Args:
        obs_layout: layout of the (single) observation space.
        act_layout: layout of the (single) action space.
        target_batch_bytes: aim for batches of about this many bytes.
        record_infos: keep the info dicts.
        info_filter: called with each non-empty info dict; returns the dict to record.
        per_row: steps per row of the capacity (1; the vector buffer's ``num_envs``).
    """

    def __init__(self, obs_layout: Layout, act_layout: Layout, target_batch_bytes: int,
                 record_infos: bool, info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None,
                 per_row: int = 1) -> None:
        self._obs_layout = obs_layout
        self._act_layout = act_layout
        self._obs_flatten = None if obs_layout.single else obs_layout.flattener()
        self._act_flatten = None if act_layout.single else act_layout.flattener()
        self._target = target_batch_bytes
        self._record_infos = record_infos
        self._info_filter = info_filter
        self._per_row = per_row
        self.episodes_started = 0
        # How array columns are allocated (the session sets shared memory's for WRITE_MODE
        # "process", see use_allocator).
        self.array_alloc: Allocator = empty_array
        self._pool: list[Any] = []  # column sets handed back by written batches, for reuse
        # Rows of the next batches (steps of a single env, vector steps of a vector env).
        self._capacity = self._capacity_for(_estimate_step_bytes(obs_layout, act_layout))
        self._cap = self._capacity  # rows of the batch being filled
        self._obs_cols: list[Any] = []
        self._act_cols: list[Any] = []
        self._warned: set[tuple[str, int]] = set()  # leaves warned about (outside the space)
        self._values_leaves: set[tuple[str, int]] = set()  # array leaves stored as values
        self._obs0: np.ndarray | None = None  # the one column of a single-leaf space, if stacked
        self._act0: np.ndarray | None = None

    # -- sizing ----------------------------------------------------------------------------

    def _capacity_for(self, bytes_per_step: float) -> int:
        return max(MIN_BATCH_STEPS,
                   steps_for_target(self._target, bytes_per_step) // self._per_row)

    def observe_batch_bytes(self, bytes_written: int, steps: int) -> None:
        """Adapts the next batches' capacity to the bytes per step actually written.

        Called from the writer thread; the new size takes effect when the next batch starts, and
        only when the estimate moves by more than a quarter, so that columns are reused.
        """
        if steps <= 0:
            return
        new = self._capacity_for(bytes_written / steps)
        if worth_resizing(self._capacity, new):
            self._capacity = new
            self._pool.clear()

    @property
    def capacity(self) -> int:
        """How many rows (steps; vector steps and resets) the batch being filled holds."""
        return self._cap

    # -- columns ---------------------------------------------------------------------------

    def use_allocator(self, alloc: Allocator) -> bool:
        """Allocates the next column sets with ``alloc`` (the pooled ones are dropped); False,
        doing nothing, when ``alloc`` is the allocator in use already."""
        if alloc == self.array_alloc:
            return False
        self.array_alloc = alloc
        self._pool.clear()
        return True

    @staticmethod
    def _alloc_leaves(layout: Layout, rows: int, values: Callable[[], Any],
                      alloc: Allocator = empty_array) -> list[Any]:
        """Per leaf, a preallocated array of ``rows`` rows (from ``alloc``), or ``values()``
        for a leaf that does not stack."""
        return [alloc((rows, *leaf.shape), leaf.dtype) if isinstance(leaf, ArrayLeaf)
                else values() for leaf in layout.leaves]

    def _fits(self, obs_cols: list[Any], act_cols: list[Any]) -> bool:
        """True when no array column was widened (each has its leaf's dtype)."""
        return all(type(c) is list or c.dtype.hasobject or c.dtype == leaf.dtype
                   for c, leaf in zip(obs_cols + act_cols,
                                      self._obs_layout.leaves + self._act_layout.leaves))

    def _widen(self, cols: list[Any], j: int, dtype: np.dtype[Any]) -> np.ndarray:
        """Widens array column ``j`` of ``cols`` to ``dtype`` for the batch being filled, so that
        a value that does not fit the space's dtype is kept exactly."""
        with np.errstate(invalid="ignore"):  # (rows not written yet hold garbage)
            col: np.ndarray = cols[j].astype(dtype)
        cols[j] = col
        if j == 0:
            if cols is self._obs_cols and self._obs_layout.single:
                self._obs0 = col
            elif cols is self._act_cols and self._act_layout.single:
                self._act0 = col
        return col

    def _fit(self, cols: list[Any], j: int, v: Any, row_shape: tuple[int, ...],
             written_exact_in: Callable[[np.dtype[Any]], bool], what: str,
             python_number: bool = False) -> np.ndarray | None:
        """The one rule (both buffers) for a value that is not of its array column's dtype and
        shape: the column to store it in, widened if need be, or None when the leaf must be
        stored as one value a row from now on (warned once per leaf either way).

        Widen when a wider dtype holds both the value and the rows written so far exactly
        (int64 and float32 meet in float64, which rounds integers beyond 2**53); else values.
        Another shape, or something that is not numbers: values.

        Args:
            cols: the observation or action columns; ``cols[j]`` is an array column.
            j: the leaf.
            v: the value (rows of it, for the vector buffer), an array unless not numbers.
            row_shape: the shape of one row of ``v``.
            written_exact_in: tells whether the rows written so far keep their values in a dtype.
            what: ``"observation"`` or ``"action"``.
            python_number: ``v`` came from a Python number (an int that fits is no news, a
                float into a float column is widened without a warning).
        """
        col: np.ndarray = cols[j]
        leaf_dtype = getattr((self._obs_layout if cols is self._obs_cols
                              else self._act_layout).leaves[j], "dtype", col.dtype)
        if type(v) is not np.ndarray or v.dtype.hasobject or v.dtype.kind not in "biufc":
            dtype = getattr(v, "dtype", "object")
            self._outside(cols, j, what, f"a {type(v).__name__} (dtype {dtype}) where the space "
                          f"has {leaf_dtype} numbers; stored as one value a row from now on")
            return None
        if row_shape != col.shape[1:]:
            self._outside(cols, j, what, f"shape {row_shape} (dtype {v.dtype}) does not match "
                          f"the space's shape {col.shape[1:]}; stored as one value a row from "
                          "now on")
            return None
        if v.dtype == col.dtype:
            return col
        python_int = python_number and v.dtype.kind in "biu" and col.dtype.kind in "iu"
        safe = np.can_cast(v.dtype, col.dtype, "safe")
        if (safe or python_int) and exact_in(v, col.dtype):
            return col
        if not safe:  # ("safe" to numpy, yet it would round: values, below)
            wide = np.result_type(col.dtype, v.dtype)
            if exact_in(v, wide) and written_exact_in(wide):
                if not (python_number and col.dtype.kind == "f"):
                    self._outside(cols, j, what, f"dtype {v.dtype} does not fit the space's "
                                  f"{leaf_dtype}; stored as {wide}")
                return self._widen(cols, j, wide)
        self._outside(cols, j, what, f"values of dtype {v.dtype} and {col.dtype} have no "
                      "common dtype that holds both exactly; stored as one value a row from "
                      "now on")
        return None

    # -- infos -----------------------------------------------------------------------------

    def _info(self, info: Any, where: str) -> dict[str, Any] | None:
        if not self._record_infos or not info:
            return None
        return record_info(info, self._info_filter, where)

    def _outside(self, cols: list[Any], j: int, what: str, message: str) -> None:
        """Warns once per leaf that a value lies outside the space (it is kept exactly).

        Args:
            cols: the observation or action columns the leaf is in.
            j: the leaf.
            what: ``"observation"`` or ``"action"``.
            message: what is outside the space, and how it is stored.
        """
        side = "obs" if cols is self._obs_cols else "act"
        if (side, j) in self._warned:
            return
        self._warned.add((side, j))
        layout = self._obs_layout if side == "obs" else self._act_layout
        path = layout.leaf_paths()[j]
        warnings.warn(f"{what}{path}: {message} (gym_recorder records what the env returned, "
                      "exactly; warned once per leaf)", OutsideSpaceWarning, stacklevel=user_stacklevel())
