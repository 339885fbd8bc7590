"""The env a Minari export gets: made again from the recording's spec, or why not.

Minari makes a dataset's env with ``gymnasium.make`` from ``EnvSpec.to_json()``: :func:`env_for`
rebuilds the recorded env (kwargs, time limit, wrappers; a vector writer's sub-env) and checks
that it has the recording's spaces and that its spec survives that JSON, else names why the
dataset gets the spaces only.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import replace
from typing import Any

import gymnasium as gym

from ..errors import SpaceKeptAsWarning, SpecError
from ..format.envspec import (MAKE_VEC_ARGUMENTS, EnvRebuilder, active_vector_wrappers,
                              fill_env_only_wrappers)
from ..format.spaces import describe_space
from ..training.selection import SelectionSource

__all__ = ["env_for", "import_env_module"]


def import_env_module(env_id: str | None) -> None:
    """Imports what registers ``env_id``: ``sample_envs`` for ``sample_envs/...`` ids, ``module``
    for ``module:EnvId`` ids (as ``gymnasium.make`` would), so that Minari can make the env."""
    if not env_id:
        return
    if env_id.startswith("sample_envs/"):
        importlib.import_module("sample_envs")
    elif ":" in env_id:
        importlib.import_module(env_id.split(":", 1)[0])


def env_for(source: SelectionSource) -> tuple[Any, str | None]:
    """The env of the selection's writer for Minari (which makes it with ``gymnasium.make``), and
    None; or None and why not (None too when the env id is not registered here): the dataset
    then gets the spaces only."""
    env_id = source.env_id
    if not env_id:
        return None, None
    import_env_module(env_id)
    raw = source.manifest.get("env_spec")
    recorded: dict[str, Any] = raw if isinstance(raw, dict) else {}
    vector = source.manifest.get("vector") is not None
    rebuild = EnvRebuilder(recorded, vector=vector)
    try:  # (ale_py, minigrid, highway_env, ... register their ids when imported: as replay does,
        # the recorded entry point's module and imports are imported)
        rebuild.ensure_registered(env_id)
        spec = gym.spec(env_id)
    except (SpecError, gym.error.Error) as e:
        return None, f"{str(e).splitlines()[0]}; the dataset has the spaces only"
    kwargs = dict(rebuild.kwargs)
    if vector:  # the spec of a make_vec env holds make_vec's arguments: the sub-env has the rest
        mode = kwargs.pop("vectorization_mode", None)
        wrapped = "wrappers" in kwargs
        for key in MAKE_VEC_ARGUMENTS:
            kwargs.pop(key, None)
        if mode == "vector_entry_point":
            kwargs.pop("max_episode_steps", None)  # (make_vec passes it to the vector env)
        if wrapped:
            return None, ("the sub-envs were wrapped by make_vec(wrappers=...), which a spec "
                          "cannot hold; the dataset has the spaces only")
        active = active_vector_wrappers(recorded)
        if active:
            return None, (f"recorded through the vector wrapper(s) {', '.join(active)}, which "
                          "a sub-env's spec cannot hold; the dataset has the spaces only")
    spec = replace(spec, kwargs={**spec.kwargs, **kwargs})
    steps = recorded.get("max_episode_steps", spec.max_episode_steps)
    if steps is None or (type(steps) is int and steps > 0):  # the recorded time limit
        spec = replace(spec, max_episode_steps=steps)
    made = None
    try:  # the recorded wrappers too: the env's spec then lists them (additional_wrappers)
        made = gym.make(spec)
        env = rebuild.wrap(made)
    except Exception as e:  # noqa: BLE001  (an env's own error: export without the env)
        if made is not None:
            made.close()
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        return None, (f"gymnasium.make({env_id!r}) with the recorded kwargs and wrappers failed "
                      f"({why}); the dataset has the spaces only")
    if not _same_spaces(env, source):
        env.close()  # (a wrapper that was not recorded changed them: another env than recorded)
        why = f" ({rebuild.problem})" if rebuild.problem else ""
        return None, (f"the env made again from the recorded spec has other spaces than the "
                      f"recording{why}; the dataset has the spaces only")
    if rebuild.problem:  # (same spaces, but a wrapper or kwarg is missing: another env)
        env.close()
        return None, (f"the recorded spec cannot make the recorded env again "
                      f"({rebuild.problem}); the dataset has the spaces only")
    why = _json_spec_problem(env, source)
    if why:
        env.close()
        return None, (f"Minari keeps the env spec as gymnasium's EnvSpec.to_json(), which "
                      f"cannot hold it ({why}); the dataset has the spaces only")
    return env, None


def _same_spaces(env: Any, source: SelectionSource) -> bool:
    """True if the env's spaces are the recording's, as the format describes them (a space
    recorded as a kind it is not, minigrid's MissionSpace as Text, is the same)."""
    if (env.observation_space, env.action_space) == (source.observation_space,
                                                     source.action_space):
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpaceKeptAsWarning)
        return (describe_space(env.observation_space) == source.manifest.get("observation_space")
                and describe_space(env.action_space) == source.manifest.get("action_space"))


def _json_spec_problem(env: Any, source: SelectionSource) -> str:
    """Why the env's spec does not survive Minari's JSON (``EnvSpec.to_json()`` and
    ``from_json()``, then ``gymnasium.make``, with the recording's spaces), or "" if it does.

    The kwargs JSON changes (numpy values, dtypes: not JSON at all; tuples: lists) are named
    by wrapper."""
    from gymnasium.envs.registration import EnvSpec

    spec = fill_env_only_wrappers(env.spec)
    try:
        again = gym.make(EnvSpec.from_json(spec.to_json()))
    except Exception as e:  # noqa: BLE001  (not JSON, or the wrapper refuses what JSON gave)
        failure = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        same = _same_spaces(again, source)
        again.close()
        if same:
            return ""
        failure = "the env made from it has other spaces than the recording"
    changed = [w.name for w in spec.additional_wrappers if not _survives_json(w.kwargs)]
    if not _survives_json(spec.kwargs):
        changed.insert(0, "the env's kwargs")
    named = f"; arguments JSON changes: {', '.join(changed)}" if changed else ""
    return f"{failure}{named}"


def _survives_json(value: Any) -> bool:
    """True if ``value`` comes back from JSON as it was (no tuples, numpy values, objects)."""
    import json

    try:
        back = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return False
    return _same_json(back, value)


def _same_json(back: Any, value: Any) -> bool:
    if type(back) is not type(value):  # (np.float64, a float subclass, comes back a float)
        return False
    if isinstance(value, dict):
        return back.keys() == value.keys() and all(_same_json(back[k], v)
                                                   for k, v in value.items())
    if isinstance(value, list):
        return len(back) == len(value) and all(_same_json(b, v) for b, v in zip(back, value))
    return bool(back == value)
