"""Tests for the deterministic sample environments in ``sample_envs``."""

from __future__ import annotations

import copy
import importlib
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

import sample_envs
from sample_envs import ChangingInfoEnv, FixedLengthEnv, ImageEnv, NestedDictEnv, TextEnv

EXPECTED_IDS = {
    "sample_envs/Image-v0": ImageEnv,
    "sample_envs/NestedDict-v0": NestedDictEnv,
    "sample_envs/Text-v0": TextEnv,
    "sample_envs/ChangingInfo-v0": ChangingInfoEnv,
    "sample_envs/FixedLength-v0": FixedLengthEnv,
}
ALL_IDS = sorted(EXPECTED_IDS)

# Small kwargs keep the image env cheap in tests.
MAKE_KWARGS: dict[str, dict[str, Any]] = {"sample_envs/Image-v0": {"height": 12, "width": 10}}


def make(env_id: str, **kwargs: Any) -> gym.Env:
    return gym.make(env_id, **{**MAKE_KWARGS.get(env_id, {}), **kwargs})


def rollout(env: gym.Env, seed: int, action_seed: int = 0) -> list[tuple[Any, ...]]:
    """Runs one full episode; returns deep copies of (obs, reward, term, trunc, info)."""
    env.action_space.seed(action_seed)
    obs, info = env.reset(seed=seed)
    steps: list[tuple[Any, ...]] = [(copy.deepcopy(obs), None, False, False, copy.deepcopy(info))]
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps.append((copy.deepcopy(obs), reward, terminated, truncated, copy.deepcopy(info)))
        if terminated or truncated:
            return steps
        assert len(steps) < 10_000, "episode did not end"


# --------------------------------------------------------------------------- registration


def test_ids_registered() -> None:
    assert set(sample_envs.ENV_IDS) == set(EXPECTED_IDS)
    for env_id, cls in EXPECTED_IDS.items():
        spec = gym.spec(env_id)
        assert spec.max_episode_steps is None
        assert spec.disable_env_checker is False
        assert isinstance(gym.make(env_id).unwrapped, cls)


def test_reimport_does_not_reregister() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(sample_envs)
        sample_envs.register_envs()


def test_all_exports() -> None:
    for name in sample_envs.__all__:
        assert hasattr(sample_envs, name)


# --------------------------------------------------------------------------- generic API


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_make_emits_no_checker_warnings(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = make(env_id)
        for seed in (0, 1):
            rollout(env, seed=seed)
        env.close()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env(env_id: str) -> None:
    env = make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # NestedDict deliberately has an unbounded Box, which check_env flags.
        warnings.filterwarnings(
            "ignore", message=r".*Box observation space (minimum|maximum) value is -?infinity"
        )
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_observations_in_space(env_id: str) -> None:
    env = make(env_id)
    for seed in range(3):
        for obs, reward, _, _, info in rollout(env, seed=seed, action_seed=seed):
            assert env.observation_space.contains(obs)
            assert isinstance(info, dict)
            if reward is not None:
                assert np.issubdtype(type(reward), np.floating)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_deterministic_given_seed_and_actions(env_id: str) -> None:
    env_a, env_b = make(env_id), make(env_id)
    run_a = rollout(env_a, seed=123, action_seed=7)
    run_b = rollout(env_b, seed=123, action_seed=7)
    assert data_equivalence(run_a, run_b, exact=True)
    # Same env object, reset again with the same seed.
    assert data_equivalence(rollout(env_a, seed=123, action_seed=7), run_a, exact=True)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_different_seed_gives_different_data(env_id: str) -> None:
    env = make(env_id)
    run_0 = rollout(env, seed=0, action_seed=7)
    run_1 = rollout(env, seed=1, action_seed=7)
    assert not data_equivalence(run_0, run_1)
    if env_id != "sample_envs/Text-v0":  # Text's reset observation is always "".
        assert not data_equivalence(run_0[0][0], run_1[0][0])


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_step_before_reset_and_after_end_raise(env_id: str) -> None:
    env = make(env_id, disable_env_checker=True).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.action_space.sample())
    rollout(env, seed=0)
    with pytest.raises(RuntimeError, match="ended"):
        env.step(env.action_space.sample())


@pytest.mark.parametrize("cls", list(EXPECTED_IDS.values()))
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_invalid_episode_length(cls: type, bad: Any) -> None:
    with pytest.raises(ValueError, match="episode_length"):
        cls(episode_length=bad)


# --------------------------------------------------------------------------- ImageEnv


