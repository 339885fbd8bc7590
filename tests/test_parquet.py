"""Parquet export: read back with pyarrow, DuckDB and pandas, equal to the transitions."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from gym_recorder import RecordingReader
from gym_recorder.errors import OutputExistsError
from gym_recorder.integrations.parquet import export_parquet
from gym_recorder.training.transitions import transitions, tree_leaves

from needs import need_module
from training_helpers import record


def _expected(rec):
    with RecordingReader(rec) as reader:
        t = transitions(reader)
    cols = {}
    for key, tree in (("obs", t.obs), ("next_obs", t.next_obs), ("action", t.action)):
        for path, leaf in tree_leaves(tree):
            cols[f"{key}.{path}" if path else key] = leaf
    cols.update(reward=t.reward, terminated=t.terminated, truncated=t.truncated,
                episode=t.episode, step=t.step)
    return t, cols


def _from_arrow(pa, column, field=None):
    """A pyarrow column back to one numpy array of rows (a fixed_size_binary column of images
    by the dtype and shape in its field's metadata)."""
    column = column.combine_chunks()
    if pa.types.is_fixed_size_binary(column.type):
        dtype = np.dtype(field.metadata[b"gym_recorder.dtype"].decode())
        shape = json.loads(field.metadata[b"gym_recorder.shape"])
        return np.frombuffer(column.buffers()[1], dtype).reshape(len(column), *shape)
    shape, flat = [], column
    while pa.types.is_fixed_size_list(flat.type):  # nested for rows of 2 or more dimensions
        shape.append(flat.type.list_size)
        flat = flat.flatten()
    return flat.to_numpy(zero_copy_only=False).reshape(len(column), *shape)


@pytest.mark.parametrize("env_id, kwargs, episodes", [
    ("CartPole-v1", {}, 30),
    ("sample_envs/Image-v0", {"height": 12, "width": 10, "episode_length": 9}, 5),
    ("sample_envs/NestedDict-v0", {"episode_length": 6}, 4),
])
def test_parquet_reads_back_equal(tmp_path, env_id, kwargs, episodes):
    pa = need_module("pyarrow", 'pip install ".[arrow]"')
    pads = need_module("pyarrow.dataset", 'pip install ".[arrow]"')
    duckdb = need_module("duckdb", 'pip install ".[test]"')
    rec = tmp_path / "rec"
    record(rec, env_id, episodes, seed=4, env_kwargs=kwargs)
    t, cols = _expected(rec)
    out = tmp_path / "out"
    row_bytes = sum(v.itemsize * int(np.prod(v.shape[1:])) for v in cols.values())
    result = export_parquet(rec, out, max_file_bytes=row_bytes * 40)
    files = sorted(os.listdir(out / "data"))
    n = -(-len(t) // 40)
    assert files == [f"train-{k:05d}-of-{n:05d}.parquet" for k in range(n)]
    assert sorted(os.listdir(out)) == ["README.md", "data", "gym_recorder.json"]
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".out")]
    assert result["steps"] == len(t) and result["files"] == n
    table = pads.dataset(out / "data", format="parquet").to_table()
    assert table.column_names == list(cols)
    assert table.num_rows == len(t)
    for name, expected in cols.items():
        got = _from_arrow(pa, table.column(name), table.schema.field(name))
        assert got.dtype == expected.dtype, name
        assert got.shape == expected.shape, name
        assert np.array_equal(got, expected), name
    # DuckDB reads the same files, by glob, with no help
    con = duckdb.connect()
    glob = str(out / "data" / "*.parquet")
    got = con.execute(f"SELECT episode, step, reward, terminated, truncated FROM "
                      f"read_parquet('{glob}') ORDER BY episode, step").fetchnumpy()
    for name in ("episode", "step", "reward", "terminated", "truncated"):
        assert np.array_equal(np.asarray(got[name]), cols[name]), f"duckdb {name}"
    first = [k for k, v in cols.items() if k.startswith("obs")][0]
    row = con.execute(f'SELECT "{first}" FROM read_parquet(\'{glob}\') '
                      f"WHERE episode = 1 AND step = 2").fetchone()[0]
    k = int(np.flatnonzero((t.episode == 1) & (t.step == 2))[0])
    if isinstance(row, bytes):  # (rows of 2 or more dimensions: their bytes)
        row = np.frombuffer(row, cols[first].dtype)
    assert np.array_equal(np.asarray(row).reshape(np.shape(cols[first][k])), cols[first][k])
    meta = json.loads((out / "gym_recorder.json").read_text())
    assert meta["env_id"] == env_id and meta["steps"] == len(t)
    assert [e["length"] for e in meta["episodes"]] == np.diff(t.starts).tolist()
    assert meta["episodes"][0]["seed"] == 4
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "path: data/*.parquet" in card
    assert f"{episodes} episodes, {len(t)} steps of `{env_id}`" in card


