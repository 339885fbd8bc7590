"""Round trips: record real Gymnasium envs, sample envs and random spaces; read back exactly.

Every test collects the ground truth with :class:`TruthCollector` under the recorder, then
checks every observation, action, reward, flag, info, seed, option and end of every episode,
with exact dtypes, shapes and bytes.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import (TruthCollector, assert_recording_matches, assert_same)
from gymnasium import spaces
from gymnasium.wrappers import RecordEpisodeStatistics
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gym_recorder import RecordingReader, RecordingWrapper

# HYPOTHESIS_EXAMPLES=1000 (environment) for a longer hunt; the defaults keep this file fast.
CLASSIC_BOUNDS = {"low": -0.02, "high": 0.02, "tag": ("a", 1), "weights": np.arange(3.0)}
# Reset options the env understands (or ignores): exercised as recorded VALUEs.
OPTIONS = {
    "CartPole-v1": CLASSIC_BOUNDS,
    "MountainCarContinuous-v0": {"low": -0.55, "high": -0.45},
    "Acrobot-v1": CLASSIC_BOUNDS,
    "Pendulum-v1": {"x_init": 0.5, "y_init": 0.25},
}
DEFAULT_OPTIONS = {"note": "unused by this env", "level": 3, "nested": {"x": [1, 2.5, None]}}

# (seed, options?, steps cap): None runs the episode until the env ends it; a cap ends it with an
# early reset (or, for the last episode, with close); 0 is a zero-length episode.
PLAN = [(0, False, None), (None, False, 30), (7, True, None), (None, True, 0),
        (11, False, 12), (None, False, None), (3, True, 5)]
MAX_STEPS = 1000  # no episode of these envs is longer (MountainCarContinuous: 999)

TAXI = "Taxi-v4" if "Taxi-v4" in gym.registry else "Taxi-v3"  # (v4: gymnasium 1.3 on)
REAL_ENVS = ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0", "Acrobot-v1",
             "FrozenLake-v1", TAXI, "Blackjack-v1"]


def drive(env: gym.Env, plan: list, *, python_ints: bool = True) -> None:
    """Runs the plan on a (recording) env with a seeded random policy, then closes it.

    Discrete actions alternate between np.int64 (what ``sample()`` gives) and Python int.
    """
    env.action_space.seed(42)
    for k, (seed, use_options, cap) in enumerate(plan):
        options = OPTIONS.get(env.spec.id if env.spec else "", DEFAULT_OPTIONS) if use_options \
            else None
        env.reset(seed=seed, options=options)
        steps = 0
        while cap is None or steps < cap:
            action = env.action_space.sample()
            if python_ints and k % 2 and isinstance(action, np.integer):
                action = int(action)
            _, _, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated or steps >= MAX_STEPS:
                break
    env.close()


def record(tmp_path, inner: gym.Env, plan: list = PLAN, **kwargs: Any) -> TruthCollector:
    truth = TruthCollector(RecordEpisodeStatistics(inner))
    drive(RecordingWrapper(truth, tmp_path / "rec", **kwargs), plan)
    return truth


def check(tmp_path, truth: TruthCollector, env_id: str | None = None) -> None:
    with RecordingReader(tmp_path / "rec") as reader:
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)
        assert reader.observation_space == truth.observation_space
        assert reader.action_space == truth.action_space
        assert reader.env_id == env_id
        assert all(ep.env_id == env_id for ep in reader)


@pytest.mark.parametrize("target", [5_000_000, 3_000], ids=["one-batch", "many-batches"])
@pytest.mark.parametrize("env_id", REAL_ENVS)
def test_real_env_round_trip(tmp_path, env_id, target):
    truth = record(tmp_path, gym.make(env_id), target_batch_bytes=target)
    eps = truth.episodes
    assert [e.seed for e in eps] == [p[0] for p in PLAN]
    assert any("episode" in info for e in eps for info in e.infos), "no RecordEpisodeStatistics"
    assert eps[3].end == "reset" and len(eps[3]) == 0
    assert eps[-1].end == "close" or env_id in ("Blackjack-v1", "FrozenLake-v1", TAXI)
    check(tmp_path, truth, env_id)


SAMPLE_ENVS = [
    ("sample_envs/Image-v0", {"height": 12, "width": 10, "episode_length": 9}),
    ("sample_envs/Image-v0", {"height": 12, "width": 10, "episode_length": 9,
                              "reuse_buffer": True, "disable_env_checker": True}),
    ("sample_envs/NestedDict-v0", {"episode_length": 15}),
    ("sample_envs/Text-v0", {"episode_length": 13}),
    ("sample_envs/ChangingInfo-v0", {"episode_length": 12}),
    ("sample_envs/FixedLength-v0", {"episode_length": 6, "terminate": False,
                                    "obs_shape": (2, 3), "obs_dtype": "int8"}),
    ("sample_envs/FixedLength-v0", {"episode_length": 4, "obs_shape": (), "obs_dtype": "float16"}),
]


@pytest.mark.parametrize("target", [5_000_000, 2_000], ids=["one-batch", "many-batches"])
@pytest.mark.parametrize("env_id,kwargs", SAMPLE_ENVS,
                         ids=[f"{e.split('/')[1]}-{i}" for i, (e, _) in enumerate(SAMPLE_ENVS)])
def test_sample_env_round_trip(tmp_path, env_id, kwargs, target):
    truth = record(tmp_path, gym.make(env_id, **kwargs), target_batch_bytes=target)
    check(tmp_path, truth, env_id)


def test_reused_buffer_is_copied(tmp_path):
    """Image-v0 with reuse_buffer returns one array object, overwritten in place."""
    env = gym.make("sample_envs/Image-v0", height=6, width=5, episode_length=5,
                   reuse_buffer=True, disable_env_checker=True)
    truth = TruthCollector(env)
    rec = RecordingWrapper(truth, tmp_path / "rec")
    first, _ = rec.reset(seed=1)
    second, *_ = rec.step(1)
    assert first is second  # the env really reuses its buffer
    for _ in range(3):
        rec.step(1)  # frames 0, 2, 3, 4, 5
    rec.close()
    with RecordingReader(tmp_path / "rec") as reader:
        obs = reader[0].observations
    assert obs.shape == (5, 6, 5, 3) and obs.dtype == np.uint8
    assert len({o.tobytes() for o in obs}) == 5  # five distinct frames, not one repeated
    assert_same(obs, np.stack(truth.episodes[0].observations))


def test_numpy_scalar_actions_and_float32_rewards(tmp_path):
    """NestedDict returns np.float32 rewards; actions hold np.int64 and a float32 array."""
    truth = TruthCollector(gym.make("sample_envs/NestedDict-v0", episode_length=6))
    env = RecordingWrapper(truth, tmp_path / "rec")
    env.reset(seed=5)
    for t in range(6):
        _, reward, *_ = env.step({"choice": np.int64(t % 2), "move": np.float32([0.5, -0.25])})
        assert type(reward) is np.float32
    env.close()
    with RecordingReader(tmp_path / "rec") as reader:
        ep = reader[0]
    assert ep.actions["choice"].dtype == np.int64 and ep.actions["move"].dtype == np.float32
    assert_same(ep.actions["choice"], np.array([0, 1, 0, 1, 0, 1], dtype=np.int64))
    assert_same(ep.rewards, np.array([float(r) for r in truth.episodes[0].rewards]))
    assert ep.observations["nested"]["pair"][1].shape == (7,)  # 0-d int16 leaf, stacked
    assert ep.observations["nested"]["pair"][1].dtype == np.int16


# ---------------------------------------------------------------------------------------------
# Property-based round trip over random spaces


class SpaceEnv(gym.Env):
    """An env with the given spaces that returns (seeded) samples of them.

    Episode ``k`` lasts ``lengths[k]`` steps and ends the way ``ends[k]`` says: "terminated" or
    "truncated" by the env; "reset" by the driver resetting early.
    """

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, seed: int) -> None:
        self.observation_space = obs_space
        self.action_space = act_space
        self.observation_space.seed(seed)
        self.lengths: list[int] = []
        self.ends: list[str] = []
        self._k = -1
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._k += 1
        self._t = 0
        return self.observation_space.sample(), ({"k": self._k} if self._k % 2 else {})

    def step(self, action):
        self._t += 1
        done = self._t >= self.lengths[self._k]
        end = self.ends[self._k]
        info = {"t": self._t, "x": np.float32(self._t / 3)} if self._t % 3 else {}
        reward = np.float32(self._t) / 7 if self._t % 2 else -self._t / 7
        return (self.observation_space.sample(), reward, done and end == "terminated",
                done and end == "truncated", info)


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def boxes(draw) -> spaces.Box:
    kind = draw(st.sampled_from(["int", "float", "bool", "image"]))
    if kind == "image":
        return spaces.Box(0, 255, (draw(st.integers(1, 6)), draw(st.integers(1, 6)), 3), np.uint8)
    shape = draw(shapes)
    if kind == "bool":
        return spaces.Box(0, 1, shape, np.bool_)
    if kind == "int":
        dtype = draw(st.sampled_from(INT_DTYPES))
        info = np.iinfo(dtype)
        return spaces.Box(max(info.min, -100), min(info.max, 100), shape, dtype)
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    if draw(st.booleans()):
        return spaces.Box(-np.inf, np.inf, shape, dtype)
    return spaces.Box(-3, 5, shape, dtype)


leaves = st.one_of(
    boxes(),
    st.builds(spaces.Discrete, st.integers(1, 50), start=st.integers(-5, 5)),
    st.builds(lambda nvec: spaces.MultiDiscrete(nvec),
              st.lists(st.integers(1, 9), min_size=1, max_size=4)),
    st.builds(lambda nvec: spaces.MultiDiscrete(np.array(nvec).reshape(2, -1)),
              st.lists(st.integers(1, 9), min_size=2, max_size=2).map(lambda v: v * 2)),
    st.builds(spaces.MultiBinary, st.one_of(st.integers(1, 6), shapes.filter(bool).map(list))),
    st.builds(lambda lo, extra: spaces.Text(lo + extra, min_length=lo),
              st.integers(0, 3), st.integers(0, 8)),
)


# Spaces whose values do not stack, as leaves anywhere in a tree.
unstacked_leaves = st.one_of(
    st.builds(spaces.Sequence, leaves, stack=st.booleans()),
    st.builds(spaces.Graph, st.sampled_from([spaces.Box(0, 1, (2,), np.float32),
                                             spaces.Discrete(3)]),
              st.sampled_from([None, spaces.Discrete(2), spaces.Box(-1, 1, (1,), np.float64)])),
    st.builds(spaces.OneOf, st.lists(leaves, min_size=1, max_size=3)),
)


def nest(children):
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda cs: spaces.Tuple(cs)),
        st.dictionaries(st.text("abcxyz_", min_size=1, max_size=5), children,
                        min_size=1, max_size=3).map(spaces.Dict),
    )


space_trees = st.recursive(st.one_of(leaves, leaves, leaves, unstacked_leaves), nest,
                           max_leaves=6)
episode_plans = st.lists(st.tuples(st.integers(0, 7),
                                   st.sampled_from(["terminated", "truncated", "reset"])),
                         min_size=0, max_size=5)


def run_space_env(tmp_path, obs_space, act_space, plan, seed, target) -> TruthCollector:
    inner = SpaceEnv(obs_space, act_space, seed)
    inner.lengths = [n for n, _ in plan]
    inner.ends = [e for _, e in plan]
    truth = TruthCollector(inner)
    env = RecordingWrapper(truth, tmp_path, target_batch_bytes=target)
    env.action_space.seed(seed + 1)
    for k, (n, _) in enumerate(plan):
        env.reset(seed=seed + k if k % 2 else None)
        for _ in range(n):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
    env.close()
    return truth


@settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 50)), deadline=None,
          database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(obs_space=space_trees, act_space=space_trees, plan=episode_plans,
       seed=st.integers(0, 2**16), target=st.sampled_from([200, 1_000, 5_000_000]))
def test_random_spaces_round_trip(tmp_path_factory, obs_space, act_space, plan, seed, target):
    directory = tmp_path_factory.mktemp("rec")
    truth = run_space_env(directory, obs_space, act_space, plan, seed, target)
    with RecordingReader(directory) as reader:
        assert_recording_matches(reader, truth.episodes, obs_space, act_space)
        assert reader.observation_space == obs_space
        assert reader.action_space == act_space
        assert reader.env_id is None


# Random infos and reset options: every kind of VALUE the README promises to keep


SCALAR_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128"]
ARRAY_DTYPES = SCALAR_DTYPES + ["<U3", "|S2", ">f4", ">i2"]


@st.composite
def np_arrays(draw) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(ARRAY_DTYPES)))
    shape = draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
    n = int(np.prod(shape))
    if dtype.kind in "US":
        chars = "ab\u00e9" if dtype.kind == "U" else "ab"
        items = draw(st.lists(st.text(chars, max_size=2), min_size=n, max_size=n))
        return np.array(items, dtype=dtype).reshape(shape)
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


np_scalars = st.builds(lambda a: a.reshape(-1)[0],
                       np_arrays().filter(lambda a: a.size > 0 and a.dtype.kind not in "US"))
plain = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                  st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                  st.binary(max_size=4))
info_values = st.recursive(
    st.one_of(plain, np_arrays(), np_scalars),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.lists(kids, max_size=3).map(tuple),
                           st.dictionaries(st.text(max_size=4), kids, max_size=3),
                           st.dictionaries(st.integers(-3, 3), kids, max_size=2)),
    max_leaves=8)
# A few keys, so that columns get values of one type (stacked) or mixed ones, present or not.
info_dicts = st.dictionaries(st.sampled_from(["a", "b", "episode", "__type", "x y"]),
                             st.one_of(info_values, st.integers(0, 3), st.floats(),
                                       np_arrays(), st.just(np.float32(0.5))), max_size=4)


class InfoListEnv(gym.Env):
    """Returns the given infos, one per reset or step, in order."""

    observation_space = spaces.Discrete(3)
    action_space = spaces.Discrete(2)

    def __init__(self, infos: list[dict]) -> None:
        self.infos = iter(infos)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, next(self.infos)

    def step(self, action):
        return 1, 0.0, False, False, next(self.infos)


@settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 100)), deadline=None,
          database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                HealthCheck.too_slow])
@given(infos=st.lists(info_dicts, min_size=1, max_size=12), options=info_values,
       cut=st.integers(1, 12), target=st.sampled_from([150, 5_000_000]))
def test_random_infos_and_options_round_trip(tmp_path_factory, infos, options, cut, target):
    directory = tmp_path_factory.mktemp("rec")
    truth = TruthCollector(InfoListEnv(infos))
    env = RecordingWrapper(truth, directory, target_batch_bytes=target)
    env.reset(seed=0, options=options)
    for k in range(1, len(infos)):
        if k == cut:
            env.reset()
        else:
            env.step(k % 2)
    env.close()
    with RecordingReader(directory) as reader:
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)


# ---------------------------------------------------------------------------------------------
# Spaces that do not stack: Sequence, Graph, OneOf


UNSTACKED = {
    "sequence": spaces.Sequence(spaces.Discrete(4)),
    "sequence-stack-box": spaces.Sequence(spaces.Box(-1, 1, (2,), np.float32), stack=True),
    "sequence-stack-dict": spaces.Sequence(
        spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2,), np.float64)}),
        stack=True),
    "sequence-of-tuples": spaces.Sequence(spaces.Tuple([spaces.Discrete(2), spaces.Text(4)])),
    "graph": spaces.Graph(spaces.Box(0, 1, (3,), np.float32), spaces.Discrete(3)),
    "graph-no-edges": spaces.Graph(spaces.Box(0, 1, (2,), np.float32), None),
    "oneof": spaces.OneOf([spaces.Discrete(3), spaces.Box(0, 1, (2,), np.float32),
                           spaces.Text(5)]),
    "dict-of-all": spaces.Dict({"seq": spaces.Sequence(spaces.Discrete(2)),
                                "g": spaces.Graph(spaces.Discrete(4), spaces.Discrete(2)),
                                "one": spaces.OneOf([spaces.Discrete(2), spaces.MultiBinary(3)]),
                                "box": spaces.Box(0, 1, (2,), np.float32)}),
}


def check_row_kind(space: gym.Space, rows: list) -> None:
    """The documented types: Sequence rows tuples (arrays/dicts when stack), Graph rows
    GraphInstance, OneOf rows (index, value) tuples."""
    for row in rows:
        if isinstance(space, spaces.Sequence):
            if space.stack:
                assert type(row) is (dict if isinstance(space.feature_space, spaces.Dict)
                                     else np.ndarray)
            else:
                assert type(row) is tuple
        elif isinstance(space, spaces.Graph):
            assert type(row) is spaces.GraphInstance
        elif isinstance(space, spaces.OneOf):
            assert type(row) is tuple and len(row) == 2
            assert 0 <= row[0] < len(space.spaces)


@pytest.mark.parametrize("name", list(UNSTACKED))
def test_unstacked_spaces_round_trip(tmp_path, name):
    space = UNSTACKED[name]
    truth = run_space_env(tmp_path, space, space, [(4, "terminated"), (0, "reset"), (3, "reset")],
                          seed=3, target=5_000_000)
    with RecordingReader(tmp_path) as reader:
        assert_recording_matches(reader, truth.episodes, space, space)
        assert reader.observation_space == space
        assert reader.action_space == space
        obs = reader[0].observations
        assert len(reader[0].observations if not isinstance(space, spaces.Dict) else obs["seq"]) \
            == 5
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            if not isinstance(sub, spaces.Box):
                assert type(obs[key]) is list
                check_row_kind(sub, obs[key])
    else:
        assert type(obs) is list
        check_row_kind(space, obs)


@pytest.mark.parametrize("target", [200, 5_000_000], ids=["many-batches", "one-batch"])
@pytest.mark.parametrize("obs_space, act_space", [
    (spaces.Dict({}), spaces.Discrete(2)),
    (spaces.Dict({"e": spaces.Dict({}), "t": spaces.Tuple(())}), spaces.Tuple(())),
    (spaces.Box(-1, 1, (2,), np.float32), spaces.Dict({})),
], ids=["empty-dict-obs", "nested-empty", "empty-dict-action"])
def test_spaces_of_no_leaves_round_trip(tmp_path, obs_space, act_space, target):
    """Dict({}) and Tuple(()) hold no array: every episode is still written and read back (its
    batches once had no entries, and the reader refused them)."""
    plan = [(5, "terminated"), (0, "reset"), (3, "truncated"), (7, "reset")]
    truth = run_space_env(tmp_path, obs_space, act_space, plan, 0, target)
    with RecordingReader(tmp_path, verify=True) as reader:
        assert [len(ep) for ep in reader] == [5, 0, 3, 7]
        assert_recording_matches(reader, truth.episodes, obs_space, act_space)
        assert reader.observation_space == obs_space and reader.action_space == act_space
