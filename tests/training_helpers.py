"""Recordings with their ground truth for the training, Parquet and Minari tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

import sample_envs  # noqa: F401  (registers sample_envs/...)
from gym_recorder import RecordingWrapper


def stack(space: gym.Space, rows: list) -> Any:
    """Rows of one space stacked the way the reader gives them back (Box/Discrete leaves)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: stack(s, [r[k] for r in rows]) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(stack(s, [r[i] for r in rows]) for i, s in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(rows, dtype=np.int64)
    return np.stack([np.asarray(r, dtype=space.dtype) for r in rows])


def record(directory: Any, env_id: str, episodes: int, seed: int = 0,
           env_kwargs: dict | None = None, **wrapper_kwargs: Any) -> list[dict]:
    """Records ``episodes`` episodes of ``env_id`` (random actions, first reset seeded) and
    returns what the env returned, one dict per episode."""
    env = RecordingWrapper(gym.make(env_id, **(env_kwargs or {})), directory, **wrapper_kwargs)
    env.action_space.seed(seed)
    truth = []
    for e in range(episodes):
        obs, info = env.reset(seed=seed if e == 0 else None)
        obs_l, act_l, rew, term, trunc = [obs], [], [], [], []
        while True:
            a = env.action_space.sample()
            obs, r, te, tr, info = env.step(a)
            obs_l.append(obs)
            act_l.append(a)
            rew.append(r)
            term.append(te)
            trunc.append(tr)
            if te or tr:
                break
        truth.append({"obs": stack(env.observation_space, obs_l),
                      "act": stack(env.action_space, act_l),
                      "rew": np.asarray(rew, dtype=np.float64), "term": np.asarray(term),
                      "trunc": np.asarray(trunc), "seed": seed if e == 0 else None})
    env.close()
    return truth


def assert_tree(got: Any, expected: Any, where: str) -> None:
    """Exact equality of trees of arrays: structure, dtypes, shapes, values."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), where
        for k in expected:
            assert_tree(got[k], expected[k], f"{where}.{k}")
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), where
        for i, (g, x) in enumerate(zip(got, expected)):
            assert_tree(g, x, f"{where}.{i}")
    else:
        got = np.asarray(got)
        assert got.dtype == expected.dtype, f"{where}: {got.dtype} != {expected.dtype}"
        assert got.shape == expected.shape, f"{where}: {got.shape} != {expected.shape}"
        assert np.array_equal(got, expected, equal_nan=True), f"{where}: values differ"


def tree_rows(tree: Any, rows: Any) -> Any:
    if isinstance(tree, dict):
        return {k: tree_rows(v, rows) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_rows(v, rows) for v in tree)
    return tree[rows]


def tree_cat(trees: list) -> Any:
    t = trees[0]
    if isinstance(t, dict):
        return {k: tree_cat([x[k] for x in trees]) for k in t}
    if isinstance(t, tuple):
        return tuple(tree_cat([x[i] for x in trees]) for i in range(len(t)))
    return np.concatenate(trees)
