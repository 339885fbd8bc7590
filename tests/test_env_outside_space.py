"""Values outside the declared space are recorded exactly, with one warning per leaf (issue 10.5)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import TransformObservation

from gym_recorder import RecordingReader, RecordingWrapper, UnsupportedValueError
from gym_recorder.errors import OutsideSpaceWarning


def _grow_every_other(obs):
    # CartPole's (4,) float32, but every other step one element more, as float64
    _grow_every_other.n += 1
    return np.append(obs, 1.5) if _grow_every_other.n % 2 else obs


def test_box_leaf_with_wrong_shape_and_dtype_is_kept_exactly(tmp_path):
    _grow_every_other.n = 0
    inner = TransformObservation(gym.make("CartPole-v1"), _grow_every_other,
                                 gym.make("CartPole-v1").observation_space)
    truth = []
    with pytest.warns(OutsideSpaceWarning, match=r"observation: shape \(5,\)") as record:
        with RecordingWrapper(inner, tmp_path, target_batch_bytes=400) as env:
            obs, _ = env.reset(seed=3)
            truth.append(obs.copy())
            for _ in range(40):
                obs, _, term, trunc, _ = env.step(env.action_space.sample())
                truth.append(obs.copy())
                if term or trunc:
                    break
    assert sum(issubclass(w.category, OutsideSpaceWarning) for w in record) == 1
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        assert reader.writers[0]["batches"] > 1  # the leaf changed mode mid-episode, across parts
    assert len(ep.observations) == len(truth)
    for got, want in zip(ep.observations, truth):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want)


def test_dict_leaf_outside_its_shape(tmp_path):
    space = spaces.Dict({"pos": spaces.Box(-10, 10, (3,), np.float32),
                         "vel": spaces.Box(-10, 10, (1,), np.float32)})
    inner = TransformObservation(
        gym.make("CartPole-v1"),
        lambda o: {"pos": o, "vel": o[1:2].copy()},  # "pos" has 4 elements, not 3
        space)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with RecordingWrapper(inner, tmp_path) as env:
            first, _ = env.reset(seed=0)
            second = env.step(0)[0]
            third = env.step(1)[0]
    msgs = [str(w.message) for w in record if issubclass(w.category, OutsideSpaceWarning)]
    assert len(msgs) == 1 and "observation['pos']" in msgs[0]
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
    assert isinstance(ep.observations["pos"], list) and len(ep.observations["pos"]) == 3
    for got, want in zip(ep.observations["pos"], [first, second, third]):
        assert got.dtype == np.float32 and np.array_equal(got, want["pos"])
    assert ep.observations["vel"].dtype == np.float32
    assert np.array_equal(ep.observations["vel"][:, 0],
                          np.array([first["vel"][0], second["vel"][0], third["vel"][0]]))


def test_float64_in_float32_box_warns_once_and_is_kept(tmp_path):
    inner = TransformObservation(gym.make("CartPole-v1"), lambda o: o.astype(np.float64) / 3,
                                 gym.make("CartPole-v1").observation_space)
    with pytest.warns(OutsideSpaceWarning, match="dtype float64"):
        with RecordingWrapper(inner, tmp_path) as env:
            want = [env.reset(seed=1)[0]] + [env.step(0)[0] for _ in range(5)]
    with RecordingReader(tmp_path) as reader:
        got = reader[0].observations
    assert got.dtype == np.float64 and np.array_equal(got, np.stack(want))


def test_objects_still_raise_the_named_error(tmp_path):
    inner = TransformObservation(gym.make("CartPole-v1"), lambda o: object(),
                                 gym.make("CartPole-v1").observation_space)
    env = RecordingWrapper(inner, tmp_path)
    with pytest.raises(UnsupportedValueError):
        env.reset(seed=0)
    env.close()


def test_actions_outside_the_space_are_kept_too(tmp_path):
    sent = [np.array([0.25]), np.array([0.5, 9.0]), np.array([-1.0])]  # float64; one (2,)
    with pytest.warns(OutsideSpaceWarning, match=r"action: dtype float64") as record:
        with RecordingWrapper(gym.make("Pendulum-v1"), tmp_path) as env:
            env.reset(seed=0)
            for a in sent:
                env.step(a)  # Pendulum clips and uses the first element
    # once per leaf: the later shape problem of the same leaf does not warn again
    assert sum(issubclass(w.category, OutsideSpaceWarning) for w in record) == 1
    with RecordingReader(tmp_path) as reader:
        got = reader[0].actions
    assert isinstance(got, list) and len(got) == 3
    for g, a in zip(got, sent):
        assert g.dtype == a.dtype and np.array_equal(g, a)
