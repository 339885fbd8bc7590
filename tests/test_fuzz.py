"""Fuzzing the reader: mutated recordings read back or raise FormatError, nothing else.

Hypothesis mutates small real recordings (CartPole-v1, sample_envs/NestedDict-v0,
sample_envs/ChangingInfo-v0, sample_envs/Text-v0, zstd-compressed sample_envs/Image-v0 and a
hand-written OpenAI gym-recording one):
random byte flips, truncations and insertions in the manifest, the batch JSON and the .bin;
random JSON values (``st.recursive``) put at random paths; random keys and items deleted. The
manifest's ``json_size``/``json_crc32`` are recomputed for most JSON mutations so that the
mutations reach the structural checks behind the integrity checks. Opening the reader, rebuilding
its spaces and reading every episode (with and without CRC verification) must either succeed or
raise :class:`gym_recorder.FormatError`; no other exception, no file opened outside the
recording, and bounded memory. Runs are derandomized, hence reproducible.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # sample_envs lives beside gym_recorder
    sys.path.insert(0, str(ROOT))

import sample_envs  # noqa: E402,F401  (registers the sample env ids)
from gym_recorder import FormatError, RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.errors import UnsupportedSpaceError  # noqa: E402
from gym_recorder.training.transitions import transitions  # noqa: E402

# Examples per test: together the file runs in about 10-20 s on 2 cores.
EXAMPLES = 300
# Peak RSS may grow by at most this much over a whole test (the recordings are a few KB).
MAX_RSS_GROWTH_BYTES = 300 << 20
# One example that takes longer than this is a hang.
HANG_SECONDS = 20
LEGACY = "openaigym.trace.0.777"

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------------------------
# Source recordings


def _record(directory: Path, env_id: str, prefix: str, steps: int, target: int) -> None:
    env = RecordingWrapper(gym.make(env_id), directory, file_prefix=prefix,
                           target_batch_bytes=target)
    env.action_space.seed(5)
    env.reset(seed=11)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def _legacy(d: Path) -> None:
    d.mkdir()
    binname = f"{LEGACY}.ep000000000.bin"
    buf = io.BytesIO()

    def ref(arr: np.ndarray) -> dict:
        while buf.tell() % 8:
            buf.write(b"\0")
        off = buf.tell()
        buf.write(arr.tobytes())
        return {"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                "dtype": str(arr.dtype), "npyfile": binname, "npyoff": off, "size": arr.nbytes}

    rng = np.random.default_rng(1)
    episodes = [
        {"observations": ref(rng.standard_normal((4, 3)).astype(np.float32)),
         "actions": ref(np.array([0, 1, 1])), "rewards": ref(np.ones(3))},
        # one array per step, and plain JSON numbers, as gym-recording also wrote
        {"observations": [ref(rng.integers(0, 255, (2, 2), dtype=np.uint8)) for _ in range(3)],
         "actions": [[0, 1], [1, 0]], "rewards": [0.5, 1.5]},
    ]
    (d / binname).write_bytes(buf.getvalue())
    (d / f"{LEGACY}.ep000000000.json").write_text(json.dumps({"episodes": episodes}))
    (d / f"{LEGACY}.manifest.json").write_text(json.dumps(
        {"batches": [{"first": 0, "len": 2, "fn": f"{LEGACY}.ep000000000.json"}]}))


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz_sources")
    out = {}
    for name, env_id, steps, target in [("cp", "CartPole-v1", 60, 1500),
                                        ("nd", "sample_envs/NestedDict-v0", 20, 2000),
                                        ("ci", "sample_envs/ChangingInfo-v0", 14, 100_000),
                                        ("tx", "sample_envs/Text-v0", 30, 100_000)]:
        _record(root / name, env_id, name, steps, target)
        out[name] = root / name
    _legacy(root / "legacy")
    out["legacy"] = root / "legacy"
    # zstd-compressed images (format version 2): mutations of chunk tables and frames too
    from gym_recorder import Zstd

    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=12, width=10,
                                    episode_length=9), root / "zs", file_prefix="zs",
                           target_batch_bytes=4000, compression=Zstd(chunk_rows=3))
    env.reset(seed=11)
    for _ in range(24):
        if any(env.step(0)[2:4]):
            env.reset()
    env.close()
    out["zs"] = root / "zs"
    for d in out.values():  # the untouched recordings read back
        assert len(_read_all(d, False)) >= 2
    return out


# ---------------------------------------------------------------------------------------------
# Strategies

# Values chosen to hit edges: signs, int64/uint64 limits, alignment, names, dtypes, __type tags.
SPECIAL = st.sampled_from([
    0, 1, -1, 7, 8, 2 ** 31, 2 ** 32, 2 ** 48, 2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64, -2 ** 63,
    10 ** 30, 0.5, -0.0, 1e308, True, False, None, "", "..", "../x.bin", "/etc/passwd",
    "a/b", "a\\b", "O", "|O", "V8", "M8[ns]", "<f4", "<f8", "|b1", "<U3", "|S2", "<i8", "ndarray",
    "values", "scalar", "float", "tuple", "dict", "bytes", "graph", "nan", "inf", "Box", "Dict",
    "Tuple", "Discrete", "unknown", "terminated", [], {}, [0], [2 ** 40, 2 ** 40, 0],
    {"__type": "ndarray"}, {"__type": "values", "values": []},
])
SCALARS = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8) | SPECIAL)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                        ["__type", "shape", "dtype", "npyoff", "size", "npyfile", "values"]),
                        inner, max_size=4), max_leaves=12)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (a tuple of keys and indices) to a node of a JSON document."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def mutate_json(data: st.DataObject, doc: Any) -> Any:
    """Applies one random structural mutation to a JSON document; returns the new document."""
    paths = _paths(doc)
    path = data.draw(st.sampled_from(paths), label="path")
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "tweak", "duplicate"]),
                   label="op")
    node = _get(doc, path)
    if op == "tweak" and type(node) is int:
        new: Any = node + data.draw(st.sampled_from([-9, -8, -1, 1, 7, 8, 2 ** 32, -2 ** 63]))
    elif op == "tweak" and isinstance(node, str):
        new = data.draw(st.sampled_from([node + "x", node[:-1], "../" + node, node.upper()]))
    elif op == "duplicate" and isinstance(node, list) and node:
        new = node + [node[data.draw(st.integers(0, len(node) - 1))]]
    elif op == "delete" and path:
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return doc
    else:
        new = data.draw(JSON, label="value")
    if not path:
        return new
    _get(doc, path[:-1])[path[-1]] = new
    return doc


def mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """Flips, truncates, inserts or deletes bytes."""
    buf = bytearray(raw)
    op = data.draw(st.sampled_from(["flip", "flip", "truncate", "insert", "delete"]), label="bop")
    if not buf or op == "insert":
        at = data.draw(st.integers(0, len(buf)))
        buf[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    elif op == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(buf) - 1))
            buf[at] ^= data.draw(st.integers(1, 255))
    elif op == "truncate":
        del buf[data.draw(st.integers(0, len(buf) - 1)):]
    else:
        at = data.draw(st.integers(0, len(buf) - 1))
        del buf[at:at + data.draw(st.integers(1, 64))]
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# Reading


def _read_all(d: Path, verify: bool) -> list:
    with RecordingReader(d, verify=verify) as reader:
        reader.observation_space
        reader.action_space
        out = []
        for ep in reader:
            out.append((ep.observations, ep.actions, ep.rewards, ep.infos, ep.end))
            for leaf in (ep.rewards, ep.terminations, ep.truncations):
                leaf.tolist()  # touch the memory, as a user would
        if len(reader) and not verify:
            # The step columns of every episode at once: through the batch index when the
            # recording has one (its keys and table are fuzzed too), else the batch JSON.
            try:
                t = transitions(reader)
                out.append((t.obs, t.action, t.reward.tolist(), reader.column("observations")))
            except UnsupportedSpaceError:
                pass  # (a mutated recording whose episodes no longer share one space)
        return out


class _Watch:
    """Checks every os.open / open of the reader lies inside the recording; bounds time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside = ""
        self.outside: list[str] = []
        real_os_open = os.open

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            fd = real_os_open(path, flags, *args, **kwargs)
            real = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(
                f"/proc/self/fd/{fd}") else os.path.realpath(path)
            if self.inside and not real.startswith(self.inside):
                self.outside.append(real)
            return fd

        monkeypatch.setattr(os, "open", os_open)

    def read(self, d: Path) -> None:
        self.inside = os.path.realpath(d) + os.sep

        def on_alarm(signum: int, frame: Any) -> None:
            raise TimeoutError(f"reader hung for {HANG_SECONDS} s")

        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(HANG_SECONDS)
        try:
            for verify in (False, True):
                try:
                    _read_all(d, verify)
                except FormatError as e:
                    assert isinstance(e, ValueError) and str(e)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
            self.inside = ""
        assert not self.outside, f"opened outside the recording: {self.outside}"


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> _Watch:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    w = _Watch(monkeypatch)
    yield w
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss
    assert grown < MAX_RSS_GROWTH_BYTES, f"peak RSS grew by {grown} bytes"


