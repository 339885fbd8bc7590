"""Compressed arrays (format version 2): the codec description, encoding a leaf's rows into
chunks, and the one function that turns a stored reference back into rows.

See "Compressed arrays" in :mod:`gym_recorder.format` for the byte layout. Every reader path
of an array that may be compressed goes through :func:`decode_rows`: it checks the chunk
offsets table, each chunk's declared and decoded size (before anything is allocated), and
undoes the delta coding. The zstd binding (:mod:`gym_recorder.format._zstd`) is imported
lazily, on first use: ``zstandard``, else the standard library's ``compression.zstd`` (Python
3.14), else ``backports.zstd``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError
from ._zstd import _zstd, codec_available

__all__ = ["Zstd", "Codec", "resolve_compression", "parse_codec", "encode_rows", "decode_rows", "chunk_count",
           "CODEC_NAMES", "DELTAS", "MAX_CHUNK_ROWS", "MAX_CHUNK_BYTES", "MAX_ZSTD_RATIO",
           "MIN_CODED_ROW_BYTES", "MAX_STORED_FRACTION", "DEFAULT_LEVEL",
           "DEFAULT_CHUNK_ROWS", "DEFAULT_DELTA", "codec_available"]

# Codecs this reader knows, by name; a reader MUST refuse any other name.
CODEC_NAMES = ("zstd",)
# Delta coding of the rows of a chunk, bytewise: none, XOR with the previous row, or the
# difference (mod 256) from it.
DELTAS = ("none", "xor", "sub")
# Rows per chunk: a chunk is decoded whole, so a random row costs one chunk.
MAX_CHUNK_ROWS = 1 << 16
# One chunk's decoded bytes: bounds the memory a reader needs for any chunk (a stacked Atari
# observation chunk of 16 rows is 451,584 bytes; 256 MiB leaves room for big images).
MAX_CHUNK_BYTES = 1 << 28
# A zstd block decodes to at most 128 KiB and takes at least 4 bytes (an RLE block: 3-byte
# header + 1 byte), so no zstd frame decodes to more than 32,768 times its size; a chunk
# declaring more is refused before anything is allocated (a decompression bomb).
MAX_ZSTD_RATIO = 1 << 15
# Leaves of fewer bytes per row than this are stored raw (a few bytes a step gain nothing).
MIN_CODED_ROW_BYTES = 64
# An entry's rows are stored raw when compressing keeps more than this fraction of their bytes
# (noise): reading raw bytes costs nothing, and the file grows by less than the fraction.
MAX_STORED_FRACTION = 0.9
# Rows of at least this many bytes (a chunk of 12 rows or fewer) are first probed for noise with
# two rows; smaller rows, many to a chunk, can repeat further apart than a probe sees.
PROBE_MIN_ROW_BYTES = 64 * 1024
# Defaults, chosen from benchmarks/bench_compress.py (see docs/compression.md).
DEFAULT_LEVEL = 3
DEFAULT_CHUNK_ROWS = None  # by the row's size: see DEFAULT_CHUNK_BYTES
# Rows per chunk when not given: as many as make about this many bytes (8 raw ALE frames of
# 100,800 bytes, 28 stacked 4x84x84 observations), from 1 to MAX_DEFAULT_CHUNK_ROWS: a random
# row decodes one chunk in about 100 us, and rows of a chunk share zstd's window.
DEFAULT_CHUNK_BYTES = 800_000
MAX_DEFAULT_CHUNK_ROWS = 64
DEFAULT_DELTA = "auto"
# zstd's levels: negative ones are faster, 22 the slowest.
MIN_LEVEL, MAX_LEVEL = -131072, 22
_U64 = np.dtype("<u8")


class Zstd:
    """How a writer compresses a leaf's rows: ``{"name": "zstd", "configuration": {...}}``.

    Example: ``RecordingWrapper(env, d, compression=Zstd(level=3, chunk_rows=16))``.

    Args:
        level: zstd compression level (readers do not need it).
        chunk_rows: rows per compressed chunk (a random row reads one chunk); None: as many
            as make about DEFAULT_CHUNK_BYTES (800 KB), at most 64.
        delta: "none", "xor" or "sub": each row of a chunk but its first is stored as its XOR
            with (or its difference from) the previous row, bytewise; "auto" (writers only):
            per entry, "xor" or "none", whichever compresses its first chunk better (XOR for
            raw frames, none for stacked ones, whose rows shift).

    Raises:
        ValueError: for an option out of range.
    """

    __slots__ = ("name", "level", "chunk_rows", "delta")

    def __init__(self, level: int = DEFAULT_LEVEL, chunk_rows: int | None = DEFAULT_CHUNK_ROWS,
                 delta: str = DEFAULT_DELTA) -> None:
        if type(level) is not int or not MIN_LEVEL <= level <= MAX_LEVEL:
            raise ValueError(f"zstd level must be an int in [{MIN_LEVEL}, {MAX_LEVEL}], "
                             f"got {level!r}")
        if chunk_rows is not None and (type(chunk_rows) is not int
                                       or not 1 <= chunk_rows <= MAX_CHUNK_ROWS):
            raise ValueError(f"chunk_rows must be an int in [1, {MAX_CHUNK_ROWS}], "
                             f"got {chunk_rows!r}")
        if delta not in DELTAS and delta != "auto":
            raise ValueError(f"delta must be one of {DELTAS} or 'auto', got {delta!r}")
        self.name = "zstd"
        self.level = level
        self.chunk_rows = chunk_rows
        self.delta = delta

    def to_json(self, delta: str | None = None, chunk_rows: int | None = None
                ) -> dict[str, Any]:
        """The ARRAY's ``"codec"`` value (with the delta and rows a writer chose)."""
        return {"name": self.name, "configuration": {
            "level": self.level, "chunk_rows": chunk_rows or self.chunk_rows,
            "delta": delta or self.delta}}

    def rows_for(self, row_bytes: int) -> int:
        """Rows per chunk for rows of ``row_bytes`` bytes."""
        if self.chunk_rows is not None:
            return self.chunk_rows
        return max(1, min(MAX_DEFAULT_CHUNK_ROWS, round(DEFAULT_CHUNK_BYTES / max(row_bytes, 1))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Zstd) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.level, self.chunk_rows, self.delta))

    def __repr__(self) -> str:
        return f"Zstd(level={self.level}, chunk_rows={self.chunk_rows}, delta={self.delta!r})"


