"""zstd-compressed leaves (format version 2): every reader path reads a compressed recording
exactly as the raw recording of the same interaction, and hostile compressed bytes are refused.

The raw and the compressed recording are written at once by two recorders stacked on one env,
so they hold the very same steps.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401  (registers sample_envs/...)
from gym_recorder import (CodecUnavailableError, FormatError, RecordingReader,
                          RecordingVectorWrapper, RecordingWrapper, Zstd)
from gym_recorder.format import codecs
from gym_recorder.integrity import verify
from gym_recorder.integrations.export import export_npz
from gym_recorder.training.datasets import TransitionDataset
from gym_recorder.training.transitions import transitions

from hostile import batch_names, load_manifest, read_everything, rewrite_batch
from training_helpers import assert_tree

zstandard = pytest.importorskip("zstandard")
ale_py = pytest.importorskip("ale_py")
gym.register_envs(ale_py)

FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def record_both(raw_dir, coded_dir, env, steps, seed=0, compression="zstd", **kwargs):
    """Records ``steps`` random steps of ``env`` raw and compressed at once; returns the
    compressed recorder's directory."""
    env = RecordingWrapper(RecordingWrapper(env, raw_dir, **kwargs), coded_dir,
                           compression=compression, **kwargs)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        _, _, te, tr, _ = env.step(env.action_space.sample())
        if te or tr:
            env.reset()
    env.close()


def assert_same(raw_dir, coded_dir):
    """Every reader path gives the same arrays for both recordings."""
    with RecordingReader(raw_dir) as a, RecordingReader(coded_dir) as b:
        assert len(a) == len(b) > 0
        for i in range(len(a)):
            for name in FIELDS:
                assert_tree(getattr(b[i], name), getattr(a[i], name), f"{i} {name}")
        for ea, eb in zip(a, b):  # iteration (batch by batch)
            assert_tree(eb.observations, ea.observations, "iteration")
        assert_tree(b.column("observations"), a.column("observations"), "column")
        assert_tree(b.column("actions"), a.column("actions"), "column actions")
        ta, tb = transitions(a), transitions(b)
        assert_tree(tb.observations, ta.observations, "transitions")
        assert_tree(tb.next_obs, ta.next_obs, "transitions next")
        assert_tree(tb.action, ta.action, "transitions actions")
        rng = np.random.default_rng(0)
        for i in range(len(a)):
            ra, rb = a.episode_rows(i), b.episode_rows(i)
            n = len(ra) + 1
            for _ in range(5):
                lo = int(rng.integers(0, n))
                hi = int(rng.integers(lo, n + 1))
                assert_tree(rb.rows("observations", lo, hi), ra.rows("observations", lo, hi),
                            f"rows {i} {lo}:{hi}")
        for info in b.batches():  # read_batch (Ray's blocks read through it)
            b.read_batch(info)
    with RecordingReader(coded_dir, verify=True) as b:
        for _ in b:
            pass
    assert verify(coded_dir) == []
    da, db = TransitionDataset(raw_dir), TransitionDataset(coded_dir)
    assert len(da) == len(db)
    for k in np.random.default_rng(1).integers(0, len(da), 8).tolist():
        assert_tree(db[k]["obs"], da[k]["obs"], f"dataset {k}")
        assert_tree(db[k]["next_obs"], da[k]["next_obs"], f"dataset {k}")
    export_npz(raw_dir, raw_dir.parent / "raw.npz")
    export_npz(coded_dir, coded_dir.parent / "zstd.npz")
    with np.load(raw_dir.parent / "raw.npz") as za, np.load(coded_dir.parent / "zstd.npz") as zb:
        for key in za.files:
            if key != "writer" and "writer" not in key:
                assert np.array_equal(za[key], zb[key]), key


