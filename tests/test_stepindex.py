"""The batch index (manifest BATCH "index"): what the writer writes, and reading through it.

The index is checked against the batch JSON by a reading of the specification written here (not
the library's code); reading through it (``transitions``, ``reader.column``) must give exactly
what the batch JSON path gives, on real envs; a damaged index is a FormatError, reported by
``verify`` and dropped by ``repair``.
"""

from __future__ import annotations

import json
import os
import warnings
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import gym_recorder.read.bulk as bulk_module
import sample_envs  # noqa: F401  (registers sample_envs/...)
from gym_recorder import FormatError, RecordingReader, RecordingVectorWrapper, RecordingWrapper
from gym_recorder.errors import BatchIndexError
from gym_recorder.integrity import repair, verify
from gym_recorder.training.transitions import transitions

FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


class OddRowsEnv(gym.Env):
    """Rows of 100 bytes (lcm with 8 over 64: one aligned array an entry) and 3 bytes (packed
    every 24 bytes), episodes of random length."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "pixels": gym.spaces.Box(0, 255, (10, 10), np.uint8),
            "bits": gym.spaces.MultiBinary(3)})
        self.action_space = gym.spaces.MultiBinary(3)
        self._t = 0
        self._n = 1

    def _obs(self) -> dict:
        return {"pixels": self.np_random.integers(0, 256, (10, 10), dtype=np.uint8),
                "bits": self.np_random.integers(0, 2, 3, dtype=np.int8)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t, self._n = 0, int(self.np_random.integers(0, 9))
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        return self._obs(), float(self._t), self._t >= self._n, False, {}


def _record(directory: Path, make, steps: int, target: int = 3_000) -> None:
    env = RecordingWrapper(make(), directory, target_batch_bytes=target)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def _record_vector(directory: Path, steps: int) -> None:
    env = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=3,
                                              vectorization_mode="sync"), directory,
                                 target_batch_bytes=2_000)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(steps):
        env.step(env.action_space.sample())
    env.close()


RECORDINGS = {
    "cartpole": lambda d: _record(d, lambda: gym.make("CartPole-v1"), 600),
    "nested_dict": lambda d: _record(d, lambda: gym.make("sample_envs/NestedDict-v0",
                                                         episode_length=7), 120),
    "image": lambda d: _record(d, lambda: gym.make("sample_envs/Image-v0", height=16, width=16,
                                                   episode_length=30), 150, target=20_000),
    "odd_rows": lambda d: _record(d, OddRowsEnv, 300),
    "vector": lambda d: _record_vector(d, 150),
}


@pytest.fixture(scope="module", params=sorted(RECORDINGS))
def recording(request, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp(request.param)
    RECORDINGS[request.param](d)
    return d


def _manifests(d: Path) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted(d.glob("*.manifest.json"))]


def _refs(tree) -> list[dict]:
    """A TREE's array references in the order the JSON lists them (the leaf order)."""
    if isinstance(tree, dict) and tree.get("__type") == "ndarray":
        return [tree]
    if isinstance(tree, dict):
        return [r for v in tree.values() for r in _refs(v)]
    return [r for v in tree for r in _refs(v)]


def test_the_index_says_what_the_batch_json_says(recording):
    batches = [b for m in _manifests(recording) for b in m["batches"]]
    assert len(batches) >= 3
    for b in batches:
        index = b["index"]
        doc = json.loads((recording / b["fn"]).read_bytes())
        data = (recording / b["bin"]).read_bytes()
        entries = doc["episodes"]
        table_bytes = data[index["table"]:index["table"] + 32 * len(entries)]
        assert index["table"] % 8 == 0 and zlib.crc32(table_bytes) == index["crc32"]
        table = np.frombuffer(table_bytes, "<i8").reshape(len(entries), 4)
        columns = [_refs(e["observations"]) + _refs(e["actions"])
                   + [e["rewards"], e["terminations"], e["truncations"]] for e in entries]
        assert len(index["columns"]) == len(columns[0])
        for k, e in enumerate(entries):
            flags = (e["continues"] is True) | ((e.get("no_reset") is True) << 1)
            assert table[k].tolist() == [e["episode"], e["part"], e["steps"], flags]
        for c, (dtype, at, unit) in enumerate(index["columns"]):
            assert at % 8 == 0 and unit % 8 == 0 and 8 <= unit <= 64
            for e, cols in zip(entries, columns):
                ref = cols[c]
                assert (ref["dtype"], ref["npyoff"]) == (dtype, at)
                rows = e["steps"] + (1 if e["part"] == 0 and c < len(cols) - 3
                                     and c < len(_refs(e["observations"])) else 0)
                assert ref["shape"][0] == rows
                at += -(-ref["size"] // unit) * unit
    # Both layouts of odd rows are there: packed (unit 24) and one array an entry (unit 8).
    if recording.name.startswith("odd_rows"):
        units = {tuple(c) [2] for b in batches for c in b["index"]["columns"]}
        assert {8, 24} <= units
    assert verify(recording) == []


def _json_path(monkeypatch):
    monkeypatch.setattr(bulk_module, "read_stacked", lambda *a, **k: None)


def _assert_same(a, b, where):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}.{i}")
    else:
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        np.testing.assert_array_equal(a, b, err_msg=where)