def _copy(src: Path, tmp_path: Path) -> Path:
    d = Path(tempfile.mkdtemp(dir=tmp_path)) / "rec"
    shutil.copytree(src, d)
    return d


def _manifest(d: Path) -> Path:
    return next(d / n for n in os.listdir(d) if n.endswith(".manifest.json"))


def _batch_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.suffix in (".json", ".bin")
                  and not p.name.endswith(".manifest.json"))


def _fix_integrity(d: Path, path: Path, data: bytes) -> None:
    """Records the new size and CRC-32 of a batch JSON in the manifest, when it parses."""
    mpath = _manifest(d)
    try:
        man = json.loads(mpath.read_bytes())
        for b in man["batches"]:
            if b.get("fn") == path.name and "json_size" in b:
                b["json_size"] = len(data)
                b["json_crc32"] = zlib.crc32(data)
        mpath.write_text(json.dumps(man))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # the manifest itself was mutated beyond use: leave it so


NAMES = st.sampled_from(["cp", "nd", "ci", "tx", "legacy", "zs"])


# ---------------------------------------------------------------------------------------------
# Tests


@FUZZ
@given(data=st.data(), name=NAMES)
def test_fuzz_json_structure(sources, tmp_path, watch, data, name):
    """Random JSON values at random paths of the manifest and batch JSON; keys deleted."""
    d = _copy(sources[name], tmp_path)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        target = data.draw(st.sampled_from([_manifest(d)] + [
            p for p in _batch_files(d) if p.suffix == ".json"]), label="file")
        doc = json.loads(target.read_bytes())
        doc = mutate_json(data, doc)
        raw = json.dumps(doc).encode()
        target.write_bytes(raw)
        if target != _manifest(d) and data.draw(st.integers(0, 9), label="fix") > 0:
            _fix_integrity(d, target, raw)
    watch.read(d)


