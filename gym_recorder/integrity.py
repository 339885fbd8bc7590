"""Integrity of a recording: check everything (:func:`verify`), and mend what a crash left
(:func:`repair`).

:func:`verify` reads every manifest, every batch file a manifest lists and every byte of every array
they reference: sizes and CRC-32s against the manifest, the batch structure, every array reference
(name, dtype, shape, bounds, alignment, checksum), and finally every episode through
:class:`~gym_recorder.RecordingReader`. Files that no manifest lists (temporary files, batches a
killed writer never committed) are not problems: the format says readers ignore them.

:func:`repair` rebuilds each writer's manifest from the batch files that are complete and whose
checksums hold (a batch JSON repeats the manifest's header, so even a deleted manifest comes back),
and moves everything else that belongs to a writer (temporary files, half-written batches, broken
batches, the old manifest) into a new sub-folder ``gym_recorder-repair-<UTC time>/`` of the
recording. It never deletes a file. Run it only while no writer is recording into the directory.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from typing import Any

import atomicwrites

from . import format
from .errors import FormatError, RecorderError
from ._salvage import salvage_runs, write_batch
from .format import (FORMAT_NAME, FORMAT_VERSION, MANIFEST_SUFFIX, batch_stem, dumps,
                     open_regular, parse_ref, read_json_file)

__all__ = ["Problem", "verify", "repair", "REPAIR_FOLDER_PREFIX"]

# Sub-folder (of the recording) that repair() moves files into; readers ignore sub-folders.
REPAIR_FOLDER_PREFIX = "gym_recorder-repair-"
# Bytes read at a time when checksumming an array, so that a huge array needs no huge buffer.
CRC_CHUNK_BYTES = 1 << 24
# Problems reported per batch file at most (a batch whose .bin is gone would else list every array).
MAX_PROBLEMS_PER_FILE = 20
# A batch file of some writer: "<prefix>.ep<9 or more digits>.json" or ".bin".
_BATCH_NAME_RE = re.compile(r"(?P<prefix>.+)\.ep(?P<first>[0-9]{9,})\.(?P<ext>json|bin)")
# A temporary file of atomicwrites (tempfile.mkstemp: "tmp" and 8 random characters).
_TEMP_NAME_RE = re.compile(r"tmp[a-z0-9_]{8}")
# Manifest keys that are the writer's batch list, not its header.
_NOT_HEADER = ("batches", "complete")


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
# Checking one batch


def _walk_refs(obj: Any, where: str, out: list[tuple[dict[str, Any], str]],
               depth: int = 0) -> None:
    """Collects every array reference (``{"__type": "ndarray", ...}``) inside a JSON value."""
    if depth > 4 * 64:  # far deeper than any batch we write; refuse to recurse further
        raise FormatError(f"{where}: nested too deeply")
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            out.append((obj, where))
            return
        for key, value in obj.items():
            _walk_refs(value, f"{where}.{key}", out, depth + 1)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _walk_refs(value, f"{where}[{i}]", out, depth + 1)


def _crc_of(fd: int, offset: int, size: int) -> int | None:
    """CRC-32 of ``size`` bytes at ``offset``; None if the file ends first."""
    crc = 0
    while size > 0:
        data = os.pread(fd, min(size, CRC_CHUNK_BYTES), offset)
        if not data:
            return None
        crc = format.crc32(data, crc)
        offset += len(data)
        size -= len(data)
    return crc


class _BatchCheck:
    """The result of checking one batch: its manifest entry (when complete) and its problems.

    A problem is either the batch's as a whole (``fatal``: its JSON, its header, its counts) or
    one entry's (an array reference that is out of bounds or whose checksum fails): ``bad`` maps
    each damaged entry's position to its first problem, so that repair can keep the others.
    """

    def __init__(self, json_name: str) -> None:
        self.json_name = json_name
        self.bin_name: str = json_name
        self.problems: list[tuple[str, str]] = []  # (file name, message)
        self.info: dict[str, Any] | None = None  # the manifest BATCH entry, when complete
        self.header: dict[str, Any] | None = None
        self.doc: dict[str, Any] | None = None
        self.fatal = False
        self.bad: dict[int, str] = {}

    def add(self, name: str, message: str, entry: int | None = None) -> None:
        if entry is None:
            self.fatal = True
        else:
            self.bad.setdefault(entry, f"{name}: {message}")
        self.note(name, message)

    def note(self, name: str, message: str) -> None:
        """Records a problem that neither condemns the batch nor names one entry."""
        if len(self.problems) < MAX_PROBLEMS_PER_FILE:
            self.problems.append((name, message))

    @property
    def ok(self) -> bool:
        return not self.problems


def _check_batch(directory: str, prefix: str, first: int, json_name: str,
                 listed: dict[str, Any] | None) -> _BatchCheck:
    """Checks one batch of our format: its files, its structure and every array's checksum.

    Args:
        directory: the recording directory.
        prefix: the writer's prefix.
        first: the batch's first entry index (from the manifest or the file name).
        json_name: the batch JSON's file name.
        listed: the manifest's entry for the batch (sizes and checksum to hold it to), or None.
    """
    check = _BatchCheck(json_name)
    bin_name = listed.get("bin") if listed is not None else None
    if not isinstance(bin_name, str):
        bin_name = batch_stem(prefix, first) + ".bin"
    check.bin_name = bin_name
    json_path = os.path.join(directory, json_name)
    try:
        data, doc = read_json_file(json_path, json_name,
                                   listed.get("json_size") if listed is not None else None)
    except FormatError as e:
        check.add(json_name, str(e).removeprefix(f"{json_name}: "))
        return check
    if listed is not None and format.crc32(data) != listed.get("json_crc32"):
        check.add(json_name, "CRC-32 of the file does not match the manifest")
    if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
        check.add(json_name, "a batch must be an object with an 'episodes' list")
        return check
    check.doc = doc
    if doc.get("format") != FORMAT_NAME or type(doc.get("version")) is not int or not (
            1 <= doc["version"] <= FORMAT_VERSION):
        check.add(json_name, f"not a {FORMAT_NAME} batch of version 1..{FORMAT_VERSION}")
    if doc.get("prefix") != prefix:
        check.add(json_name, f"prefix {doc.get('prefix')!r}, expected {prefix!r}")
    if doc.get("first") != first:
        check.add(json_name, f"first entry {doc.get('first')!r}, expected {first}")
    header = doc.get("header")
    check.header = header if isinstance(header, dict) else None
    entries = doc["episodes"]
    if listed is not None and listed.get("len") != len(entries):
        check.add(json_name, f"{len(entries)} entries, the manifest says {listed.get('len')}")
    steps = episodes = 0
    refs: list[tuple[int, dict[str, Any], str]] = []  # (entry position, reference, where)
    for pos, entry in enumerate(entries):
        where = f"entry {first + pos}"
        if not isinstance(entry, dict):
            check.add(json_name, f"{where}: must be an object")
            continue
        if entry.get("index") != first + pos:
            check.add(json_name, f"{where}: 'index' is {entry.get('index')!r}")
        for key in ("episode", "part", "steps"):
            if type(entry.get(key)) is not int or entry[key] < 0:
                check.add(json_name, f"{where}: {key!r} must be a non-negative integer")
        if type(entry.get("steps")) is int:
            steps += entry["steps"]
        episodes += entry.get("part") == 0
        found: list[tuple[dict[str, Any], str]] = []
        try:
            _walk_refs(entry, where, found)
        except FormatError as e:
            check.add(json_name, str(e))
        refs += [(pos, obj, w) for obj, w in found]
    if listed is not None:
        for key, value in (("steps", steps), ("episodes", episodes)):
            if listed.get(key) != value:
                check.add(json_name, f"the entries hold {value} {key}, the manifest says "
                                     f"{listed.get(key)!r}")
    bin_path = os.path.join(directory, bin_name)
    try:
        # (Never through a symlink, and a FIFO under the name must not block verify forever.)
        fd = open_regular(bin_path, bin_name)
    except FormatError as e:
        check.add(bin_name, str(e).removeprefix(f"{bin_name}: "))
        return check
    try:
        bin_size = os.fstat(fd).st_size
        if listed is not None and listed.get("bin_size") != bin_size:
            # Not fatal by itself: the arrays that lie inside the file may all check out.
            check.note(bin_name, f"file has {bin_size} bytes, the manifest says "
                                 f"{listed.get('bin_size')!r}")
        for pos, obj, where in refs:
            try:
                ref = parse_ref(obj, f"{json_name} {where}", file=bin_name)
            except FormatError as e:
                check.add(json_name, str(e).removeprefix(f"{json_name} "), entry=pos)
                continue
            if ref.offset + ref.size > bin_size:
                check.add(bin_name, f"{json_name} {where}: bytes {ref.offset}.."
                                    f"{ref.offset + ref.size} lie outside the file "
                                    f"({bin_size} bytes)", entry=pos)
            elif ref.crc32 is not None and _crc_of(fd, ref.offset, ref.size) != ref.crc32:
                check.add(bin_name, f"{json_name} {where}: CRC-32 of the array's bytes "
                                    f"(at {ref.offset}, {ref.size} bytes) does not match",
                          entry=pos)
    finally:
        os.close(fd)
    if check.ok:
        check.info = {"first": first, "len": len(entries), "fn": json_name, "bin": bin_name,
                      "json_size": len(data), "bin_size": bin_size,
                      "json_crc32": format.crc32(data), "steps": steps, "episodes": episodes}
    return check


# ---------------------------------------------------------------------------------------------
# verify


def _load_manifest(directory: str, name: str) -> Any:
    """The reader's validated view of one manifest (raises FormatError)."""
    from .reader import _Manifest

    return _Manifest(directory, name)


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

    names = sorted(e.name for e in os.scandir(directory) if e.name.endswith(MANIFEST_SUFFIX))
    manifests_ok = True
    known: set[str] = set(names)  # files the recording consists of
    for name in names:
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
        for binfo in m.batches:
            check = _check_batch(directory, m.prefix, binfo["first"], binfo["fn"], binfo)
            known.update((check.json_name, check.bin_name))
            for file, message in check.problems:
                report(file, message)
            if check.problems:  # the reader would only repeat them
                reported.update((check.json_name, check.bin_name))
    if not manifests_ok:
        return problems
    # Everything the files say must also make sense as episodes: read each one.
    from .reader import RecordingReader

    try:
        reader = RecordingReader(directory)
    except (RecorderError, OSError) as e:
        report(None, f"cannot open the recording: {e}")
        return problems
    with reader:
        for i in range(len(reader)):
            try:
                reader[i]
            except Exception as e:  # noqa: BLE001 - a hostile file must end in a report
                message = str(e)
                first_word = re.split(r"[: ]", message, maxsplit=1)[0]
                culprit = first_word if first_word in known else None
                if (culprit or "") not in reported:
                    report(culprit, f"episode {i}: {message}" if isinstance(e, FormatError)
                           else f"episode {i}: {type(e).__name__}: {message}")
    return problems


