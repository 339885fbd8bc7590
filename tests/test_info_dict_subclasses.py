"""Infos holding dict subclasses (collections.OrderedDict, defaultdict: PettingZoo's conversions and
many envs return them) are recorded as plain dicts of their items, on a real env."""

from collections import OrderedDict, defaultdict

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingReader, RecordingWrapper


class SubclassInfos(gym.Wrapper):
    """CartPole whose infos are OrderedDicts holding a defaultdict per step, as PettingZoo's
    aec_to_parallel builds its per-agent rewards."""

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, OrderedDict(info, start=OrderedDict(b=1, a=np.float32(2.5)))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        per_agent = defaultdict(int)
        per_agent["agent_0"] += 1
        per_agent["agent_1"] += int(action)
        info = OrderedDict(info)
        info["rewards"] = per_agent
        info["pos"] = float(obs[0])
        return obs, reward, terminated, truncated, info


def test_dict_subclasses_in_infos_are_stored_as_dicts(tmp_path):
    env = RecordingWrapper(SubclassInfos(gym.make("CartPole-v1")), tmp_path)
    obs, _ = env.reset(seed=3)
    truth = []
    for t in range(12):
        action = t % 2
        obs, _, term, trunc, _ = env.step(action)
        truth.append((action, float(obs[0])))
        if term or trunc:
            break
    env.close()
    with RecordingReader(tmp_path) as reader:
        (ep,) = list(reader)
    assert ep.infos[0] == {"start": {"b": 1, "a": np.float32(2.5)}}
    assert type(ep.infos[0]["start"]) is dict and list(ep.infos[0]["start"]) == ["b", "a"]
    assert type(ep.infos[0]["start"]["a"]) is np.float32
    for info, (action, x) in zip(ep.infos[1:], truth, strict=True):
        assert type(info["rewards"]) is dict
        assert info["rewards"] == {"agent_0": 1, "agent_1": action}
        assert info["pos"] == x
