"""The rules the format's specification (gym_recorder/format/__init__.py) states, one test each.

Each test records (or hand-writes) a recording, looks at the files as a reader written from the
spec alone would, and checks that the writer, the reader and ``verify`` do what the spec says.
"""

from __future__ import annotations

import glob
import json
import os
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gym_recorder.format.fileio as fileio
import gym_recorder.format as fmt
from gym_recorder import FormatError, RecordingReader, RecordingWrapper, UnsupportedValueError
from gym_recorder.integrity import verify

from conftest import index_span

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# Helpers


class ValueEnv(gym.Env):
    """A tiny env: Box(2,) float32 observations, Discrete actions; values to return are queued."""

    def __init__(self, length: int = 6, action_space: gym.Space | None = None) -> None:
        self.observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
        self.action_space = action_space or gym.spaces.Discrete(3)
        self.length = length
        self.obs: dict[int, Any] = {}    # step -> observation to return instead of the default
        self.infos: dict[int, dict] = {}  # step (0: reset) -> info
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs.get(0, np.full(2, 0.25, np.float32)), self.infos.get(0, {})

    def step(self, action):
        self.t += 1
        obs = self.obs.get(self.t, np.full(2, self.t, np.float32))
        return obs, 1.0, self.t >= self.length, False, self.infos.get(self.t, {})


def run_episodes(env: RecordingWrapper, episodes: int) -> None:
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            done = terminated or truncated


def manifest(d: Path) -> tuple[Path, dict]:
    (path,) = [Path(p) for p in glob.glob(str(d / "*.manifest.json"))]
    return path, json.loads(path.read_bytes())


def batch_docs(d: Path) -> list[dict]:
    _, man = manifest(d)
    return [json.loads((d / b["fn"]).read_bytes()) for b in man["batches"]]


