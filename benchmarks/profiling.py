"""Where the time goes (``--profile``): cProfile of recording and reading, per-step percentiles.

cProfile inflates Python calls, so read its tables relatively. ``step_distribution`` times every
step of bare, recorded, and recorded with the writer thread's work removed: the difference of the
last two is what the background thread costs the stepping thread (GIL, memory bandwidth,
page-cache work on the shared cores).
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gym_recorder import RecordingWrapper

from harness import SEED
from reading import read_all_reader
from recorders import Case

TOP = 14


def _top(prof: cProfile.Profile, sort: str = "tottime") -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats(sort).print_stats(TOP)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    return "\n".join(lines[max(0, start - 1):])


def _actions(case: Case, steps: int) -> list[int]:
    return np.random.default_rng(SEED).integers(0, int(case.make().action_space.n),
                                                steps).tolist()


def profile_case(case: Case, steps: int, workdir: str) -> str:
    """cProfile of the recorded stepping loop and close() (stepping thread only)."""
    actions = _actions(case, steps)
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
    env.close()
    prof.disable()
    shutil.rmtree(directory)
    return _top(prof)


def profile_reading(directory: str) -> str:
    """cProfile of iterating every episode of a recording."""
    prof = cProfile.Profile()
    prof.enable()
    read_all_reader(directory)
    prof.disable()
    return _top(prof)


def _find_writer(env: RecordingWrapper) -> Any:
    """The wrapper's BatchWriter (internals: for diagnostics only), or None if not found."""
    for holder in (env, getattr(env, "_session", None)):
        for name in ("_writer", "writer"):
            writer = getattr(holder, name, None)
            if writer is not None and hasattr(getattr(writer, "files", None), "write_batch"):
                return writer
    return None


def step_distribution(case: Case, steps: int, workdir: str) -> dict:
    """Per-step times of bare, recorded, and recorded with the writer's disk work removed."""
    actions = _actions(case, steps)
    out = {}
    for variant in ("bare", "gym_recorder", "gym_recorder, no writer work"):
        directory = tempfile.mkdtemp(prefix="dist-", dir=workdir)
        env = case.make()
        writer_time = {"wall": 0, "cpu": 0, "batches": 0}
        if variant != "bare":
            env = RecordingWrapper(env, directory)
            writer = _find_writer(env)
            if writer is None:
                out[variant] = {"error": "BatchWriter.files.write_batch not found (internals changed)"}
                env.close()
                continue
            original = writer.files.write_batch
            if variant.endswith("no writer work"):
                def write_batch(first: int, batch: Any) -> None:
                    batch.release()
            else:
                def write_batch(first: int, batch: Any, original: Callable = original) -> None:
                    w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                    try:
                        original(first, batch)
                    finally:
                        writer_time["wall"] += time.perf_counter_ns() - w0
                        writer_time["cpu"] += time.thread_time_ns() - c0
                        writer_time["batches"] += 1
            writer.files.write_batch = write_batch  # type: ignore[method-assign]
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
