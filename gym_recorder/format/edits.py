"""The edit record's rules: its file names, and checking one (see "Edits" in the spec,
:mod:`gym_recorder.format`).

An edit never changes a data file nor a writer's manifest. It commits a new *generation* of the
edit log: ``_edits.NNNNNNNNN.json``, made complete under a temporary name and linked into place
(a link fails when the name exists: two editors cannot both commit generation N). The newest
generation is the recording's edit state. ``_edits.manifest.json`` (written once, before the
first generation) is a tripwire for readers of format version 1, which read every
``*.manifest.json`` and refuse its version 2 by name rather than show deleted episodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FormatError
from .constants import FORMAT_NAME, MANIFEST_SUFFIX
from .names import check_prefix
from .rules import check_version_number

__all__ = ["EDITS_PREFIX", "EDITS_MANIFEST", "EDITS_VERSION", "EDIT_LOG_RE", "MAX_NUMBER",
           "EditState", "log_name", "parse_state", "tripwire_doc", "check_tripwire",
           "ranges_of", "numbers_of"]

# The reserved prefix of the edit record: no writer may take it (check_prefix refuses it).
EDITS_PREFIX = "_edits"
EDITS_MANIFEST = EDITS_PREFIX + MANIFEST_SUFFIX
# The format version the edit record needs of its readers.
EDITS_VERSION = 2
EDIT_LOG_RE = re.compile(r"_edits\.(?P<generation>[0-9]{9,18})\.json")
# Episode numbers and range ends fit a signed 64-bit integer.
MAX_NUMBER = (1 << 63) - 1


def log_name(generation: int) -> str:
    """The file name of an edit log generation."""
    return f"{EDITS_PREFIX}.{generation:09d}.json"


@dataclass
class EditState:
    """One generation of the edit log: what readers hide and which writers replace which.

    Attributes:
        generation: the generation (0: the empty state).
        deleted: per writer prefix, the deleted episode numbers as sorted, disjoint, half-open
            ranges ``[start, stop)`` of the writer's numbers.
        replaced: old prefix -> the prefix of the writer a compaction rewrote it into (the old
            writer is hidden; the new one shown).
        pending: prefixes hidden while a merge brings their files in, -> what brings them.
        replaced_at: old prefix -> when it was replaced (its files are removed a grace
            period later).
        action: a line saying what the edit did.
        time: when it was committed (UTC, ISO 8601).
    """

    generation: int = 0
    deleted: dict[str, list[list[int]]] = field(default_factory=dict)
    replaced: dict[str, str] = field(default_factory=dict)
    pending: dict[str, str] = field(default_factory=dict)
    replaced_at: dict[str, str] = field(default_factory=dict)
    action: str = ""
    time: str = ""

    def doc(self) -> dict[str, Any]:
        """The generation's JSON document."""
        return {"format": FORMAT_NAME, "version": EDITS_VERSION, "prefix": EDITS_PREFIX,
                "generation": self.generation, "time": self.time, "action": self.action,
                "deleted": {p: r for p, r in sorted(self.deleted.items()) if r},
                "replaced": dict(sorted(self.replaced.items())),
                "pending": dict(sorted(self.pending.items())),
                "replaced_at": {p: t for p, t in sorted(self.replaced_at.items())
                                if p in self.replaced}}

    def hidden(self, prefix: str) -> list[list[int]]:
        """The deleted ranges of one writer (empty when none)."""
        return self.deleted.get(prefix, [])

    def hides_writer(self, prefix: str) -> bool:
        """True for a writer readers do not show at all (replaced, or pending)."""
        return prefix in self.replaced or prefix in self.pending


def tripwire_doc() -> dict[str, Any]:
    """The content of ``_edits.manifest.json``."""
    return {"format": FORMAT_NAME, "version": EDITS_VERSION, "prefix": EDITS_PREFIX,
            "edits": "this recording has edits (deleted episodes) in _edits.NNNNNNNNN.json: "
                     "readers of format version 1 must refuse it", "batches": []}


