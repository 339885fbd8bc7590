"""The zstd binding of :mod:`gym_recorder.format.codecs`, imported lazily on first use:
``zstandard``, else the standard library's ``compression.zstd`` (Python 3.14), else
``backports.zstd``; with the checks the format needs (one frame, its declared size, no more)."""

from __future__ import annotations

import array
import threading
from typing import Any

from ..errors import CodecUnavailableError, FormatError, install_hint

__all__ = ["codec_available"]


# The bindings tried, in order: zstandard (the zstd extra's; its stream reader decodes the first
# rows of a chunk alone, about twice as fast for a random row), then the standard library's.
BINDINGS = ("zstandard", "compression.zstd", "backports.zstd")


class _Zstd:
    """One zstd binding's compress / decompress, with the checks the format needs."""

    def __init__(self, modules: tuple[str, ...] = BINDINGS) -> None:
        self._local = threading.local()
        self.kind = ""
        self._std: Any = None
        self._zs: Any = None
        for module in modules:
            try:
                found = __import__(module, fromlist=["compress"])
            except ImportError:
                continue
            if module == "zstandard":
                self._zs = found
            else:
                self._std = found
            self.kind = module
            return
        raise CodecUnavailableError(
            "this recording stores zstd-compressed arrays (or compression was asked for), "
            "which needs a zstd binding: " + install_hint("zstd")
            + " (the zstandard or backports.zstd package)")

    def _compressor(self, level: int) -> Any:
        """This thread's zstandard compressor of ``level`` (one a thread: they are not
        thread-safe)."""
        comps = getattr(self._local, "comps", None)
        if comps is None:
            comps = self._local.comps = {}
        comp = comps.get(level)
        if comp is None:
            comp = comps[level] = self._zs.ZstdCompressor(level=level, write_content_size=True)
        return comp

    def compress(self, data: Any, level: int) -> bytes:
        if self._zs is not None:
            out: bytes = self._compressor(level).compress(data)
            return out
        res: bytes = self._std.compress(data, level=level)
        return res

    def compress_chunks(self, data: memoryview, step: int, level: int
                        ) -> tuple[list[int], list[Any]]:
        """Compresses ``data[i * step:(i + 1) * step]`` for each i (the last piece shorter),
        each into one zstd frame, the same bytes as :meth:`compress` of each piece.

        Returns:
            (each frame's size, bytes-like objects whose concatenation is the frames in order).

        With ``zstandard``, one call compresses every piece with the GIL released
        (``multi_compress_to_buffer``): the writer thread hands the GIL back and forth once
        for a group of chunks, not once a chunk. The other bindings compress piece by piece.
        """
        total = len(data)
        if self._zs is None or total <= step:
            frames = [self.compress(data[lo:lo + step], level) for lo in range(0, total, step)]
            return [len(f) for f in frames], frames
        starts = range(0, total, step)
        segments = array.array("Q", [0]) * (2 * len(starts))
        segments[0::2] = array.array("Q", starts)
        segments[1::2] = array.array("Q", [min(step, total - lo) for lo in starts])
        out = self._compressor(level).multi_compress_to_buffer(
            self._zs.BufferWithSegments(data, segments.tobytes()))
        frames = [out[i] for i in range(len(out))]
        return [len(f) for f in frames], frames

    def decompress(self, data: Any, expected: int, where: str, want: int | None = None
                   ) -> bytes:
        """Decodes one frame of exactly ``expected`` bytes; refuses anything else. With
        ``want`` < ``expected``, decodes only the frame's first ``want`` bytes (a row near
        the start of a chunk)."""
        want = expected if want is None else want
        try:
            if self._zs is not None:
                declared = self._zs.frame_content_size(data)
                if declared != expected:
                    raise FormatError(f"{where}: a zstd frame declares {declared} bytes "
                                      f"(-1: unknown), expected {expected}")
                dec = getattr(self._local, "dec", None)
                if dec is None:
                    dec = self._local.dec = self._zs.ZstdDecompressor()
                if want < expected:
                    with dec.stream_reader(data) as reader:
                        out: bytes = reader.read(want)
                        while len(out) < want:
                            more = reader.read(want - len(out))
                            if not more:
                                break
                            out += more
                else:
                    out = dec.decompress(data, max_output_size=expected, allow_extra_data=False)
            else:
                info = self._std.get_frame_info(data)
                if info.decompressed_size != expected:
                    raise FormatError(f"{where}: a zstd frame declares "
                                      f"{info.decompressed_size} bytes, expected {expected}")
                d = self._std.ZstdDecompressor()
                out = d.decompress(data, max_length=want)
                if want == expected and (not d.eof or d.unused_data):
                    raise FormatError(f"{where}: a chunk is not exactly one zstd frame")
        except FormatError:
            raise
        except Exception as e:  # the binding's own error: corrupt data
            raise FormatError(f"{where}: zstd chunk does not decode: {e}") from None
        if len(out) != want:
            raise FormatError(f"{where}: a zstd chunk decoded to {len(out)} bytes, "
                              f"expected {want}")
        return out


_BINDING: _Zstd | None = None
_BINDING_LOCK = threading.Lock()


def _zstd() -> _Zstd:
    global _BINDING
    if _BINDING is None:
        with _BINDING_LOCK:
            if _BINDING is None:
                _BINDING = _Zstd()
    return _BINDING


def codec_available() -> bool:
    """True when a zstd binding can be imported."""
    try:
        _zstd()
    except CodecUnavailableError:
        return False
    return True