def test_ale_frames_read_back_equal(tmp_path):
    """Breakout frames in episodes cut into parts over several batches: every path reads the
    compressed recording as the raw one; it is far smaller; the format says version 2."""
    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    env = gym.make("ALE/Breakout-v5", max_episode_steps=90)
    record_both(raw, coded, env, 260, target_batch_bytes=4 << 20)
    assert_same(raw, coded)
    man = load_manifest(coded)
    assert man["version"] == 2 and load_manifest(raw)["version"] == 1
    assert len(man["batches"]) > 2
    for b in man["batches"]:
        assert b["codecs"] == ["zstd"] and "index" not in b
    size = lambda d: sum(f.stat().st_size for f in d.iterdir() if f.suffix == ".bin")  # noqa
    assert size(raw) > 50 * size(coded)
    doc = json.loads((coded / batch_names(coded, 0)[0]).read_text())
    ref = doc["episodes"][0]["observations"]
    assert doc["version"] == 2 and ref["codec"]["name"] == "zstd" and ref["stored"] < ref["size"]
    assert isinstance(doc["episodes"][0]["rewards"], dict) and "codec" not in \
        doc["episodes"][0]["rewards"]


@pytest.mark.parametrize("options", [Zstd(delta="none", chunk_rows=1), Zstd(delta="sub", chunk_rows=5, level=1),
                                     Zstd(delta="xor", chunk_rows=16, level=-1)])
def test_options_and_dict_observations(tmp_path, options):
    """A Dict observation with an image leaf and small leaves, each delta and chunk size."""
    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    env = gym.make("sample_envs/NestedDict-v0", episode_length=23)
    env = gym.wrappers.TransformObservation(
        env, lambda o: {"img": np.full((12, 10, 3), len(str(o)) % 7, np.uint8), "inner": o},
        gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (12, 10, 3), np.uint8),
                         "inner": env.observation_space}))
    record_both(raw, coded, env, 70, compression=options, target_batch_bytes=4096)
    assert_same(raw, coded)
    doc = json.loads((coded / batch_names(coded, 0)[0]).read_text())
    img = doc["episodes"][0]["observations"]["img"]
    assert img["codec"]["configuration"]["chunk_rows"] == options.chunk_rows


def test_vector_env(tmp_path):
    """A vector env's sub-env episodes, interleaved and in parts."""
    def make():
        return gym.make("sample_envs/Image-v0", height=20, width=16, episode_length=17)
    out = {}
    for name, comp in (("raw", None), ("zstd", "zstd")):
        envs = RecordingVectorWrapper(gym.vector.SyncVectorEnv([make, make, make]),
                                      tmp_path / name, compression=comp,
                                      target_batch_bytes=8192)
        envs.reset(seed=3)
        envs.action_space.seed(3)
        for _ in range(60):
            envs.step(envs.action_space.sample())
        envs.close()
        out[name] = tmp_path / name
    assert_same(out["raw"], out["zstd"])


def test_noise_stays_raw(tmp_path):
    """Frames that do not compress are stored raw: no bigger than the raw recording."""
    class Noise(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (32, 32, 3), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.np_random.integers(0, 256, (32, 32, 3), np.uint8), {}

        def step(self, a):
            return self.np_random.integers(0, 256, (32, 32, 3), np.uint8), 0.0, False, False, {}

    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    record_both(raw, coded, gym.wrappers.TimeLimit(Noise(), 30), 100)
    assert_same(raw, coded)
    size = lambda d: sum(f.stat().st_size for f in d.iterdir() if f.suffix == ".bin")  # noqa
    assert size(coded) <= size(raw)
    doc = json.loads((coded / batch_names(coded, 0)[0]).read_text())
    assert "codec" not in doc["episodes"][0]["observations"]


def test_batch_target_bounds_raw_bytes(tmp_path):
    """With compression the batch target still bounds the raw bytes a batch holds (what the
    buffer keeps in memory), not only the bytes written."""
    target = 1 << 20
    env = RecordingWrapper(gym.make("ALE/Pong-v5"), tmp_path, compression="zstd",
                           target_batch_bytes=target)
    env.reset(seed=0)
    for _ in range(300):
        env.step(0)
    env.close()
    with RecordingReader(tmp_path) as reader:
        for info in reader.batches():
            held = sum(p.observations.nbytes for p in reader.read_batch(info))
            assert held <= 3 * target


def _compressed_ref(d):
    doc = json.loads((d / batch_names(d, 0)[0]).read_text())
    return doc["episodes"][0]["observations"]


@pytest.fixture
def coded(tmp_path):
    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=40), d, compression=Zstd(chunk_rows=4))
    env.reset(seed=0)
    for _ in range(40):
        env.step(env.action_space.sample())
    env.close()
    return d


