"""What recording a PettingZoo env costs, per agent-step, beside the bare env.

Each case runs the same pre-drawn actions through the bare env and through the recording
wrapper (``RecordingParallelWrapper`` / ``RecordingAECWrapper`` with their defaults), the
repeats of the two interleaved, and reports medians: microseconds per agent-step (Parallel:
one agent's part of a step, i.e. step time / live agents; AEC: one turn), the recorder's
extra microseconds per agent-step, and the ratio recorded / bare (stepping only); the time
spent inside the recorder's own row building and buffering ("own", timed around it: on a
loaded machine the bare/recorded difference is noisier than this); and the recorder's
close() (the last batches written and fsynced) apart, in milliseconds.

    python benchmarks/bench_multiagent.py              # about a minute
    python benchmarks/bench_multiagent.py --quick      # seconds (figures noisy)

Run from the repository root (it imports the checkout's gym_recorder).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from gym_recorder.record import agent_rows  # noqa: E402
from gym_recorder.record.multiagent import (RecordingAECWrapper,  # noqa: E402
                                            RecordingParallelWrapper)
from gym_recorder.replay.drive_agents import random_action  # noqa: E402
from gym_recorder.replay.multiagent import make_multiagent_env  # noqa: E402

CASES = [
    # (name, entry point, kwargs, episodes)
    ("tictactoe (AEC, 2 agents)", "pettingzoo.classic.tictactoe_v3:env", {}, 200),
    ("connect_four (AEC, 2 agents)", "pettingzoo.classic.connect_four_v3:env", {}, 60),
    ("pursuit (Parallel, 8 agents, 7x7x3 obs)", "pettingzoo.sisl.pursuit_v5:parallel_env",
     {"max_cycles": 100}, 4),
    ("knights_archers_zombies (Parallel, 4 agents, 27x5 obs)",
     "pettingzoo.butterfly.knights_archers_zombies_v11:parallel_env", {"max_cycles": 200}, 3),
]


def _actions_aec(entry: str, kwargs: dict[str, Any], episodes: int) -> list[list[Any]]:
    """Plays once with the random policy and keeps every turn's action (the same run again
    with these actions takes the same turns)."""
    env = make_multiagent_env(entry, kwargs)
    runs = []
    for e in range(episodes):
        env.reset(seed=e)
        for k, a in enumerate(env.possible_agents):
            env.action_space(a).seed(e * 100 + k)
        acts = []
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            act = None if term or trunc else random_action(env.action_space(agent), obs, info)
            acts.append(act)
            env.step(act)
        runs.append(acts)
    env.close()
    return runs


def _actions_parallel(entry: str, kwargs: dict[str, Any], episodes: int) -> list[list[Any]]:
    env = make_multiagent_env(entry, kwargs)
    runs = []
    for e in range(episodes):
        env.reset(seed=e)
        for k, a in enumerate(env.possible_agents):
            env.action_space(a).seed(e * 100 + k)
        acts = []
        while env.agents:
            step = {a: env.action_space(a).sample() for a in env.agents}
            acts.append(step)
            env.step(step)
        runs.append(acts)
    env.close()
    return runs


def _run(env: Any, runs: list[list[Any]], aec: bool) -> tuple[float, int, float]:
    """Seconds and agent-steps of replaying ``runs`` in ``env``, and seconds of closing it."""
    agent_steps = 0
    start = time.perf_counter()
    for e, acts in enumerate(runs):
        if aec:
            env.reset(seed=e)
            for act in acts:
                env.last()
                env.step(act)
            agent_steps += len(acts)
        else:
            env.reset(seed=e)
            for step in acts:
                env.step(step)
                agent_steps += len(step)
    stepped = time.perf_counter()
    env.close()
    return stepped - start, agent_steps, time.perf_counter() - stepped


_OWN = [0.0]  # seconds spent in the recorder's row building and buffering


def _timing_own_time() -> None:
    """Times AgentRows' row, action_row and add (every row goes through them): the
    recorder's own share of a recorded step, which the bare/recorded difference measures
    only as well as the machine's noise allows."""
    for name in ("row", "action_row", "add"):
        method = getattr(agent_rows.AgentRows, name)

        def timed(*args: Any, _method: Any = method) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args)
            finally:
                _OWN[0] += time.perf_counter() - start

        setattr(agent_rows.AgentRows, name, timed)


def bench(entry: str, kwargs: dict[str, Any], episodes: int, repeats: int,
          workdir: str) -> dict[str, float]:
    aec = not entry.endswith(":parallel_env")
    runs = (_actions_aec if aec else _actions_parallel)(entry, kwargs, episodes)
    wrapper = RecordingAECWrapper if aec else RecordingParallelWrapper
    bare, rec, close, own = [], [], [], []
    for r in range(repeats):
        order = (False, True) if r % 2 == 0 else (True, False)  # (drift hits both alike)
        for recording in order:
            directory = os.path.join(workdir, f"rec{r}")
            env = make_multiagent_env(entry, kwargs)
            _OWN[0] = 0.0
            seconds, n, closing = _run(wrapper(env, directory) if recording else env, runs, aec)
            (rec if recording else bare).append(seconds / n)
            if recording:
                close.append(closing)
                own.append(_OWN[0] / n)
                shutil.rmtree(directory)
    b, c = statistics.median(bare), statistics.median(rec)
    return {"agent_steps": n, "bare_us": b * 1e6, "recorded_us": c * 1e6,
            "extra_us": (c - b) * 1e6, "ratio": c / b, "close_ms": statistics.median(close) * 1e3,
            "own_us": statistics.median(own) * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few episodes and repeats")
    parser.add_argument("--repeats", type=int, default=None, help="repeats of each variant")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 7)
    _timing_own_time()
    print(f"{'case':<58}{'agent-steps':>12}{'bare us':>10}{'rec us':>10}{'extra us':>10}"
          f"{'ratio':>8}{'own us':>8}{'close ms':>10}")
    with tempfile.TemporaryDirectory() as workdir:
        for name, entry, kwargs, episodes in CASES:
            n_eps = max(1, episodes // 10) if args.quick else episodes
            r = bench(entry, kwargs, n_eps, repeats, workdir)
            print(f"{name:<58}{r['agent_steps']:>12,}{r['bare_us']:>10.1f}"
                  f"{r['recorded_us']:>10.1f}{r['extra_us']:>10.1f}{r['ratio']:>8.2f}"
                  f"{r['own_us']:>8.1f}{r['close_ms']:>10.1f}")
    print(f"medians of {repeats} interleaved repeats; per agent-step = per AEC turn, or a "
          "Parallel step's time / the agents acting in it; own us: time inside the recorder's "
          "row building and buffering (a timer around it, included in rec us)")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
