"""The named errors of gym_recorder: one small hierarchy, one job each."""

from __future__ import annotations

import importlib
from types import ModuleType
import os
import sys

__all__ = [
    "RecorderError",
    "FormatError",
    "ChecksumError",
    "BatchIndexError",
    "UnsupportedValueError",
    "WriteError",
    "RecordingClosedError",
    "ResetNeeded",
    "RecorderWarning",
    "OutsideSpaceWarning",
    "SpaceKeptAsWarning",
    "write_error",
    "install_hint",
    "require_extra",
    "user_stacklevel",
    "StorageError",
    "EmptySelectionError",
    "OutputExistsError",
    "UnsupportedSpaceError",
    "CommandError",
    "RepairError",
    "DatasetError",
    "DatasetNotFoundError",
    "PlayError",
    "ExportError",
    "MissingExtraError",
    "ReplayError",
    "SpecError",
    "MixedEnvsWarning",
    "EditError",
    "EditConflictError",
    "CodecUnavailableError",
]


class RecorderError(Exception):
    """Base class of every error that gym_recorder raises on purpose."""


class FormatError(RecorderError, ValueError):
    """A recording on disk is malformed, truncated, hostile or of an unknown version."""


class ChecksumError(FormatError):
    """The bytes of an array do not match the checksum recorded beside them."""


class BatchIndexError(FormatError):
    """A batch's index (see "Batch index" in the format) is damaged, or says something other
    than the manifest's counts or the batch JSON.

    Attributes:
        entry: the position in the batch of the entry the index and the batch JSON disagree
            on, or None.
    """

    def __init__(self, message: str, entry: int | None = None) -> None:
        super().__init__(message)
        self.entry = entry


class CodecUnavailableError(RecorderError, ImportError):
    """A recording stores compressed arrays (or compression was asked for) and the codec's
    package is not installed; the message names what to install."""


class UnsupportedValueError(RecorderError, TypeError):
    """A value handed to the recorder cannot be stored losslessly (the message names where it was)."""


class WriteError(RecorderError, OSError):
    """Writing a batch to disk failed; the message names the path, the cause and what was kept."""


class RecordingClosedError(RecorderError, RuntimeError):
    """The recorder or reader was used after ``close()``."""


class ResetNeeded(RecorderError, RuntimeError):
    """``step()`` was called on a recording wrapper before any ``reset()``."""


class RecorderWarning(UserWarning):
    """Base class of the warnings gym_recorder gives (the recording goes on)."""


class OutsideSpaceWarning(RecorderWarning):
    """An env returned (or was given) a value outside its declared space; it is kept exactly."""


class SpaceKeptAsWarning(RecorderWarning):
    """A space of a class the format does not know is described as a kind it knows (Text)."""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by our caller point at the user's line:
    the first frame outside this package, however deep the recorder issued it."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(2)  # (our caller's caller: stacklevel 2 of our caller's warning)
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back
        level += 1
    return level


def write_error(message: str, cause: BaseException | None) -> WriteError:
    """A :class:`WriteError` carrying the ``errno`` of its OS-level cause."""
    err = WriteError(message)
    if isinstance(cause, OSError):
        err.errno = cause.errno  # (strerror and filename stay unset: str() stays the message)
    return err


def install_hint(extra: str) -> str:
    """How to install an extra, as the messages of a missing optional dependency say it.

    The distribution is not on the package index yet (``gymnasium-recorder`` there would be
    "not found"), so the command that works is the checkout's, as the README's.
    """
    return (f'python -m pip install ".[{extra}]" in the gym_recorder checkout '
            f"(gymnasium-recorder[{extra}] once it is published)")


class RepairError(RecorderError, OSError):
    """``repair`` cannot read a file of the recording, or cannot change the directory (a
    permission, a file-descriptor limit, a full disk); the message names the file, the cause and
    whether anything was changed. The recording stays readable either way."""


class StorageError(RecorderError, OSError):
    """Object storage could not be used: unreachable, credentials refused (the message names the URL)."""


class EmptySelectionError(RecorderError, ValueError):
    """A selection of episodes (or a split, a sample, a window length) matches nothing."""


class OutputExistsError(RecorderError, FileExistsError):
    """An export's output already exists; nothing was written."""


class UnsupportedSpaceError(RecorderError, TypeError):
    """A space (ours or a Minari dataset's) cannot be represented in the requested format."""


class DatasetError(RecorderError, ValueError):
    """Another tool's dataset (Minari's) is malformed, truncated or inconsistent; nothing was written."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """There is no such dataset (no folder holding ``data/``, no id in the local root)."""


class CommandError(RecorderError):
    """A ``gym-recorder`` command cannot do what was asked (reported as one line on stderr)."""


class PlayError(RecorderError, ValueError):
    """``play`` cannot start: a key map, a key name, an action or the env's rendering is not
    playable (the message names which); nothing was recorded."""


class ExportError(RecorderError):
    """A recording cannot be turned into the requested output (the message says why)."""


class MissingExtraError(RecorderError, ImportError):
    """An optional dependency is not installed (the message names the extra to install)."""


def require_extra(module: str, extra: str) -> ModuleType:
    """``module`` imported, or a :class:`MissingExtraError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(f"{module} is not installed; install it with: "
                                f"{install_hint(extra)}") from e


class ReplayError(RecorderError):
    """An env cannot be made, a policy cannot be loaded, or a recording cannot be replayed."""


class SpecError(RecorderError):
    """The recorded env spec cannot be turned into an env (the message says why); replay and
    the Minari export catch it and say what they do instead."""


class MixedEnvsWarning(RecorderWarning):
    """A writer records an env other than the ones already recorded in its directory."""
class EditError(RecorderError, ValueError):
    """An edit (delete, restore, merge, split, compact) cannot be done as asked: a selection of
    episodes that does not parse, a collision of writers, an output that exists; nothing was
    changed."""


class EditConflictError(EditError):
    """Another edit committed while this one was being prepared; nothing was changed: run it
    again."""
