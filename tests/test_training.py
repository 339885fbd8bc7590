"""Selection, transitions, sampling, windows and splits on real recordings."""

from __future__ import annotations

import numpy as np
import pytest

from gym_recorder import RecordingReader
from gym_recorder.errors import EmptySelectionError
from gym_recorder.training.sampling import sample_episodes, windows
from gym_recorder.training.selection import select, split
from gym_recorder.training.transitions import transitions

from training_helpers import assert_tree, record, tree_cat, tree_rows


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    d = tmp_path_factory.mktemp("cartpole")
    return d, record(d, "CartPole-v1", 12, seed=3)


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    d = tmp_path_factory.mktemp("nested")
    return d, record(d, "sample_envs/NestedDict-v0", 4, seed=1, env_kwargs={"episode_length": 7})


def expected_transitions(truth, chosen):
    obs = tree_cat([tree_rows(truth[e]["obs"], slice(0, -1)) for e in chosen])
    nxt = tree_cat([tree_rows(truth[e]["obs"], slice(1, None)) for e in chosen])
    act = tree_cat([truth[e]["act"] for e in chosen])
    return obs, nxt, act


@pytest.mark.parametrize("chosen", [None, [5], [7, 2, 9]])
def test_transitions_equal_the_env(cartpole, chosen):
    d, truth = cartpole
    with RecordingReader(d) as reader:
        t = transitions(reader, chosen)
    chosen = list(range(len(truth))) if chosen is None else chosen
    obs, nxt, act = expected_transitions(truth, chosen)
    assert_tree(t.obs, obs, "obs")
    assert_tree(t.next_obs, nxt, "next_obs")
    assert_tree(t.action, act, "action")
    assert_tree(t.reward, np.concatenate([truth[e]["rew"] for e in chosen]), "reward")
    assert_tree(t.terminated, np.concatenate([truth[e]["term"] for e in chosen]), "terminated")
    assert_tree(t.truncated, np.concatenate([truth[e]["trunc"] for e in chosen]), "truncated")
    lengths = [len(truth[e]["rew"]) for e in chosen]
    assert t.episode.tolist() == [e for e, n in zip(chosen, lengths) for _ in range(n)]
    assert t.step.tolist() == [k for n in lengths for k in range(n)]
    assert len(t) == sum(lengths)
    if len(chosen) == 1:  # one episode: obs and next_obs are offset views of one column
        assert np.shares_memory(t.obs, t.observations)
        assert np.shares_memory(t.next_obs, t.observations)
        assert t.next_obs.__array_interface__["data"][0] - \
            t.obs.__array_interface__["data"][0] == t.obs.strides[0]


def test_transitions_of_dict_and_tuple_spaces(nested):
    d, truth = nested
    with RecordingReader(d) as reader:
        t = transitions(reader, [3, 0])
    obs, nxt, act = expected_transitions(truth, [3, 0])
    assert_tree(t.obs, obs, "obs")
    assert_tree(t.next_obs, nxt, "next_obs")
    assert_tree(t.action, act, "action")
    assert t.obs["nested"]["pair"][1].dtype == np.int16
    assert t.obs["grid"].shape == (14, 5, 5)


def test_select_by_predicate_reads_no_dropped_arrays(cartpole, monkeypatch):
    d, truth = cartpole
    with RecordingReader(d) as reader:
        # every array read goes through __getitem__ (episodes) or summary (rewards only)
        read = []
        original = RecordingReader.__getitem__
        monkeypatch.setattr(RecordingReader, "__getitem__",
                            lambda self, i: read.append(i) or original(self, i))
        long = select(reader, where=lambda s: s.length >= 20)
        assert read == []
        assert long == [i for i, t in enumerate(truth) if len(t["rew"]) >= 20]
        assert select(reader, episodes=[-1, 0]) == [11, 0]
        prefix = reader.writers[0]["prefix"]
        assert select(reader, writer=prefix, env_id="CartPole-v1") == list(range(12))
        assert select(reader, where=lambda s: s.seed == 3) == [0]
        with pytest.raises(EmptySelectionError, match="no episode of the 12 .* env_id='Pong'"):
            select(reader, env_id="Pong")
        with pytest.raises(IndexError, match="episode 12 out of range"):
            select(reader, episodes=[12])


def test_split_is_disjoint_reproducible_and_complete():
    parts = split(list(range(100)), (0.8, 0.1, 0.1), seed=7)
    assert [len(p) for p in parts] == [80, 10, 10]
    assert sorted(sum(parts, [])) == list(range(100))
    assert parts == split(list(range(100)), (0.8, 0.1, 0.1), seed=7)
    assert parts != split(list(range(100)), (0.8, 0.1, 0.1), seed=8)
    assert split([4, 5, 6, 7], (0.5, 0.5)) == [[4, 5], [6, 7]]
    with pytest.raises(ValueError, match="sum to 1"):
        split([1, 2], (0.5, 0.6))
    with pytest.raises(EmptySelectionError, match="part 1 .* would be empty"):
        split([1, 2], (0.9, 0.1), seed=0)


