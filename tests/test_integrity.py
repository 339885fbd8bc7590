"""verify() and repair(): checksums, broken batches, lost manifests, leftovers."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.errors import ChecksumError, FormatError
from gym_recorder.integrity import REPAIR_FOLDER_PREFIX, Problem, repair, verify
from sample_envs.envs import ImageEnv
from conftest import image_episode

EPISODES = 4
LENGTH = 25
SIZE = 8  # 8x8x3 frames: 192 bytes a step, so a 2 kB target makes a batch every ~10 steps


def record(directory, episodes=EPISODES, length=LENGTH, close=True):
    env = RecordingWrapper(ImageEnv(height=SIZE, width=SIZE, episode_length=length), directory,
                           target_batch_bytes=2_000)
    for ep in range(episodes):
        env.reset(seed=ep)
        for t in range(length):
            env.step(t % 4)
    if close:
        env.close()
    return env


def expected_episode(seed, length=LENGTH):
    return image_episode(seed, SIZE, length)


def assert_whole(directory, episodes=EPISODES):
    with RecordingReader(directory, verify=True) as reader:
        assert len(reader) == episodes
        for ep in reader:
            frames, actions, rewards = expected_episode(ep.seed)
            np.testing.assert_array_equal(ep.observations, frames)
            np.testing.assert_array_equal(ep.actions, actions)
            np.testing.assert_array_equal(ep.rewards, rewards)
            assert ep.end == "truncated"


def files(directory, suffix):
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix))


def snapshot(directory):
    return {n: open(os.path.join(directory, n), "rb").read() for n in os.listdir(directory)
            if os.path.isfile(os.path.join(directory, n))}


def test_sound_recording_verifies_and_needs_no_repair(tmp_path):
    record(tmp_path)
    assert len(files(tmp_path, ".bin")) >= 8
    before = snapshot(tmp_path)
    assert verify(tmp_path) == []
    assert repair(tmp_path) == []
    assert snapshot(tmp_path) == before
    assert_whole(tmp_path)


def test_every_batch_json_carries_the_manifest_header(tmp_path):
    record(tmp_path, episodes=1)
    manifest = json.loads((tmp_path / files(tmp_path, ".manifest.json")[0]).read_bytes())
    for name in files(tmp_path, ".json"):
        if name.endswith(".manifest.json"):
            continue
        header = json.loads((tmp_path / name).read_bytes())["header"]
        assert header == {k: v for k, v in manifest.items() if k not in ("batches", "complete")}


def test_flipped_byte_in_bin_is_reported_by_verify_and_reader(tmp_path):
    record(tmp_path)
    victim = files(tmp_path, ".bin")[3]
    data = bytearray((tmp_path / victim).read_bytes())
    data[5] ^= 0x10
    (tmp_path / victim).write_bytes(bytes(data))
    problems = verify(tmp_path)
    assert len(problems) == 1
    assert isinstance(problems[0], Problem)
    assert problems[0].path == os.path.join(tmp_path, victim)
    assert "CRC-32" in problems[0].message
    assert str(problems[0]).startswith(f"{problems[0].path}: ")
    with RecordingReader(tmp_path, verify=True) as reader:
        with pytest.raises(ChecksumError, match="CRC-32"):
            for ep in reader:
                pass
    with RecordingReader(tmp_path) as reader:  # without verification the bytes come back as is
        assert sum(len(ep) for ep in reader) == EPISODES * LENGTH


def test_flipped_byte_in_batch_json_is_reported(tmp_path):
    record(tmp_path)
    victim = [n for n in files(tmp_path, ".json") if ".ep" in n][2]
    text = (tmp_path / victim).read_bytes()
    (tmp_path / victim).write_bytes(text.replace(b'"seed":', b'"seeD":', 1)
                                    if b'"seed":' in text else text[:-2] + b" }")
    problems = verify(tmp_path)
    assert [p.path for p in problems] == [os.path.join(tmp_path, victim)]
    assert "CRC-32" in problems[0].message


def test_deleted_manifest_is_rebuilt_and_reads_back_whole(tmp_path):
    record(tmp_path)
    manifest = files(tmp_path, ".manifest.json")[0]
    original = json.loads((tmp_path / manifest).read_bytes())
    (tmp_path / manifest).unlink()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 0  # batch files alone are not a recording
    actions = repair(tmp_path)
    assert len(actions) == 1 and actions[0].startswith(f"rebuilt {manifest}")
    assert f"{EPISODES} episode(s), {EPISODES * LENGTH} step(s)" in actions[0]
    rebuilt = json.loads((tmp_path / manifest).read_bytes())
    assert rebuilt["batches"] == original["batches"]
    for key in ("env_id", "observation_space", "action_space", "prefix", "created", "writer"):
        assert rebuilt[key] == original[key]
    assert rebuilt["complete"] is False  # no manifest said the writer closed cleanly
    assert verify(tmp_path) == []
    assert_whole(tmp_path)


def test_truncated_batch_is_moved_aside_and_the_rest_reads(tmp_path):
    record(tmp_path)
    bins = files(tmp_path, ".bin")
    victim = bins[4]
    stem = victim[: -len(".bin")]
    full = (tmp_path / victim).read_bytes()
    (tmp_path / victim).write_bytes(full[: len(full) // 2])
    json_bytes = (tmp_path / (stem + ".json")).read_bytes()
    problems = verify(tmp_path)
    assert problems and all(p.path == os.path.join(tmp_path, victim) for p in problems)
    with RecordingReader(tmp_path) as reader, pytest.raises(FormatError, match=victim):
        for ep in reader:
            pass
    actions = repair(tmp_path)
    assert any(line.startswith(f"moved {stem}.json, {stem}.bin to {REPAIR_FOLDER_PREFIX}")
               for line in actions)
    assert any(line.startswith("rebuilt") for line in actions)
    folders = [n for n in os.listdir(tmp_path) if n.startswith(REPAIR_FOLDER_PREFIX)]
    assert len(folders) == 1
    aside = tmp_path / folders[0]
    # Nothing is deleted: the broken batch and the old manifest are in the folder, byte for byte.
    assert (aside / victim).read_bytes() == full[: len(full) // 2]
    assert (aside / (stem + ".json")).read_bytes() == json_bytes
    assert files(aside, ".manifest.json") == files(tmp_path, ".manifest.json")
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        episodes = list(reader)
    assert len(episodes) == EPISODES
    lost = 0
    for ep in episodes:
        frames, actions_, rewards = expected_episode(ep.seed)
        n = len(ep)
        # An episode whose next part was in the moved batch ends there (end None); every other
        # episode is whole. Every step that is there is the step that was recorded.
        np.testing.assert_array_equal(ep.observations, frames[: n + 1])
        np.testing.assert_array_equal(ep.rewards, rewards[:n])
        assert ep.end == ("truncated" if n == LENGTH else None)
        lost += LENGTH - n
    manifest = json.loads((aside / files(aside, ".manifest.json")[0]).read_bytes())
    moved_steps = next(b["steps"] for b in manifest["batches"] if b["bin"] == victim)
    # Steps of the moved batch, plus later parts of an episode it cut, are not shown.
    assert moved_steps <= lost < moved_steps + LENGTH


def test_leftovers_are_ignored_by_the_reader_and_moved_by_repair(tmp_path):
    record(tmp_path)
    manifest = files(tmp_path, ".manifest.json")[0]
    prefix = manifest[: -len(".manifest.json")]
    doc = json.loads((tmp_path / manifest).read_bytes())
    # A writer killed after writing its last batch but before committing it.
    last = doc["batches"].pop()
    (tmp_path / manifest).write_bytes(json.dumps(doc).encode())
    # Temp files of atomicwrites, a .bin whose .json never came, and a stray user file.
    (tmp_path / "tmpab12cd_3").write_bytes(b"half a batch")
    (tmp_path / "tmpzz99zz99").write_bytes(b"")
    orphan_bin = f"{prefix}.ep{last['first'] + last['len']:09d}.bin"
    (tmp_path / orphan_bin).write_bytes(b"\0" * 64)
    (tmp_path / "notes.txt").write_text("mine")
    with RecordingReader(tmp_path) as reader:
        assert sum(len(ep) for ep in reader) == EPISODES * LENGTH - last["steps"]
    assert verify(tmp_path) == []  # files no manifest lists are not part of the recording
    actions = repair(tmp_path)
    assert actions[0].startswith("moved 2 temporary file(s)")
    assert any(line.startswith(f"moved {orphan_bin}") for line in actions)
    assert any(line.startswith(f"rebuilt {manifest}") for line in actions)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "tmpab12cd_3").exists() and not (tmp_path / orphan_bin).exists()
    assert verify(tmp_path) == []
    # The complete but uncommitted batch is taken back: nothing recorded is lost.
    assert_whole(tmp_path)


def test_manifest_listing_a_missing_batch(tmp_path):
    record(tmp_path)
    victim = [n for n in files(tmp_path, ".json") if ".ep" in n][1]
    shutil.move(tmp_path / victim, tmp_path.parent / "elsewhere.json")
    problems = verify(tmp_path)
    assert [p.path for p in problems] == [os.path.join(tmp_path, victim)]
    assert "cannot open" in problems[0].message
    actions = repair(tmp_path)
    assert any("missing" in line and victim in line for line in actions)
    assert verify(tmp_path) == []


def test_garbage_manifest_is_reported_and_rebuilt(tmp_path):
    record(tmp_path)
    manifest = files(tmp_path, ".manifest.json")[0]
    (tmp_path / manifest).write_bytes(b'{"format": "gym_recorder", "version": 1, "batch')
    problems = verify(tmp_path)
    assert [p.path for p in problems] == [os.path.join(tmp_path, manifest)]
    assert "not valid JSON" in problems[0].message
    actions = repair(tmp_path)
    assert actions[0].startswith(f"copied {manifest} to {REPAIR_FOLDER_PREFIX}")
    assert verify(tmp_path) == []
    assert_whole(tmp_path)


def test_verify_names_a_missing_directory(tmp_path):
    assert verify(tmp_path / "nope") == [Problem(str(tmp_path / "nope"), "not a directory")]


def test_cli_verify_and_repair(tmp_path, capsys):
    from gym_recorder import cli

    record(tmp_path)
    victim = files(tmp_path, ".bin")[0]
    data = bytearray((tmp_path / victim).read_bytes())
    data[0] ^= 1  # (the first array's first byte)
    (tmp_path / victim).write_bytes(bytes(data))
    try:
        status = cli.main(["verify", str(tmp_path)])
    except SystemExit as e:
        if e.code == 2:
            pytest.skip("the command line has no verify command yet")
        raise
    out = capsys.readouterr().out
    assert status == 1
    assert f"{os.path.join(tmp_path, victim)}: " in out
    assert cli.main(["repair", str(tmp_path)]) == 0
    # (Moved whole, or, when some of its entries check out, kept in part: "... the damaged X".)
    assert f"{victim[: -len('.bin')]}.json, {victim} to " in capsys.readouterr().out
    assert cli.main(["verify", str(tmp_path)]) == 0


def test_fifo_in_place_of_a_bin_is_reported_not_waited_on(tmp_path):
    """A FIFO planted under a batch's .bin name must not block verify (or repair) forever."""
    import signal

    record(tmp_path)
    bin_name = files(tmp_path, ".bin")[0]
    os.remove(tmp_path / bin_name)
    os.mkfifo(tmp_path / bin_name)

    def hung(signum, frame):
        raise TimeoutError("verify blocked on the FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        problems = verify(tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert any(p.path.endswith(bin_name) and "not a regular file" in p.message
               for p in problems), problems


