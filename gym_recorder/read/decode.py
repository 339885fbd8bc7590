"""Decoding batches: a batch JSON checked, its entries' array references checked against the
.bin, and their bytes read into arrays.

Everything here reads through a :class:`~gym_recorder.read.storage.Storage`. A batch JSON is checked
once when parsed (:func:`~gym_recorder.read.batchfile.parse_batch`); an entry is planned
(:meth:`Decoder.plan_part`: its structure checked and its references collected, nothing read),
then read (:meth:`Decoder.load_part`, in :mod:`~gym_recorder.read.entries`) into a
:class:`~gym_recorder.read.entries.PartData`. Arrays are read into memory the arrays own, or
handed out as views of bytes read once for a whole batch.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ChecksumError, FormatError
from ..format import ArrayRef, parse_ref
from ..format import codecs as _codecs
from ..format import fileio as _fileio
from .entries import EntryReading
from .pages import PAGES
from .storage import Storage

if TYPE_CHECKING:  # (a parsed batch: only its attributes are used here)
    from .batchfile import Batch

__all__ = ["Decoder", "gc_paused"]

# Read an episode's arrays in one read when the span they cover is at most this much larger than
# their own bytes (else array by array, so a hostile layout cannot make us read a whole file).
SPAN_SLACK_BYTES = 1 << 20
# Arrays stay views of the span read for them unless it is more than this many times their bytes.
SPAN_KEEP_FACTOR = 2
# The largest Unicode code point; numpy's <U arrays fail hard (SystemError) on anything above.
MAX_CODE_POINT = 0x10FFFF


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

class Decoder(EntryReading):
    """Reads and checks the arrays of a recording's batches, through its storage.

    Args:
        storage: where the bytes come from.
        verify: check every array's CRC-32 (raises :class:`ChecksumError`).
    """

    def __init__(self, storage: Storage, verify: bool = False) -> None:
        self._storage = storage
        self._verify = verify
        self.pages = PAGES  # (large arrays handed out: see read.pages)

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
