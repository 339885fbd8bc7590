"""Replaying a multi-agent (PettingZoo) recording: every agent's observations, exactly.

:func:`replay_multiagent_episode` re-runs one episode of a multi-agent recording in a
PettingZoo env with the recorded seed, options and actions and compares, row by row, what
the env gives with what was recorded: Parallel, the observations, rewards, terminations and
truncations dicts of every step (their agents too); AEC, for every turn, the agent to act,
what it observes, and every agent's cumulative reward, termination and truncation. Comparing
stops at the first difference. :func:`make_multiagent_env` makes the env from the entry point
the recorder kept (``entry_point``/``env_kwargs`` of the wrappers, or ``gym-recorder record``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from ..format.agents import ACT_KEY, GIVEN_KEY, OBS_KEY, SELECTION_KEY, MultiAgent
from ..read.agents import check_joint
from .compare import EpisodeCheck, first_difference, tree_row

__all__ = ["make_multiagent_env", "replay_multiagent_episode", "multiagent_factory",
           "MultiAgentStreams"]


def make_multiagent_env(entry_point: str, kwargs: Mapping[str, Any] | None = None) -> Any:
    """``module:function(**kwargs)``, e.g. ``pettingzoo.classic.tictactoe_v3:env``.

    Raises:
        ValueError: for an entry point not of that form.
        ImportError, AttributeError: if the module or function is missing.
    """
    module, sep, attr = entry_point.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"an env entry point is 'module:function', got {entry_point!r}")
    fn = getattr(importlib.import_module(module), attr)
    return fn(**dict(kwargs or {}))


def multiagent_factory(ma: MultiAgent, env_kwargs: Mapping[str, Any] | None
                       ) -> tuple[Callable[[], Any] | None, str]:
    """How to make a writer's env: (factory, reason when impossible)."""
    entry = ma.env.get("entry_point")
    if not isinstance(entry, str):
        return None, ("the recording has no env entry point (pass entry_point= and env_kwargs= "
                      "to the recording wrapper, or record with gym-recorder record)")
    kwargs = ma.env.get("kwargs")
    merged = {**(kwargs if isinstance(kwargs, dict) else {}), **dict(env_kwargs or {})}
    return (lambda: make_multiagent_env(entry, merged)), ""


def _vector_difference(obs: Mapping[str, Any], t: int, key: str, ma: MultiAgent,
                       values: Mapping[Any, Any], default: Any) -> str | None:
    recorded = obs[key][t]
    for k, name in enumerate(ma.agents):
        actual = values.get(name, default)
        if recorded[k] != actual and not (recorded[k] != recorded[k] and actual != actual):
            return f"{key}[{name!r}]: {actual!r}, recorded {recorded[k].item()!r}"
    return None


def _row_difference(ep: Any, ma: MultiAgent, t: int, obs: Mapping[Any, Any],
                    dicts: list[tuple[str, Mapping[Any, Any], Any]]) -> str | None:
    """Row ``t`` against what the env gave: its observations dict, then the other dicts."""
    rec = ep.observations
    names = [n for k, n in enumerate(ma.agents) if rec["observed"][t, k]]
    actual = [a for a in obs if a in ma.agents and obs[a] is not None]
    if sorted(names) != sorted(actual):
        return f"agents observed {sorted(actual)}, recorded {sorted(names)}"
    info = ep.infos[t] if t < len(ep.infos) else {}
    extra = info.get("__extra__") if isinstance(info, dict) else None
    recorded_extra = extra.get("observations", {}) if isinstance(extra, dict) else {}
    d = first_difference(recorded_extra, {k: v for k, v in obs.items() if k not in ma.agents},
                         "observations' keys that are no agent")
    if d is not None:
        return d
    for name in names:
        d = first_difference(tree_row(rec[OBS_KEY][name], t), obs[name],
                             f"observation of {name!r}")
        if d is not None:
            return d
    for key, values, default in dicts:
        d = _vector_difference(rec, t, key, ma, values, default)
        if d is not None:
            return d
    return None


def _actions(ep: Any, ma: MultiAgent, t: int) -> dict[str, Any]:
    given = ep.actions[GIVEN_KEY][t]
    return {name: tree_row(ep.actions[ACT_KEY][name], t)
            for k, name in enumerate(ma.agents) if given[k]}


