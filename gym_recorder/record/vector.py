"""Recording vector environments (``gymnasium.vector``): every sub-environment's episodes.

:class:`RecordingVectorWrapper` records each sub-environment's episodes as ordinary episodes of the
format (see :mod:`gym_recorder.format`), each entry tagged with its ``sub_env``; the manifest says
``"vector": {"num_envs", "autoreset_mode"}``. The autoreset mode is read from the env's
``metadata["autoreset_mode"]`` (Gymnasium's default, NEXT_STEP, when absent):

- ``NextStep``: the step after a sub-env's episode ended is a *reset step*: the action is ignored,
  the returned observation and info are the next episode's reset observation and reset info. It
  is not a transition and is not recorded as one.
- ``SameStep``: when a sub-env's episode ends, its last observation is ``info["final_obs"][i]``
  and its last info ``info["final_info"]`` (for sub-env ``i``); the returned observation and the
  rest of the info already belong to the next episode (its reset observation and reset info).
- ``Disabled``: sub-envs are reset by ``reset(options={"reset_mask": mask})``; only the masked
  sub-envs start new episodes (one still open ends with ``end == "reset"``). A sub-env stepped
  after its episode ended without such a reset starts an episode marked ``no_reset``.

Recording is batched: :class:`~gym_recorder.record.vector_buffer.VectorStepBuffer` buffers the vector
steps (see there); this module is the Gymnasium side.

Vector info dicts (arrays of ``num_envs`` values with ``_key`` presence masks, nested dicts
likewise) are split into one info dict per sub-env by :func:`unstack_info`. An info that is
already a list of one dict per sub-env (``gymnasium.wrappers.vector.DictInfoToList`` inside the
recorder) is recorded as it is; in ``SameStep`` mode each dict's ``final_obs`` and
``final_info`` are its sub-env's final observation and info.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeGuard

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from ..format.envspec import capture_vector_wrappers
from ..errors import UnsupportedValueError
from ..format.spaces import Layout
from .session import check_settings
from .shell import RecorderShell
from .vector_buffer import DISABLED, NEXT_STEP, SAME_STEP, VectorStepBuffer
from .wrapper import DEFAULT_FLUSH_INTERVAL, DEFAULT_TARGET_BATCH_BYTES, env_header

__all__ = ["RecordingVectorWrapper", "VectorStepBuffer", "unstack_info", "NEXT_STEP",
           "SAME_STEP", "DISABLED"]

# Info keys that SAME_STEP vector envs add for the sub-envs whose episode ended.
_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


# ---------------------------------------------------------------------------------------------
# Vector infos


def _is_mask(value: Any, num_envs: int) -> TypeGuard[np.ndarray]:
    return type(value) is np.ndarray and value.dtype == np.bool_ and value.shape == (num_envs,)


def unstack_info(info: dict[str, Any], num_envs: int, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Splits a vector env's info dict into one info dict per sub-environment.

    Follows Gymnasium's convention: a key ``k`` holds an array of ``num_envs`` values and ``_k``
    a boolean mask of the sub-envs that had it (no mask: all had it); a dict value is itself such
    an info dict. Sub-env ``i`` gets ``value[i]`` (a numpy scalar or array row for numeric
    arrays, the object for object arrays); a value that is not a per-sub-env sequence is given
    to every sub-env that has the key.

    Args:
        info: the vector info dict.
        num_envs: the number of sub-environments.
        skip: top-level keys (and their masks) to leave out.

    Returns:
        ``num_envs`` dicts (empty for sub-envs without info).
    """
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key in skip:
            continue
        if type(key) is str and key[:1] == "_" and key[1:] in info and _is_mask(value, num_envs):
            continue  # the presence mask of key[1:]
        mask = info.get("_" + key) if type(key) is str else None
        present: Any = (range(num_envs) if not _is_mask(mask, num_envs)
                        else [i for i, has in enumerate(mask.tolist()) if has])
        if isinstance(value, dict):
            items: Any = unstack_info(value, num_envs)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == num_envs:
            items = list(value)  # (numpy scalars, or rows, as value[i] gives them: at C speed)
        elif type(value) in (list, tuple) and len(value) == num_envs:
            items = value
        else:
            for i in present:
                out[i][key] = value
            continue
        for i in present:
            out[i][key] = items[i]
    return out


# ---------------------------------------------------------------------------------------------
# The wrapper


def _autoreset_mode(env: VectorEnv) -> str:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return AutoresetMode(mode).value
    except ValueError:
        raise ValueError(f"the vector env's metadata['autoreset_mode'] is {mode!r}, not one of "
                         f"{[m.value for m in AutoresetMode]}") from None


def _seeds(seed: Any, num_envs: int) -> list[int | None]:
    if seed is None:
        return [None] * num_envs
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        return [int(seed) + i for i in range(num_envs)]
    return [None if s is None else int(s) for s in seed]


