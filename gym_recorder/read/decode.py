"""Decoding batches: a batch JSON checked, its entries' array references checked against the
.bin, and their bytes read into arrays.

Everything here reads through a :class:`~gym_recorder.read.storage.Storage`. A batch JSON is checked
once when parsed (:func:`parse_batch`); an entry is planned (:meth:`Decoder.plan_part`: its
structure checked and its references collected, nothing read), then read
(:meth:`Decoder.load_part`) into a :class:`PartData`. Arrays are read into memory the arrays own,
or handed out as views of bytes read once for a whole batch.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format import fileio as _fileio
from .columns import FastPart, decode_columns
from ..errors import BatchIndexError, ChecksumError, FormatError
from ..format import ArrayRef, check_flags, entry_end, parse_ref
from .batchindex import check_entries, read_index
from ..format import codecs as _codecs
from .manifest import Manifest, read_json
from .outside import _as_values, _outside_values
from ..format.spaces import ArrayLeaf, Layout, ValuesLeaf, decode_values_leaf
from .storage import Storage
from ..format.values import decode_value

__all__ = ["Batch", "Part", "PartData", "Decoder", "parse_batch", "STACKED", "gc_paused",
           "obs_layout", "act_layout"]

# Read an episode's arrays in one read when the span they cover is at most this much larger than
# their own bytes (else array by array, so a hostile layout cannot make us read a whole file).
SPAN_SLACK_BYTES = 1 << 20
# Arrays stay views of the span read for them unless it is more than this many times their bytes.
SPAN_KEEP_FACTOR = 2
# A cached batch whose entries are small (at most this many bytes of arrays each on average) has
# its whole .bin read into memory once a second episode is read from it, so that iterating small
# episodes costs one read per batch instead of one per array; episodes copy their bytes out.
SMALL_ENTRY_BYTES = 64 << 10
# ...if the .bin is at most this large (the default batch target is 5 MB).
WHOLE_BIN_MAX_BYTES = 8 << 20
# The largest Unicode code point; numpy's <U arrays fail hard (SystemError) on anything above.
MAX_CODE_POINT = 0x10FFFF
# Kinds of references whose arrays are stacked over an episode's parts (the others, infos, are
# per row and are read part by part).
STACKED = frozenset(("obs", "act", "rewards", "terminations", "truncations"))


def obs_layout(m: Manifest) -> Layout:
    """The observation layout of a writer in this format (a gym-recording one has none)."""
    if m.obs_layout is None:
        raise FormatError(f"{m.name}: a gym-recording writer has no observation space")
    return m.obs_layout


def act_layout(m: Manifest) -> Layout:
    """The action layout of a writer in this format (a gym-recording one has none)."""
    if m.act_layout is None:
        raise FormatError(f"{m.name}: a gym-recording writer has no action space")
    return m.act_layout


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector while a batch is parsed or decoded.

    A batch of short episodes is hundreds of thousands of JSON objects that all stay alive: the
    collector would walk them again and again while they are made (reading a 1M-step CartPole
    recording then takes about twice as long), and there are no cycles to find in them.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Batch:
    """One parsed and structurally checked batch file, and its .bin's bytes once read whole.

    The .bin file's size is checked once against the manifest, when first read from (the
    storage keeps the file open, so that reading many small episodes does not open it for
    each). Arrays handed out never depend on the batch: they are read into memory they own.
    """

    def __init__(self, entries: list[Any], by_episode: dict[tuple[int, int], int],
                 starts: list[int] | None = None) -> None:
        self.entries = entries
        self.by_episode = by_episode  # (writer episode id, part) -> position
        self.starts = starts if starts is not None else []  # positions of part-0 entries
        self.file_size: int | None = None  # the .bin's size, once checked
        self.data: np.ndarray | None = None  # the whole .bin, for batches of small entries
        self.reads = 0  # episodes read from the batch
        # Entry position -> its decoded arrays (views of ``data``), once decoded column-wise
        # (see :mod:`gym_recorder.read.columns`); entries missing are read one by one.
        self.parts: dict[int, Any] | None = None

    def close(self) -> None:
        """Drops the batch's bytes held in memory."""
        self.data = None
        self.parts = None


