"""File names in a recording: a writer's prefix, its batches' and manifest's names, and the
check that a name read from a recording stays inside its directory."""

from __future__ import annotations

import re

from ..errors import FormatError
from .constants import MANIFEST_SUFFIX

__all__ = ["batch_stem", "manifest_name", "check_prefix", "check_plain_name"]

_PREFIX_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}")


def batch_stem(prefix: str, first: int) -> str:
    """Returns the common stem of a batch's .json and .bin file names."""
    return f"{prefix}.ep{first:09d}"


def manifest_name(prefix: str) -> str:
    """Returns the file name of a writer's manifest."""
    return prefix + MANIFEST_SUFFIX


def check_prefix(prefix: object) -> str:
    """Checks a writer prefix against the file-name rule.

    Raises:
        ValueError: if the prefix could name a path or an unsafe file.
    """
    if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
        raise ValueError(
            f"file_prefix must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}, got {prefix!r}"
        )
    if prefix == "_edits":
        raise ValueError("file_prefix '_edits' is reserved for the edit record")
    return prefix


def check_plain_name(name: object, where: str) -> str:
    """Checks that a file name read from a recording names a file inside its directory.

    Raises:
        FormatError: for anything but a plain, safe file name (no separators, no ``..``).
    """
    if not isinstance(name, str) or not _PLAIN_NAME_RE.fullmatch(name) or ".." in name:
        raise FormatError(f"{where}: file name {name!r} is not a plain file name in the directory")
    return name
