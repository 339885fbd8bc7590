"""Benchmarks gym_recorder.integrations.ray and object storage: read throughput against the plain reader.

One process, one run, on the same image recording (``sample_envs/Image-v0``, 84x84x3 uint8,
1,000-step episodes, default batches of about 5 MB):

1. ``read_recording`` (step rows, ``iter_batches(batch_format="numpy")``) on a local Ray cluster
   of 2 CPUs, with its default read tasks (consecutive batches up to ``TASK_BYTES``) and with a
   task per batch (``batches_per_task=1``), against ``RecordingReader`` iterating every episode,
   all from the page cache (every file read once first). Target: Ray at least 50% of the
   reader's throughput. Measured in the same run, Ray Data's own floor on this machine: (a) a
   datasource with the same read tasks, each yielding as many blocks of the same columns and
   sizes made of zeros (reading nothing), for both task layouts, and (b) ``ray.data.read_numpy``
   of the same obs/next_obs bytes written as one .npy per batch, iterated the same way. Neither
   floor decodes anything, so read_recording cannot beat them; what they reach against the
   reader says whether the 50% target is reachable through Ray.
2. ``RecordingReader`` at an ``s3://`` URL served by moto's ThreadedMotoServer on 127.0.0.1 (in
   this process) against the same reader on the local directory, on a prefix of the episodes
   (moto keeps objects in memory and serves them from Python), and against the floor of that
   path: s3fs ``cat_file`` of the same batch files, whole, from the same server. Printed for
   information: moto is no model of real S3's bandwidth.

Throughput is bytes of observations delivered per second (each step row carries its observation
and next observation; the reader's episodes carry N + 1 observations per N steps, counted the
same way as 2 per step so that both sides are compared on the same work; the floors are
credited with the same bytes as the side they bound). Every pass runs ``--repeats`` times,
alternating; medians are reported, and ratios of medians.

Run from the repository root::

    python benchmarks/bench_ray.py               # 1 GB, a few minutes
    python benchmarks/bench_ray.py --gb 0.25     # quicker
"""

from __future__ import annotations

import argparse
import os
import statistics
import shutil
import sys
import tempfile
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # benchmark the checkout, not whatever version is installed

import numpy as np  # noqa: E402

from gym_recorder import RecordingReader, RecordingWrapper  # noqa: E402

SIZE = 84
EPISODE = 1000
RAY_TARGET = 0.5


def make_recording(directory: str, gigabytes: float) -> tuple[int, int]:
    from sample_envs.envs import ImageEnv

    frame = SIZE * SIZE * 3
    episodes = max(1, round(gigabytes * 1e9 / (frame * (EPISODE + 1))))
    env = RecordingWrapper(ImageEnv(height=SIZE, width=SIZE, episode_length=EPISODE), directory)
    for e in range(episodes):
        env.reset(seed=e)
        for t in range(EPISODE):
            env.step(t % 4)
    env.close()
    total = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    return episodes, total


def warm(directory: str) -> None:
    for n in os.listdir(directory):
        with open(os.path.join(directory, n), "rb") as f:
            while f.read(1 << 24):
                pass


def reader_pass(location: str, storage_options: dict | None = None,
                episodes: int | None = None) -> tuple[float, int]:
    kw = {"storage_options": storage_options} if storage_options else {}
    t0 = time.perf_counter()
    n = 0
    with RecordingReader(location, **kw) as reader:
        for i in range(len(reader) if episodes is None else episodes):
            ep = reader[i]
            n += 2 * ep.observations[:-1].nbytes  # obs and next_obs of each step
    return time.perf_counter() - t0, n


def ray_pass(location: str, batches_per_task: int | None = None) -> tuple[float, int]:
    from gym_recorder.integrations.ray import read_recording

    t0 = time.perf_counter()
    n = 0
    ds = read_recording(location, batches_per_task=batches_per_task)
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        n += batch["obs"].nbytes + batch["next_obs"].nbytes
    return time.perf_counter() - t0, n