# ---------------------------------------------------------------------------------------------
# repair


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
        with atomicwrites.atomic_write(os.path.join(self.directory, self.folder, name),
                                       mode="wb", overwrite=False) as f:
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
    order, including batches a killed writer wrote but never committed; the manifest is rewritten
    (atomically, fsynced) when that list differs from what it says, the old one moved aside.
    Broken batches, half-written ones and temporary files move into a new sub-folder
    ``gym_recorder-repair-<UTC time>/``. Nothing is deleted. Legacy (gym-recording) writers and
    files that are not a writer's are left alone. Do not run it while a writer is recording into
    the directory.

    Args:
        directory: the recording directory.

    Returns:
        One human-readable line per action taken; empty when there was nothing to repair.

    Raises:
        FileNotFoundError: if the directory does not exist.
        OSError: if a file cannot be moved or the manifest cannot be written.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no recording directory {directory!r}")
    mover = _Mover(directory)
    actions: list[str] = []
    files = sorted(e.name for e in os.scandir(directory) if e.is_file(follow_symlinks=False))
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

    def __init__(self, check: _BatchCheck, runs: list[list[int]], why: str) -> None:
        self.check, self.runs, self.why = check, runs, why
        self.written: list[dict[str, Any]] = []  # the BATCH entries of the new batches


