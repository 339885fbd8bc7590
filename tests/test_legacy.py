"""Recordings made by OpenAI gym-recording: written here by hand in its layout, read back.

gym-recording's ``TraceRecording`` wrote, per batch, ``P.epNNNNNNNNN.json`` =
``{"episodes": [{"observations": ..., "actions": ..., "rewards": ...}]}`` with every numpy array
replaced (by ``json.dump(default=...)``) by a reference into ``P.epNNNNNNNNN.bin``, and a manifest
``P.manifest.json`` = ``{"batches": [{"first", "len", "fn"}]}``. No format or version field. Lists
of same-shaped arrays were stacked; others (e.g. images) stayed lists of one array per step; an
empty list became ``np.array([[]])`` (shape (1, 0), float64).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import assert_same

import gym_recorder
from gym_recorder import RecordingReader, RecordingWrapper


class LegacyWriter:
    """Writes batches exactly the way gym-recording's ``TraceRecording.save_to_file`` did."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.prefix = prefix
        self.batches: list[dict] = []
        self.first = 0

    def write_batch(self, episodes: list[dict]) -> None:
        batch_fn = f"{self.prefix}.ep{self.first:09d}.json"
        bin_fn = f"{self.prefix}.ep{self.first:09d}.bin"
        with open(self.directory / bin_fn, "wb") as bin_f:
            def encode(obj):
                if isinstance(obj, np.ndarray):
                    offset = bin_f.tell()
                    while offset % 8:
                        bin_f.write(b"\x00")
                        offset += 1
                    obj.tofile(bin_f)
                    return {"__type": "ndarray", "shape": list(obj.shape), "order": "C",
                            "dtype": str(obj.dtype), "npyfile": bin_fn, "npyoff": offset,
                            "size": bin_f.tell() - offset}
                if isinstance(obj, dict):
                    return {k: encode(v) for k, v in obj.items()}
                if isinstance(obj, list):
                    return [encode(v) for v in obj]
                return obj

            doc = {"episodes": [encode(ep) for ep in episodes]}
        (self.directory / batch_fn).write_text(json.dumps(doc))
        self.batches.append({"first": self.first, "len": len(episodes), "fn": batch_fn})
        self.first += len(episodes)
        (self.directory / f"{self.prefix}.manifest.json").write_text(
            json.dumps({"batches": self.batches}))


