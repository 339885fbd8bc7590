"""SIGKILL at random moments: what was committed reads back intact, and little is lost.

A child process records a deterministic env (the parent regenerates every episode from its seed)
and prints one line per step it has taken; the parent kills it with SIGKILL at a random moment.
The child's writes are slowed down a little so that many kills land in the middle of writing a
batch; the child's writer thread says on stderr when it begins and ends a batch, so the parent
can count those kills.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.integrity import repair, verify
from gym_recorder.record import batchfiles as batchfiles_module
from gym_recorder.record.batchfiles import MAX_COALESCED_BATCHES
from gym_recorder.record.writer import MAX_PENDING_BATCHES
from sample_envs.envs import ImageEnv
from conftest import image_episode

ROOT = Path(__file__).resolve().parent.parent
TEMP_RE = re.compile(r"tmp[a-z0-9_]{8}")

CHILD = textwrap.dedent("""
    import os, sys, time
    import gym_recorder.record.batchfiles as bf
    from gym_recorder import RecordingWrapper
    from sample_envs.envs import ImageEnv

    directory, size, length, target, interval, write_delay, step_sleep = sys.argv[1:]
    size, length, target = int(size), int(length), int(target)
    interval = None if interval == "none" else float(interval)
    write_delay, step_sleep = float(write_delay), float(step_sleep)

    import gym_recorder.record.writeback as wb
    write_buffers, write_batch = wb.write_buffers, bf.BatchFiles.write_batch

    def slow_write_buffers(fd, buffers, path):  # slower writes: kills land mid-batch more often
        if not (write_delay and path.endswith(".bin")):
            return write_buffers(fd, buffers, path)
        for data in buffers:
            write_buffers(fd, [data], path)
            time.sleep(write_delay)

    def marked_write_batch(files, first, batch):
        os.write(2, b"B%d\\n" % first)
        write_batch(files, first, batch)
        os.write(2, b"E%d\\n" % first)

    wb.write_buffers = slow_write_buffers
    bf.BatchFiles.write_batch = marked_write_batch
    env = RecordingWrapper(ImageEnv(height=size, width=size, episode_length=length), directory,
                           target_batch_bytes=target, flush_interval=interval)
    out = sys.stdout
    out.write("ready\\n")
    out.flush()
    for ep in range(10**9):
        env.reset(seed=ep)
        for t in range(length):
            env.step(t % 4)
            out.write(f"{ep} {t + 1} {time.monotonic()!r}\\n")
            out.flush()
            if step_sleep:
                time.sleep(step_sleep)
""")

_expected_cache: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}


def expected(seed: int, size: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    key = (seed, size, length)
    if key not in _expected_cache:
        frames, _, rewards = image_episode(seed, size, length)
        _expected_cache[key] = (frames, rewards)
    return _expected_cache[key]


def kill_trial(directory: Path, *, size: int, length: int, target: int, interval: float | None,
               write_delay: float, step_sleep: float, kill_after: float) -> dict:
    """Runs the child, SIGKILLs it after ``kill_after`` seconds of recording, checks the files."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(size), str(length), str(target),
         "none" if interval is None else str(interval), str(write_delay), str(step_sleep)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        bufsize=0)  # unbuffered: readline() must not swallow lines that communicate() reads
    assert child.stdout.readline() == b"ready\n", child.stderr.read().decode()
    time.sleep(kill_after)
    killed_at = time.monotonic()
    child.send_signal(signal.SIGKILL)
    out, err = child.communicate()
    assert child.returncode == -signal.SIGKILL
    lines = [line.split() for line in out.decode().splitlines()]
    times = [float(line[2]) for line in lines]
    printed = len(lines)  # steps the child finished (it may have taken one more, unprinted)
    marks = err.decode().split()
    assert all(re.fullmatch(r"[BE][0-9]+", m) for m in marks), err.decode()
    mid_write = bool(marks) and marks[-1].startswith("B")

    # The directory reads back without error, and verify() finds nothing wrong.
    assert verify(directory) == []
    committed = 0
    cut = False
    with RecordingReader(directory, verify=True) as reader:
        episodes = list(reader)
    for i, ep in enumerate(episodes):
        frames, rewards = expected(ep.seed, size, length)
        n = len(ep)
        assert ep.seed == i
        np.testing.assert_array_equal(ep.observations, frames[: n + 1])
        np.testing.assert_array_equal(ep.actions, [t % 4 for t in range(n)])
        np.testing.assert_array_equal(ep.rewards, rewards[:n])
        if n < length:  # an episode the crash cut: only the last one, with end None
            assert i == len(episodes) - 1 and ep.end is None
            cut = True
        else:
            assert ep.end == "truncated"
        committed += n
    assert committed <= printed + 1
    lost = max(printed - committed, 0)
    # How long before the kill the first lost step was taken.
    lost_seconds = killed_at - times[committed] if lost else 0.0
    leftovers = [n for n in os.listdir(directory) if TEMP_RE.fullmatch(n)]

    # repair() tidies leftovers away and may take back complete batches never committed.
    repair(directory)
    assert verify(directory) == []
    assert not [n for n in os.listdir(directory) if TEMP_RE.fullmatch(n)]
    with RecordingReader(directory, verify=True) as reader:
        repaired = sum(len(ep) for ep in reader)
    assert committed <= repaired <= printed + 1
    return {"printed": printed, "committed": committed, "lost": lost, "mid_write": mid_write,
            "cut": cut, "lost_seconds": lost_seconds, "leftovers": len(leftovers)}


