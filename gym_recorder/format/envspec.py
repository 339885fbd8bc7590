"""The env's spec in a recording: what is kept of it, and how replay makes the env again.

The writer keeps the env's :class:`gymnasium.envs.registration.EnvSpec` as Gymnasium serialises
it (``EnvSpec.to_json()``: id, kwargs, ``max_episode_steps``, the ``additional_wrappers`` applied
around the registered env, ...). When some values are not JSON (a callable kwarg, a wrapper
argument that is an object), everything else is kept, and the names (with a short ``repr``) of
what was left out are listed under ``missing_kwargs``. The module that provides the env's entry
point is kept too (``module``), so that an env registered by another package can be made again.

Replay makes the env with ``gymnasium.make(id, **kwargs)`` and applies the recorded wrappers in
order. A recording is untrusted: wrapper classes are loaded only from modules that are already
imported (gymnasium's own wrappers, or modules named with ``--import``), never from a module
named only by the recording; the env's own module is imported only when its id is not registered.

The spec's values are made JSON by :mod:`.specjson`; the env is made again by :mod:`.rebuild`
(:class:`EnvRebuilder`, :func:`import_modules`, re-exported here with its constants).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .rebuild import (MAKE_VEC_ARGUMENTS, PASSIVE_VECTOR_WRAPPERS, USER_MODULES, EnvRebuilder,
                      active_vector_wrappers, import_modules)
from .specjson import MODULE_NAME_RE, split_kwargs

__all__ = ["active_vector_wrappers", "capture_spec", "capture_vector_wrappers", "EnvRebuilder",
           "import_modules", "MAKE_VEC_ARGUMENTS", "PASSIVE_VECTOR_WRAPPERS", "USER_MODULES",
           "vector_sub_env_spec"]


def _entry_module(entry_point: Any) -> str | None:
    module: object
    if isinstance(entry_point, str):
        module = entry_point.partition(":")[0]
    else:
        module = getattr(entry_point, "__module__", None)
    return module if isinstance(module, str) and MODULE_NAME_RE.fullmatch(module) else None


def _takes_only_env(entry_point: Any) -> bool:
    """True for a wrapper class (already imported) whose ``__init__`` takes ``env`` and nothing
    else (e.g. minigrid's ``ImgObsWrapper``): it has no arguments to record, so it can be
    rebuilt though it is not a ``RecordConstructorArgs``."""
    import inspect

    if not isinstance(entry_point, str) or ":" not in entry_point:
        return False
    module, _, name = entry_point.partition(":")
    obj: Any = sys.modules.get(module)
    for part in name.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type):
        return False
    try:
        params = list(inspect.signature(obj).parameters.values())  # (__init__'s, no self)
    except (TypeError, ValueError):
        return False
    return len(params) == 1 and params[0].name == "env" and \
        params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def fill_env_only_wrappers(spec: Any) -> Any:
    """``spec`` (an ``EnvSpec``) with ``kwargs={}`` for each wrapper whose ``__init__`` takes only
    ``env`` and is listed with ``kwargs=None`` (``gymnasium.make(spec)`` refuses those)."""
    from dataclasses import replace

    wrappers = tuple(replace(w, kwargs={}) if w.kwargs is None and
                     _takes_only_env(w.entry_point) else w for w in spec.additional_wrappers)
    return replace(spec, additional_wrappers=wrappers)


def capture_spec(spec: Any) -> dict[str, Any] | None:
    """The manifest's ``env_spec`` for an env's spec (None without a spec).

    Keys: ``id``, ``kwargs``, ``max_episode_steps`` (as before), the rest of
    ``EnvSpec.to_json()`` when it works, ``additional_wrappers`` (``name``, ``entry_point``,
    ``kwargs``: null for a wrapper that does not record its arguments, ``{}`` for one whose
    ``__init__`` takes only ``env``), ``missing_kwargs``
    (env kwargs left out, name to repr), and ``module`` (the entry point's module). The env's
    and the wrappers' kwargs are encoded by this module (numpy values, dtypes, spaces and tuples
    tagged), not as ``to_json()`` has them.
    """
    if spec is None:
        return None
    out: dict[str, Any] | None = None
    try:
        out = json.loads(spec.to_json())
    except Exception:  # noqa: BLE001  (gymnasium raises ValueError, or json a TypeError)
        out = None
    # The kwargs are encoded here in either case: to_json() makes tuples lists (which
    # ReshapeObservation refuses) and cannot hold numpy values, dtypes or spaces.
    kwargs, missing = split_kwargs(spec.kwargs)
    wrappers = []
    for w in getattr(spec, "additional_wrappers", ()):
        if w.kwargs is None:
            wrappers.append({"name": w.name, "entry_point": w.entry_point, "kwargs": None})
            continue
        wk, wmissing = split_kwargs(w.kwargs)
        item = {"name": w.name, "entry_point": w.entry_point, "kwargs": wk}
        if wmissing:
            item["missing_kwargs"] = wmissing
        wrappers.append(item)
    if out is None or not isinstance(out, dict):
        out = {"id": spec.id,
               "entry_point": spec.entry_point if isinstance(spec.entry_point, str) else None,
               "max_episode_steps": spec.max_episode_steps}
    out.pop("missing_kwargs", None)
    out["kwargs"] = kwargs
    out["additional_wrappers"] = wrappers
    if missing:
        out["missing_kwargs"] = missing
    for w in out.get("additional_wrappers") or ():
        if isinstance(w, dict) and w.get("kwargs") is None and _takes_only_env(w.get("entry_point")):
            w["kwargs"] = {}  # nothing to record: wrapper(env) rebuilds it exactly
    out["module"] = _entry_module(spec.entry_point)
    if USER_MODULES:
        out["imports"] = list(USER_MODULES)
    return out


def capture_vector_wrappers(env: Any) -> list[dict[str, Any]]:
    """The vector wrappers (``gymnasium.vector.VectorWrapper``) around a vector env, innermost
    first.

    A vector env's spec is its innermost env's (``VectorWrapper.spec`` passes it on), so the
    wrappers applied after ``gymnasium.make_vec`` are listed here: each as ``name``,
    ``entry_point`` (``module:qualname``) and ``kwargs`` (null for a wrapper that does not
    record its constructor arguments; those JSON cannot hold are named in ``missing_kwargs``).

    Args:
        env: the vector env the recorder wraps (its outermost wrapper, or the env itself).

    Returns:
        One dict per wrapper, from the one next to the env outwards (empty: no wrapper).
    """
    from gymnasium.vector import VectorWrapper

    out: list[dict[str, Any]] = []
    while isinstance(env, VectorWrapper):
        cls = type(env)
        item: dict[str, Any] = {"name": cls.__name__,
                                "entry_point": f"{cls.__module__}:{cls.__qualname__}",
                                "kwargs": None}
        saved = getattr(env, "_saved_kwargs", None)
        if isinstance(saved, dict):
            kept, missing = split_kwargs(saved)
            item["kwargs"] = kept
            if missing:
                item["missing_kwargs"] = missing
        out.append(item)
        env = env.env
    out.reverse()
    return out


def vector_sub_env_spec(env: Any) -> Any:
    """The spec to record for a vector env that has none of its own (a ``SyncVectorEnv`` or
    ``AsyncVectorEnv`` built from env functions, as CleanRL and many training scripts do): its
    sub-envs' spec when they all have the same one, with ``vectorization_mode`` ``"sync"`` or
    ``"async"`` added to its kwargs, as ``gymnasium.make_vec`` records it; else None.

    Args:
        env: the vector env the recorder wraps (its outermost wrapper, or the env itself).
    """
    import dataclasses

    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    base = getattr(env, "unwrapped", env)
    try:
        if isinstance(base, SyncVectorEnv):
            specs, mode = [sub.spec for sub in base.envs], "sync"
        elif isinstance(base, AsyncVectorEnv):
            specs, mode = list(base.get_attr("spec")), "async"
        else:
            return None
    except Exception:  # noqa: BLE001  (a closed or busy AsyncVectorEnv: record no spec)
        return None
    first = specs[0] if specs else None
    if first is None or any(other != first for other in specs[1:]):
        return None
    return dataclasses.replace(first, kwargs={**first.kwargs, "vectorization_mode": mode})
