"""Benchmarks reading the image column of a Parquet export, before and after issue 38.

Records ``--frames`` frames of ALE's Breakout (210x160x3 uint8; ``sample_envs/Image-v0`` at that
size when ale-py is missing), exports them with ``gym_recorder.integrations.parquet`` (after:
``fixed_size_binary`` rows) and writes the same frames as the nested ``fixed_size_list`` column
the export wrote before. For each it prints the best of ``--repeats`` times for pyarrow to read
the ``obs`` column into one numpy array of frames (and the MB/s of frame bytes), then the time
pandas, polars, DuckDB (``SELECT obs ... LIMIT 50``) and ``datasets`` take to read it.
Target: pyarrow at 500 MB/s or more.

Run from the repository root::

    python benchmarks/bench_parquet.py                # about a minute
    python benchmarks/bench_parquet.py --frames 5000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium as gym  # noqa: E402

from gym_recorder import RecordingWrapper  # noqa: E402
from gym_recorder.integrations.parquet import export_parquet  # noqa: E402

TARGET_MB_S = 500


def _record(directory: str, frames: int) -> str:
    try:
        import ale_py

        gym.register_envs(ale_py)
        env, name = gym.make("ALE/Breakout-v5"), "ALE/Breakout-v5"
    except ImportError:
        import sample_envs  # noqa: F401

        env = gym.make("sample_envs/Image-v0", height=210, width=160, episode_length=10**9)
        name = "sample_envs/Image-v0 210x160x3"
    env = RecordingWrapper(env, directory)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(frames):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()
    return name


def _best(f: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _nested_copy(src: str, dst: str) -> None:
    """The export at ``src`` with its obs column as nested fixed_size_lists (the old layout)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(src, dst)
    meta = json.load(open(os.path.join(src, "gym_recorder.json")))
    shape = meta["columns"]["obs"]["shape"]
    for name in os.listdir(os.path.join(dst, "data")):
        path = os.path.join(dst, "data", name)
        table = pq.read_table(path)
        col = table.column("obs").combine_chunks()
        flat = pa.array(np.frombuffer(col.buffers()[1], np.uint8))
        for size in reversed(shape):
            flat = pa.FixedSizeListArray.from_arrays(flat, size)
        table = table.set_column(table.schema.get_field_index("obs"), "obs", flat)
        pq.write_table(table, path)


def _pyarrow_frames(data: str, shape: list[int]) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    col = pq.read_table(data, columns=["obs"]).column("obs").combine_chunks()
    if pa.types.is_fixed_size_binary(col.type):
        return np.frombuffer(col.buffers()[1], np.uint8).reshape(-1, *shape)
    while pa.types.is_fixed_size_list(col.type):
        col = col.flatten()
    return col.to_numpy().reshape(-1, *shape)


def _readers(data: str, workdir: str) -> dict[str, float]:
    """Seconds each other reader takes (one run each)."""
    out: dict[str, float] = {}
    glob = os.path.join(data, "*.parquet")
    for name, read in (
            ("pandas", lambda: __import__("pandas").read_parquet(data, columns=["obs"])),
            ("polars", lambda: __import__("polars").read_parquet(glob, columns=["obs"])),
            ("duckdb LIMIT 50", lambda: __import__("duckdb").sql(
                f"SELECT obs FROM read_parquet('{glob}') LIMIT 50").fetchall()),
            ("datasets", lambda: __import__("datasets").load_dataset(
                "parquet", data_dir=data, split="train",
                cache_dir=tempfile.mkdtemp(dir=workdir)))):
        try:
            t0 = time.perf_counter()
            read()
            out[name] = time.perf_counter() - t0
        except ImportError:
            out[name] = float("nan")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-readers", action="store_true",
                        help="time pyarrow only (not pandas, polars, DuckDB, datasets)")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="bench_parquet_")
    try:
        rec = os.path.join(workdir, "rec")
        env_name = _record(rec, args.frames)
        after = os.path.join(workdir, "after")
        export_parquet(rec, after)
        before = os.path.join(workdir, "before")
        _nested_copy(after, before)
        shape = json.load(open(os.path.join(after, "gym_recorder.json")))["columns"]["obs"]["shape"]
        print(f"{args.frames} frames of {env_name}, {shape} uint8, obs column, best of "
              f"{args.repeats}")
        frames_ref = None
        for label, folder, layout in (("before", before, "nested fixed_size_list"),
                                      ("after", after, "fixed_size_binary")):
            data = os.path.join(folder, "data")
            seconds, frames = _best(lambda: _pyarrow_frames(data, shape), args.repeats)
            if frames_ref is None:
                frames_ref = frames
            assert np.array_equal(frames, frames_ref), "the two layouts differ"
            mb_s = frames.nbytes / 1e6 / seconds
            mark = "ok" if mb_s >= TARGET_MB_S else "MISS"
            line = (f"  {label:6s} {layout:23s} pyarrow {seconds:7.3f} s  {mb_s:8.1f} MB/s "
                    f"(target >= {TARGET_MB_S}: {mark})")
            if not args.no_readers:
                line += "  " + ", ".join(f"{k} {v:.2f} s"
                                         for k, v in _readers(data, workdir).items())
            print(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
