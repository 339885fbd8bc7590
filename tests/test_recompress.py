"""``gym-recorder compress`` / ``decompress``: in place, crash-safe, beside readers; decompress
gives back raw arrays np.fromfile loads; kill -9 while recording compressed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.cli import main
from gym_recorder.integrity import verify
from gym_recorder.integrity.recompress import compress, decompress

from hostile import load_manifest
from training_helpers import assert_tree

pytest.importorskip("zstandard")
ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("observations", "actions", "rewards", "terminations", "truncations", "infos")


def _record(d, episodes=6, compression=None):
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=24, width=20,
                                    episode_length=33), d, target_batch_bytes=20_000,
                           compression=compression)
    env.action_space.seed(0)
    for e in range(episodes):
        env.reset(seed=e)
        for _ in range(33):
            env.step(env.action_space.sample())
    env.close()


def _episodes(d):
    with RecordingReader(d) as reader:
        return [{name: getattr(ep, name) for name in FIELDS} for ep in reader]


def _assert_equal(got, want):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        for name in ("observations", "actions", "rewards", "terminations", "truncations"):
            assert_tree(g[name], w[name], f"{i} {name}")
        assert g["infos"] == w["infos"]


def _bin_arrays(d):
    """Every ARRAY of every batch, loaded with np.fromfile as the format card says."""
    out = []
    man = load_manifest(d)
    for b in man["batches"]:
        doc = json.loads((d / b["fn"]).read_text())
        stack = [doc["episodes"]]
        while stack:
            obj = stack.pop()
            if isinstance(obj, dict):
                if obj.get("__type") == "ndarray":
                    assert "codec" not in obj
                    out.append(np.fromfile(d / obj["npyfile"], dtype=obj["dtype"],
                                           count=int(np.prod(obj["shape"])),
                                           offset=obj["npyoff"]).reshape(obj["shape"]))
                else:
                    stack.extend(obj.values())
            elif isinstance(obj, list):
                stack.extend(obj)
    return out


def test_compress_then_decompress_round_trip(tmp_path, capsys):
    d = tmp_path / "rec"
    _record(d)
    want = _episodes(d)
    raw_arrays = _bin_arrays(d)
    raw_size = sum(f.stat().st_size for f in d.iterdir())
    assert main(["compress", str(d), "--grace", "0", "--chunk-rows", "4"]) == 0
    assert "batches compressed" in capsys.readouterr().out
    man = load_manifest(d)
    assert man["version"] == 2 and all(b.get("codecs") == ["zstd"] for b in man["batches"])
    assert sum(f.stat().st_size for f in d.iterdir()) < raw_size * 0.6
    # exactly the new batches and the manifest: the old files are gone
    assert sorted(os.listdir(d)) == sorted(
        [b[k] for b in man["batches"] for k in ("fn", "bin")]
        + [f for f in os.listdir(d) if f.endswith(".manifest.json")])
    _assert_equal(_episodes(d), want)
    assert verify(d) == []
    assert main(["info", str(d)]) == 0
    assert "stored / raw" in capsys.readouterr().out
    assert main(["decompress", str(d), "--grace", "0"]) == 0
    man = load_manifest(d)
    assert man["version"] == 1 and not any("codecs" in b for b in man["batches"])
    _assert_equal(_episodes(d), want)
    assert verify(d) == []
    back = _bin_arrays(d)  # byte-identical arrays, loaded with np.fromfile
    assert len(back) == len(raw_arrays)
    key = lambda a: (a.shape, a.dtype.str, a.tobytes())  # noqa: E731
    assert sorted(map(key, back)) == sorted(map(key, raw_arrays))


def test_nothing_to_compress_leaves_files(tmp_path, capsys):
    d = tmp_path / "cp"
    env = RecordingWrapper(gym.make("CartPole-v1"), d)
    env.reset(seed=0)
    for _ in range(30):
        if any(env.step(0)[2:4]):
            env.reset()
    env.close()
    before = sorted(os.listdir(d))
    assert compress(d, grace=0) == []
    assert decompress(d, grace=0) == []
    assert sorted(os.listdir(d)) == before


def test_readers_read_while_compress_runs(tmp_path):
    """A reader opened before reads every episode during the grace period, and the new
    batches after refresh."""
    d = tmp_path / "rec"
    _record(d)
    want = _episodes(d)
    reader = RecordingReader(d)
    t = threading.Thread(target=compress, args=(d,), kwargs={"grace": 1.5})
    t.start()
    try:
        while t.is_alive():
            _assert_equal([{n: getattr(reader[i], n) for n in FIELDS}
                           for i in range(len(reader))], want)
            time.sleep(0.05)
            if load_manifest(d)["version"] == 2:
                break
        reader2 = RecordingReader(d)
        _assert_equal([{n: getattr(ep, n) for n in FIELDS} for ep in reader2], want)
        reader2.close()
    finally:
        t.join()
        reader.close()


_CHILD = """
import sys
sys.path.insert(0, {root!r})
from gym_recorder.cli import main
sys.exit(main(["{cmd}", {d!r}, "--grace", "0"]))
"""


@pytest.mark.stress
@pytest.mark.parametrize("cmd", ["compress", "decompress"])
def test_kill_9_during_compress(tmp_path, cmd):
    """SIGKILL at random moments of compress/decompress: the recording reads every episode
    exactly once, equal to before, from old batches or new, and verifies clean."""
    source = tmp_path / "source"
    _record(source, episodes=8, compression="zstd" if cmd == "decompress" else None)
    want = _episodes(source)
    rng = np.random.default_rng(0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for trial in range(6):
        d = tmp_path / f"t{trial}"
        subprocess.run(["cp", "-r", str(source), str(d)], check=True)
        child = subprocess.Popen([sys.executable, "-c", _CHILD.format(
            root=str(ROOT), cmd=cmd, d=str(d))], env=env, stdout=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(0.5, 1.5)))  # (~0.7 s of imports, then ~0.7 s of work)
        child.send_signal(signal.SIGKILL)
        child.wait()
        _assert_equal(_episodes(d), want)
        assert verify(d) == []  # (files a killed run left unlisted are ignored)
        # and a second run finishes the job
        (compress if cmd == "compress" else decompress)(d, grace=0)
        _assert_equal(_episodes(d), want)
        assert verify(d) == []


_RECORDER = """
import sys, time, gymnasium as gym
sys.path.insert(0, {root!r})
import sample_envs
from gym_recorder import RecordingWrapper
env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=32, width=32, episode_length=25),
                       {d!r}, compression="zstd", target_batch_bytes=30000, flush_interval=0.05)
