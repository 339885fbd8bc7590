"""Episodes that span several batches: stitched in place into arrays the episode owns."""

import json
import mmap
import os
import zlib

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder import ChecksumError, FormatError, RecordingReader, RecordingWrapper
from gym_recorder.read import gather as gather_module

STEPS = 400  # one Image-v0 episode; 16x16x3 frames at 20 kB a batch: about 25 batches


def _record_image(directory, episodes=2):
    """Records long Image-v0 episodes; returns the ground truth of each."""
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=STEPS),
                           directory, target_batch_bytes=20_000)
    env.action_space.seed(5)
    truth = []
    for e in range(episodes):
        obs, info = env.reset(seed=e)
        ep = {"obs": [obs], "act": [], "rew": [], "term": [], "trunc": [], "infos": [info]}
        done = False
        while not done:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            for key, value in (("obs", obs), ("act", action), ("rew", reward),
                               ("term", terminated), ("trunc", truncated), ("infos", info)):
                ep[key].append(value)
            done = terminated or truncated
        truth.append(ep)
    env.close()
    return truth


def _check(episode, truth):
    np.testing.assert_array_equal(episode.observations, np.stack(truth["obs"]))
    np.testing.assert_array_equal(episode.actions, np.array(truth["act"]))
    np.testing.assert_array_equal(episode.rewards, np.array(truth["rew"], dtype=np.float64))
    np.testing.assert_array_equal(episode.terminations, np.array(truth["term"]))
    np.testing.assert_array_equal(episode.truncations, np.array(truth["trunc"]))
    assert len(episode.infos) == len(truth["infos"])
    assert episode.infos == truth["infos"]


def _owns_memory(arr):
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, np.ndarray) and not isinstance(base, np.memmap) and not isinstance(
        arr.base, mmap.mmap)


def _arrays(episode):
    return [episode.observations, episode.actions, episode.rewards, episode.terminations,
            episode.truncations]


def _manifest(directory):
    path = next(p for p in directory.iterdir() if p.name.endswith(".manifest.json"))
    return path, json.loads(path.read_bytes())


@pytest.fixture(params=["one thread", "threads"])
def read_threads(request, monkeypatch):
    """Runs a test with the parts read in this thread, and with READ_THREADS threads."""
    if request.param == "threads":
        monkeypatch.setattr(gather_module, "PARALLEL_READ_BYTES", 0)
    return request.param


@pytest.mark.parametrize("verify", [False, True])
def test_long_episodes_are_stitched_into_owned_arrays(tmp_path, verify, read_threads):
    truth = _record_image(tmp_path)
    _, manifest = _manifest(tmp_path)
    assert len(manifest["batches"]) >= 10  # each episode really spans many batches
    reader = RecordingReader(tmp_path, verify=verify)
    episodes = list(reader)
    assert len(episodes) == 2
    for ep, t in zip(episodes, truth):
        assert ep.length == STEPS and ep.end == "truncated"
        assert ep.observations.shape == (STEPS + 1, 16, 16, 3)
        assert ep.observations.dtype == np.uint8
        _check(ep, t)
        assert all(_owns_memory(a) for a in _arrays(ep))
    again = reader[-1]  # random access gives the same arrays
    np.testing.assert_array_equal(again.observations, episodes[-1].observations)
    reader.close()
    for p in tmp_path.iterdir():
        p.unlink()
    for ep, t in zip(episodes, truth):
        _check(ep, t)  # still correct with the reader closed and the files gone


