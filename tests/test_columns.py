"""A batch decoded column by column (gym_recorder.columns) gives exactly what the entry-by-entry
path gives, and a bad reference in any entry of it is refused with the same error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from hostile import refused, rewrite_batch


@pytest.fixture
def cartpole(tmp_path):
    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("CartPole-v1"), d, file_prefix="cp")
    rng = np.random.default_rng(5)
    env.reset(seed=5)
    for a in rng.integers(0, 2, 800).tolist():
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    env.close()
    return d


def _same(a, b):
    assert a.index == b.index and a.seed == b.seed and a.end == b.end and a.infos == b.infos
    for x, y in [(a.observations, b.observations), (a.actions, b.actions),
                 (a.rewards, b.rewards), (a.terminations, b.terminations),
                 (a.truncations, b.truncations)]:
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_iterating_equals_fetching_each_episode_alone(cartpole):
    with RecordingReader(cartpole) as reader:
        assert reader.writers[0]["batches"] < len(reader) // 4  # many episodes per batch
        episodes = list(reader)
        parts = [p for info in reader.batches() for p in reader.read_batch(info)]
    assert len(episodes) > 20
    for ep in episodes:
        with RecordingReader(cartpole) as alone:  # one fetch: decoded entry by entry
            _same(ep, alone[ep.index])
        base = ep.observations.base  # the episode's own bytes, not the batch's
        assert base is None or base.nbytes <= ep.observations.nbytes
    by_episode = {p.episode: p for p in parts if p.part == 0}
    for ep in episodes:
        p = by_episode[ep.index]
        np.testing.assert_array_equal(p.observations, ep.observations)
        np.testing.assert_array_equal(p.rewards, ep.rewards)
        assert len(p.infos) == len(ep.infos)


@pytest.mark.parametrize("field, value, match", [
    ("npyoff", 3, r"npyoff 3 is not a multiple of 8"),
    ("npyoff", 1 << 40, r"lie outside"),
    ("npyoff", 2 ** 80, r"lie outside"),
    ("size", 7, r"size 7 does not match shape"),
    ("shape", [3.0], r"every dimension must be an integer"),
    ("dtype", "<f4", r"rewards: .*(size|dtype)"),
    ("order", "F", r"only C order"),
    ("npyfile", "other.bin", r"npyfile"),
])
def test_a_bad_reference_late_in_a_batch_is_refused(cartpole, field, value, match):
    def mutate(doc):
        entry = doc["episodes"][-2]  # read after the batch is decoded column-wise
        entry["rewards"][field] = value
    rewrite_batch(cartpole, mutate)
    refused(cartpole, r"cp\.ep000000000\.json entry \d+ rewards: .*" + match.split("rewards: ")[-1])
