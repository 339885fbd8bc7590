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
"""

from __future__ import annotations

import os
import posixpath
import threading
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError, OutputExistsError, RecorderError, StorageError, install_hint
from ..format.fileio import loads, open_regular
from ..format import MANIFEST_SUFFIX, MAX_JSON_BYTES, check_plain_name

__all__ = ["FsspecStorage", "push", "PushResult"]

# Error names of botocore / aiohttp / requests that mean "could not connect"; matched by name so
# that this module imports none of them.
_UNREACHABLE_NAMES = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                      "ClientConnectorError", "ServerDisconnectedError", "ConnectionError",
                      "ConnectTimeout", "ClientOSError")
_CREDENTIAL_NAMES = ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                     "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden")


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(f"reading or writing a URL needs fsspec: {install_hint('cloud')} "
                          f"({e})") from e
    return fsspec


def storage_error(e: BaseException, url: str, doing: str) -> RecorderError:
    """Turns an exception of an fsspec filesystem into gym_recorder's named error for ``url``.

    Args:
        e: what the filesystem raised.
        url: the URL it was about.
        doing: what was being done, e.g. ``"reading"``.

    Returns:
        A :class:`FormatError` for a missing object, a :class:`StorageError` otherwise.
    """
    if isinstance(e, RecorderError):
        return e
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    names = " ".join(type(c).__name__ + " " + str(c) for c in chain)
    detail = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, FileNotFoundError):
        return FormatError(f"{url}: no such object ({doing})")
    if isinstance(e, PermissionError) or any(n in names for n in _CREDENTIAL_NAMES):
        return StorageError(f"{url}: credentials refused while {doing} ({detail})")
    if (isinstance(e, (ConnectionError, TimeoutError))
            or any(type(c).__name__ in _UNREACHABLE_NAMES for c in chain)):
        return StorageError(f"{url}: cannot be reached ({detail})")
    return StorageError(f"{url}: {doing} failed ({type(e).__name__}: {detail})")


# S3 timeouts and retries unless storage_options say otherwise. s3fs's defaults (a 15 s read
# timeout, 5 attempts of its own, each of botocore's 5) keep a client waiting about 7 minutes on
# an endpoint that accepts connections but never answers; these bound it to about 40 s (4 tries
# of 10 s). s3fs's own attempts back off and retry throttling ("SlowDown") as before.
S3_OPTIONS: dict[str, Any] = {"retries": 4}
S3_CONFIG: dict[str, Any] = {"connect_timeout": 5, "read_timeout": 10,
                             "retries": {"max_attempts": 1, "mode": "standard"}}


def open_fs(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """``fsspec.core.url_to_fs`` with bounded S3 timeouts by default (:data:`S3_OPTIONS`,
    :data:`S3_CONFIG`; a key given in ``storage_options`` or its ``config_kwargs`` wins).

    Raises:
        TypeError: if ``storage_options`` is not a dict (or None).
        StorageError: if fsspec cannot make a filesystem for the URL (unknown protocol, a
            missing s3fs, bad options).
    """
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict, got {type(storage_options).__name__}")
    options = dict(storage_options or {})
    s3 = url.split("://", 1)[0].lower() in ("s3", "s3a")
    if s3:
        config = dict(options.get("config_kwargs") or {})
        for key, value in S3_CONFIG.items():
            config.setdefault(key, value)
        options["config_kwargs"] = config
    try:
        fs, root = _fsspec().core.url_to_fs(url, **options)
    except (ImportError, ValueError, TypeError) as e:
        raise StorageError(f"{url}: cannot open ({type(e).__name__}: {e})") from e
    if s3:  # (s3fs takes its number of attempts as an attribute, not an option)
        for key, value in S3_OPTIONS.items():
            if key not in (storage_options or {}) and hasattr(fs, key):
                setattr(fs, key, value)
    return fs, root


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


# -- push ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    """What :func:`push` did.

    Attributes:
        url: the destination.
        manifests: manifests written (every writer's, each push).
        uploaded: batch files uploaded.
        skipped: batch files already there with the right size.
        bytes_uploaded: bytes of batch files and manifests uploaded.
    """

    url: str
    manifests: int
    uploaded: int
    skipped: int
    bytes_uploaded: int


def _local_snapshot(directory: str, name: str) -> tuple[bytes, list[tuple[str, int]], dict[str, Any]]:
    """Reads a local manifest once; returns its bytes, its batch files with their sizes, and
    the manifest."""
    where = os.path.join(directory, name)
    fd = open_regular(where, where)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise FormatError(f"{where}: more than {MAX_JSON_BYTES} bytes of JSON")
    doc = loads(data, where)
    if not isinstance(doc, dict) or not isinstance(doc.get("batches"), list):
        raise FormatError(f"{where}: not a manifest (no list of batches)")
    if "format" not in doc:
        raise FormatError(f"{where}: push does not handle gym-recording (legacy) manifests")
    files: list[tuple[str, int]] = []
    for i, b in enumerate(doc["batches"]):
        w = f"{where} batch {i}"
        if not isinstance(b, dict):
            raise FormatError(f"{w}: must be an object")
        # The .bin first: a batch JSON on the remote is then never without its arrays.
        for key, size_key in (("bin", "bin_size"), ("fn", "json_size")):
            fname = check_plain_name(b.get(key), w)
            size = b.get(size_key)
            if type(size) is not int or size < 0:
                raise FormatError(f"{w}: {size_key!r} must be a non-negative integer")
            files.append((fname, size))
    return data, files, doc


def _batch_key(b: Any) -> tuple[Any, ...]:
    """What tells one batch from another of the same name: its files, sizes and JSON CRC-32."""
    return tuple(b.get(k) for k in ("fn", "bin", "json_size", "bin_size", "json_crc32")) \
        if isinstance(b, dict) else (b,)


def _remote_manifest(fs: Any, root: str, name: str, url: str) -> dict[str, Any]:
    try:
        data = fs.cat_file(f"{root}/{name}")
    except Exception as e:  # noqa: BLE001
        raise storage_error(e, url, "reading the remote manifest") from e
    doc = loads(data, url) if len(data) <= MAX_JSON_BYTES else None
    if not isinstance(doc, dict) or not isinstance(doc.get("batches"), list):
        raise FormatError(f"{url}: the remote manifest is not a manifest; push will not replace it")
    return doc


def _check_same_recording(local: dict[str, Any], remote: dict[str, Any], url: str) -> None:
    """Refuses to push over a remote manifest of another recording with the same writer prefix
    (its batches would be taken for ours), or one listing batches the local one does not."""
    theirs = [_batch_key(b) for b in remote["batches"]]
    ours = [_batch_key(b) for b in local["batches"]]
    if remote.get("created") != local.get("created") or ours[:len(theirs)] != theirs:
        raise OutputExistsError(
            f"{url}: the remote holds another recording under the writer prefix "
            f"{local.get('prefix')} (created {remote.get('created')}, not "
            f"{local.get('created')}, or other batches); nothing was uploaded. Push to another "
            f"URL, or delete that recording there first")


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return any(p in ("file", "local") for p in protocol)


def push(directory: str | os.PathLike[str], url: str, *, storage_options: dict[str, Any] | None = None,
         progress: Callable[[str], None] | None = None) -> PushResult:
    """Uploads a local recording to a URL, incrementally and in a reader-safe order.

    For each writer (manifest) of the recording: its batch files listed by the manifest that are
    not already at the URL with the size the manifest gives are uploaded (``.bin`` before
    ``.json``), then the manifest itself, byte for byte as it was read at the start. A batch
    already there is never uploaded again. Writers that are still recording are fine: their
    manifest is read once, and only batches it lists (complete on disk) are uploaded.

    Example::

        push("recordings/cartpole", "s3://bucket/cartpole")

    Args:
        directory: the local recording directory.
        url: the destination, any fsspec URL (``s3://bucket/prefix``, ``file:///...``).
        storage_options: passed to the fsspec filesystem (e.g. ``{"endpoint_url": ...}``).
        progress: called with one line per file uploaded, if given.

    Returns:
        A :class:`PushResult`.

    Raises:
        FormatError: if the local recording is malformed (a batch file of the wrong size...).
        StorageError: if the URL cannot be reached or the credentials are refused.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FormatError(f"{directory}: not a directory")
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"push needs a URL such as s3://bucket/path, got {url!r}")
    fs, root = open_fs(url, storage_options)
    root = root.rstrip("/")
    base = url.rstrip("/")
    try:
        if _is_local(fs):
            fs.makedirs(root, exist_ok=True)
        fs.invalidate_cache(root)
        try:
            remote = {posixpath.basename(str(e["name"]).rstrip("/")): e.get("size")
                      for e in fs.ls(root, detail=True) if e.get("type") == "file"}
        except FileNotFoundError:
            remote = {}
    except Exception as e:  # noqa: BLE001
        raise storage_error(e, url, "listing") from e

    manifests = sorted(n for n in os.listdir(directory) if n.endswith(MANIFEST_SUFFIX))
    if not manifests:
        raise FormatError(f"{directory}: not a recording (no *{MANIFEST_SUFFIX} in it); "
                          f"nothing was uploaded")
    # Every manifest is read and checked against the remote before anything is uploaded.
    plans = []
    for mname in manifests:
        data, files, doc = _local_snapshot(directory, mname)
        known: set[str] = set()  # batch files the remote manifest lists, as ours
        if mname in remote:
            theirs = _remote_manifest(fs, root, mname, f"{base}/{mname}")
            _check_same_recording(doc, theirs, f"{base}/{mname}")
            # (checked: the remote's batches are the first of ours, file for file)
            known = {n for b in theirs["batches"] for n in (b.get("fn"), b.get("bin"))}
        plans.append((mname, data, files, doc, known))
    uploaded = skipped = sent = 0
    for mname, data, files, doc, known in plans:
        same = _already_there(fs, root, base, doc, remote, known)
        for fname, size in files:
            local = os.path.join(directory, fname)
            try:
                local_size = os.lstat(local).st_size
            except OSError as e:
                raise FormatError(f"{local}: listed by {mname} but cannot be read "
                                  f"({e.strerror or e})") from e
            if local_size != size:
                raise FormatError(f"{local}: {local_size} bytes, {mname} says {size}; "
                                  f"run gym-recorder repair first")
            if fname in same:
                skipped += 1
                continue
            try:
                fs.put_file(local, f"{root}/{fname}")
            except FileNotFoundError as e:
                raise StorageError(f"{base}/{fname}: cannot be written (no such bucket or "
                                   f"directory: {e})") from e
            except Exception as e:  # noqa: BLE001
                raise storage_error(e, f"{base}/{fname}", "uploading") from e
            uploaded += 1
            sent += size
            if progress is not None:
                progress(f"uploaded {fname} ({size:,} bytes)")
        _put_manifest(fs, root, mname, data, f"{base}/{mname}")
        sent += len(data)
        if progress is not None:
            progress(f"wrote {mname}")
    return PushResult(url=url, manifests=len(manifests), uploaded=uploaded, skipped=skipped,
                      bytes_uploaded=sent)


def _already_there(fs: Any, root: str, base: str, doc: dict[str, Any], remote: dict[str, Any],
                   known: set[str]) -> set[str]:
    """The batch files of ``doc`` the remote already holds: those its manifest lists (checked
    to be ours), and those an interrupted push left, when the batch JSON there has the CRC-32
    our manifest gives (so a file of another recording with the same name is sent again)."""
    same: set[str] = set()
    for b in doc["batches"]:
        fn, bn = b["fn"], b["bin"]
        json_there = remote.get(fn) == b["json_size"]
        bin_there = remote.get(bn) == b["bin_size"]
        if fn in known and bn in known:
            if json_there and bin_there:
                same.update((fn, bn))
            continue
        if json_there:
            try:
                json_there = zlib.crc32(fs.cat_file(f"{root}/{fn}")) == b.get("json_crc32")
            except Exception as e:  # noqa: BLE001
                raise storage_error(e, f"{base}/{fn}", "reading") from e
        if fn in remote and not json_there:
            bin_there = False  # another recording's batch of that name: both are sent again
        # (A .bin of the right size without its JSON is what a push killed between the two
        # leaves: it is not sent twice. The JSON sent next names its arrays' CRC-32s.)
        same.update(n for n, there in ((fn, json_there), (bn, bin_there)) if there)
    return same


def _put_manifest(fs: Any, root: str, name: str, data: bytes, url: str) -> None:
    """Writes a manifest so that a reader sees the old or the new one, never a part.

    An object store's PUT is atomic; on a local filesystem the bytes go to a temporary file
    beside the target, which is then renamed over it.
    """
    try:
        if _is_local(fs):
            tmp = f"{root}/.{name}.{uuid.uuid4().hex}.tmp"
            try:
                fs.pipe_file(tmp, data)
                os.replace(tmp, f"{root}/{name}")
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        else:
            fs.pipe_file(f"{root}/{name}", data)
    except Exception as e:  # noqa: BLE001
        raise storage_error(e, url, "writing the manifest") from e
