"""The viewer's decoder (gym_recorder/integrations/viewer/decode.js) under node: equal to what numpy reads.

Recordings are written by a real RecordingWrapper over an env whose Dict observation holds a Box
of every numeric dtype (full-range values, NaN, infinities, -0.0) and whose infos carry unicode
strings; big-endian, byte-string, complex and unaligned (legacy) references are written by hand
from the format's spec. node decodes every reference of every batch; the test compares value by
value with ``np.fromfile``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from needs import need_program

from gym_recorder import RecordingWrapper
from gym_recorder.integrations.view import VIEWER_DIR

NUMERIC = ["|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"]

RUNNER = """
import { readFileSync } from "node:fs";
import { decodeArray } from "%s";
const jobs = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = [];
const enc = (v) => typeof v === "bigint" ? v.toString() : typeof v === "string" ? v
  : Number.isNaN(v) ? "nan" : v === Infinity ? "inf" : v === -Infinity ? "-inf" : Object.is(v, -0) ? "-0" : v;
for (const job of jobs) {
  const bytes = readFileSync(job.file);
  const all = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const base = job.base || 0;
  const buf = job.end === undefined ? all : all.slice(base, job.end);
  try {
    const r = decodeArray(job.ref, buf, base);
    out.push({ dtype: r.dtype, shape: r.shape, kind: r.data.constructor.name, complex: !!r.complex,
               data: Array.from(r.data, enc) });
  } catch (e) {
    out.push({ error: e.constructor.name + ": " + e.message });
  }
}
console.log(JSON.stringify(out));
"""

# What decodeArray's data must be for each kind of dtype.
TYPED = {"b": "Uint8Array", "i1": "Int8Array", "u1": "Uint8Array", "i2": "Int16Array",
         "u2": "Uint16Array", "i4": "Int32Array", "u4": "Uint32Array", "i8": "BigInt64Array",
         "u8": "BigUint64Array", "f2": "Float32Array", "f4": "Float32Array",
         "f8": "Float64Array", "c8": "Float32Array", "c16": "Float64Array", "U": "Array",
         "S": "Array"}


def run_node(tmp_path: Path, jobs: list[dict]) -> list[dict]:
    node = need_program("node", "apt-get install nodejs")
    runner = tmp_path / "runner.mjs"
    runner.write_text(RUNNER % (Path(VIEWER_DIR) / "decode.js").as_uri())
    job_file = tmp_path / "jobs.json"
    job_file.write_text(json.dumps(jobs))
    done = subprocess.run([node, str(runner), str(job_file)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def expected_values(arr: np.ndarray) -> list:
    flat = arr.reshape(-1)
    if arr.dtype.kind in "US":
        return [x.decode("latin-1") if isinstance(x, bytes) else str(x) for x in flat.tolist()]
    if arr.dtype.kind == "c":
        flat = np.stack([flat.real, flat.imag], axis=1).reshape(-1)
    if arr.dtype.kind in "fc":
        out = []
        for x in flat.astype(np.float64).tolist():
            out.append("nan" if x != x else "inf" if x == np.inf else "-inf" if x == -np.inf
                       else "-0" if x == 0 and np.signbit(x) else x)
        return out
    if arr.dtype.kind == "b":
        return [int(x) for x in flat.tolist()]
    if arr.dtype.itemsize == 8:
        return [str(x) for x in flat.tolist()]
    return flat.tolist()


def check_against_numpy(directory: Path, jobs: list[dict], results: list[dict]) -> None:
    for job, got in zip(jobs, results, strict=True):
        ref = job["ref"]
        assert "error" not in got, (ref, got)
        arr = np.fromfile(directory / ref["npyfile"], dtype=np.dtype(ref["dtype"]),
                          count=int(np.prod(ref["shape"])), offset=ref["npyoff"]).reshape(ref["shape"])
        assert got["shape"] == list(arr.shape)
        assert got["dtype"] == ref["dtype"]
        code = arr.dtype.kind if arr.dtype.kind in "bUS" else f"{arr.dtype.kind}{arr.dtype.itemsize}"
        assert got["kind"] == TYPED[code], (ref["dtype"], got["kind"])
        assert got["complex"] == (arr.dtype.kind == "c")
        assert got["data"] == expected_values(arr), ref["dtype"]


def refs_in(obj, out: list) -> list:
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            out.append(obj)
        else:
            for v in obj.values():
                refs_in(v, out)
    elif isinstance(obj, list):
        for v in obj:
            refs_in(v, out)
    return out


class EveryDtypeEnv(gym.Env):
    """A Dict observation with a Box of every numeric dtype; infos with unicode strings."""

    def __init__(self) -> None:
        boxes = {}
        for i, dt in enumerate(NUMERIC):
            dtype = np.dtype(dt)
            if dtype.kind == "b":
                boxes[f"k{i:02d}_{dtype.name}"] = spaces.Box(0, 1, (2, 3), dtype=dtype)
            elif dtype.kind == "f":
                boxes[f"k{i:02d}_{dtype.name}"] = spaces.Box(-np.inf, np.inf, (2, 3), dtype=dtype)
            else:
                info = np.iinfo(dtype)
                boxes[f"k{i:02d}_{dtype.name}"] = spaces.Box(info.min, info.max, (2, 3), dtype=dtype)
        self.observation_space = spaces.Dict(boxes)
        self.action_space = spaces.Discrete(3)
        self.t = 0

    def _obs(self) -> dict:
        rng = self.np_random
        obs = {}
        for key, box in self.observation_space.spaces.items():
            dtype = box.dtype
            if dtype.kind == "b":
                v = rng.integers(0, 2, box.shape).astype(bool)
            elif dtype.kind == "f":
                v = (rng.normal(size=box.shape) * 10.0 ** rng.integers(-6, 4, box.shape)).astype(dtype)
                v.flat[self.t % 6] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dtype).max,
                                      np.finfo(dtype).tiny][self.t % 6]
            else:
                info = np.iinfo(dtype)
                v = rng.integers(info.min, info.max, box.shape, dtype=dtype, endpoint=True)
                v.flat[0] = info.min if self.t % 2 else info.max
            obs[key] = v
        return obs

    def _info(self) -> dict:
        return {"label": np.array([f"step{self.t}", "ünï😀", ""]), "t": np.int16(self.t)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), self._info()

    def step(self, action):
        self.t += 1
        return self._obs(), float(action) - 0.5, self.t >= 7, False, self._info()


def test_decode_equals_numpy_on_every_dtype_of_a_recording(tmp_path):
    rec = tmp_path / "rec"
    env = RecordingWrapper(EveryDtypeEnv(), rec)
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()
    jobs = []
    for batch in sorted(rec.glob("*.ep*.json")):
        for ref in refs_in(json.loads(batch.read_text())["episodes"], []):
            jobs.append({"ref": ref, "file": str(rec / ref["npyfile"])})
    dtypes = {job["ref"]["dtype"] for job in jobs}
    assert set(NUMERIC) <= dtypes and any(d.startswith("<U") for d in dtypes), dtypes
    results = run_node(tmp_path, jobs)
    check_against_numpy(rec, jobs, results)
    # Ranges: the same refs decoded from a buffer that holds only their own bytes.
    ranged = [dict(job, base=job["ref"]["npyoff"], end=job["ref"]["npyoff"] + job["ref"]["size"])
              for job in jobs]
    check_against_numpy(rec, ranged, run_node(tmp_path, ranged))


def write_by_hand(directory: Path, arrays: list[np.ndarray], aligned: bool = True) -> list[dict]:
    """Lays arrays into one .bin as the spec says, returning their references."""
    directory.mkdir(exist_ok=True)
    name = "hand.ep000000000.bin"
    data = bytearray()
    refs = []
    for arr in arrays:
        if aligned:
            data += b"\0" * (-len(data) % 8)
        else:
            data += b"\x7f"  # legacy files were not aligned: every array at an odd offset
        refs.append({"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                     "dtype": arr.dtype.str, "npyfile": name, "npyoff": len(data),
                     "size": arr.nbytes})
        data += arr.tobytes()
    (directory / name).write_bytes(bytes(data))
    return refs


def hand_arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = []
    for dt in NUMERIC:
        base = np.dtype(dt)
        for order in "<>":
            dtype = base.newbyteorder(order) if base.itemsize > 1 else base
            if base.kind == "b":
                v = rng.integers(0, 2, (3, 4)).astype(bool)
            elif base.kind == "f":
                v = rng.normal(size=(3, 4)).astype(base)
                v.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(base).smallest_subnormal]
            else:
                info = np.iinfo(base)
                v = rng.integers(info.min, info.max, (3, 4), dtype=base, endpoint=True)
            out.append(v.astype(dtype))
    out += [np.array([["héllo", "😀x"], ["", "abc"]], dtype="<U5"),
            np.array(["ß", "zz"], dtype=">U3"),
            np.array([b"ab", b"\x00\x01", b"xyz"], dtype="S3"),
            (rng.normal(size=4) + 1j * rng.normal(size=4)).astype("<c16"),
            (rng.normal(size=3) + 1j * rng.normal(size=3)).astype(">c8"),
            np.zeros((0, 3), dtype="<f8"), np.array(5.5, dtype=">f8")]
    return out


@pytest.mark.parametrize("aligned", [True, False])
def test_decode_hand_written_refs_both_byte_orders(tmp_path, aligned):
    arrays = hand_arrays()
    refs = write_by_hand(tmp_path / "hand", arrays, aligned)
    assert {r["dtype"][0] for r in refs} >= {"<", ">", "|"}
    jobs = [{"ref": r, "file": str(tmp_path / "hand" / r["npyfile"])} for r in refs]
    check_against_numpy(tmp_path / "hand", jobs, run_node(tmp_path, jobs))


def test_decode_legacy_dtype_names(tmp_path):
    arr = np.arange(12, dtype="<f4").reshape(3, 4)
    (ref,) = write_by_hand(tmp_path / "leg", [arr])
    ref["dtype"] = "float32"  # gym-recording wrote str(dtype)
    del ref["order"]
    (got,) = run_node(tmp_path, [{"ref": ref, "file": str(tmp_path / "leg" / ref["npyfile"])}])
    assert got["kind"] == "Float32Array" and got["data"] == arr.reshape(-1).tolist()


def test_decode_errors_name_the_problem(tmp_path):
    (ref,) = write_by_hand(tmp_path / "bad", [np.arange(4, dtype="<i4")])
    file = str(tmp_path / "bad" / ref["npyfile"])
    cases = {
        "out of bounds": dict(ref, npyoff=8),
        "unknown dtype": dict(ref, dtype="<q4"),
        "unknown dtype \"object\"": dict(ref, dtype="object"),
        "size 8 is not prod(shape)": dict(ref, size=8),
        "npyoff must be a non-negative integer": dict(ref, npyoff=-8),
        "shape[0] must be a non-negative integer": dict(ref, shape=[1.5]),
        "not an array reference": {"shape": [4]},
    }
    results = run_node(tmp_path, [{"ref": r, "file": file} for r in cases.values()]
                       + [{"ref": ref, "file": file, "base": 8, "end": 16}])
    for want, got in zip(list(cases) + ["out of bounds"], results, strict=True):
        assert got.get("error", "").startswith("Error: "), got
        assert want in got["error"], (want, got)


class _CompressibleDict(gym.Env):
    """A Dict observation of leaves worth compressing (64 bytes a row or more), of several
    dtypes, changing a little each step."""

    observation_space = spaces.Dict({
        "image": spaces.Box(0, 255, (16, 12, 3), np.uint8),
        "f32": spaces.Box(-np.inf, np.inf, (40,), np.float32),
        "i16": spaces.Box(-1000, 1000, (8, 8), np.int16),
        "u64": spaces.Box(0, 2 ** 63, (12,), np.uint64),
    })
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        t = self.t
        image = np.zeros((16, 12, 3), np.uint8)
        image[t % 16, :, 0] = 255
        return {"image": image, "f32": np.linspace(0, t, 40, dtype=np.float32),
                "i16": np.full((8, 8), t - 7, np.int16),
                "u64": np.arange(12, dtype=np.uint64) * np.uint64(2 ** 40 + t)}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 37, {}


@pytest.mark.parametrize("delta", ["none", "xor", "sub"])
def test_compressed_references(tmp_path, delta):
    """Compressed arrays (format version 2) decode in node (vendored fzstd) to the bytes the
    Python reader decodes; an unknown codec and a lying frame size are refused."""
    pytest.importorskip("zstandard")
    from gym_recorder import Zstd
    from gym_recorder.format import parse_ref
    from gym_recorder.format.codecs import decode_rows

    env = RecordingWrapper(_CompressibleDict(), tmp_path, target_batch_bytes=20_000,
                           compression=Zstd(chunk_rows=5, delta=delta))
    env.reset(seed=0)
    for _ in range(80):
        if any(env.step(0)[2:4]):
            env.reset()
    env.close()
    jobs, expected = [], []
    for json_path in sorted(tmp_path.glob("*.ep*.json")):
        for ref in refs_in(json.loads(json_path.read_text())["episodes"], []):
            jobs.append({"file": str(tmp_path / ref["npyfile"]), "ref": ref})
            parsed = parse_ref(ref, "test")
            data = (tmp_path / ref["npyfile"]).read_bytes()
            arr = np.empty(parsed.shape, parsed.dtype)
            if parsed.codec is None:
                arr.reshape(-1).view(np.uint8)[:] = np.frombuffer(
                    data[parsed.offset:parsed.offset + parsed.size], np.uint8)
            else:
                decode_rows(parsed, lambda o, s: data[o:o + s], 0, parsed.shape[0], arr, "t")
            expected.append(arr)
    assert sum("codec" in job["ref"] for job in jobs) >= 8
    results = run_node(tmp_path, jobs)
    for job, arr, got in zip(jobs, expected, results, strict=True):
        assert "error" not in got, (job["ref"], got)
        assert got["shape"] == list(arr.shape) and got["dtype"] == job["ref"]["dtype"]
        assert got["data"] == expected_values(arr), job["ref"]["dtype"]
    coded = next(job for job in jobs if "codec" in job["ref"])
    bad_name = {**coded, "ref": {**coded["ref"], "codec": {"name": "lz9", "configuration": {}}}}
    liar = {**coded, "ref": {**coded["ref"], "shape": [coded["ref"]["shape"][0] + 1,
                                                        *coded["ref"]["shape"][1:]]}}
    liar["ref"]["size"] = coded["ref"]["size"] // coded["ref"]["shape"][0] * liar["ref"]["shape"][0]
    errors = [r.get("error", "") for r in run_node(tmp_path, [bad_name, liar])]
    assert 'unknown codec "lz9"' in errors[0]
    assert errors[1], "a reference claiming one row more must be refused"
