"""RecordingReader.summary(): lengths, returns, ends and seeds without reading observations."""

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.read.storage import LocalStorage


def _record(directory, env_id, steps, **kwargs):
    env = RecordingWrapper(gym.make(env_id, **kwargs), directory, target_batch_bytes=4_000)
    env.action_space.seed(3)
    env.reset(seed=7)
    for t in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset(seed=t if t % 3 == 0 else None)
    env.close()


@pytest.mark.parametrize("env_id,kwargs", [("CartPole-v1", {}),
                                           ("sample_envs/Image-v0",
                                            {"height": 16, "width": 16, "episode_length": 60})])
def test_summary_matches_the_full_episode(tmp_path, env_id, kwargs):
    _record(tmp_path, env_id, 400, **kwargs)
    with RecordingReader(tmp_path) as reader:
        assert len(reader) > 3
        for i, summary in enumerate(reader.summaries()):
            ep = reader[i]
            assert summary.index == i
            assert summary.length == ep.length
            assert summary.total_reward == pytest.approx(float(np.sum(ep.rewards)), abs=0)
            assert (summary.end, summary.seed, summary.sub_env, summary.writer, summary.env_id) == (
                ep.end, ep.seed, ep.sub_env, ep.writer, ep.env_id)
        assert reader.summary(-1) == reader.summary(len(reader) - 1)
        with pytest.raises(IndexError):
            reader.summary(len(reader))


def test_summary_reads_no_observation_bytes(tmp_path):
    _record(tmp_path, "sample_envs/Image-v0", 200, height=32, width=32, episode_length=50)
    read = []

    class CountingStorage(LocalStorage):
        """The local storage, counting the bytes read from .bin files."""

        def readinto(self, name, offset, out):
            read.append(memoryview(out).nbytes)
            super().readinto(name, offset, out)

        def read_range(self, name, offset, size):
            read.append(size)
            return super().read_range(name, offset, size)

    with RecordingReader(CountingStorage(tmp_path)) as reader:
        total = sum(s.length for s in reader.summaries())
        assert total == 200
        # float64 rewards and each batch index's table (held to the batch JSON), no frames
        tables = sum(32 * b["len"] for w in reader.writers for b in w["manifest"]["batches"]
                     if b.get("index"))
        assert sum(read) == total * 8 + tables


def test_summary_refuses_a_bad_rewards_reference(tmp_path):
    import json
    import zlib

    _record(tmp_path, "CartPole-v1", 50)
    manifest_path = next(tmp_path.glob("*.manifest.json"))
    manifest = json.loads(manifest_path.read_bytes())
    batch = manifest["batches"][0]
    doc = json.loads((tmp_path / batch["fn"]).read_bytes())
    doc["episodes"][0]["rewards"]["dtype"] = "<f4"
    doc["episodes"][0]["rewards"]["size"] //= 2
    data = json.dumps(doc).encode()
    (tmp_path / batch["fn"]).write_bytes(data)
    batch["json_size"], batch["json_crc32"] = len(data), zlib.crc32(data)
    manifest_path.write_text(json.dumps(manifest))
    with RecordingReader(tmp_path) as reader, pytest.raises(FormatError, match="rewards"):
        reader.summary(0)
