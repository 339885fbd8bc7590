"""gym_recorder.read.decode on its own: batch JSON parsed and checked, array references read exactly."""

import json
import zlib

import gymnasium as gym
import numpy as np
import pytest

from conftest import run_random
from gym_recorder import ChecksumError, FormatError, RecordingWrapper
from gym_recorder.read.batchfile import parse_batch
from gym_recorder.read.decode import Decoder
from gym_recorder.read.entries import STACKED, PartData
from gym_recorder.format import ALIGNMENT
from gym_recorder.read.manifest import load_manifests
from gym_recorder.read.storage import LocalStorage

BIN = "p.ep000000000.bin"


def write_bin(directory, arrays: list[np.ndarray]) -> list[dict]:
    """Writes arrays as the format lays them out (8-aligned, zero padding); returns their refs."""
    out = bytearray()
    refs = []
    for arr in arrays:
        out += b"\0" * (-len(out) % ALIGNMENT)
        data = np.ascontiguousarray(arr).tobytes()
        refs.append({"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                     "dtype": arr.dtype.str, "npyfile": BIN, "npyoff": len(out),
                     "size": len(data), "crc32": zlib.crc32(data)})
        out += data
    (directory / BIN).write_bytes(bytes(out))
    return refs


ARRAYS = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array([True, False, True]),
          np.array(["ab", "c"], dtype="<U2"), np.arange(5, dtype=">i8"), np.zeros((0, 3), "<f8")]


@pytest.mark.parametrize("whole", [False, True])
def test_arrays_come_back_exactly(tmp_path, whole):
    refs = write_bin(tmp_path, ARRAYS)
    dec = Decoder(LocalStorage(tmp_path), verify=True)
    size = (tmp_path / BIN).stat().st_size
    data = dec.read_exact(BIN, 0, size) if whole else None
    got = dec.read_arrays(BIN, [(r, f"ref {i}") for i, r in enumerate(refs)], aligned=True,
                          expected_size=size, data=data)
    for g, e in zip(got, ARRAYS):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert g.tobytes() == e.tobytes()
    # Each array on its own is what numpy alone reads at the reference (the format's promise).
    for r, e in zip(refs, ARRAYS):
        alone = np.fromfile(tmp_path / BIN, dtype=r["dtype"], count=int(np.prod(r["shape"])),
                            offset=r["npyoff"]).reshape(r["shape"])
        np.testing.assert_array_equal(alone, e)


def test_views_of_a_whole_batch_share_its_bytes(tmp_path):
    refs = write_bin(tmp_path, ARRAYS[:2])
    dec = Decoder(LocalStorage(tmp_path))
    data = dec.read_exact(BIN, 0, (tmp_path / BIN).stat().st_size)
    views = dec.read_arrays(BIN, [(r, "r") for r in refs], aligned=True, data=data, copy=False)
    copies = dec.read_arrays(BIN, [(r, "r") for r in refs], aligned=True, data=data)
    assert all(np.shares_memory(v, data) for v in views)
    assert not any(np.shares_memory(c, data) for c in copies)


def test_references_outside_the_file_or_misaligned_are_refused(tmp_path):
    (ref,) = write_bin(tmp_path, ARRAYS[:1])
    dec = Decoder(LocalStorage(tmp_path))
    beyond = dict(ref, npyoff=48)
    with pytest.raises(FormatError, match=rf"r: bytes 48..96 lie outside {BIN} \(48 bytes\)"):
        dec.read_arrays(BIN, [(beyond, "r")], aligned=True)
    with pytest.raises(FormatError, match="r: npyoff 4 is not a multiple of 8"):
        dec.read_arrays(BIN, [(dict(ref, npyoff=4), "r")], aligned=True)
    with pytest.raises(FormatError, match=rf"{BIN}: file has 48 bytes, the manifest says 50"):
        dec.read_arrays(BIN, [(ref, "r")], aligned=True, expected_size=50)


def test_checksums_are_checked_only_when_verifying(tmp_path):
    (ref,) = write_bin(tmp_path, ARRAYS[:1])
    raw = bytearray((tmp_path / BIN).read_bytes())
    raw[5] ^= 1
    (tmp_path / BIN).write_bytes(bytes(raw))
    assert Decoder(LocalStorage(tmp_path)).read_arrays(BIN, [(ref, "r")], aligned=True)
    with pytest.raises(ChecksumError, match="r: CRC-32 of the array's bytes does not match"):
        Decoder(LocalStorage(tmp_path), verify=True).read_arrays(BIN, [(ref, "r")], aligned=True)


