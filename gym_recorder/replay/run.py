"""Replaying a recording: re-run the recorded env and compare it with what was recorded.

:func:`make_env` and :func:`load_policy` make the env and load the policy the command line names
(:func:`gym_recorder.replay.drive.record_env` records with them). :func:`replay_recording` re-runs the
recorded env with the recorded seeds, reset options and actions, and compares what the env
returns with the recording (the comparison is :mod:`gym_recorder.replay.compare`): a determinism check,
and the way to render frames of a recording that holds no images (:func:`replay_frames`).

Replaying works per *stream*: the episodes of one writer and one sub-environment, in order, are
the reset/step sequence one env instance saw. Each stream gets a fresh env made with
``gymnasium.make(env_id, **kwargs)`` from the writer's manifest (``env_spec``). A stream can be
reproduced from its first seeded episode on: ``reset(seed=S)`` fixes the env's random state, and
later unseeded resets continue from it exactly as they did while recording.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, cast

import numpy as np

from .compare import EpisodeCheck, first_difference, same_float, tree_row
from .multiagent import MultiAgentStreams
from ..format.envspec import MAKE_VEC_ARGUMENTS, USER_MODULES, EnvRebuilder, import_modules
from ..errors import ReplayError, SpecError  # (ReplayError stays importable from here)
from ..read.reader import RecordingReader

__all__ = [
    "ReplayError",
    "make_env",
    "load_policy",
    "replay_recording",
    "replay_frames",
]

# Ids in this namespace are registered by importing the sample_envs package (not installed with
# gymnasium); gymnasium's own "module:EnvId" syntax works for any other package.
SAMPLE_ENVS_NAMESPACE = "sample_envs/"


# Vector envs whose sub-envs are independent gymnasium.make envs (a native vector_entry_point
# env is one implementation of all sub-envs at once, with its own random streams).
REPLAYABLE_VECTORIZATION_MODES = ("sync", "async")


# -- making envs and policies ---------------------------------------------------------------------

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


# -- replaying ---------------------------------------------------------------------------------

class _Stream:
    """The env replaying one (writer, sub_env) stream, and whether it is in step with it."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.synced = False  # the env's state follows the recording (a seeded reset happened)
        self.lost = ("no seeded reset before this episode in its env; its random state is "
                     "unknown")  # why it does not, when not synced

    def close(self) -> None:
        self.env.close()


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