def run_trials(tmp_path: Path, trials: int, seed: int, **kwargs) -> list[dict]:
    rng = random.Random(seed)
    delays = [rng.uniform(0.02, 0.5) for _ in range(trials)]
    # Two children at a time: CI has two cores, and each child mostly waits for its writes.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(kill_trial, tmp_path / f"trial{i}", kill_after=d, **kwargs)
                   for i, d in enumerate(delays)]
        return [f.result() for f in futures]


@pytest.mark.stress
def test_sigkill_while_batches_fill_up(tmp_path):
    size, length, target = 64, 40, 200_000
    results = run_trials(tmp_path, 24, seed=3, size=size, length=length, target=target,
                         interval=None, write_delay=0.01, step_sleep=0.0)
    frame = size * size * 3
    # Documented bound: the batch being filled, the batch being written, MAX_PENDING_BATCHES
    # queued batches and the written batches waiting for their commit (at most
    # MAX_COALESCED_BATCHES, and only MIN_COMMIT_INTERVAL), each of about target_batch_bytes.
    bound = (MAX_PENDING_BATCHES + 2 + MAX_COALESCED_BATCHES) * (target // frame + 1)
    lost = [r["lost"] for r in results]
    print(f"\nsize-bound: {len(results)} kills, {sum(r['mid_write'] for r in results)} in the "
          f"middle of a batch write, {sum(r['cut'] for r in results)} cut an episode, "
          f"{sum(r['leftovers'] > 0 for r in results)} left temp files; steps lost max "
          f"{max(lost)} (bound {bound}), mean {sum(lost) / len(lost):.1f}; steps committed "
          f"min {min(r['committed'] for r in results)}")
    assert max(lost) <= bound
    assert sum(r["mid_write"] for r in results) >= 3  # the interesting case really happened
    assert sum(r["cut"] for r in results) >= 3
    assert sum(r["committed"] > 0 for r in results) >= len(results) // 2


@pytest.mark.stress
def test_sigkill_with_a_slow_env_loses_at_most_flush_interval(tmp_path):
    interval, step_sleep = 0.1, 0.004
    results = run_trials(tmp_path, 8, seed=4, size=16, length=60, target=50_000_000,
                         interval=interval, write_delay=0.0, step_sleep=step_sleep)
    worst = max(r["lost_seconds"] for r in results)
    print(f"\ntime-bound: {len(results)} kills, steps lost max {max(r['lost'] for r in results)}, "
          f"oldest lost step {worst:.3f} s before the kill (flush_interval {interval} s)")
    # Nothing older than flush_interval (plus the time to write one small batch) is lost.
    assert worst <= interval + 0.5
    assert all(r["committed"] > 0 for r in results if r["printed"] > 2 * interval / step_sleep)


def test_reader_ignores_uncommitted_files_and_reads_a_cut_episode(tmp_path):
    """Crafted leftovers of a crash: temp files, an uncommitted batch, a cut episode."""
    import json

    from gym_recorder import RecordingWrapper

    env = RecordingWrapper(ImageEnv(height=8, width=8, episode_length=50), tmp_path,
                           target_batch_bytes=2_000, flush_interval=None)
    env.reset(seed=0)
    for t in range(50):
        env.step(t % 4)
    env.reset(seed=1)
    for t in range(25):
        env.step(t % 4)
    env.flush()  # episode 1 goes on (no close: as if the process died here): its last
    # committed part says continues=True
    manifest = next(n for n in os.listdir(tmp_path) if n.endswith(".manifest.json"))
    doc = json.loads((tmp_path / manifest).read_bytes())
    last = doc["batches"][-1]
    entry = json.loads((tmp_path / last["fn"]).read_bytes())["episodes"][-1]
    assert entry["continues"] is True and entry["end"] is None
    (tmp_path / "tmpk2x9_q7a").write_bytes(b"{\"batches\": [")  # a half-written manifest
    stem = f"{doc['prefix']}.ep{last['first'] + last['len'] + 7:09d}"
    (tmp_path / f"{stem}.json").write_bytes(b'{"format": "gym_recorder", "episodes": [')
    (tmp_path / f"{stem}.bin").write_bytes(b"\x01" * 100)
    with RecordingReader(tmp_path, verify=True) as reader:
        assert [len(ep) for ep in reader] == [50, 25]
        ep = reader[1]
        assert ep.end is None
        frames, rewards = expected(1, 8, 50)
        np.testing.assert_array_equal(ep.observations, frames[:26])
        np.testing.assert_array_equal(ep.rewards, rewards[:25])
    assert verify(tmp_path) == []
    env.close()


# -- exports and imports killed while writing ------------------------------------------------

# Runs one export/import in a child that SIGKILLs itself at its first rename (its temporary
# output is then there, half-written), as a user's kill at a random moment would.
KILLED_AT_RENAME = """
import os, signal, sys
real = os.rename
def rename(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
from gym_recorder.cli import main
main(sys.argv[1:])
"""


@pytest.mark.stress
def test_a_killed_export_or_import_leaves_nothing_after_the_next_run(tmp_path, monkeypatch):
    # Each killed run left its hidden temporary output (.OUT.tmpXXXXXXXX beside OUT, or
    # .gym_recorder.tmpXXXXXXXX in Minari's root), which no later run removed.
    from needs import need_module
    from gym_recorder.cli import main

    need_module("pyarrow", 'pip install ".[arrow]"')
    need_module("minari", 'pip install ".[minari]"')
    minari_root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    rec = tmp_path / "rec"
    env = RecordingWrapper(ImageEnv(height=4, width=4, episode_length=5), rec)
    for ep in range(3):
        env.reset(seed=ep)
        for t in range(5):
            env.step(t % 4)
    env.close()
    assert main(["export", str(rec), "--format", "minari", "--dataset-id", "ns/src-v0", "-q"]) == 0
    out = tmp_path / "out"
    out.mkdir()
    runs = [(["export", str(rec), "--format", "parquet", "-o", str(out / "pq"), "-q"], out),
            (["export", str(rec), "--format", "minari", "--dataset-id", "ns/x-v0", "-q"],
             minari_root),
            (["import-minari", "ns/src-v0", str(out / "back"), "-q"], out)]
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for argv, where in runs:
        before = set(os.listdir(where))
        child = subprocess.run([sys.executable, "-c", KILLED_AT_RENAME, *argv], env=child_env,
                               capture_output=True, timeout=120)
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()
        left = set(os.listdir(where)) - before
        assert left and all(n.startswith(".") and ".tmp-" in n for n in left), left
        assert main(argv) == 0  # the re-run succeeds and removes the killed run's temp
        assert not [n for n in os.listdir(where) if ".tmp" in n], os.listdir(where)


def test_slow_manifest_rewrites_never_delay_a_commit_past_half_the_flush_interval(
        tmp_path, monkeypatch):
    """The writer spaces manifest rewrites by 20x their cost; on a slow disk (a 60 ms rewrite)
    that was over a second, so written batches waited unlisted longer than the flush interval,
    and a process killed then lost them (a Ray worker dying with flush_interval=0.01 kept 1 of
    5 steps). The wait is capped at half the flush interval."""
    import gymnasium as gym

    monkeypatch.setattr(batchfiles_module, "COMMIT_COST_FACTOR", 10 ** 6)  # (rewrites look slow)
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, flush_interval=0.2)
    env.reset(seed=0)
    for t in range(5):
        env.step(0)
        time.sleep(0.25)  # past the flush interval: each step is committed by the next
    time.sleep(0.3)
    with RecordingReader(tmp_path) as reader:  # (the writer is still running: nothing closed)
        assert len(reader[0]) >= 4, len(reader[0])
    env.close()