def parse_batch(storage: Storage, m: Manifest, b: int) -> Batch:
    """Reads batch ``b`` of a writer and checks its structure against the manifest.

    Raises:
        FormatError: if the file is missing, of the wrong size or malformed.
        ChecksumError: if its CRC-32 is not the manifest's.
    """
    info = m.batches[b]
    where = info["fn"]
    with gc_paused():
        data, doc = read_json(storage, info["fn"], None if m.legacy else info["json_size"])
    if not m.legacy and _fileio.crc32(data) != info["json_crc32"]:
        raise ChecksumError(f"{where}: CRC-32 does not match the manifest")
    if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
        raise FormatError(f"{where}: a batch must be an object with an 'episodes' list")
    entries = doc["episodes"]
    if len(entries) != info["len"]:
        raise FormatError(f"{where}: {len(entries)} entries, the manifest says {info['len']}")
    by_episode = {}
    said: list[tuple[int, int, int, int]] = []  # (episode, part, steps, flags), for the index
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise FormatError(f"{where} entry {pos}: must be an object")
        if not m.legacy:
            ep, part = entry.get("episode"), entry.get("part")
            if type(ep) is not int or type(part) is not int or ep < 0 or part < 0:
                raise FormatError(f"{where} entry {pos}: bad 'episode' or 'part'")
            if entry.get("index") != info["first"] + pos:
                raise FormatError(f"{where} entry {pos}: 'index' is not {info['first'] + pos}")
            steps = entry.get("steps")
            if type(steps) is not int or steps < 0:
                raise FormatError(f"{where} entry {entry['index']}: 'steps' must be a "
                                  "non-negative integer")
            goes, no_reset = entry.get("continues", False), entry.get("no_reset", False)
            if type(goes) is not bool or type(no_reset) is not bool:
                check_flags(entry, f"{where} entry {entry['index']}")  # (raises, naming it)
            by_episode[(ep, part)] = pos
            said.append((ep, part, steps, goes + 2 * no_reset))
    starts = [pos for pos, entry in enumerate(entries) if entry.get("part") == 0]
    if not m.legacy and len(starts) != info["episodes"]:
        # The reader numbers episodes by the manifests' counts: a count that disagrees with
        # the entries would shift or drop episodes silently.
        raise FormatError(f"{where}: {len(starts)} entries start an episode, the manifest "
                          f"says {info['episodes']}")
    if not m.legacy:
        index = read_index(storage, m, b)
        if index is not None:
            try:
                table = np.array(said, dtype=np.int64).reshape(len(said), 4)
                check_entries(index, table, stacked_refs(m, entries, where), info["bin_size"])
            except BatchIndexError as e:
                # An entry that is wrong by itself is named for what is wrong with it.
                if e.entry is not None:
                    _check_entry(storage, m, info, entries[e.entry])
                raise
    return Batch(entries, by_episode, starts)


def _check_entry(storage: Storage, m: Manifest, binfo: dict[str, Any],
                 entry: dict[str, Any]) -> None:
    """Reads one entry as the entry-by-entry path does, raising what it finds wrong."""
    dec = Decoder(storage)
    part = dec.plan_part(m, binfo, entry, entry["part"])
    dec.load_part(m, part, dec.check_bin(binfo["bin"], binfo["bin_size"]))


def stacked_refs(m: Manifest, entries: list[dict[str, Any]], where: str) -> list[list[Any]]:
    """Each stacked column's reference of every entry, as stored (each observation leaf,
    action leaf, rewards, terminations, truncations)."""
    out: list[list[Any]] = []
    for lay, key in ((obs_layout(m), "observations"), (act_layout(m), "actions")):
        if lay.single:
            out.append([e.get(key) for e in entries])
            continue
        per = [[obj for obj, _ in lay.tree_leaves(e.get(key), f"{where} entry {e['index']} {key}")]
               for e in entries]
        out.extend([p[k] for p in per] for k in range(len(lay.leaves)))
    for name in ("rewards", "terminations", "truncations"):
        out.append([e.get(name) for e in entries])
    return out


