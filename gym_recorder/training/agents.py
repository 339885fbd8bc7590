"""One agent's transitions in a multi-agent recording's episode (see :mod:`gym_recorder.read.agents`).

An agent's transition goes from one of its rows to its next row: Parallel, the next step;
AEC, its next turn, whose ``last()`` reward is everything it got since it acted (the other
agents' turns included). A row from which the agent took no action (its last row, an AEC
finished agent's None turn) starts no transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format.agents import ACT_KEY, OBS_KEY, MultiAgent
from ..read.agents import agent_rows, check_joint, take_rows

__all__ = ["AgentColumns", "agent_columns"]


@dataclass(frozen=True)
class AgentColumns:
    """One agent's rows of one episode, and its transitions between them.

    Attributes:
        observations: the agent's observation at each of its rows (M rows).
        actions: the episode's action tree of the agent, all N rows (gather with ``act_rows``).
        obs_rows: (T,) index into ``observations`` of each transition's observation (the next
            observation is the following one).
        act_rows: (T,) the episode's step of each transition's action.
        reward, terminated, truncated: (T,) what the agent's next row gave.
    """

    observations: Any
    actions: Any
    obs_rows: np.ndarray
    act_rows: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


def agent_columns(ma: MultiAgent, agent: str, observations: dict[str, Any],
                  actions: dict[str, Any]) -> AgentColumns:
    """Agent ``agent``'s rows and transitions in one episode's joint observation and action
    trees (as an Episode or its parts hold them).

    Raises:
        KeyError: for an agent the recording does not have.
    """
    k = ma.index(agent)
    check_joint(observations, actions, ma, "multi-agent episode")
    rows = agent_rows(observations, ma, k)
    steps = len(actions["given"])
    here, nxt = rows[:-1], rows[1:]
    acted = actions["given"][np.minimum(here, max(steps - 1, 0)), k] & (here < steps) \
        if steps else np.zeros(len(here), bool)
    starts = np.flatnonzero(acted)
    reward_key = "cumulative_rewards" if ma.api == "aec" else "rewards"
    return AgentColumns(
        observations=take_rows(observations[OBS_KEY][agent], rows),
        actions=actions[ACT_KEY][agent], obs_rows=starts, act_rows=here[starts],
        reward=observations[reward_key][nxt[starts], k],
        terminated=observations["terminations"][nxt[starts], k],
        truncated=observations["truncations"][nxt[starts], k])
