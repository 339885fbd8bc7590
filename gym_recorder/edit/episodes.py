"""Deleting, keeping and restoring episodes: one small commit of the edit log each.

Episodes are chosen by the indices a reader shows (``info``), or by a condition on their
summaries; an edit records them by stable id (writer prefix and the writer's episode number),
so it holds while writers add episodes. Data files and manifests are never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import EditError, EmptySelectionError
from ..format import check_prefix
from ..format.edits import EDITS_PREFIX, MAX_NUMBER, EditState, numbers_of, ranges_of
from ..read.episode import EpisodeSummary
from ..read.reader import RecordingReader
from .log import commit
from .select import condition, parse_indices

__all__ = ["EditResult", "DeletedEpisode", "delete", "delete_ids", "keep", "restore",
           "deleted_episodes"]


@dataclass(frozen=True)
class EditResult:
    """What an edit did.

    Attributes:
        generation: the edit log generation it committed.
        changed: the episodes it deleted (or restored).
        shown: the episodes the recording shows now.
        deleted: the episodes it hides now (until ``compact`` drops them).
    """

    generation: int
    changed: int
    shown: int
    deleted: int


@dataclass(frozen=True)
class DeletedEpisode:
    """A deleted episode: its index among all episodes as recorded (what ``restore`` takes),
    its stable id (writer, number) and its summary."""

    index: int
    writer: str
    number: int
    summary: EpisodeSummary


def _fields(s: EpisodeSummary, number: int) -> dict[str, Any]:
    return {"length": s.length, "reward": s.total_reward, "return": s.total_reward,
            "end": s.end, "env_id": s.env_id, "writer": s.writer, "seed": s.seed,
            "sub_env": s.sub_env, "number": number, "index": s.index}


def _choose(reader: RecordingReader, candidates: Sequence[int],
            episodes: Iterable[int | str] | None, where: str | None) -> list[int]:
    """Of ``candidates`` (reader indices), those the indices or the condition name."""
    if (episodes is None) == (where is None):
        raise EditError("name the episodes, or give a --where condition (one of the two)")
    if where is not None:
        test = condition(where)
        return [i for i in candidates if test(_fields(reader.summary(i), reader.stable_id(i)[1]))]
    chosen = parse_indices(list(episodes or []), len(candidates))
    return [candidates[k] for k in chosen]


def _by_writer(ids: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for prefix, number in ids:
        out.setdefault(prefix, []).append(number)
    return out


def _result(directory: str, state: EditState, changed: int) -> EditResult:
    with RecordingReader(directory) as reader:
        hidden = sum(w["deleted"] for w in reader.writers)
        return EditResult(state.generation, changed, len(reader), hidden)


def _hide(directory: str, reader: RecordingReader, indices: list[int], action: str) -> EditResult:
    ids = _by_writer(reader.stable_id(i) for i in indices)
    recorded = {w["prefix"]: w["recorded"] for w in reader.writers}

    def change(state: EditState) -> EditState:
        for prefix, numbers in ids.items():
            old = numbers_of(state.hidden(prefix), recorded[prefix])
            state.deleted[prefix] = ranges_of(np.concatenate([old, numbers]))
        return state

    state = commit(directory, change, action, expected=reader.edits.generation)
    return _result(directory, state, len(indices))


def delete(directory: str | os.PathLike[str], episodes: Iterable[int | str] | None = None, *,
           where: str | None = None) -> EditResult:
    """Deletes episodes: every reader hides them from then on, until :func:`restore` brings
    them back or ``compact`` drops their bytes. One atomic commit; no data file changes.

    Example:
        >>> delete(tmp_dir, ["3", "10:20"])          # doctest: +SKIP
        >>> delete(tmp_dir, where="length < 20")      # doctest: +SKIP

    Args:
        directory: the recording.
        episodes: the indices ``info`` shows: ints, or strings of numbers and ranges.
        where: instead, a condition on each episode's summary (see
            :mod:`gym_recorder.edit.select`).

    Raises:
        EditError: for a selection that does not parse or is out of range.
        EmptySelectionError: when nothing is selected (nothing is committed).
        EditConflictError: another edit committed meanwhile.
    """
    directory = os.fspath(directory)
    with RecordingReader(directory) as reader:
        indices = _choose(reader, range(len(reader)), episodes, where)
        if not indices:
            raise EmptySelectionError(f"{directory}: no episode selected; nothing deleted")
        what = f"where {where}" if where is not None else " ".join(map(str, episodes or []))
        return _hide(directory, reader, indices, f"delete {what}")


def _with_numbers(ranges: list[list[int]], numbers: Iterable[int]) -> list[list[int]]:
    """``ranges`` (half-open, sorted) joined with ``numbers``, merged where they touch."""
    out: list[list[int]] = []
    for start, stop in sorted([list(r) for r in ranges] + [[n, n + 1] for n in numbers]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([start, stop])
    return out


def delete_ids(directory: str | os.PathLike[str], ids: Iterable[tuple[str, int]],
               action: str = "delete by id") -> int:
    """Deletes episodes by stable id: (writer prefix, the writer's episode number). One atomic
    commit, as :func:`delete`; no reader is opened, and the numbers need not be recorded yet
    (a writer still recording can have its open episode hidden before its first byte is
    committed: readers ignore numbers a writer has not recorded, and hide them once it has).

    Args:
        directory: the recording.
        ids: (prefix, number) pairs.
        action: what the edit log says of the edit.

    Returns:
        The generation committed.

    Raises:
        EditError: for a prefix that is not a writer's, or a number out of range.
        EmptySelectionError: for no ids (nothing is committed).
        EditConflictError: another edit committed the same generation meanwhile.
    """
    chosen: dict[str, list[int]] = {}
    for prefix, number in ids:
        try:
            if prefix == EDITS_PREFIX:
                raise ValueError(prefix)
            check_prefix(prefix)
        except ValueError:
            raise EditError(f"{prefix!r} is not a writer prefix") from None
        if type(number) is not int or not 0 <= number < MAX_NUMBER:
            raise EditError(f"episode number {number!r} of {prefix} is not in [0, 2**63 - 1)")
        chosen.setdefault(prefix, []).append(number)
    if not chosen:
        raise EmptySelectionError(f"{os.fspath(directory)}: no episode named; nothing deleted")

    def change(state: EditState) -> EditState:
        for prefix, numbers in chosen.items():
            state.deleted[prefix] = _with_numbers(state.hidden(prefix), numbers)
        return state

    return commit(os.fspath(directory), change, action).generation


def keep(directory: str | os.PathLike[str], episodes: Iterable[int | str] | None = None, *,
         where: str | None = None) -> EditResult:
    """Deletes every episode but the ones named (arguments as :func:`delete`'s)."""
    directory = os.fspath(directory)
    with RecordingReader(directory) as reader:
        kept = set(_choose(reader, range(len(reader)), episodes, where))
        indices = [i for i in range(len(reader)) if i not in kept]
        what = f"where {where}" if where is not None else " ".join(map(str, episodes or []))
        if not indices:
            state = commit(directory, lambda s: s, f"keep {what} (nothing to delete)",
                           expected=reader.edits.generation)
            return _result(directory, state, 0)
        return _hide(directory, reader, indices, f"keep {what}")


def deleted_episodes(directory: str | os.PathLike[str]) -> list[DeletedEpisode]:
    """The episodes edits deleted (that ``compact`` has not dropped), with the indices
    :func:`restore` takes: their indices among every episode as recorded."""
    with RecordingReader(os.fspath(directory), show_deleted=True) as full:
        return [DeletedEpisode(i, *full.stable_id(i), full.summary(i))
                for i in _deleted_indices(full)]


def _deleted_indices(full: RecordingReader) -> list[int]:
    out: list[int] = []
    start = 0
    for w in full.writers:
        hidden = numbers_of(full.edits.hidden(w["prefix"]), w["recorded"])
        out.extend((start + hidden).tolist())
        start += w["episodes"]
    return out


def restore(directory: str | os.PathLike[str], episodes: Iterable[int | str] | None = None, *,
            where: str | None = None, all: bool = False) -> EditResult:
    """Brings deleted episodes back.

    Args:
        directory: the recording.
        episodes: indices among the deleted episodes' as :func:`deleted_episodes` (and ``info
            --deleted``) list them: ints, or strings of numbers and ranges of those.
        where: instead, a condition on the deleted episodes' summaries.
        all: restore every deleted episode.

    Raises:
        EditError, EmptySelectionError, EditConflictError: as :func:`delete`.
    """
    directory = os.fspath(directory)
    with RecordingReader(directory, show_deleted=True) as full:
        hidden = _deleted_indices(full)
        if all:
            if episodes is not None or where is not None:
                raise EditError("restore --all takes no episodes and no --where")
            chosen = hidden
        elif where is not None:
            chosen = _choose(full, hidden, None, where)
        else:
            wanted = set(parse_indices(list(episodes or []), len(full)))
            missing = sorted(wanted - set(hidden))
            if missing:
                raise EditError(f"episodes {missing[:10]} are not deleted (restore takes the "
                                f"indices `info --deleted` lists)")
            chosen = sorted(wanted)
        if not chosen and all:
            return EditResult(full.edits.generation, 0, len(full), 0)  # nothing deleted
        if not chosen:
            raise EmptySelectionError(f"{directory}: no deleted episode selected; nothing "
                                      f"restored")
        ids = _by_writer(full.stable_id(i) for i in chosen)
        recorded = {w["prefix"]: w["recorded"] for w in full.writers}
        generation = full.edits.generation

    def change(state: EditState) -> EditState:
        for prefix, numbers in ids.items():
            old = numbers_of(state.hidden(prefix), recorded[prefix])
            state.deleted[prefix] = ranges_of(np.setdiff1d(old, numbers))
        return state

    what = "--all" if all else (f"where {where}" if where is not None
                                else " ".join(map(str, episodes or [])))
    state = commit(directory, change, f"restore {what}", expected=generation)
    return _result(directory, state, len(chosen))
