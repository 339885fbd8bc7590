"""Shared test helpers: collect what an env really returned, and compare it with a recording.

The ground truth is collected by :class:`TruthCollector`, a plain ``gymnasium.Wrapper`` placed
*under* the :class:`~gym_recorder.RecordingWrapper`: it deep-copies every value the env returns
the moment it returns it (so envs that reuse their buffers cannot fool it) and every action,
seed and option it is handed. :func:`assert_episode_matches` then compares a recorded episode
with it, strictly: exact dtypes, shapes and bytes for arrays, exact Python types for infos.
"""

from __future__ import annotations

import copy
import math
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

# No test may need a display: pygame (play, rendering) draws into SDL's dummy video driver, and
# child processes the tests start (the docs pages' `gym-recorder play`) inherit it.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # sample_envs lives beside gym_recorder, not installed
    sys.path.insert(0, str(ROOT))

import sample_envs  # noqa: E402,F401  (registers the sample env ids)

# Child processes (gymnasium's AsyncVectorEnv, multiprocessing in tests) start by "forkserver":
# the suite runs recorder threads, and fork() in a multi-threaded process can deadlock (Python
# 3.12+ warns about it). The fork server is started from a fresh, single-threaded interpreter.
import multiprocessing  # noqa: E402

multiprocessing.set_start_method(
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn",
    force=True)
pytest_plugins = ["services"]  # the Ray cluster and S3 server fixtures (tests/services.py)


class TruthEpisode:
    """What the env returned during one episode, deep-copied when it was returned."""

    def __init__(self, obs: Any, info: dict, seed: int | None, options: Any) -> None:
        self.observations = [obs]
        self.actions: list = []
        self.rewards: list = []
        self.terminations: list[bool] = []
        self.truncations: list[bool] = []
        self.infos = [info]
        self.seed = seed
        self.options = options
        self.end: str | None = None

    def __len__(self) -> int:
        return len(self.actions)


class TruthCollector(gym.Wrapper):
    """Records deep copies of everything passing between the recorder and the env below it.

    Attributes:
        episodes: one :class:`TruthEpisode` per reset, in order.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.episodes: list[TruthEpisode] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self.episodes and self.episodes[-1].end is None:
            self.episodes[-1].end = "reset"
        self.episodes.append(TruthEpisode(copy.deepcopy(obs), copy.deepcopy(info), seed,
                                          copy.deepcopy(options)))
        return obs, info

    def step(self, action: Any):
        ep = self.episodes[-1]
        ep.actions.append(copy.deepcopy(action))
        obs, reward, terminated, truncated, info = self.env.step(action)
        ep.observations.append(copy.deepcopy(obs))
        ep.rewards.append(copy.deepcopy(reward))
        ep.terminations.append(bool(terminated))
        ep.truncations.append(bool(truncated))
        ep.infos.append(copy.deepcopy(info))
        if terminated or truncated:
            ep.end = "terminated" if terminated else "truncated"
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self.episodes and self.episodes[-1].end is None:
            self.episodes[-1].end = "close"
        super().close()


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    """An empty Minari root for the test (MINARI_DATASETS_PATH)."""
    root = tmp_path / "minari_root"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


# ---------------------------------------------------------------------------------------------
# Strict comparison


def assert_same(got: Any, expected: Any, where: str = "value") -> None:
    """Asserts that ``got`` is ``expected`` restored losslessly: same types, dtypes, bytes.

    Dict key order is not compared (the format keeps info keys in column order).
    """
    if isinstance(expected, np.ndarray):
        assert type(got) is np.ndarray, f"{where}: {type(got)} is not an ndarray"
        assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype} != {expected.dtype}"
        assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes(), \
            f"{where}: {got!r} != {expected!r}"
        return
    assert type(got) is type(expected), \
        f"{where}: type {type(got).__name__} != {type(expected).__name__} ({got!r} vs {expected!r})"
    # Scalars stored as JSON keep their value, the sign of zero, and NaN-ness; not the sign or
    # payload of a NaN (the format writes "nan"). Arrays keep every bit.
    if isinstance(expected, np.generic):
        assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype} != {expected.dtype}"
        if expected.dtype.kind in "fc":
            for part in ("real", "imag"):
                g, e = getattr(got, part), getattr(expected, part)
                assert (np.isnan(g) and np.isnan(e)) or g.tobytes() == e.tobytes(), \
                    f"{where}: {got!r} != {expected!r}"
        else:
            assert got.tobytes() == expected.tobytes(), f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, float):
        assert got == expected or (math.isnan(got) and math.isnan(expected)), \
            f"{where}: {got!r} != {expected!r}"
        if not math.isnan(expected):
            assert math.copysign(1, got) == math.copysign(1, expected), f"{where}: sign of zero"
    elif isinstance(expected, dict):
        assert set(got) == set(expected), f"{where}: keys {sorted(map(str, got))} != " \
                                          f"{sorted(map(str, expected))}"
        for k in expected:
            assert_same(got[k], expected[k], f"{where}[{k!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), f"{where}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{where}[{i}]")
    elif isinstance(expected, spaces.GraphInstance):
        for name in ("nodes", "edges", "edge_links"):
            assert_same(getattr(got, name), getattr(expected, name), f"{where}.{name}")
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def stack_expected(space: gym.Space, rows: list) -> Any:
    """The value a reader should give back for ``rows`` (one value of ``space`` each).

    Box, Discrete, MultiDiscrete and MultiBinary stack into one array of the space's dtype and
    shape ``(len(rows), *shape)``; Dict gives a dict and Tuple a tuple of those; every other space
    (Text, Sequence, Graph, OneOf) gives the list of rows.
    """
    if isinstance(space, spaces.Dict):
        return {k: stack_expected(s, [r[k] for r in rows]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(stack_expected(s, [r[i] for r in rows]) for i, s in enumerate(space.spaces))
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        out = np.empty((len(rows), *space.shape), dtype=space.dtype)
        for i, r in enumerate(rows):
            a = np.asarray(r)
            assert np.can_cast(a.dtype, space.dtype, "same_kind") and a.shape == space.shape
            out[i] = a
        return out
    return list(rows)


def assert_tree_equal(got: Any, expected: Any, space: gym.Space, where: str) -> None:
    """Compares a stacked tree from the reader with :func:`stack_expected`'s, strictly."""
    if isinstance(space, spaces.Dict):
        assert type(got) is dict, f"{where}: a Dict space comes back as {type(got).__name__}"
        assert list(got) == list(space.spaces), f"{where}: keys {list(got)}"
        for k, s in space.spaces.items():
            assert_tree_equal(got[k], expected[k], s, f"{where}[{k!r}]")
    elif isinstance(space, spaces.Tuple):
        assert type(got) is tuple, f"{where}: a Tuple space comes back as {type(got).__name__}"
        assert len(got) == len(space.spaces)
        for i, s in enumerate(space.spaces):
            assert_tree_equal(got[i], expected[i], s, f"{where}[{i}]")
    elif isinstance(space, spaces.Text):
        assert type(got) is list and all(type(x) is str for x in got), f"{where}: not a list of str"
        assert got == expected, f"{where}: {got!r} != {expected!r}"
    else:
        assert_same(got, expected, where)


