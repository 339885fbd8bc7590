"""``gym-recorder compress`` and ``decompress``: a recording's batches rewritten with their big
leaves compressed, or every array raw again, crash-safe while readers read.

Batch files are never changed in place (a reader holding the old manifest reads the old
files). Per writer, every batch is written anew under a new entry number (all of the writer's
batches shifted by the same amount, so that episodes cut into parts stay joined): a batch
whose arrays change is rewritten, the others get a new JSON and a hard link to their .bin.
Then one atomic manifest rewrite switches the writer to the new batches (the commit), and the
old files are deleted after a grace period. A process killed before the commit leaves the old
manifest and unlisted new files (readers ignore them, ``repair`` moves them aside); after it,
the new manifest and unlisted old files: every episode is listed exactly once.
A writer that is still recording must not be compressed (its next commit would list its old
batches again): run it on recordings whose writers have closed or died.
"""

from __future__ import annotations

import os
import time
import zlib
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format import (ALIGNMENT, FORMAT_VERSION, MANIFEST_SUFFIX, RAW_FORMAT_VERSION,
                      batch_stem, check_version, parse_ref)
from ..format import fileio
from ..format.codecs import MIN_CODED_ROW_BYTES, Codec, decode_rows, encode_rows, \
    resolve_compression
from ..format.spaces import Layout
from ..format.values import array_refs

__all__ = ["compress", "decompress", "leaf_bytes", "DEFAULT_GRACE"]

# Seconds the old batch files stay after the commit, for readers that opened the old manifest
# (files they have open stay readable after deletion anyway, on POSIX).
DEFAULT_GRACE = 2.0


def compress(directory: str | os.PathLike[str], compression: Any = "zstd", *,
             grace: float = DEFAULT_GRACE) -> list[str]:
    """Rewrites every writer's batches with big observation/action leaves compressed.

    Returns:
        One line per writer rewritten.
    """
    codec = resolve_compression(compression)
    return _rewrite(os.fspath(directory), codec, grace)


def decompress(directory: str | os.PathLike[str], *, grace: float = DEFAULT_GRACE) -> list[str]:
    """Rewrites every writer's batches with every array raw (format version 1): the arrays'
    bytes are those a raw recording holds, ``np.fromfile`` reads each again."""
    return _rewrite(os.fspath(directory), None, grace)


