"""Compacting a zstd-compressed recording: the compressed arrays' stored bytes are copied byte
for byte (never recompressed), the new batches say version 2 and list their codecs, parts of
an episode holding compressed arrays stay apart, and every remaining episode reads back exactly
(reader, transitions, column, the C reader); kill -9 while compacting loses nothing."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import zlib
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401  (registers sample_envs/Image-v0)
from gym_recorder import RecordingReader, RecordingWrapper, Zstd
from gym_recorder import edit
from gym_recorder.cli import main
from gym_recorder.edit.compact import compact
from gym_recorder.errors import EditError, FormatError, RecorderError
from gym_recorder.integrity import verify
from gym_recorder.integrity.recompress import leaf_bytes
from gym_recorder.training.transitions import transitions
from test_c_reader import assert_same_as_python, c_lines, grread  # noqa: F401
from test_edit import episodes, same
from test_edit_crash import fingerprints, kill_edits_and_check

pytest.importorskip("zstandard")


def _record(d: Path, episodes_: int = 6, target: int = 5000, seed: int = 0) -> None:
    """Image-v0 frames of 16x16x3 (768 bytes a row, compressed), episodes of 20 steps cut
    into parts by small batches (by bytes only: no flush interval, so that a slow machine's
    time-based commits do not add batches of a row or two, which are stored raw)."""
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=20), d,
                           compression=Zstd(chunk_rows=4), target_batch_bytes=target,
                           flush_interval=None)
    env.action_space.seed(seed)
    for k in range(episodes_):
        env.reset(seed=seed + k)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()


def _manifest(d: Path) -> dict:
    [path] = [p for p in d.glob("*.manifest.json") if not p.name.startswith("_")]
    return json.loads(path.read_text())


def _stored_blobs(d: Path) -> Counter:
    """The stored bytes of every compressed ARRAY the manifest lists (their SHA-256)."""
    out: Counter = Counter()
    for b in _manifest(d)["batches"]:
        doc = json.loads((d / b["fn"]).read_text())
        data = (d / b["bin"]).read_bytes()

        def walk(x) -> None:
            if isinstance(x, dict):
                if x.get("__type") == "ndarray":
                    if "codec" in x:
                        out[hashlib.sha256(
                            data[x["npyoff"]: x["npyoff"] + x["stored"]]).hexdigest()] += 1
                    return
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)

        walk(doc["episodes"])
    return out


def _views(d: Path) -> tuple[list, object, np.ndarray, np.ndarray]:
    with RecordingReader(d) as reader:
        t = transitions(reader)
        return (episodes(d), (t.obs.copy(), t.next_obs.copy(), t.action.copy(), t.reward.copy()),
                reader.column("observations").copy(), reader.column("actions").copy())


def test_compact_copies_compressed_arrays_byte_for_byte(tmp_path: Path, grread) -> None:
    """Delete episodes, compact (small batches kept small, or joined up to a big target):
    every remaining episode reads as before, the compressed bytes are the very same."""
    d = tmp_path / "rec"
    _record(d)
    man = _manifest(d)
    # (an entry of a row or two may not compress: stored raw, its batch may have an index)
    assert len(man["batches"]) > 20
    assert sum(b.get("codecs") == ["zstd"] for b in man["batches"]) > len(man["batches"]) / 2
    assert max(e["parts"] for e in c_lines(grread, "list", str(d))) > 1  # episodes in parts
    blobs = _stored_blobs(d)
    edit.delete(d, [1, 4])
    kept_eps, kept_t, kept_obs, kept_act = _views(d)
    assert len(kept_eps) == 4
    shutil.copytree(d, tmp_path / "big")
    counts = {}
    for d, target in ((d, 5000), (tmp_path / "big", 10_000_000)):
        result = compact(d, grace=0, target_batch_bytes=target)
        assert len(result.replaced) == 1 and result.freed > 0
        eps, t, obs, act = _views(d)
        same(eps, kept_eps, ids=False)
        for got, expected in zip(t, kept_t):
            np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(obs, kept_obs)
        np.testing.assert_array_equal(act, kept_act)
        assert verify(d) == []
        after = _stored_blobs(d)
        assert sum(after.values()) > 0 and not after - blobs  # copied, never recompressed
        new = _manifest(d)
        assert new["version"] == 2 and new["replaces"] == man["prefix"]
        for b in new["batches"]:
            doc = json.loads((d / b["fn"]).read_text())
            coded = '"codec"' in json.dumps(doc["episodes"])
            assert b.get("codecs") == (["zstd"] if coded else None)
            assert doc["version"] == (2 if coded else 1)
            if coded:  # as the writer writes them: no index beside codecs
                assert "index" not in b and "index" not in doc
        counts[target] = len(new["batches"])
        assert_same_as_python(grread, d)
        # again: nothing deleted, batches join further (or not): still exact
        compact(d, grace=0, target_batch_bytes=target)
        same(episodes(d), kept_eps, ids=False)
        assert verify(d) == []
    # batches joined where no episode runs from one into the next (parts stay apart)
    assert counts[10_000_000] < counts[5000]


def test_compact_mixed_raw_and_compressed_writers(tmp_path: Path, grread) -> None:
    """A directory with a raw writer and a compressed one: each compacted on its own terms
    (the raw one keeps its batch index); info's bytes per leaf count the shown writers."""
    d = tmp_path / "rec"
    _record(d, episodes_=3)
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=20), d, target_batch_bytes=12_000)
    for seed in (9, 10, 11):
        env.reset(seed=seed)
        for _ in range(20):
            env.step(env.action_space.sample())
    env.close()
    before = episodes(d)
    edit.delete(d, [0, 3])
    assert main(["info", str(d)]) == 0  # (the edit log's tripwire is no writer)
    result = compact(d, grace=60, target_batch_bytes=10_000_000)  # old files kept a while
    assert len(result.replaced) == 2 and result.retired > 0
    kept = [before[k] for k in range(len(before)) if k not in (0, 3)]
    same(episodes(d), kept, ids=False)
    assert verify(d) == []
    # info's bytes per leaf: of the writers shown, not of the replaced ones still on disk
    leaves = {x["leaf"]: x for x in leaf_bytes(d)}
    assert leaves["observations"]["raw"] == sum(k[0].nbytes for k in kept)
    assert leaves["observations"]["stored"] < leaves["observations"]["raw"]
    assert main(["info", str(d)]) == 0
    with RecordingReader(d) as reader:
        for w in reader.writers:
            batches = w["manifest"]["batches"]
            if any(b.get("codecs") for b in batches):  # per batch: none beside codecs
                assert not any("index" in b and b.get("codecs") for b in batches)
            else:
                assert all("index" in b for b in batches)
    assert_same_as_python(grread, d)