def refs_of(obj: Any) -> list[dict]:
    """Every array reference inside a JSON value."""
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            return [obj]
        return [r for v in obj.values() for r in refs_of(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in refs_of(v)]
    return []


def json_depth(obj: Any) -> int:
    if isinstance(obj, dict):
        return 1 + max((json_depth(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((json_depth(v) for v in obj), default=0)
    return 0


def write_manifest(path: Path, man: dict) -> None:
    path.write_text(json.dumps(man))


# ---------------------------------------------------------------------------------------------
# JSON


def test_documented_limits_are_the_code_constants():
    doc = fmt.__doc__
    assert re.search(r"MAX_JSON_BYTES` \(2\*\*28 bytes", doc) and fmt.MAX_JSON_BYTES == 2 ** 28
    assert re.search(r"MAX_NESTING` \(64\)", doc) and fmt.MAX_NESTING == 64
    assert re.search(r"ALIGNMENT` \(8\)", doc) and fmt.ALIGNMENT == 8


def test_nesting_counts_the_values_depth_not_the_files(tmp_path):
    def nest(depth: int) -> Any:
        v: Any = 1
        for _ in range(depth):
            v = [v]
        return v

    inner = ValueEnv()
    inner.infos[0] = {"deep": nest(fmt.MAX_NESTING)}
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 1)
    env.close()
    (doc,) = batch_docs(tmp_path)
    assert json_depth(doc) > fmt.MAX_NESTING + 4  # the file nests deeper than the value
    with RecordingReader(tmp_path) as reader:
        assert reader[0].infos[0]["deep"] == nest(fmt.MAX_NESTING)
    inner.infos[0] = {"deep": nest(fmt.MAX_NESTING + 1)}
    env = RecordingWrapper(inner, tmp_path / "too-deep")
    with pytest.raises(UnsupportedValueError, match="nested deeper"):
        env.reset()
    env.close()


def test_numbers_int_stays_int_float_has_a_fraction_or_exponent(tmp_path):
    inner = ValueEnv()
    # (in a list: a VALUE in the batch JSON, not a stacked info column)
    numbers = [3, 1.0, 1e20, 5e-324, 2 ** 70, -(2 ** 65)]
    inner.infos[0] = {"numbers": numbers}
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 1)
    env.close()
    _, man = manifest(tmp_path)
    text = (tmp_path / man["batches"][0]["fn"]).read_text()
    for token in ("1.0", "1e+20", "5e-324", str(2 ** 70), str(-(2 ** 65))):
        assert re.search(r"[\[:,]" + re.escape(token) + r"[\],}]", text), token
    with RecordingReader(tmp_path) as reader:
        got = reader[0].infos[0]["numbers"]
    assert got == numbers and [type(v) for v in got] == [type(v) for v in numbers]


# ---------------------------------------------------------------------------------------------
# Episodes of a recording


def _record_cartpole(d: Path, prefix: str, seed: int, target: int = 5_000_000) -> None:
    env = RecordingWrapper(gym.make("CartPole-v1"), d, file_prefix=prefix,
                           target_batch_bytes=target)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(60):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def test_writers_ordered_by_created_then_prefix_legacy_first(tmp_path):
    from test_legacy import LegacyWriter, cartpole_like

    _record_cartpole(tmp_path, "zzz", 1)
    _record_cartpole(tmp_path, "aaa", 2)   # created later, smaller prefix
    _record_cartpole(tmp_path, "mmm", 3)
    LegacyWriter(tmp_path, "openaigym.trace.0.9").write_batch(
        [cartpole_like(np.random.default_rng(0), 4)])
    with RecordingReader(tmp_path) as reader:
        assert [w["prefix"] for w in reader.writers] == ["openaigym.trace.0.9", "zzz", "aaa",
                                                         "mmm"]
        assert reader[0].writer == "openaigym.trace.0.9" and reader[1].writer == "zzz"
    # A "created" that is not a string counts as "": that writer comes first of ours.
    path = tmp_path / "mmm.manifest.json"
    man = json.loads(path.read_bytes())
    man["created"] = 17
    write_manifest(path, man)
    with RecordingReader(tmp_path) as reader:
        assert [w["prefix"] for w in reader.writers][1] == "mmm"


def _parts(d: Path) -> list[list[tuple[int, int, bool]]]:
    """Per listed batch: its entries' (episode, part, continues)."""
    return [[(e["episode"], e["part"], e["continues"]) for e in doc["episodes"]]
            for doc in batch_docs(d)]


@pytest.fixture
def multipart(tmp_path) -> tuple[Path, list]:
    """A CartPole recording in small batches, so that episodes span several."""
    d = tmp_path / "rec"
    _record_cartpole(d, "mp", 0, target=400)
    with RecordingReader(d) as reader:
        episodes = [(ep.rewards.copy(), ep.observations.copy(), ep.end) for ep in reader]
    layout = _parts(d)
    assert len(layout) >= 4 and any(p > 0 for batch in layout for _, p, _ in batch)
    return d, episodes


def _batch_where(layout: list, want) -> int:
    """The first batch (not the first or last) whose entries satisfy ``want``."""
    for k in range(1, len(layout) - 1):
        if want(layout[k]):
            return k
    pytest.fail(f"no such batch in {layout}")


def _continues_into(batch: list) -> bool:
    return batch[0][1] > 0


def _starts_a_continued_episode(batch: list) -> bool:
    return any(p == 0 and more for _, p, more in batch)


@pytest.mark.parametrize("which", [_continues_into, _starts_a_continued_episode])
def test_a_batch_moved_aside_ends_the_episode_before_it_and_orphans_its_later_parts(
        multipart, which):
    d, original = multipart
    layout = _parts(d)
    k = _batch_where(layout, which)
    path, man = manifest(d)
    del man["batches"][k]  # as repair leaves a broken batch: a gap in the entry numbers
    write_manifest(path, man)
    # Expected: the episodes whose part 0 is in batch k are gone (their later parts skipped);
    # the one continued into batch k ends before it, end null; the others are unchanged.
    starts = [sum(1 for b in layout[:i] for _, p, _ in b if p == 0) for i in range(len(layout))]
    gone = {starts[k] + i for i in range(sum(1 for _, p, _ in layout[k] if p == 0))}
    cut = starts[k] - 1 if layout[k][0][1] > 0 else None  # the episode continued into batch k
    assert gone or cut is not None
    with RecordingReader(d) as reader:
        kept = [i for i in range(len(original)) if i not in gone]
        assert len(reader) == len(kept)
        for got, i in zip(reader, kept):
            rewards, obs, end = original[i]
            if i == cut:
                assert got.end is None and 0 < got.length < len(rewards)
                np.testing.assert_array_equal(got.rewards, rewards[:got.length])
                np.testing.assert_array_equal(got.observations, obs[:got.length + 1])
            else:
                assert got.end == end
                np.testing.assert_array_equal(got.observations, obs)


def test_a_missing_part_without_a_gap_is_refused(multipart):
    d, _ = multipart
    layout = _parts(d)
    k = _batch_where(layout, _continues_into)
    path, man = manifest(d)
    b = man["batches"][k]
    doc = json.loads((d / b["fn"]).read_bytes())
    for entry in doc["episodes"]:
        if entry["part"] > 0:
            entry["episode"] = 10 ** 6
    data = json.dumps(doc).encode()
    (d / b["fn"]).write_bytes(data)
    b["json_size"], b["json_crc32"] = len(data), fileio.crc32(data)
    b.pop("index", None)  # (it says what the JSON said: see tests/hostile.py rewrite_batch)
    write_manifest(path, man)
    with RecordingReader(d) as reader:
        with pytest.raises(FormatError, match=r"part \d+ missing"):
            list(reader)


def test_the_last_listed_part_of_an_unfinished_episode_ends_it(multipart):
    d, original = multipart
    path, man = manifest(d)
    layout = _parts(d)
    last = max(i for i, b in enumerate(layout) if b[-1][2])  # a batch ending in "continues"
    man["batches"] = man["batches"][:last + 1]
    man["complete"] = False
    write_manifest(path, man)
    with RecordingReader(d) as reader:
        ep = reader[len(reader) - 1]
        assert ep.end is None and ep.length > 0


# ---------------------------------------------------------------------------------------------
# Arrays


def test_offsets_aligned_padding_zero_file_ends_at_the_last_array(tmp_path):
    env = RecordingWrapper(gym.make("sample_envs/NestedDict-v0"), tmp_path,
                           target_batch_bytes=3000)
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(40):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()
    _, man = manifest(tmp_path)
    padded = 0
    for b in man["batches"]:
        data = (tmp_path / b["bin"]).read_bytes()
        refs = refs_of(json.loads((tmp_path / b["fn"]).read_bytes())["episodes"])
        assert {r["npyoff"] % fmt.ALIGNMENT for r in refs} == {0}
        assert len({r["dtype"][1:] for r in refs}) > 2  # several item sizes
        # (the batch index's table is the last array: the JSON does not reference it)
        table_start, table_end = index_span(b)
        assert table_start >= max(r["npyoff"] + r["size"] for r in refs)
        assert len(data) == b["bin_size"] == table_end
        covered = np.zeros(len(data), bool)
        covered[table_start:table_end] = True
        for r in sorted(refs, key=lambda r: r["npyoff"]):
            assert not covered[r["npyoff"]:r["npyoff"] + r["size"]].any()  # no overlap
            covered[r["npyoff"]:r["npyoff"] + r["size"]] = True
        padding = np.frombuffer(data, np.uint8)[~covered]
        assert not padding.any()
        padded += padding.size
    assert padded > 0, "no padding to check"
    assert verify(tmp_path) == []


def test_verify_reports_a_flipped_padding_bit_and_bytes_after_the_last_array(tmp_path):
    inner = ValueEnv()
    inner.infos[1] = {"b": np.array([True, False, True])}  # 3 bytes: padding follows
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 2)
    env.close()
    path, man = manifest(tmp_path)
    b = man["batches"][0]
    refs = refs_of(json.loads((tmp_path / b["fn"]).read_bytes())["episodes"])
    covered = np.zeros(b["bin_size"], bool)
    for r in refs:
        covered[r["npyoff"]:r["npyoff"] + r["size"]] = True
    gap = int(np.flatnonzero(~covered)[0])
    bin_path = tmp_path / b["bin"]
    data = bytearray(bin_path.read_bytes())
    data[gap] ^= 0x10
    bin_path.write_bytes(bytes(data))
    problems = verify(tmp_path)
    assert len(problems) == 1 and "padding" in problems[0].message
    assert problems[0].path.endswith(b["bin"])
    with RecordingReader(tmp_path, verify=True) as reader:  # every array's own bytes are fine
        assert len(list(reader)) == 2
    data[gap] ^= 0x10
    bin_path.write_bytes(bytes(data) + b"\0" * 8)
    b["bin_size"] += 8
    write_manifest(path, man)
    problems = verify(tmp_path)
    assert len(problems) == 1 and "follow the last array" in problems[0].message


def test_unicode_item_size_counts_characters_of_four_bytes(tmp_path):
    inner = ValueEnv()
    inner.infos[0] = {"s": np.array(["ab", "abcdefg"]), "x": np.float32(1.5)}
    inner.infos[1] = {"x": np.float32(2.5)}
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 1)
    env.close()
    (doc,) = batch_docs(tmp_path)
    cols = {c["key"]: c for c in doc["episodes"][0]["infos"]["keys"]}
    ref = cols["s"]["values"][0] if cols["s"]["kind"] == "values" else cols["s"]["values"]
    assert ref["dtype"] == "<U7" and ref["shape"][-1] == 2 and ref["size"] == 2 * 7 * 4
    _, man = manifest(tmp_path)
    codes = np.fromfile(tmp_path / ref["npyfile"], "<u4", 14, offset=ref["npyoff"])
    assert codes.tolist() == [ord(c) for c in "ab"] + [0] * 5 + [ord(c) for c in "abcdefg"]
    # pytype null, values of shape (n,): each row is a numpy scalar of the column's dtype.
    assert cols["x"]["pytype"] is None and cols["x"]["values"]["shape"] == [2]
    with RecordingReader(tmp_path) as reader:
        infos = reader[0].infos
    assert type(infos[0]["x"]) is np.float32 and infos[1]["x"] == np.float32(2.5)
    assert infos[0]["s"].dtype.str == "<U7" and infos[0]["s"].tolist() == ["ab", "abcdefg"]