def _patch(d, offset, data):
    bin_path = d / batch_names(d, 0)[1]
    with open(bin_path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_unknown_codec_refused_by_name(coded):
    def mutate(doc):
        doc["episodes"][0]["observations"]["codec"]["name"] = "lz9"
    rewrite_batch(coded, mutate)
    with pytest.raises(FormatError, match="unknown codec 'lz9'"):
        read_everything(coded)


def test_unknown_codec_in_manifest_refused(coded):
    man = load_manifest(coded)
    man["batches"][0]["codecs"] = ["brotli"]
    from hostile import save_manifest
    save_manifest(coded, man)
    with pytest.raises(FormatError, match="unknown codec 'brotli'"):
        RecordingReader(coded)


def test_bomb_refused_before_allocation(coded):
    """A frame that claims 2**40 bytes, and a shape that claims more rows than the chunks
    can hold, are refused by size."""
    ref = _compressed_ref(coded)
    bomb = zstandard.ZstdCompressor(level=1).compress(bytes(4096))
    # A frame header claiming 2**40 bytes: the real frame's header with its size field patched.
    params = zstandard.get_frame_parameters(bomb)
    assert params.content_size == 4096
    big = bytearray(bomb)
    # Frame header: magic (4), descriptor (1), [window], size field; rewrite to an 8-byte size.
    big[4] = (big[4] & 0x3F) | 0xC0
    fcs_at = 5 + (0 if big[4] & 0x20 else 1)
    old_len = {0: 1 if bomb[4] & 0x20 else 0, 1: 2, 2: 4, 3: 8}[bomb[4] >> 6]
    big[fcs_at:fcs_at + old_len] = struct.pack("<Q", 1 << 40)
    assert zstandard.frame_content_size(bytes(big)) == 1 << 40
    table = struct.pack("<QQ", 16, 16 + len(big))

    def mutate(doc):
        r = doc["episodes"][0]["observations"]
        r["shape"] = [4, 16, 16, 3]
        r["size"] = 4 * 16 * 16 * 3
        r["codec"]["configuration"]["chunk_rows"] = 4
        r["stored"] = 16 + len(big)
        r["crc32"] = __import__("zlib").crc32(table + bytes(big))
    rewrite_batch(coded, mutate)
    _patch(coded, ref["npyoff"], table + bytes(big))
    with RecordingReader(coded) as reader:
        with pytest.raises(FormatError, match="declares"):
            reader[0].observations

    def claim(doc):  # rows far beyond what the stored chunks can decode to
        r = doc["episodes"][0]["observations"]
        r["shape"] = [1 << 30, 16, 16, 3]
        r["size"] = (1 << 30) * 768
        r["codec"]["configuration"]["chunk_rows"] = 1 << 16
    rewrite_batch(coded, claim)
    with RecordingReader(coded) as reader:
        with pytest.raises(FormatError):
            reader[0].observations


def test_fuzz_compressed_bytes(coded):
    """Random bytes flipped in the stored chunks and table: the reader raises FormatError or
    gives arrays of the right shape and dtype, never anything else; verify reports it."""
    ref = _compressed_ref(coded)
    path = coded / batch_names(coded, 0)[1]
    original = path.read_bytes()
    rng = np.random.default_rng(1)
    for trial in range(60):
        data = bytearray(original)
        for _ in range(int(rng.integers(1, 4))):
            at = ref["npyoff"] + int(rng.integers(0, ref["stored"]))
            data[at] ^= int(rng.integers(1, 256))
        path.write_bytes(bytes(data))
        try:
            with RecordingReader(coded) as reader:
                obs = reader[0].observations
            assert obs.shape == tuple(ref["shape"]) and obs.dtype == np.uint8
        except FormatError:
            pass
        assert verify(coded) != []
        with pytest.raises(FormatError):
            read_everything(coded, verify=True)
    path.write_bytes(original)
    assert verify(coded) == []


def test_table_out_of_bounds(coded):
    ref = _compressed_ref(coded)
    _patch(coded, ref["npyoff"] + 8, struct.pack("<Q", 1 << 62))
    with RecordingReader(coded) as reader:
        with pytest.raises(FormatError, match="chunk offsets"):
            reader[0].observations


def test_empty_and_zero_row_arrays(tmp_path):
    """Arrays of no rows encode and decode (numcodecs refuses size 0)."""
    block = np.zeros((0, 8, 8), np.uint8)
    blob, _ = codecs.encode_rows(block, Zstd())
    assert blob == struct.pack("<Q", 8)


def test_auto_delta_picks_per_entry():
    """XOR for frames that change little; none for rows that shift (stacked frames)."""
    rng = np.random.default_rng(0)
    background = rng.integers(0, 4, (64, 64), np.uint8) * 60
    still = np.repeat(background[None], 16, axis=0)
    still[rng.random(still.shape) < 0.05] += 1  # a few pixels change from frame to frame
    assert codecs.encode_rows(still, Zstd(delta="auto"))[1]["configuration"]["delta"] == "xor"
    frames = rng.integers(0, 4, (20, 32, 32), np.uint8) * 60
    stacked = np.stack([frames[t:t + 4] for t in range(16)])  # each row shifts the stack
    assert codecs.encode_rows(stacked, Zstd(delta="auto"))[1]["configuration"]["delta"] == "none"


def test_missing_binding_is_one_named_error(coded, monkeypatch):
    """Without a zstd binding, reading a compressed recording says what to install."""
    from gym_recorder.format import _zstd
    monkeypatch.setattr(_zstd, "_BINDING", None)
    for name in ("zstandard", "compression.zstd", "backports.zstd", "compression"):
        monkeypatch.setitem(sys.modules, name, None)
    with RecordingReader(coded) as reader:
        with pytest.raises(CodecUnavailableError, match=r"zstd.*pip install"):
            reader[0].observations
    with pytest.raises(CodecUnavailableError, match="zstd"):
        RecordingWrapper(gym.make("CartPole-v1"), os.fspath(coded) + "2", compression="zstd")


def test_bad_options():
    with pytest.raises(ValueError, match="delta"):
        Zstd(delta="rle")
    with pytest.raises(ValueError, match="chunk_rows"):
        Zstd(chunk_rows=0)
    with pytest.raises(ValueError, match="compression"):
        RecordingWrapper(gym.make("CartPole-v1"), "/nonexistent/x", compression="lz4")


def test_default_rows_per_chunk_follow_the_row_size():
    """About 800 KB a chunk: 8 raw ALE frames, 28 stacked 4x84x84 rows, at most 64."""
    assert Zstd().rows_for(210 * 160 * 3) == 8
    assert Zstd().rows_for(4 * 84 * 84) == 28
    assert Zstd().rows_for(64) == 64
    assert Zstd(chunk_rows=3).rows_for(64) == 3
    block = np.zeros((30, 4, 84, 84), np.uint8)
    assert codecs.encode_rows(block, Zstd())[1]["configuration"]["chunk_rows"] == 28


def test_index_beside_compressed_batches(tmp_path):
    """A directory with a raw writer (batches with an INDEX, read without their JSON) and a
    compressed one (no INDEX): transitions and column give each episode's rows exactly."""
    env = gym.make("sample_envs/Image-v0", height=20, width=16, episode_length=15)
    record_both(tmp_path, tmp_path, env, 100, target_batch_bytes=12000)
    mans = {m["version"]: m for m in (json.loads(p.read_text())
                                      for p in tmp_path.glob("*.manifest.json"))}
    assert sorted(mans) == [1, 2]
    assert all("index" in b for b in mans[1]["batches"])
    # (entries that do not compress are stored raw: their batches keep an index)
    assert all(("index" in b) != bool(b.get("codecs")) for b in mans[2]["batches"])
    assert any(b.get("codecs") for b in mans[2]["batches"])
    with RecordingReader(tmp_path) as reader:
        t = transitions(reader)
        obs = [reader[i].observations for i in range(len(reader))]
        assert_tree(t.observations, np.concatenate(obs), "transitions")
        assert_tree(reader.column("observations"), np.concatenate(obs), "column")
        assert len(reader.writers) == 2


def test_bench_compress_runs_and_prints_its_targets():
    """benchmarks/bench_compress.py in its smallest configuration: every target line is
    printed with ok or MISS (the figures of so few steps mean nothing)."""
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, os.path.join(repo, "benchmarks", "bench_compress.py"), "--steps", "40",
         "--cases", "Breakout", "Breakout-stacked", "noise", "--target", "1000000"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": repo})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for needle in ("Breakout ", "Breakout-stacked", "noise: zstd/raw bytes", "raw ALE frames:",
                   "stacked frames:", "peak RSS", "random frame", "delta xor  chunk  8"):
        assert needle in out, (needle, out)
    assert out.count(" ok") + out.count("MISS") >= 10


