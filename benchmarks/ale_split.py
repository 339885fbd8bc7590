"""Where an ALE step's added time goes: the recorder split into its parts, and what a busy
neighbour process costs the env.

    python benchmarks/ale_split.py                       # ALE/Pong-v5, 2,000 steps, 4 repeats
    python benchmarks/ale_split.py --env ALE/Breakout-v5 --steps 3000 --repeats 5

Part 1, interleaved repeats of the same actions (added µs a step over the bare env, medians):

* ``writer does nothing``: RecordingWrapper whose writer releases each batch unwritten: the
  stepping thread's own work (the frame's copy into its column, the wrapper, ``take()``);
* ``encode, no I/O``: each batch encoded (CRC-32s, JSON) but not written;
* ``recorder``: RecordingWrapper with its defaults.

Part 2: the bare env's step while another *process* on the other core runs a Python loop, copies
5 MB buffers, computes CRC-32s of 5 MB buffers, or writes 5 MB files (what a writer process
would cost the env, against the in-process writer thread of part 1).
Needs ``pip install ale-py`` (it ships the ROMs); no display (SDL_VIDEODRIVER=dummy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from gym_recorder import RecordingWrapper  # noqa: E402
from gym_recorder.record.writeback import Gathered  # noqa: E402

NEIGHBOURS = {
    "python loop": "x = 0\nwhile True: x += 1",
    "copy 5 MB": ("import numpy as np\na = np.ones(5_000_000, np.uint8); b = np.empty_like(a)\n"
                  "while True: np.copyto(b, a)"),
    "CRC-32 5 MB": ("import numpy as np\nfrom gym_recorder.format.fileio import crc32\n"
                    "a = np.ones(5_000_000, np.uint8)\nwhile True: crc32(a)"),
    "write 5 MB files": (
        "import os, sys, numpy as np\na = np.ones(5_000_000, np.uint8); i = 0\n"
        "while True:\n"
        "    p = os.path.join(sys.argv[1], f'n{i % 20}.bin'); i += 1\n"
        "    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC); os.write(fd, a)\n"
        "    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)"),
}


def _make(env_id: str) -> gym.Env:
    import ale_py
    gym.register_envs(ale_py)
    return gym.make(env_id)


def _steps(env: gym.Env, actions: list[int]) -> float:
    """µs a step over the actions (resetting at each episode's end)."""
    env.reset(seed=0)
    t0 = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - t0) / len(actions) * 1e6


def _variant(env_id: str, variant: str, actions: list[int], workdir: str) -> float:
    env: Any = _make(env_id)
    directory = tempfile.mkdtemp(dir=workdir)
    try:
        if variant != "bare":
            env = RecordingWrapper(env, directory)
            files = env._session.writer.files  # (internals: what the writer thread does)
            if variant == "writer does nothing":
                files.write_batch = lambda first, batch: batch.release()
            elif variant == "encode, no I/O":
                encoder = files._encoder

                def encode_only(first: int, batch: Any) -> None:
                    encoder.encode(first, batch, Gathered(), "x.bin", "x.json")
                    batch.release()
                files.write_batch = encode_only
        return _steps(env, actions)
    finally:
        env.close()
        shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    env = _make(args.env)
    actions = np.random.default_rng(0).integers(0, env.action_space.n, args.steps).tolist()
    env.close()
    with tempfile.TemporaryDirectory() as workdir:
        variants = ["bare", "writer does nothing", "encode, no I/O", "recorder"]
        times: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(args.repeats):
            for v in variants[r % 4:] + variants[:r % 4]:
                times[v].append(_variant(args.env, v, actions, workdir))
        bare = times["bare"]
        print(f"{args.env}: bare step {median(bare):.1f} us ({args.steps} steps, "
              f"{args.repeats} interleaved repeats)")
        for v in variants[1:]:
            added = [x - b for x, b in zip(times[v], bare)]
            print(f"  {v:<22} added {median(added):+7.1f} us  (min {min(added):+.1f}, "
                  f"max {max(added):+.1f})")
        print(f"{args.env} bare, beside a busy neighbour process:")
        near: dict[str, list[float]] = {"none": [], **{k: [] for k in NEIGHBOURS}}
        for _ in range(max(1, args.repeats - 1)):
            for name in near:
                proc = None if name == "none" else subprocess.Popen(
                    [sys.executable, "-c", NEIGHBOURS[name], workdir])
                time.sleep(0.3)
                try:
                    near[name].append(_steps(_make(args.env), actions))
                finally:
                    if proc is not None:
                        proc.kill()
                        proc.wait()
        alone = median(near["none"])
        for name, values in near.items():
            print(f"  {name:<22} step {median(values):7.1f} us  ({median(values) - alone:+.1f})")


if __name__ == "__main__":
    main()
