"""Checking one batch of a recording: its files, its structure, every array's checksum.

Shared by :func:`gym_recorder.integrity.verify` and :func:`gym_recorder.integrity.repair`.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import numpy as np

from ..format import fileio
from ..errors import FormatError
from ..format.fileio import open_regular, read_json_file
from ..format import FORMAT_NAME, FORMAT_VERSION, batch_stem, check_flags, parse_ref
from ..read.manifest import Manifest
from ._stacked import index_problems, planned_arrays, walk_refs

__all__ = ["CRC_CHUNK_BYTES", "MAX_PROBLEMS_PER_FILE", "ACCESS_ERRNOS", "access_cause", "BatchCheck",
           "check_batch"]

# Bytes read at a time when checksumming an array, so that a huge array needs no huge buffer.
CRC_CHUNK_BYTES = 1 << 24
# Problems reported per batch file at most (a batch whose .bin is gone would else list every array).
MAX_PROBLEMS_PER_FILE = 20
# Why a file may fail to open that says nothing about the file itself (it is there, it may be
# intact): a permission, the process's or the system's file-descriptor limit, memory.
ACCESS_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def access_cause(e: BaseException) -> OSError | None:
    """The OS error behind a :class:`FormatError` when it is one of :data:`ACCESS_ERRNOS`: the
    file could not be opened, which does not make it damaged."""
    cause = e.__cause__
    if isinstance(cause, OSError) and cause.errno in ACCESS_ERRNOS:
        return cause
    return None


# ---------------------------------------------------------------------------------------------
# Checking one batch


def _crc_of(fd: int, offset: int, size: int, flags: bool = False,
            whole: memoryview | None = None) -> int | None:
    """CRC-32 of ``size`` bytes at ``offset``; None if the file ends first, or if ``flags``
    (a ``|b1`` array) and a byte is neither 0 nor 1. From ``whole`` (the file's bytes) when
    given, else read from ``fd``."""
    if whole is not None:
        view = whole[offset:offset + size]
        if len(view) != size or (flags and size and max(view) > 1):
            return None
        return fileio.crc32(view)
    crc = 0
    while size > 0:
        data = os.pread(fd, min(size, CRC_CHUNK_BYTES), offset)
        if not data:
            return None
        if flags and data and max(data) > 1:
            return None
        crc = fileio.crc32(data, crc)
        offset += len(data)
        size -= len(data)
    return crc


def _coded_problem(fd: int, ref: Any, where: str) -> str | None:
    """What is wrong with a compressed array's chunks (decoded a chunk at a time), or None."""
    from ..errors import CodecUnavailableError
    from ..format.codecs import decode_rows

    def read(offset: int, size: int) -> bytes:
        data = os.pread(fd, size, offset)
        if len(data) != size:
            raise FormatError(f"{where}: {size} bytes at {offset} could not be read")
        return data

    try:
        rows = ref.shape[0]
        step = max(1, ref.codec.chunk_rows)
        row_bytes = ref.size // rows if rows else 0
        out = np.empty(min(step, rows) * row_bytes, np.uint8)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            decode_rows(ref, read, lo, hi, out[:(hi - lo) * row_bytes], where)
    except CodecUnavailableError as e:
        return f"{where}: not decoded ({e})"
    except FormatError as e:
        return str(e)
    return None


def _differs(listed: Any, actual: int) -> bool:
    """Whether a manifest's number differs from the batch's: by type too (readers refuse 2.0
    where 2 belongs, so repair must not take it for the batch's count)."""
    return type(listed) is not int or listed != actual


class BatchCheck:
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
        # (file name, the OS error) when a file could not be opened for a reason of
        # ACCESS_ERRNOS: the batch is then unchecked, not damaged.
        self.unreadable: tuple[str, OSError] | None = None

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


def check_batch(directory: str, prefix: str, first: int, json_name: str,
                 listed: dict[str, Any] | None, manifest: Manifest | None = None) -> BatchCheck:
    """Checks one batch of our format: its files, its structure and every array's checksum.

    Args:
        directory: the recording directory.
        prefix: the writer's prefix.
        first: the batch's first entry index (from the manifest or the file name).
        json_name: the batch JSON's file name.
        listed: the manifest's entry for the batch (sizes and checksum to hold it to), or None.
        manifest: the writer's checked manifest, when it has one: the batch's stacked arrays
            are then placed by its plan, as the reader places them (see
            :mod:`gym_recorder.integrity._stacked`); the other references, and all of them
            without it, by :func:`~gym_recorder.format.parse_ref`.
    """
    check = BatchCheck(json_name)
    good_index = None
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
        cause = access_cause(e)
        check.unreadable = (json_name, cause) if cause is not None else None
        return check
    if listed is not None and _differs(listed.get("json_crc32"), fileio.crc32(data)):
        check.add(json_name, "CRC-32 of the file does not match the manifest")
    for key, value in (("json_size", len(data)), ("first", first)):
        if listed is not None and _differs(listed.get(key), value):
            check.add(json_name, f"the manifest's {key!r} is {listed.get(key)!r}, not {value}")
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
    if listed is not None and _differs(listed.get("len"), len(entries)):
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
        try:
            check_flags(entry, where)
        except FormatError as e:
            check.add(json_name, str(e))
        if type(entry.get("steps")) is int:
            steps += entry["steps"]
        episodes += entry.get("part") == 0
        found: list[tuple[dict[str, Any], str]] = []
        try:
            walk_refs(entry, where, found)
        except FormatError as e:
            check.add(json_name, str(e))
        refs += [(pos, obj, w) for obj, w in found]
    if listed is not None:
        for key, value in (("steps", steps), ("episodes", episodes)):
            if _differs(listed.get(key), value):
                check.add(json_name, f"the entries hold {value} {key}, the manifest says "
                                     f"{listed.get(key)!r}")
    bin_path = os.path.join(directory, bin_name)
    try:
        # (Never through a symlink, and a FIFO under the name must not block verify forever.)
        fd = open_regular(bin_path, bin_name)
    except FormatError as e:
        check.add(bin_name, str(e).removeprefix(f"{bin_name}: "))
        cause = access_cause(e)
        check.unreadable = (bin_name, cause) if cause is not None else None
        return check
    try:
        bin_size = os.fstat(fd).st_size
        if listed is not None and _differs(listed.get("bin_size"), bin_size):
            # Not fatal by itself: the arrays that lie inside the file may all check out.
            check.note(bin_name, f"file has {bin_size} bytes, the manifest says "
                                 f"{listed.get('bin_size')!r}")
        spans: list[tuple[int, int]] = []
        codecs: set[str] = set()
        # (entries that all checked out: their stacked arrays placed as the reader does)
        planned = planned_arrays(manifest, entries, json_name, bin_name, bin_size) \
            if manifest is not None and check.ok else None
        placed = planned.refs if planned is not None else {}
        # (a .bin of at most CRC_CHUNK_BYTES is read once, its arrays checked in memory)
        whole = memoryview(os.pread(fd, bin_size, 0)) if bin_size <= CRC_CHUNK_BYTES else None
        for pos, obj, where in refs:
            got = placed.get(id(obj))
            ref = None
            if got is not None:  # (raw, inside the file, of the CRC-32 the reference gives)
                offset, stored, kind = got
                crc, codec = obj.get("crc32"), None
            else:
                try:
                    ref = parse_ref(obj, f"{json_name} {where}", file=bin_name)
                except FormatError as e:
                    check.add(json_name, str(e).removeprefix(f"{json_name} "), entry=pos)
                    continue
                offset, stored, kind = ref.offset, ref.stored, ref.dtype.kind
                crc, codec = ref.crc32, ref.codec
            end = offset + stored
            spans.append((offset, end))
            if codec is not None:
                codecs.add(codec.name)
            if end > bin_size:
                check.add(bin_name, f"{json_name} {where}: bytes {offset}.."
                                    f"{end} lie outside the file "
                                    f"({bin_size} bytes)", entry=pos)
            elif crc is not None and _crc_of(fd, offset, stored, kind == "b" and codec is None,
                                             whole) != crc:
                check.add(bin_name, f"{json_name} {where}: CRC-32 of the array's bytes "
                                    f"(at {offset}, {stored} bytes) does not match"
                                    + (", or a bool byte is neither 0 nor 1"
                                       if kind == "b" else ""),
                          entry=pos)
            elif ref is not None and ref.codec is not None:
                problem = _coded_problem(fd, ref, f"{json_name} {where}")
                if problem:
                    check.add(bin_name, problem, entry=pos)
        # The batch index (the manifest's, else the batch's own copy) must say what the
        # entries say. A wrong one is not the batch's fault: verify reports the manifest's,
        # and the BATCH rebuilt from the batch (repair) goes without it.
        listed_index = listed.get("index") if listed is not None else None
        index = listed_index if listed_index is not None else doc.get("index")
        if index is not None and check.ok:
            table_span, messages = index_problems(fd, bin_size, index, entries, planned)
            for in_bin, message in messages if listed_index is not None else ():
                check.note(bin_name if in_bin else json_name,
                           f"the manifest's index of the batch: {message}")
            if table_span is not None:  # (its bytes are the index's, whatever they hold)
                spans.append(table_span)
            if not messages:
                good_index = index
        if check.ok:
            # Not fatal: every array checks out, only bytes no array covers are wrong.
            for message in _padding_problems(fd, spans, bin_size):
                check.note(bin_name, message)
    finally:
        os.close(fd)
    if check.ok:
        check.info = {"first": first, "len": len(entries), "fn": json_name, "bin": bin_name,
                      "json_size": len(data), "bin_size": bin_size,
                      "json_crc32": fileio.crc32(data), "steps": steps, "episodes": episodes}
        if good_index is not None and not codecs:
            check.info["index"] = good_index
        if codecs:
            check.info["codecs"] = sorted(codecs)
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
