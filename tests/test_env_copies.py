"""copy.deepcopy and pickle of a RecordingWrapper (10.8), check_env and gym.make(spec) (10.1)."""

from __future__ import annotations

import copy
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import RecorderWarning


def _steps(env, actions):
    return [env.step(a)[0].copy() for a in actions]


def test_deepcopy_mid_episode_records_as_a_new_writer_from_its_next_reset(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=10_000)
    first = [env.reset(seed=0)[0].copy()] + _steps(env, [0, 1])
    twin = copy.deepcopy(env)  # the inner env is deep-copied: same state
    with pytest.warns(RecorderWarning, match="copy made mid-episode"):
        twin_obs = _steps(twin, [1, 1])  # not recorded
    rest = _steps(env, [1, 1])  # the original goes on, with the same state: same observations
    assert all(np.array_equal(a, b) for a, b in zip(twin_obs, rest))
    second = [twin.reset(seed=5)[0].copy()] + _steps(twin, [0, 0, 1])
    assert twin.file_prefix != env.file_prefix and twin.directory == env.directory
    twin.close()
    env.close()
    with RecordingReader(tmp_path) as reader:
        eps = {ep.seed: ep for ep in reader}
        assert len(reader) == 2 and len(reader.writers) == 2
    assert np.array_equal(eps[0].observations, np.stack(first + rest))
    assert np.array_equal(eps[0].actions, np.array([0, 1, 1, 1]))
    assert np.array_equal(eps[5].observations, np.stack(second))
    assert np.array_equal(eps[5].actions, np.array([0, 0, 1]))


def test_pickle_round_trip_records_with_the_same_settings(tmp_path):
    env = RecordingWrapper(gym.make("Pendulum-v1"), tmp_path, target_batch_bytes=777,
                           record_infos=False)
    env.reset(seed=2)
    clone = pickle.loads(pickle.dumps(env))
    assert clone._settings == env._settings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not mid-episode? it is: exactly one warning expected
        with pytest.raises(RecorderWarning):
            clone.step(np.array([0.5], np.float32))
    obs = [clone.reset(seed=3)[0]] + [clone.step(np.array([0.1 * k], np.float32))[0]
                                      for k in range(4)]
    clone.close()
    env.close()
    with RecordingReader(tmp_path) as reader:
        eps = {ep.seed: ep for ep in reader}
    assert np.array_equal(eps[3].observations, np.stack(obs))
    assert eps[3].observations.dtype == np.float32
    assert np.array_equal(eps[3].actions, np.array([[0.0], [0.1], [0.2], [0.3]], np.float32))
    assert eps[2].length == 0 and eps[2].end == "close"


def test_check_env_passes_and_make_spec_rebuilds_the_recorder(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # check_env's own notes about infinite bounds
        check_env(env)
    spec = env.spec
    assert spec.additional_wrappers[-1].name == "RecordingWrapper"
    assert spec.additional_wrappers[-1].kwargs["directory"] == str(tmp_path)
    remade = gym.make(spec)
    assert isinstance(remade, RecordingWrapper) and remade.file_prefix != env.file_prefix
    obs = [remade.reset(seed=4)[0]] + _steps(remade, [1, 0, 1])
    remade.close()
    env.close()
    with RecordingReader(tmp_path) as reader:
        mine = [ep for ep in reader if ep.writer == remade.file_prefix]
    assert len(mine) == 1
    assert np.array_equal(mine[0].observations, np.stack(obs))
    assert np.array_equal(mine[0].actions, np.array([1, 0, 1]))
