"""What the reader hands out: episodes, their summaries, and a recording batch by batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Episode", "EpisodeSummary", "BatchInfo", "EpisodePart"]


@dataclass(frozen=True)
class Episode:
    """One recorded episode.

    Attributes:
        index: position of the episode in the reader.
        observations: N + 1 rows: the reset observation, then one per step. An array for Box,
            Discrete, MultiDiscrete and MultiBinary spaces, a dict of these for Dict, a tuple for
            Tuple, a list for Text, Sequence, Graph and OneOf spaces.
        actions: N rows, structured like observations.
        rewards: float64 array of shape (N,).
        terminations: bool array of shape (N,).
        truncations: bool array of shape (N,).
        infos: N + 1 dicts: the reset info, then one per step.
        seed: the seed passed to ``reset``, or None.
        options: the options passed to ``reset``, or None.
        env_id: the environment's id, or None.
        end: how the episode ended: ``"terminated"``, ``"truncated"``, ``"reset"`` (reset
            before it ended), ``"close"`` (recorder closed before it ended), or None (not ended:
            the writer is still running or was killed, or a legacy recording).
        sub_env: index of the sub-environment for vector recordings, else None.
        writer: the file prefix of the writer that recorded it.
        no_reset: True if the episode was stepped without a reset after the previous one ended
            (its first observation is that episode's last).
        multiagent: for a multi-agent (PettingZoo) recording, its api and agents (see
            :attr:`agents`); else None.
    """

    index: int
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list[dict[str, Any]] = field(repr=False)
    seed: int | None
    options: Any
    env_id: str | None
    end: str | None
    sub_env: int | None
    writer: str
    no_reset: bool = False
    multiagent: Any = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def length(self) -> int:
        """Number of steps (transitions) N."""
        return len(self.rewards)

    @property
    def total_reward(self) -> float:
        """The undiscounted return."""
        return float(self.rewards.sum())

    @property
    def agents(self) -> Any:
        """Each agent's arrays, by name, for a multi-agent recording (see
        :class:`gym_recorder.read.agents.AgentEpisode`).

        Raises:
            AttributeError: for a single-agent recording.
        """
        if self.multiagent is None:
            raise AttributeError("a single-agent episode has no agents")
        from .agents import agent_episodes

        return agent_episodes(self)


class EpisodeSummary(NamedTuple):
    """What :meth:`RecordingReader.summary` reads of an episode: no observations or actions."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, by design
    length: int
    total_reward: float
    end: str | None
    seed: int | None
    sub_env: int | None
    writer: str
    env_id: str | None
    # The episode's number within its writer: with ``writer``, its stable id (an index
    # shifts when an edit deletes an earlier episode; this does not, until compaction).
    number: int | None = None


@dataclass(frozen=True)
class BatchInfo:
    """One committed batch, as :meth:`RecordingReader.batches` lists it (small and picklable).

    Attributes:
        writer: the prefix of the writer that wrote it.
        number: the batch's position in its writer's manifest (0, 1, ...).
        json_name: its batch JSON file's name.
        bin_name: its .bin file's name ("" for a gym-recording batch, whose arrays have files
            of their own).
        episodes: the reader indices of the episodes that have a part in the batch, ascending.
        json_crc32: the CRC-32 of its batch JSON that the manifest records (None for a
            gym-recording batch): which batch of that name it is, should the files be replaced.
    """

    writer: str
    number: int
    json_name: str
    bin_name: str
    episodes: tuple[int, ...]
    json_crc32: int | None = None


@dataclass
class EpisodePart:
    """The steps of one episode that one batch holds, as :meth:`RecordingReader.read_batch`
    decodes them.

    Concatenating the parts of an episode in ``part`` order gives exactly the arrays (and
    lists) of the :class:`Episode`. Each part holds the rows the Episode holds for its steps:
    part 0 holds its steps + 1 observations and infos (the reset's first, then one after each
    action), every later part one observation and info per step (the ones after each of its
    actions; the observation before its first action is the previous part's last). Arrays may
    be views of the batch's bytes, which they keep alive.

    Attributes:
        episode: the episode's reader index.
        part: 0 for the part that starts with the reset, then 1, 2, ...
        first_step: the index in the episode of the part's first action (its steps are
            ``first_step .. first_step + len(rewards) - 1``).
        observations: the part's observation rows, structured like ``Episode.observations``.
        actions: one row per step, structured like ``Episode.actions``.
        rewards: float64, one per step.
        terminations: bool, one per step.
        truncations: bool, one per step.
        infos: the part's info dicts (as many as its observation rows).
        is_last: True if the Episode, as the reader sees it now, ends with this part.
    """

    episode: int
    part: int
    first_step: int
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list[dict[str, Any]] = field(repr=False)
    is_last: bool