def replay_multiagent_episode(ep: Any, env: Any) -> EpisodeCheck:
    """Replays episode ``ep`` (of a multi-agent recording) in ``env`` and compares it.

    The env is reset with the episode's seed and options; an unseeded episode is replayed
    too (the caller knows whether the env's random state follows the recording).
    """
    ma: MultiAgent = ep.multiagent

    def result(status: str, step: int | None = None, message: str = "") -> EpisodeCheck:
        return EpisodeCheck(ep.index, ep.writer, None, ep.length, status, step, message)

    check_joint(ep.observations, ep.actions, ma, f"episode {ep.index}")
    try:
        if ma.api == "parallel":
            found = _replay_parallel(ep, ma, env)
        else:
            found = _replay_aec(ep, ma, env)
    except Exception as e:  # noqa: BLE001  (the env's own error is the finding)
        return result("mismatch", None, f"the env raised {type(e).__name__}: {e}")
    if found is not None:
        return result("mismatch", found[0], found[1])
    return result("match")


def _replay_parallel(ep: Any, ma: MultiAgent, env: Any) -> tuple[int, str] | None:
    obs, _ = env.reset(seed=ep.seed, options=ep.options)
    d = _row_difference(ep, ma, 0, obs, [])
    if d is not None:
        return 0, d
    for t in range(ep.length):
        obs, rewards, terms, truncs, _ = env.step(_actions(ep, ma, t))
        d = _row_difference(ep, ma, t + 1, obs, [("rewards", rewards, 0.0),
                                                 ("terminations", terms, False),
                                                 ("truncations", truncs, False)])
        if d is None:
            live = [n for k, n in enumerate(ma.agents) if ep.observations["live"][t + 1, k]]
            if list(env.agents) != live:
                d = f"live agents {list(env.agents)}, recorded {live}"
        if d is not None:
            return t + 1, d
    return None


def _replay_aec(ep: Any, ma: MultiAgent, env: Any) -> tuple[int, str] | None:
    env.reset(seed=ep.seed, options=ep.options)
    rec = ep.observations
    for t in range(ep.length + 1):
        agents = list(env.agents)
        selected = env.agent_selection if agents else None
        recorded = int(rec[SELECTION_KEY][t])
        if (ma.index(selected) if selected is not None else -1) != recorded:
            return t, (f"agent_selection {selected!r}, recorded "
                       f"{ma.agents[recorded] if recorded >= 0 else None!r}")
        obs = {} if selected is None else {selected: env.observe(selected)}
        d = _row_difference(ep, ma, t, obs, [
            ("rewards", env.rewards, 0.0), ("cumulative_rewards", env._cumulative_rewards, 0.0),
            ("terminations", env.terminations, False), ("truncations", env.truncations, False)])
        if d is not None:
            return t, d
        if t == ep.length:
            return None
        action = _actions(ep, ma, t).get(selected) if selected is not None else None
        env.step(action)
    return None


class MultiAgentStreams:
    """The envs replaying multi-agent writers, one per writer, kept across its episodes: an
    unseeded episode is replayed only while its env follows the recording (after a seeded
    reset and no mismatch).

    Args:
        env_kwargs: kwargs that fill in or override the recorded ones.
        env_fn: makes the env (given the writer's :class:`MultiAgent`), instead of the
            recorded entry point.
    """

    def __init__(self, env_kwargs: Mapping[str, Any] | None = None,
                 env_fn: Callable[[MultiAgent], Any] | None = None) -> None:
        self._env_kwargs = env_kwargs
        self._env_fn = env_fn
        self._envs: dict[str, Any] = {}
        self._synced: dict[str, bool] = {}

    def check(self, ep: Any) -> EpisodeCheck:
        """Replays one episode in its writer's env."""
        def skipped(message: str) -> EpisodeCheck:
            return EpisodeCheck(ep.index, ep.writer, None, ep.length, "skipped", None, message)

        env = self._envs.get(ep.writer)
        if env is None:
            if self._env_fn is not None:
                env = self._env_fn(ep.multiagent)
            else:
                factory, reason = multiagent_factory(ep.multiagent, self._env_kwargs)
                if factory is None:
                    return skipped(reason)
                env = factory()
            self._envs[ep.writer] = env
        if ep.seed is None and not self._synced.get(ep.writer, False):
            return skipped("no seeded reset before this episode in its env; its random state "
                           "is unknown")
        check = replay_multiagent_episode(ep, env)
        self._synced[ep.writer] = check.status == "match"
        return check

    def close(self) -> None:
        """Closes every env."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()