class Part:
    """One entry of an episode, structurally checked, with the references it holds."""

    __slots__ = ("binfo", "entry", "part_no", "where", "steps", "obs_rows", "obs_stored",
                 "act_stored", "infos", "refs", "slots")

    def __init__(self, binfo: dict[str, Any], entry: dict[str, Any], part_no: int) -> None:
        self.binfo = binfo
        self.entry = entry
        self.part_no = part_no
        self.where = f"{binfo['fn']} entry {entry.get('index')}"
        self.refs: list[tuple[dict[str, Any], str]] = []
        self.slots: list[tuple[str, int, Any]] = []  # (kind, leaf number, expected shape)
        self.steps = 0
        self.obs_rows = 0
        self.obs_stored: list[Any] = []
        self.act_stored: list[Any] = []
        self.infos: Any = None


@dataclass
class PartData:
    """What one entry holds, decoded: per-leaf observations and actions, step columns, infos
    and the episode's metadata (stacked columns None when the caller reads them itself)."""

    obs: list[Any]
    act: list[Any]
    rewards: np.ndarray | None
    terminations: np.ndarray | None
    truncations: np.ndarray | None
    infos: list[dict[str, Any]]
    seed: int | None
    options: Any
    end: str | None
    sub_env: int | None
    no_reset: bool

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Its rewards, terminations and truncations (read: not skipped by the caller)."""
        if self.rewards is None or self.terminations is None or self.truncations is None:
            raise ValueError("the part's step columns were not read")
        return self.rewards, self.terminations, self.truncations


class Decoder:
    """Reads and checks the arrays of a recording's batches, through its storage.

    Args:
        storage: where the bytes come from.
        verify: check every array's CRC-32 (raises :class:`ChecksumError`).
    """

    def __init__(self, storage: Storage, verify: bool = False) -> None:
        self._storage = storage
        self._verify = verify

    @property
    def storage(self) -> Storage:
        """Where the decoder reads from."""
        return self._storage

    @property
    def verify(self) -> bool:
        """Whether every array's CRC-32 is checked."""
        return self._verify

    def read_arrays(self, bin_name: str, refs: list[tuple[dict[str, Any], str]], aligned: bool,
                    expected_size: int | None = None, *, file_size: int | None = None,
                    data: np.ndarray | None = None, copy: bool = True) -> list[np.ndarray]:
        """Validates references into one .bin file and reads them (one read when compact).

        ``expected_size`` is the file's size as the manifest records it (None for legacy files).
        ``file_size`` is the file's size when already checked against the manifest; without it
        the size is read and checked here. ``data`` is the whole file's bytes already read (the
        arrays are then copied out of it, or views of it when ``copy`` is false).
        """
        parsed: list[ArrayRef] = []
        for obj, where in refs:
            parsed.append(parse_ref(obj, where, aligned=aligned, file=bin_name))
        if not parsed:
            return []
        if file_size is None:
            file_size = self.check_bin(bin_name, expected_size)
        for ref, (_, where) in zip(parsed, refs):
            if ref.end > file_size:
                raise FormatError(f"{where}: bytes {ref.offset}..{ref.end} lie "
                                  f"outside {bin_name} ({file_size} bytes)")
        if any(ref.codec is not None for ref in parsed):
            # Compressed arrays decode on their own; the raw ones are read as below.
            raw = [(ref, r) for ref, r in zip(parsed, refs) if ref.codec is None]
            got = iter(self.read_arrays(bin_name, [r for _, r in raw], aligned,
                                        file_size=file_size, data=data, copy=copy))
            return [self.decode_array(bin_name, ref, where, data) if ref.codec is not None
                    else next(got) for ref, (_, where) in zip(parsed, refs)]
        if data is not None:
            if copy:
                return [self.view(data[ref.offset:ref.offset + ref.size].copy(), 0, ref, where)
                        for ref, (_, where) in zip(parsed, refs)]
            return [self.view(data, ref.offset, ref, where)
                    for ref, (_, where) in zip(parsed, refs)]
        if len(parsed) == 1:
            ref = parsed[0]
            return [self.view(self.read_exact(bin_name, ref.offset, ref.size), 0, ref,
                               refs[0][1])]
        lo = min(r.offset for r in parsed)
        hi = max(r.offset + r.size for r in parsed)
        total = sum(r.size for r in parsed)
        out = []
        if hi - lo <= total + SPAN_SLACK_BYTES:
            buf = self.read_exact(bin_name, lo, hi - lo)
            # Views keep the span alive: copy the arrays out when it is mostly other data.
            copy = hi - lo > SPAN_KEEP_FACTOR * total
            for ref, (_, where) in zip(parsed, refs):
                arr = self.view(buf, ref.offset - lo, ref, where)
                out.append(arr.copy() if copy else arr)
        else:
            for ref, (_, where) in zip(parsed, refs):
                buf = self.read_exact(bin_name, ref.offset, ref.size)
                out.append(self.view(buf, 0, ref, where))
        return out

    def check_bin(self, bin_name: str, expected_size: int | None) -> int:
        """Checks a .bin file's size against the manifest's (if any); returns the size."""
        file_size = self._storage.size(bin_name)
        if expected_size is not None and file_size != expected_size:
            raise FormatError(
                f"{bin_name}: file has {file_size} bytes, the manifest says {expected_size}")
        return file_size

    def read_exact(self, name: str, offset: int, size: int) -> np.ndarray:
        """Reads ``size`` bytes at ``offset`` of a file into a new uint8 array."""
        try:
            buf = np.empty(size, dtype=np.uint8)
        except MemoryError as e:  # sizes are bounded by the file, but a sparse file can be huge
            raise FormatError(f"{name}: cannot allocate {size} bytes for array data, more than "
                              "available memory") from e
        if size:
            self._storage.readinto(name, offset, buf.data)
        return buf

    def batch_data(self, batch: Batch, binfo: dict[str, Any]) -> np.ndarray | None:
        """The batch's whole .bin once it is worth reading whole (see SMALL_ENTRY_BYTES)."""
        batch.reads += 1
        size = self.batch_size(batch, binfo)
        if (batch.data is None and batch.reads >= 2 and size <= WHOLE_BIN_MAX_BYTES
                and size <= len(batch.entries) * SMALL_ENTRY_BYTES):
            batch.data = self.read_exact(binfo["bin"], 0, size)
        return batch.data

    def fast_part(self, m: Manifest, batch: Batch, binfo: dict[str, Any],
                  entry: dict[str, Any]) -> FastPart | None:
        """The entry decoded with all its batch's columns at once (decoded on first use, kept
        with the batch), or None while the batch's bytes are not in memory or for an entry
        the column path leaves out."""
        data = self.batch_data(batch, binfo)
        if data is None:
            return None
        if batch.parts is None:
            with gc_paused():
                batch.parts = decode_columns(m, binfo["bin"], batch.entries,
                                             self.batch_size(batch, binfo), data, self._verify)
        part: FastPart | None = batch.parts.get(entry["index"] - binfo["first"])
        return part

    def batch_size(self, batch: Batch, binfo: dict[str, Any]) -> int:
        """The cached batch's .bin size, checked against the manifest on first use."""
        if batch.file_size is None:
            batch.file_size = self.check_bin(binfo["bin"], binfo["bin_size"])
        return batch.file_size

    def view(self, buf: np.ndarray, start: int, ref: ArrayRef, where: str) -> np.ndarray:
        raw = buf[start:start + ref.size]
        self.check_bytes(raw, ref, where)
        if start % ref.dtype.alignment == 0:
            return raw.view(ref.dtype).reshape(ref.shape)
        out: np.ndarray = raw.copy().view(ref.dtype).reshape(ref.shape)
        return out

    def decode_rows(self, bin_name: str, ref: ArrayRef, where: str, start: int, stop: int,
                    out: np.ndarray, data: np.ndarray | None = None) -> None:
        """Rows ``start:stop`` of a compressed array (bytes checked to lie in the file) into
        ``out``: the one way a reader reads one (:func:`gym_recorder.format.codecs.decode_rows`,
        with the CRC-32 of its stored bytes when verifying)."""
        if data is not None:
            def read(offset: int, size: int) -> Any:
                return data[offset:offset + size]
        else:
            def read(offset: int, size: int) -> Any:
                return self.read_exact(bin_name, offset, size)
        _codecs.decode_rows(ref, read, start, stop, out, where,
                            _fileio.crc32 if self._verify else None)
        self.check_bytes(out.reshape(-1).view(np.uint8), ref, where)

    def decode_array(self, bin_name: str, ref: ArrayRef, where: str,
                     data: np.ndarray | None = None) -> np.ndarray:
        """A whole compressed array, decoded into memory it owns."""
        try:
            out = np.empty(ref.shape, ref.dtype)
        except (MemoryError, ValueError) as e:
            raise FormatError(f"{where}: cannot allocate {ref.size} bytes for the array") from e
        self.decode_rows(bin_name, ref, where, 0, ref.shape[0], out, data)
        return out

    def check_bytes(self, raw: np.ndarray, ref: ArrayRef, where: str) -> None:
        """Checks an array's raw bytes: CRC-32 when verifying, and that <U holds code points.
        (A compressed array's CRC-32 is of its stored bytes, checked as they are decoded.)"""
        if self._verify and ref.crc32 is not None and ref.codec is None and \
                _fileio.crc32(raw) != ref.crc32:
            raise ChecksumError(f"{where}: CRC-32 of the array's bytes does not match")
        if self._verify and ref.dtype.kind == "b" and ref.size and raw.view(np.uint8).max() > 1:
            raise FormatError(f"{where}: a bool array holds bytes other than 0 and 1")
        if ref.dtype.kind == "U" and ref.size:
            # numpy crashes (SystemError) on any access to a code point beyond U+10FFFF.
            codes = raw.view(np.dtype(np.uint32).newbyteorder(ref.dtype.byteorder))
            if codes.max() > MAX_CODE_POINT:
                raise FormatError(f"{where}: {ref.dtype.str} array holds values that are not "
                                  "Unicode code points")

    def plan_part(self, m: Manifest, binfo: dict[str, Any], entry: dict[str, Any], part_no: int) -> Part:
        """Checks an entry's structure and collects its array references (reads nothing)."""
        part = Part(binfo, entry, part_no)
        where = part.where
        steps = entry.get("steps")
        if type(steps) is not int or steps < 0:
            raise FormatError(f"{where}: 'steps' must be a non-negative integer")
        obs_rows = steps + 1 if part_no == 0 else steps
        part.steps, part.obs_rows = steps, obs_rows
        refs, slots = part.refs, part.slots

        def want(obj: Any, w: str, kind: str, k: int, expect: Any = None) -> None:
            if not isinstance(obj, dict) or obj.get("__type") != "ndarray":
                raise FormatError(f"{w}: expected an array reference")
            refs.append((obj, w))
            slots.append((kind, k, expect))

        part.obs_stored = obs_stored = obs_layout(m).tree_leaves(entry.get("observations"),
                                                                f"{where} observations")
        part.act_stored = act_stored = act_layout(m).tree_leaves(entry.get("actions"),
                                                                f"{where} actions")
        for k, ((obj, w), leaf) in enumerate(zip(obs_stored, obs_layout(m).leaves)):
            if isinstance(leaf, ArrayLeaf) and not _outside_values(obj):
                want(obj, w, "obs", k, (obs_rows, *leaf.shape))
        for k, ((obj, w), leaf) in enumerate(zip(act_stored, act_layout(m).leaves)):
            if isinstance(leaf, ArrayLeaf) and not _outside_values(obj):
                want(obj, w, "act", k, (steps, *leaf.shape))
        for name in ("rewards", "terminations", "truncations"):
            want(entry.get(name), f"{where} {name}", name, 0, (steps,))
        part.infos = infos = entry.get("infos")
        if not isinstance(infos, dict) or infos.get("rows") != obs_rows or not isinstance(
                infos.get("keys"), list):
            raise FormatError(f"{where}: 'infos' must be {{'rows': {obs_rows}, 'keys': [...]}}")
        for k, col in enumerate(infos["keys"]):
            w = f"{where} infos column {k}"
            if not isinstance(col, dict) or not isinstance(col.get("key"), str):
                raise FormatError(f"{w}: a column needs a string 'key'")
            if col.get("index") is not None:
                want(col["index"], w + " index", "info_index", k)
            if col.get("kind") == "array":
                want(col.get("values"), w + " values", "info_values", k)
            elif col.get("kind") != "values" or not isinstance(col.get("values"), list):
                raise FormatError(f"{w}: 'kind' must be 'array' or 'values'")
        return part

    @staticmethod
    def check_shapes(part: Part, slot_items: Iterable[tuple[tuple[str, int, Any], Any, Any, str]]) -> None:
        """Checks each (slot, shape, dtype, where) against what the entry must hold."""
        for (kind, _, expect), shape, dtype, w in slot_items:
            if expect is not None and shape != expect:
                raise FormatError(f"{w}: shape {shape}, expected {expect}")
            if kind == "rewards" and dtype != np.float64:
                raise FormatError(f"{part.where} rewards: dtype {dtype}, expected float64")
            if kind in ("terminations", "truncations") and dtype != np.bool_:
                raise FormatError(f"{part.where} {kind}: dtype {dtype}, expected bool")

    def load_part(self, m: Manifest, part: Part, file_size: int,
                  skip_stacked: bool = False, data: np.ndarray | None = None,
                  copy: bool = True) -> PartData:
        """Reads an entry's arrays and decodes its values (stacked arrays only if not skipped)."""
        binfo = part.binfo
        bin_name = binfo["bin"]
        if skip_stacked:
            chosen = [i for i, slot in enumerate(part.slots) if slot[0] not in STACKED]
        else:
            chosen = list(range(len(part.slots)))
        slots = [part.slots[i] for i in chosen]
        refs = [part.refs[i] for i in chosen]
        arrays = self.read_arrays(bin_name, refs, aligned=True, expected_size=binfo["bin_size"],
                                   file_size=file_size, data=data, copy=copy)
        self.check_shapes(part, ((slot, arr.shape, arr.dtype, w)
                                  for slot, arr, (_, w) in zip(slots, arrays, refs)))
        return self.finish_part(m, part, slots, arrays, file_size, data, copy)

    def finish_part(self, m: Manifest, part: Part, slots: list[tuple[str, int, Any]],
                    arrays: list[np.ndarray],
                    file_size: int, data: np.ndarray | None = None, copy: bool = True) -> PartData:
        """Builds an entry's leaves, infos and metadata from its read arrays."""
        entry, where, steps, info_rows = part.entry, part.where, part.steps, part.obs_rows
        obs_rows = info_rows
        obs: list[Any] = [None] * len(obs_layout(m).leaves)
        act: list[Any] = [None] * len(act_layout(m).leaves)
        named: dict[str, np.ndarray] = {}
        info_index: dict[int, np.ndarray] = {}
        info_values: dict[int, np.ndarray] = {}
        for (kind, k, _), arr in zip(slots, arrays):
            if kind == "obs":
                obs[k] = arr
            elif kind == "act":
                act[k] = arr
            elif kind == "info_index":
                info_index[k] = arr
            elif kind == "info_values":
                info_values[k] = arr
            else:
                named[kind] = arr

        source = self.value_source(part.binfo["bin"], part.binfo["bin_size"], file_size, data,
                                    copy)
        for k, ((obj, w), leaf) in enumerate(zip(part.obs_stored, obs_layout(m).leaves)):
            if isinstance(leaf, ValuesLeaf) or _outside_values(obj):
                obs[k] = decode_values_leaf(_as_values(leaf), obj, source, w)
                if len(obs[k]) != obs_rows:
                    raise FormatError(f"{w}: {len(obs[k])} rows, expected {obs_rows}")
        for k, ((obj, w), leaf) in enumerate(zip(part.act_stored, act_layout(m).leaves)):
            if isinstance(leaf, ValuesLeaf) or _outside_values(obj):
                act[k] = decode_values_leaf(_as_values(leaf), obj, source, w)
                if len(act[k]) != steps:
                    raise FormatError(f"{w}: {len(act[k])} rows, expected {steps}")
        rows: list[dict[str, Any]] = [{} for _ in range(info_rows)]
        for k, col in enumerate(part.infos["keys"]):
            w = f"{where} infos column {k}"
            if k in info_index:
                idx = info_index[k]
                if idx.dtype != np.int64 or idx.ndim != 1 or (idx.size and (
                        idx[0] < 0 or idx[-1] >= info_rows or (np.diff(idx) <= 0).any())):
                    raise FormatError(f"{w}: index must be ascending int64 rows in [0, {info_rows})")
                positions = idx.tolist()
            else:
                positions = range(info_rows)
            if col["kind"] == "array":
                values = info_values[k]
                if values.ndim == 0 or values.shape[0] != len(positions):
                    raise FormatError(f"{w}: {values.shape} values for {len(positions)} rows")
                pytype = col.get("pytype")
                if pytype in ("bool", "int", "float"):
                    items = values.tolist()
                elif pytype is None:
                    items = list(values)
                else:
                    raise FormatError(f"{w}: unknown pytype {pytype!r}")
            else:
                if len(col["values"]) != len(positions):
                    raise FormatError(f"{w}: {len(col['values'])} values for {len(positions)} rows")
                items = [decode_value(v, source, w) for v in col["values"]]
            key = col["key"]
            for pos, item in zip(positions, items):
                rows[pos][key] = item
        seed = entry.get("seed")
        if seed is not None and type(seed) is not int:
            raise FormatError(f"{where}: 'seed' must be an integer or null")
        sub_env = entry.get("sub_env")
        if sub_env is not None and type(sub_env) is not int:
            raise FormatError(f"{where}: 'sub_env' must be an integer or null")
        return PartData(obs, act, named.get("rewards"), named.get("terminations"),
                        named.get("truncations"), rows, seed,
                        decode_value(entry.get("options"), source, f"{where} options"),
                        entry_end(entry, where), sub_env, entry.get("no_reset") is True)

    def value_source(self, bin_name: str, bin_size: int | None = None,
                     file_size: int | None = None, data: np.ndarray | None = None,
                     copy: bool = True) -> Callable[[dict[str, Any], str], np.ndarray]:
        def source(obj: dict[str, Any], where: str) -> np.ndarray:
            return self.read_arrays(bin_name, [(obj, where)], aligned=True,
                                     expected_size=bin_size, file_size=file_size,
                                     data=data, copy=copy)[0]
        return source

    def read_rows(self, bin_name: str, ref: ArrayRef, where: str, out: np.ndarray,
                  row: int) -> None:
        """Reads one part's array into ``out[row:]``: in place, or through a cast if widened."""
        n = ref.shape[0]
        if ref.codec is not None:
            if ref.dtype == out.dtype:
                self.decode_rows(bin_name, ref, where, 0, n, out[row:row + n])
            else:
                out[row:row + n] = self.decode_array(bin_name, ref, where)
            return
        if ref.dtype == out.dtype:
            if not ref.size:
                return
            start = row * (ref.size // n)
            raw = out.reshape(-1).view(np.uint8)[start:start + ref.size]
            self._storage.readinto(bin_name, ref.offset, raw.data)
            self.check_bytes(raw, ref, where)
        else:
            raw = self.read_exact(bin_name, ref.offset, ref.size)
            self.check_bytes(raw, ref, where)
            out[row:row + n] = raw.view(ref.dtype).reshape(ref.shape)
