"""Where a recording's bytes come from: the one door every byte the reader reads goes through.

:class:`Storage` is the small interface the reader needs of a recording directory: list its files,
tell a file's size, read a small file whole (JSON) and read a range of a large one (.bin) into
memory the caller owns. :class:`LocalStorage` serves a local directory at the speed of the system
calls (``os.preadv`` on cached file descriptors, no Python-level buffering); a URL is served by
``gym_recorder.integrations.cloud.FsspecStorage`` (see :func:`open_storage`).

Names passed to a storage are plain file names (the reader checks them with
:func:`gym_recorder.format.check_plain_name` first); a storage never resolves a name outside its
directory. Every failure to read is a :class:`~gym_recorder.errors.FormatError` whose message
starts with the file's name.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

from ..errors import FormatError, install_hint
from ..format.fileio import open_regular

__all__ = ["Storage", "LocalStorage", "open_storage", "located", "naming_urls",
           "MAX_OPEN_FILES"]

# File descriptors a LocalStorage keeps open at most (of files read by range): more than the
# reader caches batches (batchcache.BATCH_CACHE_SIZE), so that iterating in order opens each .bin
# once and random rows of a recording of up to this many batches (episode_rows: 32 batches are
# 160 MB of raw frames, gigabytes compressed) open none again: opening one costs ~20 us, as much as
# reading a frame. (32 of the 1,024 descriptors a Linux process has by default.)
MAX_OPEN_FILES = 32


@runtime_checkable
class Storage(Protocol):
    """The files of one recording directory, local or remote, read-only."""

    location: str  # the directory path or URL, for messages

    def list(self) -> list[str]:
        """Names of the regular files directly in the recording directory."""

    def size(self, name: str) -> int:
        """The size of a file in bytes; raises FormatError naming the file if it is missing."""

    def read_bytes(self, name: str, limit: int) -> bytes:
        """A whole small file (JSON); a file larger than ``limit`` raises FormatError unread."""

    def read_range(self, name: str, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes at ``offset``, or FormatError."""

    def readinto(self, name: str, offset: int, out: memoryview) -> None:
        """Fills ``out`` exactly with the bytes at ``offset``, or raises FormatError."""

    def describe(self, name: str) -> str:
        """The full path or URL of one file, for messages."""

    def close(self) -> None:
        """Releases whatever the storage holds open."""


class _Handle:
    """An open file descriptor of a LocalStorage and the readers using it right now."""

    __slots__ = ("fd", "users", "evicted")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 0
        self.evicted = False


class LocalStorage:
    """A recording directory on the local file system.

    Files read by range (:meth:`size`, :meth:`read_range`, :meth:`readinto`) keep their file
    descriptor open, at most :data:`MAX_OPEN_FILES` of them (least recently used closed first,
    once no thread reads from it), so that many small reads of one .bin cost one ``pread`` each.
    Whole files (:meth:`read_bytes`: manifests, batch JSON) are opened afresh each time, since a
    manifest is replaced by a rename whenever its writer commits. :meth:`forget` closes the cached
    descriptors, so that a file replaced since is opened anew. Files are opened with
    ``O_NOFOLLOW``: a symlink, which could lead out of the directory, is refused, as are FIFOs,
    devices and directories. Safe to use from several threads.

    Args:
        directory: the recording directory.

    Raises:
        FileNotFoundError: if the directory does not exist.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.location = os.fspath(directory)
        if not os.path.isdir(self.location):
            raise FileNotFoundError(f"no recording directory {self.location!r}")
        self._lock = threading.Lock()
        self._handles: OrderedDict[str, _Handle] = OrderedDict()

    def list(self) -> list[str]:
        """Names of the regular files (not symlinks) directly in the directory, sorted."""
        with os.scandir(self.location) as it:
            return sorted(e.name for e in it if e.is_file(follow_symlinks=False))

    def describe(self, name: str) -> str:
        """The file's path."""
        return os.path.join(self.location, name)

    def _acquire(self, name: str) -> _Handle:
        with self._lock:
            handle = self._handles.get(name)
            if handle is None:
                handle = _Handle(open_regular(os.path.join(self.location, name), name))
                self._handles[name] = handle
                while len(self._handles) > MAX_OPEN_FILES:
                    old = self._handles.popitem(last=False)[1]
                    old.evicted = True
                    if not old.users:
                        os.close(old.fd)
            else:
                self._handles.move_to_end(name)
            handle.users += 1
            return handle

    def _release(self, handle: _Handle) -> None:
        with self._lock:
            handle.users -= 1
            if handle.evicted and not handle.users:
                os.close(handle.fd)

    def size(self, name: str) -> int:
        """The file's size in bytes (FormatError if it is missing or not a regular file)."""
        handle = self._acquire(name)
        try:
            return os.fstat(handle.fd).st_size
        finally:
            self._release(handle)

    def read_bytes(self, name: str, limit: int) -> bytes:
        """Reads a whole file, refusing one larger than ``limit`` from its size alone."""
        fd = open_regular(os.path.join(self.location, name), name)
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise FormatError(f"{name}: {size} bytes of JSON is more than {limit}")
            chunks = []
            got = 0
            want = size + 1  # (asking for the limit would allocate that much for each file)
            while True:  # until EOF: the file may have grown since fstat (never past limit)
                data = os.read(fd, min(want, limit + 1 - got))
                want = 64 << 10
                if not data:
                    break
                chunks.append(data)
                got += len(data)
                if got > limit:
                    raise FormatError(f"{name}: more than {limit} bytes of JSON")
        finally:
            os.close(fd)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_range(self, name: str, offset: int, size: int) -> bytes:
        """Reads exactly ``size`` bytes at ``offset``."""
        out = bytearray(size)
        self.readinto(name, offset, memoryview(out))
        return bytes(out)

    def readinto(self, name: str, offset: int, out: memoryview) -> None:
        """Fills ``out`` (a writable, contiguous buffer) with the bytes at ``offset``."""
        view = out if out.format == "B" and out.ndim == 1 else out.cast("B")
        size = view.nbytes
        handle = self._acquire(name)
        try:
            fd = handle.fd
            got = 0
            while got < size:
                n = os.preadv(fd, [view[got:]], offset + got)
                if n <= 0:
                    raise FormatError(f"{name}: EOF reading array data, expected {size} bytes "
                                      f"got {got}")
                got += n
        finally:
            self._release(handle)

    def forget(self) -> None:
        """Closes the cached file descriptors (files in use close once their reads end)."""
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
            for handle in handles:
                handle.evicted = True
                if not handle.users:
                    os.close(handle.fd)

    def close(self) -> None:
        """Closes every cached file descriptor; the storage may still be used (it reopens)."""
        self.forget()

    def __repr__(self) -> str:
        return f"LocalStorage({self.location!r})"