def _env_factory(manifest: Mapping[str, Any], render: bool,
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


def _needed_indices(reader: RecordingReader, targets: Collection[int]) -> set[int]:
    """The episodes to replay so that ``targets`` are reproduced: back to a seeded reset."""
    last = max(targets)
    streams: dict[tuple[Any, ...], list[tuple[int, bool]]] = {}
    owner: dict[int, tuple[Any, ...]] = {}
    for i in range(last + 1):
        ep = reader[i]
        key = (ep.writer, ep.sub_env)
        streams.setdefault(key, []).append((i, ep.seed is not None and not ep.no_reset))
        owner[i] = key
    needed: set[int] = set()
    for t in targets:
        stream = streams[owner[t]]
        k = next(k for k, (i, _) in enumerate(stream) if i == t)
        j = k
        while j > 0 and not stream[j][1]:
            j -= 1
        needed.update(i for i, _ in stream[j:k + 1])
    return needed


def replay_recording(directory: str | os.PathLike[str], *, only: Collection[int] | None = None,
                     render: bool = False, env_kwargs: Mapping[str, Any] | None = None,
                     imports: Collection[str] = (),
                     skip_wrappers: Collection[str] = (),
                     on_frame: FrameSink | None = None) -> Iterator[EpisodeCheck]:
    """Re-runs the recorded env with the recorded seeds and actions; yields one check per episode.

    For each stream (a writer's episodes of one sub-env, in order) a fresh env is made with
    ``gymnasium.make(env_id, **kwargs)`` from the writer's manifest; each episode is replayed with
    ``reset(seed=episode.seed, options=episode.options)`` and its recorded actions, and the
    observations, rewards, terminations and truncations are compared exactly with the recording.
    An episode recorded without a reset (``no_reset``) continues stepping the same env. Skipped,
    with the reason: legacy gym-recording episodes and recordings without an env id (nothing to
    make), and unseeded episodes before a stream's first seeded reset or after a mismatch in
    their stream (the env's random state is unknown). Comparing an episode stops at its first
    difference (with ``render``, stepping goes on until the replayed env's episode ends).

    Args:
        directory: the recording directory.
        only: check just these episode indices (earlier episodes of their streams are replayed as
            far back as needed to reach a seeded reset, but not reported).
        render: make the env with ``render_mode="rgb_array"`` and return the frames.
        env_kwargs: env kwargs that fill in those the recording could not keep (or override).
        imports: modules to import first (packages that register envs or define wrappers).
        skip_wrappers: recorded wrappers (by name or class name) to leave out: wrappers that
            change no observation, reward or action (one that only adds infos) and cannot be
            rebuilt.
        on_frame: with ``render``, called with each frame of the reported episodes and the
            env's ``render_fps`` (or None) as it is rendered, instead of keeping the frames
            (their checks' ``frames`` are None): bounded memory for long episodes.

    Yields:
        One :class:`EpisodeCheck` per episode (per episode in ``only``), in reader order.

    Raises:
        ReplayError: if an env cannot be made.
        FormatError: if the recording is malformed.
        IndexError: if an index in ``only`` is out of range.
    """
    try:
        import_modules(list(imports))
    except ImportError as e:
        raise ReplayError(str(e)) from e
    with RecordingReader(directory) as reader:
        count = len(reader)
        targets: set[int] | None = None
        if only is not None:
            targets = {int(i) + count if int(i) < 0 else int(i) for i in only}
            bad = [i for i in targets if not 0 <= i < count]
            if bad:
                raise IndexError(f"episode {bad[0]} out of range ({count} episodes)")
            if not targets:
                return
            needed = _needed_indices(reader, targets)
            indices = sorted(needed)
        else:
            indices = list(range(count))
        writers = {w["prefix"]: w for w in reader.writers}
        factories: dict[str, tuple[Any, ...]] = {}
        streams: dict[tuple[Any, ...], _Stream] = {}
        whole: dict[int, EpisodeCheck] = {}  # checks of native vector writers, replayed whole
        agents = MultiAgentStreams(env_kwargs)  # (PettingZoo recordings)
        try:
            for i in indices:
                ep = reader[i]
                if ep.multiagent is not None:
                    check = agents.check(ep)
                elif _native_vector(writers[ep.writer]):
                    if i not in whole:
                        whole.update(_replay_whole_vector(reader, writers[ep.writer], render,
                                                          env_kwargs))
                    check = whole[i]
                else:
                    reported = targets is None or i in targets
                    check = _replay_one(ep, writers[ep.writer], factories, streams, render,
                                        env_kwargs, frozenset(skip_wrappers),
                                        on_frame if reported else None)
                if targets is None or i in targets:
                    yield check
        finally:
            for s in streams.values():
                s.close()
            agents.close()


def _native_vector(writer: Mapping[str, Any]) -> bool:
    """True for a vector writer whose env was its own vector implementation (make_vec's
    ``vector_entry_point`` mode): it is replayed whole (see :mod:`gym_recorder.replay.vector`)."""
    manifest = writer.get("manifest") or {}
    spec = manifest.get("env_spec")
    return (not writer.get("legacy") and manifest.get("vector") is not None
            and isinstance(spec, dict) and isinstance(spec.get("kwargs"), dict)
            and spec["kwargs"].get("vectorization_mode") == "vector_entry_point")


def _replay_whole_vector(reader: RecordingReader, writer: Mapping[str, Any], render: bool,
                         env_kwargs: Mapping[str, Any] | None) -> dict[int, EpisodeCheck]:
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


def _replay_one(ep: Any, writer: Mapping[str, Any], factories: dict[str, Any],
                streams: dict[tuple[Any, ...], _Stream],
                render: bool, env_kwargs: Mapping[str, Any] | None = None,
                skip_wrappers: Collection[str] = (),
                on_frame: FrameSink | None = None) -> EpisodeCheck:
    def result(status: str, step: int | None = None, message: str = "",
               frames: list[Any] | None = None) -> EpisodeCheck:
        fps = None
        if frames is not None and stream is not None:
            fps = stream.env.metadata.get("render_fps")
            fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        return EpisodeCheck(ep.index, ep.writer, ep.sub_env, ep.length, status, step, message,
                            frames if isinstance(frames, list) else None, fps)

    stream = None

    if writer.get("legacy"):
        return result("skipped", message="gym-recording (legacy) episode: no env id or seeds")
    if ep.writer not in factories:
        factories[ep.writer] = _env_factory(writer["manifest"], render, env_kwargs,
                                            skip_wrappers)
    env_id, factory, reason = factories[ep.writer]
    if factory is None:
        return result("skipped", message=reason)
    key = (ep.writer, ep.sub_env)
    stream = streams.get(key)
    if stream is None:
        stream = streams[key] = _Stream(factory())
    env = stream.env
    frames: Any = None
    if render:
        frames = [] if on_frame is None else _Streamed(on_frame, env)
    if ep.no_reset:
        if not stream.synced:
            return result("skipped", message=f"stepped on without a reset, and {stream.lost}")
        first = None  # the first observation is the previous episode's last: already compared
    else:
        if ep.seed is None and not stream.synced:
            return result("skipped", message=stream.lost)
        try:
            first, _ = env.reset(seed=ep.seed, options=ep.options)
        except Exception as e:  # noqa: BLE001  (the env's own error is the finding)
            return _lost(result("mismatch", 0, f"reset raised {type(e).__name__}: {e}"), stream)
        stream.synced = True
    if frames is not None:
        frames.append(env.render())
    mismatch: tuple[int, str] | None = None
    if first is not None:
        d = first_difference(tree_row(ep.observations, 0), first, "reset observation")
        if d is not None:
            mismatch = (0, d)
    for t in range(ep.length):
        if mismatch is not None and not render:
            break
        try:
            obs, reward, terminated, truncated, _ = env.step(tree_row(ep.actions, t))
        except Exception as e:  # noqa: BLE001
            mismatch = mismatch or (t + 1, f"step raised {type(e).__name__}: {e}")
            break
        if frames is not None:
            frames.append(env.render())
        if mismatch is not None:
            if terminated or truncated:
                break  # diverged and ended: stepping on would be outside the env's contract
            continue  # diverged, but still rendering the recorded actions
        d = first_difference(tree_row(ep.observations, t + 1), obs, "observation")
        if d is not None:
            mismatch = (t + 1, d)
        elif not same_float(float(ep.rewards[t]), reward):
            mismatch = (t + 1, f"reward {float(reward)!r}, recorded {float(ep.rewards[t])!r}")
        elif bool(terminated) != bool(ep.terminations[t]):
            mismatch = (t + 1, f"terminated {bool(terminated)}, recorded "
                               f"{bool(ep.terminations[t])}")
        elif bool(truncated) != bool(ep.truncations[t]):
            mismatch = (t + 1, f"truncated {bool(truncated)}, recorded {bool(ep.truncations[t])}")
    if mismatch is not None:
        return _lost(result("mismatch", mismatch[0], mismatch[1], frames), stream)
    return result("match", frames=frames)


# on_frame(frame, render_fps): a rendered frame handed on as it comes (see replay_recording).
FrameSink = Callable[[Any, "float | None"], None]


class _Streamed:
    """In place of a list of frames: hands each frame on with the env's render_fps."""

    def __init__(self, sink: FrameSink, env: Any) -> None:
        fps = getattr(env, "metadata", {}).get("render_fps")
        self.fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        self.sink = sink

    def append(self, frame: Any) -> None:
        self.sink(frame, self.fps)


def _lost(check: EpisodeCheck, stream: _Stream) -> EpisodeCheck:
    """Marks a stream out of step with the recording after ``check`` (a mismatch)."""
    stream.synced = False
    stream.lost = f"its env diverged from the recording in episode {check.index}"
    return check


def recorded_render_fps(manifest: Mapping[str, Any]) -> float | None:
    """The ``render_fps`` of the recorded env's class (``metadata``), or None: the rate a video
    of its image observations plays at. Imports what registers the env, as replay does; an env
    it cannot find, or that sets its rate only when made, gives None."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    env_id = manifest.get("env_id")
    spec = manifest.get("env_spec")
    if not isinstance(env_id, str):
        return None
    try:
        EnvRebuilder(spec if isinstance(spec, dict) else {}).ensure_registered(env_id)
        entry = gym.spec(env_id).entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
    except Exception:  # noqa: BLE001  (no rate known: the caller's default applies)
        return None
    fps = (getattr(creator, "metadata", None) or {}).get("render_fps")
    return float(fps) if isinstance(fps, (int, float)) and fps > 0 else None


def replay_frames(directory: str | os.PathLike[str], index: int, *,
                  env_kwargs: Mapping[str, Any] | None = None,
                  imports: Collection[str] = (),
                  skip_wrappers: Collection[str] = (),
                  on_frame: FrameSink | None = None) -> EpisodeCheck:
    """Renders one episode by replaying it with ``render_mode="rgb_array"``.

    Args:
        on_frame: called with each frame and the env's render_fps as it is rendered (the
            check's ``frames`` are then None): memory stays bounded however long the episode.

    Returns:
        The replay's check, with ``frames`` (N + 1: after the reset and after each step) and
        ``render_fps``; a mismatch means the frames diverge from the recording.

    Raises:
        ReplayError: if the episode cannot be replayed or the env renders no frames.
    """
    check = next(iter(replay_recording(directory, only=[index], render=True,
                                       env_kwargs=env_kwargs, imports=imports,
                                       skip_wrappers=skip_wrappers, on_frame=on_frame)))
    if check.status == "skipped":
        raise ReplayError(f"episode {check.index} cannot be replayed: {check.message}")
    if on_frame is not None:  # (the frames went to on_frame; a native vector env's come whole)
        for frame in check.frames or ():
            on_frame(frame, check.render_fps)
        return check
    frames = check.frames or []
    if not frames or not all(isinstance(f, np.ndarray) and f.ndim == 3 for f in frames):
        raise ReplayError(f"episode {check.index}: the env rendered no rgb_array frames")
    return check