@pytest.mark.parametrize("writer, reader", [("zstandard", "backports.zstd"),
                                            ("backports.zstd", "zstandard")])
def test_bindings_read_each_others_frames(tmp_path, monkeypatch, writer, reader):
    """Recorded with one binding, read with the other (Python 3.14's compression.zstd is
    backports.zstd's code); each refuses a frame that lies about its size."""
    pytest.importorskip("backports.zstd")
    from gym_recorder.format import _zstd

    monkeypatch.setattr(_zstd, "_BINDING", _zstd._Zstd((writer,)))
    raw, coded = tmp_path / "raw", tmp_path / "zstd"
    env = gym.make("sample_envs/Image-v0", height=20, width=16, episode_length=25)
    record_both(raw, coded, env, 60, compression=Zstd(chunk_rows=4))
    monkeypatch.setattr(_zstd, "_BINDING", _zstd._Zstd((reader,)))
    assert _zstd._zstd().kind == reader
    assert_same(raw, coded)
    frame = zstandard.ZstdCompressor(level=1).compress(bytes(1000))
    with pytest.raises(FormatError, match="declares 1000 bytes"):
        _zstd._zstd().decompress(frame, 999, "test")
    with pytest.raises(FormatError):
        _zstd._zstd().decompress(frame + frame, 1000, "test")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(0, 40), tail=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       dtype=st.sampled_from(["|u1", "<i2", "<f4", "<u8", "|b1", "<c8"]),
       chunk_rows=st.integers(1, 9), delta=st.sampled_from(["none", "xor", "sub", "auto"]),
       seed=st.integers(0, 2 ** 16), cut=st.tuples(st.integers(0, 40), st.integers(0, 40)))
