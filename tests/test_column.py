"""RecordingReader.column: one field of many episodes as one array, read straight into its rows."""

from __future__ import annotations

import json
import zlib

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TransformObservation

import sample_envs  # noqa: F401
from gym_recorder import (ChecksumError, FormatError, RecordingClosedError, RecordingReader,
                          RecordingWrapper)
from gym_recorder.read import gather as gather_module
from gym_recorder.read.envgroups import MixedEnvsWarning
from gym_recorder.errors import EmptySelectionError, OutsideSpaceWarning, UnsupportedSpaceError

from conftest import assert_same, run_random
from test_legacy import make_legacy

FIELDS = ["observations", "actions", "rewards", "terminations", "truncations"]


def _joined(values):
    """What concatenating one field of many episodes gives, leaf by leaf."""
    first = values[0]
    if isinstance(first, dict):
        return {k: _joined([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(_joined([v[i] for v in values]) for i in range(len(first)))
    if all(isinstance(v, np.ndarray) for v in values):
        return np.concatenate(values)
    return [row for v in values for row in v]


def _check_all_fields(reader, episodes=None):
    indices = range(len(reader)) if episodes is None else episodes
    eps = [reader[i] for i in indices]
    for name in FIELDS:
        got = reader.column(name, episodes)
        assert_same(got, _joined([getattr(ep, name) for ep in eps]), name)


@pytest.fixture(params=["one thread", "threads"])
def read_threads(request, monkeypatch):
    """Runs a test with the reads in this thread, and split over READ_THREADS threads."""
    if request.param == "threads":
        monkeypatch.setattr(gather_module, "PARALLEL_READ_BYTES", 0)
    return request.param


def test_cartpole_two_writers(tmp_path, read_threads):
    for seed in (0, 1):
        with RecordingWrapper(gym.make("CartPole-v1"), tmp_path) as env:
            run_random(env, 3_000, seed=seed, reset_seed=seed)
    with RecordingReader(tmp_path) as reader:
        assert len(reader.writers) == 2 and len(reader) > 100
        _check_all_fields(reader)
        obs = reader.column()
        # 6,000 steps, and one observation row more per episode (its reset)
        assert obs.dtype == np.float32 and obs.shape == (6_000 + len(reader), 4)
        picked = [len(reader) - 1, 0, 5, -2, 5]  # any order, repeats, negative indices
        _check_all_fields(reader, picked)


@pytest.mark.parametrize("verify", [False, True])
def test_images_spanning_many_batches(tmp_path, verify, read_threads):
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=300), tmp_path, target_batch_bytes=20_000)
    run_random(env, 1_000, seed=3, reset_seed=3)
    env.close()
    with RecordingReader(tmp_path, verify=verify) as reader:
        assert reader.writers[0]["batches"] > 20
        _check_all_fields(reader)
        obs = reader.column()
        want = np.concatenate([ep.observations for ep in reader])
    assert obs.base is None  # one array the caller owns
    for p in tmp_path.iterdir():
        p.unlink()
    np.testing.assert_array_equal(obs, want)  # valid with the reader closed and the files gone


def test_nested_dict_and_tuple(tmp_path, read_threads):
    with RecordingWrapper(gym.make("sample_envs/NestedDict-v0"), tmp_path,
                          target_batch_bytes=4_000) as env:
        run_random(env, 400, seed=1, reset_seed=1)
    with RecordingReader(tmp_path) as reader:
        assert reader.writers[0]["batches"] > 2
        _check_all_fields(reader)
        assert isinstance(reader.column(), dict) and isinstance(reader.column("actions"), dict)


def test_text_leaves_come_back_as_lists(tmp_path):
    with RecordingWrapper(gym.make("sample_envs/Text-v0"), tmp_path) as env:
        run_random(env, 200, seed=2, reset_seed=2)
    with RecordingReader(tmp_path) as reader:
        obs = reader.column()
        assert isinstance(obs, list) and all(isinstance(s, str) for s in obs)
        _check_all_fields(reader)


def test_values_outside_the_space_and_a_widened_leaf(tmp_path):
    n = {"steps": 0}

    def change(obs):
        n["steps"] += 1
        return obs.astype(np.float64) / 3 if n["steps"] > 150 else obs

    inner = TransformObservation(gym.make("CartPole-v1"), change,
                                 gym.make("CartPole-v1").observation_space)
    with pytest.warns(OutsideSpaceWarning, match="dtype float64"):
        with RecordingWrapper(inner, tmp_path, target_batch_bytes=2_000) as env:
            run_random(env, 400, seed=4, reset_seed=4)
    with RecordingReader(tmp_path) as reader:
        dtypes = {ep.observations.dtype for ep in reader}
        assert dtypes == {np.dtype(np.float32), np.dtype(np.float64)}
        obs = reader.column()
        assert obs.dtype == np.float64
        np.testing.assert_array_equal(obs, np.concatenate([ep.observations for ep in reader]))
    grow = tmp_path / "grow"

    def grow_every_other(obs):
        n["steps"] += 1
        return np.append(obs, 1.5) if n["steps"] % 2 else obs

    inner = TransformObservation(gym.make("CartPole-v1"), grow_every_other,
                                 gym.make("CartPole-v1").observation_space)
    with pytest.warns(OutsideSpaceWarning):
        with RecordingWrapper(inner, grow, target_batch_bytes=400) as env:
            run_random(env, 60, seed=5, reset_seed=5)
    with RecordingReader(grow) as reader:
        obs = reader.column()
        want = [row for ep in reader for row in ep.observations]
        assert isinstance(obs, list) and len(obs) == len(want)
        for got, row in zip(obs, want):
            assert got.dtype == row.dtype and np.array_equal(got, row)
        _check_all_fields(reader)


def test_legacy_writers(tmp_path):
    make_legacy(tmp_path)  # CartPole-like episodes 0-3, then image episodes 4-5
    with RecordingReader(tmp_path) as reader:
        assert all(w["legacy"] for w in reader.writers)
        _check_all_fields(reader, [0, 1, 2, 3])
        _check_all_fields(reader, [4, 5])
        with pytest.raises(UnsupportedSpaceError, match=r"rows of different shapes"):
            reader.column()
    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path) as env:
        run_random(env, 20, seed=0, reset_seed=0)
    with RecordingReader(tmp_path) as reader:
        new = [i for i in range(len(reader)) if reader[i].writer == reader.writers[-1]["prefix"]]
        with pytest.raises(UnsupportedSpaceError, match="different spaces"):
            reader.column()
        _check_all_fields(reader, new)


