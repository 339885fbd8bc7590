"""A space class of its own whose values are strings (MiniGrid's MissionSpace) is recorded as a
Text, saying so: the reader rebuilds the observation space, info names the class, and the
recording goes to Minari with its env spec. On MiniGrid through minigrid."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium import spaces

from gym_recorder import RecordingReader, RecordingWrapper, cli
from gym_recorder.errors import SpaceKeptAsWarning

from needs import need_module


def _record(directory, steps=12):
    need_module("minigrid", "pip install minigrid")
    import minigrid

    gym.register_envs(minigrid)
    with pytest.warns(SpaceKeptAsWarning, match=r"MissionSpace .* described as Text"):
        env = RecordingWrapper(gym.make("MiniGrid-Empty-5x5-v0"), directory)
    missions = []
    obs, _ = env.reset(seed=4)
    missions.append(obs["mission"])
    for t in range(steps):
        obs, *_ = env.step(t % 3)
        missions.append(obs["mission"])
    env.close()
    return missions


def test_mission_space_is_recorded_as_text_and_the_space_is_rebuilt(tmp_path, capsys):
    missions = _record(tmp_path)
    with RecordingReader(tmp_path) as reader:
        space = reader.observation_space
        assert isinstance(space, spaces.Dict)
        assert isinstance(space["mission"], spaces.Text)
        assert space["image"] == spaces.Box(0, 255, (7, 7, 3), "uint8")
        (ep,) = list(reader)
        assert ep.observations["mission"] == missions
        assert all(m in space["mission"] for m in missions)
    assert cli.main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(Text at ['mission']: a minigrid.core.mission.MissionSpace, recorded as Text)" in out


def test_minigrid_goes_to_minari_and_its_env_comes_back(tmp_path, monkeypatch):
    minari = need_module("minari", 'pip install ".[minari]"')
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    missions = _record(tmp_path / "rec")
    assert cli.main(["export", str(tmp_path / "rec"), "--format", "minari", "--dataset-id",
                     "minigrid/empty-v0"]) == 0
    ds = minari.load_dataset("minigrid/empty-v0")
    assert isinstance(ds.observation_space["mission"], spaces.Text)
    (ep,) = list(ds.iterate_episodes())
    assert list(ep.observations["mission"]) == missions
    env = ds.recover_environment()
    assert env.spec.id == "MiniGrid-Empty-5x5-v0"
    env.close()
