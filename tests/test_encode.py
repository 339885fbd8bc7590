"""gym_recorder.record.encode on its own: a Batch from the buffer encoded to a batch JSON and a .bin,
then read back through the reader's decode path (gym_recorder.read.decode), on real envs."""

import io
import json
import zlib

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder.record.buffer import StepBuffer
from gym_recorder.read.decode import Decoder
from gym_recorder.record.encode import BatchEncoder
from gym_recorder.format import ALIGNMENT, BASE_VERSION, FORMAT_NAME
from gym_recorder.format.spaces import Layout
from gym_recorder.read.storage import LocalStorage
from gym_recorder.record.wrapper import env_header

BIN, JSON = "p.ep000000007.bin", "p.ep000000007.json"


def leaves(tree):
    """The ARRAY references of a TREE, in leaf order (dict keys in the written order)."""
    if isinstance(tree, dict) and tree.get("__type") == "ndarray":
        return [tree]
    if isinstance(tree, dict):
        return [r for v in tree.values() for r in leaves(v)]
    return [r for v in tree for r in leaves(v)]


def a_batch(env_id, steps, **kwargs):
    env = gym.make(env_id, **kwargs)
    header = env_header(env, env.observation_space, env.action_space)
    obs_l, act_l = Layout(header["observation_space"]), Layout(header["action_space"])
    buf = StepBuffer(obs_l, act_l, target_batch_bytes=1 << 30)
    env.action_space.seed(0)
    obs, info = env.reset(seed=3)
    buf.start_episode(obs, info, 3, {"o": 1})
    for _ in range(steps):
        action = env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        buf.add_step(action, obs, reward, terminated, truncated, info)
        if terminated or truncated:
            obs, info = env.reset()
            buf.start_episode(obs, info, None, None)
    return header, obs_l, act_l, buf.take()


@pytest.mark.parametrize("env_id,steps,kwargs", [
    ("CartPole-v1", 200, {}),
    ("sample_envs/Image-v0", 40, {"height": 21, "width": 15, "episode_length": 12}),  # 945-byte rows: padded
    ("sample_envs/NestedDict-v0", 70, {}),
])
def test_a_batch_round_trips_through_decode(tmp_path, env_id, steps, kwargs):
    header, obs_l, act_l, batch = a_batch(env_id, steps, **kwargs)
    enc = BatchEncoder("p", {"format": FORMAT_NAME, **header}, obs_l, act_l)
    f = io.BytesIO()
    encoded = enc.encode(7, batch, f, BIN, JSON)
    blob = f.getvalue()
    assert encoded.bin_size == len(blob) and encoded.entries == len(batch.segments) > 1
    (tmp_path / BIN).write_bytes(blob)
    doc = json.loads(encoded.json)
    assert (doc["format"], doc["version"], doc["prefix"], doc["first"]) == \
        (FORMAT_NAME, BASE_VERSION, "p", 7)
    assert doc["header"]["observation_space"] == header["observation_space"]
    dec = Decoder(LocalStorage(tmp_path), verify=True)  # (checks every CRC-32 too)
    used = np.zeros(len(blob), bool)
    for k, (entry, seg) in enumerate(zip(doc["episodes"], batch.segments)):
        assert entry["index"] == 7 + k and entry["episode"] == seg.episode
        assert entry["part"] == seg.part and entry["end"] == seg.end
        assert entry["continues"] == (seg.end is None)
        assert entry["steps"] == seg.step1 - seg.step0
        assert entry["seed"] == (3 if k == 0 else None)
        refs = leaves(entry["observations"]) + leaves(entry["actions"]) + [
            entry["rewards"], entry["terminations"], entry["truncations"]]
        expected = [c[seg.obs0:seg.obs1] for c in batch.observations] + \
            [c[seg.step0:seg.step1] for c in batch.actions] + \
            [batch.rewards[seg.step0:seg.step1], batch.terminations[seg.step0:seg.step1],
             batch.truncations[seg.step0:seg.step1]]
        got = dec.read_arrays(BIN, [(r, f"entry {k}") for r in refs], aligned=True,
                              expected_size=len(blob))
        assert len(got) == len(expected)
        for r, g, e in zip(refs, got, expected):
            assert r["npyoff"] % ALIGNMENT == 0
            assert g.dtype == e.dtype and g.shape == e.shape
            assert g.tobytes() == np.ascontiguousarray(e).tobytes()
            used[r["npyoff"]:r["npyoff"] + r["size"]] = True
    # The batch index: one column per leaf and step column, each entry's array where the
    # rule puts it; its table (episode, part, steps, flags a row) is the last array.
    index = encoded.index
    assert index is not None and len(index["columns"]) == len(refs)
    offsets = [at for _, at, _ in index["columns"]]
    for entry in doc["episodes"]:
        refs = leaves(entry["observations"]) + leaves(entry["actions"]) + [
            entry["rewards"], entry["terminations"], entry["truncations"]]
        for c, (r, (dtype, _, unit)) in enumerate(zip(refs, index["columns"])):
            assert (r["dtype"], r["npyoff"]) == (dtype, offsets[c])
            offsets[c] += -(-r["size"] // unit) * unit
    table = np.array([(seg.episode, seg.part, seg.step1 - seg.step0,
                       (seg.end is None) + 2 * seg.no_reset) for seg in batch.segments], "<i8")
    assert blob[index["table"]:] == table.tobytes()
    assert index["crc32"] == zlib.crc32(table.tobytes())
    used[index["table"]:] = True
    assert not np.frombuffer(blob, np.uint8)[~used].any()  # the rest is zero padding


def test_later_batches_leave_out_a_big_header_field():
    header, obs_l, act_l, batch = a_batch("CartPole-v1", 30)
    big = {**header, "big": "x" * 5000}
    enc = BatchEncoder("p", big, obs_l, act_l)
    first = json.loads(enc.encode(0, batch, io.BytesIO(), BIN, JSON).json)
    later = json.loads(enc.encode(9, batch, io.BytesIO(), BIN, JSON).json)
    assert first["header"]["big"] == "x" * 5000
    assert "big" not in later["header"] and later["header"]["env_id"] == "CartPole-v1"
