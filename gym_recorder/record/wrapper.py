"""The recording wrapper: the only place that knows Gymnasium's reset/step protocol."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym

from .buffer import StepBuffer
from ..format.envspec import capture_spec, vector_sub_env_spec
from ..errors import WriteError
from ..format.spaces import Layout, describe_space
from .session import check_settings
from .shell import RecorderShell

__all__ = ["RecordingWrapper", "DEFAULT_TARGET_BATCH_BYTES", "DEFAULT_FLUSH_INTERVAL"]

# About 5 MB per batch file: big enough that per-file costs vanish, small enough to buffer and to
# parse when a reader fetches one episode.
DEFAULT_TARGET_BATCH_BYTES = 5_000_000
# Buffered steps are committed at least this often (seconds), so a slow env loses at most this
# much on a crash.
DEFAULT_FLUSH_INTERVAL = 10.0


def resets_itself(env: gym.Env) -> bool:
    """Whether the env resets itself inside the step after an episode ends: a
    ``gymnasium.wrappers.Autoreset`` anywhere in its wrapper chain (``gym.make(...,
    autoreset=True)`` adds one)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.Autoreset):
            return True
        env = env.env
    return False


def action_names(env: gym.Env | gym.vector.VectorEnv,
                 action_space: gym.Space[Any]) -> list[str] | None:
    """The names of a Discrete action space's actions, when the env gives them (ALE's
    ``get_action_meanings()``): one string per action, else None. A vector env's sub-envs must
    all give the same names. An env whose method fails is recorded without names."""
    if not isinstance(action_space, gym.spaces.Discrete):
        return None
    try:
        if isinstance(env, gym.vector.VectorEnv):
            # Asked only of sub-envs known to have the method: an AsyncVectorEnv worker asked
            # for a missing attribute shuts itself down, and the env with it.
            call = getattr(env, "call", None)  # (Sync/AsyncVectorEnv; not VectorEnv itself)
            answers = call("get_action_meanings") if callable(call) and \
                _sub_envs_name_actions(env) else None
            names = answers[0] if answers and all(a == answers[0] for a in answers) else None
        else:
            method = getattr(env.unwrapped, "get_action_meanings", None)
            names = method() if callable(method) else None
    except Exception:  # noqa: BLE001  (an env's own failure: the names are only a nicety)
        return None
    if not isinstance(names, (list, tuple)) or len(names) != int(action_space.n) or \
            not all(isinstance(n, str) for n in names):
        return None
    return list(names)


def _sub_envs_name_actions(env: gym.vector.VectorEnv) -> bool:
    """Whether a vector env's sub-envs have ``get_action_meanings``: looked up on the sub-envs
    themselves (SyncVectorEnv) or on the class their registered entry point names."""
    subs = getattr(env, "envs", None)
    if isinstance(subs, (list, tuple)) and subs:
        return all(callable(getattr(e.unwrapped, "get_action_meanings", None)) for e in subs)
    spec = getattr(env, "spec", None) or vector_sub_env_spec(env)
    entry = getattr(spec, "entry_point", None)
    if isinstance(entry, str) and ":" in entry:
        module, _, name = entry.partition(":")
        try:
            target = getattr(importlib.import_module(module), name)
        except Exception:  # noqa: BLE001  (names are a nicety: an entry point we cannot see)
            return False
        return callable(getattr(target, "get_action_meanings", None))
    return callable(getattr(entry, "get_action_meanings", None))


def env_header(env: gym.Env | gym.vector.VectorEnv, observation_space: gym.Space[Any],
               action_space: gym.Space[Any]) -> dict[str, Any]:
    """The manifest fields that describe the environment: id, spec, spaces, action names."""
    spec = getattr(env, "spec", None)
    if spec is None and isinstance(env, gym.vector.VectorEnv):
        spec = vector_sub_env_spec(env)  # (built from env functions: its sub-envs' spec)
    header = {"env_id": spec.id if spec is not None else None, "env_spec": capture_spec(spec),
              "observation_space": describe_space(observation_space),
              "action_space": describe_space(action_space), "vector": None}
    names = action_names(env, action_space)
    if names is not None:  # (absent, not null, when the env has none: older files look alike)
        header["action_names"] = names
    return header


