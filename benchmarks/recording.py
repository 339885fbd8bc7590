"""Recording benchmarks: per-step cost of every recorder, interleaved, and its stability.

* :func:`bench_recording`: every variant of :mod:`recorders` on one case, repeats interleaved
  (rotated order), memory primed before each run; the time added per step is the median of the
  per-repeat paired differences with the bare env.
* :func:`bench_stress`: the stability check of issue 12 on 210x160x3: bare, floor, sync and
  gym_recorder, warm (primed) and while another process writes ``neighbour_bytes`` to disk, in
  interleaved repeats; and cold: the first recording in a fresh process, no priming
  (:func:`cold_child` runs in that subprocess).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness import (MB, MIB, PRIME_FACTOR, SEED, Config, dir_bytes, median, obs_bytes,
                     prime_memory, rotated, spread)
from recorders import WRITING_VARIANTS, Case

# The neighbouring writer writes this much per call.
NEIGHBOUR_CHUNK = 4 * MIB
_NEIGHBOUR_CODE = r"""
import os, sys
path, total, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
block = b"\x5a" * chunk
with open(path, "wb") as f:
    written = 0
    while written < total:
        n = f.write(block[:min(chunk, total - written)])
        written += n
        if written == n:
            print("writing", flush=True)
    f.flush()
    os.fsync(f.fileno())
