"""Iterating a reader (its batch-by-batch path) gives exactly the episodes indexing gives: in
the reader's order of writers, episodes split over batches stitched, and a refresh while
iterating seen as indexing would see it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingReader, RecordingWrapper


def _record(d, prefix, seed, steps, target=4096):
    env = RecordingWrapper(gym.make("CartPole-v1"), d, file_prefix=prefix,
                           target_batch_bytes=target)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    for a in rng.integers(0, 2, steps).tolist():
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    env.close()


def _same(a, b):
    assert (a.index, a.seed, a.end, a.writer, a.sub_env, a.no_reset, a.infos) == \
        (b.index, b.seed, b.end, b.writer, b.sub_env, b.no_reset, b.infos)
    assert type(a) is type(b) and a == a  # a real Episode, comparable like one
    for x, y in [(a.observations, b.observations), (a.actions, b.actions),
                 (a.rewards, b.rewards), (a.terminations, b.terminations),
                 (a.truncations, b.truncations)]:
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_two_writers_with_split_episodes_iterate_as_indexed(tmp_path):
    d = tmp_path / "rec"
    _record(d, "a", 1, 900)
    _record(d, "b", 2, 700)
    with RecordingReader(d) as reader:
        assert len(reader.writers) == 2 and reader.writers[0]["batches"] > 3
        episodes = list(reader)
        assert len(episodes) == len(reader) > 30
        split = [i for i in range(len(reader)) if len(
            [info for info in reader.batches() if i in info.episodes]) > 1]
        assert split  # some episodes have parts in two batches
        for i, ep in enumerate(episodes):
            assert ep.index == i
            _same(ep, reader[i])
    assert [ep.writer for ep in episodes] == sorted(ep.writer for ep in episodes)


def test_a_refresh_while_iterating_is_seen_as_indexing_sees_it(tmp_path):
    d = tmp_path / "rec"
    _record(d, "a", 3, 600)
    with RecordingReader(d) as reader:
        count = len(reader)
        it = iter(reader)
        first = [next(it) for _ in range(count // 2)]
        _record(d, "b", 4, 300)  # a second writer, after the first in the reader's order
        reader.refresh()
        assert len(reader) > count
        rest = list(it)
        assert len(first) + len(rest) == count  # the count the iteration started with
        for ep in first + rest:
            _same(ep, reader[ep.index])