def test_a_corrupted_part_is_found_by_verify(tmp_path, read_threads):
    truth = _record_image(tmp_path, episodes=1)
    _, manifest = _manifest(tmp_path)
    middle = manifest["batches"][len(manifest["batches"]) // 2]
    path = tmp_path / middle["bin"]
    data = bytearray(path.read_bytes())
    doc = json.loads((tmp_path / middle["fn"]).read_bytes())
    ref = doc["episodes"][0]["observations"]
    data[ref["npyoff"] + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    with RecordingReader(tmp_path) as reader:  # without verify: read, one byte differs
        obs = reader[0].observations
        assert (obs != np.stack(truth[0]["obs"])).sum() == 1
    with RecordingReader(tmp_path, verify=True) as reader, pytest.raises(ChecksumError):
        reader[0]


def _rewrite_batch(tmp_path, batch_no, edit):
    manifest_path, manifest = _manifest(tmp_path)
    batch = manifest["batches"][batch_no]
    doc = json.loads((tmp_path / batch["fn"]).read_bytes())
    edit(doc["episodes"][0])
    data = json.dumps(doc).encode()
    (tmp_path / batch["fn"]).write_bytes(data)
    batch["json_size"], batch["json_crc32"] = len(data), zlib.crc32(data)
    batch.pop("index", None)  # (of the JSON as it was: see tests/hostile.py rewrite_batch)
    manifest_path.write_text(json.dumps(manifest))


def test_parts_mixing_string_and_numeric_dtypes_are_refused(tmp_path):
    _record_image(tmp_path, episodes=1)
    _rewrite_batch(tmp_path, 3, lambda entry: entry["observations"].update(dtype="|S1"))
    with RecordingReader(tmp_path) as reader, pytest.raises(FormatError, match="dtypes"):
        reader[0]


def test_a_part_with_a_bad_shape_is_refused_before_reading(tmp_path):
    _record_image(tmp_path, episodes=1)

    def edit(entry):
        entry["observations"]["shape"][0] -= 1
        entry["observations"]["size"] -= 16 * 16 * 3
    _rewrite_batch(tmp_path, 2, edit)
    with RecordingReader(tmp_path) as reader, pytest.raises(FormatError, match="shape"):
        reader[0]


class _Widening(gym.Env):
    """int32 observations, except float ones (which the writer keeps by widening) at 150-159."""

    observation_space = gym.spaces.Box(-1000, 1000, (2,), np.int32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.int32), {}

    def step(self, action):
        self.t += 1
        if 150 <= self.t < 160:
            obs = np.array([self.t + 0.5, -0.25])
        else:
            obs = np.array([self.t, -self.t], np.int32)
        return obs, 1.0, False, self.t == 300, {}


def test_a_part_widened_in_one_batch_is_stitched_with_the_common_dtype(tmp_path, read_threads):
    env = RecordingWrapper(_Widening(), tmp_path, target_batch_bytes=2_000)
    observations = [env.reset(seed=1)[0]]
    done = False
    while not done:
        obs, _, terminated, truncated, _ = env.step(0)
        observations.append(obs)
        done = terminated or truncated
    env.close()
    _, manifest = _manifest(tmp_path)
    assert len(manifest["batches"]) > 3
    with RecordingReader(tmp_path, verify=True) as reader:
        ep = reader[0]
    assert ep.observations.dtype == np.float64
    expected = np.stack([np.asarray(o, np.float64) for o in observations])
    np.testing.assert_array_equal(ep.observations, expected)
    assert _owns_memory(ep.observations)


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_small_episodes_keep_few_files_open_and_own_their_bytes(tmp_path):
    from gym_recorder.read.batchcache import BATCH_CACHE_SIZE
    from gym_recorder.read.storage import MAX_OPEN_FILES

    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=4_000)
    env.action_space.seed(1)
    env.reset(seed=1)
    rewards = []
    for _ in range(1500):
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        rewards.append(reward)
        if terminated or truncated:
            env.reset()
    env.close()
    _, manifest = _manifest(tmp_path)
    assert len(manifest["batches"]) > MAX_OPEN_FILES > BATCH_CACHE_SIZE  # (files evicted)
    before = _open_fds()
    reader = RecordingReader(tmp_path, verify=True)
    episodes = []
    for ep in reader:
        assert _open_fds() - before <= MAX_OPEN_FILES  # (bounded: the storage's LRU)
        episodes.append(ep)
    reader.close()
    assert _open_fds() == before
    got = np.concatenate([ep.rewards for ep in episodes])
    np.testing.assert_array_equal(got, np.array(rewards[:len(got)]))
    for ep in episodes:
        own = sum(arr.nbytes for arr in _arrays(ep))
        for arr in _arrays(ep):
            # The episode's own bytes, not a view of a whole batch kept alive.
            assert arr.base is None or arr.base.nbytes <= 2 * own