def ray_zeros_pass(blocks: list[int], steps: int) -> tuple[float, int]:
    """Ray Data's transport floor: a read task for each of read_recording's, each yielding as
    many blocks (``blocks[i]``) of the columns and size of a batch's (obs and next_obs frames
    of zeros, made a block by Ray: tensor columns without a copy) and reading nothing."""
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    size = 2 * steps * SIZE * SIZE * 3

    def block(count: int) -> list:
        out = []
        for _ in range(count):
            frames = np.zeros((steps + 1, SIZE, SIZE, 3), dtype=np.uint8)
            out.append(BlockAccessor.batch_to_block({"obs": frames[:-1], "next_obs": frames[1:]}))
        return out

    class Zeros(Datasource):
        def estimate_inmemory_data_size(self) -> int:
            return sum(blocks) * size

        def get_read_tasks(self, parallelism: int, per_task_row_limit=None,
                           data_context=None) -> list:
            return [ReadTask(lambda c=count: block(c),
                             BlockMetadata(steps * count, size * count, None, None))
                    for count in blocks]

    t0 = time.perf_counter()
    n = 0
    ds = ray.data.read_datasource(Zeros(), override_num_blocks=len(blocks))
    ds.context.execution_options.preserve_order = True
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        n += batch["obs"].nbytes + batch["next_obs"].nbytes
    return time.perf_counter() - t0, n


def write_npy(directory: str, out: str) -> list[str]:
    """The bytes read_recording delivers, as Ray's own reader reads them: one .npy per batch
    holding that batch's obs and next_obs frames (2 x steps rows)."""
    os.makedirs(out)
    paths = []
    with RecordingReader(directory) as reader:
        for info in reader.batches():
            frames = []
            for part in reader.read_batch(info):
                n = len(part.rewards)
                o = part.observations
                frames += [o[:n], o[1:n + 1]] if part.part == 0 else [o[:n], o[:n]]
            if frames:
                paths.append(os.path.join(out, f"{info.number:06d}.npy"))
                np.save(paths[-1], np.concatenate(frames))
    return paths


def ray_numpy_pass(paths: list[str]) -> tuple[float, int]:
    """Ray Data's own file floor: ``ray.data.read_numpy`` of the same bytes, one task per file,
    iterated the same way."""
    import ray.data

    t0 = time.perf_counter()
    n = 0
    ds = ray.data.read_numpy(paths, override_num_blocks=len(paths))
    ds.context.execution_options.preserve_order = True
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        n += batch["data"].nbytes
    return time.perf_counter() - t0, n


def line(name: str, seconds: float, nbytes: int) -> float:
    rate = nbytes / seconds / 1e6
    print(f"  {name:<40} {seconds:8.2f} s  {nbytes / 1e6:9.1f} MB  {rate:9.1f} MB/s", flush=True)
    return rate


def verdict(name: str, ours: float, base: float, target: float | None = None) -> None:
    ratio = ours / base
    tail = (f" (target >= {target:.2f}: {'ok' if ratio >= target else 'MISS'})" if target
            else "")
    print(f"  {name:<48} {ratio:6.2f}{tail}")


