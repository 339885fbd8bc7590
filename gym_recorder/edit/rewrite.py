"""Writing one writer's kept entries as a new writer's batches: the bytes of compaction.

Entries are copied, never decoded: each ARRAY's bytes are copied to the new .bin and its
reference pointed there, so every value comes back exactly as recorded. A new batch holds the
kept entries of consecutive old batches (old batches are joined up to the target size, but
never two parts of one episode, and never batches whose INDEX columns differ); its INDEX is
rebuilt (columns laid out as the writer lays them out, the table last).

A compressed ARRAY (``"codec"``, format version 2) is copied as it is stored: its ``stored``
bytes (chunk table and zstd frames) byte for byte, its ``codec``, ``stored`` and ``crc32``
kept; a batch holding one is of version 2, lists its codecs in its BATCH and has no INDEX (as
the writer writes it). Parts holding compressed arrays are never joined (:mod:`.join`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import EditError
from ..format import (ALIGNMENT, FORMAT_NAME, FORMAT_VERSION, RAW_FORMAT_VERSION,
                      INDEX_TABLE_WIDTH, batch_stem, continues)
from ..format.edits import EDITS_VERSION
from ..format.fileio import crc32, dumps, fsync_path
from ..format.spaces import ArrayLeaf, DictNode, TupleNode
from ..format.values import array_refs
from ..read.batchfile import parse_batch
from ..read.decode import Decoder
from ..read.manifest import Manifest
from ..read.storage import Storage
from .join import Segments, can_join, check_crc, join_parts, segments_of

__all__ = ["Kept", "kept_entries", "plan_batches", "write_batch", "sync_files",
           "HEADER_WHOLE_BYTES"]

# A batch header longer than this keeps only its fields of at most HEADER_FIELD_BYTES (the
# writer's rule, see "Batch" in the spec), but in the first batch.
HEADER_WHOLE_BYTES = 4096
HEADER_FIELD_BYTES = 1024
_STEP_KEYS = ("rewards", "terminations", "truncations")


class Kept:
    """The kept entries of one old batch: (position, writer number, part, continues)."""

    def __init__(self, b: int, entries: list[tuple[int, int, int, bool]], bytes_: int,
                 index_key: Any) -> None:
        self.b, self.entries, self.bytes, self.index_key = b, entries, bytes_, index_key
        self.joins_next = False  # its continuing entries join their next parts exactly


def kept_entries(storage: Storage, m: Manifest, deleted: set[int]) -> Iterator[Kept]:
    """Each old batch's entries that belong to a shown, not deleted episode, in order (the
    continues flag cleared where the next part is not in the next batch: gaps, killed
    writers)."""
    opened: dict[Any, tuple[int, int]] = {}  # episode id -> (number, next part)
    previous: Kept | None = None
    prev = None
    for b, binfo in enumerate(m.batches):
        batch = parse_batch(storage, m, b)
        if m.gap_before(b):
            opened = {}
        now: dict[Any, tuple[int, int]] = {}
        rows: list[tuple[int, int, int, bool]] = []
        rank = 0
        for pos, entry in enumerate(batch.entries):
            part = entry["part"]
            if part == 0:
                number = m.starts[b] + rank
                rank += 1
            else:
                number, expected = opened.get(entry["episode"], (-1, -1))
                if expected != part:
                    continue  # its episode is not shown (its start was moved aside)
            if continues(entry):
                now[entry["episode"]] = (number, part + 1)
            if number not in deleted:
                rows.append((pos, number, part, continues(entry)))
        if previous is not None:  # the previous batch's continues hold only if found here
            found = {(n, p): pos for pos, n, p, _ in rows}
            previous.entries = [(pos, n, p, c and (n, p + 1) in found)
                                for pos, n, p, c in previous.entries]
            assert m.obs_layout is not None and m.act_layout is not None and prev is not None
            previous.joins_next = all(
                can_join(prev.entries[pos], batch.entries[found[(n, p + 1)]], m.obs_layout,
                         m.act_layout) for pos, n, p, c in previous.entries if c)
            yield previous
        prev = batch
        opened = now
        share = len(rows) / max(1, binfo["len"])
        index = binfo.get("index")
        key = None if index is None else [(c[0], c[2]) for c in index["columns"]]
        previous = Kept(b, rows, int(share * (binfo["bin_size"] + binfo["json_size"])), key)
    if previous is not None:
        previous.entries = [(pos, n, p, False) for pos, n, p, _ in previous.entries]
        yield previous


def plan_batches(groups: list[Kept], target_bytes: int) -> list[list[Kept]]:
    """Old batches' kept entries joined into new batches."""
    out: list[list[Kept]] = []
    size = 0
    for g in groups:
        if not g.entries:
            continue
        last = out[-1] if out else None
        joinable = last is not None and size + g.bytes <= target_bytes and \
            last[-1].index_key == g.index_key and \
            (last[-1].joins_next or not any(c for _, _, _, c in last[-1].entries))
        if joinable and last is not None:
            last.append(g)
            size += g.bytes
        else:
            out.append([g])
            size = g.bytes
    return out


