"""Compaction: rewrite writers without their deleted episodes' bytes, joining small batches.

Each closed writer P that has deleted episodes, or batches that join into fewer, is rewritten
as a new writer Q (``P.cNNNNNN``, N the generation that commits it; a writer that compaction
made has its own ``.cMMMMMM`` replaced) whose manifest says
``"replaces": P``: its batches hold P's shown episodes, renumbered from 0, their arrays'
bytes copied (:mod:`gym_recorder.edit.rewrite`), each batch checked like ``verify`` checks one.
Then one commit of the edit log replaces P by Q (readers switch from P to Q at once); P's files
are removed only after :data:`RETIRE_GRACE_SECONDS` (a reader that listed P may still be
reading it), by this or a later compaction. Writers still recording are left as they are.
Compressed arrays are copied as they are stored, never recompressed (see
:mod:`gym_recorder.edit.rewrite`).
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from typing import Any

from ..errors import EditError, FormatError
from ..format import MANIFEST_SUFFIX, check_plain_name, manifest_name
from ..format.edits import EDITS_VERSION, EditState
from ..format.fileio import atomic_write, dumps, fsync_path, read_json_file
from ..integrity._checks import check_batch
from ..read.decode import Decoder
from ..read.manifest import Manifest, load_edits, load_manifests
from ..read.storage import LocalStorage
from ..record.wrapper import DEFAULT_TARGET_BATCH_BYTES
from .log import commit
from .rewrite import kept_entries, plan_batches, sync_files, write_batch

__all__ = ["compact", "CompactResult", "reclaimable", "RETIRE_GRACE_SECONDS"]

# A replaced writer's files stay this long after the commit that replaced it.
RETIRE_GRACE_SECONDS = 60.0
_SUFFIX_RE = re.compile(r"\.c[0-9]{6,}$")


@dataclass(frozen=True)
class CompactResult:
    """What a compaction did.

    Attributes:
        generation: the edit log generation it committed (None: nothing to rewrite).
        replaced: (old prefix, new prefix) of each writer rewritten.
        skipped: writers left as they are because they are still recording (not closed).
        written: bytes of the new batch files and manifests.
        freed: bytes of replaced writers' files removed.
        retired: bytes of replaced writers' files kept for the grace period.
    """

    generation: int | None
    replaced: list[tuple[str, str]]
    skipped: list[str]
    written: int
    freed: int
    retired: int


def _new_prefix(m: Manifest, generation: int) -> str:
    """The prefix of writer m's replacement: m's with the generation's suffix. Only a writer
    that compaction made (``replaces``) has its own suffix replaced: a writer's own prefix is
    kept whole even when it ends like one (a default prefix's random part can read ".c0123407")."""
    suffix = f".c{generation:06d}"
    base = _SUFFIX_RE.sub("", m.prefix) if m.replaces is not None else m.prefix
    return base[: 128 - len(suffix)] + suffix


def _rewrite(directory: str, storage: LocalStorage, m: Manifest, generation: int,
             target: int) -> tuple[str, int] | None:
    """Writes writer m's replacement; returns (its prefix, its bytes), or None if m needs none."""
    deleted = set(m.deleted.tolist())
    groups = list(kept_entries(storage, m, deleted))
    plan = plan_batches(groups, target)
    if not deleted and len(plan) >= len(m.batches):
        return None
    q = _new_prefix(m, generation)
    path = os.path.join(directory, manifest_name(q))
    if os.path.lexists(path):
        _, doc = read_json_file(path, manifest_name(q))
        if not isinstance(doc, dict) or doc.get("replaces") != m.prefix:
            raise EditError(f"{path}: a writer of the name compaction would give "
                            f"{m.prefix}'s replacement exists")
    renumber = {int(n): k for k, n in enumerate(m.shown_numbers())}
    decoder = Decoder(storage)
    infos: list[dict[str, Any]] = []
    first = 0
    next_part: dict[int, int] = {}
    for groups_of_batch in plan:
        infos.append(write_batch(directory, storage, decoder, m, q, first, groups_of_batch,
                                 renumber, m.doc, next_part))
        first += infos[-1]["len"]
    sync_files(directory, [i[k] for i in infos for k in ("fn", "bin")])
    for info in infos:  # every new batch checked as verify checks one: nothing lost
        check = check_batch(directory, q, info["first"], info["fn"], info)
        if check.problems:
            raise EditError(f"{info['fn']}: the rewritten batch does not check out (a bug; "
                            f"nothing was committed): {check.problems[0][1]}")
    doc = dict(m.doc)
    doc.update(prefix=q, version=EDITS_VERSION, replaces=m.prefix, batches=infos,
               complete=True)
    data = dumps(doc)
    with atomic_write(path) as f:
        f.write(data)
    return q, len(data) + sum(i["json_size"] + i["bin_size"] for i in infos)


def compact(directory: str | os.PathLike[str], *,
            target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
            grace: float = RETIRE_GRACE_SECONDS) -> CompactResult:
    """Rewrites the recording's closed writers without their deleted episodes, joining small
    batches up to ``target_batch_bytes``; one commit swaps them in.

    Args:
        directory: the recording.
        target_batch_bytes: the size new batches are joined up to.
        grace: seconds a replaced writer's files are kept after the commit that replaced it
            (0 removes them at once: a reader that listed them before may then fail on a
            missing file, with a named error).

    Raises:
        EditConflictError: another edit committed meanwhile (nothing is swapped in).
        EditError: a rewritten batch that does not check out (nothing is swapped in).
    """
    directory = os.fspath(directory)
    storage = LocalStorage(directory)
    try:
        state = load_edits(storage)
        manifests = load_manifests(storage, state)
        generation = state.generation + 1
        skipped = [m.prefix for m in manifests if not m.legacy and not m.complete]
        done: list[tuple[str, str]] = []
        written = 0
        for m in manifests:
            if m.legacy or not m.complete:
                continue
            result = _rewrite(directory, storage, m, generation, target_batch_bytes)
            if result is not None:
                done.append((m.prefix, result[0]))
                written += result[1]
    finally:
        storage.close()
    committed: int | None = None
    if done:
        fsync_path(directory)
        now = _now()

        def change(s: EditState) -> EditState:
            for old, new in done:
                for earlier, target in list(s.replaced.items()):
                    if target == old:
                        s.replaced[earlier] = new
                s.replaced[old], s.replaced_at[old] = new, now
                s.deleted.pop(old, None)
            return s

        committed = commit(directory, change, "compact", expected=state.generation).generation
    freed, retired = purge(directory, grace)
    return CompactResult(committed, done, skipped, written, freed, retired)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _age(stamp: str) -> float:
    try:
        then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc)
    except ValueError:
        return float("inf")
    return (datetime.datetime.now(datetime.timezone.utc) - then).total_seconds()


