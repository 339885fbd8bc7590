"""Numeric infos become columns of the npz and Parquet exports (MuJoCo users plot x_velocity and
reward_ctrl); others are named as left out, once. On HalfCheetah-v5 through gymnasium[mujoco]."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingWrapper, cli

from needs import need_module


class ExtraInfos(gym.Wrapper):
    """Adds a nested numeric info, a string, and a key only some steps have."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t = getattr(self, "t", 0) + 1
        info = dict(info, nested={"speed": np.float32(self.t)}, label=f"step {self.t}")
        if self.t % 2:
            info["odd"] = self.t
        return obs, reward, terminated, truncated, info


def _record(directory):
    need_module("mujoco", 'pip install "gymnasium[mujoco]"')
    env = RecordingWrapper(ExtraInfos(gym.make("HalfCheetah-v5", max_episode_steps=10)),
                           directory)
    env.action_space.seed(1)
    truth = []
    for seed in (0, 1):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            truth.append(info)
            done = terminated or truncated
    env.close()
    return truth


def test_npz_has_a_column_per_numeric_info(tmp_path, capsys):
    truth = _record(tmp_path / "rec")
    out = tmp_path / "rec.npz"
    assert cli.main(["export", str(tmp_path / "rec"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "info 'label' not exported: not a number (a str at step row 0)" in printed
    d = np.load(out)
    for key in ("x_velocity", "reward_ctrl", "reward_forward", "x_position"):
        col = d[f"infos/{key}"]
        assert col.dtype == np.asarray(truth[0][key]).dtype and len(col) == 20
        assert col.tolist() == [i[key].item() if hasattr(i[key], "item") else i[key]
                                for i in truth]
    assert d["infos/nested/speed"].dtype == np.float32
    assert d["infos/nested/speed"].tolist() == list(range(1, 21))
    assert d["infos_present/odd"].tolist() == [t % 2 == 1 for t in range(1, 21)]
    assert d["infos/odd"][d["infos_present/odd"]].tolist() == list(range(1, 21, 2))
    assert "infos/label" not in d and "infos_present/x_velocity" not in d


def test_parquet_has_info_columns_with_nulls_where_a_step_lacks_the_key(tmp_path):
    pq = need_module("pyarrow.parquet", 'pip install ".[arrow]"')
    truth = _record(tmp_path / "rec")
    out = tmp_path / "pq"
    assert cli.main(["export", str(tmp_path / "rec"), "--format", "parquet", "-o", str(out),
                     "-q"]) == 0
    table = pq.read_table(out / "data")
    assert table.column("info.x_velocity").to_pylist() == [i["x_velocity"] for i in truth]
    assert table.column("info.reward_ctrl").to_pylist() == [i["reward_ctrl"] for i in truth]
    assert str(table.schema.field("info.nested.speed").type) == "float"
    assert table.column("info.odd").to_pylist() == [i.get("odd") for i in truth]
    assert "info.label" not in table.column_names
    import json

    meta = json.loads((out / "gym_recorder.json").read_text())
    assert meta["infos_left_out"] == {"label": "not a number (a str at step row 0)"}
    assert meta["columns"]["info.x_velocity"] == {
        "dtype": str(np.asarray(truth[0]["x_velocity"]).dtype), "shape": []}


def test_parquet_without_infos(tmp_path):
    pq = need_module("pyarrow.parquet", 'pip install ".[arrow]"')
    _record(tmp_path / "rec")
    out = tmp_path / "pq"
    assert cli.main(["export", str(tmp_path / "rec"), "--format", "parquet", "-o", str(out),
                     "--no-infos", "-q"]) == 0
    names = pq.read_table(out / "data").column_names
    assert "reward" in names and not [n for n in names if n.startswith("info.")]