def assert_episode_matches(ep: Any, truth: TruthEpisode, obs_space: gym.Space,
                           act_space: gym.Space, where: str = "episode") -> None:
    """Compares a recorded :class:`~gym_recorder.Episode` with what the env really returned."""
    n = len(truth)
    assert len(ep) == n and ep.length == n, f"{where}: {len(ep)} steps, expected {n}"
    assert_tree_equal(ep.observations, stack_expected(obs_space, truth.observations), obs_space,
                      f"{where} observations")
    assert_tree_equal(ep.actions, stack_expected(act_space, truth.actions), act_space,
                      f"{where} actions")
    assert_same(ep.rewards, np.array([float(r) for r in truth.rewards], dtype=np.float64),
                f"{where} rewards")
    assert_same(ep.terminations, np.array(truth.terminations, dtype=bool), f"{where} terminations")
    assert_same(ep.truncations, np.array(truth.truncations, dtype=bool), f"{where} truncations")
    assert_same(ep.infos, truth.infos, f"{where} infos")
    assert ep.seed == truth.seed and (ep.seed is None or type(ep.seed) is int), \
        f"{where}: seed {ep.seed!r} != {truth.seed!r}"
    assert_same(ep.options, truth.options, f"{where} options")
    assert ep.end == truth.end, f"{where}: end {ep.end!r} != {truth.end!r}"


def assert_recording_matches(reader: Any, truth: list[TruthEpisode], obs_space: gym.Space,
                             act_space: gym.Space) -> None:
    """Compares every episode of a reader with the collected truth, in order."""
    assert len(reader) == len(truth)
    for i, t in enumerate(truth):
        assert_episode_matches(reader[i], t, obs_space, act_space, f"episode {i}")



def image_episode(seed: int, size: int, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ImageEnv(size x size, episode_length) gives when reset with ``seed`` and stepped
    with action ``t % 4``: its frames (length + 1), actions and rewards."""
    from sample_envs.envs import ImageEnv

    env = ImageEnv(height=size, width=size, episode_length=length)
    obs, _ = env.reset(seed=seed)
    frames, rewards = [obs], []
    for t in range(length):
        obs, reward, _, _, _ = env.step(t % 4)
        frames.append(obs)
        rewards.append(reward)
    return np.stack(frames), np.arange(length) % 4, np.array(rewards)


def run_random(env: gym.Env, steps: int, seed: int = 0, reset_seed: int | None = None) -> None:
    """Steps ``env`` with random actions seeded with ``seed``, from a reset seeded with
    ``reset_seed`` (default ``seed``), resetting whenever an episode ends."""
    env.action_space.seed(seed)
    env.reset(seed=seed if reset_seed is None else reset_seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()


class MissionLike(gym.spaces.Space):
    """Like minigrid's MissionSpace: a Space[str] that gym_recorder does not know."""

    def __init__(self):
        super().__init__(None, None)

    def sample(self, mask=None, probability=None):
        return "go"

    def contains(self, x):
        return isinstance(x, str)


def index_span(binfo: dict) -> tuple[int, int] | None:
    """The bytes of a manifest BATCH's index table in its .bin ("Batch index" in the format):
    an array of the .bin the batch JSON does not reference; None when the BATCH has no index."""
    index = binfo.get("index")
    if index is None:
        return None
    return index["table"], index["table"] + 32 * binfo["len"]


def record_cartpole(directory: Any, episodes: int = 6, seed: int = 0, **kwargs: Any) -> str:
    """Records ``episodes`` whole CartPole-v1 episodes of random actions (the last one ended,
    no reset after it); ``kwargs`` go to the RecordingWrapper. Returns the writer's prefix."""
    from gym_recorder import RecordingWrapper

    env = RecordingWrapper(gym.make("CartPole-v1"), directory, **kwargs)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    done = 0
    while done < episodes:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            done += 1
            if done < episodes:
                env.reset()
    env.close()
    return env.file_prefix
