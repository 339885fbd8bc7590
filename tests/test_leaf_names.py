"""Exports name leaves by their paths: two leaves of one name are refused, never overwritten.

A Dict key holding the separator ("a/b" for npz, "a.b" for Parquet and Ray) beside a nested
Dict ({"a": {"b": ...}}) gives two leaves one name; writing both under it would lose one.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import UnsupportedSpaceError
from gym_recorder.integrations.export import export_npz
from needs import need_module


class _TwoKeys(gym.Env):
    """Observations {"a<sep>b": Box(2,), "a": {"b": Box(3,)}}."""

    action_space = spaces.Discrete(2)

    def __init__(self, sep: str) -> None:
        self.observation_space = spaces.Dict({
            f"a{sep}b": spaces.Box(0, 1, (2,), np.float32),
            "a": spaces.Dict({"b": spaces.Box(0, 1, (3,), np.float32)})})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, True, False, {}


def _record(directory, sep):
    with RecordingWrapper(_TwoKeys(sep), directory) as env:
        env.reset(seed=0)
        env.step(0)
    with RecordingReader(directory) as reader:  # the recording itself keeps both leaves
        obs = reader[0].observations
        assert obs[f"a{sep}b"].shape == (2, 2) and obs["a"]["b"].shape == (2, 3)


def test_npz_refuses_two_leaves_of_one_name(tmp_path):
    _record(tmp_path / "rec", "/")
    with pytest.raises(UnsupportedSpaceError, match=r"observations/a/b: two leaves"):
        export_npz(tmp_path / "rec", tmp_path / "out.npz")
    assert not (tmp_path / "out.npz").exists()
    _record(tmp_path / "dots", ".")  # ("a.b" and "a/b" differ here: exported as they are)
    export_npz(tmp_path / "dots", tmp_path / "dots.npz")
    with np.load(tmp_path / "dots.npz") as npz:
        assert {"observations/a.b", "observations/a/b"} <= set(npz.files)


def test_parquet_refuses_two_leaves_of_one_name(tmp_path):
    need_module("pyarrow", 'pip install ".[arrow]"')
    from gym_recorder.integrations.parquet import export_parquet

    _record(tmp_path / "rec", ".")
    with pytest.raises(UnsupportedSpaceError, match=r"column obs\.a\.b: two leaves"):
        export_parquet(tmp_path / "rec", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("ray_cluster")
def test_ray_refuses_two_leaves_of_one_name(tmp_path):
    need_module("ray.data", 'pip install ".[ray]"')
    from gym_recorder.integrations.ray import read_recording

    _record(tmp_path / "rec", ".")
    with pytest.raises(UnsupportedSpaceError, match=r"column obs\.a\.b: two leaves"):
        read_recording(tmp_path / "rec")