print("done", flush=True)
"""


class Neighbour:
    """Another process writing ``nbytes`` to a file under ``directory`` (a context manager).

    ``__enter__`` returns once the first chunk is written; ``__exit__`` waits for the rest, then
    deletes the file (so that the page-cache pressure lasts through the recording it wraps).
    """

    def __init__(self, directory: str, nbytes: int) -> None:
        self.path = os.path.join(directory, "neighbour.dat")
        self.nbytes = nbytes
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Neighbour:
        if self.nbytes > 0:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _NEIGHBOUR_CODE, self.path, str(self.nbytes),
                 str(NEIGHBOUR_CHUNK)], stdout=subprocess.PIPE, text=True)
            self.proc.stdout.readline()  # "writing": it has started
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.communicate()
            self.proc = None
        if os.path.exists(self.path):
            os.unlink(self.path)


def actions_for(case: Case, steps: int) -> list[int]:
    probe = case.make()
    n_actions = int(probe.action_space.n)
    probe.close()
    return np.random.default_rng(SEED).integers(0, n_actions, steps).tolist()


def prime_for(case: Case, steps: int) -> None:
    """Primes a bit more memory than ``steps`` steps of ``case`` will write."""
    probe = case.make()
    nbytes = obs_bytes(probe.observation_space)
    probe.close()
    prime_memory(int(steps * (nbytes + 64) * PRIME_FACTOR) + 16 * MIB)


def run_once(case: Case, variant: str, actions: list[int], workdir: str, *,
             minari_wrap: Callable | None = None, prime: bool = True,
             neighbour_bytes: int = 0) -> tuple[float, float, int]:
    """Runs the actions once; returns (loop ns/step, total ns/step, bytes on disk).

    ``prime`` touches memory first (every variant, bare too, so that they start from the same
    state); ``neighbour_bytes`` has another process write that much during the stepping loop.
    """
    if prime:
        prime_for(case, len(actions))
    env = case.make()
    directory = None
    if variant in WRITING_VARIANTS:
        directory = tempfile.mkdtemp(prefix=f"{variant}-", dir=workdir)
        env = WRITING_VARIANTS[variant](env, directory)
    elif variant.startswith("minari-"):
        env = minari_wrap(env, variant.split("-", 1)[1])
    seed = SEED
    env.reset(seed=seed)
    step, reset = env.step, env.reset
    n = len(actions)
    gc.collect()
    with Neighbour(workdir, neighbour_bytes):
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
            env.close()  # the writers write what is buffered and fsync
            t2 = time.perf_counter_ns()
    if directory is not None:
        disk = dir_bytes(directory)
        shutil.rmtree(directory)
    return (t1 - t0) / n, (t2 - t0) / n, disk


@dataclass
class Samples:
    """Per-repeat measurements of one variant on one case."""

    steps: int = 0
    loop_ns: list[float] = field(default_factory=list)   # per step, stepping loop only
    total_ns: list[float] = field(default_factory=list)  # per step, loop + close/flush
    disk: list[int] = field(default_factory=list)        # bytes on disk after close
    repeat: list[int] = field(default_factory=list)      # which repeat each sample came from

    def add(self, r: int, steps: int, loop: float, total: float, disk: int) -> None:
        self.steps = steps
        self.loop_ns.append(loop)
        self.total_ns.append(total)
        self.disk.append(disk)
        self.repeat.append(r)


def bench_recording(case: Case, cfg: Config, workdir: str, minari_wrap: Callable | None,
                    minari_formats: list[str], log: Callable[[str], None]) -> dict[str, Samples]:
    """Every variant on one case, ``cfg.repeats`` interleaved repeats."""
    actions = actions_for(case, case.steps)
    variants = ["bare", *WRITING_VARIANTS] + (
        [f"minari-{f}" for f in minari_formats] if case.minari_steps else [])
    samples = {v: Samples() for v in variants}

    def steps_for(variant: str) -> list[int]:
        return actions[:case.minari_steps] if variant.startswith("minari-") else actions

    # Warm-up (imports, first allocations, page cache of the temp directory), not timed.
    for v in variants:
        run_once(case, v, steps_for(v)[:min(500, len(steps_for(v)))], workdir,
                 minari_wrap=minari_wrap, prime=cfg.prime)
    for r in range(cfg.repeats):
        order = rotated([v for v in variants
                         if not v.startswith("minari-") or r < cfg.minari_repeats], r)
        for v in order:
            acts = steps_for(v)
            samples[v].add(r, len(acts), *run_once(case, v, acts, workdir,
                                                   minari_wrap=minari_wrap, prime=cfg.prime))
        log(f"  {case.label}: repeat {r + 1}/{cfg.repeats} " + "  ".join(
            f"{v}={samples[v].loop_ns[-1] / 1e3:.2f}us" for v in order))
    return samples


def summarize_recording(samples: dict[str, Samples]) -> dict[str, dict]:
    """Medians (and min/max) of every variant; ``added`` is paired with bare's same repeat."""
    bare = samples["bare"]
    bare_loop = dict(zip(bare.repeat, bare.loop_ns))
    bare_total = dict(zip(bare.repeat, bare.total_ns))
    floor = samples.get("floor")
    floor_added = {} if floor is None else {
        r: x - bare_loop[r] for x, r in zip(floor.loop_ns, floor.repeat)}
    out = {}
    for v, s in samples.items():
        added = [x - bare_loop[r] for x, r in zip(s.loop_ns, s.repeat)]
        added_total = [x - bare_total[r] for x, r in zip(s.total_ns, s.repeat)]
        ratio = [x / bare_loop[r] for x, r in zip(s.loop_ns, s.repeat)]
        total_s = [t * s.steps / 1e9 for t in s.total_ns]
        # Ratio of the time added to the floor's added time, repeat by repeat.
        vs_floor = [(x - bare_loop[r]) / floor_added[r] for x, r in zip(s.loop_ns, s.repeat)
                    if floor_added.get(r, 0) > 0]
        out[v] = {
            "steps": s.steps, "repeats": len(s.loop_ns),
            "us_per_step": median(s.loop_ns) / 1e3,
            "us_per_step_with_close": median(s.total_ns) / 1e3,
            "added_us": median(added) / 1e3,
            "added_us_spread": {k: x / 1e3 for k, x in spread(added).items()},
            "added_us_with_close": median(added_total) / 1e3,
            "ratio": median(ratio),
            "vs_floor": median(vs_floor) if vs_floor else None,
            "mb_per_s": median([d / MB / t for d, t in zip(s.disk, total_s)]) if v != "bare"
            else 0.0,
            "mb_per_10k_steps": median([d / s.steps * 10_000 / MB for d in s.disk]),
            "raw_loop_ns": s.loop_ns, "raw_total_ns": s.total_ns, "raw_disk": s.disk,
        }
    return out