env.action_space.seed(0)
for e in range(60):
    env.reset(seed=e)
    for _ in range(25):
        env.step(env.action_space.sample())
        time.sleep(0.001)
env.close()
"""


@pytest.mark.stress
def test_kill_9_while_recording_compressed(tmp_path):
    """SIGKILL while a compressing recorder runs: every committed episode reads back exactly
    (the env is deterministic per seed), and the recording verifies clean."""
    rng = np.random.default_rng(1)
    ref = tmp_path / "ref"
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=32, width=32,
                                    episode_length=25), ref)
    env.action_space.seed(0)
    for e in range(60):
        env.reset(seed=e)
        for _ in range(25):
            env.step(env.action_space.sample())
    env.close()
    truth = _episodes(ref)
    for trial in range(4):
        d = tmp_path / f"k{trial}"
        child = subprocess.Popen([sys.executable, "-c", _RECORDER.format(root=str(ROOT),
                                                                          d=str(d))],
                                 env={**os.environ, "PYTHONPATH": str(ROOT)},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(1.0, 2.5)))
        child.send_signal(signal.SIGKILL)
        child.wait()
        if not d.exists() or not any(f.endswith(".manifest.json") for f in os.listdir(d)):
            continue
        got = _episodes(d)
        for i, ep in enumerate(got):
            n = len(ep["actions"])
            for name in ("observations", "actions", "rewards"):
                assert_tree(ep[name], truth[i][name][:n + (name == "observations")],
                            f"{trial} {i} {name}")
        assert verify(d) == []


def test_record_compress_cli(tmp_path, capsys):
    """gym-recorder record --compress stores the frames compressed."""
    d = tmp_path / "rec"
    assert main(["record", "sample_envs/Image-v0", "--import", "sample_envs", "-d", str(d),
                 "--steps", "50", "--seed", "0", "--compress", "--env-kwargs",
                 '{"height": 24, "width": 24, "episode_length": 20}']) == 0
    man = load_manifest(d)
    assert man["version"] == 2 and man["batches"][0]["codecs"] == ["zstd"]
    doc = json.loads((d / man["batches"][0]["fn"]).read_text())
    assert doc["episodes"][0]["observations"]["codec"]["name"] == "zstd"
    with RecordingReader(d) as reader:
        assert sum(len(ep) for ep in reader) == 50
    assert verify(d) == []


def test_repair_rebuilds_a_compressed_writers_manifest(tmp_path):
    """A lost manifest of a compressing writer is rebuilt from its batches (codecs listed,
    version 2), and the recording reads as before."""
    from gym_recorder.integrity import repair

    d = tmp_path / "rec"
    _record(d, episodes=3, compression="zstd")
    want = _episodes(d)
    man_path = next(d.glob("*.manifest.json"))
    old = json.loads(man_path.read_text())
    man_path.unlink()
    repair(d)
    man = load_manifest(d)
    assert man["version"] == 2
    assert [b.get("codecs") for b in man["batches"]] == [b.get("codecs") for b in old["batches"]]
    _assert_equal(_episodes(d), want)
    assert verify(d) == []


def test_repair_salvages_entries_of_a_damaged_compressed_batch(tmp_path):
    """A flipped byte in one entry's compressed frames: repair keeps the batch's other entries
    (their stored bytes copied as they are) and the recording verifies clean."""
    from gym_recorder.integrity import repair

    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=24, width=20,
                                    episode_length=6), d, target_batch_bytes=1 << 20,
                           compression="zstd")
    for e in range(6):
        env.reset(seed=e)
        for _ in range(6):
            env.step(0)
    env.close()
    want = _episodes(d)
    man = load_manifest(d)
    doc = json.loads((d / man["batches"][0]["fn"]).read_text())
    assert len(doc["episodes"]) >= 4
    ref = doc["episodes"][2]["observations"]
    assert "codec" in ref
    binf = d / man["batches"][0]["bin"]
    data = bytearray(binf.read_bytes())
    data[ref["npyoff"] + ref["stored"] - 5] ^= 0xFF
    binf.write_bytes(bytes(data))
    assert verify(d) != []
    repair(d)
    assert verify(d) == []
    got = _episodes(d)
    assert len(got) == len(want) - 1
    _assert_equal(got, want[:2] + want[3:])