@pytest.mark.parametrize("claimed", [2**62, "fits"], ids=["beyond-json-size", "within-it"])
def test_a_manifest_claiming_more_entries_fails_fast(tmp_path, claimed):
    """One edited number in a manifest ('len', 'episodes') once made verify read the batch
    again for every claimed episode (2**62: for ever) and batches() raise MemoryError."""
    import time

    record(tmp_path, episodes=1, length=5)
    [mname] = files(tmp_path, ".manifest.json")
    doc = json.loads((tmp_path / mname).read_text())
    b = doc["batches"][0]
    n = claimed if claimed != "fits" else b["json_size"]  # the most the rule allows
    b["len"] = b["episodes"] = n
    (tmp_path / mname).write_text(json.dumps(doc))
    start = time.monotonic()
    problems = verify(tmp_path)
    assert time.monotonic() - start < 20
    assert problems and any(mname in p.path or "len" in p.message or "episodes" in p.message
                            for p in problems), problems
    if claimed != "fits":
        with pytest.raises(FormatError, match="entries cannot fit a batch JSON"):
            RecordingReader(tmp_path)
    else:
        with RecordingReader(tmp_path) as reader:
            assert len(reader) == n
            with pytest.raises(FormatError):
                reader[n - 1]


@pytest.mark.parametrize("edit", [
    lambda d: d["action_space"].update(n=0),
    lambda d: d["observation_space"].update(low=d["observation_space"]["high"],
                                            high=d["observation_space"]["low"]),
], ids=["discrete-n-0", "box-low-above-high"])
def test_verify_reports_a_space_the_reader_cannot_rebuild(tmp_path, edit):
    record(tmp_path, episodes=1, length=3)
    [mname] = files(tmp_path, ".manifest.json")
    doc = json.loads((tmp_path / mname).read_text())
    edit(doc)
    (tmp_path / mname).write_text(json.dumps(doc))
    with RecordingReader(tmp_path) as reader, pytest.raises(FormatError, match="cannot rebuild"):
        reader.observation_space, reader.action_space  # noqa: B018
    problems = verify(tmp_path)
    assert [p.path for p in problems] == [str(tmp_path / mname)]
    assert "cannot rebuild" in problems[0].message


