"""Reading benchmarks: open + fetch, random fetches, iterating every episode, and a whole-recording
column.

Every file is read once before timing, so that both sides read from the page cache; the reader
and ``np.fromfile`` alternate within each repeat. Throughput ratios compare bytes per second on the
same recording: the reader's (bytes of the arrays it hands out) against ``np.fromfile`` of every
``.bin`` file of the recording. Iterating is also timed against the seed's way of reading
(:func:`read_all_seed`: each batch's JSON parsed, each array it names loaded with
``np.fromfile`` at its offset, as the design card says any array can be).
"""

from __future__ import annotations

import gc
import json
import os
import random
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.read.batchcache import BATCH_CACHE_BYTES

from harness import MIB, PRIME_FACTOR, SEED, median, prime_memory, touch, touch_tree


def record(directory: str, make_env: Callable[[], gym.Env], episodes: int) -> int:
    """Records ``episodes`` episodes of random actions into ``directory``; returns steps."""
    env = RecordingWrapper(make_env(), directory)
    rng = np.random.default_rng(SEED)
    n_actions = int(env.action_space.n)
    steps = 0
    for e in range(episodes):
        env.reset(seed=SEED + e)
        for a in rng.integers(0, n_actions, 10_000).tolist():
            _, _, terminated, truncated, _ = env.step(a)
            steps += 1
            if terminated or truncated:
                break
    env.close()
    return steps


def bin_files(directory: str) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".bin"))


def read_all_reader(directory: str) -> int:
    """Iterates every episode, touching every array; returns the bytes touched."""
    touched = 0
    with RecordingReader(directory) as reader:
        for ep in reader:
            touched += touch_tree(ep.observations) + touch_tree(ep.actions)
            touched += touch_tree(ep.rewards) + touch_tree(ep.terminations)
            touched += touch_tree(ep.truncations)
    return touched


def read_column(directory: str) -> np.ndarray:
    """All observations of all episodes as one array, the way a user gets it from the reader."""
    with RecordingReader(directory) as reader:
        column: np.ndarray = reader.column("observations")
        return column


def read_all_seed(directory: str) -> int:
    """The seed's reader: every batch JSON (in each manifest's order) parsed with ``json.load``,
    and every array of every entry's observations, actions, rewards, terminations and
    truncations loaded with ``np.fromfile`` at the offset the JSON names, touching every byte;
    returns the bytes touched. (No checks, no infos: a lower bound on what reading costs this
    way.)"""
    touched = 0
    names = sorted(n for n in os.listdir(directory) if n.endswith(".manifest.json")
                   and not n.startswith("_"))
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            manifest = json.load(f)
        for batch in manifest["batches"]:
            with open(os.path.join(directory, batch["fn"]), "rb") as f:
                doc = json.load(f)
            for entry in doc["episodes"]:
                for key in ("observations", "actions", "rewards", "terminations", "truncations"):
                    touched += _load_arrays(directory, entry[key])
    return touched


def _load_arrays(directory: str, obj: Any) -> int:
    """np.fromfile of every array reference in a JSON value (dicts and lists walked)."""
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            dtype = np.dtype(obj["dtype"])
            count = obj["size"] // dtype.itemsize if dtype.itemsize else 0
            a = np.fromfile(os.path.join(directory, obj["npyfile"]), dtype=dtype, count=count,
                            offset=obj["npyoff"]).reshape(obj["shape"])
            return touch_tree(a)
        return sum(_load_arrays(directory, v) for v in obj.values())
    if isinstance(obj, list):
        return sum(_load_arrays(directory, v) for v in obj)
    return 0


def read_all_fromfile(paths: list[str]) -> int:
    """np.fromfile of every .bin file, touching every byte; returns the bytes touched."""
    touched = 0
    for p in paths:
        touched += touch_tree(np.fromfile(p, dtype=np.uint8))
    return touched


def _timed(fn: Callable[[], Any], prime_bytes: int) -> float:
    gc.collect()
    if prime_bytes:
        prime_memory(prime_bytes)
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e9


