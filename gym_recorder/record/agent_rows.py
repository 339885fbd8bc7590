"""The rows of a multi-agent recording, from PettingZoo's dicts (see "Multi-agent recordings"
in :mod:`gym_recorder.format`).

:class:`AgentRows` holds a multi-agent wrapper's buffer and session and turns the dicts an env
returns into rows of the joint spaces of :func:`gym_recorder.format.agents.joint_spaces`; the
wrappers of :mod:`gym_recorder.record.multiagent` know PettingZoo's protocols and call it. It
knows nothing of PettingZoo (the env is asked only for ``possible_agents``, its spaces and
``metadata``).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import RecordingClosedError, UnsupportedValueError, WriteError
from ..format.agents import ACT_KEY, GIVEN_KEY, MULTIAGENT_VERSION, OBS_KEY, joint_spaces
from ..format.spaces import Layout, describe_space
from .buffer import StepBuffer
from .session import RecordingSession

__all__ = ["AgentRows", "MISSING", "copy_tree"]

_monotonic = time.monotonic


def _filler(space: gym.Space[Any]) -> Any:
    """The value stored in an agent's slot of a row where it has none: zeros (a Discrete's
    start); for spaces whose leaves are stored as values, a value of the space that readers
    accept there ("" or a fixed sample for Text, a fixed sample for Sequence, Graph, OneOf),
    else None."""
    if isinstance(space, gym.spaces.Box):
        return np.zeros(space.shape, space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return space.dtype.type(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.array(space.start, dtype=space.dtype)
    if isinstance(space, gym.spaces.MultiBinary):
        return np.zeros(space.shape, np.int8)
    if isinstance(space, gym.spaces.Dict):
        return {k: _filler(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_filler(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Text) and space.min_length == 0:
        return ""
    if isinstance(space, (gym.spaces.Text, gym.spaces.Sequence, gym.spaces.Graph,
                          gym.spaces.OneOf)):
        fixed = copy.deepcopy(space)  # (the env's space and its random state stay untouched)
        fixed.seed(0)
        return fixed.sample()
    return None


def _env_description(env: Any, entry_point: str | None,
                     kwargs: dict[str, Any] | None) -> dict[str, Any]:
    base = env.unwrapped
    metadata = getattr(env, "metadata", None) or {}
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return {"name": name if isinstance(name, str) else None,
            "module": type(base).__module__, "class": type(base).__qualname__,
            "entry_point": entry_point, "kwargs": kwargs}


class AgentRows:
    """Rows of the joint spaces from PettingZoo's dicts, into a buffer and a session."""

    def __init__(self, owner: Any, api: str, env: Any, directory: str | os.PathLike[str],
                 file_prefix: str | None, target_batch_bytes: int, record_infos: bool,
                 flush_interval: float | None, fsync: bool, entry_point: str | None,
                 env_kwargs: dict[str, Any] | None, codec: Any = None,
                 metadata: dict[str, Any] | None = None) -> None:
        agents = list(env.possible_agents)
        if not agents or not all(isinstance(a, str) for a in agents) \
                or len(set(agents)) != len(agents):
            raise UnsupportedValueError(f"possible_agents must be distinct strings, got {agents!r}")
        self.api = api
        self.agents = agents
        self.index = {a: i for i, a in enumerate(agents)}
        self.k = len(agents)
        obs_spaces = [env.observation_space(a) for a in agents]
        act_spaces = [env.action_space(a) for a in agents]
        obs_space, act_space = joint_spaces(api, agents, obs_spaces, act_spaces)
        header = {"version": MULTIAGENT_VERSION, "env_id": None, "env_spec": None,
                  "observation_space": describe_space(obs_space),
                  "action_space": describe_space(act_space), "vector": None,
                  "multiagent": {"api": api, "agents": agents,
                                 "env": _env_description(env, entry_point, env_kwargs)}}
        if metadata:
            header["metadata"] = metadata
        obs_layout, act_layout = Layout(header["observation_space"]), Layout(header["action_space"])
        self.buffer = StepBuffer(obs_layout, act_layout, target_batch_bytes,
                                 record_infos=record_infos)
        self.session = RecordingSession(owner, self.buffer, self.buffer.end_episode, directory,
                                        header, obs_layout, act_layout, file_prefix=file_prefix,
                                        flush_interval=flush_interval, fsync=fsync,
                                        compression=codec)
        self.obs_fill = {a: _filler(s) for a, s in zip(agents, obs_spaces)}
        self.act_fill = {a: _filler(s) for a, s in zip(agents, act_spaces)}
        self.last_trunc = np.zeros(self.k, bool)  # each agent's last truncation this episode
        self.started = False
        self.paused = False  # (after a fork: steps pass through until reset)
        self.pending: WriteError | None = None

    # -- rows -------------------------------------------------------------------------------

    def _vector(self, values: Mapping[Any, Any], dtype: type, extra: dict[str, Any],
                what: str) -> np.ndarray:
        out: np.ndarray = np.zeros(self.k, dtype)
        index = self.index
        for a, v in values.items():
            i = index.get(a)
            if i is None:
                extra.setdefault(what, {})[a] = v
            else:
                out[i] = v
        return out

    def _mask(self, names: Iterable[Any]) -> np.ndarray:
        out = np.zeros(self.k, bool)
        index = self.index
        for a in names:
            i = index.get(a)
            if i is not None:
                out[i] = True
        return out

    def row(self, obs: Mapping[Any, Any], rewards: Mapping[Any, Any],
            terms: Mapping[Any, Any], truncs: Mapping[Any, Any], live: Iterable[Any],
            extra: dict[str, Any]) -> dict[str, Any]:
        """One observation row: per-agent slots filled for the agents the dicts name."""
        agent_obs = dict(self.obs_fill)
        observed = np.zeros(self.k, bool)
        index = self.index
        for a, o in obs.items():
            i = index.get(a)
            if i is None:
                extra.setdefault("observations", {})[a] = o
            elif o is not None:
                agent_obs[a] = o
                observed[i] = True
        te = self._vector(terms, np.bool_, extra, "terminations")
        tr = self._vector(truncs, np.bool_, extra, "truncations")
        for a in truncs:
            i = index.get(a)
            if i is not None:
                self.last_trunc[i] = bool(truncs[a])
        return {OBS_KEY: agent_obs, "observed": observed, "live": self._mask(live),
                "rewards": self._vector(rewards, np.float64, extra, "rewards"),
                "terminations": te, "truncations": tr}

    def action_row(self, actions: Mapping[Any, Any], extra: dict[str, Any]) -> dict[str, Any]:
        acts = dict(self.act_fill)
        given = np.zeros(self.k, bool)
        index = self.index
        for a, act in actions.items():
            i = index.get(a)
            if i is None:
                extra.setdefault("actions", {})[a] = act
            elif act is not None:
                acts[a] = act
                given[i] = True
        return {ACT_KEY: acts, GIVEN_KEY: given}

    @staticmethod
    def info(infos: Any, extra: dict[str, Any]) -> dict[str, Any]:
        """The row's info: the env's per-agent infos dict, as returned; keys of the other dicts
        that name no agent of ``possible_agents`` are kept under ``"__extra__"``."""
        out = dict(infos) if isinstance(infos, Mapping) else {"__infos__": infos}
        if extra:
            out["__extra__"] = extra
        return out

    # -- protocol ---------------------------------------------------------------------------

    def check(self, what: str) -> None:
        if self.session.closed:
            raise RecordingClosedError(f"{what} on a closed multi-agent recorder")
        if self.pending is not None:
            error, self.pending = self.pending, None
            raise error

    def start(self, obs: dict[str, Any], info: dict[str, Any], seed: int | None,
              options: Any) -> None:
        buffer = self.buffer
        buffer.end_episode("reset")
        if buffer.full or self.session.due():
            self._commit()
        self.last_trunc[:] = False
        buffer.start_episode(obs, info, None if seed is None else int(seed), options)
        self.started = True
        self.paused = False

    def add(self, action: dict[str, Any], obs: dict[str, Any], total: float, ended: bool,
            info: dict[str, Any]) -> None:
        truncated = ended and bool(self.last_trunc.any())
        if self.buffer.add_step(action, obs, total, ended and not truncated, truncated, info) \
                or _monotonic() >= self.session.deadline:
            self._commit()

    def _commit(self) -> None:
        try:
            self.session.commit()
        except WriteError as e:  # recorded: return the step, raise at the next call
            self.pending = e


# An observation not yet observed (None is an observation some envs give).
MISSING = object()


def copy_tree(value: Any) -> Any:
    """A copy of an observation that later changes to the arrays it holds cannot reach."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(copy_tree(v) for v in value)
    if isinstance(value, list):
        return [copy_tree(v) for v in value]
    return value


