"""An array reference ("Array reference" in :mod:`gym_recorder.format`), checked in one place:
its file, dtype, shape, offset, alignment, size and codec, before any byte of the .bin is read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError
from .codecs import MAX_ZSTD_RATIO, Codec, parse_codec
from .constants import ALIGNMENT, MAX_DIM, MAX_NDIM
from .dtypes import parse_dtype
from .names import check_plain_name

__all__ = ["ArrayRef", "parse_ref", "check_int"]


def check_int(value: object, where: str, what: str, low: int = 0, high: int | None = None) -> int:
    if type(value) is not int or value < low or (high is not None and value > high):
        bound = f" and <= {high}" if high is not None else ""
        raise FormatError(f"{where}: {what} must be an integer >= {low}{bound}, got {value!r}")
    return value


class ArrayRef:
    """One validated array reference: where an array's bytes are and how to view them.

    Attributes:
        file: plain file name of the .bin file in the recording directory.
        dtype: the array's dtype.
        shape: the array's shape.
        offset: byte offset of the first element in the file.
        size: number of bytes.
        crc32: zlib CRC-32 of the bytes, or None when the writer did not record one.
    """

    __slots__ = ("file", "dtype", "shape", "offset", "size", "crc32", "codec", "stored")

    def __init__(self, file: str, dtype: np.dtype, shape: tuple[int, ...], offset: int,
                 size: int, crc32: int | None, codec: Codec | None = None,
                 stored: int | None = None) -> None:
        self.file = file
        self.dtype = dtype
        self.shape = shape
        self.offset = offset
        self.size = size  # the array's bytes (decoded)
        self.crc32 = crc32  # of the stored bytes
        self.codec = codec  # None: raw, the stored bytes are the array's
        self.stored = size if stored is None else stored  # bytes in the file at offset

    @property
    def end(self) -> int:
        """The offset after the array's stored bytes (a reader checks it against the file)."""
        return self.offset + self.stored


def parse_ref(obj: dict[str, Any], where: str, *, aligned: bool = True,
              file: str | None = None) -> ArrayRef:
    """Validates an array reference read from a batch file.

    Checks everything that does not need the .bin file itself: the file name is plain, the dtype
    is allowed, the shape is sane, the offset is aligned and the size matches shape and dtype.
    The caller checks ``offset + size`` against the file size. (Readers validate every
    reference they use, so the checks are written to cost little when they pass.)

    Args:
        obj: the decoded JSON object with ``"__type": "ndarray"``.
        where: names the file and position, for error messages.
        aligned: require ``npyoff % ALIGNMENT == 0`` (legacy files are read without it).
        file: when given, ``npyfile`` must be this (already checked) file name.

    Raises:
        FormatError: naming ``where`` and what is wrong.
    """
    get: Callable[..., Any] = obj.get  # JSON values: checked one by one below
    if get("order", "C") != "C":
        raise FormatError(f"{where}: only C order is supported, got {get('order')!r}")
    name = get("npyfile")
    if file is None or name != file:
        check_plain_name(name, where)
        if file is not None:
            raise FormatError(f"{where}: npyfile {name!r} is not this batch's {file!r}")
    dtype = parse_dtype(get("dtype"), where)
    shape = get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise FormatError(f"{where}: shape must be a list of at most {MAX_NDIM} integers")
    count = nonzero = 1
    for dim in shape:
        if type(dim) is not int or not 0 <= dim <= MAX_DIM:
            check_int(dim, where, "every dimension", 0, MAX_DIM)
        count *= dim
        if dim:
            nonzero *= dim
    offset = get("npyoff")
    if type(offset) is not int or offset < 0:
        check_int(offset, where, "npyoff")
    if aligned and offset % ALIGNMENT:
        raise FormatError(f"{where}: npyoff {offset} is not a multiple of {ALIGNMENT}")
    size = get("size")
    if type(size) is not int or size < 0:
        check_int(size, where, "size")
    # A zero dimension makes any shape empty, but numpy still refuses shapes whose other
    # dimensions overflow its index type: bound the bytes of the non-zero dimensions too.
    if nonzero * dtype.itemsize > MAX_DIM:
        raise FormatError(f"{where}: shape {shape} of {dtype.str} has too many elements")
    expected = count * dtype.itemsize
    if size != expected:
        raise FormatError(
            f"{where}: size {size} does not match shape {shape} of {dtype.str} ({expected} bytes)"
        )
    crc = get("crc32")
    if crc is not None and (type(crc) is not int or not 0 <= crc <= 0xFFFFFFFF):
        check_int(crc, where, "crc32", 0, 0xFFFFFFFF)
    codec = get("codec")
    if codec is None:
        return ArrayRef(name, dtype, tuple(shape), offset, size, crc)
    # A compressed array (version 2, see "Compressed arrays").
    parsed = parse_codec(codec, where)
    stored = get("stored")
    if type(stored) is not int or stored < 8:
        check_int(stored, where, "stored", 8)
    if not shape:
        raise FormatError(f"{where}: a compressed array must have rows (shape of at least 1 "
                          "dimension)")
    if crc is None:
        raise FormatError(f"{where}: a compressed array must have a crc32")
    if size > stored * MAX_ZSTD_RATIO:  # (no zstd frame decodes to more: before allocating)
        raise FormatError(f"{where}: {stored} stored bytes cannot decode to {size} bytes")
    return ArrayRef(name, dtype, tuple(shape), offset, size, crc, parsed, stored)
