"""Episode buffering: appends steps into preallocated columns and hands out finished batches.

No I/O and no Gymnasium protocol here: the wrapper feeds values in, the batch writer takes
:class:`~gym_recorder.record.batch.Batch` objects out. :class:`StepBuffer` is the single-env front
end of :class:`~gym_recorder.record.columns.ColumnBuffer` (what both buffers share: layouts,
sizing, column reuse, the fit rule, infos); :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer`
is the vector one.
Each column is preallocated for the batch being filled, so recording a step is one copy of each
observation and action into memory that is reused from batch to batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .batch import Batch, Segment
from .columns import (MAX_BATCH_STEPS, MIN_BATCH_STEPS, Allocator, ColumnBuffer, empty_array,
                      row_view, steps_for_target, worth_resizing)
from ..errors import UnsupportedValueError
from ..format import exact_in
from ..format.spaces import Layout
from ..format.values import record_info, snapshot

__all__ = ["Batch", "Segment", "StepBuffer", "StepColumns", "snapshot", "record_info",
           "MIN_BATCH_STEPS", "MAX_BATCH_STEPS", "steps_for_target", "worth_resizing"]

# Extra observation rows per batch, as a fraction of its steps, for the reset observations of the
# episodes that start in it (at least RESET_ROWS_MIN); a batch also ends when these run out.
RESET_ROWS_FRACTION = 0.25
RESET_ROWS_MIN = 8


class _Columns:
    """One set of preallocated columns, with capacity for ``steps`` steps."""

    def __init__(self, obs_layout: Layout, act_layout: Layout, steps: int,
                 alloc: Allocator = empty_array) -> None:
        self.steps = steps
        self.alloc = alloc
        self.obs_rows = steps + max(RESET_ROWS_MIN, int(steps * RESET_ROWS_FRACTION))
        # Per leaf: a preallocated array, or a list of values (leaves stored as values).
        self.obs = ColumnBuffer._alloc_leaves(obs_layout, self.obs_rows, list, alloc)
        self.act = ColumnBuffer._alloc_leaves(act_layout, steps, list, alloc)

    def reset_lists(self) -> None:
        for col in self.obs:
            if type(col) is list:
                col.clear()
        for col in self.act:
            if type(col) is list:
                col.clear()


class StepColumns(ColumnBuffer):
    """The columns of :class:`StepBuffer` (one row a step; observation rows for the resets
    besides), their per-step fast paths, and storing a value that does not take them."""

    _n_obs: int
    _n_steps: int

    def _new_columns(self) -> None:
        cols = None
        while self._pool:
            candidate = self._pool.pop()
            if candidate.steps == self._capacity and candidate.alloc is self.array_alloc \
                    and self._fits(candidate.obs, candidate.act):
                cols = candidate
                break
        if cols is None:
            cols = _Columns(self._obs_layout, self._act_layout, self._capacity,
                            self.array_alloc)
        for side, j in self._values_leaves:  # leaves that went outside their space's shape
            (cols.obs if side == "obs" else cols.act)[j] = []
        cols.reset_lists()
        self._cols = cols
        self._obs_cols = cols.obs
        self._act_cols = cols.act
        # Fast paths for a space that is one stacked array (not one leaf of values, e.g. Sequence).
        self._obs0 = cols.obs[0] if self._obs_layout.single and type(cols.obs[0]) is not list \
            else None
        self._act0 = cols.act[0] if self._act_layout.single and type(cols.act[0]) is not list \
            else None
        self._cap = cols.steps
        self._cap_obs = cols.obs_rows
        self._n_obs = 0
        self._n_steps = 0
        self._check_at = 1  # (record_step reports a new batch's first step: see check_after)
        self._fast_paths()
        self._rewards: list[float] = []
        # (step row, terminated, truncated) of the steps that ended an episode: the only ones
        # whose flags are not both false (a step with a flag set ends its episode)
        self._flags: list[tuple[int, Any, Any]] = []
        self._infos: list[tuple[int, dict[str, Any]]] = []  # (info row within the batch, info)
        self._segments: list[Segment] = []  # episodes (or parts) that lie in this batch

    def use_allocator(self, alloc: Allocator) -> bool:
        """As :meth:`ColumnBuffer.use_allocator`; the columns of a batch not begun yet are
        allocated again now (else the first batch would not be in shared memory)."""
        changed = super().use_allocator(alloc)
        if changed and self._n_obs == 0 and self._n_steps == 0 and not self._segments:
            self._new_columns()
        return changed

    def _fast_paths(self) -> None:
        """Sets up the per-step fast paths for the current columns (again after a column was
        widened or turned into values), and the step count at which :meth:`record_step`
        reports (:meth:`_set_limit`)."""
        obs0, act0 = self._obs0, self._act0
        self._obs_shape = obs0.shape[1:] if obs0 is not None else None
        self._act_shape = act0.shape[1:] if act0 is not None else None
        self._obs_mv, self._obs_k = row_view(obs0)
        self._act_mv, self._act_k = row_view(act0)
        self._set_limit()

    def _set_limit(self) -> None:
        # A step fills the batch when the steps reach the capacity, or the observation rows
        # (the steps plus the reset rows so far) reach theirs: one count covers both.
        self._limit = min(self._cap, self._cap_obs - (self._n_obs - self._n_steps),
                          self._check_at)

    def check_after(self, steps: int) -> None:
        """Makes :meth:`record_step` report (return True) once ``steps`` more steps are
        recorded, even if the batch is not full then (the owner checks its clock)."""
        self._check_at = self._n_steps + max(1, steps)
        self._set_limit()

    def _put_obs(self, row: int, obs: Any) -> None:
        """Stores an observation in its row (the fast path of :meth:`StepBuffer.record_step`,
        then :meth:`_put_obs_exact`)."""
        mv = self._obs_mv
        if mv is not None:
            k = self._obs_k
            try:
                mv[row * k:row * k + k] = obs
                return
            except (TypeError, ValueError, BufferError, NotImplementedError):
                pass
        self._put_obs_exact(row, obs)

    def _put_obs_exact(self, row: int, obs: Any) -> None:
        """Stores an observation in its row: one numpy copy for an array of exactly the
        column's dtype and shape (an image), else by :meth:`_store`."""
        obs0 = self._obs0
        if obs0 is not None and type(obs) is np.ndarray and obs.dtype is obs0.dtype \
                and obs.shape == self._obs_shape:
            obs0[row] = obs
        else:
            self._store(self._obs_cols, self._obs_layout, self._obs_flatten, row, obs,
                        "observation")

    def _put_action(self, row: int, action: Any) -> None:
        """Stores an action in its row, as :meth:`_put_obs_exact` does an observation."""
        act0 = self._act0
        if act0 is not None and type(action) is np.ndarray and action.dtype is act0.dtype \
                and action.shape == self._act_shape:
            act0[row] = action
        else:
            self._store(self._act_cols, self._act_layout, self._act_flatten, row, action,
                        "action")

    def _store(self, cols: list[Any], layout: Layout, flatten: Callable[[Any], list[Any]] | None,
               row: int, value: Any, what: str) -> None:
        values = [value] if flatten is None else flatten(value)
        for j, v in enumerate(values):
            col = cols[j]
            if type(col) is list:
                del col[row:]  # drop what a failed earlier call may have left
                col.append(snapshot(v, f"{what} leaf {j}"))
                continue
            if type(v) is not np.ndarray or v.dtype != col.dtype or v.shape != col.shape[1:]:
                arr = np.asarray(v)
                fitted = self._fit(cols, j, arr, arr.shape,
                                   lambda dtype: exact_in(col[:row], dtype), what,
                                   python_number=type(v) in (int, bool, float))
                if fitted is None:
                    kept = snapshot(v, f"{what} leaf {j}")  # (raises if it cannot be stored)
                    self._to_values(cols, j, row).append(kept)
                    continue
                col, v = fitted, arr
            col[row] = v
        self._fast_paths()  # (a column may have been widened or turned into values)

    def _to_values(self, cols: list[Any], j: int, row: int) -> list[Any]:
        """Turns leaf column ``j`` into a list of per-row values (the rows so far kept), for
        this batch and every later one."""
        col = cols[j]
        rows: list[Any] = [col[r].copy() if col.ndim > 1 else col[r] for r in range(row)]
        cols[j] = rows
        if cols is self._obs_cols:
            self._values_leaves.add(("obs", j))
            if self._obs_layout.single:
                self._obs0 = None
        else:
            self._values_leaves.add(("act", j))
            if self._act_layout.single:
                self._act0 = None
        return rows


