"""The editing commands: ``edit`` (delete, keep, restore), ``merge``, ``split``, ``compact``,
and ``info --deleted``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..errors import CommandError
from .output import EXIT_OK, MB, count, number, say

__all__ = ["add_edit_parsers", "cmd_edit", "cmd_merge", "cmd_split", "cmd_compact",
           "print_deleted"]


def _fraction(text: str) -> tuple[str, float]:
    path, sep, value = text.rpartition("=")
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not sep or not path or not 0 <= fraction <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not PATH=FRACTION (e.g. train=0.8)")
    return path, fraction


def add_edit_parsers(add: Callable[..., argparse.ArgumentParser],
                     examples: Callable[..., str]) -> None:
    """Adds ``edit``, ``merge``, ``split`` and ``compact`` to the command line."""
    p = add("edit", cmd_edit, "delete, keep or restore episodes, in place",
            "Delete episodes (every reader hides them from then on), keep some and delete the "
            "rest, or restore deleted ones. EPISODES are the indices `info` shows (for "
            "restore: those `info --deleted` shows): numbers and Python-style ranges, `3 7 "
            "10:20` being 3, 7 and 10 to 19; or --where, a condition on each episode's "
            "length, reward (or return), end, env_id, writer, seed, sub_env, number (within "
            "its writer) and index. An edit is one small atomic commit: no data file is "
            "changed, writers may keep recording, `restore` undoes it until `compact`. Indices "
            "after an edit are renumbered like a new recording's; a writer and its episode "
            "number stay a stable id.",
            examples("gym-recorder edit rec delete 3 7 10:20",
                     "gym-recorder edit rec delete --where 'length < 20'",
                     "gym-recorder edit rec keep --where \"end == 'terminated'\"",
                     "gym-recorder info rec --deleted",
                     "gym-recorder edit rec restore --all"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("action", choices=("delete", "keep", "restore"))
    p.add_argument("episodes", nargs="*", metavar="EPISODES",
                   help="episode indices and ranges (START:STOP[:STEP])")
    p.add_argument("--where", metavar="CONDITION",
                   help="choose the episodes by a condition on their summaries instead")
    p.add_argument("--all", action="store_true", help="restore every deleted episode")

    p = add("merge", cmd_merge, "merge recordings into one",
            "Add the writers of the SOURCE recordings to DEST (a new directory, or an "
            "existing recording): their files are hard-linked (copied across file systems), "
            "deleted episodes stay deleted. Refuses, changing nothing, a writer two of them "
            "share. The last path is DEST.",
            examples("gym-recorder merge run1 run2 run3 all"))
    p.add_argument("paths", nargs="+", metavar="PATH", help="SOURCE... DEST")
    p.set_defaults(directory=".")

    p = add("split", cmd_split, "split a recording into new ones by episode",
            "Deal the episodes out at random (reproducibly, by --seed) into new recordings, "
            "each episode into exactly one; the files are hard links, each output an edit "
            "record hiding the episodes that went elsewhere.",
            examples("gym-recorder split rec --into train=0.8 eval=0.2 --seed 0"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--into", nargs="+", required=True, type=_fraction, metavar="PATH=FRACTION")
    p.add_argument("--seed", type=int, default=0, help="the shuffle's seed (default 0)")

    p = add("compact", cmd_compact, "rewrite batches without deleted episodes' bytes",
            "Rewrite the closed writers without their deleted episodes, joining small batches "
            "up to --target-batch-bytes (the batch index kept), and swap them in with one "
            "commit. The replaced files are removed --grace seconds later, by this or the "
            "next compact. Writers still recording are left as they are. `info` shows what it "
            "would free.",
            examples("gym-recorder compact rec", "gym-recorder compact rec --grace 0"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--target-batch-bytes", type=int, default=None, metavar="BYTES",
                   help="join batches up to this size (default: the recorder's)")
    p.add_argument("--grace", type=float, default=None, metavar="SECONDS",
                   help="keep replaced files this long for readers still reading them "
                        "(default 60)")


def cmd_edit(args: argparse.Namespace) -> int:
    from .. import edit

    where, episodes = args.where, args.episodes or None
    if args.action == "restore":
        result = edit.restore(args.directory, episodes, where=where, all=args.all)
    else:
        if args.all:
            raise CommandError("--all goes with restore")
        func = edit.delete if args.action == "delete" else edit.keep
        result = func(args.directory, episodes, where=where)
    verb = "restored" if args.action == "restore" else "deleted"
    say(args, f"{verb} {count(result.changed, 'episode')}: {args.directory} shows "
              f"{count(result.shown, 'episode')}, {result.deleted:,} deleted (edit "
              f"{result.generation})")
    return EXIT_OK


def cmd_merge(args: argparse.Namespace) -> int:
    from ..edit.copies import merge

    if len(args.paths) < 2:
        raise CommandError("merge takes SOURCE... DEST (at least two paths)")
    result = merge(args.paths[:-1], args.paths[-1])
    say(args, f"merged {count(result.writers, 'writer')} into {result.destination[0]}: "
              f"{count(result.episodes[0], 'episode')} ({result.linked:,} files linked, "
              f"{result.copied:,} copied)")
    return EXIT_OK


def cmd_split(args: argparse.Namespace) -> int:
    from ..edit.copies import split

    result = split(args.directory, dict(args.into), seed=args.seed)
    for path, n in zip(result.destination, result.episodes):
        say(args, f"{path}: {count(n, 'episode')}")
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    from ..edit.compact import RETIRE_GRACE_SECONDS, compact
    from ..record.wrapper import DEFAULT_TARGET_BATCH_BYTES

    result = compact(args.directory,
                     target_batch_bytes=args.target_batch_bytes or DEFAULT_TARGET_BATCH_BYTES,
                     grace=RETIRE_GRACE_SECONDS if args.grace is None else args.grace)
    for old, new in result.replaced:
        say(args, f"rewrote {old} as {new}")
    for prefix in result.skipped:
        say(args, f"left {prefix} as it is (still recording, or killed: `repair` first)")
    say(args, f"wrote {result.written / MB:.2f} MB, freed {result.freed / MB:.2f} MB"
              + (f"; {result.retired / MB:.2f} MB of replaced files go after the grace period"
                 if result.retired else ""))
    return EXIT_OK


def print_deleted(args: argparse.Namespace) -> int:
    """``info --deleted``: the deleted episodes, with the indices ``restore`` takes."""
    from ..edit import deleted_episodes

    rows = deleted_episodes(args.directory)
    if args.json:
        out: list[dict[str, Any]] = [
            {"index": d.index, "writer": d.writer, "number": d.number,
             "length": d.summary.length, "total_reward": d.summary.total_reward,
             "end": d.summary.end, "seed": d.summary.seed} for d in rows]
        print(json.dumps(out, indent=2))
        return EXIT_OK
    say(args, f"{count(len(rows), 'deleted episode')} (restore takes these indices)")
    for d in rows:
        say(args, f"  {d.index:>6}  length {d.summary.length:>6}  return "
                  f"{number(d.summary.total_reward):>8}  {d.summary.end or '-':<10}  "
                  f"{d.writer} #{d.number}")
    return EXIT_OK