# The codecs' common type (one so far).
Codec = Zstd


def resolve_compression(value: Any) -> Codec | None:
    """A recorder's ``compression`` argument: None (raw), ``"zstd"`` (the defaults) or a
    :class:`Zstd` with options; checks that the codec's package is installed.

    Raises:
        ValueError: for another value.
        CodecUnavailableError: when no zstd binding is installed.
    """
    if value is None:
        return None
    if isinstance(value, str) and value == "zstd":
        value = Zstd()
    if not isinstance(value, Zstd):
        raise ValueError(f"compression must be None, 'zstd' or a gym_recorder.Zstd(...), "
                         f"got {value!r}")
    _zstd()
    return value


def parse_codec(obj: Any, where: str) -> Codec:
    """Checks an ARRAY's ``"codec"`` value.

    Raises:
        FormatError: for an unknown codec name (named), or a configuration out of range.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("configuration"), dict):
        raise FormatError(f"{where}: 'codec' must be {{'name': ..., 'configuration': {{...}}}}")
    name = obj.get("name")
    if name not in CODEC_NAMES:
        raise FormatError(f"{where}: unknown codec {name!r} (this reader knows "
                          f"{', '.join(CODEC_NAMES)}); upgrade gym_recorder")
    conf = obj["configuration"]
    level = conf.get("level", DEFAULT_LEVEL)
    if conf.get("delta") not in DELTAS:
        raise FormatError(f"{where}: codec {name!r}: delta must be one of {DELTAS}, got "
                          f"{conf.get('delta')!r}")
    try:
        return Zstd(level if type(level) is int and MIN_LEVEL <= level <= MAX_LEVEL
                     else DEFAULT_LEVEL, conf.get("chunk_rows"), conf.get("delta"))
    except ValueError as e:
        raise FormatError(f"{where}: codec {name!r}: {e}") from None


def chunk_count(rows: int, chunk_rows: int) -> int:
    """Chunks of an array of ``rows`` rows."""
    return -(-rows // chunk_rows)


# -- encoding --------------------------------------------------------------------------------

# Rows are delta-coded into a scratch buffer of this thread's (kept: a fresh buffer a chunk
# costs more in page faults than the delta coding itself), a group of chunks of about this
# many bytes at a time (at least one chunk), which zstd then compresses in one call.
SCRATCH_BYTES = 4 << 20
_scratch_local = threading.local()


def _scratch(nbytes: int) -> np.ndarray:
    """This thread's scratch buffer, ``nbytes`` uint8 (grown when too small)."""
    buf: np.ndarray | None = getattr(_scratch_local, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _scratch_local.buf = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes]


