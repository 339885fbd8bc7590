"""Making the env and loading the policy that a command line names (``make_env``, ``load_policy``).

``sample_envs/...`` ids import :mod:`sample_envs` first and ``module:EnvId`` ids import ``module``
(as ``gymnasium.make`` does); a policy is ``module:callable`` or ``path/to/file.py:callable``.
Every failure is a :class:`~gym_recorder.errors.ReplayError` naming the id and the cause.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast

from ..errors import ReplayError
from ..format.envspec import USER_MODULES

__all__ = ["load_policy", "make_env"]

# Ids in this namespace are registered by importing the sample_envs package (not installed with
# gymnasium); gymnasium's own "module:EnvId" syntax works for any other package.
SAMPLE_ENVS_NAMESPACE = "sample_envs/"


def _import_env_package(env_id: str) -> None:
    if env_id.startswith(SAMPLE_ENVS_NAMESPACE):
        try:
            import sample_envs  # noqa: F401  (registers the sample env ids)
        except ImportError as e:
            raise ReplayError(f"cannot import sample_envs for {env_id!r}: {e}") from e


def make_env(env_id: str, kwargs: Mapping[str, Any] | None = None, *,
             max_episode_steps: int | None = None, num_envs: int | None = None) -> Any:
    """Makes a registered env (or, with ``num_envs``, a synchronous vector env of it).

    Args:
        env_id: a registered id; ``sample_envs/...`` ids import :mod:`sample_envs` first, and
            gymnasium's ``"module:EnvId"`` form imports ``module``.
        kwargs: keyword arguments for the env (e.g. ``{"render_mode": "rgb_array"}``).
        max_episode_steps: overrides the registered time limit when not None.
        num_envs: make a ``SyncVectorEnv`` of this many copies instead.

    Raises:
        ReplayError: if gymnasium cannot make the env; the message names the id and the cause.
    """
    import gymnasium as gym

    _import_env_package(env_id)
    module, sep, _ = env_id.partition(":")
    if sep and module not in USER_MODULES:
        USER_MODULES.append(module)  # (gymnasium imports it; recordings name it for replay)
    kwargs = dict(kwargs or {})
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    try:
        if num_envs is not None:
            return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", **kwargs)
        return gym.make(env_id, **kwargs)
    except (gym.error.Error, ImportError, TypeError, ValueError) as e:
        # (ale_py, minigrid, highway_env, ... register their ids only when imported)
        hint = (" (if a package registers it, pass --import PACKAGE, e.g. --import ale_py)"
                if isinstance(e, gym.error.UnregisteredEnv) else "")
        raise ReplayError(f"cannot make env {env_id!r}: {e}{hint}") from e


def load_policy(spec: str) -> Callable[[Any], Any]:
    """Loads a policy given as ``"module:callable"`` or ``"path/to/file.py:callable"``.

    The module is imported like ``python -m`` would: the current directory is searched first.
    ``callable`` may be dotted (``"pkg.mod:Agent.act"``). The policy is called with an
    observation and returns an action.

    Raises:
        ReplayError: if the module or the attribute cannot be found, or is not callable.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ReplayError(f"policy {spec!r} must look like 'module:callable'")
    try:
        if module_name.endswith(".py"):
            path = os.path.abspath(module_name)
            if not os.path.isfile(path):
                raise ReplayError(f"policy file {module_name!r} does not exist")
            name = "_gym_recorder_policy_" + os.path.splitext(os.path.basename(path))[0]
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ReplayError(f"cannot load policy file {module_name!r}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ReplayError:
        raise
    except Exception as e:  # noqa: BLE001  (any error while importing user code)
        raise ReplayError(f"cannot import policy module {module_name!r}: "
                          f"{type(e).__name__}: {e}") from e
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise ReplayError(f"policy module {module_name!r} has no {attr!r}") from e
    if not callable(obj):
        raise ReplayError(f"policy {spec!r} is not callable")
    return cast(Callable[[Any], Any], obj)