class RecordingVectorWrapper(RecorderShell, VectorWrapper):
    """Records every sub-environment's episodes of a vector environment, in any autoreset mode.

    ``reset`` and ``step`` return exactly what the inner vector env returns. Each sub-env's
    episodes are recorded as ordinary episodes (read them with
    :class:`~gym_recorder.RecordingReader`; ``episode.sub_env`` tells which sub-env), with the
    single-env observation and action spaces. The autoreset mode comes from the env's metadata
    (see :mod:`gym_recorder.record.vector`). Seeds: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i``,
    ``reset(seed=[...])`` each with its own; autoresets have none. Options: what each sub-env
    received (the options without ``"reset_mask"``).

    Example:
        >>> import gymnasium as gym
        >>> from gym_recorder import RecordingVectorWrapper, RecordingReader
        >>> envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
        >>> with RecordingVectorWrapper(envs, tmp_dir) as envs:
        ...     obs, info = envs.reset(seed=0)
        ...     for _ in range(100):
        ...         obs, rewards, terminations, truncations, info = envs.step(
        ...             envs.action_space.sample())
        >>> with RecordingReader(tmp_dir) as reader:
        ...     [ep.sub_env for ep in reader][:4]
        [0, 1, 2, 3]

    Args:
        env: the vector environment to record.
        directory: the recording directory (created if missing); relative paths work.
        file_prefix: this writer's file prefix; None (the default) picks a unique one.
        target_batch_bytes: aim for batch files of about this many bytes; this also bounds the
            memory the recorder holds.
        record_infos: record the reset and step infos (split per sub-env).
        info_filter: called with each non-empty per-sub-env info dict, returns the dict to record.
        flush_interval: commit buffered steps at least every this many seconds (checked at each
            step and reset); None for no time bound.
        fsync: make every batch durable (fsync) before committing it.
        compression: None (raw), ``"zstd"`` or a :class:`~gym_recorder.Zstd` with options
            (as :class:`RecordingWrapper`'s).
        metadata: who or what produced the recording, as plain JSON (as for
            :class:`~gym_recorder.RecordingWrapper`).

    Raises:
        TypeError: if ``env`` is not a ``gymnasium.vector.VectorEnv``.
        ValueError: if the env's ``metadata["autoreset_mode"]`` is unknown.
        FileExistsError: if ``file_prefix`` is already used in the directory.
    """

    _name = "RecordingVectorWrapper"

    def __init__(self, env: VectorEnv, directory: str | os.PathLike[str], *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL,
                 fsync: bool = False, compression: Any = None,
                 metadata: dict[str, Any] | None = None) -> None:
        codec, metadata = check_settings(directory, target_batch_bytes, flush_interval,
                                         compression, metadata)
        if not isinstance(env, VectorEnv):
            raise TypeError(f"env must be a gymnasium.vector.VectorEnv, got {type(env).__name__} "
                            "(use RecordingWrapper for a single env)")
        super().__init__(env)
        self._mode = _autoreset_mode(env)
        self._n = int(env.num_envs)
        self._record_infos = record_infos
        self._start_shell(directory, file_prefix, target_batch_bytes, record_infos, info_filter,
                          flush_interval, fsync, compression=codec, metadata=metadata)

    def _header(self) -> dict[str, Any]:
        env = self.env
        header = env_header(env, env.single_observation_space, env.single_action_space)
        if isinstance(header["env_spec"], dict):  # (the spec is the innermost env's)
            header["env_spec"]["vector_wrappers"] = capture_vector_wrappers(env)
        header["vector"] = {"num_envs": self._n, "autoreset_mode": self._mode}
        return header

    def _new_buffer(self, obs_layout: Layout, act_layout: Layout) -> tuple[
            VectorStepBuffer, Callable[[str], None]]:
        settings = self._settings
        buffer = VectorStepBuffer(obs_layout, act_layout, self._n, self._mode,
                                  settings["target_batch_bytes"],
                                  record_infos=settings["record_infos"],
                                  info_filter=settings["info_filter"])
        return buffer, buffer.end_episodes

    def _on_restart(self) -> None:
        self._ever_reset = np.zeros(self._n, np.bool_)  # sub-envs reset since the recorder started

    @property
    def autoreset_mode(self) -> str:
        """The env's autoreset mode: ``"NextStep"``, ``"SameStep"`` or ``"Disabled"``."""
        return self._mode

    def _split(self, info: dict[str, Any] | list[dict[str, Any]],
               skip: tuple[str, ...] = ()) -> dict[int, dict[str, Any]]:
        if not info or not self._record_infos:
            return {}
        if isinstance(info, list):  # already one dict per sub-env (DictInfoToList)
            return {i: d for i, d in enumerate(self._info_list(info)) if d}
        return {i: d for i, d in enumerate(unstack_info(info, self._n, skip)) if d}

    def _info_list(self, info: list[Any]) -> list[dict[str, Any]]:
        """A list info's dicts (one per sub-env, as ``DictInfoToList`` gives), checked.

        Raises:
            UnsupportedValueError: if it is not ``num_envs`` dicts.
        """
        if len(info) != self._n or not all(isinstance(d, dict) for d in info):
            raise UnsupportedValueError(
                f"info: a list of {len(info)} {sorted({type(d).__name__ for d in info})}, "
                f"expected a dict or a list of {self._n} dicts (one per sub-env)")
        return info

    def _same_step_finals(self, info: dict[str, Any] | list[dict[str, Any]]) -> tuple[
            dict[int, Any] | None, dict[int, dict[str, Any]] | None, dict[int, dict[str, Any]]]:
        """A SAME_STEP step info: (final observations, final infos, the rest split per sub-env).

        The info is a vector info dict (``final_obs`` and ``final_info`` with their ``_`` masks)
        or, from ``DictInfoToList``, one dict per sub-env holding its own ``final_obs`` and
        ``final_info``.
        """
        if isinstance(info, list):
            final_obs: dict[int, Any] = {}
            final_infos: dict[int, dict[str, Any]] = {}
            infos: dict[int, dict[str, Any]] = {}
            for i, d in enumerate(self._info_list(info)):
                if "final_obs" in d:
                    final_obs[i] = d["final_obs"]
                    fi = d.get("final_info")
                    if isinstance(fi, dict) and fi and self._record_infos:
                        final_infos[i] = fi
                rest = {k: v for k, v in d.items() if k not in _FINAL_KEYS} \
                    if "final_obs" in d or "final_info" in d else d
                if rest and self._record_infos:
                    infos[i] = rest
            return final_obs or None, final_infos or None, infos
        if not info or "final_obs" not in info:
            return None, None, self._split(info)
        fo, fo_mask = info["final_obs"], info.get("_final_obs")
        which = np.flatnonzero(fo_mask).tolist() if _is_mask(fo_mask, self._n) else \
            range(self._n)
        fi = info.get("final_info")
        return ({i: fo[i] for i in which},
                self._split(fi) if isinstance(fi, dict) and fi and self._record_infos else None,
                self._split(info, _FINAL_KEYS))

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the vector env and starts a new recorded episode in each reset sub-env.

        With ``options={"reset_mask": mask}`` only the masked sub-envs start new episodes. (A
        copy or a forked child records again from a reset of every sub-env; until then its
        resets and steps pass through unrecorded.)
        """
        self._check_open("reset")
        mask = None
        sub_options = options
        if options is not None and "reset_mask" in options:
            # Read before the env pops it; each sub-env receives the options without it.
            mask = np.array(options["reset_mask"], copy=True)
            sub_options = {k: v for k, v in options.items() if k != "reset_mask"}
        # (Gymnasium's vector envs take a list of seeds too; VectorEnv.reset says int | None.)
        result = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        obs, info = result
        if mask is not None:
            # The env accepted it (Gymnasium checks: bool, shape (num_envs,)).
            mask = mask.astype(np.bool_) if mask.shape == (self._n,) else None
            if mask is not None and mask.all():
                mask = None
        if self._paused and mask is not None:
            return result  # (a copy or a forked child: not every sub-env starts an episode)
        buffer = self._buffer
        buffer.reset(obs, self._split(info), mask, _seeds(seed, self._n), sub_options)
        self._ever_reset |= True if mask is None else mask
        self._ready = bool(self._ever_reset.all())
        self._paused = False
        if buffer.full or self._session.due():
            self._commit_deferring()
        return result

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Steps the vector env and records each sub-env's transition."""
        if not self._ready and self._not_ready(
                "call reset() on every sub-env before step() on a RecordingVectorWrapper"):
            return self.env.step(actions)  # (a copy or a forked child, until its reset())
        result = self.env.step(actions)
        obs, reward, terminated, truncated, info = result
        final_obs = final_infos = None
        if self._mode == SAME_STEP:
            final_obs, final_infos, infos = self._same_step_finals(info)
        else:
            infos = self._split(info)
        buffer = self._buffer
        buffer.step(actions, obs, reward, terminated, truncated, infos, final_obs, final_infos)
        if buffer.full or self._session.due():
            self._commit_deferring()
        return result

    def close(self, **kwargs: Any) -> None:
        """Ends open episodes (``end == "close"``), writes everything, closes the vector env.

        Args:
            **kwargs: passed to the inner env's ``close`` (e.g. AsyncVectorEnv's ``terminate``).

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        self._close_recorder()
        if not self._env_closed:
            self._env_closed = True
            self.env.close(**kwargs)

    def __enter__(self) -> RecordingVectorWrapper:
        return self
