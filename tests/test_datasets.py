"""Map-style datasets: items equal the transitions, pickling, and worker processes (fork, spawn)."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

from gym_recorder import RecordingReader
from gym_recorder.training.datasets import EpisodeDataset, TransitionDataset, WindowDataset
from gym_recorder.errors import EmptySelectionError
from gym_recorder.training.sampling import windows
from gym_recorder.training.selection import split
from gym_recorder.training.transitions import transitions

from training_helpers import assert_tree, record


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    record(d, "sample_envs/NestedDict-v0", 6, seed=2, env_kwargs={"episode_length": 9})
    return d


def _items(ds, indices):
    """Runs in a worker process: the dataset arrives pickled (spawn) or inherited (fork)."""
    return [ds[i] for i in indices]


def _assert_item(got, expected, where):
    for k in expected:
        assert_tree(got[k], expected[k], f"{where}[{k!r}]")


def test_transition_dataset_items_equal_transitions(rec):
    train, val = split(range(6), (0.5, 0.5), seed=0)
    ds = TransitionDataset(rec, episodes=train)
    with RecordingReader(rec) as reader:
        t = transitions(reader, train)
    assert len(ds) == len(t) == 27
    for i in range(len(ds)):
        item = ds[i]
        row = t.rows(np.array([i]))
        for k in row:
            assert_tree(item[k], _first(row[k]), f"item {i} {k}")
    assert set(ds[len(ds) - 1]["episode"].reshape(1).tolist()) <= set(train)
    with pytest.raises(IndexError, match="index 27 out of range"):
        ds[27]


def _first(tree):
    if isinstance(tree, dict):
        return {k: _first(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_first(v) for v in tree)
    return tree[0]


def test_window_dataset_equals_windows(rec):
    ds = WindowDataset(rec, 4, 2, complete_only=False)
    with RecordingReader(rec) as reader:
        w = windows(transitions(reader), 4, 2)
    assert len(ds) == len(w) == 6 * 5
    for i in range(len(ds)):
        _assert_item(ds[i], w[i], f"window {i}")
    with pytest.raises(EmptySelectionError, match="longer than every episode"):
        WindowDataset(rec, 10)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_datasets_in_worker_processes(rec, method):
    ctx = multiprocessing.get_context(method)
    tds, eds, wds = TransitionDataset(rec), EpisodeDataset(rec), WindowDataset(rec, 3, 3)
    # the parent uses its reader before the workers start (a fork copies it; it must not be used)
    expected_t = [tds[i] for i in range(len(tds))]
    expected_e = [eds[i] for i in range(len(eds))]
    expected_w = [wds[i] for i in range(len(wds))]
    assert len(pickle.dumps(tds)) < 10_000  # a location, indices and lengths: no arrays
    with ctx.Pool(2) as pool:
        chunks = [list(range(k, len(tds), 4)) for k in range(4)]
        got_t = pool.starmap(_items, [(tds, c) for c in chunks])
        got_e = pool.starmap(_items, [(eds, [i]) for i in range(len(eds))])
        got_w = pool.starmap(_items, [(wds, [i]) for i in range(len(wds))])
    for c, items in zip(chunks, got_t):
        for i, item in zip(c, items):
            _assert_item(item, expected_t[i], f"{method} transition {i}")
    for i, (item,) in enumerate(got_e):
        _assert_item(item, expected_e[i], f"{method} episode {i}")
    for i, (item,) in enumerate(got_w):
        _assert_item(item, expected_w[i], f"{method} window {i}")
    # and the parent's own reader still works after its workers are gone
    _assert_item(tds[5], expected_t[5], "parent after workers")


def test_dataset_opened_in_each_process_not_shared(rec):
    ds = TransitionDataset(rec)
    ds[0]
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._reader_obj is None and ds._reader_obj is not None
    _assert_item(clone[3], ds[3], "unpickled")
    ds.close()
    _assert_item(ds[4], clone[4], "reopened after close")


def test_dataset_bad_selection_is_a_named_error(rec):
    with pytest.raises(EmptySelectionError, match="no episodes selected"):
        TransitionDataset(rec, episodes=[])
    with pytest.raises(IndexError, match="episode 6 out of range: .* has 6 episodes"):
        EpisodeDataset(rec, episodes=[0, 6])
    with pytest.raises(ValueError, match="length must be a positive int, got 0"):
        WindowDataset(rec, 0)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataset_of_a_recording_still_written_gives_the_same_items_in_workers(tmp_path, method):
    """A dataset made while writers still record: a worker's reader numbers episodes anew (the
    older writer's new episode moves the later writer's indices), yet every worker returns the
    items the dataset was made with, cut to the steps they had then."""
    import gymnasium as gym

    from gym_recorder import RecordingWrapper

    a = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, file_prefix="a")  # sorts first
    b = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, file_prefix="b")
    for w, seed in ((a, 1), (b, 2)):
        w.reset(seed=seed)
        for _ in range(5):
            w.step(0)
        w.flush()  # b's episode is open: 5 steps committed so far
    episodes, transitions_ = EpisodeDataset(tmp_path), TransitionDataset(tmp_path, [-1])
    before = [episodes[k] for k in range(len(episodes))]
    assert [int(e["seed"]) for e in before] == [1, 2] and len(transitions_) == 5
    a.reset(seed=3)  # writer a commits a new episode: it becomes index 1 for a new reader
    b.step(0)        # and b's open episode grows
    for _ in range(5):
        a.step(1)
    a.flush()
    b.flush()
    with RecordingReader(tmp_path) as reader:
        assert [ep.seed for ep in reader] == [1, 3, 2] and len(reader[2]) == 6
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(1) as pool:
        got = pool.apply(_items, (episodes, [0, 1]))
        steps = pool.apply(_items, (transitions_, [0, 4, -1]))
    for k in (0, 1):
        assert int(got[k]["seed"]) == int(before[k]["seed"]) and got[k]["episode"] == k
        for name in ("observations", "actions", "rewards"):
            np.testing.assert_array_equal(got[k][name], before[k][name])
    assert len(got[1]["rewards"]) == 5 and len(got[1]["observations"]) == 6
    for s, k in zip(steps, (0, 4, 4)):
        assert s["episode"] == 1 and s["step"] == k
        np.testing.assert_array_equal(s["next_obs"], before[1]["observations"][k + 1])
    a.close()
    b.close()


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """CartPole in small batches: most episodes lie whole in one batch, some over two or more."""
    d = tmp_path_factory.mktemp("spread")
    record(d, "CartPole-v1", 40, seed=5, target_batch_bytes=4096)
    with RecordingReader(d) as reader:
        held = [e for info in reader.batches() for e in info.episodes]
    counts = np.bincount(held)
    assert (counts == 1).any() and (counts > 1).any()  # both kinds are in the test
    return d


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_shuffled_items_equal_transitions_whole_and_spread_episodes(spread, cache_bytes):
    """Items in shuffled order (decoded batches cached, or evicted at once with cache_bytes=0)
    equal the transitions' rows; an item's arrays are its own (changing one changes no other
    item), whichever path read it."""
    with RecordingReader(spread) as reader:
        t = transitions(reader)
        eps = [reader[i] for i in range(len(reader))]
    ds = TransitionDataset(spread, cache_bytes=cache_bytes)
    assert len(ds) == len(t)
    order = np.random.default_rng(0).permutation(len(ds))
    for i in np.concatenate([order, order[:50]]):
        item = ds[int(i)]
        row = t.rows(np.array([i]))
        for k in row:
            assert_tree(item[k], _first(row[k]), f"item {i} {k}")
        item["obs"][:] = -7.0
        item["next_obs"][:] = -7.0
    for i in order[:50]:
        np.testing.assert_array_equal(ds[int(i)]["obs"], t.rows(np.array([i]))["obs"][0])
    episodes = EpisodeDataset(spread, cache_bytes=cache_bytes)
    for i in np.random.default_rng(1).permutation(len(episodes)):
        got = episodes[int(i)]
        ep = eps[i]
        for name in ("observations", "actions", "rewards", "terminations", "truncations"):
            assert_tree(got[name], getattr(ep, name), f"episode {i} {name}")
        assert int(got["seed"]) == (-1 if ep.seed is None else ep.seed)
        got["observations"][:] = 0.0
        np.testing.assert_array_equal(episodes[int(i)]["observations"], ep.observations)
    win = WindowDataset(spread, 30, stride=7, cache_bytes=cache_bytes)
    with RecordingReader(spread) as reader:
        w = windows(transitions(reader), 30, stride=7)
    for i in np.random.default_rng(2).permutation(len(win))[:200]:
        _assert_item(win[int(i)], w[int(i)], f"window {i}")


def test_dataset_cache_bytes_must_be_a_size(spread):
    for bad in (-1, 1.5, "1", True, None):
        with pytest.raises(ValueError, match="cache_bytes must be an int >= 0"):
            TransitionDataset(spread, cache_bytes=bad)