def test_repair_rebuilds_a_wrong_manifest_entry_of_an_intact_batch(tmp_path):
    """Only the manifest's counts of a batch are wrong (its JSON is the one the entry
    committed: same size and CRC-32): repair rebuilds the entry and keeps every step (it once
    moved the batch aside)."""
    record(tmp_path)
    [mname] = files(tmp_path, ".manifest.json")
    doc = json.loads((tmp_path / mname).read_text())
    doc["batches"][2]["len"] += 1
    doc["batches"][2]["steps"] += 5
    (tmp_path / mname).write_text(json.dumps(doc))
    assert verify(tmp_path)
    actions = repair(tmp_path)
    assert any("rebuilt" in a and doc["batches"][2]["fn"] in a for a in actions), actions
    assert not any(a.startswith("moved") for a in actions), actions
    assert verify(tmp_path) == []
    assert_whole(tmp_path)


def test_a_bool_byte_other_than_0_or_1_is_found_by_verify(tmp_path):
    """The spec's b1 is one byte 0 or 1; a 2 (with its CRC-32 made to match) gives a numpy bool
    that is True and ~True at once: verify and verifying readers refuse it."""
    import zlib

    record(tmp_path, episodes=1, length=5)
    [jname] = files(tmp_path, ".ep000000000.json")
    doc = json.loads((tmp_path / jname).read_text())
    ref = doc["episodes"][0]["terminations"]
    data = bytearray((tmp_path / ref["npyfile"]).read_bytes())
    data[ref["npyoff"]] = 2
    (tmp_path / ref["npyfile"]).write_bytes(bytes(data))
    ref["crc32"] = zlib.crc32(bytes(data[ref["npyoff"]:ref["npyoff"] + ref["size"]]))
    raw = json.dumps(doc).encode()
    (tmp_path / jname).write_bytes(raw)
    [mname] = files(tmp_path, ".manifest.json")
    m = json.loads((tmp_path / mname).read_text())
    m["batches"][0].update(json_size=len(raw), json_crc32=zlib.crc32(raw))
    (tmp_path / mname).write_text(json.dumps(m))
    problems = verify(tmp_path)
    assert any("a bool byte is neither 0 nor 1" in p.message for p in problems), problems
    with RecordingReader(tmp_path, verify=True) as reader:
        with pytest.raises(FormatError, match="bool array holds bytes other than 0 and 1"):
            reader[0]
