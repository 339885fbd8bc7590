"""Integrity of a recording: check everything (:func:`verify`), and mend what a crash left
(:func:`repair`).

:func:`verify` reads every manifest, every batch file a manifest lists and every byte of every array
they reference: sizes and CRC-32s against the manifest, the batch structure, every array reference
(name, dtype, shape, bounds, alignment, checksum), that the padding between arrays is zero and
nothing follows the last array, and finally every episode through
:class:`~gym_recorder.RecordingReader`. Files that no manifest lists (temporary files, batches a
killed writer never committed) are not problems: the format says readers ignore them.

:func:`repair` rebuilds each writer's manifest from the batch files that are complete and whose
checksums hold (a batch JSON repeats the manifest's header, so even a deleted manifest comes back),
keeps the entries of a damaged batch whose arrays all check out (as new batches, see
:mod:`gym_recorder.integrity._salvage`), and moves everything else that belongs to a writer (temporary
files, half-written batches, broken batches; a copy of the old manifest) into a new sub-folder
``gym_recorder-repair-<UTC time>/`` of the recording. It never deletes a file, and it changes
nothing until every batch is checked; then it commits the new manifest before it moves aside a
batch the old one listed, so a repair killed at any moment leaves a recording that reads. Run it
only while no writer is recording into the directory.

The checks are :mod:`gym_recorder.integrity._checks`' (a batch's stacked arrays placed by the
batch's plan, as the reader places them, and its index held to them:
:mod:`gym_recorder.integrity._stacked`), the repair
:mod:`gym_recorder.integrity._repair`'s (with ``_salvage``); ``recompress`` is ``gym-recorder
compress`` and ``decompress``: batches rewritten with their big leaves compressed, or raw again.
"""


from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ._checks import check_batch
from ._repair import REPAIR_FOLDER_PREFIX, repair
from ..errors import FormatError, RecorderError
from ..format import MANIFEST_SUFFIX
from ..format.spaces import build_space

__all__ = ["Problem", "verify", "repair", "REPAIR_FOLDER_PREFIX"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a recording.

    Attributes:
        path: the file the problem is in (joined to the recording directory).
        message: what is wrong.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# ---------------------------------------------------------------------------------------------
# verify


def _load_manifest(directory: str, name: str) -> Any:
    """The reader's validated view of one manifest (raises FormatError)."""
    from ..read.manifest import Manifest

    return Manifest(directory, name)


def _peek(directory: str, name: str) -> Any:
    """A manifest's document, or None (its problems are reported when it is loaded)."""
    from ..format.fileio import read_json_file

    try:
        return read_json_file(os.path.join(directory, name), name)[1]
    except (FormatError, OSError):
        return None


def verify(directory: str | os.PathLike[str]) -> list[Problem]:
    """Checks every manifest, batch, array reference and checksum of a recording.

    Files that no manifest lists are not checked (readers ignore them; :func:`repair` tidies
    them away).

    Args:
        directory: the recording directory.

    Returns:
        The problems found, each naming its file; empty when the recording is sound.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return [Problem(directory, "not a directory")]
    problems: list[Problem] = []
    reported: set[str] = set()

    def report(name: str | None, message: str) -> None:
        problems.append(Problem(directory if name is None else os.path.join(directory, name),
                                message))
        reported.add(name or "")

    from ..edit.health import edit_problems, skip_manifest

    edit_issues, edits = edit_problems(directory)
    for name, message in edit_issues:
        report(name, message)
    names = sorted(e.name for e in os.scandir(directory) if e.name.endswith(MANIFEST_SUFFIX))
    manifests_ok = edits is not None
    known: set[str] = set(names)  # files the recording consists of
    for name in names:
        if skip_manifest(name, _peek(directory, name), edits):
            continue  # the edit record's tripwire, or a writer the edits hide
        if os.path.islink(os.path.join(directory, name)) or not os.path.isfile(
                os.path.join(directory, name)):
            report(name, "a manifest must be a regular file")
            manifests_ok = False
            continue
        try:
            m = _load_manifest(directory, name)
        except FormatError as e:
            report(name, str(e).removeprefix(f"{name}: "))
            manifests_ok = False
            continue
        if m.legacy:
            continue  # gym-recording files carry no sizes or checksums: the reader checks them
        for desc, what in ((m.observation_space_desc, "observation_space"),
                           (m.action_space_desc, "action_space")):
            try:  # the layout is checked with the manifest; the space's own values here
                build_space(desc, f"{name} {what}")
            except FormatError as e:
                report(name, str(e).removeprefix(f"{name} "))
        for binfo in m.batches:
            check = check_batch(directory, m.prefix, binfo["first"], binfo["fn"], binfo,
                                manifest=m)
            known.update((check.json_name, check.bin_name))
            for file, message in check.problems:
                report(file, message)
            if check.problems:  # the reader would only repeat them
                reported.update((check.json_name, check.bin_name))
    if not manifests_ok:
        return problems
    # Everything the files say must also make sense as episodes: read each one.
    from ..read.reader import RecordingReader

    try:
        reader = RecordingReader(directory)
    except (RecorderError, OSError) as e:
        report(None, f"cannot open the recording: {e}")
        return problems
    def culprit_of(message: str) -> str | None:
        first_word = re.split(r"[: ]", message, maxsplit=1)[0]
        return first_word if first_word in known else None

    with reader:
        # Each batch decoded once; the episodes of a batch that fails are not read one by one
        # (each would fail the same way: a hostile manifest may claim millions of them).
        skip: set[int] = set()
        try:
            infos = reader.batches()
        except Exception as e:  # noqa: BLE001
            report(culprit_of(str(e)), f"listing the batches: {e}")
            return problems
        for info in infos:
            try:
                reader.read_batch(info)
            except Exception as e:  # noqa: BLE001 - a hostile file must end in a report
                skip.update(info.episodes)
                named = culprit_of(str(e)) or info.json_name
                if named not in reported:
                    reported.add(named)
                    report(named, str(e) if isinstance(e, FormatError)
                           else f"{type(e).__name__}: {e}")
        for i in range(len(reader)):
            if i in skip:
                continue
            try:
                reader[i]
            except Exception as e:  # noqa: BLE001 - a hostile file must end in a report
                message = str(e)
                culprit = culprit_of(message)
                if (culprit or "") not in reported:
                    report(culprit, f"episode {i}: {message}" if isinstance(e, FormatError)
                           else f"episode {i}: {type(e).__name__}: {message}")
    return problems
