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


def _walk_refs(obj: Any, where: str, out: list[tuple[dict, str]], depth: int = 0) -> None:
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
    """The result of checking one batch: its manifest entry (when complete) and its problems."""

    def __init__(self, json_name: str) -> None:
        self.json_name = json_name
        self.bin_name: str | None = None
        self.problems: list[tuple[str, str]] = []  # (file name, message)
        self.info: dict | None = None  # the manifest BATCH entry, when the batch is complete
        self.header: dict | None = None
        self.doc: dict | None = None

    def add(self, name: str, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS_PER_FILE:
            self.problems.append((name, message))

    @property
    def ok(self) -> bool:
        return not self.problems


def _check_batch(directory: str, prefix: str, first: int, json_name: str,
                 listed: dict | None) -> _BatchCheck:
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
    refs: list[tuple[dict, str]] = []
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
        try:
            _walk_refs(entry, where, refs)
        except FormatError as e:
            check.add(json_name, str(e))
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
            check.add(bin_name, f"file has {bin_size} bytes, the manifest says "
                                f"{listed.get('bin_size')!r}")
        spans: list[tuple[int, int]] = []
        for obj, where in refs:
            try:
                ref = parse_ref(obj, f"{json_name} {where}", file=bin_name)
            except FormatError as e:
                check.add(json_name, str(e).removeprefix(f"{json_name} "))
                continue
            spans.append((ref.offset, ref.offset + ref.size))
            if ref.offset + ref.size > bin_size:
                check.add(bin_name, f"{json_name} {where}: bytes {ref.offset}.."
                                    f"{ref.offset + ref.size} lie outside the file "
                                    f"({bin_size} bytes)")
            elif ref.crc32 is not None and _crc_of(fd, ref.offset, ref.size) != ref.crc32:
                check.add(bin_name, f"{json_name} {where}: CRC-32 of the array's bytes "
                                    f"(at {ref.offset}, {ref.size} bytes) does not match")
        if check.ok:
            for message in _padding_problems(fd, spans, bin_size):
                check.add(bin_name, message)
    finally:
        os.close(fd)
    if check.ok:
        check.info = {"first": first, "len": len(entries), "fn": json_name, "bin": bin_name,
                      "json_size": len(data), "bin_size": bin_size,
                      "json_crc32": format.crc32(data), "steps": steps, "episodes": episodes}
    return check


def _padding_problems(fd: int, spans: list[tuple[int, int]], file_size: int) -> list[str]:
    """Checks the bytes of a .bin that no array covers: zero padding, nothing after the last array.

    Args:
        fd: the open .bin file.
        spans: ``(start, end)`` of every array in the file (all within it).
        file_size: the file's size.

    Returns:
        One message per stretch of bytes that breaks the rule (see "Arrays" in the format).
    """
    problems: list[str] = []
    pos = 0
    last_end = 0
    gaps: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if start > pos:
            gaps.append((pos, start))
        pos = max(pos, end)
        last_end = max(last_end, end)
    if file_size > last_end:
        problems.append(f"{file_size - last_end} bytes follow the last array (at {last_end})")
    for start, end in gaps:
        offset = start
        while offset < end:
            chunk = os.pread(fd, min(CRC_CHUNK_BYTES, end - offset), offset)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                problems.append(f"padding bytes {start}..{end} between arrays are not zero")
                break
            offset += len(chunk)
    return problems


# ---------------------------------------------------------------------------------------------
# verify


def _load_manifest(directory: str, name: str) -> Any:
    """The reader's validated view of one manifest (raises FormatError)."""
    from .reader import _Manifest

    return _Manifest(directory, name)


def verify(directory: str | os.PathLike) -> list[Problem]:
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
                name = re.split(r"[: ]", message, maxsplit=1)[0]
                if name not in known:
                    name = None
                if (name or "") not in reported:
                    report(name, f"episode {i}: {message}" if isinstance(e, FormatError)
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


def _header_of(doc: Any, prefix: str) -> dict | None:
    """The header fields of a manifest (or a batch's "header"), if they describe this writer."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or doc.get("prefix") != prefix:
        return None
    if type(doc.get("version")) is not int or not 1 <= doc["version"] <= FORMAT_VERSION:
        return None
    if not isinstance(doc.get("observation_space"), dict) or not isinstance(
            doc.get("action_space"), dict):
        return None
    return {k: v for k, v in doc.items() if k not in _NOT_HEADER}


def repair(directory: str | os.PathLike) -> list[str]:
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


def _repair_writer(directory: str, prefix: str, batches: dict[int, set[str]],
                   mover: _Mover) -> list[str]:
    """Repairs one writer's manifest and batches; returns the lines describing what it did."""
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
    listed: dict[str, dict] = {}
    old_batches = old.get("batches") if isinstance(old, dict) else None
    if header is None and not old_problem:
        old_problem = "not a valid manifest of this writer"
    elif header is not None and not isinstance(old_batches, list):
        old_problem = "'batches' is not a list"
    elif header is not None:
        listed = {b["fn"]: b for b in old_batches if isinstance(b, dict)
                  and isinstance(b.get("fn"), str)}
    kept: list[dict] = []
    moved: set[str] = set()
    end = 0
    for first in sorted(batches):
        stem = batch_stem(prefix, first)
        exts = batches[first]
        names = [stem + "." + ext for ext in ("json", "bin") if ext in exts]
        if "json" not in exts:
            why = "a .bin without its .json (a batch a writer never finished)"
        else:
            check = _check_batch(directory, prefix, first, stem + ".json", listed.get(
                stem + ".json"))
            if check.bin_name != stem + ".bin":
                why = f"names {check.bin_name!r} as its .bin"
            elif not check.ok:
                why = "; ".join(f"{file}: {message}" for file, message in check.problems[:3])
            elif first < end:
                why = f"its entries overlap the previous batch (which ends at entry {end})"
            else:
                why = ""
                if header is None and check.header is not None:
                    header = _header_of(check.header, prefix)
                kept.append(listed.get(stem + ".json") or check.info)  # keep unknown keys
                end = first + check.info["len"]
        if why:
            where = mover.move(names)
            moved.update(names)
            actions.append(f"moved {', '.join(names)} to {where}: {why}")
    if not kept and not listed and old_problem == "missing":
        return actions
    if header is None:
        actions.append(f"cannot rebuild {manifest}: no valid manifest and no batch carries the "
                       "header (spaces, env id); left as is")
        return actions
    old_list = list(old_batches) if isinstance(old_batches, list) else None
    if not old_problem and old_list == kept:
        return actions
    kept_names = {b["fn"] for b in kept}
    gone = [name for name in listed if name not in kept_names and name not in moved
            and not os.path.lexists(os.path.join(directory, name))]
    if gone:
        actions.append(f"{manifest} lists {len(gone)} batch file(s) that are missing: "
                       f"{', '.join(gone)}")
    # "complete" stays true only if the writer closed cleanly and every batch it listed is kept.
    complete = (not old_problem and isinstance(old, dict) and old.get("complete") is True
                and all(name in kept_names for name in listed))
    doc = {**header, "batches": kept, "complete": complete}
    if old_problem != "missing":
        where = mover.move([manifest])
        actions.append(f"moved {manifest} to {where} ({old_problem or 'it listed other batches'})")
    with atomicwrites.atomic_write(manifest_path, mode="wb", overwrite=True) as f:
        f.write(dumps(doc))
    steps = sum(b["steps"] for b in kept)
    episodes = sum(b["episodes"] for b in kept)
    before = "" if old_list is None else f"; it listed {len(old_list)}"
    actions.append(f"rebuilt {manifest} from {len(kept)} complete batch(es): {episodes} "
                   f"episode(s), {steps} step(s){before}")
    return actions