def cartpole_like(rng: np.random.Generator, n: int) -> dict:
    return {"observations": rng.normal(size=(n + 1, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, size=n).astype(np.int64),
            "rewards": np.ones(n, dtype=np.float64)}


def image_episode(rng: np.random.Generator, n: int) -> dict:
    """Observations as one array per step, as gym-recording left lists of images."""
    return {"observations": [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(n + 1)],
            "actions": rng.integers(0, 6, size=n).astype(np.int64),
            "rewards": rng.normal(size=n)}


def reset_only_episode(rng: np.random.Generator) -> dict:
    return {"observations": rng.normal(size=(1, 4)).astype(np.float32),
            "actions": np.array([[]]), "rewards": np.array([[]])}


def make_legacy(directory: Path) -> list[dict]:
    """Two writers: one with two batches (3 + 1 episodes), one with image episodes."""
    rng = np.random.default_rng(0)
    first = LegacyWriter(directory, "openaigym.trace.0.1234")
    a = [cartpole_like(rng, 5), cartpole_like(rng, 12), reset_only_episode(rng)]
    first.write_batch(a)
    b = [cartpole_like(rng, 3)]
    first.write_batch(b)
    second = LegacyWriter(directory, "openaigym.trace.0.5678")
    c = [image_episode(rng, 4), image_episode(rng, 1)]
    second.write_batch(c)
    return a + b + c  # the reader's order: writers by name, episodes in order


def expected_obs(ep: dict) -> np.ndarray:
    obs = ep["observations"]
    return np.stack(obs) if isinstance(obs, list) else obs


def expected_actions(ep: dict) -> np.ndarray:
    act = ep["actions"]
    return act.reshape(0) if act.shape == (1, 0) else act


def test_legacy_files_are_what_gym_recording_wrote(tmp_path):
    make_legacy(tmp_path)
    manifest = json.loads((tmp_path / "openaigym.trace.0.1234.manifest.json").read_text())
    assert manifest == {"batches": [
        {"first": 0, "len": 3, "fn": "openaigym.trace.0.1234.ep000000000.json"},
        {"first": 3, "len": 1, "fn": "openaigym.trace.0.1234.ep000000003.json"}]}
    doc = json.loads((tmp_path / "openaigym.trace.0.1234.ep000000000.json").read_text())
    ref = doc["episodes"][0]["observations"]
    assert ref == {"__type": "ndarray", "shape": [6, 4], "order": "C", "dtype": "float32",
                   "npyfile": "openaigym.trace.0.1234.ep000000000.bin", "npyoff": 0, "size": 96}
    assert doc["episodes"][2]["actions"]["shape"] == [1, 0]
    images = json.loads((tmp_path / "openaigym.trace.0.5678.ep000000000.json").read_text())
    assert isinstance(images["episodes"][0]["observations"], list)
    assert all(r["npyoff"] % 8 == 0 for r in images["episodes"][0]["observations"])


def test_reader_reads_legacy_recordings(tmp_path):
    episodes = make_legacy(tmp_path)
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == len(episodes) == 6
        assert reader.observation_space is None and reader.env_id is None
        assert all(w["legacy"] for w in reader.writers)
        for i, (ep, want) in enumerate(zip(reader, episodes)):
            n = len(want["observations"]) - 1
            assert len(ep) == n, i
            assert_same(ep.observations, expected_obs(want), f"episode {i} observations")
            assert_same(ep.actions, expected_actions(want), f"episode {i} actions")
            assert_same(ep.rewards, np.asarray(want["rewards"], np.float64).reshape(n),
                        f"episode {i} rewards")
            assert_same(ep.terminations, np.zeros(n, bool))
            assert_same(ep.truncations, np.zeros(n, bool))
            assert ep.infos == [{}] * (n + 1)
            assert ep.seed is None and ep.end is None and ep.options is None
        assert [ep.writer for ep in reader] == ["openaigym.trace.0.1234"] * 4 + [
            "openaigym.trace.0.5678"] * 2
        assert reader[2].observations.shape == (1, 4) and reader[2].actions.shape == (0,)
        assert reader[4].observations.shape == (5, 6, 5, 3)
        assert reader[4].observations.dtype == np.uint8
        assert_same(reader[-1].observations, np.stack(episodes[-1]["observations"]))


def test_scan_recorded_traces_keeps_the_old_callback(tmp_path):
    episodes = make_legacy(tmp_path)
    seen = []

    def episode_cb(observations, actions, rewards):
        seen.append((observations, actions, rewards))

    gym_recorder.scan_recorded_traces(tmp_path, episode_cb)
    assert len(seen) == 6
    for (obs, act, rew), want in zip(seen, episodes):
        assert_same(obs, expected_obs(want))
        assert_same(act, expected_actions(want))
        assert_same(rew, np.asarray(want["rewards"], np.float64).reshape(len(act)))
    seen.clear()
    gym_recorder.scan_recorded_traces(str(tmp_path), episode_cb, max_episodes=2)
    assert len(seen) == 2
    assert_same(seen[1][0], episodes[1]["observations"])
    seen.clear()
    gym_recorder.scan_recorded_traces(tmp_path, episode_cb, max_episodes=0)
    assert seen == []


def test_legacy_and_new_recordings_in_one_directory(tmp_path):
    episodes = make_legacy(tmp_path)
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    obs, _ = env.reset(seed=0)
    obs1, *_ = env.step(1)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 7
        assert [w["legacy"] for w in reader.writers] == [True, True, False]  # legacy first
        assert_same(reader[0].observations, episodes[0]["observations"])
        assert_same(reader[6].observations, np.stack([obs, obs1]))
        assert reader[6].env_id == "CartPole-v1" and reader[6].seed == 0
        assert reader.observation_space == env.observation_space  # from the new writer
    lengths = []
    gym_recorder.scan_recorded_traces(tmp_path, lambda o, a, r: lengths.append(len(r)))
    assert lengths == [5, 12, 0, 3, 4, 1, 1]


@pytest.mark.parametrize("obs", [5, {"__type": "ndarray", "shape": [], "order": "C",
                                     "dtype": "float32", "npyfile": "openaigym.trace.X.ep000000000.bin",
                                     "npyoff": 0, "size": 4}], ids=["number", "0-d array"])
def test_legacy_observations_that_are_not_rows_refuse_a_column_by_name(tmp_path, obs):
    """gym-recording declared no space: an episode may hold a scalar where rows belong. It
    reads as it is; a column of it is refused by name (once a bare TypeError / ValueError)."""
    import json

    from gym_recorder.errors import UnsupportedSpaceError

    (tmp_path / "openaigym.trace.X.ep000000000.bin").write_bytes(np.float32(1).tobytes())
    (tmp_path / "openaigym.trace.X.manifest.json").write_text(json.dumps(
        {"batches": [{"first": 0, "len": 1, "fn": "openaigym.trace.X.ep000000000.json"}]}))
    (tmp_path / "openaigym.trace.X.ep000000000.json").write_text(json.dumps(
        {"episodes": [{"observations": obs, "actions": [], "rewards": []}]}))
    with RecordingReader(tmp_path) as reader:
        assert np.asarray(reader[0].observations).shape == ()
        with pytest.raises(UnsupportedSpaceError, match="observations that are not rows"):
            reader.column("observations")


def test_transitions_of_legacy_episodes_of_different_shapes_are_refused_by_name(tmp_path):
    """gym-recording writers declare no space: two writers' episodes (CartPole-like rows of 4,
    image frames) do not stack. transitions() said so with numpy's bare ValueError; now it
    names the rows, as reader.column() does, and each writer's episodes still give theirs."""
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.training.transitions import transitions

    episodes = make_legacy(tmp_path)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(UnsupportedSpaceError, match="rows of different shapes"):
            transitions(reader)
        t = transitions(reader, [0, 1, 3])  # the first writer's (reset-only episode 2 aside)
    expected = [expected_obs(episodes[i]) for i in (0, 1, 3)]
    np.testing.assert_array_equal(t.obs, np.concatenate([o[:-1] for o in expected]))
    np.testing.assert_array_equal(t.next_obs, np.concatenate([o[1:] for o in expected]))