def test_byte_order_leaves_little_endian_values_keep_theirs(tmp_path):
    inner = ValueEnv()
    inner.obs[2] = np.array([3.5, -1.0], dtype=">f4")
    inner.infos[1] = {"be": np.arange(3, dtype=">f8")}
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 1)
    env.close()
    (doc,) = batch_docs(tmp_path)
    entry = doc["episodes"][0]
    assert entry["observations"]["dtype"] == "<f4"
    (col,) = [c for c in entry["infos"]["keys"] if c["key"] == "be"]
    assert col["values"]["dtype"] == ">f8"
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
    assert ep.observations.dtype.str == "<f4" and ep.observations[2].tolist() == [3.5, -1.0]
    assert ep.infos[1]["be"].dtype.str == ">f8" and ep.infos[1]["be"].tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------
# Trees and spaces


def test_widening_goes_by_dtype_for_the_whole_column_of_a_batch(tmp_path):
    inner = ValueEnv(length=6)
    inner.obs[3] = np.array([0.5, 0.5], dtype=np.float64)  # float32 holds 0.5: still widened
    env = RecordingWrapper(inner, tmp_path)
    env.reset()
    for _ in range(6):
        env.step(0)           # episode 0: no float64 value, but in the widened batch
    env.reset()
    for _ in range(4):
        env.step(0)           # episode 1 gets the float64 observation at step 3
    env.flush()               # ... and continues in the next batch
    for _ in range(2):
        env.step(0)
    env.close()
    docs = batch_docs(tmp_path)
    assert len(docs) == 2
    assert [e["observations"]["dtype"] for e in docs[0]["episodes"]] == ["<f8", "<f8"]
    assert [e["observations"]["dtype"] for e in docs[1]["episodes"]] == ["<f4"]
    with RecordingReader(tmp_path) as reader:
        first, second = reader[0], reader[1]
    assert first.observations.dtype == np.float64 and second.observations.dtype == np.float64
    assert second.observations[3].tolist() == [0.5, 0.5] and len(second.observations) == 7
    assert second.observations[6].tolist() == [6.0, 6.0]


