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

from ..errors import FormatError
from ..format.agents import (ACT_KEY, AEC_VECTORS, AGENT_VECTORS, GIVEN_KEY, OBS_KEY,
                             SELECTION_KEY, MultiAgent)

__all__ = ["AgentEpisode", "Agents", "agent_episodes", "agent_rows", "check_joint", "take_rows"]


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


def check_joint(obs: Any, act: Any, ma: MultiAgent, where: str) -> None:
    """Checks the joint rows of a multi-agent episode (or its parts) before they are cut up:
    every per-agent vector an array of its dtype and shape (K per row), ``agent_selection``
    within ``[-1, K)``. A hostile writer may have stored a leaf as values or widened it.

    Raises:
        FormatError: naming ``where`` and the leaf.
    """
    k = len(ma.agents)
    vectors = dict(AGENT_VECTORS, **(AEC_VECTORS if ma.api == "aec" else {}))
    checks = [(obs, key, np.dtype(dtype), 2) for key, dtype in vectors.items()]
    checks.append((act, GIVEN_KEY, np.dtype(np.bool_), 2))
    if ma.api == "aec":
        checks.append((obs, SELECTION_KEY, np.dtype(np.int64), 1))
    for tree, key, dtype, ndim in checks:
        leaf = tree.get(key) if isinstance(tree, dict) else None
        if not (isinstance(leaf, np.ndarray) and leaf.dtype == dtype and leaf.ndim == ndim
                and (ndim == 1 or leaf.shape[1] == k)):
            raise FormatError(f"{where}: the multi-agent leaf {key!r} must be an array of "
                              f"{dtype} with {k if ndim == 2 else 'no'} values a row")
    if ma.api == "aec":
        sel = obs[SELECTION_KEY]
        if sel.size and (sel.min() < -1 or sel.max() >= k):
            raise FormatError(f"{where}: agent_selection outside [-1, {k})")
    if not (isinstance(obs.get(OBS_KEY), dict) and isinstance(act.get(ACT_KEY), dict)):
        raise FormatError(f"{where}: the multi-agent observations and actions must be Dicts")


def agent_episodes(episode: Any) -> Agents:
    """Every agent's :class:`AgentEpisode` of a multi-agent Episode, by name.

    Raises:
        FormatError: if the episode's joint rows are not what the layout says.
    """
    ma: MultiAgent = episode.multiagent
    obs, act = episode.observations, episode.actions
    check_joint(obs, act, ma, f"writer {episode.writer} episode {episode.index}")
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
