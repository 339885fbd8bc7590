"""Benchmarks zstd-compressed leaves on real ALE frames: size, recording cost, reading speed.

For each case (raw ALE frames of five games, stacked 4x84x84 frames of two, noise frames) it
records ``--steps`` random-policy steps three ways, interleaved ``--repeats`` times: the bare
env, recorded raw, recorded with ``compression="zstd"``, and prints bytes per 10,000 steps
(measured on ``--steps`` and scaled), the ratio, the added microseconds per step over the bare
env (wall time, and CPU time of the process: the writer thread's work runs on another core
when one is free, and is paid by the step when none is), the writer thread's own CPU time a
step (encoding, compressing and writing batches), decoded read throughput (iterating every episode, and ``column``), and the median latency of one random
frame (``episode_rows(i).rows("observations", k, k + 1)``). Then, on the recorded frames in
memory, the designs compared: delta coding (none / xor) and rows per chunk (1, 4, 8, 16).
Lines end in ``ok`` or ``MISS`` against the targets of issue 34.

Run from the repository root::

    python benchmarks/bench_compress.py                # 2,000 steps a case
    python benchmarks/bench_compress.py --steps 300    # quicker
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from gym_recorder import RecordingReader, RecordingWrapper, Zstd  # noqa: E402
from gym_recorder.format.codecs import decode_rows, encode_rows  # noqa: E402
from gym_recorder.record.batchfiles import BatchFiles  # noqa: E402

GAMES = ("Breakout", "Pong", "MsPacman", "SpaceInvaders", "Seaquest")
STACKED = ("Breakout", "MsPacman")
TARGET_RAW_MEDIAN, TARGET_RAW_MIN, TARGET_STACKED = 300.0, 50.0, 100.0
TARGET_CARRACING = 20.0  # CarRacing-v3's 96x96x3 frames (needs Box2D: gymnasium[box2d])
TARGET_NOISE_OVER = 1.10
TARGET_READ_GBPS, TARGET_FRAME_US = 1.0, 200.0


class Noise(gym.Env):
    """Incompressible 210x160x3 frames."""

    observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return self.np_random.integers(0, 256, (210, 160, 3), np.uint8), {}

    def step(self, action: Any) -> Any:
        return self.np_random.integers(0, 256, (210, 160, 3), np.uint8), 0.0, False, False, {}


def _has_box2d() -> bool:
    try:
        import Box2D  # noqa: F401
    except ImportError:
        print("CarRacing skipped: Box2D is not installed (pip install 'gymnasium[box2d]')")
        return False
    return True


def make(case: str) -> gym.Env:
    import ale_py

    gym.register_envs(ale_py)
    if case == "noise":
        return gym.wrappers.TimeLimit(Noise(), 1000)
    if case == "CarRacing":
        return gym.make("CarRacing-v3", continuous=False)
    if case.endswith("-stacked"):
        env = gym.make(f"ALE/{case.split('-')[0]}-v5", frameskip=1)
        return gym.wrappers.FrameStackObservation(gym.wrappers.AtariPreprocessing(env), 4)
    return gym.make(f"ALE/{case}-v5")


def _cpu() -> float:
    """CPU seconds of this process so far, all threads, user and system."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


# CPU seconds the writer threads spent writing batches (encoding, compressing, writing files),
# and the steps of those batches: the writer's own cost, which load on the machine changes
# little (the wall and process figures move by hundreds of us a step on a busy machine).
_WRITER = [0.0, 0]
_write_batch = BatchFiles.write_batch


def _timed_write_batch(self: BatchFiles, first: int, batch: Any) -> None:
    t0, steps = time.thread_time(), batch.steps
    _write_batch(self, first, batch)
    _WRITER[0] += time.thread_time() - t0
    _WRITER[1] += steps


BatchFiles.write_batch = _timed_write_batch  # type: ignore[method-assign]


def writer_cpu() -> float:
    """Writer-thread CPU microseconds a step since the last call."""
    got = _WRITER[0] / _WRITER[1] * 1e6 if _WRITER[1] else 0.0
    _WRITER[:] = [0.0, 0]
    return got


