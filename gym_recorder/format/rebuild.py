"""How replay makes a recorded env again: :class:`EnvRebuilder`, and the modules a user imports.

A recording is untrusted: wrapper classes are loaded only from modules that are already
imported (gymnasium's own wrappers, or modules named with ``--import``: :func:`import_modules`),
never from a module named only by the recording; the env's own module is imported only when its
id is not registered. Every kwarg or wrapper that cannot be rebuilt is named in
:attr:`EnvRebuilder.problem`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import SpecError
from .specjson import MODULE_NAME_RE, decode_arg

__all__ = ["EnvRebuilder", "MAKE_VEC_ARGUMENTS", "PASSIVE_VECTOR_WRAPPERS", "USER_MODULES",
           "active_vector_wrappers", "import_modules"]

# Keys of a vector env's spec kwargs that are gymnasium.make_vec's own arguments.
MAKE_VEC_ARGUMENTS = ("num_envs", "vector_kwargs", "wrappers")
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
            kwargs = {k: decode_arg(v) for k, v in kwargs.items()}
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
                kwargs = {k: decode_arg(v) for k, v in w["kwargs"].items()}
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
            if not (isinstance(module, str) and MODULE_NAME_RE.fullmatch(module)):
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