def _rewrite(directory: str, codec: Codec | None, grace: float) -> list[str]:
    done, old_files = [], []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(MANIFEST_SUFFIX) or name.startswith("."):
            continue
        path = os.path.join(directory, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        _, man = fileio.read_json_file(path, name)
        if not isinstance(man, dict) or "format" not in man:
            continue  # a gym-recording writer: left as it is
        check_version(man, name)
        result = _rewrite_writer(directory, name, man, codec)
        if result is not None:
            line, old = result
            done.append(line)
            old_files += old
    if old_files:
        time.sleep(grace)
        for f in old_files:
            try:
                os.unlink(os.path.join(directory, f))
            except FileNotFoundError:
                pass
    return done


def _leaf_refs(layout: Layout, tree: Any, where: str) -> list[dict[str, Any]]:
    return [obj for obj, _ in layout.tree_leaves(tree, where)
            if isinstance(obj, dict) and obj.get("__type") == "ndarray"]


def _rewrite_writer(directory: str, name: str, man: dict[str, Any], codec: Codec | None
                    ) -> tuple[str, list[str]] | None:
    prefix, batches = man.get("prefix"), man.get("batches")
    if not isinstance(prefix, str) or not isinstance(batches, list) or not batches:
        return None
    def wants(b: dict[str, Any]) -> bool:
        return codec is not None or bool(b.get("codecs"))

    if not any(wants(b) for b in batches):
        return None
    obs_layout, act_layout = Layout(man["observation_space"]), Layout(man["action_space"])
    docs: dict[str, Any] = {}
    for b in batches:
        data, doc = fileio.read_json_file(os.path.join(directory, b["fn"]), b["fn"],
                                          b["json_size"])
        if fileio.crc32(data) != b["json_crc32"]:
            raise FormatError(f"{b['fn']}: CRC-32 does not match the manifest; run "
                              "gym-recorder verify and repair first")
        docs[b["fn"]] = doc
    if not any(wants(b) and _has_candidates(docs[b["fn"]], obs_layout, act_layout, codec)
               for b in batches):
        return None
    new_version = FORMAT_VERSION if codec is not None else RAW_FORMAT_VERSION
    shift = batches[-1]["first"] + batches[-1]["len"]  # new names beyond every listed batch
    new_batches, old_files, changed = [], [], 0
    for b in batches:
        json_name, bin_name = b["fn"], b["bin"]
        doc = docs[json_name]
        first = b["first"] + shift
        stem = batch_stem(prefix, first)
        new_json, new_bin = stem + ".json", stem + ".bin"
        coded: set[str] = set()
        rewrite = wants(b) and _has_candidates(doc, obs_layout, act_layout, codec)
        if rewrite:
            bin_size = _write_bin(directory, bin_name, new_bin, doc, obs_layout, act_layout,
                                  codec, coded)
            changed += 1
        else:  # the same bytes under the new name
            src, dst = os.path.join(directory, bin_name), os.path.join(directory, new_bin)
            if os.path.lexists(dst):
                os.unlink(dst)
            try:
                os.link(src, dst)
            except OSError:
                import shutil
                shutil.copyfile(src, dst)
            bin_size = b["bin_size"]
            for entry in doc["episodes"]:
                refs: list[dict[str, Any]] = []
                array_refs(entry, refs)
                for ref in refs:
                    ref["npyfile"] = new_bin
                    if ref.get("codec") is not None:
                        coded.add(ref["codec"].get("name"))
        version = FORMAT_VERSION if coded else RAW_FORMAT_VERSION
        doc["version"], doc["first"] = version, first
        if isinstance(doc.get("header"), dict) and "version" in doc["header"]:
            doc["header"]["version"] = new_version  # (the manifest's, for repair)
        for pos, entry in enumerate(doc["episodes"]):
            entry["index"] = first + pos
        keep_index = not rewrite and not coded and b.get("index") is not None
        doc.pop("index", None)
        if keep_index:
            doc["index"] = b["index"]
        data = fileio.dumps(doc)
        with fileio.atomic_write(os.path.join(directory, new_json)) as f:
            f.write(data)
        nb = {**{k: v for k, v in b.items() if k not in ("index", "codecs")},
              "first": first, "fn": new_json, "bin": new_bin, "json_size": len(data),
              "bin_size": bin_size, "json_crc32": fileio.crc32(data)}
        if keep_index:
            nb["index"] = b["index"]
        if coded:
            nb["codecs"] = sorted(coded)
        new_batches.append(nb)
        old_files += [json_name, bin_name]
    any_coded = any(nb.get("codecs") for nb in new_batches)
    new_man = {**man, "batches": new_batches,
               "version": FORMAT_VERSION if any_coded else RAW_FORMAT_VERSION}
    with fileio.atomic_write(os.path.join(directory, name)) as f:  # the commit
        f.write(fileio.dumps(new_man))
    verb = "compressed" if codec is not None else "decompressed"
    return f"{prefix}: {changed} of {len(batches)} batches {verb}", old_files


def _has_candidates(doc: dict[str, Any], obs_layout: Layout, act_layout: Layout,
                    codec: Codec | None) -> bool:
    for entry in doc["episodes"]:
        for layout, key in ((obs_layout, "observations"), (act_layout, "actions")):
            for ref in _leaf_refs(layout, entry.get(key), key):
                if codec is None and ref.get("codec") is not None:
                    return True
                if codec is not None and ref.get("codec") is None and _worth(ref):
                    return True
    return False


def _worth(ref: dict[str, Any]) -> bool:
    shape = ref.get("shape")
    return (isinstance(shape, list) and len(shape) >= 1 and shape[0] > 0
            and ref.get("size", 0) // shape[0] >= MIN_CODED_ROW_BYTES)


def _write_bin(directory: str, bin_name: str, new_bin: str, doc: dict[str, Any],
               obs_layout: Layout, act_layout: Layout, codec: Codec | None,
               coded: set[str]) -> int:
    """Writes the batch's arrays into ``new_bin`` (raw, or compressed for leaves worth it),
    rewriting the references of ``doc`` in place; returns the file's size."""
    src = os.path.join(directory, bin_name)
    file_size = os.path.getsize(src)
    fd = fileio.open_regular(src, bin_name)
    try:
        with fileio.atomic_write(os.path.join(directory, new_bin)) as out:
            offset = 0
            for pos, entry in enumerate(doc["episodes"]):
                leaves = {id(r) for layout, key in ((obs_layout, "observations"),
                                                     (act_layout, "actions"))
                          for r in _leaf_refs(layout, entry.get(key), key)}
                refs: list[dict[str, Any]] = []
                array_refs(entry, refs)
                for obj in refs:
                    where = f"{bin_name} entry {pos}"
                    arr = _read(fd, bin_name, file_size, obj, where)
                    coded_rows = None
                    if codec is not None and id(obj) in leaves and arr.ndim >= 1 and \
                            _worth(obj):
                        coded_rows = encode_rows(arr, codec)
                    blob = None if coded_rows is None else coded_rows[0]
                    data = arr.reshape(-1).view(np.uint8).tobytes() if blob is None else blob
                    pad = -offset % ALIGNMENT
                    out.write(bytes(pad))
                    offset += pad
                    obj.update({"npyfile": new_bin, "npyoff": offset,
                                "crc32": zlib.crc32(data) & 0xFFFFFFFF})
                    for k in ("codec", "stored"):
                        obj.pop(k, None)
                    if blob is not None:
                        obj["stored"] = len(blob)
                        obj["codec"] = coded_rows[1]  # type: ignore[index]
                        coded.add("zstd")
                    out.write(data)
                    offset += len(data)
        return offset
    finally:
        os.close(fd)


def _read(fd: int, bin_name: str, file_size: int, obj: dict[str, Any], where: str
          ) -> np.ndarray:
    """One array of the old batch, checked (CRC-32 of its stored bytes) and decoded."""
    ref = parse_ref(obj, where, file=bin_name)
    if ref.end > file_size:
        raise FormatError(f"{where}: bytes {ref.offset}..{ref.end} lie outside {bin_name}")

    def read(offset: int, size: int) -> bytes:
        data = os.pread(fd, size, offset)
        if len(data) != size:
            raise FormatError(f"{where}: {size} bytes at {offset} could not be read")
        return data

    out = np.empty(ref.shape, ref.dtype)
    if ref.codec is not None:
        decode_rows(ref, read, 0, ref.shape[0], out, where, fileio.crc32)
        return out
    raw = read(ref.offset, ref.size)
    if ref.crc32 is not None and fileio.crc32(raw) != ref.crc32:
        raise FormatError(f"{where}: CRC-32 of the array's bytes does not match; run "
                          "gym-recorder verify and repair first")
    out.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, np.uint8)
    return out


def leaf_bytes(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Stored and raw (decoded) bytes of each observation and action leaf and of the other
    arrays, over every batch of every writer: ``[{"leaf", "stored", "raw"}, ...]``; empty
    (without reading a batch) when no writer has a compressed batch."""
    from ..read.manifest import load_manifests
    from ..read.storage import LocalStorage

    directory = os.fspath(directory)
    totals: dict[str, list[int]] = {}
    # The writers a reader shows (not the edit log's tripwire, nor writers a compaction
    # replaced whose files are kept for a grace period).
    storage = LocalStorage(directory)
    try:
        manifests = [m.doc for m in load_manifests(storage) if not m.legacy]
    finally:
        storage.close()
    if not any(isinstance(b, dict) and b.get("codecs") for man in manifests
               for b in man.get("batches", [])):
        return []
    for man in manifests:
        obs_layout, act_layout = Layout(man["observation_space"]), Layout(man["action_space"])
        for b in man.get("batches", []):
            _, doc = fileio.read_json_file(os.path.join(directory, b["fn"]), b["fn"],
                                           b["json_size"])
            for entry in doc["episodes"]:
                seen: set[int] = set()
                for layout, key in ((obs_layout, "observations"), (act_layout, "actions")):
                    for obj, where in layout.tree_leaves(entry.get(key), key):
                        if isinstance(obj, dict) and obj.get("__type") == "ndarray":
                            _add(totals, where, obj)
                            seen.add(id(obj))
                rest: list[dict[str, Any]] = []
                array_refs(entry, rest)
                for obj in rest:
                    if id(obj) not in seen:
                        _add(totals, "other arrays", obj)
    return [{"leaf": k, "stored": v[0], "raw": v[1]} for k, v in totals.items()]


def _add(totals: dict[str, list[int]], leaf: str, obj: dict[str, Any]) -> None:
    size = obj["size"] if type(obj.get("size")) is int else 0
    stored = obj["stored"] if type(obj.get("stored")) is int else size
    t = totals.setdefault(leaf, [0, 0])
    t[0] += stored
    t[1] += size
