"""repair(): rebuild manifests from the complete batches, keep what checks out, move the rest.

See :func:`repair` (re-exported by :mod:`gym_recorder.integrity`).
"""

from __future__ import annotations

import datetime
import os
import re
from typing import Any

from ._checks import BatchCheck, access_cause, check_batch
from ._salvage import salvage_runs, write_batch
from ..errors import FormatError, RecorderError, RepairError
from ..format import BATCH_NAME_RE as _BATCH_NAME_RE
from ..format.fileio import atomic_write, dumps, open_regular, read_json_file
from ..format import FORMAT_NAME, FORMAT_VERSION, MANIFEST_SUFFIX, batch_stem, manifest_name

__all__ = ["repair", "REPAIR_FOLDER_PREFIX"]

# Sub-folder (of the recording) that repair() moves files into; readers ignore sub-folders.
REPAIR_FOLDER_PREFIX = "gym_recorder-repair-"
# A temporary file of atomicwrites (tempfile.mkstemp: "tmp" and 8 random characters).
_TEMP_NAME_RE = re.compile(r"tmp[a-z0-9_]{8}")
# Manifest keys that are the writer's batch list, not its header.
_NOT_HEADER = ("batches", "complete")


class _Mover:
    """Moves files into one new repair sub-folder, created on first use."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.folder: str | None = None

    def move(self, names: list[str]) -> str:
        if self.folder is None:
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            base = REPAIR_FOLDER_PREFIX + stamp
            folder, n = base, 1
            while os.path.lexists(os.path.join(self.directory, folder)):
                n += 1
                folder = f"{base}-{n}"
            os.mkdir(os.path.join(self.directory, folder))
            self.folder = folder
        for name in names:
            os.rename(os.path.join(self.directory, name),
                      os.path.join(self.directory, self.folder, name))
        return f"{self.folder}{os.sep}"

    def copy(self, name: str) -> str:
        """Copies a file into the folder (fsynced), for one that is about to be replaced."""
        where = self.move([])
        assert self.folder is not None
        with open(os.path.join(self.directory, name), "rb") as src:
            data = src.read()
        with atomic_write(os.path.join(self.directory, self.folder, name),
                          overwrite=False) as f:
            f.write(data)
        return where


def _header_of(doc: Any, prefix: str) -> dict[str, Any] | None:
    """The header fields of a manifest (or a batch's "header"), if they describe this writer."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or doc.get("prefix") != prefix:
        return None
    if type(doc.get("version")) is not int or not 1 <= doc["version"] <= FORMAT_VERSION:
        return None
    if not isinstance(doc.get("observation_space"), dict) or not isinstance(
            doc.get("action_space"), dict):
        return None
    return {k: v for k, v in doc.items() if k not in _NOT_HEADER}


def repair(directory: str | os.PathLike[str]) -> list[str]:
    """Rebuilds manifests from the complete batch files and moves everything else aside.

    For each writer prefix found in the directory: every batch whose .json and .bin are complete
    (sizes and checksums hold, against the manifest when it lists the batch) is kept, in entry
    order, including batches a killed writer wrote but never committed; of a batch in which some
    arrays fail their checks, the entries whose arrays all check out are kept, copied into new
    batch files. The manifest is rewritten (atomically, fsynced) when that list differs from
    what it says, a copy of the old one kept aside. Broken batches, half-written ones and
    temporary files move into a new sub-folder ``gym_recorder-repair-<UTC time>/``, the ones the
    old manifest listed only once the new manifest no longer does. Nothing is deleted. Legacy
    (gym-recording) writers and files that are not a writer's are left alone. Do not run it while a writer is recording into
    the directory.

    Args:
        directory: the recording directory.

    Returns:
        One human-readable line per action taken; empty when there was nothing to repair.

    Raises:
        FileNotFoundError: if the directory does not exist.
        RepairError: (an ``OSError``) if a manifest or batch file cannot be opened (a
            permission, the file-descriptor limit): nothing is changed, since such a file may
            well be intact; or if the directory cannot be changed (read-only, full): the
            recording stays readable, and running repair again once that is fixed finishes.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no recording directory {directory!r}")
    files = sorted(e.name for e in os.scandir(directory) if e.is_file(follow_symlinks=False))
    _check_readable(directory, files)
    try:
        return _repair(directory, files)
    except RecorderError:
        raise
    except OSError as e:
        # (A temporary file or folder that could not be made is not there: name the directory.)
        there = isinstance(e.filename, str) and os.path.lexists(e.filename)
        what = e.filename if there else f"writing into {directory}"
        raise RepairError(f"{directory}: repair stopped, {what}: {e.strerror or e}; the "
                          f"recording stays readable: run repair again once that is fixed") from e


def _check_readable(directory: str, files: list[str]) -> None:
    """Opens every manifest and batch file once, before anything is changed: one that cannot be
    opened for a reason of :data:`~gym_recorder.integrity._checks.ACCESS_ERRNOS` is not damaged, and must
    not be moved aside as if it were (nor its writer's manifest rebuilt without it)."""
    for name in files:
        if not (name.endswith(MANIFEST_SUFFIX) or _BATCH_NAME_RE.fullmatch(name)):
            continue
        try:
            os.close(open_regular(os.path.join(directory, name), name))
        except FormatError as e:
            cause = access_cause(e)
            if cause is not None:
                raise _unreadable(directory, name, cause) from e


def _unreadable(directory: str, name: str, cause: OSError) -> RepairError:
    return RepairError(f"{os.path.join(directory, name)}: cannot read ({cause.strerror}); "
                       "repair changed nothing: make the file readable and run it again")


def _repair(directory: str, files: list[str]) -> list[str]:
    mover = _Mover(directory)
    actions: list[str] = []
    temps = [n for n in files if _TEMP_NAME_RE.fullmatch(n)]
    if temps:
        where = mover.move(temps)
        actions.append(f"moved {len(temps)} temporary file(s) to {where}: {', '.join(temps)}")
    writers: dict[str, dict[int, set[str]]] = {}
    for name in files:
        if name.endswith(MANIFEST_SUFFIX):
            writers.setdefault(name[: -len(MANIFEST_SUFFIX)], {})
    for name in files:
        match = _BATCH_NAME_RE.fullmatch(name)
        if match:
            writers.setdefault(match["prefix"], {}).setdefault(int(match["first"]), set()).add(
                match["ext"])
    for prefix in sorted(writers):
        actions += _repair_writer(directory, prefix, writers[prefix], mover)
    return actions


class _Salvage:
    """A damaged batch some of whose entries are kept: its check, the runs kept, what is wrong."""

    def __init__(self, check: BatchCheck, runs: list[list[int]], why: str) -> None:
        self.check, self.runs, self.why = check, runs, why
        self.written: list[dict[str, Any]] = []  # the BATCH entries of the new batches


def _run_names(prefix: str, salvage: _Salvage, run: list[int]) -> tuple[str, str]:
    assert salvage.check.doc is not None
    stem = batch_stem(prefix, salvage.check.doc["first"] + run[0])
    return stem + ".json", stem + ".bin"


def _write_run(directory: str, prefix: str, salvage: _Salvage, run: list[int],
               source_bin: str, keep_offsets: bool = False) -> None:
    """Writes one run of a salvaged batch, checks the new files like any batch, records it."""
    assert salvage.check.doc is not None
    json_name, _ = write_batch(directory, prefix, salvage.check.doc, run, source_bin,
                               keep_offsets)
    first = salvage.check.doc["first"] + run[0]
    check = check_batch(directory, prefix, first, json_name, None)
    if not check.ok or check.info is None:
        raise RecorderError(f"{json_name}: the salvaged batch does not check out (a bug): "
                            f"{check.problems[:1]}")
    salvage.written.append(check.info)


def _repair_writer(directory: str, prefix: str, batches: dict[int, set[str]],
                   mover: _Mover) -> list[str]:
    """Repairs one writer's manifest and batches; returns the lines describing what it did.

    Nothing is changed until every batch is checked. Then, so that a kill at any moment leaves
    a manifest that lists only complete batches: files no manifest lists are moved aside, the
    salvaged batches that need no listed file's name are written, the new manifest is committed,
    and only then are the batches it no longer lists moved aside (and the salvaged batches that
    take their names written, and the manifest committed once more).
    """
    actions: list[str] = []
    manifest = manifest_name(prefix)
    manifest_path = os.path.join(directory, manifest)
    old: Any = None
    old_problem = "missing"
    if os.path.isfile(manifest_path) and not os.path.islink(manifest_path):
        try:
            _, old = read_json_file(manifest_path, manifest)
            old_problem = ""
        except FormatError as e:
            cause = access_cause(e)
            if cause is not None:
                raise _unreadable(directory, manifest, cause) from e
            old_problem = str(e).removeprefix(f"{manifest}: ")
    if isinstance(old, dict) and "format" not in old and "version" not in old:
        return []  # an OpenAI gym-recording writer: not ours to rewrite
    header = _header_of(old, prefix)
    listed: dict[str, dict[str, Any]] = {}
    old_batches = old.get("batches") if isinstance(old, dict) else None
    if header is None and not old_problem:
        old_problem = "not a valid manifest of this writer"
    elif header is not None and not isinstance(old_batches, list):
        old_problem = "'batches' is not a list"
    elif header is not None and isinstance(old_batches, list):
        listed = {b["fn"]: b for b in old_batches if isinstance(b, dict)
                  and isinstance(b.get("fn"), str)}
    listed_files = set(listed) | {b["bin"] for b in listed.values() if isinstance(b.get("bin"),
                                                                                 str)}
    # -- plan: check every batch, change nothing
    kept: list[dict[str, Any]] = []
    salvages: list[_Salvage] = []
    to_move: list[tuple[list[str], str]] = []  # (file names, why)
    end = 0
    for first in sorted(batches):
        stem = batch_stem(prefix, first)
        exts = batches[first]
        names = [stem + "." + ext for ext in ("json", "bin") if ext in exts]
        if "json" not in exts:
            why = "a .bin without its .json (a batch a writer never finished)"
        elif first < end:
            why = f"its entries overlap the previous batch (which ends at entry {end})"
        else:
            entry = listed.get(stem + ".json")
            check = check_batch(directory, prefix, first, stem + ".json", entry)
            if check.unreadable is not None:  # (opened by _check_readable moments ago)
                raise _unreadable(directory, *check.unreadable)
            if not check.ok and entry is not None:
                # The manifest's entry may be what is wrong (a count edited, say): a batch whose
                # JSON is byte for byte the one the entry committed (size and CRC-32) and that
                # checks out on its own is kept, with its entry rebuilt from it.
                alone = check_batch(directory, prefix, first, stem + ".json", None)
                if alone.ok and alone.info is not None and all(
                        alone.info.get(k) == entry.get(k) for k in ("json_size", "json_crc32")):
                    actions.append(f"rebuilt {manifest}'s entry of {stem}.json from the batch "
                                   f"({'; '.join(m for _, m in check.problems[:2])})")
                    listed.pop(stem + ".json")
                    check = alone
            if check.bin_name != stem + ".bin":
                why = f"names {check.bin_name!r} as its .bin"
            elif not check.ok:
                why = "; ".join(f"{file}: {message}" for file, message in check.problems[:3])
                runs = ([] if check.fatal or check.doc is None else
                        salvage_runs(check.doc["episodes"], set(check.bad)))
                if runs:
                    damaged = "; ".join(check.bad[pos] for pos in sorted(check.bad)[:3])
                    salvages.append(_Salvage(check, runs, damaged or why))
                    to_move.append((names, ""))
                    # (up to its last kept entry: a batch after that, which a killed repair
                    # wrote from this one's entries while its .bin was being replaced, stays)
                    end = first + max(r[-1] for r in runs) + 1
                    if header is None and check.header is not None:
                        header = _header_of(check.header, prefix)
                    continue
            else:
                assert check.info is not None
                why = ""
                if header is None and check.header is not None:
                    header = _header_of(check.header, prefix)
                kept.append(listed.get(stem + ".json") or check.info)  # keep unknown keys
                end = first + check.info["len"]
        if why:
            to_move.append((names, why))
    if not kept and not listed and not salvages and old_problem == "missing":
        for names, why in to_move:
            actions.append(f"moved {', '.join(names)} to {mover.move(names)}: {why}")
        return actions
    if header is None:
        for names, why in to_move:
            actions.append(f"moved {', '.join(names)} to {mover.move(names)}: {why}")
        actions.append(f"cannot rebuild {manifest}: no valid manifest and no batch carries the "
                       "header (spaces, env id); left as is")
        return actions
    old_list = list(old_batches) if isinstance(old_batches, list) else None
    # Compared as JSON, not by value: a BATCH rebuilt from its batch because the manifest held
    # 8.0 where 8 belongs (which readers refuse) equals the old one in Python (8.0 == 8).
    if not old_problem and old_list is not None and dumps(old_list) == dumps(kept) \
            and not to_move:
        return actions
    kept_names = {b["fn"] for b in kept}
    moved_names = {n for names, _ in to_move for n in names}
    gone = [name for name in listed if name not in kept_names and name not in moved_names
            and not os.path.lexists(os.path.join(directory, name))]
    if gone:
        actions.append(f"{manifest} lists {len(gone)} batch file(s) that are missing: "
                       f"{', '.join(gone)}")
    # "complete" stays true only if the writer closed cleanly and every batch it listed is kept.
    complete = (not old_problem and isinstance(old, dict) and old.get("complete") is True
                and all(name in kept_names for name in listed))
    # -- act, in an order that keeps the directory readable at every moment
    where_now: dict[str, str] = {}  # file name -> its path once moved

    def move(names: list[str], why: str) -> None:
        where = mover.move(names)
        for n in names:
            where_now[n] = os.path.join(directory, where, n)
        if why:
            actions.append(f"moved {', '.join(names)} to {where}: {why}")

    later = [(names, why) for names, why in to_move if set(names) & listed_files]
    for names, why in to_move:
        if not set(names) & listed_files:
            move(names, why)
    deferred: list[tuple[_Salvage, list[int]]] = []
    for salvage in salvages:
        for run in salvage.runs:
            if set(_run_names(prefix, salvage, run)) & listed_files:
                deferred.append((salvage, run))
            else:
                bin_name = salvage.check.bin_name
                _write_run(directory, prefix, salvage, run,
                           where_now.get(bin_name, os.path.join(directory, bin_name)))
    if old_problem != "missing":
        where = mover.copy(manifest)
        actions.append(f"copied {manifest} to {where} before rewriting it "
                       f"({old_problem or 'it listed other batches'})")

    def commit() -> list[dict[str, Any]]:
        batches_now = sorted(kept + [b for s in salvages for b in s.written],
                             key=lambda b: int(b["first"]))
        doc = {**header, "batches": batches_now, "complete": complete}
        with atomic_write(manifest_path) as f:
            f.write(dumps(doc))
        return batches_now

    final = commit()
    copied: set[str] = set()
    if later or deferred:
        # A salvaged batch that takes a damaged batch's names replaces it: the damaged files are
        # copied aside first (not moved), so that a repair killed in between still finds them in
        # place, unlisted, and salvages them again.
        reused = {n for s, run in deferred for n in _run_names(prefix, s, run)}
        for names, why in later:
            if set(names) & reused:
                for n in names:
                    where = mover.copy(n)
                    where_now[n] = os.path.join(directory, where, n)
                    copied.add(n)
            else:
                move(names, why)
        for salvage, run in deferred:
            bin_name = salvage.check.bin_name
            # (its arrays keep their offsets: see write_batch's keep_offsets)
            _write_run(directory, prefix, salvage, run, where_now[bin_name],
                       keep_offsets=_run_names(prefix, salvage, run)[1] == bin_name)
        final = commit()
    for salvage in salvages:
        doc = salvage.check.doc
        assert doc is not None
        total = len(doc["episodes"])
        k = sum(b["len"] for b in salvage.written)
        starting = sum(b["episodes"] for b in salvage.written)
        new = ", ".join(b["fn"] for b in sorted(salvage.written, key=lambda b: int(b["first"])))
        names = [salvage.check.json_name, salvage.check.bin_name]
        folder = os.path.relpath(os.path.dirname(where_now[names[0]]), directory) + os.sep
        verb = "copied" if names[0] in copied else "moved"
        actions.append(
            f"kept {k} of {total} entries of {names[0]} ({starting} episode(s) starting, "
            f"{sum(b['steps'] for b in salvage.written)} step(s)) as "
            f"{new}; {verb} the damaged {', '.join(names)} to {folder}: {salvage.why}")
    steps = sum(b["steps"] for b in final)
    episodes = sum(b["episodes"] for b in final)
    before = "" if old_list is None else f"; it listed {len(old_list)}"
    actions.append(f"rebuilt {manifest} from {len(final)} complete batch(es): {episodes} "
                   f"episode(s), {steps} step(s){before}")
    return actions