def run(case: str, steps: int, directory: str | None, compression: Any, target: int
        ) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process) per step of ``steps`` random steps
    (recorded into ``directory`` if given), ``close`` included."""
    env = make(case)
    if directory is not None:
        env = RecordingWrapper(env, directory, compression=compression,
                               target_batch_bytes=target)
    env.action_space.seed(0)
    env.reset(seed=0)
    t0, c0 = time.perf_counter(), _cpu()
    for _ in range(steps):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()
    return (time.perf_counter() - t0) / steps, (_cpu() - c0) / steps


class Added:
    """Microseconds a step over the bare env, raw and zstd, wall and CPU, one figure a repeat
    (bare, raw and zstd runs interleaved)."""

    def __init__(self) -> None:
        self.bare: list[tuple[float, float]] = []
        self.raw: list[tuple[float, float]] = []
        self.zstd: list[tuple[float, float]] = []
        self.writer: dict[str, list[float]] = {"raw": [], "zstd": []}

    def add(self, bare: tuple[float, float], raw: tuple[float, float],
            zstd: tuple[float, float]) -> None:
        self.bare.append(bare)
        self.raw.append(((raw[0] - bare[0]) * 1e6, (raw[1] - bare[1]) * 1e6))
        self.zstd.append(((zstd[0] - bare[0]) * 1e6, (zstd[1] - bare[1]) * 1e6))

    def median(self, runs: list[tuple[float, float]], k: int) -> float:
        return statistics.median(r[k] for r in runs)

    def paired(self, k: int) -> tuple[float, float]:
        """zstd minus raw (us a step): the median of the per-repeat differences, and its
        noise (1.25 x 1.4826 x their median absolute deviation / sqrt(repeats): about one
        standard error of a median). ``k``: 0 wall, 1 process CPU, 2 writer thread CPU."""
        if k == 2:
            diffs = [z - r for z, r in zip(self.writer["zstd"], self.writer["raw"])]
        else:
            diffs = [z[k] - r[k] for z, r in zip(self.zstd, self.raw)]
        med = statistics.median(diffs)
        mad = statistics.median(abs(d - med) for d in diffs)
        return med, 1.25 * 1.4826 * mad / len(diffs) ** 0.5

    def line(self, over: float = 1.0) -> str:
        """The cost figures and three verdicts: zstd adds no more wall time a step than
        ``over`` times raw, no more CPU time (the process's, every thread: what a machine whose
        cores are all busy pays), and its writer thread spends no more CPU time, each beyond
        twice the noise of the paired differences."""
        raw_w, z_w = self.median(self.raw, 0), self.median(self.zstd, 0)
        raw_c, z_c = self.median(self.raw, 1), self.median(self.zstd, 1)
        d_w, noise_w = self.paired(0)
        d_c, noise_c = self.paired(1)
        bare = statistics.median(b[0] for b in self.bare) * 1e6
        limit_w = (over - 1) * max(raw_w, 0.0)
        limit_c = (over - 1) * max(raw_c, 0.0)
        cpu_ok = d_c <= limit_c + 2 * noise_c
        wall_ok = d_w <= limit_w + 2 * noise_w
        w_raw, w_z = (statistics.median(self.writer[k]) for k in ("raw", "zstd"))
        d_t, noise_t = self.paired(2)
        writer_ok = d_t <= (over - 1) * w_raw + 2 * noise_t
        return (f"us/step over bare (bare {bare:.0f}): wall raw {raw_w:+5.0f}, zstd {z_w:+5.0f} "
                f"(zstd-raw {d_w:+.0f} +-{noise_w:.0f}) {mark(wall_ok)}; CPU raw {raw_c:+5.0f}, "
                f"zstd {z_c:+5.0f} (zstd-raw {d_c:+.0f} +-{noise_c:.0f}) {mark(cpu_ok)}; "
                f"writer thread CPU raw {w_raw:.1f}, zstd {w_z:.1f} (zstd-raw {d_t:+.1f} "
                f"+-{noise_t:.1f}) {mark(writer_ok)}")


def bin_bytes(d: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def reading(d: str) -> tuple[float, float, float]:
    """(GB/s iterating, GB/s column, median us of a random frame), over raw frame bytes."""
    with RecordingReader(d) as reader:
        t0 = time.perf_counter()
        nbytes = sum(ep.observations.nbytes for ep in reader)
        it = nbytes / (time.perf_counter() - t0) / 1e9
    with RecordingReader(d) as reader:
        t0 = time.perf_counter()
        col = reader.column("observations")
        cb = col.nbytes / (time.perf_counter() - t0) / 1e9
    with RecordingReader(d) as reader:
        rng = np.random.default_rng(0)
        rows = [reader.episode_rows(i) for i in range(len(reader))]
        lat = []
        for _ in range(200):
            i = int(rng.integers(0, len(rows)))
            k = int(rng.integers(0, len(rows[i]) + 1))
            t0 = time.perf_counter()
            rows[i].rows("observations", k, k + 1)
            lat.append(time.perf_counter() - t0)
    return it, cb, statistics.median(lat) * 1e6


def designs(d: str) -> list[str]:
    """Ratio, encode us/frame and random-frame decode us per (delta, chunk rows)."""
    with RecordingReader(d) as reader:
        frames = reader[0].observations[:400]
    out = []
    for delta in ("none", "xor"):
        for rows in (1, 4, 8, 16, 32):
            codec = Zstd(level=3, chunk_rows=rows, delta=delta)
            t0 = time.perf_counter()
            coded = encode_rows(np.ascontiguousarray(frames), codec)
            enc = (time.perf_counter() - t0) / len(frames) * 1e6
            if coded is None:
                out.append(f"    delta {delta:4} chunk {rows:2}: stays raw")
                continue
            blob = coded[0]

            class Ref:
                pass
            ref = Ref()
            ref.codec, ref.shape, ref.size = codec, frames.shape, frames.nbytes  # type: ignore
            ref.stored, ref.offset, ref.crc32 = len(blob), 0, None  # type: ignore
            buf = np.frombuffer(blob, np.uint8)
            one = np.empty((1, *frames.shape[1:]), np.uint8)
            rng = np.random.default_rng(0)
            t0 = time.perf_counter()
            for _ in range(100):
                k = int(rng.integers(0, len(frames)))
                decode_rows(ref, lambda o, s: buf[o:o + s], k, k + 1, one, "bench")
            dec = (time.perf_counter() - t0) / 100 * 1e6
            out.append(f"    delta {delta:4} chunk {rows:2}: {frames.nbytes / len(blob):7.0f}x, "
                       f"encode {enc:6.1f} us/frame, random frame {dec:6.1f} us")
    return out


_RSS_CHILD = """
import resource, sys, tempfile
sys.path[:0] = {paths!r}
from bench_compress import run
run({case!r}, {steps}, tempfile.mkdtemp(), {comp!r}, {target})
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss(case: str, steps: int, compression: Any, target: int) -> float:
    """Peak RSS (MB) of a fresh process recording ``steps`` steps of ``case``."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _RSS_CHILD.format(
        paths=[REPO, HERE], case=case, steps=steps, comp=compression, target=target)],
        capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def mark(ok: bool) -> str:
    return "ok" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3,
                        help="bare, raw and zstd runs interleaved this many times: the us/step "
                             "figures are medians of the per-repeat differences")
    parser.add_argument("--cases", nargs="*", default=None)
    parser.add_argument("--no-designs", action="store_true")
    parser.add_argument("--target", type=int, default=32 << 20,
                        help="target_batch_bytes of both recordings (raw bytes held in memory; "
                             "default 32 MiB: fewer batch JSONs per frame)")
    args = parser.parse_args()
    cases = args.cases or [*GAMES, *(f"{g}-stacked" for g in STACKED), "noise",
                           *(["CarRacing"] if _has_box2d() else [])]
    scale = 10_000 / args.steps
    print(f"{args.steps} random steps a case, bytes scaled to 10,000 steps; "
          f"compression=Zstd() defaults {Zstd()!r}; target_batch_bytes {args.target:,}")
    ratios: dict[str, float] = {}
    tmp = tempfile.mkdtemp(prefix="bench_compress.")
    try:
        for case in cases:
            raw_d, z_d = os.path.join(tmp, case + ".raw"), os.path.join(tmp, case + ".zstd")
            added = Added()
            for r in range(args.repeats):  # interleaved: drift hits all three alike
                for d in (raw_d, z_d):
                    shutil.rmtree(d, ignore_errors=True)
                # In turn first, second and third: a run after the raw one shares the machine
                # with the kernel writing the raw one's 100 MB back.
                got = {}
                for kind in (("bare", "raw", "zstd") * 2)[r % 3:r % 3 + 3]:
                    writer_cpu()
                    got[kind] = run(case, args.steps, {"bare": None, "raw": raw_d}.get(kind, z_d),
                                    "zstd" if kind == "zstd" else None, args.target)
                    if kind != "bare":
                        added.writer[kind].append(writer_cpu())
                added.add(got["bare"], got["raw"], got["zstd"])
            raw_b, z_b = bin_bytes(raw_d), bin_bytes(z_d)
            ratio = raw_b / z_b
            ratios[case] = ratio
            it_r, col_r, lat_r = reading(raw_d)
            it_z, col_z, lat_z = reading(z_d)
            print(f"{case:20} raw {raw_b * scale / 1e6:9.1f} MB  zstd {z_b * scale / 1e6:8.2f} MB "
                  f"per 10k steps ({ratio:6.0f}x)")
            # Recording compressed adds no more a step than raw (noise frames: 10% more).
            print(f"{'':20} {added.line(TARGET_NOISE_OVER if case == 'noise' else 1.0)}")
            print(f"{'':20} read GB/s iterate raw {it_r:5.2f} zstd {it_z:5.2f} "
                  f"{mark(it_z >= TARGET_READ_GBPS)}; column raw {col_r:5.2f} zstd {col_z:5.2f} "
                  f"{mark(col_z >= TARGET_READ_GBPS)}; random frame raw {lat_r:5.0f} us, "
                  f"zstd {lat_z:5.0f} us {mark(lat_z <= TARGET_FRAME_US)}")
            if case == "noise":
                print(f"{'':20} noise: zstd/raw bytes {z_b / raw_b:.3f} "
                      f"{mark(z_b <= raw_b * TARGET_NOISE_OVER)}")
            if not args.no_designs and case != "noise":
                print("\n".join(designs(raw_d)))
            shutil.rmtree(raw_d)
            shutil.rmtree(z_d)
        if "Breakout" in cases:  # the batch target bounds raw bytes held, compressed or not
            for target in (5_000_000, args.target):
                raw_rss = peak_rss("Breakout", args.steps, None, target)
                z_rss = peak_rss("Breakout", args.steps, "zstd", target)
                print(f"peak RSS, Breakout, target_batch_bytes {target:,}: raw {raw_rss:.0f} MB, "
                      f"zstd {z_rss:.0f} MB {mark(z_rss <= raw_rss * 1.2 + 20)}")
        games = [ratios[g] for g in GAMES if g in ratios]
        if games:
            med = statistics.median(games)
            print(f"raw ALE frames: median {med:.0f}x {mark(med >= TARGET_RAW_MEDIAN)}, "
                  f"min {min(games):.0f}x {mark(min(games) >= TARGET_RAW_MIN)}")
        if "CarRacing" in ratios:
            print(f"CarRacing 96x96x3 frames: {ratios['CarRacing']:.0f}x "
                  f"{mark(ratios['CarRacing'] >= TARGET_CARRACING)}")
        stacked = [ratios[f"{g}-stacked"] for g in STACKED if f"{g}-stacked" in ratios]
        if stacked:
            print(f"stacked frames: min {min(stacked):.0f}x "
                  f"{mark(min(stacked) >= TARGET_STACKED)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
