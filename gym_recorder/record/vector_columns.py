"""The columns of a vector-env buffer: allocating them, storing a vector step's values into them
(fitting each by the rule both buffers share), and gathering a batch's rows out of them.

:class:`VectorColumns` is the part of :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer`
that knows values and columns; the buffer above it knows episodes and the autoreset modes. Row
``r`` of the batch, sub-env ``i``, is flat row ``r * num_envs + i`` of every column; observation
columns have extra slots after the rows (see ``EXTRA_ROWS_FRACTION``). No I/O and no Gymnasium.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..format import exact_in
from ..format.spaces import ArrayLeaf
from .columns import ColumnBuffer
from ..errors import RecorderError
from .vector_rows import flat, single_leaves, vector_leaves

__all__ = ["VectorColumns", "NEXT_STEP", "SAME_STEP", "DISABLED", "EXTRA_ROWS_FRACTION",
           "EXTRA_ROWS_MIN", "EXTRA_SLOTS_PER_STEP"]

# The autoreset modes, as the manifest's "vector" field names them (AutoresetMode values).
NEXT_STEP = "NextStep"
SAME_STEP = "SameStep"
DISABLED = "Disabled"
# Observation slots beside the step rows, for observations that are not a step's returned one:
# SAME_STEP final observations and the first observation of "no_reset" episodes. Per sub-env, a
# fraction of the batch's rows (at least EXTRA_ROWS_MIN); a batch also ends when they run out.
EXTRA_ROWS_FRACTION = 0.25
EXTRA_ROWS_MIN = 8
# One vector step uses at most this many extra slots per sub-env (a no_reset start and a final
# observation), so a batch is full when fewer than this many per sub-env are left.
EXTRA_SLOTS_PER_STEP = 2


class VectorColumns(ColumnBuffer):
    """Columns for ``num_envs`` sub-envs: one row a sub-env and vector step (see the module
    docstring). Subclasses set ``num_envs`` and ``mode`` before :meth:`_alloc`, and define
    ``_new_batch`` (called by it) and keep ``_row`` (vector steps and resets so far) and
    ``_extra_used`` (extra slots used) for the batch being filled."""

    num_envs: int
    mode: str
    _row: int
    _extra_used: int
    _nshape: tuple[int]  # (num_envs,)

    def _new_batch(self) -> None:
        raise NotImplementedError

    def _alloc(self) -> None:
        n, rows = self.num_envs, self._capacity
        self._cap = rows
        extra = 0 if self.mode == NEXT_STEP else n * max(EXTRA_ROWS_MIN,
                                                          int(rows * EXTRA_ROWS_FRACTION))
        self._extra_cap = extra
        # (A leaf that does not stack: an object array, filled with one value a row.)
        self._obs_cols = self._alloc_leaves(self._obs_layout, rows * n + extra,
                                            lambda: np.empty(rows * n + extra, object),
                                            self.array_alloc)
        self._act_cols = self._alloc_leaves(self._act_layout, rows * n,
                                            lambda: np.empty(rows * n, object),
                                            self.array_alloc)
        self._rew = np.empty(rows * n, np.float64)
        self._term = np.empty(rows * n, np.bool_)
        self._trunc = np.empty(rows * n, np.bool_)
        # [r, i]: the batch segment whose transition row r of sub-env i is, or -1 (none).
        self._segid = np.full((rows, n), -1, np.int32)
        for side, j in self._values_leaves:  # leaves that went outside their space
            cols, length = (self._obs_cols, rows * n + extra) if side == "obs" \
                else (self._act_cols, rows * n)
            cols[j] = np.empty(length, object)
        self._obs0 = self._obs_cols[0] if self._obs_layout.single and \
            ("obs", 0) not in self._values_leaves else None
        self._act0 = self._act_cols[0] if self._act_layout.single and \
            ("act", 0) not in self._values_leaves else None
        self._obs_vshape = (n, *self._obs_layout.leaves[0].shape) if self._obs0 is not None and \
            isinstance(self._obs_layout.leaves[0], ArrayLeaf) else None
        self._act_vshape = (n, *self._act_layout.leaves[0].shape) if self._act0 is not None and \
            isinstance(self._act_layout.leaves[0], ArrayLeaf) else None
        self._new_batch()

    @property
    def full(self) -> bool:
        """True when the batch being filled has no room for another vector step or reset."""
        return self._row >= self._cap or (
            self._extra_cap > 0
            and self._extra_used + EXTRA_SLOTS_PER_STEP * self.num_envs > self._extra_cap)

    def _step_values(self, action: Any, obs: Any, reward: Any, terminated: Any,
                     truncated: Any) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray]:
        """Checks and prepares a vector step's values, storing nothing: the observation and
        action leaves (None when the whole array goes into the one column as it is), and the
        reward and flags as flat arrays of ``num_envs``.

        Raises:
            UnsupportedValueError: if a value cannot be stored.
        """
        n = self.num_envs
        obs0 = self._obs0
        fast_obs = obs0 is not None and type(obs) is np.ndarray and obs.dtype is obs0.dtype \
            and obs.shape == self._obs_vshape
        obs_leaves = None if fast_obs else vector_leaves(
            obs, self._obs_flatten, self._obs_layout, n, "observation")
        act0 = self._act0
        fast_act = act0 is not None and type(action) is np.ndarray and action.dtype is act0.dtype \
            and action.shape == self._act_vshape
        act_leaves = None if fast_act else vector_leaves(
            action, self._act_flatten, self._act_layout, n, "action")
        nshape = self._nshape
        if type(reward) is not np.ndarray or reward.shape != nshape:
            reward = flat(reward, n, "reward", np.float64)
        if type(terminated) is not np.ndarray or terminated.dtype != np.bool_ or \
                terminated.shape != nshape:
            terminated = flat(terminated, n, "terminated", np.bool_)
        if type(truncated) is not np.ndarray or truncated.dtype != np.bool_ or \
                truncated.shape != nshape:
            truncated = flat(truncated, n, "truncated", np.bool_)
        return obs_leaves, act_leaves, reward, terminated, truncated

    def _store_step(self, base: int, obs_leaves: Any, obs: Any, act_leaves: Any, action: Any,
                    reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Stores a step prepared by :meth:`_step_values` at flat row ``base``: one assignment
        per column."""
        n = self.num_envs
        obs0, act0 = self._obs0, self._act0
        end = base + n
        if obs_leaves is not None:
            self._write_rows(self._obs_cols, obs_leaves, base)
        elif obs0 is not None:  # (always, on the fast path)
            obs0[base:end] = obs
        if act_leaves is not None:
            self._write_rows(self._act_cols, act_leaves, base)
        elif act0 is not None:
            act0[base:end] = action
        self._rew[base:end] = reward
        self._term[base:end] = terminated
        self._trunc[base:end] = truncated

    def _put(self, cols: list[Any], j: int, index: Any, v: Any) -> None:
        """Stores ``v`` at ``index`` (a slice of ``num_envs`` rows, or one extra slot) of leaf
        column ``j``, fitting it by the rule both buffers share (``ColumnBuffer._fit``)."""
        col = cols[j]
        rows = type(index) is slice
        if not col.dtype.hasobject:
            if type(v) is not np.ndarray or v.dtype != col.dtype or \
                    (v.shape[1:] if rows else v.shape) != col.shape[1:]:
                what = "observation" if cols is self._obs_cols else "action"
                fitted = self._fit(cols, j, v, v.shape[1:] if rows else getattr(v, "shape", ()),
                                   lambda dtype: self._written_exact_in(col, index, dtype), what)
                col = self._to_values(cols, j, index) if fitted is None else fitted
        if not col.dtype.hasobject:
            col[index] = v
        elif rows:
            for k, x in enumerate(v):
                col[index.start + k] = x.copy() if type(x) is np.ndarray else x
        else:
            col[index] = v if type(v) is not np.ndarray or v.ndim else v[()]

    def _to_values(self, cols: list[Any], j: int, index: Any) -> np.ndarray:
        """Turns array column ``j`` into an object column of one value a row (the rows written
        so far kept), for this batch and every later one."""
        col = cols[j]
        values = np.empty(len(col), object)
        n = self.num_envs
        written = list(range(self._row * n))
        if len(col) > self._cap * n:
            k = self._extra_used - (0 if type(index) is slice else 1)  # (the slot being put)
            written += range(self._cap * n, self._cap * n + max(k, 0))
        for r in written:
            values[r] = col[r].copy() if col.ndim > 1 else col[r]
        cols[j] = values
        side = "obs" if cols is self._obs_cols else "act"
        self._values_leaves.add((side, j))
        if j == 0 and side == "obs":
            self._obs0 = None
        elif j == 0:
            self._act0 = None
        return values

    def _written_exact_in(self, col: np.ndarray, index: Any, dtype: np.dtype[Any]) -> bool:
        """True when the rows of ``col`` written so far keep their values in ``dtype`` (rows not
        written yet hold garbage; the extra slots of final observations follow the rows)."""
        n = self.num_envs
        written = [col[:self._row * n]]
        if len(col) > self._cap * n:
            k = self._extra_used - (0 if type(index) is slice else 1)  # (the slot being put)
            written.append(col[self._cap * n:self._cap * n + max(k, 0)])
        return all(exact_in(w, dtype) for w in written)

    def _write_rows(self, cols: list[Any], leaves: list[Any], base: int) -> None:
        end = base + self.num_envs
        for j, v in enumerate(leaves):
            self._put(cols, j, slice(base, end), v)

    def _put_extra(self, leaves: list[Any]) -> int:
        slot = self._cap * self.num_envs + self._extra_used
        self._extra_used += 1
        for j, v in enumerate(leaves):
            self._put(self._obs_cols, j, slot, v)
        return slot

    def _infos(self, infos: dict[int, dict[str, Any]] | None, what: str) -> dict[int, dict[str, Any]]:
        if not infos or not self._record_infos:
            return {}
        out = {}
        for i, info in infos.items():
            rec = self._info(info, f"{what} of sub-env {i}")
            if rec:
                out[i] = rec
        return out

    def _finals(self, done: np.ndarray, final_obs: dict[int, Any] | None,
                final_infos: dict[int, dict[str, Any]] | None
                ) -> dict[int, tuple[list[Any], dict[str, Any] | None]]:
        """SAME_STEP: the last observation's leaves and info of each sub-env whose episode
        ended (checked before anything of the step is stored).

        Raises:
            RecorderError: if the vector env gave no final observation for one of them.
        """
        finals = {}
        for i in np.flatnonzero(done).tolist():
            if final_obs is None or i not in final_obs:
                raise RecorderError(
                    f"sub-env {i} ended in SAME_STEP autoreset mode, but the vector env gave "
                    "no info['final_obs'] for it")
            fi = final_infos.get(i) if final_infos else None
            finals[i] = (single_leaves(final_obs[i], self._obs_flatten, self._obs_layout,
                                        f"final observation of sub-env {i}"),
                         self._info(fi, f"final info of sub-env {i}") if fi else None)
        return finals

    def _gather(self, obs_idx: np.ndarray, steps_idx: np.ndarray) -> tuple[
            list[Any], list[Any], np.ndarray, np.ndarray, np.ndarray]:
        """The batch's columns, rows picked by one fancy index each (an object column as a list
        of values): observations, actions, rewards, terminations, truncations."""

        def gather(col: np.ndarray, idx: np.ndarray) -> Any:
            return col[idx].tolist() if col.dtype.hasobject else col[idx]

        return ([gather(c, obs_idx) for c in self._obs_cols],
                [gather(c, steps_idx) for c in self._act_cols],
                self._rew[steps_idx], self._term[steps_idx], self._trunc[steps_idx])
