"""A first end-to-end check: record CartPole, read it back, compare with what the env returned."""

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingReader, RecordingWrapper


def test_cartpole_round_trip(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    env.action_space.seed(1)
    episodes = []
    obs, _ = env.reset(seed=0)
    current = [obs]
    actions = []
    for _ in range(200):
        a = env.action_space.sample()
        obs, _, terminated, truncated, _ = env.step(a)
        actions.append(a)
        current.append(obs)
        if terminated or truncated:
            episodes.append((np.array(current), np.array(actions)))
            obs, _ = env.reset()
            current, actions = [obs], []
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == len(episodes) + 1
        for ep, (obs, acts) in zip(reader, episodes):
            assert ep.observations.dtype == np.float32
            np.testing.assert_array_equal(ep.observations, obs)
            np.testing.assert_array_equal(ep.actions, acts)
            assert ep.end == "terminated"
        assert reader[0].seed == 0 and reader[1].seed is None
        assert reader[-1].end == "close"