def test_rows_round_trip(rows, tail, dtype, chunk_rows, delta, seed, cut):
    """Any rows of any array, any chunking and delta: encode_rows then decode_rows of any row
    range gives exactly those rows back (or the array stays raw)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 3, (rows, *tail, np.dtype(dtype).itemsize), np.uint8)
    block = np.ascontiguousarray(raw).view(dtype).reshape(rows, *tail)
    if np.dtype(dtype).kind == "b":
        block = block.view(np.uint8) % 2 == 1
    coded = codecs.encode_rows(block, Zstd(chunk_rows=chunk_rows, delta=delta))
    if coded is None:
        return
    blob, conf = coded
    ref = codecs.parse_codec(conf, "t")

    class Ref:
        codec, shape, size, stored, offset, crc32 = ref, block.shape, block.nbytes, len(blob), 0, 0

    lo, hi = sorted(min(c, rows) for c in cut)
    out = np.empty((hi - lo, *block.shape[1:]), block.dtype)
    codecs.decode_rows(Ref, lambda o, s: blob[o:o + s], lo, hi, out, "t")
    assert out.tobytes() == block[lo:hi].tobytes()


def test_edits_on_a_compressed_recording(tmp_path: Path) -> None:
    """Deleting and restoring episodes of a compressed recording hides them and brings them back
    exactly; compact drops the deleted episodes' bytes and copies the others' compressed arrays
    as they are."""
    from gym_recorder import edit
    from gym_recorder.edit.compact import compact

    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("sample_envs/Image-v0"), d, compression="zstd",
                           target_batch_bytes=200_000)
    for seed in range(4):
        env.reset(seed=seed)
        for _ in range(12):
            env.step(env.action_space.sample())
    env.close()
    with RecordingReader(d) as reader:
        before = [reader[i].observations.copy() for i in range(len(reader))]
    edit.delete(d, [1, 2])
    with RecordingReader(d) as reader:
        assert len(reader) == len(before) - 2
        assert np.array_equal(reader[1].observations, before[3])
    edit.restore(d, all=True)
    with RecordingReader(d) as reader:
        assert [np.array_equal(reader[i].observations, b) for i, b in enumerate(before)] == \
            [True] * len(before)
    assert verify(d) == []
    edit.delete(d, [1, 2])
    size = sum(f.stat().st_size for f in d.iterdir())
    result = compact(d, grace=0)
    assert len(result.replaced) == 1 and result.freed > 0
    assert sum(f.stat().st_size for f in d.iterdir()) < size
    with RecordingReader(d) as reader:
        kept = [before[0], before[3]]
        assert len(reader) == 2
        for i, b in enumerate(kept):
            assert np.array_equal(reader[i].observations, b)
        assert np.array_equal(reader.column("observations"), np.concatenate(kept))
        batches = reader.writers[0]["manifest"]["batches"]
        assert any(b.get("codecs") == ["zstd"] for b in batches)
    assert verify(d) == []


def test_noise_is_stored_raw_after_a_probe_and_repeated_noise_still_compresses() -> None:
    """Big rows of noise are stored raw from a two-row probe (not the first chunk compressed both
    ways); a row of noise repeated from row to row compresses by XOR and is kept compressed;
    noise in a band of otherwise flat frames is compressed too."""
    rng = np.random.default_rng(0)
    codec = codecs.resolve_compression("zstd")
    noise = rng.integers(0, 256, (24, 160, 160, 3), np.uint8)  # rows the probe looks at
    assert codecs.encode_rows(noise, codec) is None
    repeated = np.repeat(noise[:1], 24, axis=0)
    stored, meta = codecs.encode_rows(repeated, codec)
    # (each chunk of about 10 rows starts with its noise row: about 8x)
    assert meta["configuration"]["delta"] == "xor" and len(stored) * 5 < repeated.nbytes
    # (without delta coding too: zstd finds the row again in the next one)
    assert codecs.encode_rows(repeated, codecs.resolve_compression(Zstd(delta="none"))) \
        is not None
    compressible = np.zeros((24, 160, 160, 3), np.uint8)
    compressible[:, 10:20] = noise[:, 10:20]  # noise in a band: the probe lets it compress
    assert codecs.encode_rows(compressible, codec) is not None
