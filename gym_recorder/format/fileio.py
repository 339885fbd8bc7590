"""Reading and writing a recording's files at the byte level: strict JSON, safe opens, atomic
writes, CRC-32.

:func:`dumps` and :func:`loads` are the format's JSON (compact ASCII, no NaN; bounded by
:data:`~gym_recorder.format.MAX_JSON_BYTES` and nesting); :func:`open_regular` opens a file of a
recording refusing symlinks, FIFOs and devices; :func:`read_json_file` reads and parses one JSON
file of bounded size; :class:`AtomicWriter` and :func:`atomic_write` write a file atomically
(atomicwrites) with the permissions the umask gives; :data:`crc32` is the zlib CRC-32 every
checksum of the format uses (from ISA-L when installed).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, ContextManager

import atomicwrites

from ..errors import FormatError, OutputExistsError
from .constants import MAX_JSON_BYTES

__all__ = ["crc32", "dumps", "loads", "open_regular", "read_json_file", "temp_sibling",
           "remove_stale_temps", "building", "AtomicWriter", "atomic_write", "fsync_path"]


def dumps(obj: Any) -> bytes:
    """Serialises a JSON document as the format requires (compact, ASCII, no NaN)."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _msgspec_decode() -> tuple[Callable[[bytes], Any], tuple[type[BaseException], ...]] | None:
    """msgspec's JSON decoder and the errors it raises, when the ``fast`` extra is installed."""
    try:
        import msgspec
    except ImportError:
        return None
    return msgspec.json.decode, (msgspec.MsgspecError, RecursionError)


_UNSET: Any = object()
_fast_json: Any = _UNSET  # resolved on first use, so importing this module stays light


def loads(data: bytes, where: str) -> Any:
    """Parses a JSON document read from a recording.

    With the ``fast`` extra, msgspec parses the document (about twice as fast as :mod:`json`
    on a batch of short episodes, whose JSON is larger than its arrays; it gives the same
    values and types: integers of any size, correctly rounded floats, the last of duplicate
    keys in the first one's place). A document it refuses (NaN, a number beyond a double, a
    lone surrogate escape, invalid UTF-8, deep nesting...) is parsed again by :mod:`json`,
    which gives the value or the error, exactly as without the extra.

    Raises:
        FormatError: if the bytes are too large, not strict UTF-8 JSON or nested too deeply.
    """
    global _fast_json
    if len(data) > MAX_JSON_BYTES:
        raise FormatError(f"{where}: {len(data)} bytes of JSON is more than {MAX_JSON_BYTES}")
    if _fast_json is _UNSET:
        _fast_json = _msgspec_decode()
    if _fast_json is not None:
        decode, errors = _fast_json
        try:
            return decode(data)
        except errors:
            pass  # the standard parser says why (or parses what msgspec would not)
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except RecursionError as e:
        raise FormatError(f"{where}: JSON nested too deeply") from e
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"{where}: not valid JSON ({e})") from e


