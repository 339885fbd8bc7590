"""repair() keeps every episode of a damaged batch whose arrays check out, and a repair killed
at any moment leaves a recording that opens and reads."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import image_episode
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import ChecksumError
from gym_recorder.integrity import REPAIR_FOLDER_PREFIX, repair, verify
from sample_envs.envs import ImageEnv

ROOT = Path(__file__).resolve().parent.parent
SIZE = 8  # 8x8x3 frames: 192 bytes a step
LENGTH = 6
EPISODES = 12
TARGET = 6_000  # about 5 episodes of 6 steps a batch: several whole episodes in each batch


def record(directory: Path, episodes: int = EPISODES) -> None:
    env = RecordingWrapper(ImageEnv(height=SIZE, width=SIZE, episode_length=LENGTH), directory,
                           target_batch_bytes=TARGET)
    for ep in range(episodes):
        env.reset(seed=ep)
        for t in range(LENGTH):
            env.step(t % 4)
    env.close()


def batches(directory: Path) -> list[tuple[str, dict]]:
    return sorted((n, json.loads((directory / n).read_bytes())) for n in os.listdir(directory)
                  if ".ep" in n and n.endswith(".json"))


def damage_one_episode(directory: Path) -> tuple[str, int]:
    """Flips one byte of the observations of a whole episode in the middle of a batch.

    Returns:
        The batch JSON's name and the damaged episode's seed.
    """
    for name, doc in batches(directory):
        for entry in doc["episodes"][1:-1]:
            if entry["part"] == 0 and not entry["continues"]:
                ref = entry["observations"]
                path = directory / ref["npyfile"]
                data = bytearray(path.read_bytes())
                data[ref["npyoff"] + ref["size"] // 2] ^= 0xFF
                path.write_bytes(bytes(data))
                return name, entry["seed"]
    raise AssertionError("no batch holds a whole episode between two others")


def assert_episodes(directory: Path, seeds: list[int]) -> None:
    with RecordingReader(directory, verify=True) as reader:
        assert sorted(ep.seed for ep in reader) == seeds
        for ep in reader:
            frames, actions, rewards = image_episode(ep.seed, SIZE, LENGTH)
            np.testing.assert_array_equal(ep.observations, frames)
            np.testing.assert_array_equal(ep.actions, actions)
            np.testing.assert_array_equal(ep.rewards, rewards)
            assert ep.end == "truncated"


def test_one_bad_array_loses_only_its_episode(tmp_path):
    record(tmp_path)
    victim, seed = damage_one_episode(tmp_path)
    stem = victim[: -len(".json")]
    n_entries = len(dict(batches(tmp_path))[victim]["episodes"])
    assert verify(tmp_path)  # the damage is seen
    actions = repair(tmp_path)
    kept = [line for line in actions if line.startswith("kept ")]
    assert len(kept) == 1, actions
    assert kept[0].startswith(f"kept {n_entries - 1} of {n_entries} entries of {victim} ")
    # The kept entries take the batch's names (its first entry is kept): the damaged files are
    # copied aside before they are replaced.
    assert f"; copied the damaged {stem}.json, {stem}.bin to {REPAIR_FOLDER_PREFIX}" in kept[0]
    assert "CRC-32 of the array's bytes" in kept[0]
    assert actions[-1].startswith("rebuilt ")
    assert verify(tmp_path) == []
    # Every other episode is there, byte for byte; the damaged one alone is gone.
    assert_episodes(tmp_path, [s for s in range(EPISODES) if s != seed])
    # Nothing deleted: the damaged batch is in the repair folder as it was.
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith(REPAIR_FOLDER_PREFIX)]
    assert {f"{stem}.json", f"{stem}.bin"} <= set(os.listdir(folder))
    assert repair(tmp_path) == []  # and a second repair finds nothing to do


def test_cli_repair_says_what_was_kept_and_moved(tmp_path):
    record(tmp_path / "rec")
    victim, _ = damage_one_episode(tmp_path / "rec")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "gym_recorder"]
    bad = subprocess.run(run + ["verify", "rec"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "gym-recorder verify: error: 1 problem found in rec")
    fixed = subprocess.run(run + ["repair", "rec"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    assert fixed.returncode == 0 and fixed.stderr == ""
    assert f"kept " in fixed.stdout and f"entries of {victim} " in fixed.stdout
    assert f"the damaged {victim}, " in fixed.stdout
    ok = subprocess.run(run + ["verify", "rec"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip() == "rec: no problems found"


# -- killed repairs --------------------------------------------------------------------------

# A repair in a child process that SIGKILLs itself just before its N-th rename (every change a
# repair makes to the directory is a rename or a mkdir: files are written to temporary names
# first); N = 0 never kills. Or, with a delay, a repair started on "go" and killed from outside.
KILLER = """
import os, signal, sys
from gym_recorder.integrity import repair
n = int(sys.argv[2])
count = 0
real_rename = os.rename
def rename(*args, **kwargs):
    global count
    count += 1
    if count == n:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_rename(*args, **kwargs)
os.rename = rename
if n < 0:
    print("ready", flush=True)
    sys.stdin.readline()
