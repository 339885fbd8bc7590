"""The files on disk: every array loads with numpy alone, aligned, sized, padded with zeros;
batch files come out near the target size; the README's examples run as written."""

from __future__ import annotations

import json
import math
import os
import re
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT, TruthCollector, assert_recording_matches, assert_same, index_span
from gymnasium import spaces

from gym_recorder import RecordingReader, RecordingWrapper


def load_ref(directory: Path, ref: dict) -> np.ndarray:
    """Loads an array reference the way the README says, with numpy only."""
    return np.fromfile(os.path.join(directory, ref["npyfile"]), dtype=ref["dtype"],
                       count=math.prod(ref["shape"]), offset=ref["npyoff"]).reshape(ref["shape"])


def find_refs(obj, path="") -> list[tuple[str, dict]]:
    """Every {"__type": "ndarray"} object inside a JSON document, with where it is."""
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            return [(path, obj)]
        return [r for k, v in obj.items() for r in find_refs(v, f"{path}/{k}")]
    if isinstance(obj, list):
        return [r for i, v in enumerate(obj) for r in find_refs(v, f"{path}/{i}")]
    return []


def manifests(directory: Path) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted(directory.glob("*.manifest.json"))]


def check_batch_files(directory: Path) -> list[tuple[dict, dict]]:
    """Checks every batch of every manifest byte by byte; returns (manifest batch, batch doc)."""
    out = []
    for man in manifests(directory):
        assert man["format"] == "gym_recorder" and man["version"] == 1
        for b in man["batches"]:
            jpath, bpath = directory / b["fn"], directory / b["bin"]
            data = jpath.read_bytes()
            assert len(data) == b["json_size"] and zlib.crc32(data) == b["json_crc32"]
            blob = bpath.read_bytes()
            assert len(blob) == b["bin_size"]
            assert re.fullmatch(re.escape(man["prefix"]) + r"\.ep\d{9}\.json", b["fn"])
            assert b["bin"] == b["fn"][:-5] + ".bin"
            doc = json.loads(data)
            assert doc["first"] == b["first"] and len(doc["episodes"]) == b["len"]
            used = np.zeros(len(blob), dtype=bool)
            for where, ref in find_refs(doc):
                dtype = np.dtype(ref["dtype"])
                assert ref["dtype"] == dtype.str and dtype.kind != "O", where
                assert ref["order"] == "C" and ref["npyfile"] == b["bin"], where
                assert ref["npyoff"] % 8 == 0, f"{where}: offset {ref['npyoff']} not aligned"
                assert ref["size"] == math.prod(ref["shape"]) * dtype.itemsize, where
                assert ref["npyoff"] + ref["size"] <= len(blob), where
                arr = load_ref(directory, ref)
                assert arr.shape == tuple(ref["shape"]) and arr.dtype == dtype
                assert zlib.crc32(arr.tobytes()) == ref["crc32"], where
                span = slice(ref["npyoff"], ref["npyoff"] + ref["size"])
                assert not used[span].any(), f"{where} overlaps another array"
                used[span] = True
            # The batch index's table (see test_stepindex for what it says) is an array too.
            table = index_span(b)
            if table is not None:
                assert zlib.crc32(blob[table[0]:table[1]]) == b["index"]["crc32"]
                assert not used[table[0]:table[1]].any()
                used[table[0]:table[1]] = True
            # Arrays follow each other in file order, each at the next multiple of 8: the bytes
            # between them are alignment padding (fewer than 8), all zero, and nothing trails.
            spans = sorted([(r["npyoff"], r["npyoff"] + r["size"]) for _, r in find_refs(doc)]
                           + ([] if table is None else [table]))
            end = 0
            for start, stop in spans:
                assert start == end + (-end % 8) or start == stop == end, (start, end)
                end = max(end, stop)
            assert end == len(blob)
            assert not np.frombuffer(blob, np.uint8)[~used].any(), f"{b['bin']}: nonzero padding"
            out.append((b, doc))
    return out


def record_mixed(directory: Path, target: int) -> TruthCollector:
    """ChangingInfo (info arrays and values) then NestedDict-like Dict obs, in one writer."""
    truth = TruthCollector(gym.make("sample_envs/ChangingInfo-v0", episode_length=11))
    env = RecordingWrapper(truth, directory, target_batch_bytes=target)
    env.action_space.seed(0)
    for k in range(6):
        env.reset(seed=k if k % 2 else None, options={"k": k, "arr": np.arange(k, dtype=np.int16)})
        for _ in range(11 if k != 4 else 5):
            env.step(env.action_space.sample())
    env.close()
    return truth