def test_discrete_description_carries_its_dtype(tmp_path):
    inner = ValueEnv(action_space=gym.spaces.Discrete(3, dtype=np.int32))
    env = RecordingWrapper(inner, tmp_path)
    run_episodes(env, 1)
    env.close()
    _, man = manifest(tmp_path)
    assert man["action_space"]["dtype"] == "<i4"
    (doc,) = batch_docs(tmp_path)
    assert doc["episodes"][0]["actions"]["dtype"] == "<i4"
    with RecordingReader(tmp_path) as reader:
        assert reader[0].actions.dtype == np.int32 and reader.action_space.dtype == np.int32


def test_unknown_keys_of_a_space_are_ignored(tmp_path):
    _record_cartpole(tmp_path, "cp", 0)
    with RecordingReader(tmp_path) as reader:
        before = [ep.observations for ep in reader]
    path, man = manifest(tmp_path)
    man["observation_space"]["charset_ranges"] = [[0, 10]]
    man["action_space"]["future"] = {"anything": 1}
    write_manifest(path, man)
    with RecordingReader(tmp_path) as reader:
        for got, want in zip(reader, before, strict=True):
            np.testing.assert_array_equal(got.observations, want)


# ---------------------------------------------------------------------------------------------
# Legacy files and the example readers