def test_parquet_images_are_tensor_columns_and_pandas_reads_them(tmp_path):
    pa = need_module("pyarrow", 'pip install ".[arrow]"')
    pq = need_module("pyarrow.parquet", 'pip install ".[arrow]"')
    pd = need_module("pandas", 'pip install ".[test]"')
    rec = tmp_path / "rec"
    record(rec, "sample_envs/Image-v0", 2, env_kwargs={"height": 6, "width": 4,
                                                       "episode_length": 5})
    export_parquet(rec, tmp_path / "out")
    path = tmp_path / "out" / "data" / "train-00000-of-00001.parquet"
    schema = pq.read_schema(path)
    assert schema.field("obs").type == pa.binary(6 * 4 * 3)
    assert schema.field("obs").metadata == {b"gym_recorder.dtype": b"|u1",
                                            b"gym_recorder.shape": b"[6, 4, 3]"}
    frame = pd.read_parquet(path)
    t, cols = _expected(rec)
    obs = np.stack([np.frombuffer(b, np.uint8).reshape(6, 4, 3) for b in frame["obs"]])
    assert np.array_equal(obs, cols["obs"])
    assert frame["reward"].to_numpy().tolist() == cols["reward"].tolist()
    assert frame["step"].to_numpy().tolist() == cols["step"].tolist()


def test_parquet_output_that_exists_is_refused_and_untouched(tmp_path):
    need_module("pyarrow", 'pip install ".[arrow]"')
    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="out exists"):
        export_parquet(rec, out)
    assert os.listdir(out) == ["keep.txt"]
    assert sorted(os.listdir(tmp_path)) == ["out", "rec"]


class _Widening:
    """An env whose float32 Box observations come as float64 from step 150 on (the recorder
    keeps them exactly: the leaf is widened in the batches concerned)."""

    @staticmethod
    def make():
        import gymnasium as gym

        class Env(gym.Env):
            observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
            action_space = gym.spaces.Discrete(2)
            t = 0

            def reset(self, *, seed=None, options=None):
                return np.zeros(2, np.float32), {}

            def step(self, a):
                self.t += 1
                dtype = np.float64 if self.t > 150 else np.float32
                return (np.full(2, 0.1, dtype) + self.t, 1.0, self.t % 10 == 0, False, {})
        return Env()


def test_parquet_leaf_widened_in_later_batches_is_exported_wide_whatever_the_file_size(tmp_path):
    pa = need_module("pyarrow", 'pip install ".[arrow]"')
    pq = need_module("pyarrow.parquet", 'pip install ".[arrow]"')
    import warnings

    from gym_recorder import RecordingWrapper

    rec = tmp_path / "rec"
    env = RecordingWrapper(_Widening.make(), rec, target_batch_bytes=1500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env.reset()
        for _ in range(300):
            if env.step(0)[2]:
                env.reset()
        env.close()
    t, cols = _expected(rec)
    assert cols["obs"].dtype == np.float64
    for k, size in enumerate((256 << 20, 500)):
        out = tmp_path / f"out{k}"
        result = export_parquet(rec, out, max_file_bytes=size)
        assert result["columns"]["obs"]["dtype"] == "float64"
        meta = json.loads((out / "gym_recorder.json").read_text())
        assert meta["columns"]["next_obs"]["dtype"] == "float64"
        table = pa.concat_tables([pq.read_table(out / "data" / f)
                                  for f in sorted(os.listdir(out / "data"))])
        for name in ("obs", "next_obs"):
            got = _from_arrow(pa, table.column(name), table.schema.field(name))
            assert got.dtype == np.float64
            np.testing.assert_array_equal(got, cols[name])


def test_parquet_refuses_colliding_names_and_empty_rows_leaving_nothing(tmp_path):
    need_module("pyarrow", 'pip install ".[arrow]"')
    import gymnasium as gym

    from gym_recorder import RecordingWrapper
    from gym_recorder.errors import UnsupportedSpaceError

    class Env(gym.Env):
        action_space = gym.spaces.Discrete(2)

        def __init__(self, space):
            self.observation_space = space

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, a):
            return self.observation_space.sample(), 0.0, True, False, {}

    spaces = {
        "collide": (gym.spaces.Dict({"a.b": gym.spaces.Discrete(3),
                                     "a": gym.spaces.Dict({"b": gym.spaces.Discrete(3)})}),
                    "column obs.a.b: two leaves"),
        "empty": (gym.spaces.Box(0, 1, (0,), np.float32), r"rows of shape \(0,\) hold no values"),
    }
    for name, (space, match) in spaces.items():
        rec = tmp_path / name
        env = RecordingWrapper(Env(space), rec)
        env.reset(seed=0)
        env.step(0)
        env.close()
        with pytest.raises(UnsupportedSpaceError, match=match):
            export_parquet(rec, tmp_path / f"out-{name}")
    assert sorted(os.listdir(tmp_path)) == ["collide", "empty"]


