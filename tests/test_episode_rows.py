"""RecordingReader.episode_rows: any rows of an episode's fields, reading only their bytes."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TransformObservation

import sample_envs  # noqa: F401  (registers sample_envs/...)
from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.training.transitions import tree_map

from hostile import FIELDS, batch_names, load_manifest, rewrite_batch
from training_helpers import assert_tree, record


def _slice(tree, a, b):
    return tree_map(lambda leaf: leaf[a:b], tree)


@pytest.mark.parametrize("env_id, kwargs", [
    ("sample_envs/NestedDict-v0", {"episode_length": 40}),   # Dict and Tuple leaves
    ("sample_envs/Image-v0", {"height": 6, "width": 5, "episode_length": 30}),
])
def test_rows_equal_slices_of_the_episode(tmp_path, env_id, kwargs):
    """Random row ranges of every field, of episodes spread over many batches and of episodes
    held whole by one, equal the episode's slices (dtypes and shapes too)."""
    record(tmp_path, env_id, 4, seed=1, env_kwargs=kwargs, target_batch_bytes=2048)
    rng = np.random.default_rng(0)
    with RecordingReader(tmp_path) as reader:
        assert len(reader.batches()) > 4
        for i in range(len(reader)):
            ep, rows = reader[i], reader.episode_rows(i)
            assert rows is not None and len(rows) == len(ep.rewards)
            for name in FIELDS:
                total = len(ep.rewards) + (name == "observations")
                assert_tree(rows.rows(name, 0, total), getattr(ep, name), f"{i} {name}")
                for _ in range(20):
                    a = int(rng.integers(0, total + 1))
                    b = int(rng.integers(a, total + 1))
                    assert_tree(rows.rows(name, a, b), _slice(getattr(ep, name), a, b),
                                f"episode {i} {name}[{a}:{b}]")


def test_bad_requests_are_named_errors(tmp_path):
    record(tmp_path, "CartPole-v1", 1, seed=2, target_batch_bytes=1024)
    with RecordingReader(tmp_path) as reader:
        rows = reader.episode_rows(0)
        n = len(rows)
        for a, b in ((-1, 2), (3, 2), (0, n + 2)):
            with pytest.raises(IndexError, match="out of range"):
                rows.rows("observations", a, b)
        for a, b in ((0.0, 1), (True, 2), (0, "2"), (None, 1)):
            with pytest.raises(TypeError, match="rows must be ints"):
                rows.rows("observations", a, b)
        np.testing.assert_array_equal(rows.rows("rewards", np.int64(1), np.int32(3)),
                                      reader[0].rewards[1:3])
        with pytest.raises(IndexError, match="out of range"):
            rows.rows("actions", 0, n + 1)
        with pytest.raises(ValueError, match="no field 'infos'"):
            rows.rows("infos", 0, 1)
        with pytest.raises(IndexError):
            reader.episode_rows(1)


def test_episodes_that_must_be_read_whole_give_none(tmp_path):
    """verify=True (a checksum covers a whole array) and a leaf stored as arrays in some parts
    and as values in others (values outside the space) give None: read the episode then."""
    record(tmp_path / "cp", "CartPole-v1", 1, seed=2, target_batch_bytes=1024)
    with RecordingReader(tmp_path / "cp", verify=True) as reader:
        assert reader.episode_rows(0) is None
    state = {"n": 0}

    def grow(obs):
        state["n"] += 1
        return np.append(obs, 1.5) if state["n"] > 6 else obs

    inner = TransformObservation(gym.make("CartPole-v1"), grow,
                                 gym.make("CartPole-v1").observation_space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with RecordingWrapper(inner, tmp_path / "grow", target_batch_bytes=400) as env:
            env.reset(seed=3)
            for _ in range(40):
                env.step(0 if state["n"] % 2 else 1)
    with RecordingReader(tmp_path / "grow") as reader:
        assert reader.writers[0]["batches"] > 1
        assert isinstance(reader[0].observations, list)  # joined as rows of their own
        assert reader.episode_rows(0) is None


def test_a_reference_outside_its_file_is_refused_when_made(tmp_path):
    record(tmp_path, "CartPole-v1", 1, seed=2, target_batch_bytes=1024)
    assert len(load_manifest(tmp_path)["batches"]) > 1
    _, bin_name = batch_names(tmp_path, 1)
    rewrite_batch(tmp_path, lambda doc: doc["episodes"][0]["actions"].update(
        npyoff=((tmp_path / bin_name).stat().st_size + 15) // 8 * 8), index=1)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError, match=r"ep000000001\.json entry \d+ actions: bytes .* "
                                              r"lie outside"):
            reader.episode_rows(0)
