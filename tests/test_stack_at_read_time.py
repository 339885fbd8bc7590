"""transitions(..., stack=k) gives what gymnasium's FrameStackObservation would have returned,
start padding included, from a recording of single frames: on CartPole (several episodes, both
paddings, a Dict space) and on Breakout preprocessed with AtariPreprocessing (ale-py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.training.transitions import transitions

from needs import need_module


def _record_both(directory, make, k, padding, episodes, max_steps=None):
    """Records the single-frame env, and steps a FrameStackObservation twin with the same seeds
    and actions; returns the twin's (obs, next_obs) per step."""
    env = RecordingWrapper(make(), directory)
    twin = FrameStackObservation(make(), k, padding_type=padding)
    rng = np.random.default_rng(0)
    obs_rows, next_rows = [], []
    for e in range(episodes):
        env.reset(seed=e)
        stacked, _ = twin.reset(seed=e)
        for t in range(max_steps or 10**9):
            action = int(rng.integers(env.action_space.n))
            _, _, terminated, truncated, _ = env.step(action)
            nxt, _, term2, trunc2, _ = twin.step(action)
            assert (terminated, truncated) == (term2, trunc2)
            obs_rows.append(stacked)
            next_rows.append(nxt)
            stacked = nxt
            if terminated or truncated:
                break
    env.close()
    twin.close()
    return obs_rows, next_rows


def _same(rows, got):
    if isinstance(rows[0], dict):
        for key in rows[0]:
            _same([r[key] for r in rows], got[key])
        return
    want = np.stack(rows)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_stacked_cartpole_equals_frame_stack_observation(tmp_path, padding):
    obs, nxt = _record_both(tmp_path, lambda: gym.make("CartPole-v1"), 4, padding, episodes=3)
    with RecordingReader(tmp_path) as reader:
        t = transitions(reader, stack=4, padding=padding)
        _same(obs, t.obs)
        _same(nxt, t.next_obs)
        assert t.observations.shape[1:] == (4,)  # unstacked
        batch = t.rows([0, 5])
        assert batch["obs"].shape == (2, 4, 4)
        one = transitions(reader, [1], stack=4, padding=padding)  # one episode: its own start
        first = int(np.searchsorted(t.episode, 1))
        assert np.array_equal(one.obs, t.obs[first:first + len(one)])


def test_stacked_dict_observations(tmp_path):
    def make():
        return gym.wrappers.TransformObservation(
            gym.make("CartPole-v1"), lambda o: {"pos": o[:2], "vel": o[2:]},
            gym.spaces.Dict(pos=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                            vel=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)))

    obs, nxt = _record_both(tmp_path, make, 3, "reset", episodes=2)
    with RecordingReader(tmp_path) as reader:
        t = transitions(reader, stack=3)
    _same(obs, t.obs)
    _same(nxt, t.next_obs)


def test_stacked_breakout_frames_equal_frame_stack_observation(tmp_path):
    ale_py = need_module("ale_py", "pip install ale-py")
    need_module("cv2", "pip install opencv-python-headless")
    gym.register_envs(ale_py)

    def make():
        return gym.wrappers.AtariPreprocessing(gym.make("ALE/Breakout-v5", frameskip=1),
                                               noop_max=0)

    obs, nxt = _record_both(tmp_path, make, 4, "reset", episodes=1, max_steps=25)
    with RecordingReader(tmp_path) as reader:
        t = transitions(reader, stack=4)
        assert reader.observation_space.shape == (84, 84)  # single frames recorded
    assert t.obs.shape == (25, 4, 84, 84)
    _same(obs, t.obs)
    _same(nxt, t.next_obs)


def test_stack_arguments_are_checked(tmp_path):
    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path) as env:
        env.reset(seed=0)
        env.step(0)
    with RecordingReader(tmp_path) as reader:
        for bad in (0, True, 1.5):
            with pytest.raises(ValueError, match="stack must be an int"):
                transitions(reader, stack=bad)
        with pytest.raises(ValueError, match="padding must be one of"):
            transitions(reader, stack=2, padding="edge")
