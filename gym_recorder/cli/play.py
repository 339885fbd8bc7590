"""``gym-recorder play``: a person plays a registered env; the episodes they keep are recorded.

The command makes the env with ``render_mode="rgb_array"`` and hands it to
:func:`gym_recorder.play.play`; at the end it prints what ``gym-recorder info`` prints of the
directory.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .output import EXIT_OK, count, positive_float, say
from ..errors import CommandError, PlayError

__all__ = ["cmd_play", "add_play_parser"]


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON number or list ({e})") from e


def _keys(text: str) -> dict[tuple[str, ...], Any]:
    from ..play.keys import parse_keys

    try:
        return parse_keys(text)
    except PlayError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_play_parser(add: Any, examples: Any, env_options: Any) -> None:
    """Adds ``play`` to the parser (``add``, ``examples`` and ``env_options`` are the parser
    module's helpers)."""
    p = add("play", cmd_play, "play an env with the keyboard and record it (needs the [play] "
            "extra)",
            "Play a registered env in a window with the keyboard; every episode that ends "
            "(terminated or truncated) is kept and recorded, with its seed, so that `replay` "
            "re-runs it exactly. Keys: the env's own key map (Atari games, MountainCar) or "
            "--keys; while no mapped key is held the no-op action is taken. p pauses, r "
            "restarts the episode (same seed, discarded), backspace discards the last kept "
            "episode, escape (or closing the window) quits: kept episodes stay, the unfinished "
            "one is discarded. The session is one writer; discarded episodes are deleted with "
            "an edit (`edit DIR restore` brings them back). The first episode is reset with --seed, each later one with a "
            "seed drawn from it. At the end, `info` of the directory is printed.",
            examples(
                "gym-recorder play CartPole-v1 -d demos --keys 'left=0,right=1'",
                "gym-recorder play ALE/Breakout-v5 -d demos --import ale_py --seed 7",
                "gym-recorder play MountainCarContinuous-v0 -d demos "
                "--keys 'left=[-1],right=[1]'",
                "gym-recorder play Pendulum-v1 -d demos --keys 'a=[-2],d=[2]' --fps 15"))
    p.add_argument("env_id", help="a registered env id, e.g. CartPole-v1")
    p.add_argument("--directory", "-d", required=True, metavar="DIR",
                   help="the recording directory (created if missing)")
    p.add_argument("--keys", type=_keys, metavar="MAP",
                   help="KEYS=ACTION items separated by commas; KEYS: pygame key names joined "
                        "by +; ACTION: a JSON number or list, e.g. 'a=0,d=1', "
                        "'left=[-1],right=[1]', 'a+space=5' (default: the env's own map)")
    p.add_argument("--noop", type=_json_value, metavar="ACTION",
                   help="the action while no mapped key is held, as JSON (default: the map's "
                        "empty entry, else 0 or zeros)")
    p.add_argument("--fps", type=positive_float, metavar="F",
                   help="steps per second (default: the env's render_fps, else 30)")
    p.add_argument("--zoom", type=positive_float, metavar="Z",
                   help="scale of the frames (default 1, or a whole factor for small frames)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="seed of the first episode; later ones are drawn from it (default: "
                        "random, printed)")
    p.add_argument("--episodes", "-n", type=int, metavar="N",
                   help="stop once N episodes are kept (default: play until escape)")
    p.add_argument("--env-kwargs", type=_env_kwargs, default=None, metavar="JSON",
                   help="keyword arguments for gymnasium.make, as a JSON object")
    env_options(p, kwargs=False)


def _env_kwargs(text: str) -> dict[str, Any]:
    value = _json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def cmd_play(args: argparse.Namespace) -> int:
    import secrets

    from .inspect import cmd_info
    from .record import _import_modules
    from ..play import PlayStatus, play
    from ..play.episodes import SEED_BOUND
    from ..replay.run import make_env

    if args.episodes is not None and args.episodes < 1:
        raise CommandError(f"--episodes must be at least 1, got {args.episodes}")
    _import_modules(args)
    kwargs = dict(args.env_kwargs or {})
    kwargs.setdefault("render_mode", "rgb_array")
    seed = args.seed if args.seed is not None else secrets.randbelow(SEED_BOUND)
    env = make_env(args.env_id, kwargs)
    try:
        def opened(status: PlayStatus) -> None:
            if status.frame == 0:  # (the window is open: the key map and the env passed)
                say(args, f"playing {args.env_id} into {args.directory} (seed {seed}); "
                          "p pause, r restart, backspace discard last, escape quit")

        summary = play(env, args.directory, keys_to_action=args.keys, noop=args.noop,
                       fps=args.fps, zoom=args.zoom, seed=seed, episodes=args.episodes,
                       callback=opened)
    finally:
        env.close()
    say(args, f"kept {count(len(summary.kept), 'episode')} ({count(summary.steps, 'step')}), "
              f"discarded {summary.discarded}")
    if not summary.kept:
        return EXIT_OK
    if not args.quiet:
        say(args)
        from .parser import DEFAULT_TABLE_LIMIT

        cmd_info(argparse.Namespace(directory=args.directory, json=False, quiet=False,
                                    limit=DEFAULT_TABLE_LIMIT))
    return EXIT_OK
