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
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import SpecError

__all__ = ["active_vector_wrappers", "capture_spec", "capture_vector_wrappers", "EnvRebuilder",
           "import_modules", "MAKE_VEC_ARGUMENTS", "PASSIVE_VECTOR_WRAPPERS",
           "vector_sub_env_spec"]

# Keys of a vector env's spec kwargs that are gymnasium.make_vec's own arguments.
MAKE_VEC_ARGUMENTS = ("num_envs", "vector_kwargs", "wrappers")
# How much of a left-out value's repr is kept (to name it, not to rebuild it).
REPR_CHARS = 200
_MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# Vector wrappers that change no observation, action, reward or flag (only infos, rendering):
# a recording made through them replays without them.
PASSIVE_VECTOR_WRAPPERS = (
    "gymnasium.wrappers.vector.common:RecordEpisodeStatistics",
    "gymnasium.wrappers.vector.dict_info_to_list:DictInfoToList",
    "gymnasium.wrappers.vector.rendering:HumanRendering",
    "gymnasium.wrappers.vector.rendering:RecordVideo",
)
# Modules whose wrappers replay may load without them being imported first.
_TRUSTED_MODULES = ("gymnasium.", "gym_recorder.")


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


# numpy values and spaces in kwargs are kept as tagged objects (small arrays only).
MAX_ARRAY_ELEMENTS = 4096