def _delta_encode(rows: np.ndarray, delta: str, chunk_rows: int) -> np.ndarray:
    """``rows`` (uint8, C-contiguous, shape (n, row_bytes)) with each row but the first of
    each chunk of ``chunk_rows`` rows delta-coded: in the thread's scratch buffer, valid until
    the next call, or ``rows`` itself for delta "none". Two whole-array numpy calls."""
    if delta == "none" or len(rows) < 2:
        return rows
    out = _scratch(rows.nbytes).reshape(rows.shape)
    op = np.bitwise_xor if delta == "xor" else np.subtract
    op(rows[1:], rows[:-1], out=out[1:])
    out[::chunk_rows] = rows[::chunk_rows]
    return out


def _incompressible(zstd: Any, raw: np.ndarray, row_bytes: int, codec: Codec) -> bool:
    """Whether the rows look like noise: the first row alone, and the first two together
    (delta-coded as the codec would: zstd also finds a row repeated in the next, without
    delta coding), each keep more than :data:`MAX_STORED_FRACTION` of their bytes. Three rows
    cost a fifth of compressing a first chunk of 8 rows both ways; rows that compress either
    way go on to the full choice below."""
    if len(zstd.compress(raw[:1].data, codec.level)) <= MAX_STORED_FRACTION * row_bytes:
        return False
    if len(raw) < 2:
        return True
    two = _delta_encode(raw[:2], "xor" if codec.delta == "auto" else codec.delta, 2)
    return len(zstd.compress(two.data, codec.level)) > MAX_STORED_FRACTION * 2 * row_bytes


