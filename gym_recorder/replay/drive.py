"""Recording a registered env driven by a policy, for the command line's ``record``.

:func:`record_env` runs a policy (random by default) in a registered env under a
:class:`~gym_recorder.RecordingWrapper` (or, with ``num_envs``, a vector env under a
``RecordingVectorWrapper``).
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .run import ReplayError, make_env

if TYPE_CHECKING:
    from ..record.vector import RecordingVectorWrapper
    from ..record.wrapper import RecordingWrapper

__all__ = ["RecordStatus", "record_env", "writer_bytes"]


@dataclass
class RecordStatus:
    """Progress of :func:`record_env`.

    Attributes:
        episodes: episodes that ended (terminated or truncated) so far.
        steps: transitions recorded so far (for a vector env, summed over its sub-envs).
        directory: the recording directory.
        prefix: the writer's file prefix.
        interrupted: True if ``should_stop`` stopped the run early.
        unfinished: episodes still running when the run stopped (recorded with ``end ==
            "close"``).
    """

    episodes: int = 0
    steps: int = 0
    unfinished: int = 0
    directory: str = ""
    prefix: str = ""
    interrupted: bool = False


def writer_bytes(directory: str | os.PathLike[str], prefix: str) -> int:
    """Bytes on disk of the files of one writer (those whose name starts with its prefix)."""
    start = prefix + "."
    with os.scandir(directory) as it:
        return sum(e.stat(follow_symlinks=False).st_size for e in it
                   if e.name.startswith(start) and e.is_file(follow_symlinks=False))


# --wrapper's keyword arguments are separated by commas that start another KEY=: a value may
# hold commas itself (a JSON list).
_ARG_SPLIT = re.compile(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")
_WRAPPER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def parse_wrapper(text: str) -> tuple[str, dict[str, Any]]:
    """Parses ``NAME`` or ``NAME:KEY=VALUE,KEY=VALUE`` (``record --wrapper``).

    NAME is a wrapper of ``gymnasium.wrappers`` (``AtariPreprocessing``) or ``module.Class``;
    each VALUE is JSON when it parses as JSON (``4``, ``true``, ``[84, 84]``), else a string.

    Raises:
        ValueError: naming what is wrong.
    """
    name, _, rest = text.partition(":")
    name = name.strip()
    if not _WRAPPER_NAME.fullmatch(name):
        raise ValueError(f"{text!r}: NAME or NAME:KEY=VALUE,... expected, e.g. "
                         f"FrameStackObservation:stack_size=4")
    kwargs: dict[str, Any] = {}
    for item in _ARG_SPLIT.split(rest) if rest.strip() else []:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ValueError(f"{text!r}: {item!r} is not KEY=VALUE")
        try:
            kwargs[key] = json.loads(value)
        except ValueError:
            kwargs[key] = value
    return name, kwargs


def load_wrapper(name: str) -> Callable[..., Any]:
    """The wrapper class ``name``: one of ``gymnasium.wrappers``, or ``module.Class``.

    Raises:
        ReplayError: if there is no such wrapper class.
    """
    import gymnasium as gym

    module_name, _, cls_name = name.rpartition(".")
    try:
        module = importlib.import_module(module_name or "gymnasium.wrappers")
        cls = getattr(module, cls_name)
    except (ImportError, AttributeError) as e:
        where = module_name or "gymnasium.wrappers"
        raise ReplayError(f"no wrapper {cls_name!r} in {where} ({type(e).__name__}: {e}); "
                          f"give a name of gymnasium.wrappers or module.Class") from e
    if not (isinstance(cls, type) and issubclass(cls, gym.Wrapper)):
        raise ReplayError(f"{name} is not a gymnasium.Wrapper class")
    return cls


def apply_wrappers(env: Any, wrappers: Sequence[tuple[str, Mapping[str, Any]]]) -> Any:
    """``env`` wrapped in each wrapper in turn (the first innermost).

    Raises:
        ReplayError: if a wrapper cannot be found or made (closing ``env``).
    """
    for name, kwargs in wrappers:
        try:
            env = load_wrapper(name)(env, **kwargs)
        except ReplayError:
            env.close()
            raise
        except Exception as e:  # noqa: BLE001  (the wrapper's own error names the problem)
            env.close()
            raise ReplayError(f"wrapper {name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
                              f" cannot wrap the env: {type(e).__name__}: {e}") from e
    return env


def _make_wrapped(env_id: str, env_kwargs: Mapping[str, Any] | None, num_envs: int | None,
                  wrappers: Sequence[tuple[str, Mapping[str, Any]]]) -> Any:
    """The env to record: with wrappers, each (sub-)env made and wrapped on its own, so that
    its spec lists the wrappers and replay rebuilds them."""
    if not wrappers:
        return make_env(env_id, env_kwargs, num_envs=num_envs)
    for name, _ in wrappers:
        load_wrapper(name)  # (a bad name fails before any env is made)
    if num_envs is None:
        return apply_wrappers(make_env(env_id, env_kwargs), wrappers)
    import gymnasium as gym

    return gym.vector.SyncVectorEnv(
        [lambda: apply_wrappers(make_env(env_id, env_kwargs), wrappers)] * num_envs)


def check_limit(episodes: int | None, steps: int | None) -> int:
    """The one of ``episodes`` and ``steps`` that is given, checked.

    Raises:
        ValueError: if neither or both are given, or the one given is not an int >= 1.
    """
    if (episodes is None) == (steps is None):
        raise ValueError("give exactly one of episodes and steps")
    limit = episodes if episodes is not None else steps
    if type(limit) is not int or limit < 1:
        raise ValueError(f"episodes and steps must be integers >= 1, got {limit!r}")
    return limit


def record_env(env_id: str, directory: str | os.PathLike[str], *,
               policy: Callable[[Any], Any] | None = None,
               episodes: int | None = None, steps: int | None = None,
               seed: int | None = None, num_envs: int | None = None,
               env_kwargs: Mapping[str, Any] | None = None,
               recorder_kwargs: Mapping[str, Any] | None = None,
               on_step: Callable[[RecordStatus], None] | None = None,
               should_stop: Callable[[], bool] | None = None,
               wrappers: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> RecordStatus:
    """Records a registered env driven by a policy until enough episodes or steps are done.

    The first reset gets ``seed`` and later resets none, so that a replay reproduces the run;
    the random policy samples the action space seeded with ``seed`` as well. With ``steps``, the
    run stops after that many transitions and the open episode ends with ``end == "close"``.
    The recorder is closed in every case (also on an exception), keeping what was recorded.

    Args:
        env_id: a registered env id (see :func:`make_env`).
        directory: the recording directory.
        policy: called with an observation, returns an action; None samples the action space.
            For a vector env it gets and returns batches.
        episodes: stop once this many episodes ended (over all sub-envs of a vector env).
        steps: stop after this many transitions (for a vector env, summed over its sub-envs).
        seed: the seed of the first reset and of the random policy.
        num_envs: record a synchronous vector env of this many copies.
        env_kwargs: keyword arguments for the env.
        recorder_kwargs: keyword arguments for the recording wrapper.
        on_step: called after every step with the running status.
        should_stop: polled before every step; returning True ends the run early (for Ctrl-C).
        wrappers: ``(name, kwargs)`` of wrappers to apply, innermost first (see
            :func:`load_wrapper`); with ``num_envs``, around each sub-env.

    Returns:
        The final status.

    Raises:
        ReplayError: if the env cannot be made.
        ValueError: if neither or both of ``episodes`` and ``steps`` are given, or one is < 1.
    """
    check_limit(episodes, steps)
    env = _make_wrapped(env_id, env_kwargs, num_envs, wrappers)
    try:
        rec: RecordingWrapper | RecordingVectorWrapper
        if num_envs is None:
            from ..record.wrapper import RecordingWrapper
            rec = RecordingWrapper(env, directory, **dict(recorder_kwargs or {}))
        else:
            from ..record.vector import RecordingVectorWrapper
            rec = RecordingVectorWrapper(env, directory, **dict(recorder_kwargs or {}))
    except BaseException:
        env.close()
        raise
    status = RecordStatus(directory=os.fspath(directory), prefix=rec.file_prefix)
    try:
        if policy is None:
            rec.action_space.seed(seed)
            space = rec.action_space
            policy = lambda obs: space.sample()  # noqa: E731
        if num_envs is None:
            _run_single(rec, policy, episodes, steps, seed, status, on_step, should_stop)
        else:
            _run_vector(rec, policy, episodes, steps, seed, status, on_step, should_stop)
    finally:
        rec.close()
    return status


def _run_single(rec: Any, policy: Callable[..., Any], episodes: int | None, steps: int | None,
                seed: int | None, status: RecordStatus, on_step: Callable[..., Any] | None,
                should_stop: Callable[..., Any] | None) -> None:
    obs, _ = rec.reset(seed=seed)
    status.unfinished = 1
    while True:
        if should_stop is not None and should_stop():
            status.interrupted = True
            return
        obs, _, terminated, truncated, _ = rec.step(policy(obs))
        status.steps += 1
        ended = terminated or truncated
        status.episodes += bool(ended)
        if on_step is not None:
            on_step(status)
        if (steps is not None and status.steps >= steps) or (
                episodes is not None and status.episodes >= episodes):
            status.unfinished = int(not ended)
            return
        if ended:
            obs, _ = rec.reset()


def _run_vector(rec: Any, policy: Callable[..., Any], episodes: int | None, steps: int | None,
                seed: int | None, status: RecordStatus, on_step: Callable[..., Any] | None,
                should_stop: Callable[..., Any] | None) -> None:
    num_envs = rec.num_envs
    mode = rec.metadata.get("autoreset_mode")
    next_step = getattr(mode, "name", mode) in (None, "NEXT_STEP", "NextStep")
    resetting = np.zeros(num_envs, dtype=bool)  # sub-envs whose next step is an autoreset
    obs, _ = rec.reset(seed=seed)
    status.unfinished = num_envs
    while True:
        if should_stop is not None and should_stop():
            status.interrupted = True
            return
        obs, _, terminated, truncated, _ = rec.step(policy(obs))
        ended = np.logical_or(terminated, truncated)
        if next_step:
            ended &= ~resetting
            status.steps += int(num_envs - resetting.sum())
            resetting = ended
        else:
            status.steps += num_envs
        status.episodes += int(ended.sum())
        status.unfinished = num_envs - int(ended.sum())
        if on_step is not None:
            on_step(status)
        if (steps is not None and status.steps >= steps) or (
                episodes is not None and status.episodes >= episodes):
            return