def _run_names(prefix: str, salvage: _Salvage, run: list[int]) -> tuple[str, str]:
    assert salvage.check.doc is not None
    stem = batch_stem(prefix, salvage.check.doc["first"] + run[0])
    return stem + ".json", stem + ".bin"


def _write_run(directory: str, prefix: str, salvage: _Salvage, run: list[int],
               source_bin: str) -> None:
    """Writes one run of a salvaged batch, checks the new files like any batch, records it."""
    assert salvage.check.doc is not None
    json_name, _ = write_batch(directory, prefix, salvage.check.doc, run, source_bin)
    first = salvage.check.doc["first"] + run[0]
    check = _check_batch(directory, prefix, first, json_name, None)
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
    manifest = prefix + MANIFEST_SUFFIX
    manifest_path = os.path.join(directory, manifest)
    old: Any = None
    old_problem = "missing"
    if os.path.isfile(manifest_path) and not os.path.islink(manifest_path):
        try:
            _, old = read_json_file(manifest_path, manifest)
            old_problem = ""
        except FormatError as e:
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
            check = _check_batch(directory, prefix, first, stem + ".json", listed.get(
                stem + ".json"))
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
                    end = first + len(check.doc["episodes"]) if check.doc else end
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
    if not old_problem and old_list == kept and not to_move:
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
        with atomicwrites.atomic_write(manifest_path, mode="wb", overwrite=True) as f:
            f.write(dumps(doc))
        return batches_now

    final = commit()
    if later or deferred:
        for names, why in later:
            move(names, why)
        for salvage, run in deferred:
            bin_name = salvage.check.bin_name
            _write_run(directory, prefix, salvage, run, where_now[bin_name])
        final = commit()
    for salvage in salvages:
        doc = salvage.check.doc
        assert doc is not None
        n = len(doc["episodes"])
        k = sum(b["len"] for b in salvage.written)
        new = ", ".join(b["fn"] for b in sorted(salvage.written, key=lambda b: int(b["first"])))
        names = [salvage.check.json_name, salvage.check.bin_name]
        folder = os.path.relpath(os.path.dirname(where_now[names[0]]), directory) + os.sep
        actions.append(
            f"kept {k} of {n} entries of {names[0]} ({sum(b['episodes'] for b in salvage.written)}"
            f" episode(s) starting, {sum(b['steps'] for b in salvage.written)} step(s)) as "
            f"{new}; moved {', '.join(names)} to {folder}: damaged: {salvage.why}")
    steps = sum(b["steps"] for b in final)
    episodes = sum(b["episodes"] for b in final)
    before = "" if old_list is None else f"; it listed {len(old_list)}"
    actions.append(f"rebuilt {manifest} from {len(final)} complete batch(es): {episodes} "
                   f"episode(s), {steps} step(s){before}")
    return actions
