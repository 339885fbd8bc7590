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

:mod:`.make` makes envs and loads policies, :mod:`.factory` makes a writer's env again,
:mod:`.episode` replays one episode; this module walks a recording's streams and renders frames.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import ReplayError  # (ReplayError stays importable from here)
from ..format.envspec import EnvRebuilder, import_modules
from ..read.reader import RecordingReader
from .compare import EpisodeCheck
from .episode import FrameSink, Stream, replay_episode
from .factory import native_vector, replay_whole_vector
from .make import load_policy, make_env
from .multiagent import MultiAgentStreams

__all__ = [
    "ReplayError",
    "make_env",
    "load_policy",
    "replay_recording",
    "replay_frames",
]


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
        streams: dict[tuple[Any, ...], Stream] = {}
        whole: dict[int, EpisodeCheck] = {}  # checks of native vector writers, replayed whole
        agents = MultiAgentStreams(env_kwargs)  # (PettingZoo recordings)
        try:
            for i in indices:
                ep = reader[i]
                if ep.multiagent is not None:
                    check = agents.check(ep)
                elif native_vector(writers[ep.writer]):
                    if i not in whole:
                        whole.update(replay_whole_vector(reader, writers[ep.writer], render,
                                                         env_kwargs))
                    check = whole[i]
                else:
                    reported = targets is None or i in targets
                    check = replay_episode(ep, writers[ep.writer], factories, streams, render,
                                           env_kwargs, frozenset(skip_wrappers),
                                           on_frame if reported else None)
                if targets is None or i in targets:
                    yield check
        finally:
            for s in streams.values():
                s.close()
            agents.close()


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