def test_writers_of_different_envs_are_refused_by_name(tmp_path):
    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path) as env:
        run_random(env, 50, seed=0, reset_seed=0)
    with pytest.warns(MixedEnvsWarning), RecordingWrapper(
            gym.make("sample_envs/Image-v0", height=8, width=8, episode_length=10),
            tmp_path) as env:
        run_random(env, 30, seed=0, reset_seed=0)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(UnsupportedSpaceError, match="observations of different spaces"):
            reader.column()
        image = [i for i in range(len(reader)) if reader[i].env_id != "CartPole-v1"]
        assert reader.column(episodes=image).shape == (30 + len(image), 8, 8, 3)
        for name in ("rewards", "terminations", "truncations"):  # one leaf whatever the env
            assert_same(reader.column(name), _joined([getattr(ep, name) for ep in reader]),
                         name)


def test_bad_requests_are_named(tmp_path):
    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path) as env:
        run_random(env, 50, seed=0, reset_seed=0)
    reader = RecordingReader(tmp_path)
    with pytest.raises(ValueError, match="no column 'infos'"):
        reader.column("infos")
    with pytest.raises(EmptySelectionError):
        reader.column(episodes=[])
    with pytest.raises(IndexError):
        reader.column(episodes=[len(reader)])
    with pytest.raises(TypeError):
        reader.column(episodes=["0"])
    reader.close()
    with pytest.raises(RecordingClosedError):
        reader.column()


