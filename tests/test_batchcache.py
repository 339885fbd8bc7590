"""The reader's cache of parsed batches (gym_recorder.read.batchcache): few batches when reading in
order, grown to a memory bound when reading at random, and what each gives back."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gym_recorder.read.reader as reader_module
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.read.batchcache import BATCH_CACHE_SIZE, BatchCache
from gym_recorder.read.batchfile import Batch


def _loader(cost, made):
    """Loads a parsed batch (empty, holding some bytes, so that closing it shows)."""
    def load():
        batch = Batch([], {}, [])
        batch.data = np.zeros(8, dtype=np.uint8)
        made.append(batch)
        return batch, cost
    return load


def _closed(batch):
    return batch.data is None


def test_reading_in_order_keeps_only_the_batches_needed_and_closes_the_rest():
    cache, made = BatchCache(1 << 30), []
    for b in range(20):
        cache.get(("w", b), _loader(10, made))
        cache.get(("w", b), _loader(10, made))  # a hit: nothing loaded
    assert len(made) == 20 and len(cache) == BATCH_CACHE_SIZE
    assert all(_closed(batch) for batch in made[:-BATCH_CACHE_SIZE])
    assert not any(_closed(batch) for batch in made[-BATCH_CACHE_SIZE:])


def test_a_batch_asked_for_again_after_eviction_grows_the_cache_to_its_bound():
    cache, made = BatchCache(100), []
    for b in range(6):
        cache.get(("w", b), _loader(10, made))
    assert len(cache) == BATCH_CACHE_SIZE
    cache.get(("w", 0), _loader(10, made))  # evicted before: reading at random
    for b in range(6, 30):
        cache.get(("w", b), _loader(10, made))
    assert len(cache) == 10  # 100 bytes of 10-byte batches
    before = len(made)
    for b in range(20, 30):
        cache.get(("w", b), _loader(10, made))
    assert len(made) == before  # the last ten are all held


def test_the_cache_never_keeps_fewer_than_needed_to_read_in_order():
    cache, made = BatchCache(0), []
    for b in list(range(8)) + list(range(8)):
        cache.get(("w", b), _loader(1 << 20, made))
    assert len(cache) == BATCH_CACHE_SIZE


def test_clear_closes_everything_and_forgets_reading_at_random():
    cache, made = BatchCache(1 << 30), []
    for b in list(range(6)) + [0]:
        cache.get(("w", b), _loader(1, made))
    cache.clear()
    assert len(cache) == 0 and all(_closed(batch) for batch in made)
    for b in range(10):
        cache.get(("w", b), _loader(1, made))
    assert len(cache) == BATCH_CACHE_SIZE  # in order again: not grown


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec") / "cp"
    env = RecordingWrapper(gym.make("CartPole-v1"), d, target_batch_bytes=64 << 10)
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    for a in rng.integers(0, 2, 12_000).tolist():
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    env.close()
    return d


def _counting_parses(monkeypatch):
    calls = []
    real = reader_module.parse_batch

    def parse_batch(storage, m, b):
        calls.append(b)
        return real(storage, m, b)

    monkeypatch.setattr(reader_module, "parse_batch", parse_batch)
    return calls


def test_random_episodes_parse_each_batch_once_when_the_recording_fits(cartpole, monkeypatch):
    with RecordingReader(cartpole) as reference:
        episodes = list(reference)
        batches = reference.writers[0]["batches"]
    assert batches > 3 * BATCH_CACHE_SIZE
    calls = _counting_parses(monkeypatch)
    order = np.random.default_rng(0).integers(0, len(episodes), 3 * len(episodes))
    with RecordingReader(cartpole) as reader:
        for i in order.tolist():
            ep = reader[i]
            np.testing.assert_array_equal(ep.observations, episodes[i].observations)
            np.testing.assert_array_equal(ep.actions, episodes[i].actions)
            assert ep.seed == episodes[i].seed and ep.end == episodes[i].end
    # Once each, plus batches evicted before the reader saw it was read at random (the first
    # batch asked for again after its eviction), each read once more at most.
    first_again = next(k for k, b in enumerate(calls) if b in calls[:k])
    evicted_before = len(set(calls[:first_again])) - BATCH_CACHE_SIZE
    assert 0 < evicted_before < batches
    assert len(calls) <= batches + evicted_before
    assert len(set(calls)) == batches


def test_a_reader_with_no_cache_bytes_reads_at_random_with_the_small_cache(cartpole, monkeypatch):
    with RecordingReader(cartpole) as reference:
        n = len(reference)
        batches = reference.writers[0]["batches"]
    calls = _counting_parses(monkeypatch)
    order = np.random.default_rng(1).integers(0, n, 400).tolist()
    with RecordingReader(cartpole, cache_bytes=0) as reader:
        for i in order:
            reader[i]
        assert len(reader._cache) == BATCH_CACHE_SIZE
    assert len(calls) > 2 * batches  # parsed again and again: the memory is not spent


def test_iterating_in_order_keeps_the_small_cache(cartpole, monkeypatch):
    calls = _counting_parses(monkeypatch)
    with RecordingReader(cartpole) as reader:
        for _ in reader:
            assert len(reader._cache) <= BATCH_CACHE_SIZE
        batches = reader.writers[0]["batches"]
    assert sorted(calls) == list(range(batches))


@pytest.mark.parametrize("bad", [-1, 1.5, "1", None, True])
def test_cache_bytes_must_be_a_non_negative_integer(cartpole, bad):
    with pytest.raises(ValueError, match="cache_bytes must be a non-negative integer"):
        RecordingReader(cartpole, cache_bytes=bad)
