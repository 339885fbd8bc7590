"""Benchmarks RecordingVectorWrapper: per-vector-step overhead on 8 CartPole envs (Sync, NEXT_STEP).

One process, one run. Two identical ``SyncVectorEnv``s of CartPole-v1 (NEXT_STEP autoreset), one
bare and one inside ``RecordingVectorWrapper``, replay the same pre-generated actions from the
same seeds; repeats alternate between them so that drift hits both alike. Each repeat times a block
of vector steps (the stepping loop, which includes the recorder's batch building when a batch
fills up; the recorder stays open across repeats, so its batches are written by its background
thread as in training). Reported: median time per vector step of each, their ratio, the median of
the per-repeat paired ratios, and the final ``close()`` (writes and fsyncs what is buffered).

Run from the repository root::

    python benchmarks/bench_vector.py              # about half a minute
    python benchmarks/bench_vector.py --quick      # a few seconds
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # benchmark the checkout, not whatever version is installed

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from gym_recorder import RecordingReader, RecordingVectorWrapper  # noqa: E402

NUM_ENVS = 8
SEED = 0


def make() -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", num_envs=NUM_ENVS, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP})


def run_block(env: gym.vector.VectorEnv, actions: np.ndarray) -> float:
    """Steps through ``actions`` (one row per vector step); returns seconds per vector step."""
    step = env.step
    t0 = time.perf_counter()
    for a in actions:
        step(a)
    return (time.perf_counter() - t0) / len(actions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21, help="timed blocks per variant")
    parser.add_argument("--steps", type=int, default=3000, help="vector steps per block")
    parser.add_argument("--quick", action="store_true", help="7 repeats of 1000 steps")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.steps = 7, 1000

    rng = np.random.default_rng(SEED)
    blocks = [rng.integers(0, 2, size=(args.steps, NUM_ENVS), dtype=np.int64)
              for _ in range(args.repeats + 1)]
    tmp = tempfile.mkdtemp(prefix="bench_vector_")
    try:
        bare = make()
        rec = RecordingVectorWrapper(make(), os.path.join(tmp, "rec"))
        bare.reset(seed=SEED)
        rec.reset(seed=SEED)
        run_block(bare, blocks[0])  # warm-up, not timed
        run_block(rec, blocks[0])
        times: dict[str, list[float]] = {"bare": [], "recorded": []}
        gc.disable()
        try:
            for k in range(1, args.repeats + 1):
                order = [("bare", bare), ("recorded", rec)]
                if k % 2:
                    order.reverse()
                for name, env in order:
                    times[name].append(run_block(env, blocks[k]))
        finally:
            gc.enable()
        t0 = time.perf_counter()
        rec.close()
        close_s = time.perf_counter() - t0
        bare.close()
        with RecordingReader(os.path.join(tmp, "rec")) as reader:
            episodes = len(reader)
            steps = sum(len(ep) for ep in reader)
            batches = reader.writers[0]["batches"]
        disk = sum(e.stat().st_size for e in os.scandir(os.path.join(tmp, "rec")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    b = statistics.median(times["bare"])
    r = statistics.median(times["recorded"])
    paired = statistics.median(x / y for x, y in zip(times["recorded"], times["bare"]))
    print(f"python {platform.python_version()}, numpy {np.__version__}, gymnasium "
          f"{gym.__version__}, {os.cpu_count()} cpus, {platform.machine()}")
    print(f"CartPole-v1 x {NUM_ENVS}, SyncVectorEnv, NEXT_STEP; {args.repeats} interleaved "
          f"repeats of {args.steps} vector steps (+1 warm-up)")
    print(f"  bare vector env:        {b * 1e6:8.1f} us per vector step (median)")
    print(f"  RecordingVectorWrapper: {r * 1e6:8.1f} us per vector step (median)")
    print(f"  overhead:               {(r - b) * 1e6:8.1f} us per vector step, "
          f"{(r - b) / NUM_ENVS * 1e6:.2f} us per sub-env step")
    print(f"  ratio recorded / bare:  {r / b:8.3f} (ratio of medians), {paired:.3f} (median of "
          "paired ratios)")
    print(f"  close(): {close_s * 1e3:.1f} ms; recorded {episodes} episodes, {steps} steps, "
          f"{batches} batches, {disk / 1e6:.2f} MB on disk")


if __name__ == "__main__":
    main()