# -- stability: warm, with a neighbouring writer, cold ---------------------------------------

STRESS_VARIANTS = ["bare", "floor", "sync", "gym_recorder"]
COLD_VARIANTS = ["sync", "gym_recorder"]


def cold_child(case: Case, variant: str, steps: int, workdir: str) -> dict:
    """In a fresh process: bare, then the first recording of this process; no priming."""
    actions = actions_for(case, steps)
    bare, _, _ = run_once(case, "bare", actions, workdir, prime=False)
    loop, total, disk = run_once(case, variant, actions, workdir, prime=False)
    return {"variant": variant, "bare_ns": bare, "loop_ns": loop, "total_ns": total, "disk": disk}


def _run_cold(variant: str, steps: int, workdir: str, script: str) -> dict:
    proc = subprocess.run([sys.executable, script, "--cold-child", variant, "--cold-steps",
                           str(steps), "--workdir", workdir],
                          capture_output=True, text=True, check=False)
    line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not line.startswith("{"):
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(line)


def bench_stress(case: Case, cfg: Config, workdir: str, script: str,
                 log: Callable[[str], None]) -> dict:
    """The stability runs; returns per condition and variant the added us/step of each repeat."""
    actions = actions_for(case, case.steps)
    conditions = {"warm": 0, "neighbour": cfg.neighbour_bytes}
    raw: dict[str, dict[str, list[float]]] = {c: {v: [] for v in STRESS_VARIANTS}
                                              for c in conditions}
    for v in STRESS_VARIANTS:  # warm-up, not timed
        run_once(case, v, actions[:200], workdir, prime=cfg.prime)
    for r in range(cfg.repeats):
        for cond, nbytes in rotated(list(conditions.items()), r):
            for v in rotated(STRESS_VARIANTS, r):
                loop, _, _ = run_once(case, v, actions, workdir, prime=cfg.prime,
                                      neighbour_bytes=nbytes)
                raw[cond][v].append(loop)
        log(f"  stress repeat {r + 1}/{cfg.repeats}: " + "  ".join(
            f"{c}:{v}={raw[c][v][-1] / 1e3:.1f}us" for c in conditions for v in STRESS_VARIANTS))
    cold: dict[str, list[dict]] = {v: [] for v in COLD_VARIANTS}
    for r in range(cfg.repeats):
        for v in rotated(COLD_VARIANTS, r):
            cold[v].append(_run_cold(v, case.steps, workdir, script))
        log(f"  cold repeat {r + 1}/{cfg.repeats}: " + "  ".join(
            f"{v}={(cold[v][-1].get('loop_ns', float('nan')) - cold[v][-1].get('bare_ns', 0)) / 1e3:.1f}us"
            for v in COLD_VARIANTS))
    out: dict[str, Any] = {"label": case.label, "steps": case.steps,
                           "gb_per_run": case.steps * 210 * 160 * 3 / 1e9,
                           "neighbour_mb": cfg.neighbour_bytes / MIB, "conditions": {}}
    for cond in conditions:
        bare = raw[cond]["bare"]
        out["conditions"][cond] = {
            v: [(x - b) / 1e3 for x, b in zip(raw[cond][v], bare)] for v in STRESS_VARIANTS
            if v != "bare"}
        out["conditions"][cond]["bare_us"] = [b / 1e3 for b in bare]
    errors = [c["error"] for v in COLD_VARIANTS for c in cold[v] if "error" in c]
    out["conditions"]["cold"] = {
        v: [(c["loop_ns"] - c["bare_ns"]) / 1e3 for c in cold[v] if "error" not in c]
        for v in COLD_VARIANTS}
    out["cold_errors"] = errors
    return out
