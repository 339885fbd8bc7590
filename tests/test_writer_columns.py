"""The batch writer's column-wise path: odd row sizes, padding, and errors that drop a batch."""

import json
import math
import os

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder import RecorderError, RecordingReader, RecordingWrapper
from gym_recorder.record.encode import BatchEncoder

from conftest import index_span


def _record(directory, steps, **env_kwargs):
    env = gym.make("sample_envs/FixedLength-v0", **env_kwargs)
    truth = []
    with RecordingWrapper(env, directory, target_batch_bytes=3_000) as rec:
        rec.action_space.seed(0)
        obs, _ = rec.reset(seed=1)
        episode = [obs.copy()]
        for _ in range(steps):
            obs, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
            episode.append(obs.copy())
            if terminated or truncated:
                truth.append(np.stack(episode))
                obs, _ = rec.reset()
                episode = [obs.copy()]
        truth.append(np.stack(episode))
    return truth


@pytest.mark.parametrize("shape,dtype", [((3,), "float32"),    # 12-byte rows: entries at 24n
                                         ((7,), "uint8"),      # 7-byte rows: entries at 56n
                                         ((5, 3, 3), "uint8"),  # 45-byte rows: one write each
                                         ((2,), "float64")])   # 16-byte rows: one block
def test_odd_row_sizes_round_trip_and_stay_aligned(tmp_path, shape, dtype):
    truth = _record(tmp_path, 150, episode_length=7, obs_shape=shape, obs_dtype=dtype)
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader) == len(truth)
        for ep, expected in zip(reader, truth):
            assert ep.observations.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(ep.observations, expected)
    manifest = next(n for n in os.listdir(tmp_path) if n.endswith(".manifest.json"))
    batches = json.loads((tmp_path / manifest).read_bytes())["batches"]
    assert len(batches) > 2
    for b in batches:
        blob = (tmp_path / b["bin"]).read_bytes()
        used = np.zeros(len(blob), bool)
        for entry in json.loads((tmp_path / b["fn"]).read_bytes())["episodes"]:
            for key in ("observations", "actions", "rewards", "terminations", "truncations"):
                ref = entry[key]
                assert ref["npyoff"] % 8 == 0
                arr = np.fromfile(tmp_path / ref["npyfile"], dtype=ref["dtype"],
                                  count=math.prod(ref["shape"]), offset=ref["npyoff"])
                assert arr.nbytes == ref["size"]
                used[ref["npyoff"]:ref["npyoff"] + ref["size"]] = True
        start, stop = index_span(b)  # the batch index's table, the last array
        assert start % 8 == 0 and stop == len(blob)
        used[start:stop] = True
        # Everything not referenced is zero padding.
        assert not np.frombuffer(blob, np.uint8)[~used].any()
        assert len(blob) == 0 or used[-1]  # no padding after the last array


def test_a_batch_that_cannot_be_encoded_is_reported_not_swallowed(tmp_path, monkeypatch):
    rec = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    rec.reset(seed=0)
    for _ in range(5):
        rec.step(0)
    rec.flush()  # one good batch on disk

    def broken(self, *args, **kwargs):
        raise ValueError("simulated encoder bug")

    monkeypatch.setattr(BatchEncoder, "entries", broken)
    for _ in range(3):
        rec.step(1)
    with pytest.raises(RecorderError, match=r"batch of 3 steps could not be encoded and was "
                                            r"dropped: simulated encoder bug"):
        rec.flush()
    monkeypatch.undo()
    rec.close()
    with RecordingReader(tmp_path) as reader:
        assert [ep.length for ep in reader] == [5]  # the first 5 steps, then the part that was lost
        assert reader[0].end is None
