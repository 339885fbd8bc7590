"""Benchmarks editing a recording in place beside copying its bytes with ``cp -r``.

- delete: 5,000 of 10,000 CartPole episodes (every other one), then restore them;
- merge: ten recordings of ``--merge-mb`` MB each into a new one (hard links);
- compact: a recording of ``--compact-mb`` MB, half its episodes deleted.

Each beside ``cp -r`` of the same bytes (the page cache warm: the copy reads from memory, so
it is a lower bound of a copy's time). The big recordings are 84x84x3 uint8 frames of random
bytes, 200 steps an episode; the ten merge sources are one recording and nine clones of it
under other writer prefixes (hard-linked .bin, rewritten JSON), which is what a merge sees.

Run from the repository root::

    python benchmarks/bench_edit.py                     # 10 x 200 MB, 500 MB: about a minute
    python benchmarks/bench_edit.py --merge-mb 1000 --compact-mb 1000   # the issue's sizes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gym_recorder import RecordingReader, RecordingWrapper, edit
from gym_recorder.edit.compact import compact
from gym_recorder.edit.copies import merge
from gym_recorder.format.fileio import crc32

FRAME = (84, 84, 3)
EPISODE = 200


class Frames(gym.Env):
    """84x84x3 uint8 observations of random bytes (from a pool), episodes of 200 steps."""

    observation_space = spaces.Box(0, 255, FRAME, np.uint8)
    action_space = spaces.Discrete(4)

    def __init__(self) -> None:
        self._pool = np.random.default_rng(0).integers(0, 256, (64, *FRAME), dtype=np.uint8)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._pool[0], {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._t += 1
        return self._pool[self._t % 64], 1.0, self._t >= EPISODE, False, {}


def _bytes(d: str) -> int:
    return sum(e.stat().st_size for e in os.scandir(d) if e.is_file())


def _cp(src: str, dst: str) -> float:
    t = time.perf_counter()
    subprocess.run(["cp", "-r", src, dst], check=True)
    return time.perf_counter() - t


def record_frames(d: str, megabytes: float, prefix: str) -> None:
    env = RecordingWrapper(Frames(), d, file_prefix=prefix)
    steps = int(megabytes * 1e6 / np.prod(FRAME))
    env.reset(seed=0)
    for t in range(steps):
        _, _, term, _, _ = env.step(0)
        if term and t + 1 < steps:
            env.reset()
    env.close()


def clone(src: str, prefix: str, new: str, dst: str) -> None:
    """A copy of a one-writer recording under another prefix: .bin hard-linked, JSON
    rewritten (names and checksums)."""
    os.mkdir(dst)
    manifest = json.load(open(os.path.join(src, prefix + ".manifest.json")))
    for b in manifest["batches"]:
        os.link(os.path.join(src, b["bin"]), os.path.join(dst, b["bin"].replace(prefix, new)))
        data = open(os.path.join(src, b["fn"]), "rb").read().replace(prefix.encode(),
                                                                     new.encode())
        b["fn"], b["bin"] = b["fn"].replace(prefix, new), b["bin"].replace(prefix, new)
        open(os.path.join(dst, b["fn"]), "wb").write(data)
        b["json_size"], b["json_crc32"] = len(data), crc32(data)
    manifest["prefix"] = new
    json.dump(manifest, open(os.path.join(dst, new + ".manifest.json"), "w"))


def bench_delete(root: str, episodes: int) -> list[tuple[str, float, str]]:
    d = os.path.join(root, "cartpole")
    env = RecordingWrapper(gym.make("CartPole-v1"), d)
    env.reset(seed=0)
    env.action_space.seed(0)
    done = 0
    while done < episodes:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            done += 1
            if done < episodes:
                env.reset()
    env.close()
    size = _bytes(d)
    t = time.perf_counter()
    result = edit.delete(d, list(range(0, episodes, 2)))
    t_delete = time.perf_counter() - t
    assert result.shown == episodes - episodes // 2
    t = time.perf_counter()
    with RecordingReader(d) as reader:
        n = len(reader)
    t_open = time.perf_counter() - t
    assert n == episodes - episodes // 2
    t = time.perf_counter()
    edit.restore(d, all=True)
    t_restore = time.perf_counter() - t
    t_cp = _cp(d, d + "-copy")
    what = f"{episodes:,} CartPole episodes, {size / 1e6:.0f} MB"
    return [(f"delete {episodes // 2:,} of {what}", t_delete, ""),
            ("open a reader with them deleted", t_open, ""),
            ("restore --all", t_restore, ""),
            (f"cp -r of the recording ({size / 1e6:.0f} MB)", t_cp, "")]


def bench_merge(root: str, megabytes: float, count: int) -> list[tuple[str, float, str]]:
    base = os.path.join(root, "m0")
    record_frames(base, megabytes, "w0")
    sources = [base]
    for k in range(1, count):
        sources.append(os.path.join(root, f"m{k}"))
        clone(base, "w0", f"w{k}", sources[-1])
    size = sum(_bytes(s) for s in sources)
    dest = os.path.join(root, "merged")
    t = time.perf_counter()
    result = merge(sources, dest)
    t_merge = time.perf_counter() - t
    os.mkdir(os.path.join(root, "copied"))
    t = time.perf_counter()
    subprocess.run(["cp", "-r", *sources, os.path.join(root, "copied")], check=True)
    t_cp = time.perf_counter() - t
    shutil.rmtree(os.path.join(root, "copied"))
    return [(f"merge {count} recordings of {megabytes:g} MB ({size / 1e6:,.0f} MB, "
             f"{result.linked} files linked)", t_merge, ""),
            (f"cp -r of the {count} recordings", t_cp, "")]


def bench_compact(root: str, megabytes: float) -> list[tuple[str, float, str]]:
    d = os.path.join(root, "big")
    record_frames(d, megabytes, "big")
    with RecordingReader(d) as reader:
        n = len(reader)
    edit.delete(d, list(range(0, n, 2)))
    size = _bytes(d)
    t_cp = _cp(d, d + "-copy")
    shutil.rmtree(d + "-copy")
    t = time.perf_counter()
    result = compact(d, grace=0)
    t_compact = time.perf_counter() - t
    return [(f"compact {size / 1e6:,.0f} MB, {n // 2 + n % 2:,} of {n:,} episodes deleted "
             f"(wrote {result.written / 1e6:,.0f} MB, freed {result.freed / 1e6:,.0f} MB)",
             t_compact, ""),
            (f"cp -r of the recording ({size / 1e6:,.0f} MB)", t_cp, "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--merge-mb", type=float, default=200)
    parser.add_argument("--merge-count", type=int, default=10)
    parser.add_argument("--compact-mb", type=float, default=500)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-edit-", dir=args.dir)
    try:
        rows = bench_delete(root, args.episodes)
        rows += bench_merge(root, args.merge_mb, args.merge_count)
        rows += bench_compact(root, args.compact_mb)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    for name, seconds, _ in rows:
        print(f"{name:<{width}}  {seconds * 1000:>10,.1f} ms")


if __name__ == "__main__":
    main()