@FUZZ
@given(data=st.data(), name=NAMES)
def test_fuzz_bytes(sources, tmp_path, watch, data, name):
    """Byte flips, truncations, insertions in any file of the recording."""
    d = _copy(sources[name], tmp_path)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        target = data.draw(st.sampled_from([_manifest(d)] + _batch_files(d)), label="file")
        raw = mutate_bytes(data, target.read_bytes())
        target.write_bytes(raw)
        if target.suffix == ".json" and target != _manifest(d) and data.draw(st.booleans()):
            _fix_integrity(d, target, raw)
    watch.read(d)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["cp", "nd", "ci", "tx"]))
def test_fuzz_array_references(sources, tmp_path, watch, data, name):
    """Targets array references: shape, dtype, npyoff, size, npyfile of a random reference."""
    d = _copy(sources[name], tmp_path)
    batches = [p for p in _batch_files(d) if p.suffix == ".json"]
    target = data.draw(st.sampled_from(batches), label="file")
    doc = json.loads(target.read_bytes())
    refs = [p for p in _paths(doc) if isinstance(_get(doc, p), dict)
            and _get(doc, p).get("__type") == "ndarray"]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        ref = _get(doc, data.draw(st.sampled_from(refs), label="ref"))
        key = data.draw(st.sampled_from(["shape", "dtype", "npyoff", "size", "npyfile", "crc32",
                                         "order", "__type"]), label="key")
        if data.draw(st.booleans(), label="delete"):
            ref.pop(key, None)
        elif key == "shape" and data.draw(st.booleans()):
            ref[key] = data.draw(st.lists(st.integers(-2, 2 ** 64) | SPECIAL, max_size=6))
        else:
            ref[key] = data.draw(SPECIAL | SCALARS, label="value")
        if data.draw(st.booleans(), label="consistent size") and isinstance(
                ref.get("shape"), list) and all(type(x) is int for x in ref["shape"]):
            try:
                ref["size"] = int(np.prod(ref["shape"], dtype=object)) * np.dtype(
                    ref.get("dtype")).itemsize
            except (TypeError, ValueError, OverflowError):
                pass
    raw = json.dumps(doc).encode()
    target.write_bytes(raw)
    _fix_integrity(d, target, raw)
    watch.read(d)
