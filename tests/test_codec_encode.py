"""The encoder's stored bytes, chunk by chunk: each chunk's rows delta-coded within the chunk
and compressed alone into one zstd frame, whichever way the encoder gets there (a group of
chunks delta-coded in a reused scratch buffer, several chunks compressed in one call of the
binding, one thread or several at once). Readers (Python, C, JavaScript) rely on exactly this.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gym_recorder import Zstd
from gym_recorder.format import _zstd, codecs

pytest.importorskip("zstandard")


def frames(rows: int, seed: int = 0) -> np.ndarray:
    """Game-like frames: a still background and a block moving over it."""
    rng = np.random.default_rng(seed)
    out = np.repeat(rng.integers(0, 4, (1, 30, 24, 3), np.uint8) * 60, rows, axis=0)
    for t in range(rows):
        out[t, t % 26:t % 26 + 4, 5:9] = 255
    return out


def reference(block: np.ndarray, chunk_rows: int, delta: str, level: int) -> bytes:
    """The stored bytes as the format describes them, one chunk at a time."""
    rows = block.reshape(len(block), block[0:1].size).view(np.uint8)
    chunks = []
    for lo in range(0, len(rows), chunk_rows):
        chunk = rows[lo:lo + chunk_rows].copy()
        for j in range(len(chunk) - 1, 0, -1):
            if delta == "xor":
                chunk[j] ^= chunk[j - 1]
            elif delta == "sub":
                chunk[j] -= chunk[j - 1]
        chunks.append(_zstd._zstd().compress(chunk.tobytes(), level))
    table = np.cumsum([8 * (len(chunks) + 1)] + [len(c) for c in chunks]).astype("<u8")
    return table.tobytes() + b"".join(chunks)


def decoded(blob: bytes, conf: dict, block: np.ndarray) -> np.ndarray:
    codec = codecs.parse_codec(conf, "test")

    class Ref:
        shape, size, stored, offset, crc32 = block.shape, block.nbytes, len(blob), 0, None
    Ref.codec = codec
    out = np.empty_like(block)
    buf = np.frombuffer(blob, np.uint8)
    codecs.decode_rows(Ref, lambda o, s: buf[o:o + s], 0, len(block), out, "test")
    return out


@pytest.mark.parametrize("binding", ["zstandard", "backports.zstd"])
@pytest.mark.parametrize("delta", ["xor", "sub", "none", "auto"])
@pytest.mark.parametrize("rows", [0, 1, 4, 5, 6, 37])
def test_each_chunk_is_compressed_alone(monkeypatch, binding, delta, rows):
    """Groups of three chunks through the scratch buffer (and one compress call a group):
    the bytes are those of each chunk compressed alone, and decode to the rows."""
    pytest.importorskip(binding)
    monkeypatch.setattr(_zstd, "_BINDING", _zstd._Zstd((binding,)))
    block = frames(rows) if rows else frames(1)[:0]
    monkeypatch.setattr(codecs, "SCRATCH_BYTES", 3 * 5 * block[0:1].nbytes + 7)
    blob, conf = codecs.encode_rows(block, Zstd(level=1, chunk_rows=5, delta=delta))
    used = conf["configuration"]["delta"]
    assert used in codecs.DELTAS and (delta == "auto" or used == delta)
    assert blob == reference(block, 5, used, 1)
    assert np.array_equal(decoded(blob, conf, block), block)


def test_default_scratch_groups_on_atari_sized_frames():
    """Frames of 210x160x3 in the default chunks (8 rows) and groups (about 4 MB): more than
    one group, the same bytes as chunk by chunk."""
    rng = np.random.default_rng(1)
    block = np.repeat(rng.integers(0, 2, (1, 210, 160, 3), np.uint8) * 90, 90, axis=0)
    block[np.arange(90), np.arange(90) % 200, 7] = 255
    blob, conf = codecs.encode_rows(block, Zstd())
    assert conf["configuration"] == {"level": 3, "chunk_rows": 8, "delta": "xor"}
    assert 90 * block[0].nbytes > 2 * codecs.SCRATCH_BYTES
    assert blob == reference(block, 8, "xor", 3)


def test_threads_encode_at_once():
    """Each thread has its own scratch buffer: four threads encoding different rows at once
    each get their own rows' bytes."""
    blocks = [frames(23, seed) for seed in range(4)]
    codec = Zstd(level=1, chunk_rows=3, delta="xor")
    expected = [reference(b, 3, "xor", 1) for b in blocks]
    wrong: list[int] = []

    def work(k: int) -> None:
        for _ in range(30):
            if codecs.encode_rows(blocks[k], codec)[0] != expected[k]:
                wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
