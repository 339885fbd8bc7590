"""What recording costs on real Atari envs (ale-py): bare step, and the time each recorder adds.

    python benchmarks/bench_ale.py                 # 3 interleaved repeats of 2,000 steps per env
    python benchmarks/bench_ale.py --steps 5000 --repeats 5
    python benchmarks/bench_ale.py --variants      # also the writer's page-cache policies

Variants, in interleaved repeats (each repeat runs every variant once, in a rotated order), all
replaying the same pre-generated actions with the same reset seeds:

* ``bare``: the env from ``gym.make``.
* ``naive``: the seed's synchronous design (benchmarks/recorders.py ``SyncBatchRecorder``): a new
  array per frame, stacked and written with a small JSON index when a batch reaches ~5 MB, in the
  stepping thread; fsync at close.
* ``gym_recorder``: ``RecordingWrapper`` with its defaults.
* with ``--variants``: ``gym_recorder`` with each page-cache policy of
  :data:`gym_recorder.record.writer.WRITEBACK_POLICIES`, and ``fsync=True``.

Printed per env: the bare step (median µs), each variant's added µs/step (median over repeats of
variant − bare in the same repeat; min / max too), ``+close`` (with the final close),
``best-best`` (the variant's fastest repeat minus bare's fastest: on a shared machine, the figure
least disturbed by neighbours), and the
targets of issue 33: added ≤ 10% of the bare step, and never more than the naive design adds.
Needs ``pip install ale-py`` (it ships the ROMs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's gym_recorder, not an installed one
sys.path.insert(0, HERE)

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from gym_recorder import RecordingWrapper  # noqa: E402
from gym_recorder.record import writer as writer_module  # noqa: E402
from recorders import SyncBatchRecorder  # noqa: E402

# Target of issue 33 on ALE (raw frames): the recorder adds at most this share of the bare step.
MAX_ADDED_SHARE = 0.10


def make_env(name: str) -> gym.Env:
    import ale_py

    gym.register_envs(ale_py)
    if name.endswith("+pre"):  # AtariPreprocessing (84x84 grey) + 4 stacked frames
        env = gym.make(name[:-4], frameskip=1)
        env = gym.wrappers.AtariPreprocessing(env)
        return gym.wrappers.FrameStackObservation(env, 4)
    return gym.make(name)


def run(env: gym.Env, actions: np.ndarray) -> tuple[float, float]:
    """Steps through ``actions`` (resetting with seeds 0, 1, ... at episode ends); returns the
    seconds of the stepping loop, and with the final close()."""
    seed = 0
    env.reset(seed=seed)
    start = time.perf_counter()
    for a in actions.tolist():
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            seed += 1
            env.reset(seed=seed)
    loop = time.perf_counter() - start
    env.close()
    return loop, time.perf_counter() - start


def policy_variant(policy: str, mode: str | None = None,
                   **kwargs: Any) -> Callable[[gym.Env, str], gym.Env]:
    def wrap(env: gym.Env, directory: str) -> gym.Env:
        writer_module.WRITEBACK = policy
        writer_module.WRITE_MODE = mode or writer_module.DEFAULT_WRITE_MODE
        return RecordingWrapper(env, directory, **kwargs)
    return wrap


def variants(extra: bool) -> dict[str, Callable[[gym.Env, str], gym.Env] | None]:
    out: dict[str, Callable[[gym.Env, str], gym.Env] | None] = {
        "bare": None, "naive": SyncBatchRecorder,
        "gym_recorder": policy_variant(writer_module.DEFAULT_WRITEBACK)}
    if extra:
        for policy in writer_module.WRITEBACK_POLICIES:
            if policy != writer_module.DEFAULT_WRITEBACK:
                out[f"gym_recorder[{policy}]"] = policy_variant(policy)
        out["gym_recorder[fsync]"] = policy_variant(writer_module.DEFAULT_WRITEBACK, fsync=True)
        for mode in writer_module.WRITE_MODES:
            if mode != writer_module.DEFAULT_WRITE_MODE:
                out[f"gym_recorder[{mode}]"] = policy_variant(writer_module.DEFAULT_WRITEBACK, mode)
                out[f"gym_recorder[{mode},lazy-drop]"] = policy_variant("lazy-drop", mode)
    return out


def measure(name: str, steps: int, repeats: int, extra: bool, workdir: str,
            only: list[str] | None = None) -> dict[str, Any]:
    env = make_env(name)
    env.action_space.seed(0)
    actions = np.array([env.action_space.sample() for _ in range(steps)])
    env.close()
    kinds = variants(extra)
    if only:
        kinds = {k: v for k, v in kinds.items() if k in ("bare", "naive", "gym_recorder") or k in only}
    loops: dict[str, list[float]] = {k: [] for k in kinds}
    closes: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(repeats):
        order = list(kinds)
        order = order[r % len(order):] + order[:r % len(order)]
        for kind in order:
            directory = tempfile.mkdtemp(dir=workdir)
            wrap = kinds[kind]
            env = make_env(name)
            if wrap is not None:
                env = wrap(env, directory)
            loop, total = run(env, actions)
            loops[kind].append(loop / steps * 1e6)
            closes[kind].append(total / steps * 1e6)
            shutil.rmtree(directory)
    writer_module.WRITEBACK = writer_module.DEFAULT_WRITEBACK
    writer_module.WRITE_MODE = writer_module.DEFAULT_WRITE_MODE
    bare = loops["bare"]
    out: dict[str, Any] = {"bare": statistics.median(bare), "bare_min": min(bare), "added": {},
                           "close": {}, "best": {}}
    for kind in kinds:
        if kind == "bare":
            continue
        added = [v - b for v, b in zip(loops[kind], bare)]
        out["added"][kind] = added
        out["best"][kind] = min(loops[kind]) - min(bare)  # (least disturbed by neighbours)
        out["close"][kind] = statistics.median(
            [v - b for v, b in zip(closes[kind], closes["bare"])])
    return out


def report(name: str, res: dict[str, Any]) -> list[str]:
    bare = res["bare"]
    print(f"\n{name}: bare step {bare:.1f} us (median of the repeats)")
    print(f"  {'variant':28s} {'added us/step':>14s} {'min':>8s} {'max':>8s} {'+close':>8s} "
          f"{'share':>7s} {'best-best':>10s}")
    for kind, added in res["added"].items():
        print(f"  {kind:28s} {statistics.median(added):+14.1f} {min(added):+8.1f} "
              f"{max(added):+8.1f} {res['close'][kind]:+8.1f} "
              f"{statistics.median(added) / bare:7.1%} {res['best'][kind]:+10.1f}")
    ours, naive = res["added"]["gym_recorder"], res["added"]["naive"]
    med = statistics.median(ours)
    lines = [
        f"{'ok  ' if med <= MAX_ADDED_SHARE * bare else 'MISS'}  ale.{name}.share  added <= "
        f"{MAX_ADDED_SHARE:.0%} of the bare step ({MAX_ADDED_SHARE * bare:.1f} us): "
        f"{med:+.1f} us = {med / bare:.1%}",
        f"{'ok  ' if med <= statistics.median(naive) else 'MISS'}  ale.{name}.vs_naive  "
        f"added never more than the naive design's: ours {med:+.1f} us, naive "
        f"{statistics.median(naive):+.1f} us (medians)"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="ALE/Breakout-v5,ALE/Pong-v5,ALE/Breakout-v5+pre")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", action="store_true", help="the writer's policies too")
    parser.add_argument("--only", default="", help="with --variants: these variants only "
                        "(comma-separated names as printed, e.g. 'gym_recorder[lazy-drop]')")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench_ale.", dir=args.workdir)
    start = time.perf_counter()
    targets: list[str] = []
    try:
        for name in args.envs.split(","):
            targets += report(name, measure(name, args.steps, args.repeats, args.variants,
                                            workdir, [v for v in args.only.split(",") if v]))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nTargets (issue 33, ALE)")
    for line in targets:
        print("  " + line)
    print(f"\n(total {time.perf_counter() - start:.1f} s; reproduce: python benchmarks/"
          f"bench_ale.py {' '.join(sys.argv[1:])})")


if __name__ == "__main__":
    main()