@pytest.mark.parametrize("target", [5_000_000, 400])
def test_every_reference_loads_with_numpy_alone(tmp_path, target):
    truth = record_mixed(tmp_path, target)
    batches = check_batch_files(tmp_path)
    assert len(batches) >= (1 if target > 10_000 else 4)
    with RecordingReader(tmp_path) as reader:
        assert_recording_matches(reader, truth.episodes, truth.observation_space,
                                 truth.action_space)
        # Join each episode's entries from the raw files and compare with the reader.
        parts: dict[int, list[dict]] = {}
        for _, doc in batches:
            for entry in doc["episodes"]:
                parts.setdefault(entry["episode"], []).append(entry)
        assert sorted(parts) == list(range(len(reader)))
        for number, entries in parts.items():
            ep = reader[number]
            assert [e["part"] for e in entries] == list(range(len(entries)))
            assert [e["continues"] for e in entries] == [True] * (len(entries) - 1) + [False]
            for name, got in [("observations", ep.observations), ("actions", ep.actions),
                              ("rewards", ep.rewards), ("terminations", ep.terminations),
                              ("truncations", ep.truncations)]:
                raw = np.concatenate([load_ref(tmp_path, e[name]) for e in entries])
                assert_same(got, raw, f"episode {number} {name}")
            # Info columns: the rows named by each column's index hold its values.
            row0 = 0
            for e in entries:
                infos = e["infos"]
                for col in infos["keys"]:
                    rows = (range(infos["rows"]) if col["index"] is None
                            else load_ref(tmp_path, col["index"]).tolist())
                    if col["kind"] == "array":
                        values = load_ref(tmp_path, col["values"])
                        for r, v in zip(rows, values):
                            got_v = ep.infos[row0 + r][col["key"]]
                            assert np.array_equal(np.asarray(got_v), v)
                    else:
                        assert len(col["values"]) == len(rows)
                        for r in rows:
                            assert col["key"] in ep.infos[row0 + r]
                row0 += infos["rows"]
            assert row0 == len(ep.infos) == len(ep) + 1


def test_dict_observation_references(tmp_path):
    """Nested Dict/Tuple observations: each leaf is its own aligned array of the leaf dtype."""
    env = RecordingWrapper(gym.make("sample_envs/NestedDict-v0", episode_length=7), tmp_path)
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(7):
        env.step(env.action_space.sample())
    env.close()
    [(_, doc)] = check_batch_files(tmp_path)
    obs = doc["episodes"][0]["observations"]
    assert set(obs) == {"count", "flags", "grid", "md", "nested", "position"}
    expect = {("count",): ("<i8", [8]), ("flags",): ("|i1", [8, 4]), ("grid",): ("|u1", [8, 5, 5]),
              ("md",): ("<i8", [8, 3]), ("nested", "a"): ("<f8", [8, 2]),
              ("position",): ("<f4", [8, 3])}
    for path, (dtype, shape) in expect.items():
        ref = obs
        for k in path:
            ref = ref[k]
        assert (ref["dtype"], ref["shape"]) == (dtype, shape)
    pair = obs["nested"]["pair"]
    assert isinstance(pair, list) and [(r["dtype"], r["shape"]) for r in pair] == [
        ("<i8", [8]), ("<i2", [8])]
    with RecordingReader(tmp_path) as reader:
        assert_same(reader[0].observations["grid"], load_ref(tmp_path, obs["grid"]))