def open_regular(path: str, where: str) -> int:
    """Opens a file of a recording for reading: a regular file, never through a symlink.

    ``O_NOFOLLOW`` refuses a symlink (which could lead out of the directory); ``O_NONBLOCK``
    keeps a FIFO planted under a batch's name from blocking the open forever (it is then
    refused, as are directories and devices, by the regular-file check).

    Returns:
        The open file descriptor; the caller closes it.

    Raises:
        FormatError: if the file cannot be opened or is not a regular file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise FormatError(f"{where}: cannot open ({e.strerror or e})") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FormatError(f"{where}: not a regular file")
    return fd


def read_json_file(path: str, where: str, expected_size: int | None = None) -> tuple[bytes, Any]:
    """Reads and parses a JSON file of a recording, refusing oversized files before reading.

    Raises:
        FormatError: if the file is missing, too large, of the wrong size, or not valid JSON.
    """
    fd = open_regular(path, where)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise FormatError(f"{where}: {size} bytes of JSON is more than {MAX_JSON_BYTES}")
        if expected_size is not None and size != expected_size:
            raise FormatError(f"{where}: file has {size} bytes, the manifest says {expected_size}")
        data = f.read(size + 1)  # (asking for the limit would allocate that much each time)
        if len(data) > size:  # (grown since fstat: the rest, never past the limit)
            data += f.read(MAX_JSON_BYTES + 1 - len(data))
    return data, loads(data, where)


# ---------------------------------------------------------------------------------------------
# Atomic writes, with the permissions open() would give


# Temporary files are named as tempfile.mkstemp names them ("tmp" and 8 characters of
# [a-z0-9_]; here hex digits), so that repair knows what a killed writer left
# (gym_recorder.integrity._repair's _TEMP_NAME_RE). Names taken by another file are tried again.
_TEMP_TRIES = 100


class AtomicWriter(atomicwrites.AtomicWriter):  # type: ignore[misc]  # (untyped package)
    """atomicwrites' writer (a temporary file beside the target, renamed over it) whose file
    gets the permissions ``open()`` would give it.

    atomicwrites makes its temporary file with :func:`tempfile.mkstemp`, which only the owner
    may read (0o600); renamed into place, a recording, a repaired batch or a manifest stayed
    unreadable to every other user (a training job or a viewer run by someone else, a shared
    folder), unlike every file numpy, h5py or pyarrow writes. Here the file is created as
    ``open()`` creates one (mode 0o666, which the kernel narrows by the umask), under a name
    of mkstemp's form, exclusively (``O_EXCL``, never following a symlink).
    """

    def get_fileobject(self, suffix: str = "", prefix: str = "tmp", dir: str | None = None,
                       **kwargs: Any) -> Any:
        if dir is None:
            dir = os.path.normpath(os.path.dirname(self._path))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(
            os, "O_NOFOLLOW", 0)
        for _ in range(_TEMP_TRIES):
            name = os.path.join(dir, prefix + secrets.token_hex(4) + suffix)
            try:
                fd = os.open(name, flags, 0o666)
            except FileExistsError:
                continue
            try:
                f = open(fd, self._mode, closefd=True, **kwargs)  # noqa: SIM115 (the caller's)
            except BaseException:
                os.close(fd)
                os.unlink(name)
                raise
            # (atomicwrites renames and removes the file by its object's name)
            (f.buffer if hasattr(f, "buffer") else f).raw.name = name
            return f
        raise FileExistsError(f"{dir}: no free temporary file name in {_TEMP_TRIES} tries")


def atomic_write(path: str, *, overwrite: bool = True) -> ContextManager[IO[bytes]]:
    """Writes a binary file atomically: written to a temporary file in its directory, fsynced,
    renamed over ``path``, the directory fsynced (atomicwrites' ``atomic_write``), with the
    permissions the umask gives.

    Raises:
        OSError: as ``open()`` would; the temporary file is removed, ``path`` left as it was.
        FileExistsError: if ``overwrite`` is false and ``path`` exists.
    """
    ctx: ContextManager[IO[bytes]] = AtomicWriter(path, mode="wb", overwrite=overwrite).open()
    return ctx


def fsync_path(path: str) -> None:
    """fsyncs a file, or a directory (making its entries durable: renames, links, removals)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Temporary outputs (exports, imports): built under a hidden name, renamed into place at the end


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def temp_sibling(parent: str, stem: str) -> str:
    """A new hidden name in ``parent`` for an output being built: ``.STEM.tmp-HOST-PID-XXXXXXXX``
    (host and process, so that :func:`remove_stale_temps` knows when its maker is dead)."""
    return os.path.join(parent, f".{stem}.tmp-{_host()}-{os.getpid()}-{secrets.token_hex(4)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (EPERM: it exists, someone else's)
        return True
    return True


def remove_stale_temps(parent: str, stem: str) -> list[str]:
    """Removes what :func:`temp_sibling` names of ``stem`` in ``parent`` left behind: those of
    processes of this host that are gone (killed while writing). Returns the names removed."""
    pattern = re.compile(rf"\.{re.escape(stem)}\.tmp-{re.escape(_host())}-(\d+)-[0-9a-f]{{8}}")
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m and int(m[1]) != os.getpid() and not _alive(int(m[1])):
            path = os.path.join(parent, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            removed.append(name)
    return removed


@contextmanager
def building(out: str, doing: str) -> Iterator[str]:
    """A new folder ``out``, built under a hidden name beside it (:func:`temp_sibling`; not made
    yet: the caller makes it) and renamed to ``out`` when the block ends; on any error, or when
    ``out`` appeared meanwhile (:class:`OutputExistsError`, "... appeared while ``doing``"), the
    hidden folder is removed and ``out`` is left as it was. What builders of ``out`` killed
    before left behind is removed first."""
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temps(parent, os.path.basename(out))
    tmp = temp_sibling(parent, os.path.basename(out))
    try:
        yield tmp
        if os.path.lexists(out):
            raise OutputExistsError(f"{out} appeared while {doing}; nothing was written")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------------------------
# Checksums


def _fast_crc32() -> Callable[..., int]:
    """zlib's CRC-32, from ISA-L when the ``fast`` extra is installed (same values, ~15x faster)."""
    try:
        from isal.isal_zlib import crc32
    except ImportError:
        import zlib

        return zlib.crc32
    return crc32


class _LazyCrc32:
    """Resolves the CRC-32 implementation on first use, so importing this module stays light."""

    def __call__(self, data: Any, value: int = 0) -> int:
        impl = _fast_crc32()
        globals()["crc32"] = impl
        return impl(data, value)


# crc32(data) -> int: the zlib CRC-32 (ISO-HDLC, as zlib.crc32) of a bytes-like object.
crc32: Callable[..., int] = _LazyCrc32()