repair(sys.argv[1])
print(count, flush=True)
"""


def _damaged_recording(directory: Path) -> tuple[int, set[bytes]]:
    record(directory)
    _, seed = damage_one_episode(directory)
    # Also a second damaged batch and a manifest that lost its last batch, to give the repair
    # more to do (and more moments to be killed at).
    name, doc = batches(directory)[-2]
    ref = doc["episodes"][0]["rewards"]
    path = directory / ref["npyfile"]
    data = bytearray(path.read_bytes())
    data[ref["npyoff"]] ^= 1
    path.write_bytes(bytes(data))
    originals = {(directory / n).read_bytes() for n in os.listdir(directory)}
    return seed, originals


def _check_readable(directory: Path, originals: set[bytes]) -> None:
    """Opens and reads every episode: each is whole and right, or fails only its checksum."""
    with RecordingReader(directory, verify=True) as reader:
        for i in range(len(reader)):
            try:
                ep = reader[i]
            except ChecksumError:
                continue  # a damaged batch not yet moved aside: as before the repair
            frames, _, rewards = image_episode(ep.seed, SIZE, LENGTH)
            np.testing.assert_array_equal(ep.observations, frames[: len(ep) + 1])
            np.testing.assert_array_equal(ep.rewards, rewards[: len(ep)])
    # Nothing is deleted: every original file's bytes are still somewhere in the recording.
    everything = set()
    for dirpath, _, names in os.walk(directory):
        everything |= {Path(dirpath, n).read_bytes() for n in names if not n.startswith("tmp")}
    assert originals <= everything


def _child(directory: Path, n: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", KILLER, str(directory), str(n)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


@pytest.mark.stress
def test_repair_killed_at_every_rename_leaves_a_readable_recording(tmp_path):
    full = tmp_path / "full"
    seed, _ = _damaged_recording(full)
    child = _child(full, 0)
    out, _ = child.communicate(timeout=120)
    renames = int(out)
    assert child.returncode == 0 and renames >= 6
    assert verify(full) == []
    for n in range(1, renames + 1):
        d = tmp_path / f"kill{n}"
        _, originals = _damaged_recording(d)
        child = _child(d, n)
        child.communicate(timeout=120)
        assert child.returncode == -signal.SIGKILL, n
        _check_readable(d, originals)
        # Repair run again (to the end) finishes the job.
        repair(d)
        assert verify(d) == [], n
        _check_readable(d, originals)


@pytest.mark.stress
def test_repair_killed_at_random_moments_leaves_a_readable_recording(tmp_path):
    rng = random.Random(11)
    for k in range(12):
        d = tmp_path / f"r{k}"
        _, originals = _damaged_recording(d)
        child = _child(d, -1)
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, 0.03))
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        _check_readable(d, originals)
        repair(d)
        assert verify(d) == []
        _check_readable(d, originals)


def _kept(directory: Path) -> list[tuple[int, int]]:
    with RecordingReader(directory, verify=True) as reader:
        return [(ep.seed, len(ep)) for ep in reader]


@pytest.mark.stress
def test_repair_killed_at_every_rename_then_rerun_keeps_what_one_repair_keeps(tmp_path):
    # A kill between the two renames of a salvaged batch that takes the damaged batch's names
    # (its new .bin in place, the old .json still there) made the next repair move the batch
    # aside whole, losing the entries it had kept, and the batch written after them.
    import shutil

    for n in range(1, 100):
        d, whole = tmp_path / f"kill{n}", tmp_path / f"whole{n}"
        _damaged_recording(d)
        shutil.copytree(d, whole)  # (batch boundaries vary from one recording to the next)
        repair(whole)
        child = _child(d, n)
        child.communicate(timeout=120)
        if child.returncode == 0:
            break  # n is past the last rename
        assert child.returncode == -signal.SIGKILL, n
        repair(d)
        assert verify(d) == [], n
        assert _kept(d) == _kept(whole), n
    assert n > 6


def test_a_batch_whose_arrays_share_bytes_is_repaired(tmp_path):
    """Two arrays of kept entries over the same bytes (the format allows it) in a batch repair
    rebuilds under its own names: repair raised OSError ("arrays overlap") after its first
    commit, and the recording read 0 episodes."""
    import zlib

    record(tmp_path)
    name, doc = batches(tmp_path)[0]
    entries = doc["episodes"]
    assert len(entries) >= 3 and entries[0]["steps"] == entries[1]["steps"]
    # Equal episodes end alike: entry 0's truncations may point at entry 1's bytes.
    entries[0]["truncations"]["npyoff"] = entries[1]["truncations"]["npyoff"]
    entries[-1]["observations"]["npyoff"] = 10 ** 9  # the damaged entry: outside the .bin
    raw = json.dumps(doc, separators=(",", ":")).encode()
    (tmp_path / name).write_bytes(raw)
    (manifest,) = tmp_path.glob("*.manifest.json")
    man = json.loads(manifest.read_text())
    [b] = [b for b in man["batches"] if b["fn"] == name]
    b["json_size"], b["json_crc32"] = len(raw), zlib.crc32(raw)
    manifest.write_text(json.dumps(man))
    lost = entries[-1]["seed"]
    repair(tmp_path)
    assert_episodes(tmp_path, [s for s in range(EPISODES) if s != lost])
    assert verify(tmp_path) == []