def test_string_arrays_beyond_unicode_are_refused(tmp_path):
    (ref,) = write_bin(tmp_path, [np.array([0x110000, 65], dtype="<u4")])
    ref = dict(ref, dtype="<U1")
    with pytest.raises(FormatError, match="r: <U1 array holds values that are not Unicode"):
        Decoder(LocalStorage(tmp_path)).read_arrays(BIN, [(ref, "r")], aligned=True)


@pytest.fixture
def cartpole(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=2_000)
    run_random(env, 200)
    env.close()
    storage = LocalStorage(tmp_path)
    (m,) = load_manifests(storage)
    return tmp_path, storage, m


def test_parse_batch_indexes_entries(cartpole):
    directory, storage, m = cartpole
    batch = parse_batch(storage, m, 1)
    doc = json.loads((directory / m.batches[1]["fn"]).read_bytes())
    assert batch.entries == doc["episodes"]
    assert batch.starts == [i for i, e in enumerate(doc["episodes"]) if e["part"] == 0]
    assert batch.by_episode == {(e["episode"], e["part"]): i
                                for i, e in enumerate(doc["episodes"])}


def test_parse_batch_refuses_a_batch_json_other_than_the_manifests(cartpole):
    directory, storage, m = cartpole
    path = directory / m.batches[0]["fn"]
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"steps":', b'"steps" :', 1))
    with pytest.raises(FormatError, match="file has .* bytes, the manifest says"):
        parse_batch(storage, m, 0)
    assert b'"seed":0' in data
    path.write_bytes(data.replace(b'"seed":0', b'"seed":1', 1))  # same size, other bytes
    with pytest.raises(ChecksumError, match="CRC-32 does not match the manifest"):
        parse_batch(storage, m, 0)


def test_a_planned_entry_loads_its_arrays_and_infos(cartpole):
    directory, storage, m = cartpole
    dec = Decoder(storage, verify=True)
    batch = parse_batch(storage, m, 0)
    entry = batch.entries[batch.starts[0]]
    part = dec.plan_part(m, m.batches[0], entry, 0)
    kinds = [kind for kind, _, _ in part.slots]
    assert set(kinds) >= {"obs", "act", "rewards", "terminations", "truncations"}
    assert set(kinds) & STACKED == {"obs", "act", "rewards", "terminations", "truncations"}
    p = dec.load_part(m, part, dec.batch_size(batch, m.batches[0]))
    assert isinstance(p, PartData)
    steps = entry["steps"]
    assert p.obs[0].shape == (steps + 1, 4) and p.obs[0].dtype == np.float32
    assert p.rewards.shape == (steps,) and p.rewards.dtype == np.float64
    assert len(p.infos) == steps + 1
    ref = entry["observations"]
    alone = np.fromfile(directory / ref["npyfile"], dtype=ref["dtype"],
                        count=int(np.prod(ref["shape"])), offset=ref["npyoff"])
    np.testing.assert_array_equal(p.obs[0].ravel(), alone)
    assert p.seed == 0 and p.end == (None if entry.get("continues") else entry["end"])
    # The stacked columns can be left to the caller (an episode of several parts).
    skipped = dec.load_part(m, part, dec.batch_size(batch, m.batches[0]), skip_stacked=True)
    assert skipped.rewards is None and skipped.infos == p.infos


def test_a_planned_entry_with_a_wrong_shape_is_refused(cartpole):
    _, storage, m = cartpole
    dec = Decoder(storage)
    batch = parse_batch(storage, m, 0)
    rewards = batch.entries[0]["rewards"]
    longer = dict(rewards, shape=[rewards["shape"][0] + 1], size=rewards["size"] + 8)
    part = dec.plan_part(m, m.batches[0], dict(batch.entries[0], rewards=longer), 0)
    with pytest.raises(FormatError, match=r"entry 0 rewards: shape \(\d+,\), expected"):
        dec.load_part(m, part, dec.batch_size(batch, m.batches[0]))
