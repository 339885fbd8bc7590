"""The .bin byte sink: arrays written one after another into an open .bin file, 8-byte aligned.

One job: :class:`BinSink` places each array at the next aligned offset (gathering small ones in
memory and writing them in large chunks) and returns its ARRAY reference (see "Batch" in the
format specification, :mod:`gym_recorder.format`). What to write, and the batch JSON document,
are :mod:`gym_recorder.record.encode`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..format import ALIGNMENT, fileio

__all__ = ["BinSink"]

# Arrays smaller than this are gathered in memory and written SMALL_WRITE_CHUNK bytes at a time.
SMALL_WRITE_BYTES = 1 << 16
SMALL_WRITE_CHUNK = 1 << 20
_ZEROS = bytes(ALIGNMENT)
# An ARRAY reference as JSON text; dtype strings and file names are plain ASCII (no escaping).
_REF_TEXT = ('{"__type":"ndarray","shape":[%s],"order":"C","dtype":"%s","npyfile":"%s",'
             '"npyoff":%d,"size":%d,"crc32":%d}')


class BinSink:
    """Writes arrays one after another into an open .bin file, aligned, and returns references.

    Small arrays are gathered in memory and written in large chunks: one system call per
    SMALL_WRITE_CHUNK bytes instead of one per array (each call also hands the GIL over).
    Call :meth:`finish` before the file is closed.
    """

    def __init__(self, f: Any, name: str) -> None:
        self.f = f
        self.name = name
        self.offset = 0
        self.codecs: set[str] = set()  # the codecs of the arrays written compressed
        self.raw_coded = 0  # the raw bytes of the arrays written compressed
        self.stored_coded = 0  # and their stored bytes
        self._pending: list[Any] = []
        self._pending_bytes = 0

    def _flush_pending(self) -> None:
        if self._pending:
            self.f.write(b"".join(self._pending))
            self._pending.clear()
            self._pending_bytes = 0

    def finish(self) -> None:
        """Writes what is still gathered in memory."""
        self._flush_pending()

    def put_block(self, arr: np.ndarray) -> tuple[int, memoryview | bytes]:
        """Writes a C-contiguous array at the next aligned offset, without a checksum.

        Returns:
            (offset, the written bytes), for the caller to checksum the pieces it references.
        """
        offset = self.offset
        pad = -offset % ALIGNMENT
        if pad:
            self._pending.append(_ZEROS[:pad])
            self._pending_bytes += pad
            offset += pad
        nbytes = arr.nbytes
        data = arr.data.cast("B") if nbytes else b""  # (arr.data is memoryview(arr))
        if nbytes < SMALL_WRITE_BYTES:
            self._pending.append(data)
            self._pending_bytes += nbytes
            if self._pending_bytes >= SMALL_WRITE_CHUNK:
                self._flush_pending()
        else:
            self._flush_pending()
            self.f.write(data)
        self.offset = offset + nbytes
        return offset, data

    def _put(self, arr: np.ndarray) -> tuple[np.ndarray, int, int]:
        """Writes one array at the next aligned offset; returns (array, offset, crc32)."""
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)  # (only when needed: it makes 0-d arrays 1-d)
        offset, data = self.put_block(arr)
        return arr, offset, fileio.crc32(data)

    def __call__(self, arr: np.ndarray) -> dict[str, Any]:
        """Writes an array; returns its reference as a dict."""
        arr, offset, crc = self._put(arr)
        return {"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                "dtype": arr.dtype.str, "npyfile": self.name, "npyoff": offset,
                "size": arr.nbytes, "crc32": crc}

    def text(self, arr: np.ndarray) -> str:
        """Writes an array; returns its reference as JSON text (the same as ``dumps(self(arr))``).

        Batches of many short episodes hold thousands of references: formatting them as text
        directly costs a fraction of building dicts and encoding them.
        """
        arr, offset, crc = self._put(arr)
        shape = arr.shape
        return _REF_TEXT % (",".join(map(str, shape)) if len(shape) != 1 else shape[0],
                            arr.dtype.str, self.name, offset, arr.nbytes, crc)
