"""Values outside the declared space are recorded exactly, with one warning per leaf (issue 10.5)."""

from __future__ import annotations

import json
import os
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
    # every row (4,) float32: one array of them (issue 33 §2), not a list of rows
    assert isinstance(ep.observations["pos"], np.ndarray)
    assert ep.observations["pos"].shape == (3, 4)
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


class _Values(gym.Env):
    """Returns the given observations one after the other (the first at reset)."""

    def __init__(self, space, values):
        self.observation_space, self.action_space = space, spaces.Discrete(2)
        self.values, self.t = values, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.values[0].copy(), {}

    def step(self, action):
        self.t += 1
        return self.values[self.t].copy(), 0.0, self.t + 1 == len(self.values), False, {}


@pytest.mark.parametrize("space, values", [
    # int64 and float32 meet in float64, which rounds integers beyond 2**53
    (spaces.Box(-1, 1, (2,), np.float32),
     [np.zeros(2, np.float32), np.array([2**62 + 1, 2**53 + 1], np.int64),
      np.full(2, 0.5, np.float32)]),
    # int64 and uint64 meet in float64 too
    (spaces.Box(0, 10, (2,), np.int64),
     [np.array([2**62 + 3, 1], np.int64), np.array([2**64 - 1, 2**63 + 1], np.uint64)]),
    # an int64 leaf holding big integers, then a float: no float64 for the integers already in
    (spaces.Box(0, 10, (1,), np.int64),
     [np.array([2**60 + 1], np.int64), np.array([0.25]), np.array([7], np.int64)]),
    # int64 values in a float64 Box: numpy casts them "safely", and rounds
    (spaces.Box(0, 1, (1,), np.float64),
     [np.array([0.5]), np.array([2**60 + 1], np.int64)]),
], ids=["int64-in-float32", "uint64-in-int64", "float-after-big-ints", "int64-in-float64"])
def test_values_no_common_dtype_holds_are_kept_exactly(tmp_path, space, values):
    with pytest.warns(OutsideSpaceWarning):
        with RecordingWrapper(_Values(space, values), tmp_path) as env:
            env.reset(seed=0)
            for _ in values[1:]:
                env.step(0)
    with RecordingReader(tmp_path, verify=True) as reader:
        got = reader[0].observations
    assert len(got) == len(values)
    for k, (g, want) in enumerate(zip(got, values)):
        g = np.asarray(g)
        assert g.tolist() == want.tolist(), f"row {k}"
        assert g.dtype == want.dtype or want.dtype == space.dtype, f"row {k}: {g.dtype}"


class _IntVector(gym.vector.VectorEnv):
    """A vector env of two sub-envs whose float32 observations come as int64 at step 1."""

    def __init__(self, big):
        self.num_envs, self.big, self.t = 2, big, 0
        self.single_observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros((2, 2), np.float32), {}

    def step(self, actions):
        self.t += 1
        obs = np.full((2, 2), self.big, np.int64)
        return obs, np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), {}


def test_vector_values_no_common_dtype_holds_are_kept_as_values(tmp_path):
    """The rule of the single-env wrapper (record/buffer ColumnBuffer._fit): values, warned."""
    from gym_recorder import RecordingVectorWrapper

    big = 2**62 + 1
    env = RecordingVectorWrapper(_IntVector(big), tmp_path / "big")
    env.reset(seed=0)
    with pytest.warns(OutsideSpaceWarning, match="no common dtype"):
        env.step(np.zeros(2, np.int64))
    env.close()
    with RecordingReader(tmp_path / "big") as reader:
        for ep in reader:
            assert [np.asarray(o).tolist() for o in ep.observations] == [[0, 0], [big, big]]
    # small integers fit float64 exactly: the leaf is widened, as before
    env = RecordingVectorWrapper(_IntVector(3), tmp_path / "small")
    env.reset(seed=0)
    env.step(np.zeros(2, np.int64))
    env.close()
    with RecordingReader(tmp_path / "small") as reader:
        assert [ep.observations.tolist() for ep in reader] == [[[0, 0], [3, 3]]] * 2


def test_values_that_are_not_numbers_are_kept_as_values(tmp_path):
    """A string array (and None) where a float32 Box leaf belongs: kept exactly, one value a
    row, with one warning; something no VALUE can hold still raises, by name."""
    space = spaces.Box(-1, 1, (2,), np.float32)
    values = [np.zeros(2, np.float32), np.array(["a", "b"]), np.full(2, 0.5, np.float32)]
    with pytest.warns(OutsideSpaceWarning, match="stored as one value a row") as record:
        with RecordingWrapper(_Values(space, values), tmp_path / "str") as env:
            env.reset(seed=0)
            env.step(0)
            env.step(0)
    assert sum(issubclass(w.category, OutsideSpaceWarning) for w in record) == 1
    with RecordingReader(tmp_path / "str", verify=True) as reader:
        got = reader[0].observations
    assert isinstance(got, list) and len(got) == 3
    for g, want in zip(got, values):
        assert g.dtype == want.dtype and g.tolist() == want.tolist()

    class Opaque:
        def copy(self):
            return self

    env = RecordingWrapper(_Values(space, [np.zeros(2, np.float32), Opaque()]), tmp_path / "o")
    env.reset(seed=0)
    with pytest.raises(UnsupportedValueError):
        env.step(0)
    env.close()


