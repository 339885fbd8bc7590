"""The ``gym-recorder`` command line: argument handling over the library, nothing more.

Commands: ``record``, ``play``, ``info``, ``replay``, ``plot``, ``video``, ``export``, ``verify``,
``repair``, ``view``, ``push``, ``import-minari``, ``edit``, ``merge``, ``split``, ``compact``,
``compress``, ``decompress``; ``gym-recorder COMMAND --help`` shows each one's options and
examples. Exit status 0 means success, 1 an error (one line on stderr, no traceback) or a failed
check, 2 a usage error, 130 an interrupted ``record`` (what was recorded is kept).

This module holds :func:`main` and how an error is printed. The parser is
:mod:`gym_recorder.cli.parser` (its option types :mod:`gym_recorder.cli.argtypes`); the commands
are in :mod:`gym_recorder.cli.record` (``record``, ``replay``, ``video``: they run an env),
:mod:`gym_recorder.cli.inspect` (the others: they read, check, export or move a recording),
:mod:`gym_recorder.cli.edit` (editing) and :mod:`gym_recorder.cli.play` (``play``); what they
share is in :mod:`gym_recorder.cli.output`.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Sequence

from ..errors import CommandError, RecorderError
from .output import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, PROG
from .parser import build_parser

__all__ = ["main", "build_parser"]


def _check_directory(directory: str) -> None:
    """The one message every command gives for a recording directory that is not there."""
    if not os.path.exists(directory):
        raise CommandError(f"{directory}: no such directory")
    if not os.path.isdir(directory):
        raise CommandError(f"{directory}: not a directory")


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, RecorderError) and e.filename and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    elif isinstance(e, KeyError):
        text = f"missing key {e}"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split())


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (``gym-recorder info | head``)."""
    if not hasattr(select, "poll"):  # (not on Windows, where a broken pipe is stdout's anyway)
        return True
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _stop_writing_stdout() -> int:
    """Points standard output at the null device, so that the flush at exit cannot fail again
    (Python would print "Exception ignored ... BrokenPipeError"), and gives the exit status."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 success, 1 error or failed check, 130 interrupted, 141 standard
        output closed by its reader (``info | head``).
    """
    args = build_parser().parse_args(argv)
    name = f"{PROG} {args.command}"
    try:
        if args.command not in ("record", "import-minari", "play"):  # (these create theirs)
            _check_directory(args.directory)
        status: int = args.func(args)
        return status
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (RecorderError, OSError, ValueError, TypeError, IndexError, ImportError) as e:
        if isinstance(e, BrokenPipeError) and _stdout_closed():
            return _stop_writing_stdout()  # what was read of the output is all that was wanted
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
