"""A single env that resets itself inside step() (gymnasium.wrappers.Autoreset), issue 10.7."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.replay.run import replay_recording


def test_autoreset_steps_begin_new_episodes(tmp_path):
    seen_obs, seen_infos, actions, rewards = [], [], [], []
    with RecordingWrapper(gym.wrappers.Autoreset(gym.make("CartPole-v1")), tmp_path,
                          target_batch_bytes=2000) as env:
        obs, info = env.reset(seed=7)
        env.action_space.seed(7)
        episodes = [[obs.copy()]]
        ep_actions, ep_rewards, infos = [[]], [[]], [[info]]
        ended = False
        while len(episodes) < 4 or not ended:
            a = env.action_space.sample()
            obs, r, term, trunc, info = env.step(a)
            if ended:  # Autoreset: this step was the reset of the next episode
                assert r == 0.0
                episodes.append([obs.copy()])
                ep_actions.append([]), ep_rewards.append([]), infos.append([info])
                ended = False
                if len(episodes) > 4:
                    break
                continue
            episodes[-1].append(obs.copy())
            ep_actions[-1].append(a)
            ep_rewards[-1].append(r)
            infos[-1].append(info)
            ended = term or trunc
    with RecordingReader(tmp_path) as reader:
        eps = list(reader)
    assert len(eps) == len(episodes)
    for k, ep in enumerate(eps):
        assert np.array_equal(ep.observations, np.stack(episodes[k]))
        assert np.array_equal(ep.actions, np.array(ep_actions[k], dtype=np.int64))
        assert np.array_equal(ep.rewards, np.array(ep_rewards[k]))
        assert ep.infos == infos[k]
        assert ep.seed == (7 if k == 0 else None)
        assert not ep.no_reset
    assert [ep.end for ep in eps[:-1]] == ["terminated"] * (len(eps) - 1)
    # the reset done by Autoreset is an unseeded reset: replay reproduces every episode
    checks = list(replay_recording(tmp_path))
    assert [c.status for c in checks] == ["match"] * len(eps), [c.message for c in checks]
