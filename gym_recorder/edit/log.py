"""Committing an edit: the next generation of the edit log, linked into place atomically.

An edit reads the newest generation N, works out generation N + 1, writes it to a temporary
file (fsynced) and links it as ``_edits.<N + 1>.json``: the link is the commit. It is atomic
(a reader sees the old generation or the whole new one) and exclusive (it fails when the name
exists, so of two editors that both read N, one commits and the other gets an
:class:`~gym_recorder.errors.EditConflictError` and changes nothing). Generation 0 (the empty
state) and the tripwire ``_edits.manifest.json`` are written before the first edit, in that
order, so that a kill between them leaves a state readers read as "no edits".
"""

from __future__ import annotations

import datetime
import os
import secrets
from collections.abc import Callable

from ..errors import EditConflictError
from ..format.edits import (EDIT_LOG_RE, EDITS_MANIFEST, EditState, log_name, tripwire_doc)
from ..format.fileio import atomic_write, dumps, fsync_path
from ..read.manifest import load_edits
from ..read.storage import LocalStorage

__all__ = ["KEEP_GENERATIONS", "current_state", "commit"]

# Generations of the edit log kept (the newest ones): older ones are removed after a commit.
KEEP_GENERATIONS = 16


def current_state(directory: str) -> EditState:
    """The recording's committed edit state (checked: raises FormatError if malformed)."""
    storage = LocalStorage(directory)
    try:
        return load_edits(storage)
    finally:
        storage.close()


def _link_new(directory: str, name: str, data: bytes) -> bool:
    """Writes ``data`` as the new file ``name``, complete when it appears; False if it exists."""
    temp = os.path.join(directory, "tmp" + secrets.token_hex(4))
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o666)
    try:
        with open(fd, "wb", closefd=True) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temp, os.path.join(directory, name))
        except FileExistsError:
            return False
    finally:
        os.unlink(temp)
    fsync_path(directory)
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def commit(directory: str, change: Callable[[EditState], EditState], action: str,
           expected: int | None = None) -> EditState:
    """Commits one edit: ``change`` maps the current state to the new one.

    Args:
        directory: the recording.
        change: given a copy of the committed state, returns the new one (it may raise to
            commit nothing).
        action: what the edit does, recorded in the generation.
        expected: the generation the caller worked out its change from (its indices were
            resolved against it); another one committed since raises EditConflictError.

    Returns:
        The committed state.

    Raises:
        EditConflictError: another edit committed first; nothing was changed.
        FormatError: the recording's edit record is malformed.
    """
    state = current_state(directory)
    if expected is not None and state.generation != expected:
        raise EditConflictError(f"{directory}: edited by another command meanwhile "
                                f"(generation {state.generation}, not {expected}); nothing "
                                f"was changed: run it again")
    names = os.listdir(directory)
    if not any(EDIT_LOG_RE.fullmatch(n) for n in names):
        _link_new(directory, log_name(0), dumps(EditState(time=_now(), action="none").doc()))
    if EDITS_MANIFEST not in names:
        with atomic_write(os.path.join(directory, EDITS_MANIFEST)) as f:
            f.write(dumps(tripwire_doc()))
    base = EditState(state.generation, {p: [list(r) for r in rs] for p, rs in
                                        state.deleted.items()},
                     dict(state.replaced), dict(state.pending))
    new = change(base)
    new.generation = state.generation + 1
    new.action, new.time = action, _now()
    if not _link_new(directory, log_name(new.generation), dumps(new.doc())):
        raise EditConflictError(f"{directory}: another edit committed generation "
                                f"{new.generation} first; nothing was changed: run it again")
    _prune(directory, new.generation)
    return new


def _prune(directory: str, generation: int) -> None:
    for name in os.listdir(directory):
        match = EDIT_LOG_RE.fullmatch(name)
        if match and int(match["generation"]) <= generation - KEEP_GENERATIONS:
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass

