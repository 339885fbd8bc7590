"""The batch: what a buffer hands to the encoder, as columns plus one :class:`Segment` per entry.

The contract between :mod:`gym_recorder.record.buffer` (which fills batches) and
:mod:`gym_recorder.record.encode` (which turns them into files). No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Batch", "Segment"]


@dataclass(slots=True, eq=False)
class Segment:
    """One entry of a batch: an episode, or the part of one, whose rows lie in the batch.

    Attributes:
        episode: the episode's number (in the order episodes started, per writer).
        part: the part's number within the episode (0: it starts here).
        obs0, obs1: its observation rows ``[obs0, obs1)`` in the batch's observation columns.
        step0, step1: its transition rows in the action, reward and flag columns.
        info0, info1: its info rows (one per observation) in the batch's info numbering.
        seed: the reset seed (part 0 only; None otherwise).
        options: the reset options, already copied (part 0 only).
        sub_env: the sub-environment of a vector env, or None.
        no_reset: True for an episode stepped on without a reset (it starts from the last
            observation).
        end: why the episode ended, or None while it continues in the next batch.
        reset_row, final_row, reset_info: see below (the vector buffer's; None otherwise).

    Each entry's rows follow the previous entry's in every column.
    """

    episode: int
    part: int
    obs0: int
    step0: int
    info0: int
    seed: int | None
    options: Any
    sub_env: int | None
    no_reset: bool
    obs1: int = 0
    step1: int = 0
    info1: int = 0
    end: str | None = None
    # The vector buffer's bookkeeping while the batch is filled (its rows are found when the
    # batch is taken; see record/vector_rows): flat observation rows of the reset observation
    # (part 0) and of the last one when it is not a step's (SAME_STEP, no_reset), the reset info.
    reset_row: int | None = None
    final_row: int | None = None
    reset_info: dict[str, Any] | None = None


class Batch:
    """One batch of consecutive entries (episodes or parts of episodes), kept as columns.

    Handing the columns over costs the stepping thread nothing per episode; the writer writes
    each column in one piece (see :mod:`gym_recorder.record.writer`).

    Attributes:
        segments: one :class:`Segment` per entry, in order.
        observations: per observation leaf, its column: an array, or a list of values for a
            leaf that does not stack.
        actions: per action leaf, its column.
        rewards: float64 column; terminations, truncations: bool columns.
        infos: sparse (row, info) pairs, rows counted across the batch, ascending.
        steps: transitions in the batch.
        entries: number of entries.
        new_episodes: entries that start an episode (``part`` == 0).
    """

    def __init__(self, segments: list[Segment], observations: list[Any], actions: list[Any],
                 rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray,
                 infos: list[tuple[int, dict[str, Any]]], steps: int,
                 release: Callable[[], None] | None = None) -> None:
        self.segments = segments
        self.observations = observations
        self.actions = actions
        self.rewards = rewards
        self.terminations = terminations
        self.truncations = truncations
        self.infos = infos
        self.steps = steps
        self.entries = len(segments)
        self.new_episodes = sum(1 for seg in segments if seg.part == 0)
        self._release = release

    def release(self) -> None:
        """Hands the columns back to the buffer for reuse (call once the batch is written)."""
        release, self._release = self._release, None
        self.segments, self.infos = [], []
        self.observations, self.actions = [], []
        if release is not None:
            release()

    def segment_infos(self) -> list[list[tuple[int, dict[str, Any]]]]:
        """The sparse infos of each entry, with rows counted from the entry's first row."""
        out = []
        infos = self.infos
        k = 0
        for seg in self.segments:
            i0, i1 = seg.info0, seg.info1
            mine = []
            while k < len(infos) and infos[k][0] < i1:
                mine.append((infos[k][0] - i0, infos[k][1]))
                k += 1
            out.append(mine)
        return out
