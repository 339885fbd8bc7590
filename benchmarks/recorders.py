"""What the benchmark records with: the cases (envs), and every recorder compared with ours.

* ``bare``: the env from ``gym.make``.
* ``floor`` (:class:`FloorWriter`): copy each observation into a reused chunk, write every full
  chunk to a new file; the machine's floor for recording frames.
* ``sync`` (:class:`SyncBatchRecorder`): the seed's design, synchronous: copy every frame (a new
  array each), and when a batch is full stack it and write it, in the stepping thread.
* ``gym_recorder``: ``RecordingWrapper`` with its defaults.
* ``minari-hdf5`` / ``minari-arrow``: Minari's ``DataCollector``, lossless, when importable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import sample_envs  # noqa: F401  (registers sample_envs/Image-v0)
from gym_recorder import RecordingWrapper
from gym_recorder.record.wrapper import DEFAULT_TARGET_BATCH_BYTES

from harness import Config

# Image episodes this long make resets (which rebuild the env's frame bank) negligible.
IMAGE_EPISODE_LENGTH = 1000
IMAGE_ENV = "sample_envs/Image-v0"


@dataclass(frozen=True)
class Case:
    """One environment to record, with its step counts per mode."""

    key: str
    label: str
    env_id: str
    kwargs: dict
    steps: int          # steps per repeat for bare, floor, sync and gym_recorder
    # A prefix of the same action stream for Minari (much slower per step); for images at least
    # one episode, since Minari writes at the end of each episode.
    minari_steps: int

    def make(self) -> gym.Env:
        return gym.make(self.env_id, **self.kwargs)


def image_kwargs(height: int, width: int) -> dict:
    return {"height": height, "width": width, "episode_length": IMAGE_EPISODE_LENGTH}


def cases(cfg: Config) -> list[Case]:
    """The recording cases of the main table."""
    # CartPole writes ~40 bytes per step, so a 5 MB batch holds >100k steps: run enough steps
    # that the stepping loop includes batches handed to the writer, not only buffering.
    return [
        Case("cartpole", "CartPole-v1", "CartPole-v1", {},
             cfg.pick(300_000, 120_000, 3_000), cfg.pick(5_000, 2_000, 200)),
        Case("image84", "84x84x3 uint8", IMAGE_ENV, image_kwargs(84, 84),
             cfg.pick(10_000, 3_000, 300), cfg.pick(2_000, 1_000, 0)),
        Case("image210", "210x160x3 uint8", IMAGE_ENV, image_kwargs(210, 160),
             cfg.pick(5_000, 2_000, 200), cfg.pick(2_000, 1_000, 0)),
    ]


def stress_case(cfg: Config) -> Case:
    """The stability case: one 1 GB run of 210x160x3 (10,000 steps) in the full mode."""
    return Case("stress210", "210x160x3 uint8", IMAGE_ENV, image_kwargs(210, 160),
                cfg.pick(10_000, 3_000, 200), 0)


def _fsync_dir_files(directory: str) -> None:
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _rows_per_batch(space: gym.Space) -> int:
    return max(1, DEFAULT_TARGET_BATCH_BYTES // max(1, space.dtype.itemsize * int(
        np.prod(space.shape))))


class FloorWriter(gym.Wrapper):
    """The physical floor of recording observations: copy + write, nothing else.

    Copies each observation into a reused chunk of about the recorder's batch size and writes
    every full chunk to a new file, synchronously; ``close()`` writes the rest and fsyncs, like
    the recorder. No actions, rewards, JSON, checksums or threads: a recorder cannot beat this on
    the same machine, in the same page-cache conditions (on VMs that return freed memory to the
    host, new page-cache pages cost far more than a memcpy).
    """

    def __init__(self, env: gym.Env, directory: str) -> None:
        super().__init__(env)
        space = env.observation_space
        self._directory = directory
        self._chunk = np.empty((_rows_per_batch(space), *space.shape), space.dtype)
        self._n = 0
        self._files = 0

    def _write(self) -> None:
        path = os.path.join(self._directory, f"chunk{self._files:06d}.bin")
        with open(path, "wb") as f:
            f.write(memoryview(self._chunk[:self._n]).cast("B"))
        self._files += 1
        self._n = 0

    def _add(self, obs: np.ndarray) -> None:
        self._chunk[self._n] = obs
        self._n += 1
        if self._n == len(self._chunk):
            self._write()

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._add(obs)
        return obs, info

    def step(self, action: Any) -> tuple:
        result = self.env.step(action)
        self._add(result[0])
        return result

    def close(self) -> None:
        if self._n:
            self._write()
        _fsync_dir_files(self._directory)
        super().close()


class SyncBatchRecorder(gym.Wrapper):
    """A synchronous recorder in the seed's style: the baseline the issue compares against.

    Every step copies the observation into a new array and appends it (with the action, reward
    and flags) to Python lists; when the batch reaches the recorder's byte target it is stacked
    into one array and written, with a small JSON index, in the stepping thread. ``close()``
    writes the rest and fsyncs. No background thread: what it costs, the step pays, which makes
    it the honest comparison for a threaded recorder under page-cache pressure.
    """

    def __init__(self, env: gym.Env, directory: str) -> None:
        super().__init__(env)
        self._directory = directory
        self._rows = _rows_per_batch(env.observation_space)
        self._obs: list[np.ndarray] = []
        self._actions: list[Any] = []
        self._rewards: list[float] = []
        self._flags: list[tuple[bool, bool]] = []
        self._files = 0

    def _write(self) -> None:
        stem = os.path.join(self._directory, f"batch{self._files:06d}")
        frames = np.stack(self._obs)
        with open(stem + ".bin", "wb") as f:
            f.write(memoryview(frames).cast("B"))
            f.write(np.asarray(self._rewards, np.float64).tobytes())
        with open(stem + ".json", "w", encoding="ascii") as f:
            json.dump({"shape": list(frames.shape), "dtype": frames.dtype.str,
                       "actions": [int(a) for a in self._actions], "flags": self._flags}, f)
        self._files += 1
        self._obs, self._actions, self._rewards, self._flags = [], [], [], []

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._obs.append(np.array(obs))
        return obs, info

    def step(self, action: Any) -> tuple:
        result = self.env.step(action)
        obs, reward, terminated, truncated, _ = result
        self._obs.append(np.array(obs))
        self._actions.append(action)
        self._rewards.append(float(reward))
        self._flags.append((bool(terminated), bool(truncated)))
        if len(self._obs) >= self._rows:
            self._write()
        return result

    def close(self) -> None:
        if self._obs:
            self._write()
        _fsync_dir_files(self._directory)
        super().close()


WRITING_VARIANTS: dict[str, Callable[[gym.Env, str], gym.Env]] = {
    "floor": FloorWriter,
    "sync": SyncBatchRecorder,
    "gym_recorder": RecordingWrapper,
}


def minari_collector() -> tuple[Callable[[gym.Env, str], gym.Env] | None, list[str], str]:
    """Returns (wrap(env, data_format), the formats that work, a note), or None and why not."""
    try:
        import inspect

        from minari import DataCollector
    except Exception as e:  # noqa: BLE001  (any import failure means: skip, with the reason)
        return None, [], f"minari not importable ({type(e).__name__}: {e}); Minari rows skipped"
    kwargs = {}
    if "jpeg_encoding" in inspect.signature(DataCollector.__init__).parameters:
        kwargs["jpeg_encoding"] = False  # lossless raw arrays, like gym_recorder

    def wrap(env: gym.Env, data_format: str) -> gym.Env:
        return DataCollector(env, data_format=data_format, **kwargs)

    formats, notes = [], []
    for data_format in ("hdf5", "arrow"):
        try:  # a tiny smoke run: DataCollector needs its backend and jax ("minari[create]")
            env = wrap(gym.make("CartPole-v1"), data_format)
            env.reset(seed=0)
            env.step(0)
            env._flush_to_storage()
            env.close()
            formats.append(data_format)
        except Exception as e:  # noqa: BLE001
            notes.append(f"{data_format} skipped ({type(e).__name__}: {str(e).splitlines()[0]})")
    import minari
    note = f"minari {minari.__version__}" + (f", {kwargs}" if kwargs else "")
    return wrap, formats, "; ".join([note, *notes])
