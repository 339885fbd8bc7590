"""Recording a PettingZoo env driven by a policy, for the command line's ``record``.

:func:`multiagent_entry` tells a PettingZoo entry point (``module:function`` returning an
``AECEnv`` or a ``ParallelEnv``) from a Gymnasium env id; :func:`record_multiagent` runs it
under :class:`~gym_recorder.record.multiagent.RecordingAECWrapper` or
``RecordingParallelWrapper``, keeping the entry point and kwargs so that ``replay`` can make it
again.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .drive import RecordStatus, check_limit
from .multiagent import make_multiagent_env

__all__ = ["multiagent_entry", "record_multiagent", "random_action"]


def multiagent_entry(env_id: str) -> bool:
    """True when ``env_id`` is ``module:function`` of an importable module that has that
    callable: the env is made by calling it. (Gymnasium's ``module:EnvId`` names a registered
    id such as ``Foo-v0``, not an attribute of the module.)"""
    module, sep, attr = env_id.partition(":")
    if not sep or not module or not attr.isidentifier():
        return False
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    return callable(getattr(mod, attr, None))


def random_action(space: Any, obs: Any, info: Any) -> Any:
    """A sample of ``space``, within the env's action mask when it gives one (in the
    observation dict or the info, as PettingZoo's classic games do)."""
    mask = None
    if isinstance(obs, Mapping) and "action_mask" in obs:
        mask = obs["action_mask"]
    elif isinstance(info, Mapping) and "action_mask" in info:
        mask = info["action_mask"]
    if mask is not None:
        return space.sample(np.asarray(mask, dtype=np.int8))
    return space.sample()


def record_multiagent(entry_point: str, directory: str | os.PathLike[str], *,
                      policy: Callable[[Any, str], Any] | None = None,
                      episodes: int | None = None, steps: int | None = None,
                      seed: int | None = None, env_kwargs: Mapping[str, Any] | None = None,
                      recorder_kwargs: Mapping[str, Any] | None = None,
                      on_step: Callable[[RecordStatus], None] | None = None,
                      should_stop: Callable[[], bool] | None = None) -> RecordStatus:
    """Records a PettingZoo env driven by a policy until enough episodes or steps are done.

    As :func:`gym_recorder.replay.drive.record_env`: the first reset gets ``seed``, later ones
    none; ``steps`` counts rows (Parallel steps, AEC turns). The random policy samples each
    agent's action space (seeded with ``seed`` plus the agent's position), within its action
    mask; a finished AEC agent's turn is given None.

    Args:
        entry_point: ``module:function`` making the env (with ``env_kwargs``).
        policy: called with an agent's observation and its name, returns its action.

    Raises:
        ValueError: if neither or both of ``episodes`` and ``steps`` are given, or one is < 1.
    """
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    from ..record.multiagent import RecordingAECWrapper, RecordingParallelWrapper

    check_limit(episodes, steps)
    kwargs = dict(env_kwargs or {})
    env = make_multiagent_env(entry_point, kwargs)
    aec = isinstance(env, AECEnv)
    if not aec and not isinstance(env, ParallelEnv):
        env.close()
        raise TypeError(f"{entry_point} made a {type(env).__name__}, not a PettingZoo AECEnv or "
                        "ParallelEnv")
    wrapper = RecordingAECWrapper if aec else RecordingParallelWrapper
    try:
        rec = wrapper(env, directory, entry_point=entry_point, env_kwargs=kwargs,
                      **dict(recorder_kwargs or {}))
    except BaseException:
        env.close()
        raise
    status = RecordStatus(directory=os.fspath(directory), prefix=rec.file_prefix)
    for k, agent in enumerate(rec.possible_agents):
        rec.action_space(agent).seed(None if seed is None else seed + k)
    try:
        run = _run_aec if aec else _run_parallel
        run(rec, policy, episodes, steps, seed, status, on_step, should_stop)
    finally:
        rec.close()
    return status


def _act(rec: Any, policy: Callable[[Any, str], Any] | None, agent: str, obs: Any,
         info: Any) -> Any:
    if policy is not None:
        return policy(obs, agent)
    return random_action(rec.action_space(agent), obs, info)


def _done(status: RecordStatus, ended: bool, episodes: int | None, steps: int | None,
          on_step: Callable[..., Any] | None) -> bool:
    status.steps += 1
    status.episodes += ended
    if on_step is not None:
        on_step(status)
    if (steps is not None and status.steps >= steps) or (
            episodes is not None and status.episodes >= episodes):
        status.unfinished = int(not ended)
        return True
    return False


def _run_aec(rec: Any, policy: Any, episodes: int | None, steps: int | None, seed: int | None,
             status: RecordStatus, on_step: Any, should_stop: Any) -> None:
    rec.reset(seed=seed)
    status.unfinished = 1
    while True:
        if should_stop is not None and should_stop():
            status.interrupted = True
            return
        agent = rec.agent_selection
        obs, _, term, trunc, info = rec.last()
        rec.step(None if term or trunc else _act(rec, policy, agent, obs, info))
        ended = not rec.agents
        if _done(status, ended, episodes, steps, on_step):
            return
        if ended:
            rec.reset()


def _run_parallel(rec: Any, policy: Any, episodes: int | None, steps: int | None,
                  seed: int | None, status: RecordStatus, on_step: Any,
                  should_stop: Any) -> None:
    obs, infos = rec.reset(seed=seed)
    status.unfinished = 1
    while True:
        if should_stop is not None and should_stop():
            status.interrupted = True
            return
        actions = {a: _act(rec, policy, a, obs.get(a), infos.get(a)) for a in rec.agents}
        obs, _, _, _, infos = rec.step(actions)
        ended = not rec.agents
        if _done(status, ended, episodes, steps, on_step):
            return
        if ended:
            obs, infos = rec.reset()
