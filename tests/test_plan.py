"""One plan per batch (gym_recorder.read.plan): the batch index's plan and the batch JSON's are
the same, an entry whose reference is not the plan's is read entry by entry (and refused by
name), and a fresh reader's ``reader[i]`` reads only that episode's rows through the plan."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from conftest import run_random
from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.read.batchindex import read_index
from gym_recorder.read.plan import BatchPlan, column_offsets, index_plan, plannable
from gym_recorder.read.storage import LocalStorage
from hostile import rewrite_batch


@pytest.fixture
def cartpole(tmp_path):
    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("CartPole-v1"), d, file_prefix="cp",
                           target_batch_bytes=20_000)
    run_random(env, 3_000, seed=4, reset_seed=4)
    env.close()
    return d


def _batch(reader, b=0):
    m = reader._manifests[0]
    return m, reader._batch(m, b)


def _same_plan(a: BatchPlan, b: BatchPlan) -> None:
    assert len(a) == len(b) and a.n_obs == b.n_obs
    for x, y in ((a.episode, b.episode), (a.part, b.part), (a.steps, b.steps),
                 (a.flags, b.flags), (a.obs_rows, b.obs_rows)):
        np.testing.assert_array_equal(x, y)
    assert a.dtypes == b.dtypes and a.tails == b.tails
    for x, y in zip(a.offsets, b.offsets):
        np.testing.assert_array_equal(x, y)


def test_the_index_plan_is_the_json_plan(cartpole):
    with RecordingReader(cartpole) as reader:
        m, batch = _batch(reader)
        binfo = m.batches[0]
        from_index = index_plan(m, read_index(reader.storage, m, 0), binfo["bin"],
                                binfo["bin_size"])
        episodes = list(reader)
    assert batch.plan is not None
    batch.plan.check_all()
    assert batch.plan.ok is None  # every entry agrees with it
    assert [str(d) for d in batch.plan.dtypes] == ["float32", "int64", "float64", "bool", "bool"]
    assert batch.plan.tails == [(4,), (), (), (), ()]
    _same_plan(batch.plan, from_index)
    rewrite_batch(cartpole, lambda doc: None)  # the same JSON, the manifest without the index
    with RecordingReader(cartpole) as reader:
        m, batch = _batch(reader)
        assert m.batches[0].get("index") is None
        _same_plan(batch.plan, from_index)  # planned from the JSON's references
        for a, b in zip(episodes, reader):
            np.testing.assert_array_equal(a.observations, b.observations)
            np.testing.assert_array_equal(a.rewards, b.rewards)


def test_every_entry_of_a_column_is_placed_in_its_own_array(cartpole):
    with RecordingReader(cartpole) as reader:
        m, batch = _batch(reader)
        plan = batch.plan
        for pos in range(len(plan)):
            ep = reader[int(plan.episode[pos])]  # (single writer: numbers are indices)
            if plan.part[pos]:
                continue
            got = plan.arrays(pos, reader.storage, None)
            np.testing.assert_array_equal(got[0], ep.observations[:len(got[0])])
            np.testing.assert_array_equal(got[2], ep.rewards[:len(got[2])])
            ref = plan.ref(2, pos)
            assert ref.shape == (int(plan.steps[pos]),) and ref.size == 8 * ref.shape[0]


def test_a_reference_not_the_index_s_is_read_entry_by_entry_and_refused(cartpole):
    """The batch index is kept; one entry's rewards reference says another shape: that entry
    is not ok in the plan, so reading its episode names the fault, and the others read."""
    def mutate(doc):
        doc["episodes"][3]["rewards"]["shape"] = [1, 1]

    man_path = next(cartpole.glob("*.manifest.json"))
    index = json.loads(man_path.read_text())["batches"][0]["index"]
    rewrite_batch(cartpole, mutate)
    man = json.loads(man_path.read_text())
    man["batches"][0]["index"] = index  # (rewrite_batch leaves it out)
    man_path.write_text(json.dumps(man))
    with RecordingReader(cartpole) as reader:
        _, batch = _batch(reader)
        assert batch.plan is not None
        assert [batch.plan.usable(k) for k in range(5)] == [True, True, True, False, True]
        batch.plan.check_all()  # (every entry at once: the same answer)
        assert batch.plan.ok is not None and np.flatnonzero(~batch.plan.ok).tolist() == [3]
        bad = int(batch.plan.episode[3])
        with pytest.raises(FormatError, match=r"cp\.ep000000000\.json entry 3 rewards: "
                                              r"size \d+ does not match shape \[1, 1\]"):
            reader[bad]
        assert reader[bad + 1].length > 0


def test_a_text_leaf_has_no_plan(tmp_path):
    env = RecordingWrapper(gym.make("sample_envs/Text-v0"), tmp_path)
    run_random(env, 50, seed=1, reset_seed=1)
    env.close()
    with RecordingReader(tmp_path) as reader:
        _, batch = _batch(reader)
        assert batch.plan is None  # (stored as values: read entry by entry)
        assert len(reader[0].observations) == reader[0].length + 1


def test_column_offsets_refuses_what_parse_ref_refuses():
    good = {"__type": "ndarray", "order": "C", "npyfile": "a.bin", "dtype": "<f8",
            "shape": [2], "npyoff": 8, "size": 16, "crc32": 0}
    dtype, offsets = column_offsets([good, dict(good, npyoff=24, shape=[1], size=8)], [2, 1],
                                    (), "a.bin", 32)
    assert dtype == np.float64 and offsets.tolist() == [8, 24]
    for bad in (dict(good, npyoff=3), dict(good, size=15), dict(good, shape=[2.0]),
                dict(good, npyfile="b.bin"), dict(good, order="F"), dict(good, crc32=-1),
                dict(good, npyoff=24), dict(good, codec={"name": "zstd"})):
        assert column_offsets([bad], [2], (), "a.bin", 32) is None, bad
    assert not plannable(np.dtype("<U3")) and plannable(np.dtype("<i8"))


class CountingStorage(LocalStorage):
    """A local recording's storage that counts the bytes read from its .bin files."""

    def __init__(self, root):
        super().__init__(root)
        self.bin_bytes = 0

    def readinto(self, name, offset, out):
        if name.endswith(".bin"):
            self.bin_bytes += memoryview(out).nbytes
        super().readinto(name, offset, out)


