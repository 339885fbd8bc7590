"""Bounded memory: a 20,000-step episode of 64x64x3 frames costs the recorder a few MB."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gym_recorder import RecordingReader
from sample_envs.envs import ImageEnv

ROOT = Path(__file__).resolve().parent.parent
STEPS = 20_000
TARGET = 1_000_000
# Peak RSS growth allowed over the same run without recording (the bound).
MAX_GROWTH_BYTES = 64 * 1024 * 1024

CHILD = textwrap.dedent("""
    import resource, sys
    from sample_envs.envs import ImageEnv
    from gym_recorder import RecordingWrapper

    directory, steps, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    env = ImageEnv(height=64, width=64, episode_length=steps)
    if directory != "-":
        env = RecordingWrapper(env, directory, target_batch_bytes=target)
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()

    before = rss()
    env.reset(seed=7)
    peak_in_loop = 0
    for t in range(steps):
        env.step(t % 4)
        if t % 500 == 0:
            peak_in_loop = max(peak_in_loop, rss())
    env.close()
    # Peak over the whole process (Linux: kilobytes), and the RSS sampled while stepping, minus
    # the RSS before the first step (imports can peak higher than the loop).
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, peak_in_loop - before)
""")


def peak_rss(directory: str) -> tuple[int, int]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, directory, str(STEPS), str(TARGET)],
                         env=env, capture_output=True, check=True, text=True).stdout
    peak, loop_growth = out.split()[-2:]
    return int(peak), int(loop_growth)


@pytest.mark.stress
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in kilobytes on Linux only")
def test_long_image_episode_in_bounded_memory(tmp_path):
    baseline, base_loop = peak_rss("-")
    recorded, rec_loop = peak_rss(str(tmp_path))
    growth = recorded - baseline
    print(f"\npeak RSS {recorded / 2**20:.1f} MiB recording vs {baseline / 2**20:.1f} MiB not: "
          f"growth {growth / 2**20:.1f} MiB; RSS growth while stepping {rec_loop / 2**20:.1f} "
          f"MiB vs {base_loop / 2**20:.1f} MiB, for {STEPS} steps "
          f"({STEPS * 64 * 64 * 3 / 2**20:.0f} MiB of frames)")
    assert growth < MAX_GROWTH_BYTES
    assert rec_loop - base_loop < MAX_GROWTH_BYTES
    # Read back exactly: the one episode, stitched from its parts, frame by frame.
    with RecordingReader(tmp_path, verify=True) as reader:
        assert len(reader) == 1
        assert reader.writers[0]["batches"] > 100  # written in many parts
        ep = reader[0]
    assert ep.end == "truncated" and len(ep) == STEPS
    env = ImageEnv(height=64, width=64, episode_length=STEPS)
    obs, _ = env.reset(seed=7)
    np.testing.assert_array_equal(ep.observations[0], obs)
    for t in range(STEPS):
        obs, reward, _, truncated, _ = env.step(t % 4)
        if not np.array_equal(ep.observations[t + 1], obs):
            raise AssertionError(f"frame {t + 1} differs")
        assert ep.rewards[t] == reward and ep.actions[t] == t % 4
    assert ep.truncations[-1] and not ep.truncations[:-1].any()
