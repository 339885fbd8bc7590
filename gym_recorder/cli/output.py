"""What every ``gym-recorder`` command shares when it reports: the program's name, its exit
statuses, and the few text helpers behind its messages (``--quiet``, counts, numbers).

The parser and :func:`~gym_recorder.cli.main` live in :mod:`gym_recorder.cli`, the commands in
:mod:`gym_recorder.cli.record` (those that run an env) and :mod:`gym_recorder.cli.inspect` (those
that read, check, export or move a recording).
"""

from __future__ import annotations

import argparse

__all__ = ["PROG", "EXIT_OK", "EXIT_FAILURE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "MB", "say",
           "count", "number", "positive_float"]

PROG = "gym-recorder"
# Exit statuses (sysexits-like conventions of Python CLIs; 130 = 128 + SIGINT as shells report).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
# Output piped into a reader that stopped reading (``info | head``): 128 + SIGPIPE, the status a
# shell reports for a tool the signal ends (``yes | head`` under ``set -o pipefail``).
EXIT_BROKEN_PIPE = 141
# Megabytes in messages are decimal, as the --target-batch-bytes help says ("5 MB").
MB = 1_000_000


def say(args: argparse.Namespace, text: str = "") -> None:
    """Prints a line of a command's output, unless ``--quiet``."""
    if not args.quiet:
        print(text)


def number(x: float | None) -> str:
    """A number for a table: six significant digits, ``-`` for none."""
    return "-" if x is None else f"{x:.6g}"


def count(n: int, word: str, plural: str | None = None) -> str:
    """``1 episode``, ``2 episodes``, ``1,000 steps``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def positive_float(text: str) -> float:
    """An argparse type: a number > 0 (a usage error naming the text otherwise)."""
    try:
        value = float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from e
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value