@pytest.mark.parametrize("shape", [(84, 84), (210, 160), (1, 1)])
def test_image_shapes(shape: tuple[int, int]) -> None:
    env = gym.make("sample_envs/Image-v0", height=shape[0], width=shape[1])
    assert env.observation_space == gym.spaces.Box(0, 255, (*shape, 3), np.uint8)
    assert env.action_space == gym.spaces.Discrete(4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (*shape, 3) and obs.dtype == np.uint8


@pytest.mark.parametrize("shape", [(1, 1), (2, 9), (6, 5), (84, 84)])
def test_image_bank_frames_distinct(shape: tuple[int, int]) -> None:
    env = ImageEnv(*shape)
    for seed in range(5):
        env.reset(seed=seed)
        bank = env._bank
        assert bank is not None and bank.shape == (8, *shape, 3)
        assert len({frame.tobytes() for frame in bank}) == 8


def test_image_dynamics() -> None:
    env = ImageEnv(height=6, width=5, episode_length=30)
    obs0, info = env.reset(seed=3)
    assert info == {}
    bank = env._bank
    assert bank is not None
    np.testing.assert_array_equal(obs0, bank[0])
    actions = [t % 4 for t in range(1, 31)][::-1]
    for t, a in enumerate(actions, start=1):
        obs, reward, terminated, truncated, info = env.step(a)
        np.testing.assert_array_equal(obs, bank[(t + a) % 8])
        assert reward == float(a == t % 4) and type(reward) is float
        assert terminated is False and truncated is (t == 30) and info == {}


def test_image_copies_by_default() -> None:
    env = gym.make("sample_envs/Image-v0", height=4, width=4)
    obs0, _ = env.reset(seed=0)
    snapshot = obs0.copy()
    obs1, *_ = env.step(0)
    assert obs1 is not obs0 and not np.shares_memory(obs0, obs1)
    np.testing.assert_array_equal(obs0, snapshot)


def test_image_reuse_buffer() -> None:
    env = ImageEnv(height=4, width=4, episode_length=10, reuse_buffer=True)
    obs0, _ = env.reset(seed=0)
    snapshot = obs0.copy()
    obs1, *_ = env.step(0)
    assert obs1 is obs0
    assert not np.array_equal(obs1, snapshot)  # content changed in place
    obs2, *_ = env.step(0)
    assert obs2 is obs0
    obs3, _ = env.reset(seed=1)
    assert obs3 is obs0


@pytest.mark.skipif(
    not hasattr(gym.utils.passive_env_checker, "env_data_reuse_passive_checker"),
    reason="this gymnasium's passive env checker does not check for reused data",
)
def test_image_reuse_buffer_flagged_by_checker() -> None:
    env = gym.make("sample_envs/Image-v0", height=4, width=4, reuse_buffer=True)
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="share an object"):
        env.step(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = gym.make("sample_envs/Image-v0", reuse_buffer=True, disable_env_checker=True)
        quiet.reset(seed=0)
        quiet.step(0)


def test_image_render() -> None:
    env = gym.make("sample_envs/Image-v0", height=5, width=7, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    frame = env.render()
    np.testing.assert_array_equal(frame, obs)
    obs, *_ = env.step(2)
    frame = env.render()
    np.testing.assert_array_equal(frame, obs)
    assert frame is not obs
    plain = ImageEnv(height=2, width=2)
    plain.reset(seed=0)
    assert plain.render() is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"height": 0},
        {"width": -3},
        {"height": 8.0},
        {"reuse_buffer": "yes"},
        {"render_mode": "human"},
    ],
)
def test_image_invalid_args(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ImageEnv(**kwargs)


@pytest.mark.parametrize("action", [4, -1, 1.0, "1", None, np.array([1])])
def test_image_invalid_action(action: Any) -> None:
    env = ImageEnv(height=2, width=2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(action)


@pytest.mark.parametrize("action", [3, np.int64(3), np.array(3), np.uint8(3)])
def test_image_accepts_integer_actions(action: Any) -> None:
    env = ImageEnv(height=2, width=2)
    env.reset(seed=0)
    assert env.step(action)[1] == 0.0  # t=1, so reward is float(3 == 1)


# --------------------------------------------------------------------------- NestedDictEnv


def nested_actions(choice: int, n: int) -> list[dict[str, Any]]:
    return [{"move": np.array([0.5, -0.25], np.float32), "choice": choice} for _ in range(n)]


def test_nested_dict_spaces_and_types() -> None:
    env = gym.make("sample_envs/NestedDict-v0")
    obs, info = env.reset(seed=0)
    assert info == {}
    assert list(obs) == list(env.observation_space.spaces)
    assert list(obs["nested"]) == ["a", "pair"]
    assert isinstance(obs["count"], np.int64)
    assert obs["flags"].dtype == np.int8
    assert obs["grid"].dtype == np.uint8 and obs["grid"].shape == (5, 5)
    assert obs["md"].dtype == np.int64
    assert obs["nested"]["a"].dtype == np.float64
    pair = obs["nested"]["pair"]
    assert isinstance(pair, tuple) and type(pair[0]) is int
    assert isinstance(pair[1], np.ndarray) and pair[1].shape == () and pair[1].dtype == np.int16
    assert obs["position"].dtype == np.float32
    _, reward, *_ = env.step(env.action_space.sample())
    assert type(reward) is np.float32


def test_nested_dict_terminates() -> None:
    env = gym.make("sample_envs/NestedDict-v0")
    env.reset(seed=0)
    for t, action in enumerate(nested_actions(choice=1, n=9), start=1):
        obs, _, terminated, truncated, _ = env.step(action)
        assert obs in env.observation_space
        assert obs["count"] == t
        assert terminated is (t == 9) and truncated is False


def test_nested_dict_truncates() -> None:
    env = gym.make("sample_envs/NestedDict-v0", episode_length=20)
    env.reset(seed=0)
    for t, action in enumerate(nested_actions(choice=0, n=20), start=1):
        obs, _, terminated, truncated, _ = env.step(action)
        assert obs in env.observation_space
        assert terminated is False and truncated is (t == 20)


def test_nested_dict_depends_on_actions() -> None:
    env = NestedDictEnv()
    env.reset(seed=0)
    obs_a, *_ = env.step(nested_actions(0, 1)[0])
    env.reset(seed=0)
    obs_b, *_ = env.step(nested_actions(2, 1)[0])
    assert not data_equivalence(obs_a, obs_b)


def test_nested_dict_invalid_action() -> None:
    env = NestedDictEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="move"):
        env.step({"move": np.zeros(3, np.float32), "choice": 0})
    with pytest.raises(ValueError, match="action"):
        env.step({"move": np.zeros(2, np.float32), "choice": 3})


# --------------------------------------------------------------------------- TextEnv


def test_text_observations() -> None:
    env = gym.make("sample_envs/Text-v0")
    assert env.observation_space == gym.spaces.Text(
        max_length=32, min_length=0, charset=TextEnv.CHARSET
    )
    obs, info = env.reset(seed=0)
    assert obs == "" and info == {"message": "reset"}
    lengths = []
    for t in range(1, 11):
        obs, reward, terminated, truncated, info = env.step(0)
        assert isinstance(obs, str) and obs in env.observation_space
        assert reward == len(obs) / 32
        assert info == {"message": f"step {t} action 0"}
        assert terminated is False and truncated is (t == 10)
        lengths.append(len(obs))
    assert 0 in lengths and 32 in lengths and len(set(lengths)) >= 5
    assert " " in TextEnv.CHARSET and set(TextEnv.CHARSET) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
    )