def _align(n: int, unit: int = ALIGNMENT) -> int:
    return -(-n // unit) * unit


def _leaf_refs(node: Any, tree: Any, out: list[dict[str, Any]]) -> None:
    """The ARRAY dicts of a TREE, in leaf order."""
    if isinstance(node, DictNode):
        for key, child in zip(node.keys, node.children):
            _leaf_refs(child, tree[key], out)
    elif isinstance(node, TupleNode):
        for k, child in enumerate(node.children):
            _leaf_refs(child, tree[k], out)
    elif isinstance(node, ArrayLeaf):
        out.append(tree)
    else:
        raise EditError("a values leaf in an indexed batch")  # (the index says there is none)


class _Bin:
    """The new .bin being filled."""

    def __init__(self, name: str) -> None:
        self.name, self.data = name, bytearray()

    def put(self, ref: dict[str, Any], segments: list[tuple[memoryview, int, int]],
            at: int | None = None) -> None:
        at = _align(len(self.data)) if at is None else at
        self.data.extend(bytes(at - len(self.data)))
        for source, offset, size in segments:
            if offset + size > len(source):
                raise EditError(f"{ref.get('npyfile')}: an array beyond the file's end")
            if len(segments) == 1:  # (a joined array's parts were checked as it was joined)
                check_crc(ref, source[offset: offset + size])
            self.data += source[offset: offset + size]
        ref["npyoff"], ref["npyfile"] = at, self.name


def _header(doc: dict[str, Any], prefix: str, replaces: str, first: int) -> dict[str, Any]:
    # (with "replaces": a manifest repair rebuilds from these batches stays hidden until the
    # compaction commits, as the compaction's own manifest does)
    header = {k: v for k, v in doc.items() if k not in ("batches", "complete")}
    header.update(prefix=prefix, version=EDITS_VERSION, replaces=replaces)
    if first == 0 or len(dumps(header)) <= HEADER_WHOLE_BYTES:
        return header
    return {k: v for k, v in header.items() if len(dumps(v)) <= HEADER_FIELD_BYTES}


def write_batch(directory: str, storage: Storage, decoder: Decoder, m: Manifest,
                prefix: str, first: int, groups: list[Kept], renumber: dict[int, int],
                doc: dict[str, Any], next_part: dict[int, int]) -> dict[str, Any]:
    """Writes one new batch of writer ``prefix`` from kept entries; returns its BATCH.

    ``renumber`` maps the old writer's episode numbers to the new's; ``next_part`` (kept
    across the batches of the writer) the part number each continuing episode's next entry
    takes (parts joined into one entry shift the later ones' numbers).
    """
    stem = batch_stem(prefix, first)
    out = _Bin(stem + ".bin")
    indexed = groups[0].index_key is not None
    assert m.obs_layout is not None and m.act_layout is not None
    # Logical entries: the kept parts, an episode's consecutive parts joined into one.
    logical: list[list[tuple[dict[str, Any], memoryview, int, int, bool]]] = []
    joining: dict[int, int] = {}  # writer number -> its logical entry, while it continues
    for g in groups:
        binfo = m.batches[g.b]
        batch = parse_batch(storage, m, g.b)
        source = memoryview(decoder.read_exact(binfo["bin"], 0, binfo["bin_size"]).tobytes())
        for pos, number, part, cont in g.entries:
            item = (batch.entries[pos], source, number, part, cont)
            k = joining.pop(number, None)
            if k is not None and logical[k][-1][3] == part - 1:
                logical[k].append(item)
            else:
                k = len(logical)
                logical.append([item])
            if cont:
                joining[number] = k
    segments: Segments = {}
    entries: list[dict[str, Any]] = []
    columns_of: list[list[dict[str, Any]]] = []
    table: list[tuple[int, int, int, int]] = []
    steps = episodes = 0
    for parts in logical:
        head, _, number, part, _ = parts[0]
        cont = parts[-1][4]
        if len(parts) == 1:
            entry = copy.deepcopy(head)
            segments_of(entry, parts[0][1], segments)
        else:
            entry = join_parts([(p[0], p[1]) for p in parts], m.obs_layout, m.act_layout,
                               segments)
        part = 0 if part == 0 else next_part.pop(number)
        if cont:
            next_part[number] = part + 1
        entry["index"], entry["episode"] = first + len(entries), renumber[number]
        entry["part"] = part
        entry["continues"] = cont  # (cleared where the next part is gone: end stays null)
        cols: list[dict[str, Any]] = []
        if indexed:
            _leaf_refs(m.obs_layout.root, entry["observations"], cols)
            _leaf_refs(m.act_layout.root, entry["actions"], cols)
            cols += [entry[k] for k in _STEP_KEYS]
        columns_of.append(cols)
        entries.append(entry)
        steps += entry["steps"]
        episodes += part == 0
        table.append((renumber[number], part, entry["steps"],
                      int(cont) | (2 * (entry.get("no_reset") is True))))
    index: dict[str, Any] | None = None
    if indexed:
        key = groups[0].index_key
        columns = []
        for c, (dtype, unit) in enumerate(key):
            start = _align(len(out.data))
            at = start
            for cols in columns_of:
                ref = cols[c]
                out.put(ref, segments[id(ref)], at)
                at += _align(ref["size"], unit)
            columns.append([dtype, start, unit])
        index = {"columns": columns}
    mapped = {id(ref) for cols in columns_of for ref in cols}
    codecs: set[str] = set()
    for entry in entries:
        refs: list[dict[str, Any]] = []
        array_refs(entry, refs)
        for ref in refs:
            if ref.get("codec") is not None:
                codecs.add(ref["codec"]["name"])  # (checked by parse_ref in segments_of)
            if id(ref) not in mapped:
                out.put(ref, segments[id(ref)])
    if codecs and index is not None:  # (an old BATCH with both is refused by its reader)
        raise EditError(f"{m.batches[groups[0].b]['fn']}: a batch index beside compressed "
                        "arrays")
    if index is not None:
        raw = np.asarray(table, dtype="<i8").reshape(len(table), INDEX_TABLE_WIDTH).tobytes()
        index["table"] = _align(len(out.data))
        index["crc32"] = crc32(raw)
        out.data.extend(bytes(index["table"] - len(out.data)))
        out.data += raw
        index = {"table": index["table"], "crc32": index["crc32"], "columns": index["columns"]}
    body: dict[str, Any] = {"format": FORMAT_NAME,
                            "version": FORMAT_VERSION if codecs else RAW_FORMAT_VERSION,
                            "prefix": prefix, "first": first, "episodes": entries}
    if index is not None:
        body["index"] = index
    body["header"] = _header(doc, prefix, m.prefix, first)
    data = dumps(body)
    # Written in place, not fsynced here: nothing lists these files until the compaction's
    # manifest, written after every batch file is fsynced (sync_files), and its commit.
    # (A file of that name, a killed compaction's, is unlinked first: never written through,
    # so that no hard link of it elsewhere changes, and no symlink is followed.)
    for name, content in ((out.name, out.data), (stem + ".json", data)):
        path = os.path.join(directory, name)
        if os.path.lexists(path):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o666)
        with open(fd, "wb") as f:
            f.write(content)
    batch_info: dict[str, Any] = {
        "first": first, "len": len(entries), "fn": stem + ".json", "bin": out.name,
        "json_size": len(data), "bin_size": len(out.data), "json_crc32": crc32(data),
        "steps": steps, "episodes": episodes}
    if index is not None:
        batch_info["index"] = index
    if codecs:
        batch_info["codecs"] = sorted(codecs)
    return batch_info


def sync_files(directory: str, names: list[str]) -> None:
    """fsyncs files written by :func:`write_batch` (once all are written: the kernel has
    written most back meanwhile)."""
    for name in names:
        fsync_path(os.path.join(directory, name))