class RecordingWrapper(RecorderShell, gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Records every reset and step of an environment into a directory, in batches.

    ``reset`` and ``step`` return exactly what the inner environment returns. Observations,
    actions and infos are copied when recorded, so environments may reuse their buffers. Batches
    are written by a background thread; ``flush()`` and ``close()`` wait for them.

    Example:
        >>> import gymnasium as gym
        >>> from gym_recorder import RecordingWrapper, RecordingReader
        >>> with RecordingWrapper(gym.make("CartPole-v1"), tmp_dir) as env:
        ...     obs, info = env.reset(seed=0)
        ...     obs, reward, terminated, truncated, info = env.step(0)
        >>> with RecordingReader(tmp_dir) as reader:
        ...     reader[0].actions
        array([0])

    Args:
        env: the environment to record.
        directory: the recording directory (created if missing); relative paths work.
        file_prefix: this writer's file prefix; None (the default) picks a unique one, so that
            many writers can share a directory.
        target_batch_bytes: aim for batch files of about this many bytes; this also bounds the
            memory the recorder holds.
        record_infos: record the reset and step info dicts.
        info_filter: called with each non-empty info dict, returns the dict to record (e.g. to
            leave out values the format cannot store).
        flush_interval: commit buffered steps at least every this many seconds (checked at each
            reset, and while stepping about 100 times an interval: every step of a slow env);
            None for no time bound.
        A step after the episode ended, without reset(), is recorded as the first step of a
        new episode marked ``no_reset`` (it starts from the ended one's last observation);
        under ``gymnasium.wrappers.Autoreset`` it is the next episode's reset instead.
        fsync: make every batch durable (fsync) before committing it, so it survives a power
            loss; otherwise data is fsynced at ``flush()`` and ``close()``.
        compression: None (raw arrays, format version 1), ``"zstd"`` or a
            :class:`~gym_recorder.Zstd` with options: leaves of at least 64 bytes a row are
            stored zstd-compressed in chunks of rows (lossless, random access; format version
            2; needs the ``zstd`` extra).
        metadata: who or what produced the recording, as plain JSON (e.g. ``{"algorithm_name":
            "PPO", "author": "me", "notes": "..."}``): the manifest's ``metadata``, shown by
            ``gym-recorder info`` and exported to Minari and Parquet.

    Raises:
        FileExistsError: if ``file_prefix`` is already used in the directory.
    """

    _name = "RecordingWrapper"

    def __init__(self, env: gym.Env, directory: str | os.PathLike[str], *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
                 fsync: bool = False, compression: Any = None,
                 metadata: dict[str, Any] | None = None) -> None:
        codec, metadata = check_settings(directory, target_batch_bytes, flush_interval,
                                         compression, metadata)
        # gym.make(env.spec) rebuilds the recorder as a new writer (file_prefix: a new one).
        gym.utils.RecordConstructorArgs.__init__(
            self, _disable_deepcopy=True, directory=os.path.abspath(os.fspath(directory)),
            file_prefix=None,
            target_batch_bytes=target_batch_bytes, record_infos=record_infos,
            info_filter=info_filter, flush_interval=flush_interval, fsync=fsync,
            compression=compression, metadata=metadata)
        super().__init__(env)
        self._self_resets = resets_itself(env)
        self._start_shell(directory, file_prefix, target_batch_bytes, record_infos, info_filter,
                          flush_interval, fsync, compression=codec,
                          metadata=metadata)

    def _header(self) -> dict[str, Any]:
        return env_header(self.env, self.env.observation_space, self.env.action_space)

    def _new_buffer(self, obs_layout: Layout, act_layout: Layout) -> tuple[
            StepBuffer, Callable[[str], None]]:
        settings = self._settings
        buffer = StepBuffer(obs_layout, act_layout, settings["target_batch_bytes"],
                            record_infos=settings["record_infos"],
                            info_filter=settings["info_filter"])
        return buffer, buffer.end_episode

    def _open_episodes(self) -> bool:
        return self._ready and self._buffer.episode_open

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the environment and starts a new recorded episode.

        An episode still open ends with ``end == "reset"`` (an early reset).
        """
        self._check_open("reset")
        obs, info = self.env.reset(seed=seed, options=options)
        buffer = self._buffer
        buffer.end_episode("reset")
        error = None
        if buffer.full or self._session.due():
            try:
                self._session.commit()
            except WriteError as e:
                error = e  # the batch is kept; record the new episode, raise at the next call
        buffer.start_episode(obs, info, None if seed is None else int(seed), options)
        self._ready = True
        self._paused = False
        if error is not None:
            self._defer(error)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the environment and records the transition."""
        if not self._ready and self._not_ready("call reset() before step() on a "
                                               "RecordingWrapper"):
            return self.env.step(action)  # (a copy or a forked child, until its reset())
        result = self.env.step(action)
        buffer = self._buffer
        if buffer._open_episode is None:  # (not the property: this runs every step)
            # The episode ended and the env was stepped on without reset().
            if buffer.full or self._session.due():
                self._commit_deferring()
            if self._self_resets:
                # gymnasium.wrappers.Autoreset: this step was the next episode's reset.
                buffer.start_episode(result[0], result[4], None, None)
            else:
                # The env went on from its last observation: a transition like any other, the
                # first of an episode marked no_reset (nothing the env returned is dropped).
                buffer.add_step(action, *result)
                self._batch_or_clock()
        elif buffer.record_step(action, result):
            self._batch_or_clock()
        return result

    def _batch_or_clock(self) -> None:
        """The buffer reported a step: commit when the batch is full or the flush interval has
        passed, and say when to look at the clock next."""
        session = self._session
        if self._buffer.full or session.due():
            self._commit_deferring()
        self._buffer.check_after(session.clock_spacing())

    def close(self) -> None:
        """Ends the open episode (``end == "close"``), writes everything, closes the env.

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        self._close_recorder()
        if not self._env_closed:
            self._env_closed = True
            super().close()

    def __enter__(self) -> RecordingWrapper:
        return self
