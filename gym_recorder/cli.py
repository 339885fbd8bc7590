"""The ``gym-recorder`` command line: argument handling over the library, nothing more.

Commands: ``record``, ``info``, ``replay``, ``plot``, ``video``, ``export``, ``verify``,
``repair``, ``import-minari``; ``gym-recorder COMMAND --help`` shows each one's options and
examples. Exit status 0 means success, 1 an error (one line on stderr, no traceback) or a failed
check, 2 a usage error, 130 an interrupted ``record`` (what was recorded is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any

from ._version import __version__
from .errors import RecorderError

__all__ = ["main", "build_parser"]

PROG = "gym-recorder"
# Exit statuses (sysexits-like conventions of Python CLIs; 130 = 128 + SIGINT as shells report).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
# Episodes shown by `info` unless --limit says otherwise (the first and last halves).
DEFAULT_TABLE_LIMIT = 20
# Seeds drawn when --seed is not given: below 2**31 so that every env's seeding accepts them.
RANDOM_SEED_BOUND = 2**31
# How often the progress bar is updated, and how often its MB figure re-scans the directory
# (seconds): often enough to look live, rarely enough to cost nothing per step.
PROGRESS_UPDATE_INTERVAL = 0.1
PROGRESS_BYTES_INTERVAL = 0.5
# Without tqdm, a plain progress line on a terminal's stderr this often (seconds).
PLAIN_PROGRESS_INTERVAL = 3.0
MB = 1_000_000


class CommandError(RecorderError):
    """A command cannot do what was asked (reported as one line on stderr)."""


# -- helpers -------------------------------------------------------------------------------------

def _say(args: argparse.Namespace, text: str = "") -> None:
    if not args.quiet:
        print(text)


def _json_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e})") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"render_mode\": "
                                         "\"rgb_array\"}'")
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from e
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from e
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _pixels(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1000x600") from e
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return w, h


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _count(n: int, word: str, plural: str | None = None) -> str:
    """``1 episode``, ``2 episodes``, ``1,000 steps``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def _action_text(action: Any) -> str:
    import numpy as np

    if isinstance(action, np.ndarray):
        return np.array2string(action, threshold=20, separator=", ")
    return str(action) if isinstance(action, (int, float, np.generic)) else repr(action)


class _CheckedPolicy:
    """The user's policy, remembering its last action so a bad one can be named."""

    def __init__(self, policy: Any, spec: str) -> None:
        self.policy = policy
        self.spec = spec
        self.last: Any = None
        self.calls = 0

    def __call__(self, observation: Any) -> Any:
        try:
            self.last = self.policy(observation)
        except Exception as e:  # noqa: BLE001  (the user's code: say whose error it is)
            raise CommandError(f"policy {self.spec} raised {type(e).__name__}: {e}") from e
        self.calls += 1
        return self.last

    def explain(self, args: argparse.Namespace) -> CommandError | None:
        """If the last action is not in the env's action space: the error that says so."""
        if not self.calls:
            return None
        from .replay import make_env

        try:
            env = make_env(args.env_id, args.env_kwargs, num_envs=args.num_envs)
        except Exception:  # noqa: BLE001  (the original error is reported instead)
            return None
        try:
            space = env.action_space
            try:
                inside = bool(space.contains(self.last))
            except Exception:  # noqa: BLE001  (a value the space cannot even compare)
                inside = False
        finally:
            env.close()
        if inside:
            return None
        return CommandError(f"policy returned {_action_text(self.last)}, which is not in "
                            f"{space}")


