"""What of a recording Minari can hold (gym_recorder.integrations.minari_fit), checked on the
spaces of real envs and on the infos a recording gives back: each key or space left out is named
with the reason (needs no Minari: these are the checks made before Minari is called)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import UnsupportedSpaceError
from gym_recorder.integrations.minari_fit import (check_minari_space, check_space,
                                                  infos_for_minari, metadata_from_minari,
                                                  minari_metadata)


class InfoEnv(gym.Wrapper):
    """CartPole with infos of every kind a user's env gives (Minari stacks the reset's info
    with the steps': a key must be in every one)."""

    def _info(self) -> dict:
        t = self.t
        info = {"score": t * 1.5, "pos": {"x": np.int32(t), "y": np.float32(0.5)}}
        info.update({"label": "go", "sometimes": 1} if t % 2 else {"label": "stop", "a/b": 2})
        return info

    def reset(self, **kwargs):
        obs, _ = self.env.reset(**kwargs)
        self.t = 0
        return obs, self._info()

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.t += 1
        return obs, reward, terminated, truncated, self._info()


def test_infos_of_a_recorded_episode_stack_or_are_named(tmp_path):
    env = RecordingWrapper(InfoEnv(gym.make("CartPole-v1")), tmp_path / "rec")
    env.reset(seed=3)
    for _ in range(4):
        env.step(0)
    env.close()
    with RecordingReader(tmp_path / "rec") as reader:
        infos = reader[0].infos
    dropped: dict[str, str] = {}
    out = infos_for_minari(infos, dropped)
    assert sorted(out) == ["pos", "score"]
    assert out["score"].tolist() == [0.0, 1.5, 3.0, 4.5, 6.0]
    assert out["pos"]["x"].dtype == np.int32 and out["pos"]["x"].tolist() == [0, 1, 2, 3, 4]
    assert out["pos"]["y"].dtype == np.float32
    assert dropped == {"label": "Minari keeps only numbers and arrays in infos, not str",
                       "sometimes": "it is not in every step's info (Minari stacks infos)",
                       "a/b": "Minari needs string keys without '/'"}


def test_infos_that_change_shape_or_keys_are_named():
    dropped: dict[str, str] = {}
    rows = [{"v": np.zeros(2), "d": {"a": 1}}, {"v": np.zeros(3), "d": {"b": 1}}]
    assert infos_for_minari(rows, dropped) == {}
    assert dropped == {"v": "its values change dtype or shape between steps",
                       "d": "its dicts have different keys in different steps"}


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1"])
def test_the_spaces_of_real_envs_fit(env_id):
    env = gym.make(env_id)
    for space in (env.observation_space, env.action_space):
        check_space(space, env_id)
        check_minari_space(space, env_id)
    env.close()


def test_spaces_minari_cannot_store_are_refused_by_name():
    graph = gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None)
    with pytest.raises(UnsupportedSpaceError, match=r"rec: Minari cannot store a Graph space"):
        check_minari_space(graph, "rec")
    slash = gym.spaces.Dict({"a/b": gym.spaces.Discrete(2)})
    with pytest.raises(UnsupportedSpaceError, match=r"the Dict key 'a/b'"):
        check_minari_space(slash, "rec")
    with pytest.raises(UnsupportedSpaceError, match="rec: the recording describes no space"):
        check_minari_space(None, "rec")
    with pytest.raises(UnsupportedSpaceError, match=r"obs\['mission'\] is a MissionSpace"):
        check_space(None, "obs", {"type": "Dict", "spaces": [
            ["mission", {"type": "unknown", "class": "MissionSpace"}]]})


def test_metadata_keeps_the_string_keys_minari_has():
    manifest = {"metadata": {"author": "Ada", "code_permalink": "https://x", "description": "d",
                             "author_email": 7, "notes": "not Minari's"}}
    assert minari_metadata(manifest, has_description=False) == {
        "author": "Ada", "code_permalink": "https://x", "description": "d"}
    assert "description" not in minari_metadata(manifest, has_description=True)

    class Storage:
        metadata = {"author": {"Bo", "Al"}, "algorithm_name": "", "description": "demo"}

    class Dataset:
        storage = Storage()

    assert metadata_from_minari(Dataset(), "ns/name-v0") == {
        "minari_dataset_id": "ns/name-v0", "author": ["Al", "Bo"], "description": "demo"}
