"""Benchmarks gym_recorder.ray and object storage: read throughput against the plain reader.

One process, one run, on the same image recording (``sample_envs/Image-v0``, 84x84x3 uint8,
1,000-step episodes, default batches of about 5 MB):

1. ``read_recording`` (step rows, ``iter_batches(batch_format="numpy")``) on a local Ray cluster
   of 2 CPUs against ``RecordingReader`` iterating every episode, both from the page cache (every
   file read once first). Target: Ray at least 50% of the reader's throughput.
2. ``RecordingReader`` at an ``s3://`` URL served by moto's ThreadedMotoServer on 127.0.0.1 (in
   this process) against the same reader on the local directory, on a smaller prefix of the
   episodes (moto keeps objects in memory and serves them from Python). Printed for information:
   moto is no model of real S3's bandwidth.

Throughput is bytes of observations delivered per second (each step row carries its observation
and next observation; the reader's episodes carry N + 1 observations per N steps, counted the
same way as 2 per step so that both sides are compared on the same work). The better of
``--repeats`` runs is taken for each side, runs alternating.

Run from the repository root::

    python benchmarks/bench_ray.py               # 1 GB, a few minutes
    python benchmarks/bench_ray.py --gb 0.25     # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

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


def ray_pass(location: str) -> tuple[float, int]:
    from gym_recorder.ray import read_recording

    t0 = time.perf_counter()
    n = 0
    for batch in read_recording(location).iter_batches(batch_format="numpy", batch_size=None):
        n += batch["obs"].nbytes + batch["next_obs"].nbytes
    return time.perf_counter() - t0, n


def ray_floor_pass(tasks: int, steps: int) -> tuple[float, int]:
    """Ray Data's own floor: the same number of read tasks, each yielding a block of the same
    columns (obs and next_obs frames, zeros) without reading anything."""
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    def block() -> list:
        frames = np.zeros((steps + 1, SIZE, SIZE, 3), dtype=np.uint8)
        return [BlockAccessor.batch_to_block({"obs": frames[:-1], "next_obs": frames[1:]})]

    class Zeros(Datasource):
        def estimate_inmemory_data_size(self) -> int:
            return tasks * 2 * steps * SIZE * SIZE * 3

        def get_read_tasks(self, parallelism: int, per_task_row_limit=None,
                           data_context=None) -> list:
            return [ReadTask(block, BlockMetadata(steps, 2 * steps * SIZE * SIZE * 3, None,
                                                  None)) for _ in range(tasks)]

    t0 = time.perf_counter()
    n = 0
    ds = ray.data.read_datasource(Zeros())
    ds.context.execution_options.preserve_order = True
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        n += batch["obs"].nbytes + batch["next_obs"].nbytes
    return time.perf_counter() - t0, n


def line(name: str, seconds: float, nbytes: int) -> float:
    rate = nbytes / seconds / 1e6
    print(f"  {name:<34} {seconds:8.2f} s  {nbytes / 1e6:9.1f} MB  {rate:9.1f} MB/s")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="recording size (default 1 GB)")
    parser.add_argument("--s3-episodes", type=int, default=40,
                        help="episodes read through moto (default 40, about 850 MB of frames)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side (best taken)")
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
        warm(d)

        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": REPO}})
        try:
            ray_pass(d)  # start the workers once, untimed
            with RecordingReader(d) as reader:
                tasks = len(reader.batches())
                steps = round(sum(s.length for s in reader.summaries()) / tasks)
            best_reader = best_ray = best_floor = 0.0
            print("1. read_recording (Ray, 2 CPUs) vs RecordingReader, local, page cache")
            for _ in range(args.repeats):
                best_reader = max(best_reader, line("RecordingReader", *reader_pass(d)))
                best_ray = max(best_ray, line("read_recording iter_batches", *ray_pass(d)))
                best_floor = max(best_floor, line(f"Ray floor ({tasks} tasks of zeros)",
                                                  *ray_floor_pass(tasks, steps)))
        finally:
            ray.shutdown()
        ratio = best_ray / best_reader
        print(f"  ratio Ray / reader {ratio:.2f} (target >= {RAY_TARGET:.2f}): "
              f"{'ok' if ratio >= RAY_TARGET else 'MISS'}")
        print(f"  ratio Ray / Ray floor {best_ray / best_floor:.2f} (information: what Ray "
              f"Data itself moves here)")

        if not args.skip_s3:
            s3_part(d, min(args.s3_episodes, episodes), args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def s3_part(d: str, episodes: int, repeats: int) -> None:
    import logging
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    from gym_recorder.cloud import push

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
        best_local = best_s3 = 0.0
        for _ in range(repeats):
            best_local = max(best_local, line("local", *reader_pass(d, episodes=episodes)))
            best_s3 = max(best_s3, line("s3 (moto)", *reader_pass("s3://bench/images", opts,
                                                                 episodes=episodes)))
        print(f"  ratio S3 (moto) / local {best_s3 / best_local:.2f} (information: no target)")
    finally:
        server.stop()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