# --------------------------------------------------------------------------- ChangingInfoEnv


def test_changing_info_cycle() -> None:
    env = gym.make("sample_envs/ChangingInfo-v0")
    obs, info = env.reset(seed=5)
    assert list(info) == ["start"] and type(info["start"]) is np.int64
    assert obs.dtype == np.float32 and obs.shape == (2,)
    expected_keys = [set(), {"x"}, {"x", "arr"}, {"name", "nested"}, {"flag", "maybe"}]
    for t in range(1, 13):
        obs, reward, terminated, truncated, info = env.step(t % 2)
        assert obs in env.observation_space and reward == float(t % 2)
        keys = expected_keys[(t - 1) % 5] | ({"final"} if t == 12 else set())
        assert set(info) == keys
        assert terminated is False and truncated is (t == 12)
        if "x" in info:
            assert type(info["x"]) is float
        if "arr" in info:
            assert info["arr"].dtype == np.int32
            np.testing.assert_array_equal(info["arr"], np.arange(3) * t)
        if "name" in info:
            assert info["name"] == f"step-{t}" and info["nested"] == {"k": [1, 2, t]}
        if "flag" in info:
            assert info["flag"] is True and info["maybe"] is None
    assert type(info["final"]) is np.float32


# --------------------------------------------------------------------------- FixedLengthEnv


@pytest.mark.parametrize("terminate", [True, False])
@pytest.mark.parametrize("length", [1, 3, 10])
def test_fixed_length_ending(terminate: bool, length: int) -> None:
    env = gym.make("sample_envs/FixedLength-v0", episode_length=length, terminate=terminate)
    steps = rollout(env, seed=0)
    assert len(steps) == length + 1
    for _, reward, terminated, truncated, _ in steps[1:-1]:
        assert reward == 1.0 and terminated is False and truncated is False
    _, reward, terminated, truncated, _ = steps[-1]
    assert reward == 1.0 and terminated is terminate and truncated is (not terminate)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((4,), "float32"), ((), "float64"), ((2, 3), np.int8), (5, "uint8"), ((1, 2, 2), "float16")],
)
def test_fixed_length_shape_dtype(shape: Any, dtype: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("sample_envs/FixedLength-v0", obs_shape=shape, obs_dtype=dtype)
        expected_shape = (shape,) if isinstance(shape, int) else shape
        assert env.observation_space.shape == expected_shape
        assert env.observation_space.dtype == np.dtype(dtype)
        steps = rollout(env, seed=0)
    obs0 = steps[0][0].astype(np.int64)
    for t, (obs, *_) in enumerate(steps):
        assert isinstance(obs, np.ndarray)
        assert obs.shape == expected_shape and obs.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(obs, (obs0 + t) % 128)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"obs_shape": (0,)},
        {"obs_shape": (2, -1)},
        {"obs_shape": "ab"},
        {"obs_shape": 2.5},
        {"obs_dtype": "object"},
        {"obs_dtype": bool},
        {"obs_dtype": "complex64"},
        {"obs_dtype": "not-a-dtype"},
        {"obs_shape": True},
        {"terminate": 1},
    ],
)
def test_fixed_length_invalid_args(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FixedLengthEnv(**kwargs)