def test_a_fresh_reader_reads_only_the_episode_s_rows(tmp_path):
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=20), tmp_path, target_batch_bytes=200_000)
    run_random(env, 400, seed=2, reset_seed=2)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert reader.writers[0]["batches"] < len(reader) // 2
        want = reader[7]
    storage = CountingStorage(tmp_path)
    with RecordingReader(storage) as reader:
        ep = reader[7]
        index_bytes = 32 * reader._manifests[0].batches[0]["len"]  # (its index table)
    np.testing.assert_array_equal(ep.observations, want.observations)
    own = sum(a.nbytes for a in (ep.observations, ep.actions, ep.rewards, ep.terminations,
                                 ep.truncations))
    assert storage.bin_bytes <= own + index_bytes


@pytest.mark.parametrize("dtype, shape", [("int8", (3,)), ("float16", (2, 3)),
                                          ("float64", (1,)), ("uint8", (5, 1))])
def test_leaves_of_any_item_size_read_through_the_plan_equal_the_entry_path(tmp_path, dtype,
                                                                            shape):
    """Columns of item sizes 1, 2 and 8 copied out of a batch's .bin held in memory (iterating)
    are what the entry path reads. (A leaf of no elements: test_c_reader.py.)"""
    env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=5,
                                    obs_shape=shape, obs_dtype=dtype), tmp_path)
    run_random(env, 60, seed=3, reset_seed=3)
    env.close()
    with RecordingReader(tmp_path) as reader, RecordingReader(tmp_path) as alone:
        _, batch = _batch(reader)
        assert batch.plan is not None
        episodes = list(reader)  # (the batch's .bin held: copies out of it)
        assert batch.data is not None
        assert len(episodes) == len(alone) > 5
        m = alone._manifests[0]
        for ep in episodes:
            binfo, entry, part_no, one = alone._parts(m, ep.index)[0]
            dec = alone._decoder  # the entry path, as a batch without a plan is read
            p = dec.load_part(m, dec.plan_part(m, binfo, entry, part_no),
                              dec.batch_size(one, binfo))
            assert ep.observations.dtype == p.obs[0].dtype == np.dtype(dtype)
            np.testing.assert_array_equal(ep.observations, p.obs[0])
            np.testing.assert_array_equal(ep.actions, p.act[0])
            np.testing.assert_array_equal(ep.rewards, p.rewards)
