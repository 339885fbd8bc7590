"""Benchmarks gym_recorder: recording overhead and stability, reading speed, peak memory.

The run is put together here; each part lives in its own module:

* :mod:`harness`: run sizes (:class:`harness.Config`), memory priming, statistics, machine load;
* :mod:`recorders`: the cases and every recorder compared (bare, floor, sync, Minari);
* :mod:`recording`: per-step cost, interleaved repeats; stability warm, with a neighbouring
  writer, and cold (a fresh process);
* :mod:`reading`: open + fetch, iterating every episode, a whole-recording column;
* :mod:`memory`: peak RSS of a long episode, in subprocesses;
* :mod:`profiling`: ``--profile``; :mod:`report`: the tables and the ``ok``/``MISS`` targets.

Run from the repository root (the checkout's ``gym_recorder`` is imported, not an installed one)::

    python benchmarks/bench.py            # full run
    python benchmarks/bench.py --quick    # a few minutes
    python benchmarks/bench.py --tiny     # seconds: every line, meaningless figures (CI smoke)
    python benchmarks/bench.py --quick --json results.json --profile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]  # benchmark the checkout, not whatever version is installed

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import gym_recorder  # noqa: E402
from gym_recorder.record.wrapper import DEFAULT_TARGET_BATCH_BYTES  # noqa: E402

from harness import MIB, Config, own_seconds, system_busy_seconds  # noqa: E402
from memory import bench_rss, rss_child  # noqa: E402
from reading import (bench_open_fetch, bench_random_access, bench_read_throughput,  # noqa: E402
                     record)
from recorders import IMAGE_ENV, cases, minari_collector, stress_case  # noqa: E402
from recording import bench_recording, bench_stress, cold_child, summarize_recording  # noqa: E402
from report import report, targets  # noqa: E402

SCRIPT = os.path.abspath(__file__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    size.add_argument("--tiny", action="store_true",
                      help="the smallest run that prints every line (CI smoke; figures "
                           "meaningless)")
    p.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    p.add_argument("--profile", action="store_true",
                   help="also print cProfile of recording and reading, per-step percentiles")
    p.add_argument("--no-minari", action="store_true", help="skip Minari even if installed")
    p.add_argument("--no-prime", action="store_true",
                   help="do not touch memory before each run (see harness.prime_memory)")
    p.add_argument("--neighbour-mb", type=int, default=None,
                   help="MB the neighbouring process writes during the stress recording "
                        "(default 1024; --quick 256; --tiny 8)")
    p.add_argument("--skip", default="",
                   help="comma-separated parts to leave out: recording,stress,reading,rss "
                        "(their targets then print MISS 'not measured')")
    p.add_argument("--workdir", help="where recordings go (default: a new temp directory)")
    p.add_argument("--rss-child", help=argparse.SUPPRESS)
    p.add_argument("--rss-steps", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cold-child", help=argparse.SUPPRESS)
    p.add_argument("--cold-steps", type=int, default=0, help=argparse.SUPPRESS)
    return p


def _reading(cfg: Config, workdir: str, log: Any) -> dict:
    n = cfg.read_episodes
    log(f"reading: recording {n} CartPole-v1 episodes")
    cp_dir = os.path.join(workdir, "read-cartpole")
    t0 = time.perf_counter()
    cp_steps = record(cp_dir, lambda: gym.make("CartPole-v1"), n)
    log(f"  {cp_steps} steps recorded in {time.perf_counter() - t0:.1f}s")
    out: dict[str, Any] = {"open_fetch": bench_open_fetch(cp_dir, cfg.pick(41, 15, 3)),
                           "random": bench_random_access(cp_dir, cfg.pick(5, 3, 1),
                                                         cfg.pick(4000, 2000, 50)),
                           "throughput": {}, "dirs": {}}
    out["throughput"]["CartPole-v1"] = bench_read_throughput(cp_dir, cfg.read_repeats, cfg.prime)
    for name, h, w, total in [("84x84x3", 84, 84, cfg.pick(10_000, 4_000, 400)),
                              ("210x160x3", 210, 160, cfg.pick(4_000, 1_500, 200))]:
        ep_len = min(500, total)
        log(f"reading: recording {total} steps of {name}")
        d = os.path.join(workdir, f"read-{name}")
        record(d, lambda h=h, w=w: gym.make(IMAGE_ENV, height=h, width=w,
                                            episode_length=ep_len), total // ep_len)
        out["throughput"][name] = bench_read_throughput(d, cfg.read_repeats, cfg.prime)
    out["dirs"] = {"CartPole-v1": cp_dir}
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    neighbour_mb = args.neighbour_mb if args.neighbour_mb is not None else \
        {"full": 1024, "quick": 256, "tiny": 8}[mode]
    cfg = Config(mode, prime=not args.no_prime, neighbour_bytes=neighbour_mb * MIB)
    if args.rss_child:
        print(json.dumps(rss_child(args.rss_child, args.rss_steps,
                                   args.workdir or tempfile.gettempdir())))
        return 0
    if args.cold_child:
        print(json.dumps(cold_child(stress_case(cfg), args.cold_child, args.cold_steps,
                                    args.workdir or tempfile.gettempdir())))
        return 0
    skip = {s for s in args.skip.split(",") if s}

    started = time.perf_counter()
    busy_start, own_start = system_busy_seconds(), own_seconds()
    workdir = tempfile.mkdtemp(prefix="gym_recorder-bench-", dir=args.workdir)
    os.environ["MINARI_DATASETS_PATH"] = os.path.join(workdir, "minari")

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    try:
        if args.no_minari or mode == "tiny":
            minari_wrap, minari_formats, minari_note = None, [], "Minari skipped"
        else:
            minari_wrap, minari_formats, minari_note = minari_collector()
        log(minari_note)
        results: dict[str, Any] = {"meta": {
            "mode": mode, "repeats": cfg.repeats, "minari_repeats": cfg.minari_repeats,
            "minari": minari_note, "prime": cfg.prime,
            "gym_recorder": f"{gym_recorder.__version__} ({os.path.dirname(gym_recorder.__file__)})",
            "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "machine": platform.processor() or platform.machine(),
            "command": " ".join([os.path.relpath(SCRIPT, REPO), *sys.argv[1:]])},
            "recording": {}}
        if "recording" not in skip:
            for case in cases(cfg):
                log(f"recording {case.label}: {case.steps} steps x {cfg.repeats} repeats")
                samples = bench_recording(case, cfg, workdir, minari_wrap, minari_formats, log)
                results["recording"][case.key] = {"label": case.label,
                                                  "variants": summarize_recording(samples)}
        if "stress" not in skip:
            case = stress_case(cfg)
            log(f"stability: {case.steps} steps of {case.label}, warm / neighbour "
                f"{neighbour_mb} MB / cold, x {cfg.repeats}")
            results["stress"] = bench_stress(case, cfg, workdir, SCRIPT, log)
        results["reading"] = {"open_fetch": None, "throughput": {}}
        if "reading" not in skip:
            results["reading"] = _reading(cfg, workdir, log)
        rss_steps = cfg.pick(30_000, 8_000, 500)
        results["rss"] = {"steps": rss_steps, "episode_mb": rss_steps * 84 * 84 * 3 / MIB,
                          "batch_target_mb": DEFAULT_TARGET_BATCH_BYTES / MIB, "variants": {}}
        if "rss" not in skip:
            log(f"peak RSS: {rss_steps}-step 84x84x3 episode per variant (subprocesses)")
            results["rss"]["variants"] = bench_rss(
                ["bare", "gym_recorder"] + [f"minari-{f}" for f in minari_formats], rss_steps,
                workdir, SCRIPT)
        results["targets"] = targets(results)

        profiles: dict[str, str] = {}
        if args.profile:
            from profiling import profile_case, profile_reading, step_distribution
            for case in cases(cfg):
                if case.key == "image84":
                    continue
                n = cfg.pick(50_000, 50_000, 500) if case.key == "cartpole" else \
                    cfg.pick(2_000, 2_000, 100)
                log(f"profile: {case.label}")
                profiles[f"recording {case.key}"] = profile_case(case, n, workdir)
                dist = step_distribution(case, n, workdir)
                profiles[f"per-step us {case.key}"] = "\n".join(
                    f"  {v:<29} " + ("  ".join(f"{q} {x:.2f}" for q, x in d.items())
                                      if "error" not in d else d["error"])
                    for v, d in dist.items())
            cp_dir = results["reading"].get("dirs", {}).get("CartPole-v1")
            if cp_dir:
                profiles["reading CartPole-v1"] = profile_reading(cp_dir)
            results["profile"] = profiles
        seconds = time.perf_counter() - started
        results["meta"]["seconds"] = round(seconds, 1)
        busy = system_busy_seconds()
        if busy is not None and busy_start is not None:
            others = busy - busy_start - (own_seconds() - own_start)
            results["meta"]["others_cpu_fraction"] = max(others, 0.0) / seconds

        report(results, print)
        for name, text in profiles.items():
            print(f"\nProfile: {name}")
            print(text)
        print(f"\n(total {results['meta']['seconds']} s; reproduce: python "
              f"{results['meta']['command']})")
        if args.json:
            results["reading"].pop("dirs", None)
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
