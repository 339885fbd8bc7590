"""Uploading a local recording to a URL (:func:`push`), incrementally, readable at every moment.

For each writer, first its batches (``.bin`` then ``.json``) that the remote does not already
hold with the right size, then its manifest. Object stores make one PUT visible whole or not at
all, and a reader only follows names that a manifest lists, so a push that is killed half-way
leaves the previous remote state readable, and the next push resumes.
"""

from __future__ import annotations

import os
import posixpath
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError, OutputExistsError, StorageError
from ..format import MANIFEST_SUFFIX, MAX_JSON_BYTES, check_plain_name
from ..format.fileio import loads, open_regular
from .cloud_fs import open_fs, storage_error

__all__ = ["PushResult", "push"]


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