def measure(passes: dict[str, Any], repeats: int) -> dict[str, float]:
    """Runs every pass ``repeats`` times, alternating, and returns each one's median MB/s."""
    rates: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(repeats):
        for name, run in passes.items():
            rates[name].append(line(name, *run()))
    print("  medians (MB/s): " + ", ".join(f"{k} {statistics.median(v):.0f}"
                                           for k, v in rates.items()))
    return {k: statistics.median(v) for k, v in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="recording size (default 1 GB)")
    parser.add_argument("--s3-episodes", type=int, default=20,
                        help="episodes read through moto (default 20, about 420 MB of frames)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating runs of each side (median taken; default 3)")
    parser.add_argument("--skip-s3", action="store_true")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bench_ray_")
    try:
        d = os.path.join(work, "images")
        t0 = time.perf_counter()
        episodes, total = make_recording(d, args.gb)
        print(f"recording: {episodes} episodes of {EPISODE} steps, {SIZE}x{SIZE}x3 uint8, "
              f"{total / 1e6:,.0f} MB on disk, {len(os.listdir(d))} files "
              f"({time.perf_counter() - t0:.0f} s to record)")
        npy = write_npy(d, os.path.join(work, "npy"))
        warm(d)
        warm(os.path.join(work, "npy"))

        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": REPO}})
        try:
            import ray.data

            ctx = ray.data.DataContext.get_current()
            ctx.enable_progress_bars = False
            ctx.print_on_execution_start = False
            ray_pass(d)  # start the workers once, untimed
            from gym_recorder.integrations.ray import RecordingDatasource

            source = RecordingDatasource(d)
            batches, tasks = source.batches, source.tasks
            grouped = source.task_batches  # a block per batch
            with RecordingReader(d) as reader:
                steps = round(sum(s.length for s in reader.summaries()) / batches)
            print(f"1. read_recording (Ray, 2 CPUs, {batches} batches in {tasks} read tasks; "
                  f"and a task per batch) vs RecordingReader, local, page cache")
            ours_name = f"read_recording ({tasks} tasks)"
            one_name = f"read_recording ({batches} tasks)"
            zeros_name = f"Ray floor: {tasks} tasks, {sum(grouped)} blocks of zeros"
            zeros1_name = f"Ray floor: {batches} tasks x 1 block of zeros"
            numpy_name = f"Ray floor: read_numpy, {len(npy)} files"
            r = measure({"RecordingReader": lambda: reader_pass(d),
                         ours_name: lambda: ray_pass(d),
                         one_name: lambda: ray_pass(d, batches_per_task=1),
                         zeros_name: lambda: ray_zeros_pass(grouped, steps),
                         zeros1_name: lambda: ray_zeros_pass([1] * batches, steps),
                         numpy_name: lambda: ray_numpy_pass(npy)},
                        args.repeats)
        finally:
            ray.shutdown()
        ours, reader_rate = r[ours_name], r["RecordingReader"]
        verdict("read_recording / RecordingReader", ours, reader_rate, RAY_TARGET)
        verdict("read_recording, a task per batch / RecordingReader", r[one_name], reader_rate,
                RAY_TARGET)
        for name in (zeros_name, zeros1_name, numpy_name):
            verdict(f"{name[11:]} / RecordingReader", r[name], reader_rate)
        verdict("read_recording / Ray floor (zeros, same tasks)", ours, r[zeros_name])
        verdict("read_recording, a task per batch / its floor", r[one_name], r[zeros1_name])

        if not args.skip_s3:
            s3_part(d, min(args.s3_episodes, episodes), args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def s3_part(d: str, episodes: int, repeats: int) -> None:
    import logging
    import socket

    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    from gym_recorder.integrations.cloud import push

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(k, v)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        opts = {"endpoint_url": endpoint}
        t0 = time.perf_counter()
        result = push(d, "s3://bench/images", storage_options=opts)
        pushed = time.perf_counter() - t0
        print(f"2. RecordingReader at s3:// (moto on 127.0.0.1) vs local, first {episodes} "
              f"episodes (push: {result.bytes_uploaded / 1e6:,.0f} MB in {pushed:.1f} s)")
        _, delivered = reader_pass(d, episodes=episodes)
        with RecordingReader(d) as reader:
            names = [n for info in reader.batches() if min(info.episodes, default=episodes) < episodes
                     for n in (info.json_name, info.bin_name)]
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)

        def cat_pass() -> tuple[float, int]:
            fs.invalidate_cache()
            t0 = time.perf_counter()
            got = sum(len(fs.cat_file(f"bench/images/{n}")) for n in names)
            seconds = time.perf_counter() - t0
            assert got == sum(os.path.getsize(os.path.join(d, n)) for n in names)
            return seconds, delivered

        r = measure({"local": lambda: reader_pass(d, episodes=episodes),
                     "s3 (moto)": lambda: reader_pass("s3://bench/images", opts,
                                                      episodes=episodes),
                     f"floor: s3fs cat_file, {len(names)} files": cat_pass}, repeats)
        floor = r[f"floor: s3fs cat_file, {len(names)} files"]
        verdict("s3 (moto) / local", r["s3 (moto)"], r["local"])
        verdict("s3 (moto) / floor (s3fs cat_file)", r["s3 (moto)"], floor)
        verdict("floor (s3fs cat_file) / local", floor, r["local"])
    finally:
        server.stop()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