_FILE_NAME = re.compile(r"[A-Za-z0-9_.+-]+\.(?:json|bin)\b")


def located(error: FormatError, storage: Storage) -> FormatError:
    """``error`` as it should reach the user of ``storage``: for a local directory itself (its
    messages start with the file's name, in the directory the user opened); for any other
    storage (a URL) the same type of error whose message names the file by its full URL (or,
    for a message naming no file, starts with the URL).
    """
    if isinstance(storage, LocalStorage):
        return error
    message = str(error)
    if storage.location in message:
        return error
    match = _FILE_NAME.match(message)
    if match:
        message = storage.describe(match.group(0)) + message[match.end():]
    else:
        message = f"{storage.location}: {message}"
    return type(error)(message)


class _NamingUrls:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        if isinstance(error, FormatError):
            named = located(error, self._storage)
            if named is not error:
                raise named from error


def naming_urls(storage: Storage) -> _NamingUrls:
    """A context in which a FormatError is re-raised as :func:`located` makes it for
    ``storage`` (the same error for a local directory)."""
    return _NamingUrls(storage)


def open_storage(location: str | os.PathLike[str] | Storage,
                 storage_options: dict[str, Any] | None = None) -> Storage:
    """Opens the storage of a recording: a local directory, or a URL through fsspec.

    Args:
        location: a directory path, ``file://`` URL, or any other URL (``s3://...``), which
            :class:`gym_recorder.integrations.cloud.FsspecStorage` serves; or a :class:`Storage`, returned
            as it is.
        storage_options: passed to fsspec for URLs (credentials, endpoint); must be empty for a
            local directory.

    Raises:
        FileNotFoundError: if a local directory does not exist.
        ValueError: if ``storage_options`` are given for a local directory.
        ImportError: if a URL is given and the ``cloud`` extra is not installed.
    """
    if not isinstance(location, (str, bytes, os.PathLike)) and isinstance(location, Storage):
        if storage_options:
            raise ValueError("storage_options apply to URLs only, not to a Storage")
        return location
    text = os.fspath(location)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "://" in text and not text.startswith("file://"):
        try:
            from ..integrations.cloud import FsspecStorage
        except ModuleNotFoundError as e:
            if e.name not in ("gym_recorder.integrations.cloud", "fsspec"):
                raise
            raise ImportError(f"reading {text!r} needs fsspec: {install_hint('cloud')}") from e
        return FsspecStorage(text, storage_options)
    if storage_options:
        raise ValueError(f"storage_options apply to URLs only, got {storage_options!r} for the "
                         f"local directory {text!r}")
    if text.startswith("file://"):
        text = text[len("file://"):]
    return LocalStorage(text)
