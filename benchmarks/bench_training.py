"""Benchmarks building flat transitions: ``transitions(reader)`` against ``np.fromfile``.

One process. A CartPole-v1 recording of ``--steps`` steps (1,000,000 by default; random actions,
so about 45,000 episodes of ~22 steps) is written once into a temporary directory. Then, with the
page cache warm, repeats alternate between:

- baseline: ``np.fromfile`` of every ``.bin`` file of the recording (the same bytes the arrays
  live in, read with numpy alone, nothing parsed);
- ``transitions(RecordingReader(dir))``: open the recording and build ``obs``, ``next_obs``,
  ``action``, ``reward``, ``terminated``, ``truncated``, ``episode`` and ``step`` for every step
  (through the batches' indexes: no batch JSON parsed);
- for reference, the same through the batch JSON (what a recording without indexes costs),
  ``json.loads`` of every batch JSON file (for short episodes it is larger than the arrays
  themselves), and copying the eight output arrays once they exist (``transitions`` writes
  more than twice the bytes ``np.fromfile`` reads: ``obs`` and ``next_obs`` repeat the
  observations, ``episode`` and ``step`` are 16 bytes a step).

Reported: the median of each, the ratio of ``transitions`` to ``np.fromfile``, and ``ok`` when
it is at most 2 (the target of issue 13), else ``MISS``.

Then the map-style ``TransitionDataset`` in shuffled order (``--items`` random items, as a
``DataLoader(shuffle=True)`` worker asks for them): µs per item on a fresh dataset (its first
pass decodes each batch it meets once) and on a second pass, against the floor of a map-style
dataset, taking the same rows out of the in-memory ``transitions`` arrays one item at a time;
on the CartPole recording (short episodes, each held whole by one batch) and on one of
``--image-episodes`` episodes of 1,000 steps of 84x84x3 frames (each spread over ~20 batches,
items read by rows).

Run from the repository root::

    python benchmarks/bench_training.py                # about a minute (recording ~30 s)
    python benchmarks/bench_training.py --steps 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # benchmark the checkout, not whatever version is installed

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import gym_recorder.read.bulk as reader_module  # noqa: E402
from gym_recorder import RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.training.datasets import TransitionDataset  # noqa: E402
from gym_recorder.training.transitions import transitions  # noqa: E402

TARGET_RATIO = 2.0


def make_recording(directory: str, steps: int, seed: int = 0) -> None:
    env = RecordingWrapper(gym.make("CartPole-v1"), directory)
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=steps)
    env.reset(seed=seed)
    for a in actions.tolist():
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    env.close()


def read_fromfile(directory: str) -> int:
    total = 0
    for name in sorted(os.listdir(directory)):
        if name.endswith(".bin"):
            total += np.fromfile(os.path.join(directory, name), dtype=np.uint8).nbytes
    return total


def parse_json(directory: str) -> int:
    """json.loads of every batch file: what any reader of the format must at least do."""
    total = 0
    for name in sorted(os.listdir(directory)):
        if ".ep" in name and name.endswith(".json"):
            with open(os.path.join(directory, name), "rb") as f:
                total += len(json.loads(f.read())["episodes"])
    return total


def build(directory: str) -> int:
    with RecordingReader(directory) as reader:
        t = transitions(reader)
    return len(t)


def build_through_json(directory: str) -> int:
    """``transitions`` as it reads a recording without batch indexes (every batch JSON)."""
    saved = reader_module.read_stacked
    reader_module.read_stacked = lambda *args, **kwargs: None
    try:
        return build(directory)
    finally:
        reader_module.read_stacked = saved


def copy_outputs(directory: str) -> Callable[[], int]:
    """Copying the eight arrays ``transitions`` returns: writing its output, nothing else."""
    with RecordingReader(directory) as reader:
        t = transitions(reader)
    arrays = [t.obs, t.next_obs, t.action, t.reward, t.terminated, t.truncated, t.episode,
              t.step]
    return lambda: sum(a.copy().nbytes for a in arrays)


def make_image_recording(directory: str, episodes: int) -> None:
    """Episodes of 1,000 steps of 84x84x3 uint8 frames: each spread over ~20 batches."""
    import sample_envs  # noqa: F401  (registers sample_envs/Image-v0)

    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=84, width=84,
                                    episode_length=1000), directory)
    env.action_space.seed(0)
    env.reset(seed=0)
    done = 0
    while done < episodes:
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            done += 1
            env.reset()
    env.close()


def shuffled_items(directory: str, items: int, repeats: int, label: str = "") -> None:
    """TransitionDataset items in random order against rows of in-memory arrays."""
    with RecordingReader(directory) as reader:
        t = transitions(reader)
    arrays = {k: getattr(t, k) for k in ("obs", "next_obs", "action", "reward", "terminated",
                                         "truncated", "episode", "step")}
    order = np.random.default_rng(1).integers(0, len(t), items).tolist()
    first, second, floor = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in order:
            {k: v[i].copy() for k, v in arrays.items()}
        floor.append(time.perf_counter() - t0)
        ds = TransitionDataset(directory)
        for passes in (first, second):
            t0 = time.perf_counter()
            for i in order:
                ds[i]
            passes.append(time.perf_counter() - t0)
        ds.close()
    f, a, b = (statistics.median(x) / items * 1e6 for x in (floor, first, second))
    print(f"TransitionDataset{label}, {items:,} shuffled items: first pass {a:8.1f} us/item, "
          f"second {b:6.1f} us/item; rows of in-memory arrays {f:5.1f} us/item "
          f"(second pass {b / f:.1f}x that)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--items", type=int, default=20_000,
                    help="shuffled TransitionDataset items per pass")
    ap.add_argument("--image-episodes", type=int, default=5,
                    help="episodes of 84x84x3 images (1,000 steps, 21 MB each) for the "
                         "shuffled items of long episodes; 0 to skip")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    tmp = tempfile.mkdtemp(prefix="bench_training.")
    try:
        t0 = time.perf_counter()
        make_recording(tmp, args.steps)
        with RecordingReader(tmp) as reader:
            episodes = len(reader)
        print(f"recorded {args.steps:,} steps, {episodes:,} episodes in "
              f"{time.perf_counter() - t0:.1f} s")
        nbytes = read_fromfile(tmp)
        assert build(tmp) == build_through_json(tmp) == args.steps
        copy = copy_outputs(tmp)
        out_bytes = copy()
        jobs: dict[str, Callable[[], object]] = {
            "fromfile": lambda: read_fromfile(tmp), "transitions": lambda: build(tmp),
            "json_path": lambda: build_through_json(tmp), "json": lambda: parse_json(tmp),
            "copy": copy}
        times: dict[str, list[float]] = {name: [] for name in jobs}
        for r in range(args.repeats):
            for name in (list(jobs) if r % 2 == 0 else list(reversed(jobs))):
                t0 = time.perf_counter()
                jobs[name]()
                times[name].append(time.perf_counter() - t0)
        b, o, p, j, c = (statistics.median(times[name]) for name in jobs)
        ratio = o / b
        print(f"np.fromfile of the .bin files ({nbytes / 1e6:.1f} MB): {b * 1e3:8.1f} ms "
              f"({nbytes / b / 1e9:.2f} GB/s)")
        print(f"transitions(reader), {args.steps:,} steps:       {o * 1e3:8.1f} ms "
              f"({o / args.steps * 1e9:.0f} ns/step; through the batch indexes)")
        print(f"ratio {ratio:.2f} (target <= {TARGET_RATIO:g}): "
              f"{'ok' if ratio <= TARGET_RATIO else 'MISS'}")
        print(f"  the same through the batch JSON: {p * 1e3:8.1f} ms ({p / o:.1f}x); "
              f"json.loads of the batch files alone {j * 1e3:8.1f} ms ({j / b:.1f}x np.fromfile)")
        print(f"  copying the {out_bytes / 1e6:.1f} MB of arrays transitions returns: "
              f"{c * 1e3:8.1f} ms ({c / b:.1f}x np.fromfile)")
        shuffled_items(tmp, args.items, args.repeats)
        if args.image_episodes:
            images = os.path.join(tmp, "images")
            make_image_recording(images, args.image_episodes)
            shuffled_items(images, args.items, args.repeats,
                           f" of {args.image_episodes} x 1,000 steps of 84x84x3")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