def test_sample_is_uniform_and_reproducible(cartpole):
    d, truth = cartpole
    with RecordingReader(d) as reader:
        t = transitions(reader)
        a = t.sample(500, np.random.default_rng(42))
        b = t.sample(500, np.random.default_rng(42))
        eps = sample_episodes(reader, 3, np.random.default_rng(1))
        eps2 = sample_episodes(reader, 3, np.random.default_rng(1))
    rows = np.random.default_rng(42).choice(len(t), size=500, replace=True)
    for k in a:
        assert_tree(a[k], b[k], k)
    assert_tree(a["obs"], t.obs[rows], "obs")
    assert_tree(a["next_obs"], t.next_obs[rows], "next_obs")
    assert_tree(a["reward"], t.reward[rows], "reward")
    assert [e.index for e in eps] == [e.index for e in eps2]
    assert len(set(e.index for e in eps)) == 3
    for e in eps:
        assert_tree(e.observations, truth[e.index]["obs"], "episode observations")
    with pytest.raises(EmptySelectionError, match="without replacement"):
        t.sample(len(t) + 1, np.random.default_rng(0), replace=False)


def test_windows_masks_and_complete_only(cartpole):
    d, truth = cartpole
    with RecordingReader(d) as reader:
        t = transitions(reader)
    lengths = [len(x["rew"]) for x in truth]
    length, stride = 8, 3
    w = windows(t, length, stride)
    expected_starts = [(e, s) for e, n in enumerate(lengths) for s in range(0, n, stride)]
    assert len(w) == len(expected_starts)
    for i in (0, 1, len(w) - 1, len(w) // 2):
        e, s = expected_starts[i]
        item = w[i]
        n = lengths[e]
        valid = min(length, n - s)
        assert item["mask"].tolist() == [True] * valid + [False] * (length - valid)
        assert_tree(item["obs"][:valid], truth[e]["obs"][s:s + valid], "window obs")
        assert_tree(item["next_obs"][:valid], truth[e]["obs"][s + 1:s + valid + 1], "next")
        assert_tree(item["action"][:valid], truth[e]["act"][s:s + valid], "window action")
        assert (item["episode"] == e).all() and item["step"][:valid].tolist() == \
            list(range(s, s + valid))
    full = windows(t, length, stride, complete_only=True)
    assert len(full) == sum(max(0, (n - length) // stride + 1) for n in lengths)
    batch = full.sample(16, np.random.default_rng(0))
    assert batch["obs"].shape == (16, length, 4) and batch["mask"].all()
    assert_tree(batch["reward"], full.sample(16, np.random.default_rng(0))["reward"], "repro")
    with pytest.raises(EmptySelectionError, match=f"window of {max(lengths) + 1} steps is "
                                                  f"longer than every episode"):
        windows(t, max(lengths) + 1)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        windows(t, 4, 0)


def test_readme_training_example_runs(tmp_path, monkeypatch):
    from docpages import python_block

    from gym_recorder import cli

    block = python_block("w = windows(t, length=8, stride=4)")  # docs/training.md
    monkeypatch.chdir(tmp_path)
    assert cli.main(["record", "CartPole-v1", "--episodes", "10", "--directory",
                     "recordings/cartpole", "--seed", "0", "-q"]) == 0
    scope: dict = {}
    exec(compile(block, "docs/training.md", "exec"), scope)
    t, seq, batch = scope["t"], scope["seq"], scope["batch"]
    assert set(t.episode.tolist()) == set(scope["train"])
    assert not set(scope["train"]) & set(scope["val"])
    assert seq["obs"].shape == (32, 8, 4) and seq["mask"].shape == (32, 8)
    assert batch["obs"].shape == (256, 4) and batch["obs"].dtype == np.float32


def test_transitions_of_episodes_in_many_batches_read_only_their_batches(tmp_path, monkeypatch):
    # tiny batches: every episode is split into parts over several batch files
    truth = record(tmp_path, "sample_envs/Image-v0", 4, seed=9, target_batch_bytes=3000,
                   env_kwargs={"height": 6, "width": 5, "episode_length": 23})
    import gym_recorder.read.bulk as bulk_module
    from gym_recorder.read.storage import LocalStorage

    read, files = [], set()
    original = RecordingReader.read_batch
    monkeypatch.setattr(RecordingReader, "read_batch",
                        lambda self, info: read.append(info) or original(self, info))
    readinto = LocalStorage.readinto
    monkeypatch.setattr(LocalStorage, "readinto", lambda self, name, offset, out: (
        files.add(name), readinto(self, name, offset, out))[1])
    # Through the batches' index (no batch JSON parsed), then through the batch JSON.
    for path in ("index", "json"):
        if path == "json":
            monkeypatch.setattr(bulk_module, "read_stacked", lambda *a, **k: None)
        read.clear()
        files.clear()
        with RecordingReader(tmp_path) as reader:
            batches = reader.batches()
            assert sum(2 in b.episodes for b in batches) >= 2  # episode 2 is in several parts
            t = transitions(reader, [2, 1])
        theirs = [b for b in batches if {1, 2} & set(b.episodes)]
        assert len(theirs) < len(batches)
        if path == "index":
            assert read == [] and files == {b.bin_name for b in theirs}, path
        else:  # batches of episodes 0 and 3 only were not decoded
            assert read == theirs, path
        obs, nxt, act = expected_transitions(truth, [2, 1])
        assert_tree(t.obs, obs, "obs")
        assert_tree(t.next_obs, nxt, "next_obs")
        assert_tree(t.action, act, "action")
        assert_tree(t.reward, np.concatenate([truth[2]["rew"], truth[1]["rew"]]), "reward")
        assert t.step.tolist() == list(range(23)) * 2


def test_bad_requests_are_named_errors(cartpole, tmp_path):
    """Indices that are not ints, duplicates in a split, negative or empty draws, and a
    selection spanning writers of different spaces: each a clear error, never numpy's."""
    from gym_recorder.training.datasets import TransitionDataset
    from gym_recorder.read.envgroups import MixedEnvsWarning
    from gym_recorder.errors import UnsupportedSpaceError

    d, _ = cartpole
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="episode 0 is given more than once"):
        split([0, 0, 1, 1], (0.5, 0.5), seed=0)
    with RecordingReader(d) as reader:
        with pytest.raises(TypeError, match="episode indices must be ints, got 1.7"):
            transitions(reader, [1.7])
        last = transitions(reader, [-1])
        assert int(last.episodes[0]) == len(reader) - 1
        with pytest.raises(ValueError, match="must be >= 0"):
            last.sample(-1, rng)
        with pytest.raises(ValueError, match="must be >= 0"):
            windows(last, 1).sample(-1, rng)
        with pytest.raises(EmptySelectionError, match="cannot draw 1 of 0 episodes"):
            sample_episodes(reader, 1, rng, episodes=[])
        assert sample_episodes(reader, 0, rng) == []
    ds = TransitionDataset(d, [-1])
    assert ds[0]["episode"] == int(last.episodes[0])
    np.testing.assert_array_equal(ds[len(ds) - 1]["next_obs"], last.next_obs[-1])
    # a 0-step episode (reset, close): no step to draw from
    import gymnasium as gym

    from gym_recorder import RecordingWrapper
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "zero")
    env.reset(seed=0)
    env.close()
    with RecordingReader(tmp_path / "zero") as reader:
        empty = transitions(reader)
        assert len(empty) == 0
        with pytest.raises(EmptySelectionError, match="cannot draw 4 of 0 steps"):
            empty.sample(4, rng)
    # writers of different spaces in one directory
    mixed = tmp_path / "mixed"
    record(mixed, "CartPole-v1", 2, seed=0)
    with pytest.warns(MixedEnvsWarning):
        record(mixed, "Pendulum-v1", 1, seed=0, env_kwargs={"max_episode_steps": 5})
    with RecordingReader(mixed) as reader:
        transitions(reader, select(reader, env_id="Pendulum-v1"))
        with pytest.raises(UnsupportedSpaceError, match="different spaces; choose one env"):
            transitions(reader)


def test_sampled_episodes_over_many_batches_come_in_the_order_drawn(tmp_path):
    """Drawn episodes are read in the recording's order but returned in the order drawn, equal
    to indexing; a repeated draw is a copy of its own."""
    truth = record(tmp_path, "CartPole-v1", 30, seed=4, target_batch_bytes=4096)
    with RecordingReader(tmp_path) as reader:
        assert len(reader.batches()) > 8  # more than the reader keeps parsed at once
        eps = sample_episodes(reader, 60, np.random.default_rng(7), replace=True)
        drawn = np.random.default_rng(7).choice(np.arange(30), size=60, replace=True).tolist()
        assert [e.index for e in eps] == drawn and len(set(drawn)) < 60
        for e, i in zip(eps, drawn):
            assert_tree(e.observations, truth[i]["obs"], f"episode {i}")
            assert_tree(e.actions, truth[i]["act"], f"episode {i}")
            assert_tree(e.rewards, truth[i]["rew"], f"episode {i}")
        first = {}
        for e in eps:
            if e.index in first:
                assert e is not first[e.index]
                e.observations[:] = 0.0
                assert_tree(first[e.index].observations, truth[e.index]["obs"], "first draw")
            first.setdefault(e.index, e)
