"""Merging recordings into one, and splitting one into several: hard links and edit records.

A writer's files never change once listed (edits only add edit log generations; compaction
writes new writers), so a merged or split recording holds hard links to the same files (or
copies where the file system cannot link). A new output is built under a hidden name beside
it and renamed into place at the end: it appears whole or not at all. Merging into an existing
recording first commits the incoming writers as "pending" (hidden), links their files, then
commits them visible: a kill leaves them hidden, and a later merge of the same sources takes
its leftovers back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import EditError
from ..format import MANIFEST_SUFFIX
from ..format.edits import EditState, numbers_of, ranges_of
from ..format.fileio import fsync_path, temp_sibling
from ..read.manifest import Manifest, load_edits, load_manifests
from ..read.storage import LocalStorage
from .log import commit

__all__ = ["merge", "split", "MergeResult"]


@dataclass(frozen=True)
class MergeResult:
    """What a merge or split made.

    Attributes:
        destination: the recording(s) written.
        writers: the writers brought in (merge) or per output (split).
        episodes: the episodes each destination shows.
        linked: files hard-linked; copied: files copied (another file system).
    """

    destination: list[str]
    writers: int
    episodes: list[int]
    linked: int
    copied: int


_Part = tuple["_Source", Manifest, "np.ndarray | None"]


class _Source:
    """A recording's shown writers and their edit state."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        if not os.path.isdir(self.directory):
            raise EditError(f"{self.directory}: no such recording directory")
        storage = LocalStorage(self.directory)
        try:
            self.state = load_edits(storage)
            self.manifests: list[Manifest] = load_manifests(storage, self.state)
        finally:
            storage.close()
        legacy = [m.prefix for m in self.manifests if m.legacy]
        if legacy:
            raise EditError(f"{self.directory}: gym-recording writers ({legacy[0]}) name array "
                            f"files of any name: merge and split take gym_recorder writers only")

    def files(self, m: Manifest) -> list[str]:
        names = [m.name]
        for b in m.batches:
            names.append(b["fn"])
            if b.get("bin"):
                names.append(b["bin"])
        return names


class _Linker:
    def __init__(self) -> None:
        self.linked = self.copied = 0

    def put(self, src: str, dst: str) -> None:
        if os.path.lexists(dst):
            os.unlink(dst)
        try:
            os.link(src, dst, follow_symlinks=False)
            self.linked += 1
        except OSError:
            shutil.copyfile(src, dst, follow_symlinks=False)
            with open(dst, "rb+") as f:
                os.fsync(f.fileno())
            self.copied += 1


def _carry(state: EditState, src: _Source, m: Manifest,
           deleted: np.ndarray | None = None) -> None:
    """The source's edits of writer m, into ``state`` (deleted numbers, and the writer it
    replaced)."""
    hidden = numbers_of(src.state.hidden(m.prefix), m.episodes) if deleted is None else deleted
    if hidden.size:
        state.deleted[m.prefix] = ranges_of(hidden)
    if m.replaces is not None:
        state.replaced[m.replaces] = m.prefix
        at = src.state.replaced_at.get(m.replaces)
        if at is not None:
            state.replaced_at[m.replaces] = at


def _build(path: str, parts: list[_Part],
           linker: _Linker) -> None:
    """Builds a new recording at ``path`` (hidden name, renamed at the end)."""
    if os.path.lexists(path):
        raise EditError(f"{path}: exists (merge into it names it as the last path; split "
                        f"makes new recordings only)")
    parent = os.path.dirname(os.path.abspath(path)) or "."
    stage = temp_sibling(parent, os.path.basename(os.path.abspath(path)))
    os.mkdir(stage)
    try:
        needs_edits = False
        for src, m, _ in parts:
            for name in src.files(m):
                linker.put(os.path.join(src.directory, name), os.path.join(stage, name))
            needs_edits |= m.replaces is not None or bool(src.state.hidden(m.prefix))
        needs_edits |= any(d is not None and d.size for _, _, d in parts)
        if needs_edits:
            def change(state: EditState) -> EditState:
                for src, m, deleted in parts:
                    _carry(state, src, m, deleted)
                return state

            commit(stage, change, "carried over by merge/split")
        fsync_path(stage)
        os.rename(stage, path)
        fsync_path(parent)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def merge(sources: Sequence[str | os.PathLike[str]],
          destination: str | os.PathLike[str]) -> MergeResult:
    """Adds the writers of ``sources`` to ``destination`` (new, or an existing recording).

    Deleted episodes stay deleted (and restorable) in the destination. Refuses, changing
    nothing, a writer prefix that two sources, or a source and the destination, share.

    Raises:
        EditError: for a collision or a missing source.
        EditConflictError: the destination was edited meanwhile.
    """
    dest = os.fspath(destination)
    srcs = [_Source(s) for s in sources]
    if not srcs:
        raise EditError("merge needs at least one source recording")
    if any(os.path.abspath(s.directory) == os.path.abspath(dest) for s in srcs):
        raise EditError(f"{dest}: a source cannot be the destination")
    parts: list[_Part] = [(s, m, None) for s in srcs for m in s.manifests]
    names: dict[str, str] = {}
    for s, m, _ in parts:
        for prefix in [m.prefix] + ([m.replaces] if m.replaces else []):
            if prefix in names:
                raise EditError(f"writer {prefix} is in both {names[prefix]} and {s.directory}; "
                                f"nothing was merged")
            names[prefix] = s.directory
    linker = _Linker()
    if not os.path.exists(dest):
        _build(dest, parts, linker)
    else:
        _merge_into(dest, parts, names, linker)
    with_dest = _Source(dest)
    return MergeResult([dest], len(parts), [sum(m.shown for m in with_dest.manifests)],
                       linker.linked, linker.copied)