def test_legacy_dtype_names_empty_columns_and_made_up_fields(tmp_path):
    from test_legacy import make_legacy

    written = make_legacy(tmp_path)
    texts = " ".join(Path(p).read_text() for p in glob.glob(str(tmp_path / "*.ep*.json")))
    assert '"dtype": "float32"' in texts and '"dtype": "uint8"' in texts
    with RecordingReader(tmp_path) as reader:
        episodes = list(reader)
    assert len(episodes) == len(written)
    for ep, src in zip(episodes, written):
        n = len(ep.observations) - 1
        assert ep.rewards.dtype == np.float64 and ep.rewards.shape == (n,)
        assert ep.terminations.shape == ep.truncations.shape == (n,)
        assert not ep.terminations.any() and not ep.truncations.any()
        assert ep.infos == [{} for _ in range(n + 1)]
        assert (ep.seed, ep.options, ep.end, ep.sub_env, ep.env_id) == (None,) * 5
    reset_only = [ep for ep in episodes if len(ep.observations) == 1]
    assert reset_only and reset_only[0].actions.shape == (0,)


def test_the_spec_names_its_example_readers():
    doc = fmt.__doc__
    assert "readers/c/" in doc and "gym_recorder/integrations/viewer/decode.js" in doc
    for name in ("Makefile", "grr.h", "grread.c"):
        assert os.path.isfile(ROOT / "readers" / "c" / name)


def test_empty_numpy_strings_and_empty_boxes_record_and_read_back(tmp_path):
    """np.str_("") and np.bytes_(b"") are <U0 / |S0 scalars, a dtype no array has: written as
    <U1 / |S1, they read back equal (they made the recording unreadable); a Box of shape (2, 0)
    has bounds [] and its space is read back."""
    inner = ValueEnv(length=2)
    inner.observation_space = gym.spaces.Box(0, 1, (2, 0), np.float32)
    inner.obs = {t: np.zeros((2, 0), np.float32) for t in range(3)}
    inner.infos = {0: {"s": np.str_(""), "b": np.bytes_(b"")},
                   1: {"s": np.str_("x"), "b": np.bytes_(b"")}}
    with RecordingWrapper(inner, tmp_path) as env:
        env.reset(seed=0)
        env.step(0)
        env.step(0)
    with RecordingReader(tmp_path, verify=True) as reader:
        assert reader.observation_space == inner.observation_space
        ep = reader[0]
        assert ep.observations.shape == (3, 2, 0)
        for got, want in zip(ep.infos, [inner.infos[0], inner.infos[1]]):
            for k, v in want.items():
                assert type(got[k]) is type(v) and got[k] == v