def _encode_arg(value: Any) -> Any:
    """A kwarg as JSON: itself, or a tagged numpy value, dtype, space or tuple (lists, tuples and
    dicts with str keys are encoded item by item); raises TypeError or ValueError otherwise."""
    import gymnasium as gym
    import numpy as np

    from .spaces import describe_space

    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf" and \
            np.size(value) <= MAX_ARRAY_ELEMENTS:
        out = {"__numpy__": value.dtype.str, "shape": list(np.shape(value)),
               "value": np.asarray(value).tolist()}
        json.dumps(out, allow_nan=False)
        return out
    if isinstance(value, gym.Space):
        desc = describe_space(value)
        if desc.get("type") == "unknown":
            raise TypeError("unknown space")
        return {"__space__": desc}
    if isinstance(value, np.dtype) or (isinstance(value, type) and
                                       issubclass(value, np.generic)):
        dtype = np.dtype(value)
        if dtype.kind not in "biufc" or dtype.hasobject:
            raise TypeError("not a numeric dtype")
        return {"__dtype__": dtype.str, "type": isinstance(value, type)}
    if isinstance(value, tuple):  # (JSON would make it a list: ReshapeObservation refuses one)
        return {"__tuple__": [_encode_arg(v) for v in value]}
    if isinstance(value, list):
        return [_encode_arg(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a dict with keys that are not str")
        encoded = {k: _encode_arg(v) for k, v in value.items()}
        if any(k in encoded for k in _TAGS):
            raise TypeError("a dict with a key that tags an encoded value")
        return encoded
    json.dumps(value, allow_nan=False)
    return value


# The keys that mark a tagged (encoded) value in recorded kwargs.
_TAGS = ("__numpy__", "__space__", "__dtype__", "__tuple__")


def _decode_arg(value: Any) -> Any:
    import numpy as np

    from . import parse_dtype
    from .spaces import build_space

    if isinstance(value, list):
        return [_decode_arg(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__numpy__" in value:
        dtype = parse_dtype(value["__numpy__"], "wrapper argument")
        arr = np.array(value.get("value"), dtype=dtype)
        return arr.reshape(value.get("shape", arr.shape)) if arr.ndim else dtype.type(arr)
    if "__space__" in value:
        return build_space(value["__space__"], "wrapper argument")
    if "__dtype__" in value:
        dtype = parse_dtype(value["__dtype__"], "wrapper argument")
        return dtype.type if value.get("type") is True else dtype
    if "__tuple__" in value:
        items = value["__tuple__"]
        if not isinstance(items, list):
            raise ValueError("__tuple__ must hold a list")
        return tuple(_decode_arg(v) for v in items)
    return {k: _decode_arg(v) for k, v in value.items()}


def _split_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the kwargs JSON can hold, {name: repr} of those it cannot)."""
    kept, missing = {}, {}
    for k, v in (kwargs or {}).items():
        try:
            if not isinstance(k, str):
                raise TypeError
            kept[k] = _encode_arg(v)
        except (TypeError, ValueError):
            missing[str(k)] = repr(v)[:REPR_CHARS]
    return kept, missing


def _entry_module(entry_point: Any) -> str | None:
    module: object
    if isinstance(entry_point, str):
        module = entry_point.partition(":")[0]
    else:
        module = getattr(entry_point, "__module__", None)
    return module if isinstance(module, str) and _MODULE_RE.fullmatch(module) else None


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
    kwargs, missing = _split_kwargs(spec.kwargs)
    wrappers = []
    for w in getattr(spec, "additional_wrappers", ()):
        if w.kwargs is None:
            wrappers.append({"name": w.name, "entry_point": w.entry_point, "kwargs": None})
            continue
        wk, wmissing = _split_kwargs(w.kwargs)
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
            kept, missing = _split_kwargs(saved)
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


def active_vector_wrappers(spec: Mapping[str, Any]) -> list[str]:
    """The recorded vector wrappers (``vector_wrappers`` of an ``env_spec``) that may change
    what the env returns or receives (not in :data:`PASSIVE_VECTOR_WRAPPERS`), as
    ``"name (entry_point)"``, innermost first."""
    wrappers = spec.get("vector_wrappers")
    return [f"{w.get('name')} ({w.get('entry_point')})" for w in
            (wrappers if isinstance(wrappers, list) else []) if not isinstance(w, dict)
            or w.get("entry_point") not in PASSIVE_VECTOR_WRAPPERS]


# Modules imported with import_modules() in this process (``--import``, or the module of a
# ``module:EnvId``): recordings made afterwards name them, so that replay can import them too.
USER_MODULES: list[str] = []


def import_modules(modules: list[str] | tuple[str, ...] | None) -> None:
    """Imports modules the user named (``--import``), the current directory first on the path.

    Recordings made later in this process list them (``imports`` in ``env_spec``).

    Raises:
        ImportError: naming the module, if one cannot be imported.
    """
    for name in modules or ():
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001  (any error while importing user code)
            raise ImportError(f"cannot import module {name!r}: {type(e).__name__}: {e}") from e
        if name not in USER_MODULES:
            USER_MODULES.append(name)


class EnvRebuilder:
    """Makes the env of one writer again, from its manifest's ``env_spec``.

    Args:
        spec: the recorded ``env_spec`` (a dict).
        env_kwargs: kwargs given by the user (``--env-kwargs``): they fill in the kwargs that
            were not recorded and override recorded ones.
        vector: True for a vector writer (its sub-envs are made one by one, each with the
            wrappers its spec lists; one
            recorded through vector wrappers other than :data:`PASSIVE_VECTOR_WRAPPERS` cannot
            be made again).

    Attributes:
        problem: why the env cannot be made ("" if it can): names every kwarg that is missing
            and every wrapper that cannot be rebuilt.
    """

    def __init__(self, spec: Mapping[str, Any], env_kwargs: Mapping[str, Any] | None = None,
                 vector: bool = False) -> None:
        self.spec = spec
        self.user_kwargs = dict(env_kwargs or {})
        kwargs = recorded if isinstance(recorded := spec.get("kwargs"), dict) else {}
        problems = []
        try:
            kwargs = {k: _decode_arg(v) for k, v in kwargs.items()}
        except Exception as e:  # noqa: BLE001  (a malformed recording)
            problems.append(f"bad recorded env kwargs ({e})")
        self.kwargs = {**kwargs, **self.user_kwargs}
        self.wrappers: list[tuple[str, str, dict[str, Any]]] = []
        recorded_missing = spec.get("missing_kwargs")
        missing = dict(recorded_missing) if isinstance(recorded_missing, dict) else {}
        if vector:
            missing.pop("num_envs", None)
            missing.pop("vector_kwargs", None)  # (the vector env's own; sub-envs are made alone)
            if "wrappers" in missing:
                problems.append(f"make_vec wrappers={missing.pop('wrappers')} were not recorded "
                                "(not JSON): the sub-envs cannot be rebuilt with them")
            active = active_vector_wrappers(spec)
            if active:
                problems.append(f"recorded through the vector wrapper(s) {', '.join(active)}, "
                                "which replay cannot rebuild (it makes the env from its spec, "
                                "without them)")
        lacking = [f"{k}={v}" for k, v in missing.items() if k not in self.user_kwargs]
        if lacking:
            problems.append(f"env kwargs not recorded (not JSON): {', '.join(lacking)}; "
                            "give them with --env-kwargs")
        # (a vector writer's spec from its sub-envs lists their wrappers: each sub-env gets them)
        wrappers = spec.get("additional_wrappers")
        for w in wrappers if isinstance(wrappers, list) else []:
            if not isinstance(w, dict):
                continue
            name, entry = str(w.get("name")), w.get("entry_point")
            if not isinstance(entry, str):
                problems.append(f"wrapper {name} cannot be rebuilt: no entry point recorded")
                continue
            if w.get("kwargs") is None:
                problems.append(f"wrapper {name} ({entry}) cannot be rebuilt: it does not "
                                "record its constructor arguments "
                                "(gymnasium.utils.RecordConstructorArgs)")
                continue
            wmissing = w.get("missing_kwargs") if isinstance(w.get("missing_kwargs"), dict) \
                else {}
            if wmissing:
                problems.append(f"wrapper {name} ({entry}) cannot be rebuilt: its arguments "
                                f"{', '.join(f'{k}={v}' for k, v in wmissing.items())} were "
                                "not recorded (not JSON)")
                continue
            try:
                kwargs = {k: _decode_arg(v) for k, v in w["kwargs"].items()}
            except Exception as e:  # noqa: BLE001  (a malformed recording)
                problems.append(f"wrapper {name} ({entry}): bad recorded arguments ({e})")
                continue
            self.wrappers.append((name, entry, kwargs))
        self.problem = "; ".join(problems)

    def ensure_registered(self, env_id: str) -> None:
        """Imports the recorded env module when the id is not registered.

        Raises:
            SpecError: if the id is still not registered.
        """
        import gymnasium as gym

        if env_id in gym.registry:
            return
        hint = "; pass --import MODULE (the package that registers it)"
        recorded_imports = self.spec.get("imports")
        imports = recorded_imports if isinstance(recorded_imports, list) else []
        for module in [self.spec.get("module")] + imports:
            if env_id in gym.registry:
                break
            if not (isinstance(module, str) and _MODULE_RE.fullmatch(module)):
                continue
            try:
                importlib.import_module(module)
            except Exception as e:  # noqa: BLE001
                raise SpecError(f"env {env_id!r} is not registered and its module {module!r} "
                                f"cannot be imported ({type(e).__name__}: {e}){hint}") from e
        if env_id not in gym.registry:
            raise SpecError(f"env {env_id!r} is not registered{hint}")

    def wrap(self, env: Any) -> Any:
        """Applies the recorded wrappers around a freshly made env, innermost first.

        Raises:
            SpecError: naming a wrapper that cannot be loaded or made.
        """
        from gymnasium.envs.registration import load_env_creator

        for name, entry, kwargs in self.wrappers:
            module = entry.partition(":")[0]
            if not (module.startswith(_TRUSTED_MODULES) or module in sys.modules):
                raise SpecError(f"wrapper {name} ({entry}) cannot be rebuilt: module {module!r} "
                                "is not imported; pass --import " + module)
            try:
                wrapper: Callable[..., Any] = load_env_creator(entry)  # a wrapper class
                env = wrapper(env, **kwargs)
            except Exception as e:  # noqa: BLE001  (the wrapper's own error is the finding)
                raise SpecError(f"wrapper {name} ({entry}) cannot be rebuilt: "
                                f"{type(e).__name__}: {e}") from e
        return env
