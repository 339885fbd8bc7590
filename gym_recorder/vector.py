"""Recording vector environments (``gymnasium.vector``): every sub-environment's episodes.

:class:`RecordingVectorWrapper` records each sub-environment's episodes as ordinary episodes of the
format (see :mod:`gym_recorder.format`), each entry tagged with its ``sub_env``; the manifest says
``"vector": {"num_envs", "autoreset_mode"}``. The autoreset mode is read from the env's
``metadata["autoreset_mode"]`` (Gymnasium's default, NEXT_STEP, when absent):

- ``NextStep``: the step after a sub-env's episode ended is a *reset step*: the action is ignored,
  the returned observation and info are the next episode's reset observation and reset info. It
  is not a transition and is not recorded as one.
- ``SameStep``: when a sub-env's episode ends, its last observation is ``info["final_obs"][i]``
  and its last info ``info["final_info"]`` (for sub-env ``i``); the returned observation and the
  rest of the info already belong to the next episode (its reset observation and reset info).
- ``Disabled``: sub-envs are reset by ``reset(options={"reset_mask": mask})``; only the masked
  sub-envs start new episodes (one still open ends with ``end == "reset"``). A sub-env stepped
  after its episode ended without such a reset starts an episode marked ``no_reset``.

Recording is batched: :class:`VectorStepBuffer` copies the whole ``(num_envs, ...)`` observation,
action, reward and flag arrays of a vector step into preallocated columns with one numpy
assignment each (row ``r`` of the batch, sub-env ``i`` at flat row ``r * num_envs + i``), stores
the id of the episode segment each sub-env's row belongs to (or -1) in a small integer array, and
does per-sub-env Python work only when an episode starts or ends, and for non-empty infos. When a
batch is taken, a stable sort of those ids groups every segment's rows, and one fancy-indexing
gather per column picks them out.

Vector info dicts (arrays of ``num_envs`` values with ``_key`` presence masks, nested dicts
likewise) are split into one info dict per sub-env by :func:`unstack_info`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeGuard

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from .buffer import (Batch, Segment, _estimate_step_bytes, record_info, snapshot, steps_for_target,
                     worth_resizing)
from .errors import RecorderError, RecordingClosedError, ResetNeeded, UnsupportedValueError
from .spaces import ArrayLeaf, Layout
from .session import RecordingSession, check_options
from .wrapper import DEFAULT_FLUSH_INTERVAL, DEFAULT_TARGET_BATCH_BYTES, env_header

__all__ = ["RecordingVectorWrapper", "VectorStepBuffer", "unstack_info", "NEXT_STEP",
           "SAME_STEP", "DISABLED"]

# The autoreset modes, as the manifest's "vector" field names them (AutoresetMode values).
NEXT_STEP = "NextStep"
SAME_STEP = "SameStep"
DISABLED = "Disabled"
_MODES = (NEXT_STEP, SAME_STEP, DISABLED)
# Observation slots beside the step rows, for observations that are not a step's returned one:
# SAME_STEP final observations and the first observation of "no_reset" episodes. Per sub-env, a
# fraction of the batch's rows (at least EXTRA_ROWS_MIN); a batch also ends when they run out.
EXTRA_ROWS_FRACTION = 0.25
EXTRA_ROWS_MIN = 8
# One vector step uses at most this many extra slots per sub-env (a no_reset start and a final
# observation), so a batch is full when fewer than this many per sub-env are left.
EXTRA_SLOTS_PER_STEP = 2
# Info keys that SAME_STEP vector envs add for the sub-envs whose episode ended.
_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


# ---------------------------------------------------------------------------------------------
# Vector infos


def _is_mask(value: Any, num_envs: int) -> TypeGuard[np.ndarray]:
    return type(value) is np.ndarray and value.dtype == np.bool_ and value.shape == (num_envs,)


def _item(value: Any, i: int, num_envs: int) -> Any:
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == num_envs:
        return value[i]
    if type(value) in (list, tuple) and len(value) == num_envs:
        return value[i]
    return value


def unstack_info(info: dict[str, Any], num_envs: int, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Splits a vector env's info dict into one info dict per sub-environment.

    Follows Gymnasium's convention: a key ``k`` holds an array of ``num_envs`` values and ``_k``
    a boolean mask of the sub-envs that had it (no mask: all had it); a dict value is itself such
    an info dict. Sub-env ``i`` gets ``value[i]`` (a numpy scalar or array row for numeric
    arrays, the object for object arrays); a value that is not a per-sub-env sequence is given
    to every sub-env that has the key.

    Args:
        info: the vector info dict.
        num_envs: the number of sub-environments.
        skip: top-level keys (and their masks) to leave out.

    Returns:
        ``num_envs`` dicts (empty for sub-envs without info).
    """
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key in skip:
            continue
        if type(key) is str and key[:1] == "_" and key[1:] in info and _is_mask(value, num_envs):
            continue  # the presence mask of key[1:]
        mask = info.get("_" + key) if type(key) is str else None
        present = range(num_envs) if not _is_mask(mask, num_envs) else np.flatnonzero(mask).tolist()
        if isinstance(value, dict):
            subs = unstack_info(value, num_envs)
            for i in present:
                out[i][key] = subs[i]
        else:
            for i in present:
                out[i][key] = _item(value, i, num_envs)
    return out