def _record_int64_box(directory, values):
    """Records ``values`` as the observations of an int64 Box(1,) over 600-byte batches."""
    space = spaces.Box(-2**62, 2**62, (1,), np.int64)
    with pytest.warns(OutsideSpaceWarning):
        with RecordingWrapper(_Values(space, values), directory, target_batch_bytes=600) as env:
            env.reset(seed=0)
            for _ in values[1:]:
                env.step(0)


def _big_then_float(directory):
    """One episode of an int64 Box over many small batches: integers beyond 2**53, then small
    ones, then floats (widening a later batch's leaf to float64, whose rows are all exact
    there), then small integers again. Returns the observations sent."""
    big = np.array([2**53 + 1], np.int64)
    values = ([np.array([0], np.int64)] + [big + k for k in range(60)]
              + [np.array([k], np.int64) for k in range(60)]
              + [np.array([k + 0.5]) for k in range(60)] + [np.array([3], np.int64)] * 20)
    _record_int64_box(directory, values)
    stored = set()
    for name in os.listdir(directory):
        if name.endswith(".json") and ".ep" in name:
            with open(os.path.join(directory, name)) as f:
                obs = json.load(f)["episodes"][0]["observations"]
            stored.add(obs.get("dtype", obs.get("__type")))
    assert {"<i8", "<f8"} <= stored, stored  # (the parts join in float64: the case under test)
    return values


def test_parts_that_join_only_by_rounding_come_back_as_rows(tmp_path):
    """An episode whose batches store one leaf as int64 (beyond 2**53) and as float64 comes
    back exactly, as a list of rows; so do reader.column and transitions; Parquet refuses."""
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.integrations.parquet import export_parquet
    from gym_recorder.training.transitions import transitions

    values = _big_then_float(tmp_path / "rec")
    want = [v.tolist() for v in values]
    with RecordingReader(tmp_path / "rec", verify=True) as reader:
        got = reader[0].observations
        assert isinstance(got, list)
        assert [np.asarray(g).tolist() for g in got] == want
        assert [np.asarray(g).dtype for g in got] == [v.dtype for v in values]
        column = reader.column("observations")
        assert isinstance(column, list) and [g.tolist() for g in column] == want
        t = transitions(reader)
        assert [g.tolist() for g in t.obs] == want[:-1]
        assert [g.tolist() for g in t.next_obs] == want[1:]
    with pytest.raises(UnsupportedSpaceError, match="column obs: its rows have no one"):
        export_parquet(tmp_path / "rec", tmp_path / "pq")
    assert not (tmp_path / "pq").exists()


def test_parts_that_join_exactly_are_one_widened_array(tmp_path):
    """The same shape of recording with small integers only: one float64 array, as before."""
    values = [np.array([k], np.int64) for k in range(80)] + [np.array([0.5])] * 40
    _record_int64_box(tmp_path, values)
    with RecordingReader(tmp_path) as reader:
        got = reader[0].observations
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        assert got.tolist() == [v.tolist() for v in values]


def test_a_leaf_whose_every_row_has_one_other_shape_reads_back_as_one_array(tmp_path):
    """A wrapper that appends a value to every observation and forgot to update the space
    (issue 33 §2): every row is (5,) float64, so the episode's observations, the column and
    transitions are arrays of those rows, equal to what the env returned."""
    from gym_recorder.training.transitions import transitions

    space = gym.make("CartPole-v1").observation_space
    inner = TransformObservation(gym.make("CartPole-v1"), lambda o: np.append(o, 1.0), space)
    truth, episodes = [], []
    with pytest.warns(OutsideSpaceWarning):
        with RecordingWrapper(inner, tmp_path, target_batch_bytes=3_000) as env:
            obs, _ = env.reset(seed=0)
            env.action_space.seed(0)
            truth.append(obs)
            for _ in range(300):
                obs, _, term, trunc, _ = env.step(env.action_space.sample())
                truth.append(obs)
                if term or trunc:
                    episodes.append(np.stack(truth))
                    obs, _ = env.reset()
                    truth = [obs]
    episodes.append(np.stack(truth))
    with RecordingReader(tmp_path) as reader:
        assert reader.writers[0]["batches"] > 2  # episodes of several parts among them
        assert len(reader) == len(episodes)
        for ep, want in zip(reader, episodes):
            assert isinstance(ep.observations, np.ndarray)
            assert ep.observations.dtype == np.float64 and ep.observations.shape == want.shape
            assert np.array_equal(ep.observations, want)
        column = reader.column("observations")
        assert isinstance(column, np.ndarray)
        assert np.array_equal(column, np.concatenate(episodes))
        got = transitions(reader)
        assert isinstance(got.obs, np.ndarray) and got.obs.shape == (300, 5)
        assert np.array_equal(got.obs, np.concatenate([e[:-1] for e in episodes]))