def test_parquet_of_one_env_of_a_mixed_directory_describes_that_env(tmp_path, capsys):
    need_module("pyarrow", 'pip install ".[arrow]"')
    from gym_recorder import cli
    from gym_recorder.read.envgroups import MixedEnvsWarning
    from gym_recorder.errors import UnsupportedSpaceError

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 2)
    with pytest.warns(MixedEnvsWarning):
        record(rec, "Pendulum-v1", 1, env_kwargs={"max_episode_steps": 10})
    with pytest.raises(UnsupportedSpaceError, match="different spaces"):
        export_parquet(rec, tmp_path / "all")
    assert cli.main(["export", str(rec), "--format", "parquet", "-o", str(tmp_path / "p"),
                     "--env", "Pendulum-v1"]) == 0
    assert "1 episodes, 10 steps" in capsys.readouterr().out
    meta = json.loads((tmp_path / "p" / "gym_recorder.json").read_text())
    assert meta["env_id"] == "Pendulum-v1" and meta["env_spec"]["id"] == "Pendulum-v1"
    assert meta["observation_space"]["shape"] == [3] and meta["columns"]["obs"]["shape"] == [3]
    card = (tmp_path / "p" / "README.md").read_text()
    assert "# Pendulum-v1, recorded with gym_recorder" in card and "CartPole" not in card
    assert sorted(os.listdir(tmp_path)) == ["p", "rec"]


def test_parquet_images_read_back_in_polars_and_hugging_face_datasets(tmp_path):
    """Rows of 2 or more dimensions are fixed_size_binary (nested fixed-size lists read at
    40 MB/s): polars and datasets give their bytes, which the recorded dtype and shape turn
    back into the frames."""
    need_module("pyarrow", 'pip install ".[arrow]"')
    rec = tmp_path / "rec"
    record(rec, "sample_envs/Image-v0", 2, env_kwargs={"height": 6, "width": 4,
                                                       "episode_length": 5})
    export_parquet(rec, tmp_path / "out")
    t, cols = _expected(rec)
    pl = need_module("polars", 'pip install ".[test]"')
    frame = pl.read_parquet(tmp_path / "out" / "data" / "*.parquet")
    meta = json.loads((tmp_path / "out" / "gym_recorder.json").read_text())["columns"]["obs"]
    assert meta == {"dtype": "uint8", "shape": [6, 4, 3]}
    obs = np.frombuffer(b"".join(frame["obs"].to_list()), meta["dtype"]).reshape(
        -1, *meta["shape"])
    assert np.array_equal(obs, cols["obs"])
    hf = need_module("datasets", 'pip install ".[test]"')
    ds = hf.load_dataset("parquet", data_dir=str(tmp_path / "out" / "data"), split="train",
                         cache_dir=str(tmp_path / "hf_cache"))
    got = ds.with_format("numpy", dtype=None)[:]  # (datasets' numpy default: float32, int64)
    for name in ("obs", "next_obs"):
        frames = np.frombuffer(got[name].tobytes(), np.uint8).reshape(-1, 6, 4, 3)
        assert np.array_equal(frames, cols[name]), name
    for name in ("reward", "episode"):
        assert got[name].dtype == cols[name].dtype, name
        assert np.array_equal(got[name], cols[name]), name
