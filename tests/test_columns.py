"""A batch read through its plan (gym_recorder.read.plan: its references checked column by
column) gives exactly what the entry-by-entry path gives, and a bad reference in any entry of it
is refused with the same error."""

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
        entry = doc["episodes"][-2]  # late in a batch read through its plan
        entry["rewards"][field] = value
    rewrite_batch(cartpole, mutate)
    refused(cartpole, r"cp\.ep000000000\.json entry \d+ rewards: .*" + match.split("rewards: ")[-1])


def _outcome(read):
    """What reading gives: ("ok", episodes) or ("error", type, message)."""
    from gym_recorder import FormatError
    try:
        return ("ok", read())
    except FormatError as e:
        return ("error", type(e), str(e))


@pytest.mark.parametrize("field, where, value", [
    ("shape", "rewards", [True]),
    ("shape", "rewards", []),
    ("shape", "rewards", [1, 1]),
    ("shape", "rewards", "ab"),
    ("shape", "rewards", {"a": 1}),
    ("shape", "observations", [1, 5]),
    ("shape", "observations", [1, 4, 1]),
    ("shape", "observations", [1.0, 4]),
    ("shape", "observations", [1, True]),
    ("shape", "observations", [[1], 4]),
    ("crc32", "rewards", -1),
    ("crc32", "rewards", 2 ** 32),
    ("crc32", "rewards", "0"),
    ("crc32", "rewards", True),
    ("crc32", "rewards", None),
    ("dtype", "observations", ["<f4"]),
    ("__type", "actions", ["ndarray"]),
    ("npyfile", "actions", None),
    ("order", "terminations", None),
])
def test_the_column_path_accepts_and_refuses_what_the_entry_path_does(cartpole, field, where,
                                                                      value):
    """A crafted reference late in a batch: iterating (the batch decoded column by column) gives
    the same episodes or the same error as fetching each episode alone (entry by entry)."""
    def mutate(doc):
        entry = doc["episodes"][-2]
        ref = entry[where]
        if field == "shape" and isinstance(value, list) and value and value[0] in (1, 1.0):
            # keep the row count right where the test is about the other dimensions
            rows = ref["shape"][0]
            value[0] = rows if type(value[0]) is int else float(rows)
        ref[field] = value
    rewrite_batch(cartpole, mutate)

    def iterate():
        with RecordingReader(cartpole) as reader:
            return list(reader)

    def alone():
        out = []
        with RecordingReader(cartpole) as reader:
            n = len(reader)
        for i in range(n):
            with RecordingReader(cartpole) as reader:
                out.append(reader[i])
        return out

    a, b = _outcome(iterate), _outcome(alone)
    assert a[0] == b[0], (a[:3], b[:3])
    if a[0] == "error":
        assert a[1:] == b[1:]
    else:
        assert len(a[1]) == len(b[1])
        for x, y in zip(a[1], b[1]):
            _same(x, y)
