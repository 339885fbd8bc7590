"""What ``verify`` and ``repair`` do about the edit record.

``verify`` reports a malformed or lost edit log, a missing tripwire (readers of version 1
would show deleted episodes), and leaves out the writers the edit state hides (replaced by a
compaction, pending in a merge, written by a compaction that never committed). ``repair``
moves malformed generations aside (the newest sound one becomes the state, and it says so),
writes a missing tripwire, and removes a tripwire whose log is lost, saying that the deleted
episodes show again.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ..errors import FormatError
from ..format import MANIFEST_SUFFIX
from ..format.edits import (EDIT_LOG_RE, EDITS_MANIFEST, EditState, check_tripwire,
                            tripwire_doc)
from ..format.fileio import atomic_write, dumps, read_json_file
from ..read.manifest import load_edits
from ..read.storage import LocalStorage

__all__ = ["edit_problems", "hidden_prefixes", "repair_edits", "skip_manifest"]


def _state(directory: str) -> EditState:
    storage = LocalStorage(directory)
    try:
        return load_edits(storage)
    finally:
        storage.close()


def _generations(directory: str) -> list[tuple[int, str]]:
    return sorted((int(m["generation"]), n) for n in os.listdir(directory)
                  if (m := EDIT_LOG_RE.fullmatch(n)))


def edit_problems(directory: str) -> tuple[list[tuple[str, str]], EditState | None]:
    """The edit record's problems (file, message), and the state (None if unreadable)."""
    try:
        state = _state(directory)
    except FormatError as e:
        text = str(e)
        name = text.split(":", 1)[0]
        return [(name, text.removeprefix(f"{name}: "))], None
    problems = []
    if state.generation > 0 and not os.path.lexists(os.path.join(directory, EDITS_MANIFEST)):
        problems.append((EDITS_MANIFEST, "missing: readers of format version 1 would show the "
                                         "episodes edits deleted (repair writes it)"))
    return problems, state


def hidden_prefixes(state: EditState | None) -> set[str]:
    """Writers the state hides (their manifests are not the recording's)."""
    if state is None:
        return set()
    return set(state.replaced) | set(state.pending)


def repair_edits(directory: str, move: Callable[[list[str]], str]) -> tuple[list[str],
                                                                             EditState]:
    """Mends the edit record; returns what it did and the state the recording then has."""
    actions: list[str] = []
    generations = _generations(directory)
    path = os.path.join(directory, EDITS_MANIFEST)
    tripwire = os.path.lexists(path)
    if tripwire:
        try:
            _, doc = read_json_file(path, EDITS_MANIFEST)
            check_tripwire(doc, EDITS_MANIFEST)
        except FormatError as e:
            with atomic_write(path) as f:
                f.write(dumps(tripwire_doc()))
            actions.append(f"rewrote {EDITS_MANIFEST}: {e}")
    if tripwire and not generations:
        where = move([EDITS_MANIFEST])
        actions.append(f"the edit log (_edits.NNNNNNNNN.json) is lost: moved {EDITS_MANIFEST} "
                       f"to {where}; episodes that edits deleted show again")
        return actions, EditState()
    while generations:
        try:
            state = _state(directory)
            break
        except FormatError as e:
            _, name = generations.pop()
            where = move([name])
            actions.append(f"moved the edit log generation {name} to {where}: {e}; the "
                           f"recording's edits are now those of the generation before")
    else:
        if tripwire:
            where = move([EDITS_MANIFEST])
            actions.append(f"no sound edit log generation left: moved {EDITS_MANIFEST} to "
                           f"{where}; episodes that edits deleted show again")
        return actions, EditState()
    if not tripwire and state.generation > 0:
        with atomic_write(os.path.join(directory, EDITS_MANIFEST)) as f:
            f.write(dumps(tripwire_doc()))
        actions.append(f"wrote the missing {EDITS_MANIFEST} (readers of format version 1 "
                       f"refuse the recording rather than show deleted episodes)")
    return actions, state


def skip_manifest(name: str, doc: Any, state: EditState | None) -> bool:
    """True for a manifest that is not one of the recording's writers (the tripwire, a writer
    the state hides, or a compaction's output the state does not name)."""
    if name == EDITS_MANIFEST:
        return True
    prefix = name[: -len(MANIFEST_SUFFIX)]
    if prefix in hidden_prefixes(state):
        return True
    replaces = doc.get("replaces") if isinstance(doc, dict) else None
    return isinstance(replaces, str) and (state is None or state.replaced.get(replaces) != prefix)