# The edit crash test's child, with more compactions and a compressed recording's targets.
COMPACT_MIX = '{"delete": 0.4, "most": 2, "compact": 0.8, "targets": [12000, 10000000]}'


@pytest.mark.stress
def test_kill_while_compacting_a_compressed_recording(tmp_path: Path) -> None:
    """kill -9 at random moments of deleting and compacting a compressed recording: it
    verifies clean and holds each episode exactly once, in the old state or the new."""
    source = tmp_path / "source"
    _record(source, episodes_=10)
    everything = fingerprints(source)
    assert max(everything.values()) == 1
    rng = random.Random(2)
    mid = 0
    for trial in range(5):
        d = tmp_path / f"t{trial}"
        shutil.copytree(source, d)
        got, inside = kill_edits_and_check(d, trial, rng.uniform(0.3, 1.5), everything,
                                           COMPACT_MIX)
        mid += inside
        compact(d, grace=0)  # a compaction after the kill finishes cleanly
        assert verify(d) == [] and fingerprints(d) == got
        shutil.rmtree(d)
    print(f"\n{mid} of 5 kills inside an edit or compaction")


def _first_coded(doc: dict) -> dict:
    for entry in doc["episodes"]:
        ref = entry["observations"]
        if "codec" in ref:
            return ref
    raise AssertionError("no compressed array in the batch")


@pytest.mark.parametrize("tamper", ["beyond", "short", "codec", "flipped"])
def test_compact_refuses_hostile_compressed_arrays(tmp_path: Path, tamper: str) -> None:
    """A compressed reference or stored bytes that do not hold up: compact fails with a named
    error and commits nothing (the recording reads as before, verify names the batch)."""
    d = tmp_path / "rec"
    _record(d, episodes_=3)
    edit.delete(d, [1])
    man = _manifest(d)
    [mpath] = [p for p in d.glob("*.manifest.json") if not p.name.startswith("_")]
    b = next(b for b in man["batches"] if b.get("codecs"))
    doc = json.loads((d / b["fn"]).read_text())
    ref = _first_coded(doc)
    if tamper == "flipped":  # a stored byte (its CRC-32 no longer matches)
        data = bytearray((d / b["bin"]).read_bytes())
        data[ref["npyoff"] + ref["stored"] - 1] ^= 0xFF
        (d / b["bin"]).write_bytes(bytes(data))
    else:
        if tamper == "beyond":
            ref["stored"] = b["bin_size"] + 4096
        elif tamper == "short":
            ref["stored"] = 3
        else:
            ref["codec"]["name"] = "lz9"
        text = json.dumps(doc).encode()
        (d / b["fn"]).write_bytes(text)
        b["json_size"], b["json_crc32"] = len(text), zlib.crc32(text)
        mpath.write_text(json.dumps(man))
    edits = sorted(p.name for p in d.glob("_edits.*"))
    with pytest.raises(RecorderError) as info:
        compact(d, grace=0)
    assert isinstance(info.value, (EditError, FormatError))
    assert b["bin" if tamper in ("beyond", "flipped") else "fn"].split(".ep")[0] in \
        str(info.value) and "a bug" not in str(info.value)
    assert sorted(p.name for p in d.glob("_edits.*")) == edits  # nothing committed
    assert json.loads(mpath.read_text()) == man
    problems = verify(d)
    assert problems and any(b["fn"] in str(p) for p in problems)


def test_compact_does_not_launder_damaged_parts(tmp_path: Path) -> None:
    """A raw array damaged on disk, in a part that compaction would join with the next: refused
    by its CRC-32 (a joined array's new CRC-32 would otherwise vouch for the damage)."""
    from conftest import record_cartpole

    d = tmp_path / "rec"
    record_cartpole(d, episodes=10, target_batch_bytes=1500)
    man = _manifest(d)
    b = next(b for b in man["batches"]
             if any(e.get("continues") for e in json.loads((d / b["fn"]).read_text())["episodes"]))
    entry = next(e for e in json.loads((d / b["fn"]).read_text())["episodes"]
                 if e.get("continues"))
    ref = entry["rewards"]
    data = bytearray((d / b["bin"]).read_bytes())
    data[ref["npyoff"]] ^= 0x01
    (d / b["bin"]).write_bytes(bytes(data))
    with pytest.raises(EditError, match="CRC-32"):
        compact(d, grace=0, target_batch_bytes=100_000)
    assert _manifest(d) == man and verify(d)
