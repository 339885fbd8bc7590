"""The ``gym-recorder`` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import RecorderError
from .reader import RecordingReader

__all__ = ["main"]


class CommandError(RecorderError):
    """A command cannot do what was asked (reported as one line on stderr)."""


def _make_env(env_id: str, env_kwargs: dict | None = None) -> Any:
    import gymnasium as gym

    if env_id.startswith("sample_envs/"):
        import sample_envs  # noqa: F401  (registers the sample envs)
    try:
        return gym.make(env_id, **(env_kwargs or {}))
    except gym.error.Error as e:
        raise CommandError(f"cannot make env {env_id!r}: {e}") from e


def _dir_bytes(directory: str) -> int:
    return sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(directory)
               if e.is_file(follow_symlinks=False))


def cmd_record(args: argparse.Namespace) -> int:
    from .wrapper import RecordingWrapper

    env = _make_env(args.env_id)
    steps = 0
    with RecordingWrapper(env, args.directory) as rec:
        rec.action_space.seed(args.seed)
        for i in range(args.episodes):
            rec.reset(seed=args.seed if i == 0 else None)
            done = False
            while not done:
                _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
                steps += 1
                done = terminated or truncated
        prefix = rec.file_prefix
    if not args.quiet:
        print(f"recorded {args.episodes} episodes, {steps} steps of {args.env_id} into "
              f"{args.directory} (writer {prefix}, {_dir_bytes(args.directory):,} bytes on disk)")
    return 0


def _summary(reader: RecordingReader) -> dict:
    lengths, returns, ends = [], [], {}
    for ep in reader:
        lengths.append(ep.length)
        returns.append(ep.total_reward)
        ends[str(ep.end)] = ends.get(str(ep.end), 0) + 1
    rets = np.array(returns) if returns else np.zeros(0)
    return {
        "directory": reader.directory,
        "env_id": reader.env_id,
        "episodes": len(lengths),
        "steps": int(sum(lengths)),
        "bytes": _dir_bytes(reader.directory),
        "writers": len(reader.writers),
        "observation_space": str(reader.observation_space),
        "action_space": str(reader.action_space),
        "return_mean": float(rets.mean()) if rets.size else None,
        "return_min": float(rets.min()) if rets.size else None,
        "return_max": float(rets.max()) if rets.size else None,
        "ends": ends,
    }


def cmd_info(args: argparse.Namespace) -> int:
    with RecordingReader(args.directory) as reader:
        s = _summary(reader)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"directory:         {s['directory']}")
    print(f"env id:            {s['env_id']}")
    print(f"episodes:          {s['episodes']}")
    print(f"steps:             {s['steps']}")
    print(f"bytes on disk:     {s['bytes']:,}")
    print(f"writers:           {s['writers']}")
    print(f"observation space: {s['observation_space']}")
    print(f"action space:      {s['action_space']}")
    if s["episodes"]:
        print(f"return:            mean {s['return_mean']:.4g}, min {s['return_min']:.4g}, "
              f"max {s['return_max']:.4g}")
    print("ends:              " + ", ".join(f"{k}: {v}" for k, v in sorted(s["ends"].items())))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gym-recorder", description="Record Gymnasium environments and inspect recordings.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("record", help="record episodes of an env with a random policy",
                       epilog="example: gym-recorder record CartPole-v1 --episodes 10 "
                              "--directory recordings/cartpole --seed 0")
    p.add_argument("env_id", help="a registered Gymnasium env id, e.g. CartPole-v1")
    p.add_argument("--episodes", type=int, default=10, help="episodes to record (default 10)")
    p.add_argument("--directory", "-d", required=True, help="the recording directory")
    p.add_argument("--seed", type=int, default=None, help="seed for the first reset and policy")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing on success")
    p.set_defaults(func=cmd_record)
    p = sub.add_parser("info", help="summarise a recording",
                       epilog="example: gym-recorder info recordings/cartpole --json")
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (RecorderError, OSError, ValueError) as e:
        print(f"gym-recorder {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gym-recorder {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