def encode_rows(block: np.ndarray, codec: Codec) -> tuple[bytes, dict[str, Any]] | None:
    """The stored bytes of a C-contiguous array of rows (``block.shape[0]`` rows): the chunk
    offsets table, then one zstd frame per chunk, and the ARRAY's ``"codec"`` (the delta and
    rows per chunk used); None when they would keep more than :data:`MAX_STORED_FRACTION` of
    the raw bytes (the caller stores the rows raw).

    The first chunk decides (noise, and the delta of "auto"); the others are delta-coded a
    group of about SCRATCH_BYTES at a time into a reused buffer and compressed in one call a
    group (see ``compress_chunks``): few numpy calls, no copies, and the GIL taken back a few
    times a batch rather than several times a chunk (the writer thread's Python runs while
    the env's step waits for the GIL)."""
    n = block.shape[0]
    block = np.ascontiguousarray(block)
    raw = block.reshape(n, -1).view(np.uint8) if n else block.reshape(0, 0).view(np.uint8)
    row_bytes = raw.shape[1] if n else 0
    cr = codec.rows_for(row_bytes)
    if n and row_bytes * cr > MAX_CHUNK_BYTES:
        return None
    zstd = _zstd()
    if n and row_bytes >= PROBE_MIN_ROW_BYTES and _incompressible(zstd, raw, row_bytes, codec):
        return None  # (noise: a probe of two rows, not the first chunk both ways, says so)
    delta = codec.delta
    sizes: list[int] = []
    frames: list[Any] = []
    if n:
        first = raw[:cr]
        if delta == "auto":  # the first chunk both ways: keep the smaller
            plain = zstd.compress(first.data, codec.level)
            xored = zstd.compress(_delta_encode(first, "xor", cr).data, codec.level) \
                if len(first) > 1 else plain
            delta = "xor" if len(xored) < len(plain) else "none"
            frame = xored if delta == "xor" else plain
        else:
            frame = zstd.compress(_delta_encode(first, delta, cr).data, codec.level)
        if len(frame) > MAX_STORED_FRACTION * len(first) * row_bytes:
            return None  # (noise: the rest is not compressed in vain)
        sizes.append(len(frame))
        frames.append(frame)
    elif delta == "auto":
        delta = "none"  # (no rows: the reference names a delta a reader knows)
    group = max(1, SCRATCH_BYTES // max(cr * row_bytes, 1)) * cr  # rows a group
    for lo in range(cr, n, group):
        rows = _delta_encode(raw[lo:lo + group], delta, cr)
        got_sizes, got = zstd.compress_chunks(rows.reshape(-1).data, cr * row_bytes,
                                              codec.level)
        sizes += got_sizes
        frames += got
    table = np.empty(len(sizes) + 1, _U64)
    table[0] = 8 * (len(sizes) + 1)
    if sizes:
        table[1:] = table[0] + np.cumsum(sizes)
    stored = int(table[-1])
    if n and stored > MAX_STORED_FRACTION * n * row_bytes:
        return None
    return b"".join([table.tobytes(), *frames]), codec.to_json(delta, cr)


# -- decoding: the one read path of a compressed array --------------------------------------

def decode_rows(ref: Any, read: Callable[[int, int], Any], start: int, stop: int,
                out: np.ndarray, where: str, crc32: Callable[[Any], int] | None = None) -> None:
    """Decodes rows ``start:stop`` of a compressed ARRAY into ``out``.

    Args:
        ref: the checked :class:`~gym_recorder.format.ArrayRef` (its ``codec`` not None, its
            stored bytes checked to lie inside the file).
        read: ``read(offset, size)`` gives ``size`` bytes of the .bin at ``offset`` (a
            bytes-like object; it raises when the file is shorter).
        start, stop: the rows, ``0 <= start <= stop <= ref.shape[0]``.
        out: a C-contiguous array of ``(stop - start) * row bytes`` bytes, written in place.
        where: names the array, for messages.
        crc32: when given (verifying), the CRC-32 of the stored bytes is checked with it; the
            whole stored array is then read.

    Raises:
        FormatError: for a table, chunk or frame that is not as the format says, before any
            allocation of a size it declares; ChecksumError for a CRC-32 that differs.
        CodecUnavailableError: when no zstd binding is installed.
    """
    codec: Codec = ref.codec
    rows = ref.shape[0]
    row_bytes = ref.size // rows if rows else 0
    cr = codec.rows_for(row_bytes)  # (a parsed codec's own chunk_rows)
    n = chunk_count(rows, cr)
    table_bytes = 8 * (n + 1)
    if table_bytes > ref.stored:
        raise FormatError(f"{where}: {ref.stored} stored bytes cannot hold the chunk table of "
                          f"{n} chunks ({table_bytes} bytes)")
    if row_bytes * cr > MAX_CHUNK_BYTES:
        raise FormatError(f"{where}: chunks of {cr} rows of {row_bytes} bytes "
                          f"exceed {MAX_CHUNK_BYTES} bytes")
    dst = out.reshape(-1).view(np.uint8)
    if dst.size != (stop - start) * row_bytes:
        raise ValueError("decode_rows: 'out' does not hold the rows asked for")
    if stop <= start:
        if crc32 is None:
            return
    whole = crc32 is not None or (start == 0 and stop == rows)
    c0 = start // cr if stop > start else 0
    c1 = (stop - 1) // cr + 1 if stop > start else 0  # chunks c0..c1-1
    if whole:
        blob = np.frombuffer(read(ref.offset, ref.stored), np.uint8)
        if crc32 is not None and crc32(blob) != ref.crc32 and ref.crc32 is not None:
            from ..errors import ChecksumError
            raise ChecksumError(f"{where}: CRC-32 of the array's stored bytes does not match")
        table = blob[:table_bytes].view(_U64)
        base = 0
        if c1 <= c0:
            _check_table(table, 0, n, table_bytes, ref.stored, where)
            return
    else:
        table = np.frombuffer(read(ref.offset + 8 * c0, 8 * (c1 - c0 + 1)), _U64)
    # Offsets of chunks c0..c1 (table[i] is chunk c0 + i's start when read in part).
    offs = table if not whole else table[c0:c1 + 1]
    if whole:
        _check_table(table, 0, n, table_bytes, ref.stored, where)
    else:
        _check_table(offs, c0, n, table_bytes, ref.stored, where)
        lo_off, hi_off = int(offs[0]), int(offs[-1])
        blob = np.frombuffer(read(ref.offset + lo_off, hi_off - lo_off), np.uint8)
        base = lo_off
    zstd = _zstd()
    for i in range(c1 - c0):
        c = c0 + i
        a, b = int(offs[i]) - base, int(offs[i + 1]) - base
        chunk_rows = min(cr, rows - c * cr)
        expected = chunk_rows * row_bytes
        if expected > (b - a) * MAX_ZSTD_RATIO:
            raise FormatError(f"{where}: chunk {c} of {b - a} bytes would decode to {expected} "
                              f"bytes, more than zstd can ({MAX_ZSTD_RATIO}x): refused")
        # The chunk's rows that were asked for (r0..r1), written to their place in out; only
        # its first r1 rows are decoded.
        r0, r1 = max(start, c * cr) - c * cr, min(stop, c * cr + chunk_rows) - c * cr
        data = zstd.decompress(blob[a:b], expected, f"{where} chunk {c}",
                               None if crc32 is not None else r1 * row_bytes)
        got = np.frombuffer(data, np.uint8).reshape(-1, row_bytes) if row_bytes else \
            np.zeros((chunk_rows, 0), np.uint8)
        dest = dst[(c * cr + r0 - start) * row_bytes:(c * cr + r1 - start) * row_bytes]
        dest = dest.reshape(r1 - r0, row_bytes)
        if codec.delta == "none" or chunk_rows == 1 or r1 == 1:
            dest[...] = got[r0:r1]
        else:
            _undo_delta(got, r0, r1, dest, np.bitwise_xor if codec.delta == "xor" else np.add)


def _undo_delta(got: np.ndarray, r0: int, r1: int, dest: np.ndarray, op: Any) -> None:
    """Rows r0..r1 of a delta-coded chunk into ``dest``: row j = op(row j - 1, stored j).

    One whole-row operation a row (numpy's ``accumulate`` along the rows is many times
    slower on rows this wide)."""
    if r0 == 0:
        dest[0] = got[0]
        prev = dest[0]
    else:
        prev = got[0].copy()
        for j in range(1, r0):
            op(prev, got[j], out=prev)
        op(prev, got[r0], out=dest[0])
        prev = dest[0]
    for j in range(r0 + 1, r1):
        op(prev, got[j], out=dest[j - r0])
        prev = dest[j - r0]


def _check_table(offs: np.ndarray, c0: int, n: int, table_bytes: int, stored: int,
                 where: str) -> None:
    """Checks offsets of chunks c0.. (each starts after the table, ascends, ends inside)."""
    if not len(offs):
        return
    if c0 == 0 and int(offs[0]) != table_bytes:
        raise FormatError(f"{where}: the first chunk starts at {int(offs[0])}, expected "
                          f"{table_bytes} (right after the chunk table)")
    if c0 + len(offs) - 1 == n and int(offs[-1]) != stored:
        raise FormatError(f"{where}: the chunks end at {int(offs[-1])}, expected {stored} "
                          "(the stored bytes)")
    if len(offs) <= 8:  # (a few chunks, as one row's read has: Python ints are faster)
        values = offs.tolist()
        bad = values[0] < table_bytes or values[-1] > stored or any(
            b <= a for a, b in zip(values, values[1:]))
    else:
        bad = int(offs.min()) < table_bytes or int(offs.max()) > stored or bool(
            (np.diff(offs.astype(np.int64)) <= 0).any())
    if bad:
        raise FormatError(f"{where}: chunk offsets must ascend strictly within "
                          f"[{table_bytes}, {stored}]")