# ---------------------------------------------------------------------------------------------
# Buffering


class _Segment:
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


class VectorStepBuffer:
    """Buffers the steps of a vector of ``num_envs`` environments into batches of bounded size.

    No I/O and no Gymnasium here: the wrapper hands in the vector arrays and per-sub-env infos,
    the batch writer takes :class:`~gym_recorder.buffer.Batch` objects out. Batches follow
    :meth:`StepBuffer.take`'s conventions: episodes are numbered in the order they start, every
    episode started while a batch was filled has its part 0 in that batch, and an episode still
    open when a batch is taken is cut into a part with ``continues=True`` whose next part is in
    the very next batch (possibly with 0 steps).

    Args:
        obs_layout: layout of the single observation space.
        act_layout: layout of the single action space.
        num_envs: number of sub-environments.
        autoreset_mode: ``"NextStep"``, ``"SameStep"`` or ``"Disabled"``.
        target_batch_bytes: aim for batches of about this many bytes.
        record_infos: keep the info dicts.
        info_filter: called with each non-empty per-sub-env info dict; returns the dict to record.
    """

    def __init__(self, obs_layout: Layout, act_layout: Layout, num_envs: int,
                 autoreset_mode: str, target_batch_bytes: int, record_infos: bool = True,
                 info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        if autoreset_mode not in _MODES:
            raise ValueError(f"autoreset_mode must be one of {_MODES}, got {autoreset_mode!r}")
        if type(num_envs) is not int or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.num_envs = num_envs
        self.mode = autoreset_mode
        self._obs_layout = obs_layout
        self._act_layout = act_layout
        self._obs_flatten = None if obs_layout.single else obs_layout.flattener()
        self._act_flatten = None if act_layout.single else act_layout.flattener()
        self._target = target_batch_bytes
        self._record_infos = record_infos
        self._info_filter = info_filter
        self.episodes_started = 0
        self._open = np.zeros(num_envs, dtype=np.bool_)
        self._n_open = 0  # how many are True in _open
        self._nshape = (num_envs,)
        self._segs: list[_Segment | None] = [None] * num_envs  # the open one per sub-env
        self._last_obs: list[list[Any] | None] = [None] * num_envs  # DISABLED: for no_reset episodes
        self._rows = self._rows_for(_estimate_step_bytes(obs_layout, act_layout))
        self._alloc()

    # -- sizing ------------------------------------------------------------------------------

    def _rows_for(self, bytes_per_step: float) -> int:
        return max(1, steps_for_target(self._target, bytes_per_step) // self.num_envs)

    def observe_batch_bytes(self, bytes_written: int, steps: int) -> None:
        """Adapts the next batches' size to the bytes per step actually written.

        Called from the writer thread; the new size takes effect when the next batch starts, and
        only when the estimate moves by more than a quarter, so that columns are reused.
        """
        if steps <= 0:
            return
        new = self._rows_for(bytes_written / steps)
        if worth_resizing(self._rows, new):
            self._rows = new

    @property
    def capacity(self) -> int:
        """How many vector steps (and resets) the batch being filled holds."""
        return self._cap

    def _alloc(self) -> None:
        n, rows = self.num_envs, self._rows
        self._cap = rows
        extra = 0 if self.mode == NEXT_STEP else n * max(EXTRA_ROWS_MIN,
                                                          int(rows * EXTRA_ROWS_FRACTION))
        self._extra_cap = extra
        self._obs_cols = [np.empty((rows * n + extra, *leaf.shape), leaf.dtype)
                          if isinstance(leaf, ArrayLeaf) else np.empty(rows * n + extra, object)
                          for leaf in self._obs_layout.leaves]
        self._act_cols = [np.empty((rows * n, *leaf.shape), leaf.dtype)
                          if isinstance(leaf, ArrayLeaf) else np.empty(rows * n, object)
                          for leaf in self._act_layout.leaves]
        self._rew = np.empty(rows * n, np.float64)
        self._term = np.empty(rows * n, np.bool_)
        self._trunc = np.empty(rows * n, np.bool_)
        # [r, i]: the batch segment whose transition row r of sub-env i is, or -1 (none).
        self._segid = np.full((rows, n), -1, np.int32)
        self._obs0 = self._obs_cols[0] if self._obs_layout.single else None
        self._act0 = self._act_cols[0] if self._act_layout.single else None
        self._obs_vshape = (n, *self._obs_layout.leaves[0].shape) if self._obs0 is not None and \
            isinstance(self._obs_layout.leaves[0], ArrayLeaf) else None
        self._act_vshape = (n, *self._act_layout.leaves[0].shape) if self._act0 is not None and \
            isinstance(self._act_layout.leaves[0], ArrayLeaf) else None
        self._new_batch()

    def _new_batch(self) -> None:
        self._row = 0
        self._extra_used = 0
        self._batch_segs: list[_Segment] = []  # every segment of this batch; index = its id
        self._cur = np.full(self.num_envs, -1, np.int32)  # id of each sub-env's open segment
        self._step_infos: list[tuple[int, dict[str, Any]]] = []  # (flat row, info) in row order
        for seg in sorted((s for s in self._segs if s is not None), key=lambda s: s.episode):
            self._add_segment(seg)

    @property
    def full(self) -> bool:
        """True when the batch being filled has no room for another vector step or reset."""
        return self._row >= self._cap or (
            self._extra_cap > 0
            and self._extra_used + EXTRA_SLOTS_PER_STEP * self.num_envs > self._extra_cap)

    @property
    def rows(self) -> int:
        """Vector steps and resets buffered in the batch being filled."""
        return self._row

    @property
    def open_episodes(self) -> np.ndarray:
        """Boolean array: which sub-envs have an episode open (a copy)."""
        return np.copy(self._open, order="C")

    # -- values --------------------------------------------------------------------------------

    def _vector_leaves(self, value: Any, flatten: Callable[[Any], list[Any]] | None,
                       layout: Layout, what: str) -> list[Any]:
        """Flattens a batched value into per-leaf ``(num_envs, ...)`` arrays or lists, checked."""
        n = self.num_envs
        try:
            values = [value] if flatten is None else flatten(value)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise UnsupportedValueError(f"{what}: does not match the space ({e})") from e
        out = []
        for j, (leaf, v) in enumerate(zip(layout.leaves, values)):
            if not isinstance(leaf, ArrayLeaf):
                if len(v) != n:
                    raise UnsupportedValueError(
                        f"{what} leaf {j}: {len(v)} values for {n} sub-envs")
                out.append([snapshot(x, f"{what} leaf {j}[{k}]") for k, x in enumerate(v)])
                continue
            if type(v) is not np.ndarray:
                v = np.asarray(v)
            if v.dtype.hasobject or v.dtype.kind not in "biufc":
                raise UnsupportedValueError(
                    f"{what} leaf {j}: dtype {v.dtype} does not fit the space's {leaf.dtype} leaf")
            if v.shape != (n, *leaf.shape):
                raise UnsupportedValueError(f"{what} leaf {j}: shape {v.shape}, expected "
                                            f"{(n, *leaf.shape)} ({n} sub-envs)")
            out.append(v)
        return out

    def _single_leaves(self, value: Any, where: str) -> list[Any]:
        """Flattens one sub-env's observation into per-leaf values, checked and copied."""
        try:
            values = [value] if self._obs_flatten is None else self._obs_flatten(value)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise UnsupportedValueError(f"{where}: does not match the space ({e})") from e
        out = []
        for j, (leaf, v) in enumerate(zip(self._obs_layout.leaves, values)):
            if not isinstance(leaf, ArrayLeaf):
                out.append(snapshot(v, f"{where} leaf {j}"))
                continue
            arr = np.array(v)  # a copy
            if type(v) in (bool, int, float) and arr.dtype != leaf.dtype:
                # A Python number: the space's dtype when it holds it exactly (as the vector
                # env's batched observation would).
                try:
                    cast = np.array(v, dtype=leaf.dtype)
                except (OverflowError, ValueError):
                    cast = None
                if cast is not None and cast.item() == v:
                    arr = cast
            if arr.dtype.hasobject or arr.dtype.kind not in "biufc" or arr.shape != leaf.shape:
                raise UnsupportedValueError(f"{where} leaf {j}: {arr.dtype} {arr.shape} does not "
                                            f"fit the space's {leaf.dtype} {leaf.shape} leaf")
            out.append(arr)
        return out

    def _put(self, cols: list[Any], j: int, index: Any, v: Any) -> None:
        col = cols[j]
        if type(v) is np.ndarray and v.dtype != col.dtype and not np.can_cast(
                v.dtype, col.dtype, "safe"):
            # Keep the value exactly: widen this leaf for the batch being filled.
            col = cols[j] = col.astype(np.result_type(col.dtype, v.dtype))
            if j == 0 and cols is self._obs_cols and self._obs0 is not None:
                self._obs0 = col
            elif j == 0 and cols is self._act_cols and self._act0 is not None:
                self._act0 = col
        if col.dtype.hasobject and type(index) is slice:
            for k, x in enumerate(v):
                col[index.start + k] = x
        else:
            col[index] = v

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

    def _flat(self, value: Any, name: str, dtype: type) -> np.ndarray:
        if type(value) is not np.ndarray or value.shape != (self.num_envs,):
            value = np.asarray(value)
            if value.shape != (self.num_envs,):
                raise UnsupportedValueError(
                    f"{name}: shape {value.shape}, expected ({self.num_envs},)")
        if dtype is np.bool_ and value.dtype != np.bool_:
            value = value.astype(np.bool_)
        flat: np.ndarray = value
        return flat

    def _info(self, info: Any, where: str) -> dict[str, Any] | None:
        if not self._record_infos or not info:
            return None
        return record_info(info, self._info_filter, where)

    def _infos(self, infos: dict[int, dict[str, Any]] | None, what: str) -> dict[int, dict[str, Any]]:
        if not infos or not self._record_infos:
            return {}
        out = {}
        for i, info in infos.items():
            rec = self._info(info, f"{what} of sub-env {i}")
            if rec:
                out[i] = rec
        return out

    # -- episodes ------------------------------------------------------------------------------

    def _add_segment(self, seg: _Segment) -> None:
        self._segs[seg.sub_env] = seg
        self._cur[seg.sub_env] = len(self._batch_segs)
        self._batch_segs.append(seg)

    def _begin(self, i: int, reset_idx: int, reset_info: dict[str, Any] | None, seed: int | None,
               options: Any, no_reset: bool = False) -> None:
        self._add_segment(_Segment(i, self.episodes_started, 0, reset_idx, reset_info, seed,
                                   options, no_reset))
        self.episodes_started += 1
        if not self._open[i]:
            self._open[i] = True
            self._n_open += 1

    def _end(self, i: int, end: str, final_idx: int | None = None) -> None:
        seg = self._segs[i]
        if seg is None:
            return
        seg.end = end
        seg.final_idx = final_idx
        self._segs[i] = None
        self._cur[i] = -1
        self._open[i] = False
        self._n_open -= 1

    def _step_info(self, flat: int, info: dict[str, Any]) -> None:
        self._step_infos.append((flat, info))

    def end_episodes(self, end: str) -> None:
        """Ends every open episode with the given reason (``"close"``)."""
        for i in np.flatnonzero(self._open).tolist():
            self._end(i, end)

    # -- the protocol --------------------------------------------------------------------------

    def reset(self, obs: Any, infos: dict[int, dict[str, Any]] | None, mask: np.ndarray | None,
              seeds: list[int | None], options: Any) -> None:
        """Records a vector reset: the masked sub-envs (all if ``mask`` is None) start episodes.

        An episode still open in a reset sub-env ends with ``end == "reset"``.

        Args:
            obs: the batched observation returned.
            infos: per-sub-env reset infos (only the non-empty ones need be given).
            mask: which sub-envs were reset, or None for all.
            seeds: the seed each sub-env was reset with (None: none).
            options: the options each reset sub-env received.
        """
        leaves = self._vector_leaves(obs, self._obs_flatten, self._obs_layout, "reset observation")
        rec = self._infos(infos, "reset info")
        options = snapshot(options, "reset options")
        r = self._row
        base = r * self.num_envs
        self._write_rows(self._obs_cols, leaves, base)
        self._segid[r] = -1
        which = range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist()
        for i in which:
            if self._segs[i] is not None:
                self._end(i, "reset")
            self._begin(i, base + i, rec.get(i), seeds[i], options)
        self._row = r + 1

    def step(self, action: Any, obs: Any, reward: Any, terminated: Any, truncated: Any,
             infos: dict[int, dict[str, Any]] | None = None, final_obs: dict[int, Any] | None = None,
             final_infos: dict[int, dict[str, Any]] | None = None) -> None:
        """Records one vector step (callers check :attr:`full` after each call).

        Args:
            action: the batched action passed to the env.
            obs, reward, terminated, truncated: the batched values it returned.
            infos: per-sub-env infos, unstacked (only the non-empty ones need be given). In
                NEXT_STEP mode, the info of a reset step is the reset info; in SAME_STEP mode,
                the info of a sub-env whose episode ended is the next episode's reset info.
            final_obs: SAME_STEP: the last observation of each sub-env whose episode ended.
            final_infos: SAME_STEP: the last info of each sub-env whose episode ended.

        Raises:
            UnsupportedValueError: if a value cannot be stored; nothing of the step is recorded.
            RecorderError: if a SAME_STEP env did not give a final observation.
        """
        n = self.num_envs
        r = self._row
        base = r * n
        # Check and prepare everything first, so that an error leaves the buffer unchanged.
        obs0 = self._obs0
        fast_obs = obs0 is not None and type(obs) is np.ndarray and obs.dtype is obs0.dtype \
            and obs.shape == self._obs_vshape
        obs_leaves = None if fast_obs else self._vector_leaves(
            obs, self._obs_flatten, self._obs_layout, "observation")
        act0 = self._act0
        fast_act = act0 is not None and type(action) is np.ndarray and action.dtype is act0.dtype \
            and action.shape == self._act_vshape
        act_leaves = None if fast_act else self._vector_leaves(
            action, self._act_flatten, self._act_layout, "action")
        nshape = self._nshape
        if type(reward) is not np.ndarray or reward.shape != nshape:
            reward = self._flat(reward, "reward", np.float64)
        if type(terminated) is not np.ndarray or terminated.dtype != np.bool_ or \
                terminated.shape != nshape:
            terminated = self._flat(terminated, "terminated", np.bool_)
        if type(truncated) is not np.ndarray or truncated.dtype != np.bool_ or \
                truncated.shape != nshape:
            truncated = self._flat(truncated, "truncated", np.bool_)
        rec = self._infos(infos, "info") if infos else None
        open_ = self._open
        done = terminated | truncated
        mode = self.mode
        finals = None
        if mode == SAME_STEP and done.any():
            finals = {}
            for i in np.flatnonzero(done).tolist():
                if final_obs is None or i not in final_obs:
                    raise RecorderError(
                        f"sub-env {i} ended in SAME_STEP autoreset mode, but the vector env gave "
                        "no info['final_obs'] for it")
                fi = final_infos.get(i) if final_infos else None
                finals[i] = (self._single_leaves(final_obs[i], f"final observation of sub-env {i}"),
                             self._info(fi, f"final info of sub-env {i}") if fi else None)
        if mode != NEXT_STEP and self._n_open != n:
            for i in np.flatnonzero(~open_).tolist():
                if self._last_obs[i] is None:
                    raise ResetNeeded(f"sub-env {i} was stepped before it was ever reset")
        # Store the step: one assignment per column.
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
        self._row = r + 1
        if mode == NEXT_STEP:
            # The row belongs to the sub-envs' open episodes; a sub-env without one is in a
            # reset step, whose returned observation and info start its next episode.
            self._segid[r] = self._cur
            starting = None if self._n_open == n else np.flatnonzero(~open_).tolist()
            if rec:
                for i, info in rec.items():
                    if open_[i]:
                        self._step_info(base + i, info)
            if done.any():
                for i in np.flatnonzero(done & open_).tolist():
                    self._end(i, "terminated" if terminated[i] else "truncated")
            if starting is not None:
                for i in starting:
                    self._begin(i, base + i, rec.get(i) if rec else None, None, None)
            return
        if self._n_open != n:
            # Stepped after its episode ended without a reset: an episode marked no_reset that
            # starts from the last observation.
            for i in np.flatnonzero(~open_).tolist():
                self._begin(i, self._put_extra(self._last_obs[i]), None, None, None,
                            no_reset=True)
        self._segid[r] = self._cur
        if mode == SAME_STEP:
            if rec:
                for i, info in rec.items():
                    if not done[i]:
                        self._step_info(base + i, info)
            if finals:
                for i, (leaves, final_info) in finals.items():
                    if final_info:
                        self._step_info(base + i, final_info)
                    self._end(i, "terminated" if terminated[i] else "truncated",
                              self._put_extra(leaves))
                    self._begin(i, base + i, rec.get(i) if rec else None, None, None)
            return
        # DISABLED
        if rec:
            for i, info in rec.items():
                self._step_info(base + i, info)
        if done.any():
            for i in np.flatnonzero(done).tolist():
                k = base + i
                self._last_obs[i] = [c[k] if c.dtype.hasobject else c[k].copy()
                                     for c in self._obs_cols]
                self._end(i, "terminated" if terminated[i] else "truncated")

    # -- batches -------------------------------------------------------------------------------

    def take(self) -> Batch | None:
        """Returns everything buffered as a batch (None if nothing) and starts a new batch.

        Open episodes are cut: the part so far goes into this batch with ``continues=True``, and
        each goes on in the next batch as its next part. Each segment's rows are found with a few
        whole-batch numpy operations (a stable sort of the rows by segment id), and gathered with
        one fancy index per column.
        """
        n_rows = self._row
        segs = self._batch_segs
        if n_rows == 0 and not any(s.end is not None for s in segs):
            return None
        n = self.num_envs
        count = len(segs)
        ids_flat = self._segid[:n_rows].reshape(-1)  # index r * n + i: the flat column row
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

        def gather(col: np.ndarray, idx: np.ndarray) -> Any:
            return col[idx].tolist() if col.dtype.hasobject else col[idx]

        obs_g = [gather(c, obs_idx) for c in self._obs_cols]
        act_g = [gather(c, steps_idx) for c in self._act_cols]
        rew_g = self._rew[steps_idx]
        term_g = self._term[steps_idx]
        trunc_g = self._trunc[steps_idx]
        seg_infos: list[list[Any]] = [[(0, s.reset_info)] if s.reset_info else [] for s in segs]
        if self._step_infos:
            where = np.empty(n_rows * n, np.intp)
            where[steps_idx] = np.arange(len(steps_idx))
            rows = np.array([f for f, _ in self._step_infos], np.intp)
            sid = ids_flat[rows]
            rel = where[rows] - step_off[sid] + first[sid]
            for k, r, (_, info) in zip(sid.tolist(), rel.tolist(), self._step_infos):
                seg_infos[k].append((r, info))
        # The gathered columns hold each segment's rows one after another: the writer can
        # write them column by column, like a single env's.
        obs_off_l, step_off_l = obs_off.tolist(), step_off.tolist()
        segments = []
        infos: list[tuple[int, dict[str, Any]]] = []
        for k, seg in enumerate(segs):
            part0 = seg.reset_idx is not None
            o0, o1 = obs_off_l[k], obs_off_l[k + 1]
            segments.append(Segment(  # (one info a row: info rows are observation rows)
                seg.episode, seg.part, o0, step_off_l[k], o0, seg.seed if part0 else None,
                seg.options if part0 else None, seg.sub_env, seg.no_reset,
                o1, step_off_l[k + 1], o1, seg.end))
            infos.extend((obs_off_l[k] + r, info) for r, info in seg_infos[k])
        # Start the next batch: open episodes go on as their next part.
        for i, open_seg in enumerate(self._segs):
            if open_seg is not None:
                self._segs[i] = _Segment(i, open_seg.episode, open_seg.part + 1, None, None, None,
                                         None, open_seg.no_reset)
        if self._rows != self._cap or any(
                c.dtype != leaf.dtype for c, leaf in zip(
                    self._obs_cols + self._act_cols,
                    self._obs_layout.leaves + self._act_layout.leaves)
                if isinstance(leaf, ArrayLeaf)):
            self._alloc()
        else:
            self._new_batch()
        return Batch(segments, obs_g, act_g, rew_g, term_g, trunc_g, infos, int(step_off_l[-1]))


# ---------------------------------------------------------------------------------------------
# The wrapper


def _autoreset_mode(env: VectorEnv) -> str:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(mode).value
    except ValueError:
        raise ValueError(f"the vector env's metadata['autoreset_mode'] is {mode!r}, not one of "
                         f"{[m.value for m in AutoresetMode]}") from None


def _seeds(seed: Any, num_envs: int) -> list[int | None]:
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        return [int(seed) + i for i in range(num_envs)]
    return [None if s is None else int(s) for s in seed]


class RecordingVectorWrapper(VectorWrapper):
    """Records every sub-environment's episodes of a vector environment, in any autoreset mode.

    ``reset`` and ``step`` return exactly what the inner vector env returns. Each sub-env's
    episodes are recorded as ordinary episodes (read them with
    :class:`~gym_recorder.RecordingReader`; ``episode.sub_env`` tells which sub-env), with the
    single-env observation and action spaces. The autoreset mode comes from the env's metadata
    (see :mod:`gym_recorder.vector`). Seeds: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``,
    ``reset(seed=[...])`` each with its own; autoresets have none. Options: what each sub-env
    received (the options without ``"reset_mask"``).

    Example:
        >>> import gymnasium as gym
        >>> from gym_recorder import RecordingVectorWrapper, RecordingReader
        >>> envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
        >>> with RecordingVectorWrapper(envs, tmp_dir) as envs:
        ...     obs, info = envs.reset(seed=0)
        ...     for _ in range(100):
        ...         obs, rewards, terminations, truncations, info = envs.step(
        ...             envs.action_space.sample())
        >>> with RecordingReader(tmp_dir) as reader:
        ...     [ep.sub_env for ep in reader][:4]
        [0, 1, 2, 3]

    Args:
        env: the vector environment to record.
        directory: the recording directory (created if missing); relative paths work.
        file_prefix: this writer's file prefix; None (the default) picks a unique one.
        target_batch_bytes: aim for batch files of about this many bytes; this also bounds the
            memory the recorder holds.
        record_infos: record the reset and step infos (split per sub-env).
        info_filter: called with each non-empty per-sub-env info dict, returns the dict to record.
        flush_interval: commit buffered steps at least every this many seconds (checked at each
            step and reset); None for no time bound.
        fsync: make every batch durable (fsync) before committing it.

    Raises:
        TypeError: if ``env`` is not a ``gymnasium.vector.VectorEnv``.
        ValueError: if the env's ``metadata["autoreset_mode"]`` is unknown.
        FileExistsError: if ``file_prefix`` is already used in the directory.
    """

    def __init__(self, env: VectorEnv, directory: str | os.PathLike[str], *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
                 fsync: bool = False) -> None:
        check_options(directory, target_batch_bytes, flush_interval)
        if not isinstance(env, VectorEnv):
            raise TypeError(f"env must be a gymnasium.vector.VectorEnv, got {type(env).__name__} "
                            "(use RecordingWrapper for a single env)")
        super().__init__(env)
        mode = _autoreset_mode(env)
        num_envs = int(env.num_envs)
        header = env_header(env, env.single_observation_space, env.single_action_space)
        header["vector"] = {"num_envs": num_envs, "autoreset_mode": mode}
        obs_layout = Layout(header["observation_space"])
        act_layout = Layout(header["action_space"])
        self._mode = mode
        self._n = num_envs
        self._record_infos = record_infos
        self._buffer = VectorStepBuffer(obs_layout, act_layout, num_envs, mode,
                                        target_batch_bytes, record_infos=record_infos,
                                        info_filter=info_filter)
        self._directory = os.fspath(directory)
        self._session = RecordingSession(
            self, self._buffer, self._buffer.end_episodes, directory, header, obs_layout,
            act_layout, file_prefix=file_prefix, flush_interval=flush_interval, fsync=fsync)
        self._ever_reset = np.zeros(num_envs, np.bool_)
        self._ready = False
        self._env_closed = False

    @property
    def directory(self) -> str:
        """The recording directory, as given."""
        return self._directory

    @property
    def file_prefix(self) -> str:
        """This writer's file prefix."""
        return self._session.prefix

    @property
    def autoreset_mode(self) -> str:
        """The env's autoreset mode: ``"NextStep"``, ``"SameStep"`` or ``"Disabled"``."""
        return self._mode

    def _split(self, info: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[int, dict[str, Any]]:
        if not info or not self._record_infos:
            return {}
        return {i: d for i, d in enumerate(unstack_info(info, self._n, skip)) if d}

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the vector env and starts a new recorded episode in each reset sub-env.

        With ``options={"reset_mask": mask}`` only the masked sub-envs start new episodes.
        """
        if self._session.closed:
            raise RecordingClosedError("reset() on a closed RecordingVectorWrapper")
        mask = None
        sub_options = options
        if options is not None and "reset_mask" in options:
            # Read before the env pops it; each sub-env receives the options without it.
            mask = np.array(options["reset_mask"], copy=True)
            sub_options = {k: v for k, v in options.items() if k != "reset_mask"}
        # (Gymnasium's vector envs take a list of seeds too; VectorEnv.reset says int | None.)
        result = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        obs, info = result
        if mask is not None:
            # The env accepted it (Gymnasium checks: bool, shape (num_envs,)).
            mask = mask.astype(np.bool_) if mask.shape == (self._n,) else None
        buffer = self._buffer
        buffer.reset(obs, self._split(info), mask, _seeds(seed, self._n), sub_options)
        self._ever_reset |= True if mask is None else mask
        self._ready = bool(self._ever_reset.all())
        if buffer.full or self._session.due():
            self._session.commit()
        return result

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Steps the vector env and records each sub-env's transition."""
        if not self._ready:
            if self._session.closed:
                raise RecordingClosedError("step() on a closed RecordingVectorWrapper")
            raise ResetNeeded("call reset() on every sub-env before step() on a "
                              "RecordingVectorWrapper")
        result = self.env.step(actions)
        obs, reward, terminated, truncated, info = result
        final_obs = final_infos = None
        if self._mode == SAME_STEP and info and "final_obs" in info:
            fo, fo_mask = info["final_obs"], info.get("_final_obs")
            which = np.flatnonzero(fo_mask).tolist() if _is_mask(fo_mask, self._n) else \
                range(self._n)
            final_obs = {i: fo[i] for i in which}
            fi = info.get("final_info")
            if isinstance(fi, dict) and fi and self._record_infos:
                final_infos = self._split(fi)
            infos = self._split(info, _FINAL_KEYS)
        else:
            infos = self._split(info)
        buffer = self._buffer
        buffer.step(actions, obs, reward, terminated, truncated, infos, final_obs, final_infos)
        if buffer.full or self._session.due():
            self._session.commit()
        return result

    def flush(self) -> None:
        """Commits every buffered step now (open episodes continue) and waits for the disk.

        Raises:
            WriteError: if a batch cannot be written; it is kept for the next flush or close.
        """
        self._session.flush("RecordingVectorWrapper")

    def close(self, **kwargs: Any) -> None:
        """Ends open episodes (``end == "close"``), writes everything, closes the vector env.

        Args:
            **kwargs: passed to the inner env's ``close`` (e.g. AsyncVectorEnv's ``terminate``).

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        self._ready = False
        self._session.close()
        if not self._env_closed:
            self._env_closed = True
            self.env.close(**kwargs)

    def __enter__(self) -> RecordingVectorWrapper:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
