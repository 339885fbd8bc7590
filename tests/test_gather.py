"""The one gather (gym_recorder.read.gather): rows of planned arrays copied into the arrays handed
out, vectorised over many entries (``gather_rows``) or part by part (``read_rows``, in this thread
or over READ_THREADS threads), equal to the episodes' own rows."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from conftest import run_random
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.read import gather as gather_module
from gym_recorder.read.gather import gather_rows, groups, read_rows


@pytest.fixture
def cartpole(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=8_000)
    run_random(env, 2_000, seed=6, reset_seed=6)
    env.close()
    return tmp_path


def _plans(reader):
    m = reader._manifests[0]
    return [reader._batch(m, b).plan for b in range(len(m.batches))]


def test_gather_rows_of_shuffled_entries_of_many_batches(cartpole):
    with RecordingReader(cartpole) as reader:
        plans = _plans(reader)
        assert len(plans) > 3 and all(p is not None for p in plans)
        # every entry of every batch, in a shuffled order: (batch, position)
        chosen = [(b, pos) for b, p in enumerate(plans) for pos in range(len(p))]
        order = np.random.default_rng(0).permutation(len(chosen))
        chosen = [chosen[k] for k in order]
        bat = np.array([b for b, _ in chosen], dtype=np.int64)
        for c in (0, 2):  # observations (rows of 4 float32), rewards
            offsets = np.array([int(plans[b].offsets[c][pos]) for b, pos in chosen])
            rows = np.array([int(plans[b].rows(c)[pos]) for b, pos in chosen])
            got = gather_rows(reader._decoder, [p.bin_name for p in plans], bat, offsets, rows,
                              plans[0].dtypes[c], plans[0].tails[c])
            want = np.concatenate([plans[b].arrays(pos, reader.storage, None)[c]
                                   for b, pos in chosen])
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [False, True])
def test_read_rows_fills_one_array_from_many_parts(cartpole, monkeypatch, threads):
    if threads:
        monkeypatch.setattr(gather_module, "PARALLEL_READ_BYTES", 0)
    with RecordingReader(cartpole) as reader:
        plans = _plans(reader)
        refs = [p.ref(0, pos) for p in plans for pos in range(len(p))]
        out = np.empty((sum(r.shape[0] for r in refs), 4), dtype=np.float32)
        jobs, row = [], 0
        for ref in refs:
            jobs.append((ref.file, ref, "test", out, row))
            row += ref.shape[0]
        read_rows(reader._decoder, jobs, out.nbytes)
        # every entry's observations, in entry order, are every episode's (parts joined)
        want = np.concatenate([ep.observations for ep in reader])
    np.testing.assert_array_equal(out, want)


def test_groups_are_stable_and_ascending():
    keys = np.array([2, 0, 2, 1, 0], dtype=np.int64)
    got = [(k, pos.tolist()) for k, pos in groups(keys)]
    assert got == [(0, [1, 4]), (1, [3]), (2, [0, 2])]
    assert groups(np.zeros(0, dtype=np.int64)) == []