def bench_read_throughput(directory: str, repeats: int, prime: bool) -> dict:
    """Iterating every episode and building the observation column, against np.fromfile."""
    paths = bin_files(directory)
    bin_bytes = sum(os.path.getsize(p) for p in paths)
    read_all_fromfile(paths)  # into the page cache (and warm both code paths)
    touched = read_all_reader(directory)
    column_bytes = read_column(directory).nbytes
    prime_bytes = int(bin_bytes * PRIME_FACTOR) + 16 * MIB if prime else 0
    seed_touched = read_all_seed(directory)
    times: dict[str, list[float]] = {"reader": [], "column": [], "fromfile": [], "seed": []}
    jobs = {"reader": lambda: read_all_reader(directory),
            "column": lambda: touch(read_column(directory)),
            "fromfile": lambda: read_all_fromfile(paths),
            "seed": lambda: read_all_seed(directory)}
    for r in range(repeats):
        order = list(jobs)
        if r % 2:
            order.reverse()
        for name in order:
            times[name].append(_timed(jobs[name], prime_bytes))
    # Throughput ratios on the same recording, repeat by repeat.
    ratios = [b / a for a, b in zip(times["reader"], times["fromfile"])]
    col_ratios = [(column_bytes / c) / (bin_bytes / b)
                  for c, b in zip(times["column"], times["fromfile"])]
    # The seed's reader against ours, repeat by repeat (> 1: ours is faster).
    seed_ratios = [s / a for a, s in zip(times["reader"], times["seed"])]
    with RecordingReader(directory) as reader:
        episodes = len(reader)
    return {"episodes": episodes, "bin_bytes": bin_bytes, "touched_bytes": touched,
            "column_bytes": column_bytes,
            "reader_gb_s": bin_bytes / median(times["reader"]) / 1e9,
            "column_gb_s": column_bytes / median(times["column"]) / 1e9,
            "fromfile_gb_s": bin_bytes / median(times["fromfile"]) / 1e9,
            "seed_gb_s": bin_bytes / median(times["seed"]) / 1e9,
            "seed_touched_bytes": seed_touched,
            "ratio": median(ratios), "column_ratio": median(col_ratios),
            "vs_seed": median(seed_ratios), "vs_seed_min": min(seed_ratios),
            "us_per_episode": median(times["reader"]) / episodes * 1e6,
            "raw_s": times}


def bench_open_fetch(directory: str, repeats: int) -> dict:
    """A fresh reader opens the recording and fetches one random episode, each repeat."""
    with RecordingReader(directory) as reader:
        count = len(reader)
    read_all_reader(directory)  # page cache
    rng = random.Random(SEED)
    times = []
    for _ in range(repeats):
        index = rng.randrange(count)
        gc.collect()
        t0 = time.perf_counter_ns()
        reader = RecordingReader(directory)
        ep = reader[index]
        touch_tree(ep.observations)
        t1 = time.perf_counter_ns()
        reader.close()
        times.append((t1 - t0) / 1e6)
    return {"episodes": count, "ms": median(times), "max_ms": max(times), "raw_ms": times}


def bench_random_access(directory: str, repeats: int, fetches: int) -> dict:
    """``reader[i]`` for random ``i`` (a training script indexing episodes), one open reader.

    The baseline, measured alternately in the same run, is a reader that keeps only the few
    batches needed to read in order (``cache_bytes=0``), which is what every reader did before
    the batch cache grew for random reads.
    """
    with RecordingReader(directory) as reader:
        count = len(reader)
        batches = sum(1 for _ in reader.batches())
    rng = random.Random(SEED)
    indices = [rng.randrange(count) for _ in range(fetches)]

    def run(cache_bytes: int) -> float:
        with RecordingReader(directory, cache_bytes=cache_bytes) as reader:
            for i in indices[:8]:  # open and first parses, outside the timing of the rest
                touch_tree(reader[i].observations)
            gc.collect()
            t0 = time.perf_counter_ns()
            for i in indices:
                touch_tree(reader[i].observations)
            return (time.perf_counter_ns() - t0) / 1e3 / len(indices)

    times: dict[str, list[float]] = {"cached": [], "four_batches": []}
    for r in range(repeats):
        order = [("cached", None), ("four_batches", 0)]
        if r % 2:
            order.reverse()
        for name, cache_bytes in order:
            times[name].append(run(BATCH_CACHE_BYTES if cache_bytes is None else cache_bytes))
    ratios = [b / a for a, b in zip(times["cached"], times["four_batches"])]
    return {"episodes": count, "batches": batches, "fetches": fetches,
            "us_per_fetch": median(times["cached"]),
            "baseline_us_per_fetch": median(times["four_batches"]),
            "speedup": median(ratios), "raw_us": times}
