"""Benchmarks gym_recorder: recording overhead, disk use, reading speed and peak memory.

Everything runs in one process (peak memory in one subprocess per variant), with repeats of every
variant interleaved, so that the machine's drift hits all of them alike:

* Recording: a bare env, the same env in ``RecordingWrapper`` and, when ``minari`` is importable,
  in Minari's ``DataCollector`` (HDF5 and Arrow, raw arrays: ``jpeg_encoding=False`` so that it is
  lossless like gym_recorder). Every variant replays the same pre-generated actions and reset
  seeds on CartPole-v1 and on ``sample_envs/Image-v0`` at 84x84x3 and 210x160x3 (uint8). Reported:
  the per-step time of the stepping loop (what a training loop feels) and the time including the
  final ``close()`` (which writes and fsyncs what is buffered), medians over repeats; the time
  added per step is the median of the per-repeat paired differences with the bare env.
* Reading: opening a recording of 10,000 CartPole episodes and fetching one random episode (a
  fresh ``RecordingReader`` each repeat), and iterating every episode of a recording touching
  every byte of every array, as a ratio to ``np.fromfile`` of the same ``.bin`` files touched the
  same way. Both read from the page cache: every file is read once before timing.
* Peak RSS: one long 84x84x3 episode per variant in a subprocess; the growth of ``ru_maxrss``
  over the stepping loop shows that gym_recorder's memory stays near its batch target.

Run from the repository root (the checkout's ``gym_recorder`` is imported, not an installed one)::

    python benchmarks/bench.py            # full run, about 3 minutes
    python benchmarks/bench.py --quick    # under two minutes
    python benchmarks/bench.py --quick --json results.json --profile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # benchmark the checkout, not whatever version is installed

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import gym_recorder  # noqa: E402
import sample_envs  # noqa: E402,F401  (registers sample_envs/Image-v0)
from gym_recorder import RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.wrapper import DEFAULT_TARGET_BATCH_BYTES  # noqa: E402

# Seed of the action streams and of the first reset; episode n is reset with SEED + n, in every
# variant, so that all variants step through exactly the same trajectories.
SEED = 12345
# Image episodes this long make resets (which rebuild the env's frame bank) negligible.
IMAGE_EPISODE_LENGTH = 1000
MIB = 1 << 20
MB = 1_000_000
# Priming (see prime_memory) touches about this much more than a run will write, capped so that
# a long full run stays well inside the machine's memory.
PRIME_FACTOR = 1.25
PRIME_MAX_BYTES = 2 << 30
PRIME = True  # set from --no-prime

# The targets of issue 6 (medians, measured in the same run).
TARGET_ADDED_US = {"cartpole": 1.5, "image84": 10.0, "image210": 45.0}
# The per-step targets for images are "within 1.5x of the copy-plus-write floor"; the floor
# is measured in the same run (see FloorWriter), since it depends on the machine's page cache.
FLOOR_FACTOR = 1.5
TARGET_READ_RATIO = 0.5      # iterating every episode vs np.fromfile of the same bytes
TARGET_OPEN_FETCH_MS = 50.0  # open a 10,000-episode recording and fetch one random episode
READ_EPISODES = 10_000
# Other processes using more than this fraction of one core during the run competed with it: the
# report then says so (numbers are inflated, image rows most).
BUSY_OTHERS = 0.25
# "Near the batch target": the writer holds at most MAX_PENDING_BATCHES queued batches, one being
# written and one being filled, plus pooled columns, so a handful of batches; this many batch
# targets of RSS growth leave room for allocator slack.
RSS_NEAR_BATCHES = 10


@dataclass(frozen=True)
class Case:
    """One environment to record, with its step counts per mode."""

    key: str
    label: str
    env_id: str
    kwargs: dict
    steps: int          # steps per repeat for bare and gym_recorder
    # A prefix of the same action stream for Minari (much slower per step); for images at least
    # one episode, since Minari writes at the end of each episode.
    minari_steps: int

    def make(self) -> gym.Env:
        return gym.make(self.env_id, **self.kwargs)


def cases(quick: bool) -> list[Case]:
    image = "sample_envs/Image-v0"
    # CartPole writes ~40 bytes per step, so a 5 MB batch holds >100k steps: run enough steps
    # that the stepping loop includes batches handed to the writer, not only buffering.
    return [
        Case("cartpole", "CartPole-v1", "CartPole-v1", {},
             120_000 if quick else 300_000, 2_000 if quick else 5_000),
        Case("image84", "84x84x3 uint8", image,
             {"height": 84, "width": 84, "episode_length": IMAGE_EPISODE_LENGTH},
             3_000 if quick else 10_000, 1_000 if quick else 2_000),
        Case("image210", "210x160x3 uint8", image,
             {"height": 210, "width": 160, "episode_length": IMAGE_EPISODE_LENGTH},
             2_000 if quick else 5_000, 1_000 if quick else 2_000),
    ]


# -- helpers ------------------------------------------------------------------------------------


def dir_bytes(path: str) -> int:
    """Total size of the regular files directly or indirectly under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def prime_memory(nbytes: int) -> None:
    """Touches and frees ``nbytes`` of memory, so that the next run finds recently used pages.

    On VMs with free-page reporting (Firecracker here) memory freed for more than a moment goes
    back to the host, and the next first touch of a page costs a host fault (~0.35-0.5 GB/s
    instead of ~3.5 GB/s for writes into the page cache). Which state a run finds then depends
    on what ran seconds before it; priming gives every variant the same state, the one of an
    ordinary machine. ``--no-prime`` measures without it.
    """
    if nbytes <= 0:
        return
    block = np.empty(min(nbytes, PRIME_MAX_BYTES), dtype=np.uint8)
    block.fill(1)
    del block