def _writer_files(directory: str, prefix: str) -> list[str]:
    """The manifest and batch files a writer's manifest lists (plain names of that writer)."""
    name = manifest_name(prefix)
    try:
        _, doc = read_json_file(os.path.join(directory, name), name)
    except (FormatError, OSError):
        return [name]
    files = [name]
    for b in doc.get("batches", []) if isinstance(doc, dict) else []:
        for key in ("fn", "bin"):
            value = b.get(key) if isinstance(b, dict) else None
            try:
                check_plain_name(value, name)
            except FormatError:
                continue
            if isinstance(value, str) and value.startswith(prefix + ".ep"):
                files.append(value)
    return files


def _sizes(directory: str, files: list[str]) -> int:
    total = 0
    for f in files:
        try:
            total += os.lstat(os.path.join(directory, f)).st_size
        except FileNotFoundError:
            pass
    return total


def purge(directory: str, grace: float = RETIRE_GRACE_SECONDS) -> tuple[int, int]:
    """Removes replaced writers' files once ``grace`` seconds have passed since they were
    replaced (the manifest first: then nothing lists the rest). Returns (bytes freed, bytes
    still kept)."""
    storage = LocalStorage(directory)
    try:
        state = load_edits(storage)
    finally:
        storage.close()
    freed = kept = 0
    for old in sorted(state.replaced):
        if not os.path.lexists(os.path.join(directory, old + MANIFEST_SUFFIX)):
            continue
        files = _writer_files(directory, old)
        size = _sizes(directory, files)
        if _age(state.replaced_at.get(old, "")) < grace:
            kept += size
            continue
        for f in files:
            try:
                os.unlink(os.path.join(directory, f))
            except FileNotFoundError:
                pass
        freed += size
    if freed:
        fsync_path(directory)
    return freed, kept


def reclaimable(directory: str | os.PathLike[str]) -> tuple[int, int]:
    """What a compaction would free: (about the bytes of deleted episodes, by their share of
    their writers' steps; the bytes of replaced writers' files not yet removed)."""
    from ..read.reader import RecordingReader

    directory = os.fspath(directory)
    deleted = 0
    with RecordingReader(directory, show_deleted=True) as full:
        start = 0
        hidden = full.edits
        for w in full.writers:
            count = w["episodes"]
            gone = {r for a, b in hidden.hidden(w["prefix"]) for r in range(a, min(b, count))}
            if gone:
                lengths = [full.summary(start + k).length + 1 for k in range(count)]
                share = sum(lengths[k] for k in gone) / max(1, sum(lengths))
                deleted += int(share * sum(b["json_size"] + b["bin_size"]
                                           for b in w["manifest"]["batches"]))
            start += count
    retired = 0
    for old in full.edits.replaced:
        if os.path.lexists(os.path.join(directory, old + MANIFEST_SUFFIX)):
            retired += _sizes(directory, _writer_files(directory, old))
    return deleted, retired