class _StopOnInterrupt:
    """Turns the first Ctrl-C into a flag the recording loop polls; a second one interrupts."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, self._previous)

    def __enter__(self) -> _StopOnInterrupt:
        try:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: Ctrl-C raises KeyboardInterrupt as usual
            self._previous = None
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class _Progress:
    """A tqdm bar on stderr: steps, steps/s, episodes and MB written (none if tqdm is missing,
    with --quiet, or when stderr is not a terminal)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.bar: Any = None
        self.plain = False  # no tqdm: a plain line every PLAIN_PROGRESS_INTERVAL seconds
        self.episodes_total = args.episodes
        self.steps_total = args.steps
        self._next_bytes = 0.0
        self._next_update = 0.0
        self._mb = 0.0
        self._start = time.monotonic()
        if args.quiet:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self.plain = sys.stderr.isatty()
            self._next_update = self._start + PLAIN_PROGRESS_INTERVAL
            return
        self.bar = tqdm(total=args.steps, unit="step", desc="recording", file=sys.stderr,
                        disable=None, dynamic_ncols=True, leave=False)

    def __call__(self, status: Any) -> None:
        if self.plain:
            self._plain(status)
            return
        bar = self.bar
        if bar is None or bar.disable:
            return
        now = time.monotonic()
        if now < self._next_update:
            return
        self._next_update = now + PROGRESS_UPDATE_INTERVAL
        if now >= self._next_bytes:
            from .replay import writer_bytes

            self._next_bytes = now + PROGRESS_BYTES_INTERVAL
            self._mb = writer_bytes(status.directory, status.prefix) / MB
        total = f"/{self.episodes_total}" if self.episodes_total else ""
        bar.set_postfix_str(f"episodes={status.episodes}{total}, {self._mb:.2f} MB written",
                            refresh=False)
        bar.update(status.steps - bar.n)

    def _plain(self, status: Any) -> None:
        now = time.monotonic()
        if now < self._next_update:
            return
        from .replay import writer_bytes

        self._next_update = now + PLAIN_PROGRESS_INTERVAL
        mb = writer_bytes(status.directory, status.prefix) / MB
        steps = f"{status.steps:,}" + (f"/{self.steps_total:,}" if self.steps_total else "")
        episodes = f"{status.episodes:,}" + (f"/{self.episodes_total:,}"
                                             if self.episodes_total else "")
        rate = status.steps / max(now - self._start, 1e-9)
        noun = "episode" if episodes == "1" else "episodes"
        print(f"{PROG} record: {steps} steps, {episodes} {noun}, {mb:.2f} MB written, "
              f"{rate:,.0f} steps/s", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- commands ------------------------------------------------------------------------------------

def cmd_record(args: argparse.Namespace) -> int:
    from .replay import load_policy, record_env, writer_bytes

    policy = _CheckedPolicy(load_policy(args.policy), args.policy) if args.policy else None
    if args.episodes is None and args.steps is None:
        args.episodes = 10
    seed = args.seed if args.seed is not None else secrets.randbelow(RANDOM_SEED_BOUND)
    recorder_kwargs: dict[str, Any] = {"target_batch_bytes": args.target_batch_bytes,
                                       "flush_interval": args.flush_interval}
    if args.file_prefix:
        recorder_kwargs["file_prefix"] = args.file_prefix
    if args.num_envs is not None:
        try:
            from . import vector  # noqa: F401  (imported lazily: only vector recording needs it)
        except ImportError as e:
            raise CommandError(f"--num-envs needs gym_recorder.vector, which cannot be imported "
                               f"({e})") from e
    _import_modules(args)
    progress = _Progress(args)
    try:
        with _StopOnInterrupt() as stop:
            status = record_env(args.env_id, args.directory, policy=policy,
                                episodes=args.episodes, steps=args.steps, seed=seed,
                                num_envs=args.num_envs, env_kwargs=args.env_kwargs,
                                recorder_kwargs=recorder_kwargs, on_step=progress,
                                should_stop=lambda: stop.requested)
    except Exception as e:
        better = policy.explain(args) if policy is not None and not isinstance(
            e, CommandError) else None
        if better is not None:
            raise better from e
        raise
    finally:
        progress.close()
    size = writer_bytes(status.directory, status.prefix)
    unfinished = (f" + {status.unfinished} unfinished (end 'close')"
                  if status.unfinished else "")
    what = (f"{_count(status.episodes, 'episode')}{unfinished}, "
            f"{_count(status.steps, 'step')} of {args.env_id} "
            f"into {args.directory} (seed {seed}, {size:,} bytes, writer {status.prefix})")
    if status.interrupted:
        print(f"{PROG} record: interrupted; kept {what}", file=sys.stderr)
        return EXIT_INTERRUPTED
    _say(args, f"recorded {what}")
    return EXIT_OK


def _import_modules(args: argparse.Namespace) -> None:
    """Imports the ``--import`` modules (packages that register envs or define wrappers)."""
    from .envspec import import_modules
    from .replay import ReplayError

    try:
        import_modules(args.imports)
    except ImportError as e:
        raise ReplayError(str(e)) from e


def _add_env_options(p: argparse.ArgumentParser, kwargs: bool) -> None:
    """--import (record, replay, video) and --env-kwargs (replay, video)."""
    p.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                   help="import MODULE first (repeatable): a package that registers the env "
                        "or defines its wrappers")
    if kwargs:
        p.add_argument("--env-kwargs", type=_json_object, default=None, metavar="JSON",
                       help="env keyword arguments the recording could not keep (or to "
                            "override), as a JSON object")