def _merge_into(dest: str, parts: list[_Part],
                names: dict[str, str], linker: _Linker) -> None:
    target = _Source(dest)
    present = {n[: -len(MANIFEST_SUFFIX)] for n in os.listdir(dest) if n.endswith(MANIFEST_SUFFIX)}
    present |= set(target.state.replaced)
    ours = {p for p, why in target.state.pending.items() if why == "merge"}
    clash = sorted((set(names) & present) - ours)
    if clash:
        raise EditError(f"{dest} already has writer(s) {clash[:3]}; nothing was merged")
    incoming = sorted({m.prefix for _, m, _ in parts})

    def hide(state: EditState) -> EditState:
        for prefix in incoming:
            state.pending[prefix] = "merge"
        return state

    state = commit(dest, hide, f"merge: bringing in {len(incoming)} writer(s)",
                   expected=target.state.generation)
    for src, m, _ in parts:
        for name in src.files(m):
            linker.put(os.path.join(src.directory, name), os.path.join(dest, name))
    fsync_path(dest)

    def show(s: EditState) -> EditState:
        for src, m, deleted in parts:
            s.pending.pop(m.prefix, None)
            _carry(s, src, m, deleted)
        return s

    commit(dest, show, f"merge {', '.join(sorted({s.directory for s, _, _ in parts}))}",
           expected=state.generation)


def split(directory: str | os.PathLike[str], into: dict[str, float],
          seed: int | None = 0) -> MergeResult:
    """Splits a recording by episode into new recordings, every shown episode in exactly one.

    Episodes are shuffled with ``numpy.random.default_rng(seed)`` and dealt out in the order
    of ``into``: ``round(fraction * count)`` each (the last output takes the rest), so the same
    seed gives the same split. Each output links every writer that has one of its episodes,
    with an edit record deleting the others' (restorable there).

    Args:
        directory: the recording.
        into: output path -> fraction; the fractions add up to 1.
        seed: the shuffle's seed (None: no shuffle, episodes dealt out in order).

    Raises:
        EditError: for fractions that do not add up to 1, or an output that exists.
    """
    fractions = list(into.values())
    if not into or any(not 0 <= f <= 1 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise EditError(f"split fractions must be in [0, 1] and add up to 1, got {fractions}")
    for path in into:
        if os.path.lexists(path):
            raise EditError(f"{path}: exists; split makes new recordings only")
    src = _Source(os.fspath(directory))
    ids = [(k, int(n)) for k, m in enumerate(src.manifests) for n in m.shown_numbers()]
    order = np.arange(len(ids)) if seed is None else np.random.default_rng(seed).permutation(
        len(ids))
    counts = [int(round(f * len(ids))) for f in fractions[:-1]]
    counts.append(len(ids) - sum(counts))
    if counts[-1] < 0:
        raise EditError(f"split of {len(ids)} episodes by {fractions} does not add up")
    linker = _Linker()
    start = 0
    shown = []
    for path, n in zip(into, counts):
        mine = order[start: start + n]
        start += n
        chosen: dict[int, set[int]] = {}
        for i in mine.tolist():
            k, number = ids[i]
            chosen.setdefault(k, set()).add(number)
        parts: list[_Part] = []
        for k, numbers in sorted(chosen.items()):
            m = src.manifests[k]
            everything = np.arange(m.episodes, dtype=np.int64)
            parts.append((src, m, np.setdiff1d(everything, np.fromiter(numbers, np.int64))))
        _build(os.fspath(path), parts, linker)
        shown.append(n)
    return MergeResult([os.fspath(p) for p in into], len(src.manifests), shown, linker.linked,
                       linker.copied)