def _image_recording(directory):
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=200), directory, target_batch_bytes=20_000)
    run_random(env, 400, seed=6, reset_seed=6)
    env.close()
    manifest_path = next(p for p in directory.iterdir() if p.name.endswith(".manifest.json"))
    return manifest_path, json.loads(manifest_path.read_bytes())


def test_a_reference_outside_its_file_is_refused_as_reading_the_episode_is(tmp_path):
    manifest_path, manifest = _image_recording(tmp_path)
    batch = manifest["batches"][len(manifest["batches"]) // 2]
    doc = json.loads((tmp_path / batch["fn"]).read_bytes())
    doc["episodes"][0]["observations"]["npyoff"] = (batch["bin_size"] + 7) // 8 * 8
    data = json.dumps(doc).encode()
    (tmp_path / batch["fn"]).write_bytes(data)
    batch["json_size"], batch["json_crc32"] = len(data), zlib.crc32(data)
    # (The batch index, when the BATCH has one, says where the arrays are without the JSON:
    # reading through it does not see the changed reference, which verify reports.)
    index = batch.pop("index")
    manifest_path.write_text(json.dumps(manifest))
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError) as by_episode:
            list(reader)
        with pytest.raises(FormatError) as by_column:
            reader.column()
    assert str(by_column.value) == str(by_episode.value)
    assert "outside" in str(by_column.value) and batch["bin"] in str(by_column.value)
    # The index's own offsets outside the file: refused through it, naming the batch.
    index["columns"][0][1] = (batch["bin_size"] + 7) // 8 * 8
    batch["index"] = index
    manifest_path.write_text(json.dumps(manifest))
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError, match=r"index column 0 places arrays beyond the end"):
            reader.column()


def test_a_flipped_byte_is_found_with_verify(tmp_path, read_threads):
    _, manifest = _image_recording(tmp_path)
    with RecordingReader(tmp_path) as reader:
        before = reader.column()
    batch = manifest["batches"][-2]
    doc = json.loads((tmp_path / batch["fn"]).read_bytes())
    path = tmp_path / batch["bin"]
    data = bytearray(path.read_bytes())
    data[doc["episodes"][0]["observations"]["npyoff"] + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with RecordingReader(tmp_path) as reader:
        assert (reader.column() != before).sum() == 1  # without verify: read, one byte differs
    with RecordingReader(tmp_path, verify=True) as reader, pytest.raises(ChecksumError):
        reader.column()


def test_writers_whose_leaves_differ_only_in_dtype_are_refused(tmp_path):
    """int64 and uint64 Box leaves of one shape meet in float64, which rounds 2**62 + 1: the
    column refuses them by name instead of joining them."""
    from gymnasium import spaces

    class Big(gym.Env):
        action_space = spaces.Discrete(2)

        def __init__(self, dtype):
            self.observation_space = spaces.Box(0, 2**62, (1,), dtype)

        def reset(self, *, seed=None, options=None):
            return np.array([2**62 + 1], self.observation_space.dtype), {}

        def step(self, action):
            return np.array([2**62 + 3], self.observation_space.dtype), 0.0, True, False, {}

    for dtype in (np.int64, np.uint64):
        with RecordingWrapper(Big(dtype), tmp_path) as env:
            env.reset(seed=0)
            env.step(0)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(UnsupportedSpaceError, match="observations of different spaces"):
            reader.column()
        for k, dtype in enumerate((np.int64, np.uint64)):
            got = reader.column(episodes=[k])
            assert got.dtype == dtype and got.ravel().tolist() == [2**62 + 1, 2**62 + 3]
