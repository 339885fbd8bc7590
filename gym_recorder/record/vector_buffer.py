"""Vector-env buffering: the steps of ``num_envs`` sub-environments, into batches of columns.

:class:`VectorStepBuffer` is the vector front end of :class:`~gym_recorder.record.columns.ColumnBuffer`
(in :mod:`~gym_recorder.record.columns`: the layouts, sizing, column allocation and the fit rule
both buffers share; in :mod:`~gym_recorder.record.vector_columns`: a vector buffer's columns and
storing values into them). It copies the whole ``(num_envs, ...)`` observation, action, reward and flag arrays of a vector step into
preallocated columns with one numpy assignment each (row ``r`` of the batch, sub-env ``i`` at
flat row ``r * num_envs + i``), stores the id of the episode segment each sub-env's row belongs
to (or -1) in a small integer array, and does per-sub-env Python work only when an episode starts
or ends, and for non-empty infos. When a batch is taken, a stable sort of those ids groups every
segment's rows, and one fancy-indexing gather per column picks them out, so the
:class:`~gym_recorder.record.batch.Batch` has each entry's rows one after another, like a single env's.
The autoreset modes are described in :mod:`gym_recorder.record.vector`. No I/O and no Gymnasium here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .batch import Batch, Segment
from .vector_columns import (DISABLED, EXTRA_ROWS_FRACTION, EXTRA_ROWS_MIN, EXTRA_SLOTS_PER_STEP,
                             NEXT_STEP, SAME_STEP, VectorColumns)
from .vector_rows import entries, group_rows, segment_infos, vector_leaves, vector_segment
from ..errors import ResetNeeded
from ..format.spaces import Layout
from ..format.values import snapshot

__all__ = ["VectorStepBuffer", "NEXT_STEP", "SAME_STEP", "DISABLED", "EXTRA_ROWS_FRACTION",
           "EXTRA_ROWS_MIN", "EXTRA_SLOTS_PER_STEP"]

_MODES = (NEXT_STEP, SAME_STEP, DISABLED)


class VectorStepBuffer(VectorColumns):
    """Buffers the steps of a vector of ``num_envs`` environments into batches of bounded size.

    No I/O and no Gymnasium here: the wrapper hands in the vector arrays and per-sub-env infos,
    the batch writer takes :class:`~gym_recorder.record.batch.Batch` objects out. Batches follow
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
        super().__init__(obs_layout, act_layout, target_batch_bytes, record_infos, info_filter,
                         per_row=num_envs)
        self.num_envs = num_envs
        self.mode = autoreset_mode
        self._open = np.zeros(num_envs, dtype=np.bool_)
        self._n_open = 0  # how many are True in _open
        self._nshape = (num_envs,)
        self._segs: list[Segment | None] = [None] * num_envs  # the open one per sub-env
        self._last_obs: list[list[Any] | None] = [None] * num_envs  # DISABLED: for no_reset episodes
        self._alloc()

    def discard(self) -> None:
        """Forgets everything buffered and every open episode (in a forked child: the parent
        writes them); episodes are numbered from 0 again, for a new writer."""
        VectorStepBuffer.__init__(self, self._obs_layout, self._act_layout, self.num_envs,
                                  self.mode, self._target, self._record_infos, self._info_filter)

    # -- columns ---------------------------------------------------------------------------

    def _new_batch(self) -> None:
        self._row = 0
        self._extra_used = 0
        self._batch_segs: list[Segment] = []  # every segment of this batch; index = its id
        self._cur = np.full(self.num_envs, -1, np.int32)  # id of each sub-env's open segment
        self._step_infos: list[tuple[int, dict[str, Any]]] = []  # (flat row, info) in row order
        for seg in sorted((s for s in self._segs if s is not None), key=lambda s: s.episode):
            self._add_segment(seg)

    # -- episodes ------------------------------------------------------------------------------

    def _add_segment(self, seg: Segment) -> None:
        i: int = seg.sub_env  # type: ignore[assignment]  # (always set in a vector buffer)
        self._segs[i] = seg
        self._cur[i] = len(self._batch_segs)
        self._batch_segs.append(seg)

    def _begin(self, i: int, reset_idx: int, reset_info: dict[str, Any] | None, seed: int | None,
               options: Any, no_reset: bool = False) -> None:
        self._add_segment(vector_segment(i, self.episodes_started, 0, reset_idx, reset_info, seed,
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
        seg.final_row = final_idx
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
        leaves = vector_leaves(obs, self._obs_flatten, self._obs_layout, self.num_envs,
                                "reset observation")
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
        obs_leaves, act_leaves, reward, terminated, truncated = self._step_values(
            action, obs, reward, terminated, truncated)
        rec = self._infos(infos, "info") if infos else None
        open_ = self._open
        done = terminated | truncated
        mode = self.mode
        finals = self._finals(done, final_obs, final_infos) if (
            mode == SAME_STEP and done.any()) else None
        if mode != NEXT_STEP and self._n_open != n:
            for i in np.flatnonzero(~open_).tolist():
                if self._last_obs[i] is None:
                    raise ResetNeeded(f"sub-env {i} was stepped before it was ever reset")
        self._store_step(base, obs_leaves, obs, act_leaves, action, reward, terminated,
                         truncated)
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
        ids_flat = self._segid[:n_rows].reshape(-1)  # index r * n + i: the flat column row
        steps_idx, obs_idx, step_off, obs_off, first = group_rows(ids_flat, segs)

        obs_g, act_g, rew_g, term_g, trunc_g = self._gather(obs_idx, steps_idx)
        seg_infos = segment_infos(segs, ids_flat, steps_idx, step_off, first, self._step_infos)
        # The gathered columns hold each segment's rows one after another: the writer can
        # write them column by column, like a single env's.
        infos = entries(segs, obs_off.tolist(), step_off.tolist(), seg_infos)
        # Start the next batch: open episodes go on as their next part.
        for i, open_seg in enumerate(self._segs):
            if open_seg is not None:
                self._segs[i] = vector_segment(i, open_seg.episode, open_seg.part + 1, None,
                                               None, None, None, open_seg.no_reset)
        if self._capacity != self._cap or not self._fits(self._obs_cols, self._act_cols):
            self._alloc()
        else:
            self._new_batch()
        return Batch(segs, obs_g, act_g, rew_g, term_g, trunc_g, infos, int(step_off[-1]))