def touch(arr: np.ndarray) -> int:
    """Reads every byte of an array (a cheap SIMD reduction, so that memory bandwidth counts)."""
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return int(np.bitwise_or.reduce(flat)) if flat.size else 0


def touch_tree(value: Any) -> int:
    """``touch`` every array in a (nested) value; returns the bytes touched."""
    if isinstance(value, np.ndarray):
        touch(value)
        return value.nbytes
    if isinstance(value, dict):
        return sum(touch_tree(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(touch_tree(v) for v in value)
    return 0


def _system_busy_seconds() -> float | None:
    """CPU time used by every process on the machine since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def minari_collector() -> tuple[Callable[[gym.Env, str], gym.Env] | None, list[str], str]:
    """Returns (wrap(env, data_format), the formats that work, a note), or None and why not."""
    try:
        import inspect

        from minari import DataCollector
    except Exception as e:  # noqa: BLE001  (any import failure means: skip, with the reason)
        return None, [], f"minari not importable ({type(e).__name__}: {e}); Minari rows skipped"
    kwargs = {}
    if "jpeg_encoding" in inspect.signature(DataCollector.__init__).parameters:
        kwargs["jpeg_encoding"] = False  # lossless raw arrays, like gym_recorder

    def wrap(env: gym.Env, data_format: str) -> gym.Env:
        return DataCollector(env, data_format=data_format, **kwargs)

    formats, notes = [], []
    for data_format in ("hdf5", "arrow"):
        try:  # a tiny smoke run: DataCollector needs its backend and jax ("minari[create]")
            env = wrap(gym.make("CartPole-v1"), data_format)
            env.reset(seed=0)
            env.step(0)
            env._flush_to_storage()
            env.close()
            formats.append(data_format)
        except Exception as e:  # noqa: BLE001
            notes.append(f"{data_format} skipped ({type(e).__name__}: {str(e).splitlines()[0]})")
    import minari
    note = f"minari {minari.__version__}" + (f", {kwargs}" if kwargs else "")
    return wrap, formats, "; ".join([note, *notes])


# -- recording ----------------------------------------------------------------------------------


class FloorWriter(gym.Wrapper):
    """The physical floor of recording observations: copy + write, nothing else.

    Copies each observation into a reused chunk of about the recorder's batch size and writes
    every full chunk to a new file, synchronously; ``close()`` writes the rest and fsyncs, like
    the recorder. No actions, rewards, JSON, checksums or threads: a recorder cannot beat this on
    the same machine, in the same page-cache conditions (on VMs that return freed memory to the
    host, new page-cache pages cost far more than a memcpy).
    """

    def __init__(self, env: gym.Env, directory: str) -> None:
        super().__init__(env)
        space = env.observation_space
        self._directory = directory
        rows = max(1, DEFAULT_TARGET_BATCH_BYTES // max(1, space.dtype.itemsize * int(
            np.prod(space.shape))))
        self._chunk = np.empty((rows, *space.shape), space.dtype)
        self._n = 0
        self._files = 0

    def _write(self) -> None:
        path = os.path.join(self._directory, f"chunk{self._files:06d}.bin")
        with open(path, "wb") as f:
            f.write(memoryview(self._chunk[:self._n]).cast("B"))
        self._files += 1
        self._n = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self._chunk[self._n] = obs
        self._n += 1
        if self._n == len(self._chunk):
            self._write()
        return obs, info

    def step(self, action: Any) -> tuple:
        result = self.env.step(action)
        self._chunk[self._n] = result[0]
        self._n += 1
        if self._n == len(self._chunk):
            self._write()
        return result

    def close(self) -> None:
        if self._n:
            self._write()
        for name in os.listdir(self._directory):
            fd = os.open(os.path.join(self._directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        super().close()



@dataclass
class Samples:
    """Per-repeat measurements of one variant on one case."""

    steps: int = 0
    loop_ns: list[float] = field(default_factory=list)   # per step, stepping loop only
    total_ns: list[float] = field(default_factory=list)  # per step, loop + close/flush
    disk: list[int] = field(default_factory=list)        # bytes on disk after close
    repeat: list[int] = field(default_factory=list)      # which repeat each sample came from


def run_once(case: Case, variant: str, actions: list[int], workdir: str,
             minari_wrap: Callable | None) -> tuple[float, float, int]:
    """Runs the actions once; returns (loop ns/step, total ns/step, bytes on disk)."""
    if PRIME:  # every variant, bare too, so that they start from the same state
        probe = case.make()
        obs_bytes = probe.observation_space.dtype.itemsize * int(np.prod(
            probe.observation_space.shape))
        probe.close()
        prime_memory(int(len(actions) * (obs_bytes + 64) * PRIME_FACTOR) + 16 * MIB)
    env = case.make()
    directory = None
    if variant in ("gym_recorder", "floor"):
        directory = tempfile.mkdtemp(prefix=f"{variant}-", dir=workdir)
        env = (RecordingWrapper if variant == "gym_recorder" else FloorWriter)(env, directory)
    elif variant.startswith("minari-"):
        env = minari_wrap(env, variant.split("-", 1)[1])
    seed = SEED
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    n = len(actions)
    gc.collect()
    t0 = time.perf_counter_ns()
    for a in actions:
        _, _, terminated, truncated, _ = step(a)
        if terminated or truncated:
            seed += 1
            reset(seed=seed)
    t1 = time.perf_counter_ns()
    disk = 0
    if variant.startswith("minari-"):
        env._flush_to_storage()  # writes the open episode; close() would delete the data
        t2 = time.perf_counter_ns()
        disk = dir_bytes(env._storage.data_path)
        env.close()
    else:
        env.close()  # gym_recorder: writes what is buffered, fsyncs, closes the env
        t2 = time.perf_counter_ns()
    if directory is not None:
        disk = dir_bytes(directory)
        shutil.rmtree(directory)
    return (t1 - t0) / n, (t2 - t0) / n, disk


def bench_recording(case: Case, repeats: int, minari_repeats: int, workdir: str,
                    minari_wrap: Callable | None, minari_formats: list[str],
                    log: Callable[[str], None]) -> dict[str, Samples]:
    probe = case.make()
    n_actions = int(probe.action_space.n)
    probe.close()
    actions = np.random.default_rng(SEED).integers(0, n_actions, case.steps).tolist()
    variants = ["bare", "floor", "gym_recorder"] + [f"minari-{f}" for f in minari_formats]
    samples = {v: Samples() for v in variants}

    def steps_for(variant: str) -> list[int]:
        return actions[:case.minari_steps] if variant.startswith("minari-") else actions

    # Warm-up (imports, first allocations, page cache of the temp directory), not timed.
    for v in variants:
        run_once(case, v, steps_for(v)[:min(500, case.minari_steps)], workdir, minari_wrap)
    for r in range(repeats):
        order = [v for v in variants if not v.startswith("minari-") or r < minari_repeats]
        k = r % len(order)
        order = order[k:] + order[:k]  # rotate, so no variant always runs first
        for v in order:
            acts = steps_for(v)
            loop, total, disk = run_once(case, v, acts, workdir, minari_wrap)
            s = samples[v]
            s.steps = len(acts)
            s.loop_ns.append(loop)
            s.total_ns.append(total)
            s.disk.append(disk)
            s.repeat.append(r)
        log(f"  {case.label}: repeat {r + 1}/{repeats} " + "  ".join(
            f"{v}={samples[v].loop_ns[-1] / 1e3:.2f}us" for v in order))
    return samples


def summarize_recording(samples: dict[str, Samples]) -> dict[str, dict]:
    bare = samples["bare"]
    bare_loop = dict(zip(bare.repeat, bare.loop_ns))
    bare_total = dict(zip(bare.repeat, bare.total_ns))
    out = {}
    for v, s in samples.items():
        added = [x - bare_loop[r] for x, r in zip(s.loop_ns, s.repeat)]
        added_total = [x - bare_total[r] for x, r in zip(s.total_ns, s.repeat)]
        ratio = [x / bare_loop[r] for x, r in zip(s.loop_ns, s.repeat)]
        total_s = [t * s.steps / 1e9 for t in s.total_ns]
        out[v] = {
            "steps": s.steps, "repeats": len(s.loop_ns),
            "us_per_step": median(s.loop_ns) / 1e3,
            "us_per_step_with_close": median(s.total_ns) / 1e3,
            "added_us": median(added) / 1e3,
            "added_us_with_close": median(added_total) / 1e3,
            "ratio": median(ratio),
            "mb_per_s": median([d / MB / t for d, t in zip(s.disk, total_s)]) if v != "bare"
            else 0.0,
            "mb_per_10k_steps": median([d / s.steps * 10_000 / MB for d in s.disk]),
            "raw_loop_ns": s.loop_ns, "raw_total_ns": s.total_ns, "raw_disk": s.disk,
        }
    return out


# -- reading ------------------------------------------------------------------------------------


def record(directory: str, case_or_env: Callable[[], gym.Env], episodes: int,
           max_steps: int | None = None) -> int:
    """Records ``episodes`` episodes of random actions into ``directory``; returns steps."""
    env = RecordingWrapper(case_or_env(), directory)
    rng = np.random.default_rng(SEED)
    n_actions = int(env.action_space.n)
    steps = 0
    for e in range(episodes):
        env.reset(seed=SEED + e)
        acts = rng.integers(0, n_actions, 10_000).tolist()
        for a in acts:
            _, _, terminated, truncated, _ = env.step(a)
            steps += 1
            if terminated or truncated or (max_steps is not None and steps >= max_steps):
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


def read_all_fromfile(paths: list[str]) -> int:
    """np.fromfile of every .bin file, touching every byte; returns the bytes touched."""
    touched = 0
    for p in paths:
        touched += touch_tree(np.fromfile(p, dtype=np.uint8))
    return touched


def bench_read_throughput(directory: str, repeats: int) -> dict:
    paths = bin_files(directory)
    bin_bytes = sum(os.path.getsize(p) for p in paths)
    read_all_fromfile(paths)  # into the page cache (and warm both code paths)
    touched = read_all_reader(directory)
    reader_t, base_t = [], []
    for r in range(repeats):
        order = [("reader", lambda: read_all_reader(directory)),
                 ("fromfile", lambda: read_all_fromfile(paths))]
        if r % 2:
            order.reverse()
        for name, fn in order:
            gc.collect()
            if PRIME:
                prime_memory(int(bin_bytes * PRIME_FACTOR) + 16 * MIB)
            t0 = time.perf_counter_ns()
            fn()
            dt = (time.perf_counter_ns() - t0) / 1e9
            (reader_t if name == "reader" else base_t).append(dt)
    ratios = [b / a for a, b in zip(reader_t, base_t)]  # throughput ratio on the same bytes
    with RecordingReader(directory) as reader:
        episodes = len(reader)
    return {"episodes": episodes, "bin_bytes": bin_bytes, "touched_bytes": touched,
            "reader_gb_s": bin_bytes / median(reader_t) / 1e9,
            "fromfile_gb_s": bin_bytes / median(base_t) / 1e9,
            "ratio": median(ratios), "us_per_episode": median(reader_t) / episodes * 1e6,
            "raw_reader_s": reader_t, "raw_fromfile_s": base_t}


def bench_open_fetch(directory: str, repeats: int) -> dict:
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


# -- peak RSS -------------------------------------------------------------------------------------


def _status_kib(field_name: str) -> int | None:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in KiB (None where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Resets this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_child(variant: str, steps: int, workdir: str) -> None:
    """In a subprocess: one long 84x84x3 episode; prints peak RSS before and after, as JSON.

    ``ru_maxrss`` of a fresh subprocess starts at the parent's size (Linux keeps the high-water
    mark across fork and exec), so the peak is read from /proc/self/status (VmHWM, reset before
    the loop) where it exists, else from ``ru_maxrss``.
    """
    env = gym.make("sample_envs/Image-v0", height=84, width=84, episode_length=steps + 1)
    directory = tempfile.mkdtemp(prefix=f"rss-{variant}-", dir=workdir)
    if variant == "gym_recorder":
        env = RecordingWrapper(env, directory)
    elif variant.startswith("minari-"):
        os.environ["MINARI_DATASETS_PATH"] = directory
        wrap, _, _ = minari_collector()
        env = wrap(env, variant.split("-", 1)[1])
    actions = np.random.default_rng(SEED).integers(0, 4, steps).tolist()
    env.reset(seed=SEED)
    for a in actions[:50]:  # allocations that any variant makes once
        env.step(a)
    gc.collect()
    proc = _reset_peak_rss() and _status_kib("VmRSS") is not None
    before = _status_kib("VmRSS") if proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for a in actions[50:]:
        env.step(a)
    if variant.startswith("minari-"):
        env._flush_to_storage()
    env.close()
    after = _status_kib("VmHWM") if proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps({"variant": variant, "before": before * 1024, "after": after * 1024,
                      "source": "VmHWM" if proc else "ru_maxrss"}))


def bench_rss(variants: list[str], steps: int, workdir: str) -> dict:
    out = {}
    for v in variants:
        env = dict(os.environ)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", v,
                               "--rss-steps", str(steps), "--workdir", workdir],
                              capture_output=True, text=True, env=env, check=False)
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not line.startswith("{"):
            out[v] = {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
            continue
        doc = json.loads(line)
        out[v] = {"before_mb": doc["before"] / MIB, "after_mb": doc["after"] / MIB,
                  "growth_mb": (doc["after"] - doc["before"]) / MIB, "source": doc["source"]}
    return out


# -- profiling --------------------------------------------------------------------------------------


def profile_case(case: Case, steps: int, workdir: str) -> str:
    """cProfile of the recorded stepping loop (cProfile inflates Python calls; read it relatively)."""
    actions = np.random.default_rng(SEED).integers(0, int(case.make().action_space.n),
                                                   steps).tolist()
    directory = tempfile.mkdtemp(prefix="prof-", dir=workdir)
    env = RecordingWrapper(case.make(), directory)
    seed = SEED
    env.reset(seed=seed)
    prof = cProfile.Profile()
    prof.enable()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
    prof.disable()
    env.close()
    shutil.rmtree(directory)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    return "\n".join(lines[max(0, start - 1):])


def _find_writer(env: RecordingWrapper) -> Any:
    """The wrapper's BatchWriter (internals: for diagnostics only), or None if not found."""
    for holder in (env, getattr(env, "_session", None)):
        for name in ("_writer", "writer"):
            writer = getattr(holder, name, None)
            if writer is not None and hasattr(writer, "_write_batch"):
                return writer
    return None


def step_distribution(case: Case, steps: int, workdir: str) -> dict:
    """Per-step times of bare, recorded, and recorded with the writer's disk work removed.

    The third variant replaces the writer thread's work (encode, CRC, JSON, files) by handing the
    batch straight back, so the difference to the second is what the background thread costs the
    stepping thread (GIL, memory bandwidth, page-cache work on the shared cores).
    """
    actions = np.random.default_rng(SEED).integers(0, int(case.make().action_space.n),
                                                   steps).tolist()
    out = {}
    for variant in ("bare", "gym_recorder", "gym_recorder, no writer work"):
        directory = tempfile.mkdtemp(prefix="dist-", dir=workdir)
        env = case.make()
        writer_time = {"wall": 0, "cpu": 0, "batches": 0}
        if variant != "bare":
            env = RecordingWrapper(env, directory)
            writer = _find_writer(env)
            if writer is None:
                out[variant] = {"error": "BatchWriter._write_batch not found (internals changed)"}
                env.close()
                continue
            original = writer._write_batch
            if variant.endswith("no writer work"):
                def write_batch(first: int, batch: Any) -> None:
                    batch.release()  # capacity keeps its first estimate (it is about right)
            else:
                def write_batch(first: int, batch: Any, original: Callable = original) -> None:
                    w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                    try:
                        original(first, batch)
                    finally:
                        writer_time["wall"] += time.perf_counter_ns() - w0
                        writer_time["cpu"] += time.thread_time_ns() - c0
                        writer_time["batches"] += 1
            writer._write_batch = write_batch
        if PRIME:
            obs_bytes = env.observation_space.dtype.itemsize * int(np.prod(
                env.observation_space.shape))
            prime_memory(int(len(actions) * (obs_bytes + 64) * PRIME_FACTOR) + 16 * MIB)
        seed = SEED
        env.reset(seed=seed)
        step = env.step
        per = np.empty(len(actions), dtype=np.int64)
        clock = time.perf_counter_ns
        gc.collect()
        for i, a in enumerate(actions):
            t0 = clock()
            _, _, terminated, truncated, _ = step(a)
            per[i] = clock() - t0
            if terminated or truncated:
                seed += 1
                env.reset(seed=seed)
        env.close()
        shutil.rmtree(directory)
        d = {q: float(np.percentile(per, p)) / 1e3 for q, p in (("p50", 50), ("p90", 90),
                                                                  ("p99", 99))}
        d["max"] = float(per.max()) / 1e3
        d["mean"] = float(per.mean()) / 1e3
        if writer_time["batches"]:
            d["writer wall"] = writer_time["wall"] / len(actions) / 1e3
            d["writer cpu"] = writer_time["cpu"] / len(actions) / 1e3
        out[variant] = d
    return out


# -- report -----------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(results: dict, out: Callable[[str], None]) -> None:
    meta = results["meta"]
    out("")
    out(f"gym_recorder {meta['gym_recorder']} | gymnasium {meta['gymnasium']} | numpy "
        f"{meta['numpy']} | Python {meta['python']} | {meta['cpus']} CPUs | {meta['machine']}")
    others = meta.get("others_cpu_fraction")
    if others is not None:
        out(f"other processes used {others:.0%} of one core during the run"
            + ("  WARNING: they competed for the cores; the numbers are inflated"
               if others > BUSY_OTHERS else ""))
    out(f"mode: {meta['mode']}; recording medians over {meta['repeats']} interleaved repeats "
        f"(Minari: {meta['minari_repeats']}); {meta['minari']}; memory "
        + ("primed before each run" if meta["prime"] else "not primed (--no-prime)"))
    out("")
    out("Recording (per step; 'added' = median of paired differences with the bare env)")
    header = (f"{'env':<16} {'recorder':<16} {'steps':>7} {'us/step':>8} {'added':>9} "
              f"{'ratio':>6} {'+close':>9} {'MB/s':>7} {'MB/10k':>8}")
    out(header)
    out("-" * len(header))
    for key, rows in results["recording"].items():
        label = rows["label"]
        for v, r in rows["variants"].items():
            if v == "bare":
                out(f"{label:<16} {v:<16} {r['steps']:>7} {r['us_per_step']:>8.2f} "
                    f"{'':>9} {'':>6} {'':>9} {'':>7} {'':>8}")
            else:
                out(f"{label:<16} {v:<16} {r['steps']:>7} {r['us_per_step']:>8.2f} "
                    f"{r['added_us']:>+9.2f} {r['ratio']:>6.2f} "
                    f"{r['added_us_with_close']:>+9.2f} {r['mb_per_s']:>7.1f} "
                    f"{r['mb_per_10k_steps']:>8.2f}")
    out("  us/step, added: the stepping loop; +close: added per step including the final "
        "close() (gym_recorder: write + fsync) or flush (Minari)")
    out("  floor: copy each observation into a reused 5 MB chunk and write full chunks to new files "
        "(no actions/JSON/CRC/thread): the machine's floor for recording in the same conditions")
    out("")
    out("Reading (page cache warm; touching every byte of every array)")
    rd = results["reading"]
    of = rd["open_fetch"]
    out(f"  open a {of['episodes']}-episode recording + fetch a random episode: "
        f"{of['ms']:.2f} ms median, {of['max_ms']:.2f} ms max")
    for key, t in rd["throughput"].items():
        out(f"  iterate {t['episodes']:>6} episodes of {key:<15} ({t['bin_bytes'] / MB:8.1f} MB of "
            f".bin): reader {t['reader_gb_s']:6.2f} GB/s, np.fromfile {t['fromfile_gb_s']:6.2f} "
            f"GB/s, ratio {t['ratio']:.2f}, {t['us_per_episode']:.0f} us/episode")
    out("")
    rss = results["rss"]
    out(f"Peak RSS growth over one {rss['steps']}-step 84x84x3 episode "
        f"({rss['episode_mb']:.0f} MB of frames; batch target {rss['batch_target_mb']:.0f} MB)")
    for v, r in rss["variants"].items():
        if "error" in r:
            out(f"  {v:<16} failed: {r['error']}")
        else:
            out(f"  {v:<16} {r['growth_mb']:8.1f} MB  (peak {r['after_mb']:.0f} MB, "
                f"{r['source']})")
    out("")
    out("Targets (issue 6)")
    for line in results["targets"]:
        out(f"  {line['status']}  {line['what']:<58} {line['measured']}")


def targets(results: dict) -> list[dict]:
    lines = []
    for key, limit in TARGET_ADDED_US.items():
        rows = results["recording"].get(key)
        if rows is None:
            continue
        r = rows["variants"]["gym_recorder"]
        lines.append({"what": f"{rows['label']}: added per step <= +{limit:g} us",
                      "measured": f"{r['added_us']:+.2f} us (with close: "
                                  f"{r['added_us_with_close']:+.2f} us)",
                      "status": verdict(r["added_us"] <= limit)})
        floor = rows["variants"].get("floor")
        if floor is not None and key != "cartpole":
            limit = FLOOR_FACTOR * max(floor["added_us"], 0.0)
            lines.append({"what": f"{rows['label']}: added <= {FLOOR_FACTOR:g}x the floor's "
                                  f"({floor['added_us']:+.2f} us), same run",
                          "measured": f"{r['added_us']:+.2f} us = "
                                      f"{r['added_us'] / max(floor['added_us'], 1e-9):.2f}x floor",
                          "status": verdict(r["added_us"] <= limit)})
    for key, t in results["reading"]["throughput"].items():
        if key == "CartPole-v1":
            # ~800 bytes per episode: per-episode work, not bytes, bounds this one; shown as info.
            lines.append({"what": f"read {key} ({t['bin_bytes'] / t['episodes']:.0f} B/episode): "
                                  "per-episode cost",
                          "measured": f"{t['us_per_episode']:.0f} us/episode, "
                                      f"{t['ratio']:.1%} of np.fromfile",
                          "status": "info"})
            continue
        lines.append({"what": f"read {key}: >= {TARGET_READ_RATIO:.0%} of np.fromfile",
                      "measured": f"{t['ratio']:.1%}", "status": verdict(t["ratio"] >=
                                                                           TARGET_READ_RATIO)})
    of = results["reading"]["open_fetch"]
    lines.append({"what": f"open {of['episodes']} episodes + fetch one <= "
                          f"{TARGET_OPEN_FETCH_MS:g} ms", "measured": f"{of['ms']:.2f} ms",
                  "status": verdict(of["ms"] <= TARGET_OPEN_FETCH_MS)})
    rss = results["rss"]
    rec = rss["variants"].get("gym_recorder", {})
    if "growth_mb" in rec:
        limit = RSS_NEAR_BATCHES * rss["batch_target_mb"]
        lines.append({"what": f"peak RSS growth <= {RSS_NEAR_BATCHES} batch targets "
                              f"({limit:.0f} MB), not the episode ({rss['episode_mb']:.0f} MB)",
                      "measured": f"{rec['growth_mb']:.1f} MB",
                      "status": verdict(rec["growth_mb"] <= limit)})
    return lines


# -- main -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (< 2 min)")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    parser.add_argument("--profile", action="store_true",
                        help="also print cProfile of the recorded loops and per-step percentiles")
    parser.add_argument("--no-minari", action="store_true", help="skip Minari even if installed")
    parser.add_argument("--no-prime", action="store_true",
                        help="do not touch memory before each run (see prime_memory)")
    parser.add_argument("--workdir", help="where recordings go (default: a new temp directory)")
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    parser.add_argument("--rss-steps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.rss_child:
        rss_child(args.rss_child, args.rss_steps, args.workdir or tempfile.gettempdir())
        return 0

    global PRIME
    PRIME = not args.no_prime
    started = time.perf_counter()
    busy_start, own_start = _system_busy_seconds(), _own_seconds()
    quick = args.quick
    repeats = 5 if quick else 9
    minari_repeats = 3 if quick else 5
    workdir = tempfile.mkdtemp(prefix="gym_recorder-bench-", dir=args.workdir)
    os.environ["MINARI_DATASETS_PATH"] = os.path.join(workdir, "minari")

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    try:
        if args.no_minari:
            minari_wrap, minari_formats, minari_note = None, [], "Minari skipped (--no-minari)"
        else:
            minari_wrap, minari_formats, minari_note = minari_collector()
        log(minari_note)
        results: dict[str, Any] = {"meta": {
            "mode": "quick" if quick else "full", "repeats": repeats,
            "minari_repeats": minari_repeats, "minari": minari_note, "prime": PRIME,
            "gym_recorder": f"{gym_recorder.__version__} ({os.path.dirname(gym_recorder.__file__)})",
            "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "machine": platform.processor() or platform.machine(),
            "command": " ".join([os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])},
            "recording": {}}

        for case in cases(quick):
            log(f"recording {case.label}: {case.steps} steps x {repeats} repeats")
            samples = bench_recording(case, repeats, minari_repeats, workdir, minari_wrap,
                                      minari_formats, log)
            results["recording"][case.key] = {"label": case.label,
                                              "variants": summarize_recording(samples)}

        log(f"reading: recording {READ_EPISODES} CartPole-v1 episodes")
        cp_dir = os.path.join(workdir, "read-cartpole")
        t0 = time.perf_counter()
        cp_steps = record(cp_dir, lambda: gym.make("CartPole-v1"), READ_EPISODES)
        log(f"  {cp_steps} steps recorded in {time.perf_counter() - t0:.1f}s")
        reading: dict[str, Any] = {"open_fetch": bench_open_fetch(cp_dir, 15 if quick else 41),
                                   "throughput": {}}
        read_repeats = 3 if quick else 5
        reading["throughput"]["CartPole-v1"] = bench_read_throughput(cp_dir, read_repeats)
        image_sets = [("84x84x3", 84, 84, 4_000 if quick else 10_000, 500),
                      ("210x160x3", 210, 160, 1_500 if quick else 4_000, 500)]
        for name, h, w, total, ep_len in image_sets:
            log(f"reading: recording {total} steps of {name}")
            d = os.path.join(workdir, f"read-{name}")
            record(d, lambda h=h, w=w: gym.make("sample_envs/Image-v0", height=h, width=w,
                                                 episode_length=ep_len), total // ep_len)
            reading["throughput"][name] = bench_read_throughput(d, read_repeats)
            shutil.rmtree(d)
        results["reading"] = reading

        rss_steps = 8_000 if quick else 30_000
        log(f"peak RSS: {rss_steps}-step 84x84x3 episode per variant (subprocesses)")
        rss_variants = ["bare", "gym_recorder"] + [f"minari-{f}" for f in minari_formats]
        results["rss"] = {
            "steps": rss_steps, "episode_mb": rss_steps * 84 * 84 * 3 / MIB,
            "batch_target_mb": DEFAULT_TARGET_BATCH_BYTES / MIB,
            "variants": bench_rss(rss_variants, rss_steps, workdir)}
        results["targets"] = targets(results)

        if args.profile:
            results["profile"] = {}
            for case in cases(quick):
                if case.key == "image84":
                    continue
                n = 50_000 if case.key == "cartpole" else 2_000
                log(f"profile: {case.label}")
                results["profile"][case.key] = {
                    "cprofile": profile_case(case, n, workdir),
                    "per_step_us": step_distribution(case, n, workdir)}
        seconds = time.perf_counter() - started
        results["meta"]["seconds"] = round(seconds, 1)
        busy = _system_busy_seconds()
        if busy is not None and busy_start is not None:
            others = busy - busy_start - (_own_seconds() - own_start)
            results["meta"]["others_cpu_fraction"] = max(others, 0.0) / seconds

        report(results, print)
        if args.profile:
            for key, p in results["profile"].items():
                print(f"\nPer-step time distribution, {key} (us; timer overhead included; "
                      "writer wall/cpu: the writer thread's time per step, spent in _write_batch)")
                for v, d in p["per_step_us"].items():
                    print(f"  {v:<29} " + ("  ".join(f"{q} {x:.2f}" for q, x in d.items())
                                            if "error" not in d else d["error"]))
                print(f"\ncProfile of the recorded loop, {key} (top by own time)")
                print(p["cprofile"])
        print(f"\n(total {results['meta']['seconds']} s; reproduce: python "
              f"{results['meta']['command']})")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