class StepBuffer(StepColumns):
    """Buffers the steps of one environment into batches of bounded size.

    The owner calls :meth:`start_episode` at each reset and :meth:`add_step` at each step, checks
    :attr:`full`, and calls :meth:`take` to get the batch: finished episodes, and the open episode
    cut into a part that continues in the next batch. Memory stays near one batch (plus the ones
    the writer holds), whatever the episode length.

    Args:
        obs_layout: layout of the observation space.
        act_layout: layout of the action space.
        target_batch_bytes: aim for batches of about this many bytes.
        record_infos: keep the info dicts.
        info_filter: called with each non-empty info dict; returns the dict to record.
    """

    def __init__(self, obs_layout: Layout, act_layout: Layout, target_batch_bytes: int,
                 record_infos: bool = True,
                 info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        super().__init__(obs_layout, act_layout, target_batch_bytes, record_infos, info_filter)
        self._open_episode: Segment | None = None
        self._last_obs: list[Any] | None = None
        self._last_obs_row: int | None = None  # row of the last ended episode's final obs
        self._new_columns()

    def discard(self) -> None:
        """Forgets everything buffered and every open episode (in a forked child: the parent
        writes them); episodes are numbered from 0 again, for a new writer."""
        StepBuffer.__init__(self, self._obs_layout, self._act_layout, self._target,
                            self._record_infos, self._info_filter)

    @property
    def episode_open(self) -> bool:
        """True between an episode's start and its end."""
        return self._open_episode is not None

    @property
    def full(self) -> bool:
        """True when the batch being filled has no room for a reset and the step after it.

        (Callers check this before :meth:`start_episode`: a reset takes an observation row, and
        the step that follows it another, so one free row is not enough.)
        """
        return self._n_steps >= self._cap or self._n_obs + 2 > self._cap_obs

    # -- the protocol ---------------------------------------------------------------------

    def start_episode(self, obs: Any, info: dict[str, Any], seed: int | None, options: Any,
                      sub_env: int | None = None) -> None:
        """Starts an episode with the reset observation; ends the open one as ``"reset"``."""
        if self._open_episode is not None:
            self.end_episode("reset")
        self._begin(obs, info, seed, options, sub_env, no_reset=False)

    def _begin(self, obs: Any, info: dict[str, Any], seed: int | None, options: Any,
               sub_env: int | None, no_reset: bool) -> None:
        if options is not None:
            options = snapshot(options, "reset options")
        rec_info = self._info(info, "reset info") if info else None
        n = self._n_obs
        self._put_obs(n, obs)
        seg = Segment(self.episodes_started, 0, n, self._n_steps, n, seed,
                      options, sub_env, no_reset)
        self._n_obs = n + 1
        self._limit = min(self._cap, self._cap_obs - (n + 1 - self._n_steps), self._check_at)
        if rec_info:
            self._infos.append((n, rec_info))  # (info rows are observation rows)
        self.episodes_started += 1
        self._open_episode = seg

    def add_step(self, action: Any, obs: Any, reward: Any, terminated: Any, truncated: Any,
                 info: dict[str, Any]) -> bool:
        """Appends one transition to the open episode (or, after an ended one, to a new
        episode marked ``no_reset`` that starts from the last observation).

        Returns:
            True when the batch is full: the caller must :meth:`take` it before the next step.
        """
        if self._open_episode is None:
            self._begin(self._last_observation(), {}, None, None, None, no_reset=True)
        self.record_step(action, (obs, reward, terminated, truncated, info))
        return self._n_steps >= self._cap or self._n_obs >= self._cap_obs

    def record_step(self, action: Any, result: tuple[Any, Any, Any, Any, Any]) -> bool:
        """:meth:`add_step` for an open episode, with ``env.step``'s 5-tuple as it came.

        Returns:
            True when the batch is full (see :attr:`full`) or the step count given to
            :meth:`check_after` is reached.
        """
        obs, reward, terminated, truncated, info = result
        i = self._n_steps
        # Fast paths: a memoryview assignment copies a value of exactly the column's type and
        # row shape (it raises for any other, and the exact path below then decides).
        mv = self._act_mv
        if mv is None:
            self._put_action(i, action)
        else:
            try:
                k = self._act_k
                if k:
                    mv[i * k:i * k + k] = action
                else:
                    mv[i] = action  # (an integer column: any exact integer, range-checked)
            except (TypeError, ValueError, BufferError, NotImplementedError):
                self._put_action(i, action)
        n = self._n_obs
        mv = self._obs_mv
        if mv is None:
            self._put_obs_exact(n, obs)  # (images: numpy's copy)
        else:
            try:
                k = self._obs_k
                mv[n * k:n * k + k] = obs
            except (TypeError, ValueError, BufferError, NotImplementedError):
                self._put_obs_exact(n, obs)
        if type(reward) is not float:
            if np.ndim(reward) != 0:
                raise UnsupportedValueError(f"reward must be a scalar, got shape {np.shape(reward)}")
            reward = float(reward)
        self._rewards.append(reward)
        if info:
            rec_info = self._info(info, "info")
            if rec_info:
                self._infos.append((n, rec_info))
        self._n_obs = n + 1
        self._n_steps = i + 1
        if terminated or truncated:
            self._flags.append((i, terminated, truncated))
            self.end_episode("terminated" if terminated else "truncated")
        return i + 1 >= self._limit

    def end_episode(self, end: str) -> None:
        """Ends the open episode (if any) with the given reason."""
        seg = self._open_episode
        if seg is None:
            return
        seg.end = end
        self._close_segment(seg)
        self._open_episode = None
        # Remember the final observation, for steps taken without a reset (if the episode has
        # no row in this batch, take() remembered it when it cut the episode).
        # (Only the row is noted here; it is copied out if a batch is taken before it is used.)
        if self._n_obs > seg.obs0:
            self._last_obs_row = self._n_obs - 1

    def _remember_last_obs(self, row: int | None = None) -> None:
        n = self._n_obs - 1 if row is None else row
        last = [c[n] if type(c) is list else c[n].copy() for c in self._obs_cols]
        self._last_obs = last[0] if self._obs_layout.single else self._obs_layout.unflatten(last)
        self._last_obs_row = None

    def _last_observation(self) -> Any:
        if self._last_obs_row is not None:
            self._remember_last_obs(self._last_obs_row)
        return self._last_obs

    def _close_segment(self, seg: Segment) -> None:
        seg.obs1 = self._n_obs
        seg.step1 = self._n_steps
        seg.info1 = self._n_obs
        self._segments.append(seg)

    def _flag_columns(self, steps: int) -> tuple[np.ndarray, np.ndarray]:
        terms = np.zeros(steps, np.bool_)
        truncs = np.zeros(steps, np.bool_)
        for i, terminated, truncated in self._flags:
            terms[i] = bool(terminated)
            truncs[i] = bool(truncated)
        return terms, truncs

    def take(self) -> Batch | None:
        """Returns everything buffered as a batch (None if empty) and starts a new batch.

        The open episode is cut: the part so far goes into this batch with ``continues=True``
        and the episode goes on in the next batch as the next part.
        """
        open_seg = self._open_episode
        if open_seg is not None:
            if open_seg.part > 0 and self._n_steps == open_seg.step0:
                open_seg = None  # nothing new in a continuing episode yet: nothing to cut
            else:
                open_seg.end = None
                self._close_segment(open_seg)
        if not self._segments:
            return None
        cols = self._cols
        n_obs, n_steps = self._n_obs, self._n_steps
        steps = self._n_steps
        pool = self._pool

        def release() -> None:
            pool.append(cols)

        batch = Batch(
            self._segments,
            [c[:n_obs] for c in cols.obs], [c[:n_steps] for c in cols.act],
            np.array(self._rewards, dtype=np.float64), *self._flag_columns(steps), self._infos,
            steps, release)
        if open_seg is not None:
            self._remember_last_obs()  # the cut episode's last row is in this batch
        elif self._last_obs_row is not None:
            self._remember_last_obs(self._last_obs_row)
        self._new_columns()
        if open_seg is not None:
            self._open_episode = Segment(open_seg.episode, open_seg.part + 1, 0, 0, 0, None,
                                         None, open_seg.sub_env, open_seg.no_reset)
        return batch

