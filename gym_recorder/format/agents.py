"""Multi-agent recordings (format version 2): the joint spaces and the manifest's "multiagent".

The rules are specified under "Multi-agent recordings" in :mod:`gym_recorder.format`; this
module holds them once, for the writer (:mod:`gym_recorder.record.multiagent`) and the reader
(:mod:`gym_recorder.read.agents`): the key names, :func:`joint_spaces` (the Dict spaces a
multi-agent recording is stored under) and :func:`parse_multiagent` (the reader's check of a
manifest's ``"multiagent"`` object against its spaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import FormatError

__all__ = ["MULTIAGENT_VERSION", "APIS", "MAX_AGENTS", "OBS_KEY", "ACT_KEY", "GIVEN_KEY",
           "AGENT_VECTORS", "AEC_VECTORS", "SELECTION_KEY", "MultiAgent", "joint_spaces",
           "parse_multiagent", "refuse_multiagent"]

# The format version a multi-agent recording's manifest and batches carry; single-agent
# recordings keep version 1, so readers of version 1 still read them.
MULTIAGENT_VERSION = 2
# The two PettingZoo APIs: one row per parallel step, or one row per AEC turn.
APIS = ("parallel", "aec")
# More agents than this is not a game but a bug (each agent adds leaves to every row).
MAX_AGENTS = 1 << 16
# Keys of the joint observation space (a Dict).
OBS_KEY = "observations"  # Dict {agent: the agent's observation space}
# Per-agent vectors of shape (K,), K = len(agents), in the order of the manifest's agents.
AGENT_VECTORS = {"observed": "|b1", "live": "|b1", "rewards": "<f8", "terminations": "|b1",
                 "truncations": "|b1"}
AEC_VECTORS = {"cumulative_rewards": "<f8"}
SELECTION_KEY = "agent_selection"  # AEC: int64 scalar, the agent to act next (-1: none)
# Keys of the joint action space (a Dict).
ACT_KEY = "actions"  # Dict {agent: the agent's action space}
GIVEN_KEY = "given"  # bool (K,): which agents' actions were given (not None, not absent)


@dataclass(frozen=True)
class MultiAgent:
    """A checked ``"multiagent"`` object of a manifest.

    Attributes:
        api: ``"parallel"`` or ``"aec"``.
        agents: the env's ``possible_agents``, in its order (the order of every per-agent
            vector).
        env: what the writer recorded of the env (``"name"``, ``"module"``, ``"class"``,
            ``"entry_point"``, ``"kwargs"``), a dict of JSON values; unchecked.
    """

    api: str
    agents: tuple[str, ...]
    env: dict[str, Any]

    def index(self, agent: str) -> int:
        """The position of ``agent`` in :attr:`agents`.

        Raises:
            KeyError: naming the agents there are.
        """
        try:
            return self.agents.index(agent)
        except ValueError:
            raise KeyError(f"no agent {agent!r} in this recording; its agents are "
                           f"{list(self.agents)}") from None


def joint_spaces(api: str, agents: list[str], obs_spaces: list[gym.Space[Any]],
                 act_spaces: list[gym.Space[Any]]) -> tuple[gym.spaces.Dict, gym.spaces.Dict]:
    """The observation and action spaces a multi-agent recording is stored under.

    Args:
        api: one of :data:`APIS`.
        agents: the agents' names (``possible_agents``).
        obs_spaces, act_spaces: each agent's spaces, in the order of ``agents``.
    """
    k = len(agents)
    vectors = dict(AGENT_VECTORS, **(AEC_VECTORS if api == "aec" else {}))
    obs: dict[str, gym.Space[Any]] = {
        OBS_KEY: gym.spaces.Dict(dict(zip(agents, obs_spaces))),
        **{key: _vector(k, dtype) for key, dtype in vectors.items()}}
    if api == "aec":
        obs[SELECTION_KEY] = gym.spaces.Box(-1, max(k - 1, 0), (), np.int64)
    act = {ACT_KEY: gym.spaces.Dict(dict(zip(agents, act_spaces))), GIVEN_KEY: _vector(k, "|b1")}
    return gym.spaces.Dict(obs), gym.spaces.Dict(act)


def _vector(k: int, dtype: str) -> gym.spaces.Box:
    if dtype == "|b1":
        return gym.spaces.Box(0, 1, (k,), np.bool_)  # type: ignore[arg-type]
    return gym.spaces.Box(-np.inf, np.inf, (k,), np.float64)


def _dict_keys(desc: Any, where: str) -> dict[str, Any]:
    if not isinstance(desc, dict) or desc.get("type") != "Dict" \
            or not isinstance(desc.get("spaces"), list):
        raise FormatError(f"{where}: a multi-agent recording's space must be a Dict")
    out: dict[str, Any] = {}
    for item in desc["spaces"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise FormatError(f"{where}: a Dict's spaces must be [key, SPACE] pairs")
        out[item[0]] = item[1]
    return out


def _check_vector(desc: Any, k: int, dtype: str, where: str) -> None:
    if not (isinstance(desc, dict) and desc.get("type") == "Box" and desc.get("dtype") == dtype
            and desc.get("shape") == [k]):
        raise FormatError(f"{where}: must be a Box of dtype {dtype} and shape [{k}]")


def parse_multiagent(doc: dict[str, Any], where: str) -> MultiAgent | None:
    """Checks a manifest's ``"multiagent"`` object and its spaces; None for single-agent ones.

    A version 1 manifest MUST NOT have one (it needs version 2).

    Raises:
        FormatError: naming ``where`` and what is wrong.
    """
    ma = doc.get("multiagent")
    version = doc.get("version")
    if ma is None:  # (version 2 is also that of compressed arrays and edits: see the spec)
        return None
    if version != MULTIAGENT_VERSION:
        raise FormatError(f"{where}: 'multiagent' in a manifest of version {version!r} (it "
                          f"needs version {MULTIAGENT_VERSION})")
    if not isinstance(ma, dict):
        raise FormatError(f"{where}: 'multiagent' must be an object")
    api, agents, env = ma.get("api"), ma.get("agents"), ma.get("env", {})
    if api not in APIS:
        raise FormatError(f"{where}: multiagent api must be one of {list(APIS)}, got {api!r}")
    if not isinstance(agents, list) or not 1 <= len(agents) <= MAX_AGENTS or not all(
            isinstance(a, str) for a in agents) or len(set(agents)) != len(agents):
        raise FormatError(f"{where}: multiagent agents must be 1 to {MAX_AGENTS} distinct "
                          "strings")
    k = len(agents)
    obs = _dict_keys(doc.get("observation_space"), f"{where} observation_space")
    vectors = dict(AGENT_VECTORS, **(AEC_VECTORS if api == "aec" else {}))
    expected = {OBS_KEY, *vectors, *([SELECTION_KEY] if api == "aec" else [])}
    if set(obs) != expected:
        raise FormatError(f"{where} observation_space: a multi-agent ({api}) space has the keys "
                          f"{sorted(expected)}, got {sorted(obs)}")
    for key, dtype in vectors.items():
        _check_vector(obs[key], k, dtype, f"{where} observation_space {key}")
    if set(_dict_keys(obs[OBS_KEY], f"{where} observation_space {OBS_KEY}")) != set(agents):
        raise FormatError(f"{where} observation_space {OBS_KEY}: keys are not the agents")
    if api == "aec":
        sel = obs[SELECTION_KEY]
        if not (isinstance(sel, dict) and sel.get("type") == "Box" and sel.get("dtype") == "<i8"
                and sel.get("shape") == []):
            raise FormatError(f"{where} observation_space {SELECTION_KEY}: must be a Box of "
                              "dtype <i8 and shape []")
    act = _dict_keys(doc.get("action_space"), f"{where} action_space")
    if set(act) != {ACT_KEY, GIVEN_KEY}:
        raise FormatError(f"{where} action_space: a multi-agent space has the keys "
                          f"{[ACT_KEY, GIVEN_KEY]}, got {sorted(act)}")
    _check_vector(act[GIVEN_KEY], k, "|b1", f"{where} action_space {GIVEN_KEY}")
    if set(_dict_keys(act[ACT_KEY], f"{where} action_space {ACT_KEY}")) != set(agents):
        raise FormatError(f"{where} action_space {ACT_KEY}: keys are not the agents")
    return MultiAgent(api, tuple(agents), env if isinstance(env, dict) else {})


def refuse_multiagent(multiagent: MultiAgent | None, what: str) -> None:
    """For the parts that know single-agent recordings only: refuse a multi-agent one by name.

    Raises:
        FormatError: when ``multiagent`` is not None.
    """
    if multiagent is not None:
        raise FormatError(f"{what} does not support multi-agent (PettingZoo, "
                          f"{multiagent.api}) recordings yet")