def _env_blocks(envs: list[dict[str, Any]]) -> list[str]:
    """info's lines for each env of a directory that holds several."""
    lines = []
    for g in envs:
        lines += [
            f"  env id           {g['env_id'] or '-'}",
            f"    observation    {g['observation_space'] or '-'}",
            f"    action         {g['action_space'] or '-'}",
            f"    episodes       {g['episodes']:,}, steps {g['steps']:,}, writers "
            f"{', '.join(map(str, g['writers']))}",
            f"    total_reward   mean {_fmt(g['total_reward_mean'])}, "
            f"min {_fmt(g['total_reward_min'])}, max {_fmt(g['total_reward_max'])}",
            "    ends           " + (", ".join(f"{k} {v}" for k, v in g["ends"].items()) or "-"),
        ]
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    from .export import summarize

    s = summarize(args.directory)
    if not s["writers"]:
        raise CommandError(f"no recording in {args.directory}")
    if args.json:
        print(json.dumps(s, indent=2, allow_nan=False))
        return EXIT_OK
    if args.quiet:
        return EXIT_OK
    lines = [
        f"directory          {s['directory']}",
        f"env id             {s['env_id'] or '-'}",
        f"observation space  {s['observation_space'] or '-'}",
        f"action space       {s['action_space'] or '-'}",
        f"episodes           {s['episodes']:,}",
        f"steps              {s['steps']:,}",
        f"total_reward       mean {_fmt(s['total_reward_mean'])}, "
        f"min {_fmt(s['total_reward_min'])}, max {_fmt(s['total_reward_max'])}",
        "ends               " + (", ".join(f"{k} {v}" for k, v in s["ends"].items()) or "-"),
        f"bytes on disk      {s['bytes']:,} ({s['bytes'] / MB:.2f} MB)",
        f"writers            {len(s['writers'])}",
    ]
    if len(s.get("envs", ())) > 1:
        lines[1:4] = [f"envs               {len(s['envs'])}"] + _env_blocks(s["envs"])
    for k, w in enumerate(s["writers"]):
        state = "legacy" if w["legacy"] else ("complete" if w["complete"] else "open or killed")
        vector = f", vector of {w['vector'].get('num_envs')}" if w["vector"] else ""
        lines.append(f"  {k:>3}  {w['prefix']}  {_count(w['episodes'], 'episode')}, "
                     f"{_count(w['batches'], 'batch', 'batches')}, {state}{vector}")
    print("\n".join(lines))
    rows = s["episode_table"]
    if not rows:
        return EXIT_OK
    limit = args.limit if args.limit else len(rows)
    shown = rows if len(rows) <= limit else rows[: (limit + 1) // 2] + [None] + rows[
        len(rows) - limit // 2:]
    header = ("episode", "length", "total_reward", "end", "seed", "sub_env", "writer")
    table: list[tuple[str, ...]] = [header]
    for r in shown:
        if r is None:
            table.append(("...",) + ("",) * (len(header) - 1))
            continue
        table.append((str(r["index"]), str(r["length"]), _fmt(r["total_reward"]), r["end"] or "-",
                      "-" if r["seed"] is None else str(r["seed"]),
                      "-" if r["sub_env"] is None else str(r["sub_env"]), str(r["writer"])))
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    print()
    for row in table:
        print("  ".join(cell.rjust(w) if c not in (3,) else cell.ljust(w)
                        for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
    if len(rows) > limit:
        print(f"({_count(len(rows) - limit, 'episode')} not shown; --limit 0 shows all)")
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    from .replay import replay_recording

    counts = {"match": 0, "mismatch": 0, "skipped": 0}
    first_bad = None
    for check in replay_recording(args.directory, only=args.episode, env_kwargs=args.env_kwargs,
                                  imports=args.imports or ()):
        counts[check.status] += 1
        where = f"episode {check.index}" + (f" (sub-env {check.sub_env})"
                                            if check.sub_env is not None else "")
        if check.status == "match":
            _say(args, f"{where}: match ({_count(check.length, 'step')})")
        elif check.status == "skipped":
            _say(args, f"{where}: skipped: {check.message}")
        else:
            first_bad = first_bad or check
            print(f"{where}: MISMATCH at step {check.step} of {check.length} (step 0 is the "
                  f"reset, 1 the first step): {check.message}")
    total = sum(counts.values())
    summary = (f"{_count(total, 'episode')} replayed: {counts['match']} match, "
               f"{counts['mismatch']} "
               f"mismatch, {counts['skipped']} skipped")
    if first_bad is not None:
        raise CommandError(f"{summary} (first: episode {first_bad.index} at step "
                           f"{first_bad.step})")
    if total and not counts["match"]:
        raise CommandError(f"{summary}: nothing could be checked")
    _say(args, summary)
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from .export import plot_returns, summarize

    s = summarize(args.directory)
    plot_returns(s, args.output, size=args.size, dpi=args.dpi)
    _say(args, f"wrote {args.output}: total reward and length of "
               f"{_count(s['episodes'], 'episode')} "
               f"({args.size[0]}x{args.size[1]} pixels)")
    return EXIT_OK


def cmd_video(args: argparse.Namespace) -> int:
    from .export import DEFAULT_FPS, image_leaves, write_video
    from .reader import RecordingReader

    frames: Any = None
    with RecordingReader(args.directory) as reader:
        episode = reader[args.episode]
        index = episode.index
        if args.source != "render":
            leaves = image_leaves(episode.observations)
            if args.key is not None:
                leaves = [(k, v) for k, v in leaves if k == args.key.strip("/")]
                if not leaves:
                    raise CommandError(f"episode {index} has no uint8 H x W x 3 observation "
                                       f"leaf {args.key!r}")
            if leaves:
                key, frames = leaves[0]
                source = f"observations{'/' + key if key else ''}"
            elif args.source == "observations":
                raise CommandError(f"episode {index}: the observations hold no uint8 H x W x 3 "
                                   f"images; use --source render")
    fps = args.fps
    if frames is None:
        from .replay import replay_frames

        # rgb_array rendering needs no window; pygame-based envs (classic control) otherwise
        # probe the display system and print errors on headless machines.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        check = replay_frames(args.directory, index, env_kwargs=args.env_kwargs,
                              imports=args.imports or ())
        frames = check.frames
        source = "replay with render_mode='rgb_array'"
        fps = fps or check.render_fps
        if check.status == "mismatch":
            print(f"{PROG} video: warning: the replay of episode {index} diverges from the "
                  f"recording at step {check.step} ({check.message})", file=sys.stderr)
    fps = fps or DEFAULT_FPS
    stored = write_video(frames, args.output, fps=fps)
    merged = (f" ({stored} stored: identical consecutive frames merged, timing kept)"
              if stored != len(frames) else "")
    _say(args, f"wrote {args.output}: {_count(len(frames), 'frame')} of episode {index} "
               f"from {source}, "
               f"{fps:g} fps{merged}")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    import numpy as np

    from .export import export_npz

    if args.format != "npz" or args.output is None or args.dataset_id is not None:
        return cmd_export_training(args)

    result = export_npz(args.directory, args.output, compress=args.compress, env_id=args.env)
    _say(args, f"wrote {result['path']}: {_count(result['episodes'], 'episode')}, "
               f"{_count(result['steps'], 'step')}")
    if not args.quiet:
        width = max(len(k) for k in result["arrays"])
        for name, (shape, dtype) in result["arrays"].items():
            print(f"  {name.ljust(width)}  {np.dtype(dtype).name:<8}  {tuple(shape)}")
    return EXIT_OK


def _integrity() -> Any:
    try:
        from . import integrity
    except ImportError as e:
        raise CommandError(f"gym_recorder.integrity cannot be imported ({e})") from e
    return integrity


def cmd_verify(args: argparse.Namespace) -> int:
    problems = _integrity().verify(args.directory)
    for p in problems:
        print(f"{p.path}: {p.message}")
    if problems:
        raise CommandError(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found "
                           f"in {args.directory}")
    _say(args, f"{args.directory}: no problems found")
    return EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    actions = _integrity().repair(args.directory)
    for line in actions:
        _say(args, line)
    if not actions:
        _say(args, f"{args.directory}: nothing to repair")
    return EXIT_OK


def cmd_push(args: argparse.Namespace) -> int:
    from .cloud import push

    result = push(args.directory, args.url, storage_options=args.storage_options,
                  progress=None if args.quiet else print)
    _say(args, f"pushed {args.directory} to {result.url}: "
               f"{_count(result.uploaded, 'file')} uploaded, {result.skipped} already there, "
               f"{_count(result.manifests, 'manifest')} written, "
               f"{_count(result.bytes_uploaded, 'byte')}")
    return EXIT_OK


# -- the parser ----------------------------------------------------------------------------------

def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``gym-recorder`` and its subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=fmt,
        description="Record Gymnasium environments, and inspect, check, plot, film and export "
                    "recordings.",
        epilog=_examples(
            "gym-recorder record CartPole-v1 --episodes 10 --directory rec --seed 0",
            "gym-recorder info rec",
            "gym-recorder replay rec",
            "gym-recorder COMMAND --help"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of an error (for bug reports)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", "-q", action="store_true",
                        help="print nothing on success (errors still go to stderr)")
    # Also after COMMAND; SUPPRESS keeps the subcommand from resetting a --traceback given before.
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error (for bug reports)")

    def add(name: str, func: Any, help: str, description: str, epilog: str
            ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=textwrap.fill(description, 78),
                           epilog=epilog,
                           parents=[common], formatter_class=fmt)
        p.set_defaults(func=func)
        return p

    p = add("record", cmd_record, "record episodes of an env",
            "Record a registered Gymnasium env driven by a random policy (or --policy). The "
            "first reset is seeded with --seed, later ones are not, so `replay` can reproduce "
            "the run. Ctrl-C stops cleanly: everything recorded so far is kept (exit status "
            "130).",
            _examples(
                "gym-recorder record CartPole-v1 --episodes 10 --directory rec --seed 0",
                "gym-recorder record Pendulum-v1 --steps 5000 -d rec/pendulum",
                "gym-recorder record CartPole-v1 -d rec --policy mypolicies:balance",
                "gym-recorder record CartPole-v1 -d rec --env-kwargs "
                "'{\"render_mode\": \"rgb_array\"}'",
                "gym-recorder record CartPole-v1 -d rec --num-envs 4 --episodes 100"))
    p.add_argument("env_id", help="a registered env id, e.g. CartPole-v1 (gymnasium's "
                                  "'module:EnvId' imports module first)")
    p.add_argument("--directory", "-d", required=True, metavar="DIR",
                   help="the recording directory (created if missing)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--episodes", "-n", type=_positive_int, metavar="N",
                      help="stop after this many episodes ended (default 10)")
    stop.add_argument("--steps", type=_positive_int, metavar="N",
                      help="stop after this many steps (the open episode ends with 'close')")
    p.add_argument("--seed", type=int, metavar="S",
                   help="seed of the first reset and of the random policy (default: a random "
                        "seed, printed)")
    p.add_argument("--policy", metavar="MODULE:CALLABLE",
                   help="callable(observation) -> action, imported from MODULE (or a file "
                        "path.py); default: sample the action space")
    p.add_argument("--env-kwargs", type=_json_object, default=None, metavar="JSON",
                   help="keyword arguments for gymnasium.make, as a JSON object")
    p.add_argument("--num-envs", type=_positive_int, metavar="K",
                   help="record a vector env of K copies (episodes and steps count all copies; "
                        "the policy gets and returns batches)")
    p.add_argument("--target-batch-bytes", type=_positive_int, default=5_000_000,
                   metavar="BYTES", help="aim for batch files of about this size (default 5 MB)")
    p.add_argument("--flush-interval", type=_positive_float, default=10.0, metavar="SECONDS",
                   help="commit buffered steps at least this often (default 10)")
    p.add_argument("--file-prefix", metavar="PREFIX",
                   help="the writer's file prefix (default: unique)")
    _add_env_options(p, kwargs=False)

    p = add("info", cmd_info, "summarise a recording",
            "Show a recording's env id, spaces, episodes, steps, returns, writers, bytes on "
            "disk, and a table of episodes.",
            _examples("gym-recorder info rec",
                      "gym-recorder info rec --limit 0     # every episode",
                      "gym-recorder info rec --json | jq .total_reward_mean"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (with every episode) instead of text")
    p.add_argument("--limit", type=_non_negative_int, default=DEFAULT_TABLE_LIMIT, metavar="N",
                   help=f"show at most N episodes in the table, the first and the last ones "
                        f"(default {DEFAULT_TABLE_LIMIT}; 0 shows all)")

    p = add("replay", cmd_replay, "re-run the env with the recorded seeds and actions",
            "A determinism check: make the recorded env again, reset it with each episode's "
            "recorded seed and options, step it with the recorded actions, and compare "
            "observations, rewards, terminations and truncations exactly. Exit status 1 if any "
            "episode differs (the first differing step is named: step 0 is the reset, step 1 "
            "the first env.step, up to the episode's length) or nothing could be checked.",
            _examples("gym-recorder replay rec",
                      "gym-recorder replay rec --episode 3 --episode 4",
                      "gym-recorder replay rec --quiet && echo deterministic"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--episode", "-e", type=int, action="append", metavar="I",
                   help="check only episode I (repeatable; earlier episodes are replayed as "
                        "far as needed)")
    _add_env_options(p, kwargs=True)

    p = add("plot", cmd_plot, "plot episode return and length (needs the [plot] extra)",
            "Plot the return and the length of every episode. The file type follows the "
            "suffix of --output (png, svg, pdf).",
            _examples("gym-recorder plot rec -o returns.png",
                      "gym-recorder plot rec -o returns.svg --size 1600x900"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--output", "-o", required=True, help="the image file to write")
    p.add_argument("--size", type=_pixels, default=(1000, 600), metavar="WxH",
                   help="image size in pixels (default 1000x600)")
    p.add_argument("--dpi", type=_positive_int, default=100, help="resolution (default 100)")

    p = add("video", cmd_video, "film an episode (needs the [video] extra)",
            "Write one episode as a video: from its image observations (uint8 H x W x 3, also "
            "inside a Dict), or if there are none by replaying the env with "
            "render_mode='rgb_array'. mp4 or gif, by the suffix of --output. One frame per "
            "observation (the reset observation first).",
            _examples("gym-recorder video rec -o episode0.mp4",
                      "gym-recorder video rec -o last.gif --episode -1 --fps 15",
                      "gym-recorder video rec -o cam.mp4 --key camera/rgb"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--output", "-o", required=True, help="the .mp4 or .gif file to write")
    p.add_argument("--episode", "-e", type=int, default=0, metavar="I",
                   help="the episode (default 0; negative counts from the end)")
    p.add_argument("--fps", type=_positive_float,
                   help="frames per second (default: the env's render_fps, else 30)")
    p.add_argument("--key", help="the Dict observation leaf holding the images, e.g. 'pixels'")
    p.add_argument("--source", choices=("auto", "observations", "render"), default="auto",
                   help="where frames come from (default auto: observations if they are "
                        "images, else render)")
    _add_env_options(p, kwargs=True)

    p = add("export", cmd_export, "write all episodes into one flat file",
            "Concatenate every episode into one .npz: observations (N+1 rows per episode), "
            "actions, rewards, terminations, truncations (N rows per episode), and "
            "episode_starts, episode_lengths, observation_starts, episode_seeds, "
            "episode_sub_envs. Dict and Tuple leaves get names like observations/position. "
            "See the README for how to index them. --format parquet writes a Hugging Face "
            "dataset folder (data/*.parquet, README.md, gym_recorder.json) and --format minari "
            "a Minari dataset into Minari's root (README, section Training).",
            _examples("gym-recorder export rec --format npz -o rec.npz",
                      "gym-recorder export rec --format parquet -o rec_parquet",
                      "gym-recorder export rec --format minari --dataset-id me/cartpole-v0",
                      "python -c \"import numpy as np; d = np.load('rec.npz'); "
                      "print(d['rewards'][d['episode_starts'][1]])\""))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--format", "-f", choices=("npz", "parquet", "minari"), default="npz",
                   help="output format (default npz); parquet: a Hugging Face dataset folder "
                        "(needs gymnasium-recorder[arrow]); minari: a Minari dataset in Minari's root "
                        "(needs gymnasium-recorder[minari])")
    p.add_argument("--output", "-o",
                   help="the file (npz) or folder (parquet) to write; not for minari")
    p.add_argument("--dataset-id", metavar="NS/NAME-vN", help="the Minari dataset id (minari)")
    p.add_argument("--max-file-bytes", type=_positive_int, metavar="BYTES",
                   help="largest Parquet file, in bytes of column data (default 256 MiB)")
    p.add_argument("--compress", action="store_true", help="compress the arrays (zip deflate)")
    p.add_argument("--env", metavar="ID",
                   help="export only the episodes of this env id (needed when the directory "
                        "holds several envs)")

    p = add("verify", cmd_verify, "check every file of a recording",
            "Check every manifest, batch file and array (sizes, checksums) of a recording; "
            "print one line 'path: message' per problem. Exit status 1 if there is any.",
            _examples("gym-recorder verify rec"))
    p.add_argument("directory", help="the recording directory")

    p = add("repair", cmd_repair, "make a damaged recording readable again",
            "Move aside what cannot be read (e.g. batches lost in a power failure) so that "
            "everything else reads; print one line per action taken.",
            _examples("gym-recorder repair rec && gym-recorder verify rec"))
    p.add_argument("directory", help="the recording directory")

    # -- view: the browser viewer (gym_recorder.view serves it) --
    def cmd_view(args: argparse.Namespace) -> int:
        from .view import run
        return run(args.directory, host=args.host, port=args.port,
                   open_browser=not args.no_browser)

    p = add("view", cmd_view, "look at a recording in the browser",
            "Serve a page that shows the episodes of a recording (table, charts, frames) and "
            "the recording's files, read-only, and open it in the browser. The URL is the first "
            "line printed. The page reads the raw files itself; reload it (or press its "
            "refresh button) to see batches committed since. Ctrl-C stops the server.",
            _examples("gym-recorder view rec",
                      "gym-recorder view rec --port 8000 --no-browser"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--port", type=int, default=8765, metavar="P",
                   help="the port (default 8765; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", metavar="H",
                   help="the address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")

    p = add("push", cmd_push, "upload a recording to object storage (needs gymnasium-recorder[cloud])",
            "Upload a recording to any fsspec URL (s3://, gs://, file://...), incrementally: "
            "batches the URL does not hold yet first, then the manifests, so that a reader of "
            "the URL never sees a manifest naming a missing batch, and an interrupted push "
            "leaves it readable. A re-run uploads only what is new. The standard environment "
            "of the filesystem applies (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).",
            _examples("gym-recorder push rec s3://bucket/rec",
                      "gym-recorder push rec s3://bucket/rec --storage-options "
                      "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}'"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("url", help="the destination URL")
    p.add_argument("--storage-options", type=_json_object, default=None, metavar="JSON",
                   help="a JSON object of options for the fsspec filesystem")
    add_training_parsers(add)
    return parser


def _check_directory(directory: str) -> None:
    """The one message every command gives for a recording directory that is not there."""
    if not os.path.exists(directory):
        raise CommandError(f"{directory}: no such directory")
    if not os.path.isdir(directory):
        raise CommandError(f"{directory}: not a directory")


# -- training formats: Parquet and Minari (gym_recorder.parquet, gym_recorder.minari_io) --------

def cmd_export_training(args: argparse.Namespace) -> int:
    """``export --format parquet|minari`` (and the missing -o of npz)."""
    from .export import ExportError

    if args.format == "minari":
        if args.dataset_id is None or args.output is not None:
            raise ExportError("--format minari takes --dataset-id NS/NAME-vN and no --output "
                              "(Minari's root, MINARI_DATASETS_PATH, decides where it goes)")
        from .minari_io import export_minari

        r = export_minari(args.directory, args.dataset_id)
        _say(args, f"wrote Minari dataset {r['dataset_id']} at {r['path']}: {r['episodes']} "
                   f"episodes, {r['steps']} steps")
        for key, why in r["dropped"].items():
            _say(args, f"  info {key!r} not exported: {why}")
        return EXIT_OK
    if args.output is None or args.dataset_id is not None:
        raise ExportError(f"--format {args.format} takes --output and no --dataset-id")
    from .parquet import DEFAULT_MAX_FILE_BYTES, export_parquet

    r = export_parquet(args.directory, args.output,
                       max_file_bytes=args.max_file_bytes or DEFAULT_MAX_FILE_BYTES)
    _say(args, f"wrote {args.output}: {r['episodes']} episodes, {r['steps']} steps in "
               f"{r['files']} Parquet file{'s' if r['files'] != 1 else ''}, README.md, "
               f"gym_recorder.json")
    return EXIT_OK


def cmd_import_minari(args: argparse.Namespace) -> int:
    from .minari_io import import_minari

    r = import_minari(args.dataset, args.directory)
    _say(args, f"imported {r['episodes']} episodes, {r['steps']} steps of Minari dataset "
               f"{r['dataset_id']} into {args.directory}")
    return EXIT_OK


def add_training_parsers(add: Any) -> None:
    """Adds ``import-minari`` (``export --format parquet|minari`` extends ``export``)."""
    p = add("import-minari", cmd_import_minari, "read a Minari dataset into a new recording "
            "(needs gymnasium-recorder[minari])",
            "Read every episode of a Minari dataset (an id in Minari's local root, "
            "MINARI_DATASETS_PATH honoured, or the path of a dataset's folder, the one holding "
            "data/) into a new recording directory, bit-exact, with seeds, options and infos.",
            _examples("gym-recorder import-minari D4RL/door/human-v2 rec/door",
                      "gym-recorder import-minari ~/.minari/datasets/me/cartpole-v0 rec/cp"))
    p.add_argument("dataset", help="a Minari dataset id or folder")
    p.add_argument("directory", help="the recording directory to create (must not exist)")


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, RecorderError) and e.filename and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    elif isinstance(e, KeyError):
        text = f"missing key {e}"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 error or failed check, 130 interrupted.
    """
    args = build_parser().parse_args(argv)
    name = f"{PROG} {args.command}"
    try:
        if args.command not in ("record", "import-minari"):  # (those two create theirs)
            _check_directory(args.directory)
        status: int = args.func(args)
        return status
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (RecorderError, OSError, ValueError, TypeError, IndexError, ImportError) as e:
        if args.traceback:
            raise
        print(f"{name}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as e:  # noqa: BLE001  (a bug, or an env's own error: still one line)
        if args.traceback:
            raise
        print(f"{name}: error: {type(e).__name__}: {_one_line(e)} (run with --traceback "
              f"for details)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
