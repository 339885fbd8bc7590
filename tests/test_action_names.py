"""The manifest's optional ``action_names``: kept at record time when the env names its actions."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
from needs import need_module

from gym_recorder import RecordingReader, RecordingVectorWrapper, RecordingWrapper


def manifest(directory) -> dict:
    (path,) = directory.glob("*.manifest.json")
    return json.loads(path.read_text())


def test_ale_action_names_are_kept_in_manifest_and_batch_header(tmp_path):
    ale_py = need_module("ale_py", "pip install ale-py")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5")
    expected = env.unwrapped.get_action_meanings()
    rec = RecordingWrapper(env, tmp_path)
    rec.reset(seed=0)
    for a in (0, 1, 2):
        rec.step(a)
    rec.close()
    assert manifest(tmp_path)["action_names"] == expected == [
        "NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
    (batch,) = tmp_path.glob("*.ep*.json")
    assert json.loads(batch.read_text())["header"]["action_names"] == expected
    with RecordingReader(tmp_path) as reader:  # readers ignore it
        np.testing.assert_array_equal(reader[0].actions, [0, 1, 2])


def test_vector_ale_names_and_none_for_envs_without_names(tmp_path):
    ale_py = need_module("ale_py", "pip install ale-py")
    gym.register_envs(ale_py)
    vec = gym.make_vec("ALE/Breakout-v5", num_envs=2, vectorization_mode="sync")
    rec = RecordingVectorWrapper(vec, tmp_path / "vec")
    rec.reset(seed=0)
    rec.step(np.array([1, 3]))
    rec.close()
    assert manifest(tmp_path / "vec")["action_names"] == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    rec = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "cp")
    rec.reset(seed=0)
    rec.step(0)
    rec.close()
    assert "action_names" not in manifest(tmp_path / "cp")  # absent, as in older files
