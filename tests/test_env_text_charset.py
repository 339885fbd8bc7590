"""A big Text charset is described once, compactly: recordings stay as small as with a small one
(10.6)."""

from __future__ import annotations

import json
import os

import gymnasium as gym
from gymnasium import spaces
from gymnasium.wrappers import TransformObservation

from gym_recorder import RecordingReader, RecordingWrapper

BIG = "".join(chr(c) for c in range(0x30, 0x30 + 100_000))  # contiguous, holds "0".."9"
SMALL = "0123456789"


def _digits(obs):
    return "".join(c for c in repr(obs.tolist()) if c.isdigit())[:64] or "0"


def _record(directory, charset):
    space = spaces.Text(max_length=64, charset=charset)
    env = RecordingWrapper(TransformObservation(gym.make("CartPole-v1"), _digits, space),
                           directory, target_batch_bytes=20_000)
    seen = []
    obs, _ = env.reset(seed=0)
    seen.append([obs])
    env.action_space.seed(0)
    for _ in range(1000):
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        seen[-1].append(obs)
        if term or trunc:
            obs, _ = env.reset()
            seen.append([obs])
    env.close()
    return seen


def _footprint(directory):
    names = os.listdir(directory)
    return len(names), sum(os.path.getsize(os.path.join(directory, n)) for n in names)


def test_big_charset_costs_what_a_small_one_does(tmp_path):
    big_seen = _record(tmp_path / "big", BIG)
    small_seen = _record(tmp_path / "small", SMALL)
    assert big_seen == small_seen  # the same strings
    big_files, big_bytes = _footprint(tmp_path / "big")
    small_files, small_bytes = _footprint(tmp_path / "small")
    assert big_files <= 2 * small_files and big_bytes <= 2 * small_bytes, (
        big_files, big_bytes, small_files, small_bytes)
    with RecordingReader(tmp_path / "big") as reader:
        assert reader.observation_space.character_set == frozenset(BIG)
        assert reader.observation_space.max_length == 64
        got = [ep.observations for ep in reader]
        manifest = reader.writers[0]["manifest"]
    assert got == big_seen
    assert manifest["observation_space"]["charset_ranges"] == [[0x30, 0x30 + 100_000 - 1]]
    # a small charset stays a string, as format version 1 always wrote it
    with RecordingReader(tmp_path / "small") as reader:
        assert reader.writers[0]["manifest"]["observation_space"]["charset"] == SMALL
        assert [ep.observations for ep in reader] == small_seen
    # batches after the first leave the spaces out only when they are large
    batches = sorted(n for n in os.listdir(tmp_path / "big") if n.endswith(".json")
                     and ".ep" in n)
    assert len(batches) > 1
    for name in batches:
        header = json.loads((tmp_path / "big" / name).read_text())["header"]
        assert "observation_space" in header  # (small after compaction: repeated everywhere)


def test_a_large_space_description_is_written_once_and_repair_still_finds_it(tmp_path):
    from gym_recorder.integrity import repair

    scattered = "".join(chr(c) for c in range(0x30, 0x30 + 20_000, 2))  # 10,000 ranges
    space = spaces.Text(max_length=8, charset=scattered)
    env = RecordingWrapper(TransformObservation(gym.make("CartPole-v1"),
                                                lambda o: "0246"[: 1 + int(abs(o[0]) * 10) % 4],
                                                space),
                           tmp_path, target_batch_bytes=3_000)
    want = [[env.reset(seed=1)[0]]]
    for t in range(300):
        obs, _, term, trunc, _ = env.step(t % 2)
        want[-1].append(obs)
        if term or trunc:
            want.append([env.reset()[0]])
    env.close()
    batches = sorted(n for n in os.listdir(tmp_path) if n.endswith(".json") and ".ep" in n)
    assert len(batches) > 1
    headers = [json.loads((tmp_path / n).read_text())["header"] for n in batches]
    assert "observation_space" in headers[0]
    assert all("observation_space" not in h for h in headers[1:])
    assert sum(os.path.getsize(tmp_path / n) for n in batches[1:]) < 50_000 * (len(batches) - 1)
    manifest = next(n for n in os.listdir(tmp_path) if n.endswith(".manifest.json"))
    os.remove(tmp_path / manifest)  # repair rebuilds it from the first batch's header
    repair(tmp_path)
    with RecordingReader(tmp_path) as reader:
        assert reader.observation_space.character_set == frozenset(scattered)
        assert [ep.observations for ep in reader] == want