def check_tripwire(doc: Any, where: str) -> None:
    """Checks ``_edits.manifest.json`` (a version-2 reader's view of it)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or \
            doc.get("prefix") != EDITS_PREFIX or type(doc.get("version")) is not int or \
            not 2 <= doc["version"] <= EDITS_VERSION:
        raise FormatError(f"{where}: not a gym_recorder edit record of version 2")
    if doc.get("batches") != []:
        raise FormatError(f"{where}: the edit record's tripwire lists no batches "
                          "(\"batches\": [])")


def _prefix(value: Any, where: str) -> str:
    if value == EDITS_PREFIX:
        raise FormatError(f"{where}: {EDITS_PREFIX!r} is reserved for the edit record")
    try:
        prefix = check_prefix(value)
    except ValueError:
        raise FormatError(f"{where}: {value!r} is not a writer prefix") from None
    return prefix


def _ranges(value: Any, where: str) -> list[list[int]]:
    if not isinstance(value, list):
        raise FormatError(f"{where}: must be a list of [start, stop] ranges")
    out: list[list[int]] = []
    last = -1
    for k, r in enumerate(value):
        if not (isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)):
            raise FormatError(f"{where} range {k}: must be [start, stop], two integers")
        start, stop = r
        if not 0 <= start < stop <= MAX_NUMBER or start <= last:
            raise FormatError(f"{where} range {k}: [{start}, {stop}] is not a non-empty range "
                              f"of episode numbers after the previous one (ending at {last})")
        out.append([start, stop])
        last = stop
    return out


def parse_state(doc: Any, where: str, generation: int) -> EditState:
    """Checks one generation of the edit log read from a recording.

    Args:
        doc: the decoded JSON document.
        where: its file name, for messages.
        generation: the generation its name says.

    Raises:
        FormatError: naming ``where`` and what is wrong.
    """
    if not isinstance(doc, dict):
        raise FormatError(f"{where}: an edit record must be a JSON object")
    if doc.get("format") != FORMAT_NAME or doc.get("prefix") != EDITS_PREFIX:
        raise FormatError(f"{where}: not a gym_recorder edit record")
    check_version_number(doc, where, 2, EDITS_VERSION, "edit record")
    if doc.get("generation") != generation or type(doc.get("generation")) is not int:
        raise FormatError(f"{where}: 'generation' {doc.get('generation')!r} is not the "
                          f"{generation} of the file's name")
    state = EditState(generation)
    for key in ("deleted", "replaced", "pending", "replaced_at"):
        if not isinstance(doc.get(key, {}), dict):
            raise FormatError(f"{where}: {key!r} must be an object")
    for p, ranges in doc.get("deleted", {}).items():
        state.deleted[_prefix(p, f"{where} deleted")] = _ranges(ranges, f"{where} deleted {p}")
    for old, new in doc.get("replaced", {}).items():
        _prefix(old, f"{where} replaced")
        state.replaced[old] = _prefix(new, f"{where} replaced {old}")
        if new == old or new in doc["replaced"]:
            raise FormatError(f"{where}: replaced {old!r} -> {new!r} names a replaced writer")
    for p, why in doc.get("pending", {}).items():
        if not isinstance(why, str):
            raise FormatError(f"{where}: pending {p!r} must say what brings it in")
        state.pending[_prefix(p, f"{where} pending")] = why
    state.replaced_at = {p: t for p, t in doc.get("replaced_at", {}).items()
                         if p in state.replaced and isinstance(t, str)}
    for key in ("action", "time"):
        value = doc.get(key, "")
        setattr(state, key, value if isinstance(value, str) else "")
    return state


def ranges_of(numbers: Any) -> list[list[int]]:
    """Sorted unique episode numbers as half-open ranges."""
    a = np.unique(np.asarray(numbers, dtype=np.int64))
    if a.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(a) != 1) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [a.size]))
    return [[int(a[s]), int(a[e - 1]) + 1] for s, e in zip(starts.tolist(), ends.tolist())]


def numbers_of(ranges: list[list[int]], limit: int) -> np.ndarray:
    """The numbers of ``ranges`` below ``limit`` (a writer's episode count: a hostile range
    never allocates more than the writer has), sorted."""
    parts = [np.arange(start, min(stop, limit), dtype=np.int64)
             for start, stop in ranges if start < limit]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
