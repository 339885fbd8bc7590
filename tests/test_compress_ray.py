"""Compressed recordings through Ray (datasets and record_parallel) and S3 range reads: the
same rows as the local reader of the raw recording of the same steps."""

from __future__ import annotations

import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder import RecordingReader, RecordingWrapper, Zstd
from sample_envs.envs import ImageEnv
from test_ray import _ray_mod, assert_episodes_equal, assert_steps_equal
from training_helpers import assert_tree

pytest.importorskip("zstandard")


def _record_both(raw, coded, episodes=5):
    env = RecordingWrapper(RecordingWrapper(ImageEnv(height=16, width=12, episode_length=21),
                                            raw, target_batch_bytes=6000),
                           coded, compression=Zstd(chunk_rows=4), target_batch_bytes=6000)
    env.action_space.seed(2)
    for e in range(episodes):
        env.reset(seed=e)
        for _ in range(21):
            env.step(env.action_space.sample())
    env.close()


@pytest.mark.usefixtures("ray_cluster")
def test_ray_dataset_and_record_parallel(tmp_path):
    gr_ray = _ray_mod()
    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    _record_both(raw, coded)
    with RecordingReader(raw) as reader:
        assert_steps_equal(gr_ray.read_recording(coded), reader)
    with RecordingReader(coded) as reader:  # (its writer names; arrays as the raw ones above)
        assert_episodes_equal(gr_ray.read_recording(coded, granularity="episode"), reader)
    d = tmp_path / "par"
    summary = gr_ray.record_parallel(lambda: ImageEnv(height=8, width=8, episode_length=5), d,
                                     num_workers=2, episodes_per_worker=2, seed=11,
                                     recorder_kwargs={"compression": "zstd"})
    assert summary.failures == {} and summary.episodes == 4
    with RecordingReader(d) as reader:
        for ep in reader:
            assert ep.observations.shape == (6, 8, 8, 3)


def test_s3_range_reads(s3, tmp_path):
    from gym_recorder.integrations.cloud import push

    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    _record_both(raw, coded)
    push(coded, s3.url("z"))
    with RecordingReader(raw) as want, RecordingReader(s3.url("z"),
                                                       storage_options=s3.options) as got:
        assert len(got) == len(want)
        for i in range(len(want)):
            assert_tree(got[i].observations, want[i].observations, f"{i}")
            rows = got.episode_rows(i)
            assert_tree(rows.rows("observations", 3, 9), want[i].observations[3:9], f"{i} rows")
        assert np.array_equal(got.column("observations"), want.column("observations"))