def _read_all(d: Path, selection):
    with RecordingReader(d) as reader:
        t = transitions(reader, selection)
        cols = {name: reader.column(name, selection) for name in FIELDS}
    return t, cols


@pytest.mark.parametrize("pick", ["all", "some"])
def test_reading_through_the_index_equals_the_batch_json(recording, monkeypatch, pick):
    used = []
    real = bulk_module.read_stacked

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        used.append(out is not None)
        return out

    monkeypatch.setattr(bulk_module, "read_stacked", spy)
    with RecordingReader(recording) as reader:
        n = len(reader)
    selection = None if pick == "all" else [n - 1, 2, 2, -3, 0, n // 2]
    fast_t, fast_cols = _read_all(recording, selection)
    assert used and all(used)  # every read went through the index
    _json_path(monkeypatch)
    slow_t, slow_cols = _read_all(recording, selection)
    for name in ("obs", "next_obs", "action", "reward", "terminated", "truncated", "episode",
                 "step", "observations", "episodes", "starts"):
        _assert_same(getattr(fast_t, name), getattr(slow_t, name), name)
    for name in FIELDS:
        _assert_same(fast_cols[name], slow_cols[name], f"column {name}")


def test_without_an_index_the_batch_json_is_read(tmp_path, monkeypatch):
    """Recordings of earlier writers (no index), values leaves, verification, widened leaves."""
    _record(tmp_path / "a", lambda: gym.make("CartPole-v1"), 400)
    expected = _read_all(tmp_path / "a", None)
    for p in (tmp_path / "a").glob("*.manifest.json"):  # as an older writer wrote it
        doc = json.loads(p.read_bytes())
        for b in doc["batches"]:
            del b["index"]
        p.write_text(json.dumps(doc))
    with RecordingReader(tmp_path / "a") as reader:
        assert reader._stacked(list(range(len(reader)))) is None
    got = _read_all(tmp_path / "a", None)
    _assert_same(got[1], expected[1], "columns")
    _assert_same(got[0].obs, expected[0].obs, "obs")
    # Text observations are values: no index, and transitions still reads them.
    _record(tmp_path / "t", lambda: gym.make("sample_envs/Text-v0"), 50)
    assert all("index" not in b for m in _manifests(tmp_path / "t") for b in m["batches"])
    with RecordingReader(tmp_path / "t") as reader:
        assert len(transitions(reader)) == 50
    # Verification reads every array's bytes through the JSON (and checks them).
    _record(tmp_path / "v", lambda: gym.make("CartPole-v1"), 100)
    with RecordingReader(tmp_path / "v", verify=True) as reader:
        assert reader._stacked(list(range(len(reader)))) is None
        assert len(transitions(reader)) == 100


class WideningEnv(gym.Env):
    """A float32 Box whose observations are float64 in some episodes (the batch widens)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._wide = bool(self.np_random.integers(0, 3) == 0)
        return self._obs(), {}

    def _obs(self):
        return self.np_random.random(2, dtype=np.float64 if self._wide else np.float32) * 0.5

    def step(self, action):
        self._t += 1
        return self._obs(), 1.0, self._t >= 5, False, {}


def test_a_leaf_widened_in_some_batches_is_joined_by_the_json_path(tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _record(tmp_path, WideningEnv, 300, target=600)
    dtypes = {b["index"]["columns"][0][0] for m in _manifests(tmp_path) for b in m["batches"]}
    assert dtypes == {"<f4", "<f8"}
    with RecordingReader(tmp_path) as reader:
        assert reader._stacked(list(range(len(reader)))) is None
        t = transitions(reader)
        assert t.obs.dtype == np.float64 and len(t) == 300


def _first_manifest(d: Path) -> Path:
    return next(d.glob("*.manifest.json"))


def _edit_index(d: Path, edit) -> None:
    p = _first_manifest(d)
    doc = json.loads(p.read_bytes())
    edit(doc["batches"][1], d)
    p.write_text(json.dumps(doc))


def _flip_table_byte(b, d):
    path = d / b["bin"]
    data = bytearray(path.read_bytes())
    data[b["index"]["table"] + 17] ^= 1  # the steps of the first entry
    path.write_bytes(bytes(data))


def _consistent_wrong_steps(b, d):
    path = d / b["bin"]
    data = bytearray(path.read_bytes())
    at = b["index"]["table"]
    table = np.frombuffer(bytes(data[at:at + 32 * b["len"]]), "<i8").reshape(-1, 4).copy()
    table[0, 2] += 1
    data[at:at + table.nbytes] = table.tobytes()
    path.write_bytes(bytes(data))
    b["index"]["crc32"] = zlib.crc32(table.tobytes())


def _huge_steps(b, d):
    """Rows that, times a row's bytes, wrap around int64 (table, CRC and counts agree)."""
    path = d / b["bin"]
    data = bytearray(path.read_bytes())
    at = b["index"]["table"]
    table = np.frombuffer(bytes(data[at:at + 32 * b["len"]]), "<i8").reshape(-1, 4).copy()
    table[0, 2] = 1 << 60
    data[at:at + table.nbytes] = table.tobytes()
    path.write_bytes(bytes(data))
    b["index"]["crc32"] = zlib.crc32(table.tobytes())
    b["steps"] = int(table[:, 2].sum())


HOSTILE = {
    "not an object": (lambda b, d: b.update(index=[1, 2]), "'index' must be an object"),
    "table unaligned": (lambda b, d: b["index"].update(table=b["index"]["table"] + 4),
                        "index table at"),
    "table past the end": (lambda b, d: b["index"].update(table=b["bin_size"]),
                           "index table at"),
    "table CRC": (_flip_table_byte, "CRC-32 of the index table"),
    "counts": (_consistent_wrong_steps, "the index table counts"),
    "steps wrapping int64": (_huge_steps, "places arrays beyond the end",
                             "the manifest says 1152921504606846"),
    "a column too many": (lambda b, d: b["index"]["columns"].append(["<f8", 0, 8]),
                          "must have 5 columns"),
    "unit": (lambda b, d: b["index"]["columns"][0].__setitem__(2, 12), "must be multiples"),
    "unit too large": (lambda b, d: b["index"]["columns"][0].__setitem__(2, 128),
                       "unit must be an integer"),
    "offset past the end": (lambda b, d: b["index"]["columns"][1].__setitem__(
        1, b["bin_size"] - 8), "beyond the end"),
    # An offset moved within the .bin (no CRC-32 covers the manifest): the columns no longer
    # lie one after another, as writers lay them out (found by an independent reader).
    "rewards moved by 8": (lambda b, d: b["index"]["columns"][2].__setitem__(
        1, b["index"]["columns"][2][1] + 8), "column 2 starts at"),
    "observations moved by 8": (lambda b, d: b["index"]["columns"][0].__setitem__(1, 8),
                                "column 0 starts at 8"),
    "rewards dtype": (lambda b, d: b["index"]["columns"][2].__setitem__(0, "<f4"),
                      "rewards has dtype <f4"),
    "object dtype": (lambda b, d: b["index"]["columns"][0].__setitem__(0, "|O"),
                     "unsupported dtype"),
    # Numbers of the right value as floats: refused, and repair must rewrite them (a
    # comparison by value took the manifest for unchanged and left it as it was).
    "unit a float": (lambda b, d: b["index"]["columns"][0].__setitem__(2, 8.0),
                     "unit must be an integer"),
    "offset a float": (lambda b, d: b["index"]["columns"][0].__setitem__(
        1, float(b["index"]["columns"][0][1])), "npyoff must be an integer"),
    "table a float": (lambda b, d: b["index"].update(table=float(b["index"]["table"])),
                      "index table at"),
    "crc32 a float": (lambda b, d: b["index"].update(crc32=float(b["index"]["crc32"])),
                      "crc32 must be an integer"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_damaged_index_is_a_named_error_verify_reports_and_repair_drops(tmp_path, case):
    _record(tmp_path, lambda: gym.make("CartPole-v1"), 600, target=2_000)
    expected = _read_all(tmp_path, None)
    edit, match, *reported = HOSTILE[case]
    _edit_index(tmp_path, edit)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError, match=match):
            transitions(reader)
        with pytest.raises(FormatError, match=match):
            reader.column("observations")
        # Every method refuses it, also those that read the batch JSON (issue 33: one answer
        # for one damage; repair drops the index).
        with pytest.raises(BatchIndexError, match=match):
            sum(len(ep.rewards) for ep in reader)
    problems = verify(tmp_path)
    assert any((reported or ["index"])[0] in p.message for p in problems), problems
    actions = repair(tmp_path)
    assert any("rebuilt" in a for a in actions), actions
    assert verify(tmp_path) == []
    got = _read_all(tmp_path, None)
    _assert_same(got[0].obs, expected[0].obs, "obs")
    _assert_same(got[1], expected[1], "columns")


def test_an_index_that_disagrees_with_the_json_is_reported_by_verify(tmp_path):
    _record(tmp_path, lambda: gym.make("CartPole-v1"), 300, target=2_000)

    def swap_columns(b, d):  # well-formed, but the rewards' offsets are the truncations'
        cols = b["index"]["columns"]
        cols[2][1] = cols[4][1]

    _edit_index(tmp_path, swap_columns)
    problems = verify(tmp_path)
    assert any("the manifest's index of the batch: column 2" in p.message
               for p in problems), problems


def test_a_repaired_batch_has_no_index_and_reads_the_same(tmp_path, monkeypatch):
    _record(tmp_path, lambda: gym.make("CartPole-v1"), 600, target=8_000)
    p = _first_manifest(tmp_path)
    doc = json.loads(p.read_bytes())
    victim = doc["batches"][1]
    entry = json.loads((tmp_path / victim["fn"]).read_bytes())["episodes"][1]
    assert victim["len"] >= 3 and entry["steps"] > 0
    path = tmp_path / victim["bin"]
    data = bytearray(path.read_bytes())
    data[entry["rewards"]["npyoff"]] ^= 0xFF  # one episode's rewards damaged
    path.write_bytes(bytes(data))
    assert repair(tmp_path)
    batches = json.loads(p.read_bytes())["batches"]
    assert any("index" not in b for b in batches) and any("index" in b for b in batches)
    for b in batches:  # the batches written anew hold no index of the batch they came from
        assert ("index" in b) == ("index" in json.loads((tmp_path / b["fn"]).read_bytes()))
    with RecordingReader(tmp_path) as reader:
        assert reader._stacked(list(range(len(reader)))) is None  # one batch has none
    fast = _read_all(tmp_path, None)
    _json_path(monkeypatch)
    slow = _read_all(tmp_path, None)
    _assert_same(fast[1], slow[1], "columns")
    assert verify(tmp_path) == []


def test_a_lost_manifest_is_rebuilt_with_each_batch_index(tmp_path, monkeypatch):
    _record(tmp_path, lambda: gym.make("CartPole-v1"), 600, target=2_000)
    p = _first_manifest(tmp_path)
    before = [b["index"] for b in json.loads(p.read_bytes())["batches"]]
    for b in json.loads(p.read_bytes())["batches"]:  # each batch JSON holds a copy
        assert json.loads((tmp_path / b["fn"]).read_bytes())["index"] == b["index"]
    expected = _read_all(tmp_path, None)
    p.unlink()
    assert repair(tmp_path)
    assert [b["index"] for b in json.loads(p.read_bytes())["batches"]] == before
    with RecordingReader(tmp_path) as reader:
        assert reader._stacked(list(range(len(reader)))) is not None
    got = _read_all(tmp_path, None)
    _assert_same(got[1], expected[1], "columns")
    assert verify(tmp_path) == []


@pytest.mark.parametrize("key", ["first", "len", "json_size", "json_crc32", "bin_size", "steps",
                                 "episodes"])
def test_repair_rewrites_a_batch_count_stored_as_a_float(tmp_path, key):
    """2.0 where 2 belongs: readers and verify refuse it; repair took it for the batch's own
    number (2.0 == 2) and left the manifest as it was."""
    _record(tmp_path, lambda: gym.make("CartPole-v1"), 300, target=2_000)
    _edit_index(tmp_path, lambda b, d: b.update({key: float(b[key])}))
    with pytest.raises(FormatError, match=repr(key)[1:-1]):
        with RecordingReader(tmp_path) as reader:
            list(reader)
    assert verify(tmp_path)
    assert any("rebuilt" in a for a in repair(tmp_path))
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path) as reader:
        assert sum(len(ep.rewards) for ep in reader) == 300


def test_following_parts_does_not_rebuild_the_batch_list_per_part(tmp_path, monkeypatch):
    """A vector writer's episodes have a part in nearly every batch; finding each part's batch
    built a list of every batch read so far (quadratic: 24,800 batches of a 4-env CartPole,
    transitions() 19 s, now 5.7 s)."""
    import bisect as bisect_module

    import gym_recorder.read.stepindex as stepindex

    _record_vector(tmp_path, 400)
    seen: list[list[int]] = []  # (kept alive, so that ids are not reused)

    class CountingBisect:
        @staticmethod
        def bisect_right(a, x, *args, **kwargs):
            if not any(a is s for s in seen):
                seen.append(a)
            return bisect_module.bisect_right(a, x, *args, **kwargs)

    monkeypatch.setattr(stepindex, "bisect", CountingBisect)
    with RecordingReader(tmp_path) as reader:
        assert len(reader.batches()) > 20
        t = transitions(reader)
        assert reader._stacked(list(range(len(reader)))) is not None
        assert sum(len(reader[i].rewards) for i in range(len(reader))) == len(t.reward)
    assert len(seen) <= 2, len(seen)
