"""Recordings in object storage: an fsspec :class:`Storage`, and :func:`push` to upload one.

Install with ``pip install "gymnasium-recorder[cloud]"`` (fsspec, and s3fs for ``s3://``; ``gs://``
needs gcsfs, and so on for fsspec's other protocols). A recording at a URL is read exactly as one
on disk: the manifests and batch JSON are read whole (each at most
:data:`~gym_recorder.format.MAX_JSON_BYTES`), arrays by range requests of just their bytes, so
reading one episode of a large recording fetches about that episode's bytes. The standard
environment of each filesystem applies (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``, ...); ``storage_options`` are passed to the fsspec filesystem.

Errors: a missing object raises :class:`~gym_recorder.errors.FormatError` (as for a missing file
on disk), a URL that cannot be reached or credentials that are refused raise
:class:`~gym_recorder.errors.StorageError`; both name the URL.

:func:`push` uploads a local recording incrementally, in the order that keeps the remote copy
readable at every moment: for each writer, first its batches (``.bin`` then ``.json``) that the
remote does not already hold with the right size, then its manifest. Object stores make one PUT
visible whole or not at all, and a reader only follows names that a manifest lists, so a push
that is killed half-way leaves the previous remote state readable, and the next push resumes.

The filesystem is opened by :mod:`.cloud_fs` (which also names its errors); :func:`push` is
:mod:`.push`'s, re-exported here.
"""

from __future__ import annotations

import posixpath
import threading
from typing import Any

from ..errors import FormatError
from ..format import check_plain_name
from .cloud_fs import open_fs, storage_error
from .push import PushResult, push

__all__ = ["FsspecStorage", "push", "PushResult", "open_fs", "storage_error"]


class FsspecStorage:
    """The :class:`~gym_recorder.read.storage.Storage` of a recording at an fsspec URL.

    Example::

        storage = FsspecStorage("s3://bucket/recordings/cartpole", {"anon": False})
        names = storage.list()

    Attributes:
        location: the URL, as given (for messages).
        bytes_read: bytes fetched so far by this storage (JSON and array ranges).
        requests: read requests made so far.

    Raises:
        StorageError: if the URL cannot be reached or the credentials are refused.
        FormatError: if there is nothing at the URL.
    """

    def __init__(self, location: str, storage_options: dict[str, Any] | None = None) -> None:
        if not isinstance(location, str) or "://" not in location:
            raise ValueError(f"FsspecStorage needs a URL such as s3://bucket/path, got "
                             f"{location!r}")
        self.fs, self._root = open_fs(location, storage_options)
        self.location = location
        self.storage_options = dict(storage_options or {})
        self.bytes_read = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._root = self._root.rstrip("/")
        self._sizes: dict[str, int] | None = None
        self.list()  # fail here, naming the URL, if it cannot be reached

    def _path(self, name: str) -> str:
        check_plain_name(name, self.location)
        return f"{self._root}/{name}"

    def describe(self, name: str) -> str:
        """The full URL of one file of the recording."""
        return self.location.rstrip("/") + "/" + name

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n
            self.requests += 1

    def list(self) -> list[str]:
        """Names of the objects directly under the recording's URL (a fresh listing).

        Raises:
            FormatError: if there is no recording there.
            StorageError: if the URL cannot be reached or the credentials are refused.
        """
        try:
            self.fs.invalidate_cache(self._root)
            entries = self.fs.ls(self._root, detail=True)
        except FileNotFoundError as e:
            raise FormatError(f"{self.location}: no recording there (no such bucket or "
                              f"prefix)") from e
        except Exception as e:  # noqa: BLE001  (every filesystem has its own errors)
            raise storage_error(e, self.location, "listing") from e
        sizes = {}
        for entry in entries:
            if entry.get("type") != "file":
                continue
            name = posixpath.basename(str(entry["name"]).rstrip("/"))
            size = entry.get("size")
            if type(size) is int and size >= 0:
                sizes[name] = size
        self._sizes = sizes
        return sorted(sizes)

    def size(self, name: str) -> int:
        """The size of one object in bytes.

        Raises:
            FormatError: naming the URL of the object if it is missing.
        """
        if self._sizes is not None and name in self._sizes:
            return self._sizes[name]
        path = self._path(name)
        try:
            info = self.fs.info(path)
        except Exception as e:  # noqa: BLE001
            raise storage_error(e, self.describe(name), "getting its size") from e
        size = info.get("size")
        if info.get("type") != "file" or type(size) is not int or size < 0:
            raise FormatError(f"{self.describe(name)}: not an object")
        return size

    def _cat(self, name: str, start: int, end: int) -> bytes:
        path = self._path(name)
        try:
            data = self.fs.cat_file(path, start=start, end=end)
        except Exception as e:  # noqa: BLE001
            raise storage_error(e, self.describe(name), "reading") from e
        self._count(len(data))
        return bytes(data) if not isinstance(data, bytes) else data

    def read_bytes(self, name: str, limit: int) -> bytes:
        """Reads a whole small object (a manifest or batch JSON) of at most ``limit`` bytes.

        One request for at most ``limit + 1`` bytes, so a hostile object cannot make us fetch
        more.

        Raises:
            FormatError: if the object is missing or larger than ``limit``.
        """
        data = self._cat(name, 0, limit + 1)
        if len(data) > limit:
            raise FormatError(f"{self.describe(name)}: more than {limit} bytes")
        return data

    def read_range(self, name: str, offset: int, size: int) -> bytes:
        """Reads exactly ``size`` bytes at ``offset`` with one range request.

        Raises:
            FormatError: if the object is missing or ends before ``offset + size``.
        """
        if offset < 0 or size < 0:
            raise FormatError(f"{self.describe(name)}: bad range {offset}+{size}")
        if size == 0:
            return b""
        data = self._cat(name, offset, offset + size)
        if len(data) != size:
            raise FormatError(f"{self.describe(name)}: truncated: expected {size} bytes at "
                              f"offset {offset}, got {len(data)}")
        return data

    def readinto(self, name: str, offset: int, out: memoryview) -> None:
        """Fills ``out`` exactly with the bytes at ``offset`` (one range request).

        Raises:
            FormatError: if the object is missing or too short.
        """
        out = memoryview(out).cast("B")
        out[:] = self.read_range(name, offset, out.nbytes)

    def forget(self) -> None:
        """Forgets cached sizes and listings, so that objects replaced since are seen anew."""
        self._sizes = None
        try:
            self.fs.invalidate_cache(self._root)
        except Exception:  # noqa: BLE001  (a filesystem without a cache)
            pass

    def close(self) -> None:
        """Forgets the cached listing (the filesystem object is shared by fsspec)."""
        self.forget()

    def __repr__(self) -> str:
        return f"FsspecStorage({self.location!r})"
