"""Times ``verify`` and making Ray's datasource on two recordings: 2,000 random CartPole episodes
and 2,000 steps of 84x84x3 images (``sample_envs/Image-v0``, 500-step episodes).

Both read a batch through the reader's plan (issue 33 §1). To compare two checkouts, run this
once per checkout with the same ``--dir`` (recorded once, by the first run), alternating::

    PYTHONPATH=/path/to/before python benchmarks/bench_verify.py --dir /tmp/bv
    PYTHONPATH=/path/to/after python benchmarks/bench_verify.py --dir /tmp/bv

Prints the median of ``--repeats`` runs of each (every file read once first: page cache warm).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gymnasium as gym  # noqa: E402

import gym_recorder  # noqa: E402
from gym_recorder.integrity import verify  # noqa: E402
from reading import record  # noqa: E402
from recorders import IMAGE_ENV  # noqa: E402

RECORDINGS = {
    "CartPole-v1 (2,000 episodes)": ("cartpole", lambda: gym.make("CartPole-v1"), 2000),
    "84x84x3 (2,000 steps)": ("img84", lambda: gym.make(IMAGE_ENV, height=84, width=84,
                                                        episode_length=500), 4),
}


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="where the recordings are (made if missing)")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    try:
        from gym_recorder.integrations.ray import _datasource_class
        datasource = _datasource_class()
    except ImportError:
        datasource = None
    print(f"gym_recorder from {os.path.dirname(gym_recorder.__file__)}")
    for label, (name, make, episodes) in RECORDINGS.items():
        d = os.path.join(args.dir, name)
        if not os.path.isdir(d):
            record(d, make, episodes)
        problems = verify(d)
        assert problems == [], problems
        line = f"{label}: verify {_median_ms(lambda: verify(d), args.repeats):.1f} ms"
        if datasource is not None:
            made = _median_ms(lambda: datasource(d), 4 * args.repeats)
            line += f", Ray datasource {made:.2f} ms"
        print(line)


if __name__ == "__main__":
    main()
