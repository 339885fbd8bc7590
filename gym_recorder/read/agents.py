"""Each agent's arrays from an episode of a multi-agent recording (format version 2).

A multi-agent episode is stored as one episode of joint rows (see "Multi-agent recordings" in
:mod:`gym_recorder.format`); :func:`agent_episodes` cuts out each agent's own rows:

- Parallel: the rows where the agent is in the step's observations dict (from the reset, or
  from the step it joined, to the step it left, that one included).
- AEC: the rows where it is ``agent_selection``: what ``last()`` gave it before each of its
  turns (its observation, its reward since it last acted, termination, truncation, info),
  then the action it took there (None, for a finished agent's turn, is ``acted`` false).

Both give the same shape of data: row i's observation, then the action taken from it (when
``acted[i]``), whose reward and termination come with row i + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..format.agents import ACT_KEY, GIVEN_KEY, OBS_KEY, SELECTION_KEY, MultiAgent

__all__ = ["AgentEpisode", "Agents", "agent_episodes", "agent_rows", "take_rows"]


@dataclass(frozen=True)
class AgentEpisode:
    """One agent's part of a multi-agent episode: M rows, the ones where it observed.

    Attributes:
        name: the agent.
        rows: int64 (M,): the episode's row numbers (0: after the reset, t: after step or turn
            t) of this agent's rows.
        observations: (M, ...) its observations, structured like its observation space.
        actions: (M, ...) the action it took after each row (a filler where ``acted`` is false).
        acted: bool (M,): it took an action after the row (false for its last row, and for
            an AEC finished agent's None turn).
        rewards: float64 (M,): Parallel: the reward the step gave it; AEC: ``last()``'s reward
            (its cumulative reward since it last acted).
        terminations, truncations: bool (M,): as the step (Parallel) or ``last()`` (AEC) gave.
        infos: M dicts: its info at each row ({} when the row's infos did not hold it).
        step_rewards: AEC: float64 (M,), ``env.rewards[agent]`` at the row; Parallel: the same
            as ``rewards``.
    """

    name: str
    rows: np.ndarray
    observations: Any
    actions: Any
    acted: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list[dict[str, Any]] = field(repr=False)
    step_rewards: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def total_reward(self) -> float:
        """The agent's undiscounted return: the sum of its rewards."""
        return float(self.rewards.sum())


def take_rows(tree: Any, rows: np.ndarray) -> Any:
    """The rows ``rows`` of a space-shaped value (arrays, dicts, tuples, lists of values)."""
    if isinstance(tree, np.ndarray):
        return tree[rows]
    if isinstance(tree, dict):
        return {k: take_rows(v, rows) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(take_rows(v, rows) for v in tree)
    return [tree[i] for i in rows]


def _action_rows(tree: Any, rows: np.ndarray, steps: int) -> Any:
    """The action rows ``rows`` (some may be ``steps``: past the last action, filled with the
    leaf's zeros, or None for values)."""
    if isinstance(tree, np.ndarray):
        padded = np.concatenate([tree, np.zeros((1,) + tree.shape[1:], tree.dtype)])
        return padded[rows]
    if isinstance(tree, dict):
        return {k: _action_rows(v, rows, steps) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_action_rows(v, rows, steps) for v in tree)
    return [tree[i] if i < steps else None for i in rows]


def agent_rows(obs: dict[str, Any], ma: MultiAgent, k: int) -> np.ndarray:
    """The rows of an episode's joint observations ``obs`` that belong to agent number ``k``."""
    if ma.api == "aec":
        return np.flatnonzero(obs[SELECTION_KEY] == k)
    return np.flatnonzero(obs["observed"][:, k])


class Agents(dict[str, AgentEpisode]):
    """Each agent's :class:`AgentEpisode`, by name, in the order of ``possible_agents``."""

    def __missing__(self, key: str) -> AgentEpisode:
        raise KeyError(f"no agent {key!r} in this recording; its agents are {list(self)}")


def agent_episodes(episode: Any) -> Agents:
    """Every agent's :class:`AgentEpisode` of a multi-agent Episode, by name."""
    ma: MultiAgent = episode.multiagent
    obs, act = episode.observations, episode.actions
    steps = len(episode.rewards)
    given = act[GIVEN_KEY]
    out = Agents()
    for k, name in enumerate(ma.agents):
        rows = agent_rows(obs, ma, k)
        acted = np.zeros(len(rows), bool)
        inside = rows < steps
        acted[inside] = given[rows[inside], k]
        step_rewards = obs["rewards"][rows, k]
        rewards = obs["cumulative_rewards"][rows, k] if ma.api == "aec" else step_rewards
        infos = [_agent_info(episode.infos[r], name) for r in rows]
        out[name] = AgentEpisode(
            name=name, rows=rows, observations=take_rows(obs[OBS_KEY][name], rows),
            actions=_action_rows(act[ACT_KEY][name], rows, steps), acted=acted,
            rewards=rewards, terminations=obs["terminations"][rows, k],
            truncations=obs["truncations"][rows, k], infos=infos, step_rewards=step_rewards)
    return out


def _agent_info(info: dict[str, Any], name: str) -> dict[str, Any]:
    value = info.get(name)
    return value if isinstance(value, dict) else {}
