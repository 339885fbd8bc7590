"""Benchmarks what recording an env's info dicts adds to a step.

One process, a MuJoCo-like env made here (no MuJoCo needed): Box(11,) float64 observations,
Box(3,) float32 actions, and at every step an info of five numpy float64 scalars, as Hopper-v5
and HalfCheetah-v5 give (``x_position``, ``x_velocity``, ``reward_forward``, ``reward_ctrl``,
``reward_survive``). Interleaved repeats of ``--steps`` steps each:

- baseline: the bare env;
- the env in ``RecordingWrapper`` (infos recorded);
- the env in ``RecordingWrapper(record_infos=False)``.

Reported: the bare step time and, as medians, what each recorder adds per step, and the infos'
share (the difference of the two).

Run from the repository root::

    python benchmarks/bench_infos.py                 # about 20 s
    python benchmarks/bench_infos.py --steps 50000 --repeats 9
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gym_recorder import RecordingWrapper


class InfoEnv(gym.Env):
    """Box(11,) float64 observations, and five numpy float64 info values every step."""

    observation_space = spaces.Box(-np.inf, np.inf, (11,), np.float64)
    action_space = spaces.Box(-1, 1, (3,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        self.obs = np.zeros(11)
        return self.obs.copy(), {"x_position": np.float64(0.0)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.obs += 0.01
        info = {"x_position": np.float64(self.t), "x_velocity": np.float64(0.2),
                "reward_forward": np.float64(0.3), "reward_ctrl": np.float64(-0.01),
                "reward_survive": np.float64(1.0)}
        return self.obs.copy(), 1.0, False, self.t >= 1000, info


def run(mode: str, steps: int) -> float:
    """Microseconds per step of ``steps`` steps: "bare", "infos" or "no-infos"."""
    directory = tempfile.mkdtemp()
    env: gym.Env = InfoEnv()
    if mode != "bare":
        env = RecordingWrapper(env, directory, record_infos=mode == "infos")
    action = np.zeros(3, np.float32)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        truncated = env.step(action)[3]
        if truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    shutil.rmtree(directory)
    return elapsed / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"bare": [], "infos": [], "no-infos": []}
    for _ in range(args.repeats):
        for mode in times:
            times[mode].append(run(mode, args.steps))
    bare = statistics.median(times["bare"])
    infos = statistics.median(times["infos"]) - bare
    without = statistics.median(times["no-infos"]) - bare
    print(f"bare step: {bare:.2f} us (medians of {args.repeats} interleaved repeats of "
          f"{args.steps:,} steps)")
    print(f"added, infos recorded:      +{infos:.2f} us/step")
    print(f"added, record_infos=False:  +{without:.2f} us/step")
    ratio = infos / without if without > 0 else float("nan")
    print(f"the five info values:       +{infos - without:.2f} us/step (with infos the recorder "
          f"adds {ratio:.2f}x what it adds without)")


if __name__ == "__main__":
    main()
