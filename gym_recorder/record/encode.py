"""Batch encoding: a :class:`~gym_recorder.record.batch.Batch` becomes a .bin and a batch JSON document.

Pure: :meth:`BatchEncoder.encode` writes the arrays of a batch, 8-byte aligned, into the file
object it is given, and returns the batch JSON document (see "Batch" in the format specification,
:mod:`gym_recorder.format`). No threads, no retries, no fsync, no manifest: those are
:mod:`gym_recorder.record.writer`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from ..format import fileio
from .batch import Batch
from .binsink import BinSink
from ..errors import UnsupportedValueError
from ..format.fileio import dumps
from ..format import ALIGNMENT, FORMAT_NAME, FORMAT_VERSION, RAW_FORMAT_VERSION
from ..format.codecs import MIN_CODED_ROW_BYTES, Codec, encode_rows
from ..format.spaces import DictNode, Layout, TupleNode
from ..format.values import encode_value

__all__ = ["BatchEncoder", "BinSink", "EncodedBatch"]

# A column whose rows are not a multiple of ALIGNMENT bytes is written whole when entries can
# start at multiples of lcm(row bytes, ALIGNMENT) no larger than this (padding stays small).
MAX_PACKED_ALIGN = 64
# Batch headers longer than this (bytes of JSON) carry the spaces in the first batch only.
MAX_REPEATED_HEADER_BYTES = 4096
MAX_REPEATED_FIELD_BYTES = 1024
_NO_RESET = ',"no_reset":true'
# Batch headers longer than this (bytes of JSON) carry the spaces in the first batch only.
MAX_REPEATED_HEADER_BYTES = 4096
MAX_REPEATED_FIELD_BYTES = 1024


def _tree_template(layout: Layout) -> str:
    """A %-format string that lays out one TREE from the JSON texts of its leaves, in order."""
    def build(node: Any) -> str:
        if isinstance(node, DictNode):
            return "{" + ",".join(_text(k).replace("%", "%%") + ":" + build(c)
                                  for k, c in zip(node.keys, node.children)) + "}"
        if isinstance(node, TupleNode):
            return "[" + ",".join(build(c) for c in node.children) + "]"
        return "%s"

    return build(layout.root)


def _column_texts(sink: BinSink, col: np.ndarray | list[Any], lo: np.ndarray, hi: np.ndarray,
                  where: str, index: list[Any] | None, codec: Codec | None = None) -> list[str]:
    """The JSON text of each entry's rows of a leaf column: an ARRAY, or a ``values`` object.

    ``index`` gets the column's ``[dtype, npyoff, unit]`` (see :func:`_column_refs`), or None
    for a column of values (a batch with such a leaf has no index). With a ``codec``, a leaf
    of at least MIN_CODED_ROW_BYTES a row is stored compressed (see :func:`_coded_refs`).
    """
    if isinstance(col, np.ndarray):
        if codec is not None and col.ndim >= 1 and \
                col.dtype.itemsize * math.prod(col.shape[1:]) >= MIN_CODED_ROW_BYTES:
            return _coded_refs(sink, col, lo, hi, codec, index)
        return _column_refs(sink, col, lo, hi, index)
    if index is not None:
        index.append(None)
    return [_text({"__type": "values", "values": [encode_value(v, sink, where) for v in col[a:b]]})
            for a, b in zip(lo.tolist(), hi.tolist())]


def _coded_refs(sink: BinSink, col: np.ndarray, lo: np.ndarray, hi: np.ndarray, codec: Codec,
                index: list[Any] | None) -> list[str]:
    """Writes each entry's rows of a column compressed (see "Compressed arrays" in the format),
    or raw where compressing does not pay (noise); returns their references.

    ``index`` gets None when any entry is compressed (a batch with compressed arrays has no
    index), else the column's entry as for arrays written one by one.
    """
    texts: list[str] = []
    blobs = [encode_rows(np.ascontiguousarray(col[a:b]), codec)
             for a, b in zip(lo.tolist(), hi.tolist())]
    if index is not None:
        index.append(None if any(b is not None for b in blobs) else
                     [col.dtype.str, sink.offset + -sink.offset % ALIGNMENT, ALIGNMENT])
    tail = "".join("," + str(d) for d in col.shape[1:])
    confs: dict[str, str] = {}
    for a, b, coded in zip(lo.tolist(), hi.tolist(), blobs):
        if coded is None:
            texts.append(sink.text(col[a:b]))
            continue
        blob, conf_json = coded
        key = repr(conf_json)
        conf = confs.get(key) or confs.setdefault(key, _text(conf_json))
        offset, data = sink.put_block(np.frombuffer(blob, np.uint8))
        sink.raw_coded += (b - a) * col.dtype.itemsize * math.prod(col.shape[1:])
        sink.stored_coded += len(blob)
        sink.codecs.add(codec.name)
        texts.append(f'{{"__type":"ndarray","shape":[{b - a}{tail}],"order":"C",'
                     f'"dtype":"{col.dtype.str}","npyfile":"{sink.name}","npyoff":{offset},'
                     f'"size":{(b - a) * col.dtype.itemsize * math.prod(col.shape[1:])},'
                     f'"stored":{len(blob)},"crc32":{fileio.crc32(data)},"codec":{conf}}}')
    return texts


def _column_refs(sink: BinSink, col: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 index: list[Any] | None = None) -> list[str]:
    """Writes the rows [lo[k], hi[k]) of a column for every entry k; returns their references.

    The entries' rows must follow one another in the column (hi[k] == lo[k + 1]). ``index``
    (when given) gets the column's entry of the batch index: ``[dtype, npyoff, unit]``, entry
    k's array starting at ``npyoff + sum(ceil(size_j / unit) * unit for j < k)`` (see "Batch
    index" in the format specification).
    """
    n = len(lo)
    if n == 0:
        return []
    counts = hi - lo
    tail = "".join("," + str(d) for d in col.shape[1:])
    row_bytes = col.dtype.itemsize * math.prod(col.shape[1:])
    align = math.lcm(row_bytes, ALIGNMENT) if row_bytes else ALIGNMENT
    start, stop = int(lo[0]), int(hi[-1])
    contiguous = bool((lo[1:] == hi[:-1]).all())
    if not contiguous or align > MAX_PACKED_ALIGN:
        # Rows of odd sizes (or a layout we do not expect): one aligned write per entry.
        if index is not None:  # (each at the next multiple of ALIGNMENT)
            index.append([col.dtype.str, sink.offset + -sink.offset % ALIGNMENT, ALIGNMENT])
        return [sink.text(col[a:b]) for a, b in zip(lo.tolist(), hi.tolist())]
    block = np.ascontiguousarray(col[start:stop])
    if row_bytes % ALIGNMENT == 0 or stop == start:
        base, data = sink.put_block(block)
        rel = (lo - start) * row_bytes
        pad_unit = ALIGNMENT
    else:  # (stop > start here: some entry has rows)
        # Each entry starts at a multiple of lcm(row_bytes, 8): then rows stay whole units, and
        # one fancy-indexed copy lays the column out with its padding.
        padded = (counts * row_bytes + align - 1) // align * align
        rel = np.cumsum(padded) - padded
        unit = np.dtype((np.void, row_bytes))
        packed = np.zeros(int(padded.sum()) // row_bytes, unit)
        packed[np.repeat(rel // row_bytes - (lo - start), counts) + np.arange(stop - start)] = \
            block.reshape(stop - start, -1).view(unit).reshape(-1)
        # (No padding after the last entry: padding only lies between arrays.)
        base, data = sink.put_block(
            packed.view(np.uint8)[:int(rel[-1]) + int(counts[-1]) * row_bytes])
        pad_unit = align
    if index is not None:
        index.append([col.dtype.str, base, pad_unit])
    # The same text as _REF_TEXT, built with one f-string per entry around the parts every
    # entry of the column shares (batches of short episodes hold thousands of references).
    crc32 = fileio.crc32
    mid = f'{tail}],"order":"C","dtype":"{col.dtype.str}","npyfile":"{sink.name}","npyoff":'
    sizes = (counts * row_bytes).tolist()
    return [f'{{"__type":"ndarray","shape":[{c}{mid}{base + r},"size":{size},'
            f'"crc32":{crc32(data[r:r + size])}}}'
            for r, c, size in zip(rel.tolist(), counts.tolist(), sizes)]


def _quoted(word: str) -> str:
    """An entry's ``end``: one of the format's own fixed words, which need no escaping."""
    return '"' + word + '"'


def _text(value: Any) -> str:
    """JSON text of a JSON-ready value, as the format writes it."""
    return dumps(value).decode("ascii")


def _info_columns(rows: int, infos: list[tuple[int, dict[str, Any]]], sink: BinSink, where: str) -> dict[str, Any]:
    """Encodes sparse (row, info) pairs as INFOS columns (see the format specification)."""
    columns: dict[str, tuple[list[int], list[Any]]] = {}
    for row, info in infos:
        for key, value in info.items():
            if type(key) is not str:
                raise UnsupportedValueError(
                    f"{where} row {row}: info key {key!r} is not a string")
            col = columns.get(key)
            if col is None:
                col = columns[key] = ([], [])
            col[0].append(row)
            col[1].append(value)
    out = []
    for key, (index, values) in columns.items():
        entry: dict[str, Any] = {"key": key}
        entry["index"] = None if len(index) == rows else sink(np.array(index, dtype=np.int64))
        first = values[0]
        t = type(first)
        stacked: np.ndarray | None = None
        pytype = None
        if t in (bool, int, float) and all(type(v) is t for v in values):
            pytype = t.__name__
            try:
                stacked = np.array(values, dtype={"bool": np.bool_, "int": np.int64,
                                                  "float": np.float64}[pytype])
            except OverflowError:
                stacked = None
        elif isinstance(first, (np.ndarray, np.generic)) and first.dtype.kind in "biufc" and all(
                type(v) is t and v.dtype == first.dtype and v.shape == first.shape for v in values
        ) and not (t is np.ndarray and first.ndim == 0):
            # (0-d arrays are not stacked: the reader gives a stacked (n,) column back as numpy
            # scalars, so they are kept as VALUEs, one array each.)
            # (np.stack would give native byte order: keep the dtype exactly, e.g. '>f4')
            stacked = np.stack(values).astype(first.dtype, copy=False) if t is np.ndarray \
                else np.array(values, dtype=first.dtype)
        if stacked is not None:
            entry["kind"] = "array"
            entry["pytype"] = pytype
            entry["values"] = sink(stacked)
        else:
            entry["kind"] = "values"
            entry["pytype"] = None
            entry["values"] = [encode_value(v, sink, f"{where} info[{key!r}]") for v in values]
        out.append(entry)
    return {"rows": rows, "keys": out}


@dataclass(slots=True, frozen=True)
class EncodedBatch:
    """What :meth:`BatchEncoder.encode` made of a batch.

    Attributes:
        json: the batch JSON document, as bytes.
        bin_size: bytes written to the .bin file.
        entries: entries in the batch.
        index: the BATCH's ``"index"`` (see "Batch index" in the format specification), or
            None for a batch with a leaf stored as values.
    """

    json: bytes
    bin_size: int
    entries: int
    index: dict[str, Any] | None = None
    codecs: tuple[str, ...] = ()
    raw_size: int = 0


def _batch_index(sink: BinSink, batch: Batch, columns: list[Any]) -> dict[str, Any] | None:
    """Writes the batch index's table (after every other array) and returns the BATCH's
    ``"index"``; None when a leaf is stored as values, or for entries whose observation rows
    are not their steps (+ 1 for part 0), which the index cannot describe."""
    segs = batch.segments
    if not segs or None in columns or \
            len(columns) != len(batch.observations) + len(batch.actions) + 3:
        return None
    table = np.array([(seg.episode, seg.part, seg.step1 - seg.step0,
                       (seg.end is None) | (seg.no_reset << 1), seg.obs1 - seg.obs0)
                      for seg in segs], dtype="<i8")
    if (table[:, 4] != table[:, 2] + (table[:, 1] == 0)).any():
        return None
    table = np.ascontiguousarray(table[:, :4])
    offset, data = sink.put_block(table)
    return {"table": offset, "crc32": fileio.crc32(data), "columns": columns}


class BatchEncoder:
    """Encodes the batches of one writer (one prefix, one header, one pair of spaces).

    Args:
        prefix: the writer's file prefix.
        batch_header: the manifest's header fields, repeated in every batch JSON.
        obs_layout: layout of the observation space.
        act_layout: layout of the action space.
    """

    def __init__(self, prefix: str, batch_header: dict[str, Any], obs_layout: Layout,
                 act_layout: Layout, codec: Codec | None = None) -> None:
        self._prefix = prefix
        self._codec = codec
        self._version = batch_header.get("version", RAW_FORMAT_VERSION)
        self._obs_layout = obs_layout
        self._act_layout = act_layout
        self._header_json = dumps(batch_header)
        # A large header (big space descriptions, a big env spec) is written whole in the
        # writer's first batch only; later batches leave out its fields of more than
        # MAX_REPEATED_FIELD_BYTES (see "Batch" in the format specification).
        self._later_header_json = self._header_json
        if len(self._header_json) > MAX_REPEATED_HEADER_BYTES:
            self._later_header_json = dumps({
                k: v for k, v in batch_header.items()
                if len(dumps(v)) <= MAX_REPEATED_FIELD_BYTES})
        self._obs_template = _tree_template(obs_layout)
        self._act_template = _tree_template(act_layout)

    def encode(self, first: int, batch: Batch, f: BinaryIO, bin_name: str,
               json_name: str) -> EncodedBatch:
        """Writes the batch's arrays to ``f`` (the file ``bin_name``, from offset 0) and builds
        its JSON document (the file ``json_name``), whose first entry has index ``first``.

        Raises:
            UnsupportedValueError: for a value the format cannot hold (naming ``json_name``).
            OSError: from ``f.write``.
        """
        sink = BinSink(f, bin_name)
        columns: list[Any] = []
        entries = self.entries(first, batch, sink, json_name, columns)
        index = _batch_index(sink, batch, columns)
        sink.finish()
        # (2 where an array is compressed, or where the writer's header says 2: multi-agent)
        version = max(self._version, FORMAT_VERSION if sink.codecs else RAW_FORMAT_VERSION)
        doc = b"".join([
            dumps({"format": FORMAT_NAME, "version": version, "prefix": self._prefix,
                   "first": first})[:-1],
            b',"episodes":[', ",".join(entries).encode("ascii"), b"],",
            b"" if index is None else b'"index":' + dumps(index) + b",", b'"header":',
            self._header_json if first == 0 else self._later_header_json, b"}"])
        return EncodedBatch(doc, sink.offset, len(entries), index, tuple(sorted(sink.codecs)),
                            sink.offset + sink.raw_coded - sink.stored_coded)

    def entries(self, first: int, batch: Batch, sink: BinSink, where: str,
                index: list[Any] | None = None) -> list[str]:
        """Writes a batch column by column; returns the entries as JSON text.

        Each column (an observation or action leaf, rewards, terminations, truncations) holds
        the rows of every entry in order, so it is written in one piece; when its rows are not
        a multiple of ALIGNMENT bytes, each entry's rows are first placed at aligned offsets
        (zero padding between) with one vectorised copy. The per-entry Python work left is a
        CRC-32 and a formatted reference per array, which makes batches of thousands of short
        episodes cheap to write. A leaf that does not stack (a list of values) is encoded entry
        by entry. ``index`` (when given) gets the ``"columns"`` of the batch index, in column
        order, None for a leaf stored as values.
        """
        segs = batch.segments
        o0 = np.array([seg.obs0 for seg in segs], np.int64)
        o1 = np.array([seg.obs1 for seg in segs], np.int64)
        s0 = np.array([seg.step0 for seg in segs], np.int64)
        s1 = np.array([seg.step1 for seg in segs], np.int64)
        obs = [_column_texts(sink, col, o0, o1, f"{where} observations", index, self._codec)
               for col in batch.observations]
        act = [_column_texts(sink, col, s0, s1, f"{where} actions", index, self._codec)
               for col in batch.actions]
        rewards = _column_refs(sink, batch.rewards, s0, s1, index)
        terms = _column_refs(sink, batch.terminations, s0, s1, index)
        truncs = _column_refs(sink, batch.truncations, s0, s1, index)
        # (A space of no leaves, Dict({}) or Tuple(()), has the same text in every entry.)
        obs_texts = obs[0] if self._obs_layout.single else [
            self._obs_template % row for row in zip(*obs)] if obs else \
            [self._obs_template] * len(segs)
        act_texts = act[0] if self._act_layout.single else [
            self._act_template % row for row in zip(*act)] if act else \
            [self._act_template] * len(segs)
        out: list[str] = []
        append = out.append
        for k, seg, seg_infos, obs_t, act_t, rew_t, term_t, trunc_t in zip(
                range(first, first + len(segs)), segs, batch.segment_infos(), obs_texts,
                act_texts, rewards, terms, truncs):
            part = seg.part
            end = seg.end
            rows = seg.info1 - seg.info0
            seed = seg.seed if part == 0 else None
            options = seg.options if part == 0 else None
            sub_env = seg.sub_env
            # One f-string per entry (see "Batch" in the format specification): batches of
            # short episodes hold thousands of entries.
            infos = ('{"rows":%d,"keys":[]}' % rows) if not seg_infos else _text(
                _info_columns(rows, seg_infos, sink, f"{where} entry {k}"))
            opts = "null" if options is None else _text(
                encode_value(options, sink, f"{where} entry {k} options"))
            append(
                f'{{"index":{k},"episode":{seg.episode:d},"part":{part:d},'
                f'"continues":{"false" if end is not None else "true"},'
                f'"steps":{seg.step1 - seg.step0:d},"observations":{obs_t},'
                f'"actions":{act_t},"rewards":{rew_t},"terminations":{term_t},'
                f'"truncations":{trunc_t},"infos":{infos},'
                f'"seed":{"null" if seed is None else int(seed)},"options":{opts},'
                f'"end":{"null" if end is None else _quoted(end)},'
                f'"sub_env":{"null" if sub_env is None else int(sub_env)}'
                f'{_NO_RESET if seg.no_reset else ""}}}')
        return out
