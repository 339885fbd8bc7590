"""How a writer's env is made again for replay: from its recorded spec, or why it cannot be.

:func:`env_factory` gives a single env (a vector writer's sub-envs one by one: ``sync`` and
``async`` modes), with the recorded kwargs and wrappers (``skip_wrappers`` left out);
:func:`replay_whole_vector` replays a native vector env (make_vec's ``vector_entry_point``) whole.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..errors import ReplayError, SpecError
from ..format.envspec import MAKE_VEC_ARGUMENTS, EnvRebuilder
from ..read.reader import RecordingReader
from .compare import EpisodeCheck
from .make import make_env

__all__ = ["SKIP_WRAPPER_HINT", "env_factory", "native_vector", "replay_whole_vector"]

# Vector envs whose sub-envs are independent gymnasium.make envs (a native vector_entry_point
# env is one implementation of all sub-envs at once, with its own random streams).
REPLAYABLE_VECTORIZATION_MODES = ("sync", "async")


# Said when a recorded wrapper cannot be rebuilt: a wrapper that only adds infos can be left out.
SKIP_WRAPPER_HINT = ("; a wrapper that changes no observation, reward or action (one that only "
                     "adds infos, such as Stable-Baselines3's Monitor) can be left out of the "
                     "replay: --skip-wrapper {names}")


def _without_wrappers(spec: dict[str, Any], skip: Collection[str]) -> dict[str, Any]:
    """The recorded spec less the ``additional_wrappers`` named in ``skip`` (by name, or by the
    class of their entry point)."""
    wrappers = spec.get("additional_wrappers")
    if not skip or not isinstance(wrappers, list):
        return spec

    def skipped(w: Any) -> bool:
        if not isinstance(w, dict):
            return False
        entry = w.get("entry_point")
        cls = entry.rpartition(":")[2] if isinstance(entry, str) else None
        return w.get("name") in skip or cls in skip

    return {**spec, "additional_wrappers": [w for w in wrappers if not skipped(w)]}


def _unbuildable(spec: Mapping[str, Any]) -> list[str]:
    """Names of the recorded wrappers whose arguments were not recorded."""
    wrappers = spec.get("additional_wrappers")
    return [str(w.get("name")) for w in (wrappers if isinstance(wrappers, list) else [])
            if isinstance(w, dict) and (w.get("kwargs") is None or w.get("missing_kwargs"))]


def env_factory(manifest: Mapping[str, Any], render: bool,
                env_kwargs: Mapping[str, Any] | None = None,
                skip_wrappers: Collection[str] = ()) -> tuple[str | None,
                                                              Callable[..., Any] | None, str]:
    """How to make the env of one writer: (env_id, factory, reason when impossible).

    The env is ``gymnasium.make(env_id, **kwargs)`` with the recorded kwargs (``env_kwargs``
    fill in and override them), wrapped in the recorded ``additional_wrappers`` (see
    :mod:`gym_recorder.format.envspec`). For a vector writer, the spec's kwargs are
    ``gymnasium.make_vec``'s: its own arguments are dropped and each sub-env is replayed by a
    single env made with the rest.
    """
    env_id = manifest.get("env_id")
    if not isinstance(env_id, str):
        return None, None, "the recording has no env id (the env had no spec)"
    recorded_spec = manifest.get("env_spec")
    spec: dict[str, Any] = recorded_spec if isinstance(recorded_spec, dict) else {}
    spec = _without_wrappers(spec, skip_wrappers)
    vector = manifest.get("vector") is not None
    rebuild = EnvRebuilder(spec, env_kwargs, vector=vector)
    if rebuild.problem:
        names = _unbuildable(spec) if not vector else []
        hint = SKIP_WRAPPER_HINT.format(names=" --skip-wrapper ".join(names)) if names else ""
        return None, None, rebuild.problem + hint
    kwargs = dict(rebuild.kwargs)
    if vector:
        mode = kwargs.pop("vectorization_mode", None)
        for key in MAKE_VEC_ARGUMENTS:
            kwargs.pop(key, None)
        if mode not in REPLAYABLE_VECTORIZATION_MODES:
            return None, None, (f"recorded with vectorization_mode {mode!r}: its sub-envs "
                                f"cannot be replayed one by one")
    if render:
        kwargs["render_mode"] = "rgb_array"
    elif kwargs.get("render_mode") == "human":
        del kwargs["render_mode"]  # rendering does not change the dynamics; no window to replay
    max_steps = spec.get("max_episode_steps")
    if type(max_steps) is int and "max_episode_steps" not in kwargs:
        kwargs["max_episode_steps"] = max_steps

    def factory() -> Any:
        try:
            rebuild.ensure_registered(env_id)
        except SpecError as e:
            raise ReplayError(str(e)) from e
        env = make_env(env_id, kwargs)
        try:
            return rebuild.wrap(env)
        except SpecError as e:
            env.close()
            raise ReplayError(str(e)) from e

    return env_id, factory, ""


def native_vector(writer: Mapping[str, Any]) -> bool:
    """True for a vector writer whose env was its own vector implementation (make_vec's
    ``vector_entry_point`` mode): it is replayed whole (see :mod:`gym_recorder.replay.vector`)."""
    manifest = writer.get("manifest") or {}
    spec = manifest.get("env_spec")
    return (not writer.get("legacy") and manifest.get("vector") is not None
            and isinstance(spec, dict) and isinstance(spec.get("kwargs"), dict)
            and spec["kwargs"].get("vectorization_mode") == "vector_entry_point")


def replay_whole_vector(reader: RecordingReader, writer: Mapping[str, Any], render: bool,
                        env_kwargs: Mapping[str, Any] | None) -> dict[int, EpisodeCheck]:
    """The checks of every episode of a native vector writer, replayed whole (see
    :mod:`gym_recorder.replay.vector`), by reader index."""
    import gymnasium as gym

    from .vector import replay_vector_writer

    prefix = writer["prefix"]
    episodes = [ep for ep in (reader[j] for j in range(len(reader))) if ep.writer == prefix]
    manifest = writer["manifest"]
    env_id = manifest.get("env_id")
    rebuild = EnvRebuilder(manifest["env_spec"], env_kwargs, vector=True)

    def check(ep: Any, status: str, step: int | None, message: str, frames: list[Any] | None,
              fps: Any) -> EpisodeCheck:
        fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        return EpisodeCheck(ep.index, ep.writer, ep.sub_env, ep.length, status, step, message,
                            frames, fps)

    if rebuild.problem or not isinstance(env_id, str):
        reason = rebuild.problem or "the recording has no env id"
        return {ep.index: check(ep, "skipped", None, reason, None, None) for ep in episodes}
    kwargs = {k: v for k, v in rebuild.kwargs.items()
              if k not in MAKE_VEC_ARGUMENTS and k != "vectorization_mode"}
    if render:
        kwargs["render_mode"] = "rgb_array"
    elif kwargs.get("render_mode") == "human":
        del kwargs["render_mode"]

    def make(num_envs: int, kw: dict[str, Any]) -> Any:
        try:
            rebuild.ensure_registered(env_id)
            return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                                **kw)
        except SpecError as e:
            raise ReplayError(str(e)) from e
        except (gym.error.Error, ImportError, TypeError, ValueError) as e:
            raise ReplayError(f"cannot make vector env {env_id!r}: {e}") from e

    return replay_vector_writer(episodes, manifest, kwargs, render, make, check)
