"""Many writers into one directory, and readers while a writer is running."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gym_recorder import RecordingReader
from gym_recorder.integrity import verify
from sample_envs.envs import ImageEnv
from conftest import image_episode

ROOT = Path(__file__).resolve().parent.parent
WRITERS = 4
EPISODES = 6
LENGTH = 20


def expected(seed, length=LENGTH):
    frames, _, rewards = image_episode(seed, 8, length)
    return frames, rewards


def _write(directory: str, writer: int) -> None:
    from gym_recorder import RecordingWrapper

    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=LENGTH), directory,
                           target_batch_bytes=1_500)
    for ep in range(EPISODES):
        env.reset(seed=writer * 100 + ep)
        for t in range(LENGTH):
            env.step(t % 4)
        time.sleep(0.001)  # interleave the writers' batches
    env.close()


@pytest.mark.stress
def test_four_processes_record_into_one_directory(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write, args=(str(tmp_path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path, verify=True) as reader:
        episodes = list(reader)
        writers = [w["prefix"] for w in reader.writers]
    assert len(writers) == WRITERS and all(w["complete"] for w in reader.writers)
    assert len(episodes) == WRITERS * EPISODES
    assert sorted(ep.seed for ep in episodes) == sorted(
        w * 100 + e for w in range(WRITERS) for e in range(EPISODES))
    for ep in episodes:
        frames, rewards = expected(ep.seed)
        np.testing.assert_array_equal(ep.observations, frames)
        np.testing.assert_array_equal(ep.rewards, rewards)
    # Deterministic order: by writer (manifest creation time, then prefix), then episode number;
    # the same on every open.
    order = [(ep.writer, ep.seed) for ep in episodes]
    assert [w for w, _ in order] == sorted((w for w, _ in order), key=writers.index)
    for w in writers:
        seeds = [s for x, s in order if x == w]
        assert seeds == sorted(seeds)
    with RecordingReader(tmp_path) as again:
        assert [(ep.writer, ep.seed) for ep in again] == order


WRITER_CHILD = textwrap.dedent("""
    import sys, time
    from sample_envs.envs import ImageEnv
    from gym_recorder import RecordingWrapper

    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=30), sys.argv[1],
                           target_batch_bytes=1_000, flush_interval=0.02)
    print("ready", flush=True)
    for ep in range(40):
        env.reset(seed=ep)
        for t in range(30):
            env.step(t % 4)
            time.sleep(0.0005)
    env.close()
""")


@pytest.mark.stress
def test_reader_while_a_writer_runs_sees_consistent_snapshots(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", WRITER_CHILD, str(tmp_path)],
                             stdout=subprocess.PIPE, env=env, bufsize=0)
    assert child.stdout.readline() == b"ready\n"
    reader = RecordingReader(tmp_path, verify=True)
    counts, steps_seen, snapshots = [], [], 0
    try:
        while True:
            running = child.poll() is None
            reader.refresh()
            episodes = list(reader)  # never an error: only committed batches are visible
            snapshots += 1
            total = 0
            for i, ep in enumerate(episodes):
                frames, rewards = expected(ep.seed, 30)
                n = len(ep)
                assert ep.seed == i
                np.testing.assert_array_equal(ep.observations, frames[: n + 1])
                np.testing.assert_array_equal(ep.rewards, rewards[:n])
                # Only the newest episode may be unfinished (end None: the writer goes on).
                assert ep.end == "truncated" or (i == len(episodes) - 1 and ep.end is None)
                total += n
            counts.append(len(episodes))
            steps_seen.append(total)
            if not running:
                break
    finally:
        child.wait(60)
        reader.close()
    assert child.returncode == 0
    assert steps_seen == sorted(steps_seen)  # refresh() only ever shows more
    assert len(set(steps_seen)) >= 3  # new batches appeared while the writer ran
    assert counts[-1] == 40 and steps_seen[-1] == 40 * 30
    print(f"\n{snapshots} snapshots while writing, {len(set(steps_seen))} distinct")