def test_tiny_recording_exact_bytes(tmp_path):
    """One known episode: the .bin holds exactly these bytes, in this order, padded with zeros."""
    env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=2,
                                    obs_shape=(3,), obs_dtype="uint8"), tmp_path,
                           record_infos=False)
    obs0, _ = env.reset(seed=0)
    obs1, *_ = env.step(1)
    obs2, *_ = env.step(0)
    env.close()
    [(b, doc)] = check_batch_files(tmp_path)
    entry = doc["episodes"][0]
    pieces = [np.stack([obs0, obs1, obs2]), np.array([1, 0], np.int64),
              np.array([1.0, 1.0]), np.array([False, True]), np.array([False, False]),
              # the batch index's table: episode 0, part 0, 2 steps, no flags
              np.array([[0, 0, 2, 0]], "<i8")]
    expected = b""
    for arr in pieces:
        expected += bytes(-len(expected) % 8) + arr.tobytes()
    assert (tmp_path / b["bin"]).read_bytes() == expected
    assert [entry[k]["npyoff"] for k in ("observations", "actions", "rewards", "terminations",
                                         "truncations")] == [0, 16, 32, 48, 56]
    assert entry["infos"] == {"rows": 3, "keys": []}
    assert entry["end"] == "terminated" and entry["seed"] == 0 and entry["steps"] == 2
    assert b["index"] == {"table": 64, "crc32": zlib.crc32(pieces[-1].tobytes()),
                          "columns": [["|u1", 0, 24], ["<i8", 16, 8], ["<f8", 32, 8],
                                      ["|b1", 48, 8], ["|b1", 56, 8]]}


class BlobInfoEnv(gym.Env):
    """A tiny observation, but a 400-byte array in every step info: the recorder's first
    estimate of the bytes per step (from the spaces) is far too low."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), 0.5, False, False, {"blob": np.full(100, action, np.float32)}


def batch_sizes(directory: Path) -> list[int]:
    [man] = manifests(directory)
    return [b["json_size"] + b["bin_size"] for b in man["batches"]]


def test_batches_land_near_target_for_a_steady_env(tmp_path):
    target = 200_000
    env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=40,
                                    obs_shape=(64, 64, 3), obs_dtype="uint8"),
                           tmp_path, target_batch_bytes=target)
    for k in range(12):
        env.reset(seed=k)
        for _ in range(40):
            env.step(0)
    env.close()
    sizes = batch_sizes(tmp_path)
    assert len(sizes) >= 20
    for size in sizes[:-1]:
        assert 0.5 * target <= size <= 1.5 * target, sizes
    check_batch_files(tmp_path)


def test_batch_size_adapts_to_bytes_actually_written(tmp_path):
    target = 40_000
    env = RecordingWrapper(BlobInfoEnv(), tmp_path, target_batch_bytes=target)
    env.reset(seed=0)
    for t in range(6_000):
        env.step(t % 2)
    env.close()
    sizes = batch_sizes(tmp_path)
    assert sizes[0] > 3 * target  # the first guess ignores the infos...
    # ...then the measured bytes per step take over. The writer thread measures in the
    # background: when batch k is cut, up to MAX_PENDING_BATCHES + 1 earlier ones may still be
    # unwritten, so batches 0..4 may all be sized by the first guess, never batch 5 onwards.
    later = sizes[5:-1]
    assert len(later) >= 5, sizes
    for size in later:
        assert 0.5 * target <= size <= 1.5 * target, sizes
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        assert len(ep) == 6_000 and ep.end == "close"
        assert ep.infos[0] == {}  # row 0 is the reset info; step t (from 0) is row t + 1
        assert_same(ep.infos[8]["blob"], np.full(100, 1, np.float32))


# ---------------------------------------------------------------------------------------------
# README examples (and docs/format.md's)


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    from docpages import python_block

    record = python_block("\"recordings/wrapped\"")  # the README's Record snippet
    read = python_block("print(len(reader))")
    by_hand = python_block("np.fromfile(")  # docs/format.md: an array with numpy alone
    monkeypatch.chdir(tmp_path)
    exec(compile(record, "README.md (Record)", "exec"), {})
    # The Read snippet reads the first command's recordings/cartpole (test_readme runs the
    # commands in order); here the Record snippet's recording stands in for it.
    (tmp_path / "recordings" / "wrapped").rename(tmp_path / "recordings" / "cartpole")
    scope: dict = {}
    exec(compile(read, "README.md (Read)", "exec"), scope)
    ep = scope["ep"]
    assert ep.observations.shape == (len(ep) + 1, 4) and ep.observations.dtype == np.float32
    assert ep.actions.dtype == np.int64 and ep.rewards.dtype == np.float64
    assert ep.end in ("terminated", "truncated") and len(ep.infos) == len(ep) + 1
    assert int(capsys.readouterr().out) >= 4
    # The numpy-only snippet, on episode 3's observations of the first batch (it checks them
    # against the reader itself; here also against the Read snippet's episode).
    scope = {}
    exec(compile(by_hand, "docs/format.md (numpy alone)", "exec"), scope)
    assert_same(scope["obs"], ep.observations)
