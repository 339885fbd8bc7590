"""Hostile recordings: every crafted, truncated or corrupted file ends in our named error.

A recording is untrusted input (issue 2 "Reader", issue 3 "Hostile input"). Each test starts from
a small real recording (CartPole-v1, sample_envs/NestedDict-v0, sample_envs/ChangingInfo-v0,
sample_envs/Text-v0, or a hand-written OpenAI gym-recording "legacy" recording), breaks one
thing, and asserts that opening the reader and reading every episode (with and without CRC
verification) raises :class:`gym_recorder.FormatError` (a ``ValueError``) whose message names the
file and what is wrong, that no file outside the recording directory was opened, and that
nothing was created or changed anywhere under the test's temporary directory.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import resource
import shutil
import signal
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # sample_envs lives beside gym_recorder
    sys.path.insert(0, str(ROOT))

import sample_envs  # noqa: E402,F401  (registers the sample env ids)
from gym_recorder import ChecksumError, FormatError, RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.format import MAX_JSON_BYTES, MAX_NESTING  # noqa: E402

# A test that hangs (e.g. opening a FIFO) fails after this many seconds instead of blocking CI.
HANG_SECONDS = 10
# Peak RSS growth allowed while reading one hostile recording (the recordings are a few KB).
MAX_RSS_GROWTH_BYTES = 200 << 20


# ---------------------------------------------------------------------------------------------
# Source recordings (recorded once per module, copied per test)


def _record(directory: Path, env_id: str, prefix: str, steps: int, target: int,
            **kwargs: Any) -> None:
    env = RecordingWrapper(gym.make(env_id, **kwargs), directory, file_prefix=prefix,
                           target_batch_bytes=target)
    env.action_space.seed(3)
    env.reset(seed=7)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    out = {}
    for name, env_id, steps, target, kwargs in [
        ("cp", "CartPole-v1", 120, 2000, {}),
        ("nd", "sample_envs/NestedDict-v0", 30, 2000, {}),
        ("ci", "sample_envs/ChangingInfo-v0", 30, 100_000, {}),
        ("tx", "sample_envs/Text-v0", 12, 100_000, {}),
    ]:
        d = root / name
        _record(d, env_id, name, steps, target, **kwargs)
        out[name] = d
    out["legacy"] = _write_legacy(root / "legacy")
    return out


LEGACY = "openaigym.trace.0.4242"


def _write_legacy(d: Path) -> Path:
    """Writes a gym-recording recording by hand: two episodes, one batch, the old layout."""
    d.mkdir()
    binname = f"{LEGACY}.ep000000000.bin"
    buf = io.BytesIO()

    def ref(arr: np.ndarray) -> dict:
        while buf.tell() % 8:
            buf.write(b"\0")
        off = buf.tell()
        buf.write(arr.tobytes())
        return {"__type": "ndarray", "shape": list(arr.shape), "order": "C",
                "dtype": str(arr.dtype), "npyfile": binname, "npyoff": off,
                "size": arr.nbytes}

    rng = np.random.default_rng(0)
    episodes = []
    for n in (5, 3):
        episodes.append({
            "observations": ref(rng.standard_normal((n + 1, 4)).astype(np.float32)),
            "actions": ref(rng.integers(0, 2, n)),
            "rewards": ref(np.ones(n)),
        })
    (d / binname).write_bytes(buf.getvalue())
    (d / f"{LEGACY}.ep000000000.json").write_text(json.dumps({"episodes": episodes}))
    (d / f"{LEGACY}.manifest.json").write_text(json.dumps(
        {"batches": [{"first": 0, "len": 2, "fn": f"{LEGACY}.ep000000000.json"}]}))
    return d


@pytest.fixture
def make(sources: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    """Copies a source recording into ``tmp_path/rec`` and plants decoys in ``tmp_path/outside``.

    The decoys are valid-looking copies of the recording's own files, so that a reader that
    follows a path out of the directory would find something it could parse.
    """
    def factory(name: str, dest: str = "rec") -> Path:
        d = tmp_path / dest
        shutil.copytree(sources[name], d)
        outside = tmp_path / "outside"
        outside.mkdir(exist_ok=True)
        m = manifest_path(d)
        b = batch_names(d, 0)
        shutil.copy(d / b[1], outside / "secret.bin")
        shutil.copy(d / b[0], outside / "secret.json")
        shutil.copy(m, outside / "secret.manifest.json")
        return d
    return factory


# ---------------------------------------------------------------------------------------------
# Editing helpers


def manifest_path(d: Path) -> Path:
    (name,) = [p for p in os.listdir(d) if p.endswith(".manifest.json")]
    return d / name


def load_manifest(d: Path) -> dict:
    return json.loads(manifest_path(d).read_bytes())


def save_manifest(d: Path, doc: Any) -> None:
    manifest_path(d).write_text(json.dumps(doc))


def batch_names(d: Path, index: int) -> tuple[str, str]:
    """The (json, bin) file names of batch ``index`` of the recording."""
    b = load_manifest(d)["batches"][index]
    if "bin" in b:
        return b["fn"], b["bin"]
    return b["fn"], b["fn"][: -len(".json")] + ".bin"


def mutate_manifest(d: Path, mutate: Callable[[dict], Any]) -> None:
    """Applies ``mutate`` to the manifest: it edits in place, or returns raw bytes to write."""
    doc = load_manifest(d)
    out = mutate(doc)
    manifest_path(d).write_bytes(out if isinstance(out, bytes) else json.dumps(doc).encode())


def rewrite_batch(d: Path, mutate: Callable[[dict], Any], index: int = 0) -> None:
    """Rewrites batch ``index``'s JSON with ``mutate`` and updates the manifest to match.

    ``mutate`` edits the parsed document in place, or returns raw bytes to write instead (any
    other return value is ignored). The manifest's ``json_size`` and ``json_crc32`` are
    recomputed, so that the reader gets past the integrity checks to the structure.
    """
    man = load_manifest(d)
    b = man["batches"][index]
    path = d / b["fn"]
    doc = json.loads(path.read_bytes())
    out = mutate(doc)
    data = out if isinstance(out, bytes) else json.dumps(doc).encode()
    path.write_bytes(data)
    if "json_size" in b:
        b["json_size"] = len(data)
        b["json_crc32"] = zlib.crc32(data)
        save_manifest(d, man)


def patch_array(d: Path, ref: dict, arr: np.ndarray) -> None:
    """Overwrites the bytes an array reference points at, and its CRC-32, with ``arr``."""
    data = np.ascontiguousarray(arr).tobytes()
    assert len(data) == ref["size"]
    with open(d / ref["npyfile"], "r+b") as f:
        f.seek(ref["npyoff"])
        f.write(data)
    if "crc32" in ref:
        ref["crc32"] = zlib.crc32(data)


def first_entry(doc: dict) -> dict:
    return doc["episodes"][0]


def cp_obs(doc: dict) -> dict:
    """CartPole: the observation reference of the batch's first entry."""
    return doc["episodes"][0]["observations"]


def info_column(doc: dict, key: str) -> dict:
    for entry in doc["episodes"]:
        for col in entry["infos"]["keys"]:
            if col["key"] == key:
                return col
    raise KeyError(key)


def nest(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


def nest_dict(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = {"k": v}
    return v


def nest_tuple(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = {"__type": "tuple", "items": [v]}
    return v


def _load_idx(d: Path, ref: dict) -> np.ndarray:
    return np.fromfile(d / ref["npyfile"], dtype=ref["dtype"], count=ref["shape"][0],
                       offset=ref["npyoff"])


# ---------------------------------------------------------------------------------------------
# Reading under guard


def read_everything(d: Path, verify: bool = False) -> list:
    """Opens the reader and touches everything it offers: spaces and every episode."""
    with RecordingReader(d, verify=verify) as reader:
        reader.observation_space
        reader.action_space
        return [(ep.observations, ep.actions, ep.rewards, ep.infos) for ep in reader]


def _snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@contextlib.contextmanager
def guarded(d: Path) -> Iterator[list[str]]:
    """Records every file the code under test opens; fails if one lies outside ``d``.

    Patches ``os.open``, ``builtins.open``, ``io.open`` and ``np.fromfile``; resolves each
    successfully opened descriptor through /proc/self/fd (so a symlink that was followed is
    caught), and checks afterwards that nothing under the test's temporary
    directory was created, deleted or modified. A hang turns into a failure after
    :data:`HANG_SECONDS`.
    """
    inside = os.path.realpath(d) + os.sep
    opened: list[str] = []
    root = d.parent
    before = _snapshot(root)

    def where(fd: int, path: Any) -> str:
        proc = f"/proc/self/fd/{fd}"
        return os.readlink(proc) if os.path.exists(proc) else os.path.realpath(path)

    real_os_open, real_open, real_fromfile = os.open, builtins.open, np.fromfile

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_os_open(path, flags, *args, **kwargs)
        opened.append(where(fd, path))
        return fd

    def py_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, *args, **kwargs)
        if not isinstance(file, int):
            opened.append(where(f.fileno(), file))
        return f

    def fromfile(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.path.realpath(file) if isinstance(file, (str, os.PathLike)) else "?")
        return real_fromfile(file, *args, **kwargs)

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"reader hung for {HANG_SECONDS} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(HANG_SECONDS)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(os, "open", os_open)
            mp.setattr(builtins, "open", py_open)
            mp.setattr(io, "open", py_open)
            mp.setattr(np, "fromfile", fromfile)
            yield opened
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    outside = [p for p in opened if not p.startswith(inside)]
    assert not outside, f"opened outside the recording: {outside}"
    assert _snapshot(root) == before, "files were created, deleted or changed"


def refused(d: Path, match: str, *, error: type[Exception] = FormatError,
            verify_modes: tuple[bool, ...] = (False, True)) -> str:
    """Asserts that reading ``d`` raises ``error`` matching ``match`` and naming a file.

    Returns the message (of the last mode tried).
    """
    message = ""
    for verify in verify_modes:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        with guarded(d):
            with pytest.raises(error, match=match) as info:
                read_everything(d, verify)
        assert isinstance(info.value, FormatError) and isinstance(info.value, ValueError)
        message = str(info.value)
        names = set(os.listdir(d)) | {"outside", "secret"}
        assert any(n in message for n in names), f"message names no file: {message}"
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss
        assert grown < MAX_RSS_GROWTH_BYTES, f"peak RSS grew by {grown} bytes"
    return message


# ---------------------------------------------------------------------------------------------
# Controls: the untouched recordings read back, and the guard works


@pytest.mark.parametrize("name", ["cp", "nd", "ci", "tx", "legacy"])
def test_untouched_recordings_read_back_inside_the_directory(make, name):
    d = make(name)
    for verify in (False, True):
        with guarded(d) as opened:
            eps = read_everything(d, verify)
        assert len(eps) >= 2
        assert opened and all(p.startswith(os.path.realpath(d) + os.sep) for p in opened)
        assert any(p.endswith(".bin") for p in opened)


def test_guard_catches_a_read_outside(make, tmp_path):
    d = make("cp")
    with pytest.raises(AssertionError, match="opened outside"):
        with guarded(d):
            with open(tmp_path / "outside" / "secret.bin", "rb"):
                pass


# ---------------------------------------------------------------------------------------------
# npyfile, fn, bin: only plain names of regular files inside the directory

BAD_NAMES = [
    "../outside/secret.bin",
    "..",
    "../rec/cp.ep000000000.bin",
    "{outside}/secret.bin",           # absolute path, filled in by the test
    "/etc/passwd",
    "sub/cp.ep000000000.bin",
    "sub\\cp.ep000000000.bin",
    "..\\outside\\secret.bin",
    "C:\\secret.bin",
    "",
    ".",
    ".hidden.bin",
    "cp.ep000000000.bin\0",
    "cp.ep000000000.bin/",
    "~/secret.bin",
    None,
    5,
    True,
    ["cp.ep000000000.bin"],
    {"name": "cp.ep000000000.bin"},
]


def _fill(name: Any, tmp_path: Path) -> Any:
    return name.format(outside=tmp_path / "outside") if isinstance(name, str) and "{" in name \
        else name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_npyfile_must_be_a_plain_name(make, tmp_path, name):
    d = make("cp")
    (d / "sub").mkdir()
    shutil.copy(tmp_path / "outside" / "secret.bin", d / "sub" / "cp.ep000000000.bin")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyfile=_fill(name, tmp_path)))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: file name .* is not a plain file")


@pytest.mark.parametrize("key", ["fn", "bin"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_manifest_fn_and_bin_must_be_plain_names(make, tmp_path, key, name):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][0].update({key: _fill(name, tmp_path)}))
    refused(d, r"cp\.manifest\.json batch 0: file name .* is not a plain file")


@pytest.mark.parametrize("name", BAD_NAMES)
def test_legacy_fn_and_npyfile_must_be_plain_names(make, tmp_path, name):
    d = make("legacy")
    mutate_manifest(d, lambda m: m["batches"][0].update(fn=_fill(name, tmp_path)))
    refused(d, r"openaigym\.trace\.0\.4242\.manifest\.json batch 0: file name .* is not a plain")
    d2 = make("legacy", "rec2")
    rewrite_batch(d2, lambda doc: doc["episodes"][1]["rewards"].update(
        npyfile=_fill(name, tmp_path)))
    refused(d2, r"ep000000000\.json episode 1 rewards: file name .* is not a plain")


def test_npyfile_of_another_file_in_the_directory_is_refused(make):
    d = make("cp")
    other = batch_names(d, 1)[1]
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyfile=other))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: npyfile 'cp\.ep0+\d+\.bin' is not "
               r"this batch's 'cp\.ep000000000\.bin'")


def test_manifest_naming_a_batch_of_another_prefix_is_refused(make, sources, tmp_path):
    d = make("cp")
    # A complete, valid batch, copied in under the names of another writer "xx".
    man = load_manifest(sources["cp"])
    for key in ("fn", "bin"):
        name = man["batches"][0][key]
        shutil.copy(sources["cp"] / name, d / name.replace("cp.", "xx."))
    mutate_manifest(d, lambda m: m["batches"][0].update(
        fn="xx.ep000000000.json", bin="xx.ep000000000.bin"))
    refused(d, r"cp\.manifest\.json batch 0: .*'xx\.ep000000000\.json'.* expected "
               r"'cp\.ep000000000\.json'")


def test_batch_file_names_must_match_their_first_entry(make):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][1].update(fn=m["batches"][0]["fn"]))
    refused(d, r"cp\.manifest\.json batch 1: .* expected 'cp\.ep0+\d+\.json'")


@pytest.mark.parametrize("which", ["bin", "json"])
def test_symlinked_batch_files_leading_out_are_refused(make, tmp_path, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    os.symlink(tmp_path / "outside" / f"secret.{which}", d / target)
    refused(d, rf"cp\.ep000000000\.{which}: .*(cannot open|not a regular file)")


def test_symlink_inside_the_directory_is_refused_too(make):
    d = make("cp")
    _, binname = batch_names(d, 0)
    os.rename(d / binname, d / "real.bin")
    os.symlink("real.bin", d / binname)
    refused(d, r"cp\.ep000000000\.bin: .*(cannot open|not a regular file)")


def test_symlinked_manifest_is_ignored(make, tmp_path):
    d = make("cp")
    os.unlink(manifest_path(d))
    # A symlink leading out, one to a file inside, one to a directory: none is a manifest.
    os.symlink(tmp_path / "outside" / "secret.manifest.json", d / "cp.manifest.json")
    shutil.copy(tmp_path / "outside" / "secret.manifest.json", d / "real.json")
    os.symlink("real.json", d / "zz.manifest.json")
    os.symlink(tmp_path / "outside", d / "dir.manifest.json")
    os.mkdir(d / "sub.manifest.json")
    with guarded(d) as opened:
        with RecordingReader(d) as reader:
            assert len(reader) == 0 and reader.writers == []
    assert not any(p.endswith(".manifest.json") for p in opened)


@pytest.mark.parametrize("which", ["bin", "json"])
def test_fifo_instead_of_a_batch_file_does_not_hang(make, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    os.mkfifo(d / target)
    refused(d, rf"cp\.ep000000000\.{which}: .*not a regular file")


@pytest.mark.parametrize("which", ["bin", "json"])
def test_directory_instead_of_a_batch_file_is_refused(make, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    (d / target).mkdir()
    refused(d, rf"cp\.ep000000000\.{which}: .*(not a regular file|cannot open)")


# ---------------------------------------------------------------------------------------------
# Offsets, sizes, shapes


@pytest.mark.parametrize("offset, match", [
    (-8, r"npyoff must be an integer >= 0"),
    (-(2 ** 70), r"npyoff must be an integer >= 0"),
    (2 ** 64, r"lie outside"),
    (10 ** 40, r"lie outside"),
    (2 ** 63 - 8, r"lie outside"),
    (8.0, r"npyoff must be an integer"),
    (1e300, r"npyoff must be an integer"),
    (True, r"npyoff must be an integer"),
    ("8", r"npyoff must be an integer"),
    (None, r"npyoff must be an integer"),
    ([8], r"npyoff must be an integer"),
    (3, r"npyoff 3 is not a multiple of 8"),
    (4, r"npyoff 4 is not a multiple of 8"),
])
def test_bad_offsets(make, offset, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=offset))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*" + match)


def test_offset_plus_size_beyond_the_file(make):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    end = (d / binname).stat().st_size // 8 * 8
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=end))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: bytes \d+\.\.\d+ lie outside "
               r"cp\.ep000000000\.bin")


@pytest.mark.parametrize("delta", [1, -1, 8, -8])
def test_size_must_equal_shape_times_itemsize(make, delta):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(size=cp_obs(doc)["size"] + delta))
    refused(d, r"entry 0 observations: size \d+ does not match shape")


@pytest.mark.parametrize("size", [-1, True, 1.5, "80", None, 2 ** 80])
def test_size_of_the_wrong_type(make, size):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(size=size))
    refused(d, r"entry 0 observations: size")


@pytest.mark.parametrize("shape, size, match", [
    ([-1, 4], 16, r"every dimension must be an integer >= 0"),
    ([2.0, 4], 32, r"every dimension must be an integer"),
    (["2", 4], 32, r"every dimension must be an integer"),
    ([True, 4], 16, r"every dimension must be an integer"),
    ([None], 0, r"every dimension must be an integer"),
    ([[2], 4], 32, r"every dimension must be an integer"),
    ([1] * 33, 4, r"shape must be a list of at most 32"),
    ([1] * 10_000, 4, r"shape must be a list of at most 32"),
    ("[2, 4]", 32, r"shape must be a list"),
    (None, 4, r"shape must be a list"),
    ({"0": 2}, 32, r"shape must be a list"),
    ([2 ** 62, 4], 2 ** 66, r"every dimension must be an integer >= 0 and <= \d+"),
    ([2 ** 64], 2 ** 66, r"every dimension must be an integer >= 0 and <= \d+"),
    ([2 ** 40, 2 ** 40, 0], 0, r"too many elements"),
    ([0, 2 ** 48, 2 ** 48], 0, r"too many elements"),
    ([2 ** 32, 2 ** 32, 2 ** 32], 2 ** 98, r"too many elements"),
    ([2 ** 24, 2 ** 24], 2 ** 50, r"too many elements"),
    ([2 ** 20, 2 ** 20], 2 ** 42, r"bytes 0\.\.4398046511104 lie outside cp\.ep0+\.bin"),
    ([0], 0, r"shape \(0,\), expected \(\d+, 4\)"),
    ([0, 2 ** 20, 2 ** 20], 0, r"shape \(0, 1048576, 1048576\), expected \(\d+, 4\)"),
    ([0, 2 ** 23, 2 ** 23], 0, r"shape \(0, 8388608, 8388608\), expected \(\d+, 4\)"),
    ([0, 2 ** 23, 2 ** 23 + 1], 0, r"too many elements"),
])
def test_bad_shapes(make, shape, size, match):
    d = make("cp")
    # No CRC: with verify=True the checksum of the (changed) byte range would fail first.
    rewrite_batch(d, lambda doc: cp_obs(doc).update(shape=shape, size=size, crc32=None))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*" + match)


def test_order_other_than_c_is_refused(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(order="F"))
    refused(d, r"entry 0 observations: only C order is supported, got 'F'")


def test_reference_pointing_at_other_bytes_is_caught_by_verify(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=cp_obs(doc)["npyoff"] + 8))
    read_everything(d, verify=False)  # well-formed: only the checksum can tell
    refused(d, r"entry 0 observations: CRC-32 of the array's bytes does not match",
            error=ChecksumError, verify_modes=(True,))


# ---------------------------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("dtype", [
    "O", "|O", "<O", "O8", "object", "V8", "|V8", "<V8", "M8[ns]", "<M8[ns]", "m8[s]", "<m8",
    "<f4,<i4", "[('a', '<f4')]", "f4,f4,f4,f4", "(4,)f4", "<U0", "|S0", "<f3", "b2", "<i16",
    "float128", "longdouble", "g", "d", "xyz", "", "<", "<U999999999", "<f4 ", "\u00fcf4",
    5, 4.0, None, True, ["<f4"], {"descr": "<f4"},
])
def test_refused_dtypes(make, dtype):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(dtype=dtype))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: unsupported dtype")


def test_rewards_and_flags_of_the_wrong_dtype(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: first_entry(doc)["rewards"].update(dtype=">f8"))
    refused(d, r"entry 0 rewards: dtype >f8, expected float64")
    d2 = make("cp", "rec2")
    rewrite_batch(d2, lambda doc: first_entry(doc)["terminations"].update(dtype="|u1"))
    refused(d2, r"entry 0 terminations: dtype uint8, expected bool")




# ---------------------------------------------------------------------------------------------
# Truncated, empty, garbled files


def test_truncated_bin(make):
    d = make("cp")
    _, binname = batch_names(d, 0)
    data = (d / binname).read_bytes()
    (d / binname).write_bytes(data[: len(data) // 2])
    refused(d, r"cp\.ep000000000\.bin: file has \d+ bytes, the manifest says \d+")


def test_truncated_bin_in_a_legacy_recording(make):
    d = make("legacy")
    _, binname = batch_names(d, 0)
    data = (d / binname).read_bytes()
    (d / binname).write_bytes(data[:40])
    refused(d, r"ep000000000\.json episode \d .*lie outside openaigym\.trace\.0\.4242\.ep0+\.bin")


@pytest.mark.parametrize("cut", [0, 1, 100, -1])
def test_truncated_batch_json_with_a_stale_manifest(make, cut):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    data = (d / fn).read_bytes()
    (d / fn).write_bytes(data[:cut])
    refused(d, r"cp\.ep000000000\.json: file has \d+ bytes, the manifest says \d+")


@pytest.mark.parametrize("cut", [0, 1, 100, -1])
def test_truncated_batch_json(make, cut):
    d = make("cp")
    rewrite_batch(d, lambda doc: json.dumps(doc).encode()[:cut])
    refused(d, r"cp\.ep000000000\.json: not valid JSON")


def test_batch_json_with_wrong_crc(make):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    data = bytearray((d / fn).read_bytes())
    data[data.index(b'"seed"') + 1] = ord("S")
    (d / fn).write_bytes(bytes(data))
    refused(d, r"cp\.ep000000000\.json: CRC-32 does not match the manifest", error=ChecksumError)


@pytest.mark.parametrize("raw, match", [
    (b"\xff\xfe{\"episodes\": []}", r"not valid JSON"),
    (b"{\"episodes\": [], \"x\": \"\xc3\x28\"}", r"not valid JSON"),
    (b"\xef\xbb\xbf{\"episodes\": []}", r"not valid JSON"),
    (b"{\"episodes\": [NaN]}", r"not valid JSON.*NaN"),
    (b"{\"episodes\": [Infinity]}", r"not valid JSON.*Infinity"),
    (b"{\"episodes\": [-Infinity]}", r"not valid JSON.*Infinity"),
    (b"{\"episodes\": []} trailing", r"not valid JSON"),
    (b"{\"episodes\": [] ", r"not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, r"not valid JSON|nested too deeply"),
    (b"{\"a\":" * 100_000 + b"1" + b"}" * 100_000, r"not valid JSON|nested too deeply"),
    (b"{\"episodes\": [" + b"9" * 5000 + b"]}", r"not valid JSON"),
    (b"[]", r"a batch must be an object with an 'episodes' list"),
    (b"17", r"a batch must be an object"),
    (b"\"episodes\"", r"a batch must be an object"),
    (b"null", r"a batch must be an object"),
    (b"{}", r"a batch must be an object with an 'episodes' list"),
    (b"{\"episodes\": {}}", r"a batch must be an object with an 'episodes' list"),
    (b"{\"episodes\": []}", r"0 entries, the manifest says \d+"),
])
def test_garbled_batch_json(make, raw, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: raw)
    refused(d, r"cp\.ep000000000\.json: " + match)


@pytest.mark.parametrize("raw, match", [
    (b"", r"not valid JSON"),
    (b"{\"batches\": [", r"not valid JSON"),
    (b"\xff" * 10, r"not valid JSON"),
    (b"{\"format\": \"gym_recorder\", \"version\": NaN}", r"not valid JSON.*NaN"),
    (b"[" * 100_000, r"not valid JSON|nested too deeply"),
    (b"[" * 100_000 + b"]" * 100_000, r"not valid JSON|nested too deeply"),
    (b"[]", r"a manifest must be a JSON object"),
    (b"3", r"a manifest must be a JSON object"),
    (b"null", r"a manifest must be a JSON object"),
    (b"\"x\"", r"a manifest must be a JSON object"),
    (b"{}", r"no format/version and not a gym-recording manifest"),
])
def test_garbled_manifest(make, raw, match):
    d = make("cp")
    mutate_manifest(d, lambda m: raw)
    refused(d, r"cp\.manifest\.json: " + match)


def test_truncated_manifest(make):
    d = make("nd")
    data = manifest_path(d).read_bytes()
    for cut in (1, len(data) // 3, len(data) - 1):
        manifest_path(d).write_bytes(data[:cut])
        refused(d, r"nd\.manifest\.json: not valid JSON")


def _sparse(path: Path, size: int) -> None:
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.truncate(size)


def test_huge_manifest_is_refused_without_reading_it(make):
    """A sparse manifest just over MAX_JSON_BYTES: refused from its size alone.

    Reading it would take a GiB; refused() bounds the peak RSS growth far below that.
    """
    d = make("cp")
    _sparse(manifest_path(d), MAX_JSON_BYTES + 1)
    refused(d, rf"cp\.manifest\.json: {MAX_JSON_BYTES + 1} bytes of JSON is more than "
               rf"{MAX_JSON_BYTES}")


def test_huge_batch_json_is_refused_without_reading_it(make):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    _sparse(d / fn, MAX_JSON_BYTES + 8)
    mutate_manifest(d, lambda m: m["batches"][0].update(json_size=MAX_JSON_BYTES + 8))
    refused(d, r"cp\.ep000000000\.json: \d+ bytes of JSON is more than")


def test_huge_legacy_batch_json_is_refused_without_reading_it(make):
    d = make("legacy")
    fn, _ = batch_names(d, 0)
    _sparse(d / fn, MAX_JSON_BYTES + 8)
    refused(d, r"ep000000000\.json: \d+ bytes of JSON is more than")


@pytest.mark.skipif(not os.path.exists("/proc/sys/vm/overcommit_memory")
                    or open("/proc/sys/vm/overcommit_memory").read().strip() == "1",
                    reason="needs Linux without unconditional memory overcommit")
def test_huge_sparse_bin_is_not_read_whole(make):
    """A sparse .bin of 4 TiB with a reference claiming all of it: refused, not allocated.

    The reader allocates what a (validated) reference claims, which the file's real size
    bounds; a sparse file makes that bound meaningless, so the allocation failure must come
    back as our error, with no memory touched.
    """
    d = make("cp")
    fn, binname = batch_names(d, 0)
    huge = 4 << 40
    try:
        _sparse(d / binname, huge)
    except OSError:
        pytest.skip("the file system refuses a 4 TiB sparse file")
    mutate_manifest(d, lambda m: m["batches"][0].update(bin_size=huge))
    rewrite_batch(d, lambda doc: cp_obs(doc).update(shape=[huge // 16, 4], size=huge, npyoff=0))
    refused(d, r"cp\.ep000000000\.bin: cannot allocate 4398046511104 bytes for array data")


# ---------------------------------------------------------------------------------------------
# Manifest structure


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.pop("format"), r"format is None, not 'gym_recorder'"),
    (lambda m: m.update(format="gym_recorder2"), r"format is 'gym_recorder2'"),
    (lambda m: m.update(format=["gym_recorder"]), r"format is \['gym_recorder'\]"),
    (lambda m: m.pop("version"), r"bad format version None"),
    (lambda m: m.update(version="1"), r"bad format version '1'"),
    (lambda m: m.update(version=1.0), r"bad format version 1\.0"),
    (lambda m: m.update(version=True), r"bad format version True"),
    (lambda m: m.update(version=0), r"bad format version 0"),
    (lambda m: m.update(version=-1), r"bad format version -1"),
    (lambda m: m.update(version=2), r"format version 2 is newer than this reader \(1\)"),
    (lambda m: m.update(version=10 ** 100), r"is newer than this reader"),
    (lambda m: m.update(prefix="other"), r"prefix 'other' does not match the file name"),
    (lambda m: m.update(prefix=None), r"prefix None does not match"),
    (lambda m: m.update(prefix="../cp"), r"prefix '\.\./cp' does not match"),
    (lambda m: m.pop("batches"), r"'batches' must be a list"),
    (lambda m: m.update(batches={}), r"'batches' must be a list"),
    (lambda m: m.update(batches="cp.ep000000000.json"), r"'batches' must be a list"),
    (lambda m: m["batches"].__setitem__(0, 1), r"batch 0: must be an object"),
    (lambda m: m["batches"].__setitem__(0, []), r"batch 0: must be an object"),
    (lambda m: m["batches"].__setitem__(0, None), r"batch 0: must be an object"),
    (lambda m: m["batches"][0].pop("first"), r"batch 0: 'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(first=-1), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(first=0.0), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(first=False), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len=-1), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len="2"), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len=10 ** 30), r"batch 1: first entry 2 overlaps"),
    (lambda m: m["batches"][-1].update(len=m["batches"][-1]["len"] + 1),
     r"\d+ entries, the manifest says \d+"),
    (lambda m: m["batches"][1].update(first=0), r"batch 1: first entry 0 overlaps"),
    (lambda m: m["batches"][0].update(episodes=-1), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].update(episodes=m["batches"][0]["len"] + 1),
     r"batch 0: 'episodes' must be an integer in \[0, len\]"),
    (lambda m: m["batches"][0].update(episodes="1"), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].pop("episodes"), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].update(json_size=-1), r"batch 0: 'json_size' must be a non-neg"),
    (lambda m: m["batches"][0].update(json_size=1.5), r"batch 0: 'json_size' must be a non-neg"),
    (lambda m: m["batches"][0].update(json_size=m["batches"][0]["json_size"] + 1),
     r"json: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].update(bin_size=m["batches"][0]["bin_size"] + 8),
     r"bin: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].update(bin_size=m["batches"][0]["bin_size"] - 1),
     r"bin: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].pop("bin_size"), r"batch 0: 'bin_size' must be a non-negative"),
    (lambda m: m["batches"][0].update(json_crc32=None), r"batch 0: 'json_crc32' must be"),
    (lambda m: m["batches"][0].update(steps=True), r"batch 0: 'steps' must be a non-negative"),
    (lambda m: m.update(observation_space=None), r"observation_space: a space must be a JSON"),
    (lambda m: m.pop("action_space"), r"action_space: a space must be a JSON object"),
])
def test_bad_manifest_fields(make, edit, match):
    d = make("cp")
    mutate_manifest(d, edit)
    refused(d, r"^(?=cp\.(manifest|ep\d+)\.(json|bin)[ :]).*" + match)


def test_json_crc_mismatch_is_a_checksum_error(make):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][0].update(
        json_crc32=(m["batches"][0]["json_crc32"] + 1) % 2 ** 32))
    refused(d, r"cp\.ep000000000\.json: CRC-32 does not match the manifest", error=ChecksumError)


def test_manifest_episode_count_larger_than_the_batch_holds(make):
    """The manifest claims one more new episode than batch 0 starts: that episode is missing."""
    d = make("cp")
    man = load_manifest(d)
    b0 = man["batches"][0]
    if b0["episodes"] == b0["len"]:  # make room: claim one entry fewer starts an episode ...
        rewrite_batch(d, lambda doc: doc["episodes"][-1].update(part=1))
    mutate_manifest(d, lambda m: m["batches"][0].update(episodes=b0["len"]))
    refused(d, r"cp\.(ep0+\d+\.json|manifest\.json).*(episode|part|missing|not found)")


def test_entries_out_of_order_or_duplicated(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: doc["episodes"].reverse())
    refused(d, r"cp\.ep000000000\.json entry 0: 'index' is not 0")


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.update(episode=-1), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(episode="0"), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.pop("part"), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(part=1.0), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(index=None), r"entry 0: 'index' is not 0"),
    (lambda e: e.update(index=True), r"entry 0: 'index' is not 0"),
    (lambda e: e.update(steps=-1), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps="3"), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps=1.0), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps=10 ** 30), r"entry 0: 'infos' must be \{'rows': 10{29}1,"),
    (lambda e: e.update(steps=e["steps"] + 1), r"entry 0: 'infos' must be \{'rows': \d+"),
    (lambda e: (e.update(steps=e["steps"] + 1), e["infos"].update(rows=e["steps"] + 1)),
     r"entry 0 observations: shape \(\d+, 4\), expected \(\d+, 4\)"),
    (lambda e: e.pop("observations"), r"entry 0 observations: expected an array reference"),
    (lambda e: e.update(observations=[1, 2]), r"entry 0 observations: expected an array ref"),
    # (an array leaf MAY be stored as values: a value outside the space's shape; rows counted)
    (lambda e: e.update(observations={"__type": "values", "values": []}),
     r"entry 0 observations: 0 rows, expected \d+"),
    (lambda e: e.update(actions=e["observations"]), r"entry 0 actions: shape .* expected"),
    (lambda e: e.pop("rewards"), r"entry 0 rewards: expected an array reference"),
    (lambda e: e.update(rewards=e["terminations"]), r"entry 0 rewards: dtype bool, expected"),
    (lambda e: e.update(truncations=e["rewards"]), r"entry 0 truncations: dtype float64, exp"),
    (lambda e: e.pop("infos"), r"entry 0: 'infos' must be"),
    (lambda e: e.update(infos=[]), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(rows=e["infos"]["rows"] + 1), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(rows="1"), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(keys={}), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"]["keys"].append(1), r"entry 0 infos column \d+: a column needs a str"),
    (lambda e: e["infos"]["keys"].append({"key": 5, "kind": "values", "values": []}),
     r"entry 0 infos column \d+: a column needs a string 'key'"),
    (lambda e: e.update(seed="7"), r"entry 0: 'seed' must be an integer or null"),
    (lambda e: e.update(seed=7.0), r"entry 0: 'seed' must be an integer or null"),
    (lambda e: e.update(end="exploded"), r"entry 0: unknown end 'exploded'"),
    (lambda e: e.update(end=["terminated"]), r"entry 0: unknown end"),
    (lambda e: e.update(sub_env="0"), r"entry 0: 'sub_env' must be an integer or null"),
    (lambda e: e.update(options={"__type": "pickle", "data": "gASVAAAA"}),
     r"entry 0 options: unknown __type 'pickle'"),
    (lambda e: e.update(options={"__type": ["ndarray"]}), r"entry 0 options: unknown __type"),
])
def test_bad_entries(make, edit, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"cp\.ep000000000\.json " + match)


def test_entry_that_is_not_an_object(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: doc["episodes"].__setitem__(0, "episode"))
    refused(d, r"cp\.ep000000000\.json entry 0: must be an object")


def test_continues_into_a_missing_part(make):
    d = make("cp")
    man = load_manifest(d)
    last = man["batches"][-1]["len"] - 1
    rewrite_batch(d, lambda doc: doc["episodes"][last].update(continues=True),
                  index=len(man["batches"]) - 1)
    # The episode claims a later part that no batch holds: it ends there (no later batch) ...
    with RecordingReader(d) as reader:
        assert reader[-1].end is None
    # ... but a part missing from the next batch is an error.
    d2 = make("cp", "rec2")
    man2 = load_manifest(d2)
    # A batch (not the last) whose last entry ends its episode, so the next batch has no part 1.
    index = next(i for i, b in enumerate(man2["batches"][:-1])
                 if json.loads((d2 / b["fn"]).read_bytes())["episodes"][-1]["continues"] is False)
    rewrite_batch(d2, lambda doc: doc["episodes"][-1].update(continues=True), index=index)
    refused(d2, r"cp\.ep0+\d+\.json: episode \d+ part \d+ missing")


# ---------------------------------------------------------------------------------------------
# Nested Dict/Tuple trees and stitching


@pytest.mark.parametrize("edit, match", [
    (lambda e: e["observations"].pop("grid"), r"observations: missing key 'grid'"),
    (lambda e: e.update(observations=[]), r"observations: expected an object for a Dict"),
    (lambda e: e["observations"].update(__type="ndarray"),
     r"observations: expected an object for a Dict"),
    (lambda e: e["observations"]["nested"].update(pair={}),
     r"observations\['nested'\]\['pair'\]: expected a list of 2 for a Tuple"),
    (lambda e: e["observations"]["nested"]["pair"].append(None),
     r"observations\['nested'\]\['pair'\]: expected a list of 2 for a Tuple"),
    (lambda e: e["observations"]["nested"]["pair"].__setitem__(0, 3),
     r"observations\['nested'\]\['pair'\]\[0\]: expected an array reference"),
    (lambda e: e["observations"].update(grid=e["observations"]["flags"]),
     r"observations\['grid'\]: shape \(\d+, 4\), expected \(\d+, 5, 5\)"),
    (lambda e: e["actions"].update(move=e["observations"]["position"]),
     r"actions\['move'\]: shape .* expected"),
])
def test_bad_nested_trees(make, edit, match):
    d = make("nd")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"nd\.ep000000000\.json entry 0 " + match)


def test_invalid_code_points_in_a_string_array_are_refused(make):
    """<U arrays whose bytes are not Unicode code points would crash numpy (SystemError)."""
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(dtype="<U1"))  # same shape, same size
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*not (valid )?Unicode")
    d2 = make("ci", "rec2")
    rewrite_batch(d2, lambda doc: info_column(doc, "x")["values"].update(dtype="<U2"))
    refused(d2, r"ci\.ep000000000\.json entry \d+ infos column \d+ values: .*not (valid )?Unicode")


# ---------------------------------------------------------------------------------------------
# Infos columns


@pytest.mark.parametrize("key, edit, match", [
    ("x", lambda d, c: patch_array(d, c["index"], _load_idx(d, c["index"])[::-1]),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: patch_array(d, c["index"], np.full(c["index"]["shape"], 10 ** 6)),
     r"index must be ascending int64 rows in \[0, \d+\)"),
    ("x", lambda d, c: patch_array(d, c["index"], np.full(c["index"]["shape"], -1)),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: patch_array(d, c["index"], np.zeros(c["index"]["shape"], np.int64)),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: c["index"].update(dtype="<f8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype=">i8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype="<u8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype="<i4", shape=[c["index"]["shape"][0] * 2]),
     r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(shape=[c["index"]["shape"][0], 1]),
     r"index must be ascending int64"),
    ("x", lambda d, c: c.update(index=[0, 1]), r"index: expected an array reference"),
    ("x", lambda d, c: c.update(index="all"), r"index: expected an array reference"),
    ("x", lambda d, c: c["values"].update(shape=[1], size=8, crc32=None),
     r"\(1,\) values for \d+ rows"),
    ("x", lambda d, c: c["values"].update(shape=[], size=8, crc32=None),
     r"\(\) values for \d+ rows"),
    ("x", lambda d, c: c.update(kind="pickle"), r"'kind' must be 'array' or 'values'"),
    ("x", lambda d, c: c.update(kind=None), r"'kind' must be 'array' or 'values'"),
    ("x", lambda d, c: c.update(pytype="object"), r"unknown pytype 'object'"),
    ("x", lambda d, c: c.update(values=[1.0]), r"values: expected an array reference"),
    ("name", lambda d, c: c.update(values="step"), r"'kind' must be 'array' or 'values'"),
    ("name", lambda d, c: c["values"].append("x"), r"\d+ values for \d+ rows"),
    ("name", lambda d, c: c.update(values=[]), r"0 values for \d+ rows"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "pickle"}),
     r"unknown __type 'pickle'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i1",
                                                          "value": 300}),
     r"300 out of range for \|i1"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<u2",
                                                          "value": -1}),
     r"-1 out of range for <u2"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i8",
                                                          "value": 2 ** 63}),
     r"out of range for <i8"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f2",
                                                          "value": 1e10}),
     r"out of range for <f2"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f4",
                                                          "value": -1e300}),
     r"out of range for <f4"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<c8",
                                                          "value": [1e300, 0]}),
     r"out of range for <c8"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f4",
                                                          "value": "NaN"}),
     r"bad float 'NaN'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "|b1",
                                                          "value": 1}),
     r"bool scalar must be true or false"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<c16",
                                                          "value": [1]}),
     r"complex scalar must be \[real, imag\]"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "|O",
                                                          "value": 1}),
     r"unsupported dtype '\|O'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<U3",
                                                          "value": "abc"}),
     r"bad scalar of dtype <U3"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i4",
                                                          "value": {"k": 1}}),
     r"scalar array does not match dtype <i4"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "float", "value": "1e999"}),
     r"bad float '1e999'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "float", "value": True}),
     r"expected a number, got bool"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes", "base64": "!!"}),
     r"bad base64"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes", "base64": "\u00e9"}),
     r"bad base64"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes"}),
     r"bytes need a base64 string"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "tuple", "items": 3}),
     r"tuple items must be a list"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": [[1]]}),
     r"dict items must be a list of \[key, value\] pairs"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": {"a": 1}}),
     r"dict items must be a list of \[key, value\] pairs"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": [[[1], 2]]}),
     r"unhashable dict key"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict",
                                                          "items": [[{"a": 1}, 2]]}),
     r"unhashable dict key"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "../outside/secret.bin"}),
     r"file name '\.\./outside/secret\.bin' is not a plain file name"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "ci.manifest.json", "dtype": "|u1",
                                                          "shape": [1], "npyoff": 0,
                                                          "size": 1}),
     r"npyfile 'ci\.manifest\.json' is not this batch's"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "ci.ep000000000.bin", "dtype": "|O",
                                                          "shape": [1], "npyoff": 0,
                                                          "size": 8}),
     r"unsupported dtype '\|O'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest(900)),
     r"nested deeper than \d+ levels|nested too deeply"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest_dict(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest_tuple(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
])
def test_bad_info_columns(make, key, edit, match):
    d = make("ci")
    rewrite_batch(d, lambda doc: edit(d, info_column(doc, key)))
    refused(d, r"ci\.ep000000000\.json entry \d+ infos column \d+.*" + match)






# ---------------------------------------------------------------------------------------------
# Values leaves (Text)


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.update(observations=[]), r"expected \{'__type': 'values'"),
    (lambda e: e["observations"].update(values="abc"), r"expected \{'__type': 'values'"),
    (lambda e: e["observations"].update(__type="ndarray"), r"expected \{'__type': 'values'|"
                                                            r"expected an array"),
    (lambda e: e["observations"]["values"].append("extra"), r"\d+ rows, expected \d+"),
    (lambda e: e["observations"]["values"].__setitem__(0, 5), r"Text rows must be strings"),
    (lambda e: e["observations"]["values"].__setitem__(0, {"__type": "bytes", "base64": "YQ=="}),
     r"Text rows must be strings"),
    (lambda e: e["observations"]["values"].__setitem__(0, nest(500)),
     r"nested deeper than \d+ levels"),
])
def test_bad_values_leaves(make, edit, match):
    d = make("tx")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"tx\.ep000000000\.json entry 0 observations: " + match)


# ---------------------------------------------------------------------------------------------
# Space descriptions


def _box(**kw: Any) -> dict:
    out = {"type": "Box", "dtype": "<f4", "shape": [4], "low": -1.0, "high": 1.0}
    out.update(kw)
    return out


def _deep_space(depth: int) -> dict:
    s: dict = _box()
    for _ in range(depth):
        s = {"type": "Tuple", "spaces": [s]}
    return s


@pytest.mark.parametrize("space, match", [
    (_box(shape=[2 ** 16, 2 ** 16]), r"(too large|absurd|shape)"),
    (_box(shape=[2 ** 20, 2 ** 20, 2 ** 20]), r"(too large|absurd|bad shape)"),
    (_box(shape=[2 ** 26]), r"too large to rebuild"),
    (_box(shape=[2 ** 24 + 1]), r"too large to rebuild"),
    (_box(dtype="<f8", shape=[4096, 4096]), r"too large to rebuild"),
    (_box(shape=[-4]), r"bad shape \[-4\]"),
    (_box(shape=[4.0]), r"bad shape"),
    (_box(shape="4"), r"bad shape"),
    (_box(shape=[1] * 40), r"bad shape"),
    (_box(dtype="O"), r"unsupported dtype 'O'"),
    (_box(dtype="|V8"), r"unsupported dtype"),
    (_box(dtype=None), r"unsupported dtype None"),
    (_box(low=[1, 2]), r"Box bound of shape \(2,\) for shape \(4,\)"),
    (_box(low="abc"), r"bad Box bound 'abc'"),
    (_box(low={"a": 1}), r"bad Box bound"),
    (_box(low=None), r"bad Box bound None"),
    (_box(low=nest(40)), r"Box bound|nested"),
    (_box(low=nest(900)), r"Box bound|nested"),
    (_box(dtype="|u1", low=-1, high=1e300), r"does not fit|cannot rebuild"),
    (_box(dtype="<i8", low="nan"), r"does not fit|cannot rebuild"),
    (_box(low=2.0, high=1.0), r"cannot rebuild Box space"),
    ({"type": "Discrete", "n": -1, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": 0, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": "3", "start": 0}, r"space field 'n' is missing or malformed"),
    ({"type": "Discrete", "n": True, "start": 0}, r"space field 'n' is missing or malformed"),
    ({"type": "Discrete", "n": 2 ** 70, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": 3, "start": 0, "dtype": "O"}, r"unsupported dtype 'O'"),
    ({"type": "Discrete", "n": 3}, r"space field 'start' is missing or malformed"),
    ({"type": "MultiDiscrete", "nvec": [[1, 2], [3]], "start": [0, 0], "dtype": "<i8"},
     r"(bad|ragged|malformed|nvec)"),
    ({"type": "MultiDiscrete", "nvec": nest(100), "start": [0], "dtype": "<i8"},
     r"(bad|malformed|nvec)"),
    ({"type": "MultiDiscrete", "nvec": [-1], "start": [0], "dtype": "<i8"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiDiscrete", "nvec": ["a"], "start": [0], "dtype": "<i8"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiDiscrete", "nvec": [3], "start": [0], "dtype": "<f4"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiBinary", "n": -1}, r"bad shape \[-1\]"),
    ({"type": "MultiBinary", "n": [2 ** 40, 2 ** 40]}, r"bad shape|absurd"),
    ({"type": "MultiBinary", "n": "4"}, r"bad shape"),
    ({"type": "Text", "min_length": 0, "max_length": -1, "charset": "ab"},
     r"cannot rebuild Text space"),
    ({"type": "Text", "min_length": 0, "max_length": 3, "charset": 5},
     r"space field 'charset' is missing or malformed"),
    ({"type": "Pickle", "data": "gASV"}, r"unknown space type 'Pickle'"),
    ({"type": ["Box"]}, r"unknown space type \['Box'\]"),
    ({}, r"unknown space type None"),
    ([], r"a space must be a JSON object"),
    ("Box", r"a space must be a JSON object"),
    ({"type": "Dict", "spaces": {"a": _box()}}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [["a"]]}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [[1, _box()]]}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [["a", _box(), 3]]}, r"Dict spaces must be \[key, space\]"),
    ({"type": "Dict", "spaces": [["a", None]]}, r"a space must be a JSON object"),
    ({"type": "Tuple", "spaces": _box()}, r"Tuple spaces must be a list"),
    ({"type": "Tuple", "spaces": [1]}, r"a space must be a JSON object"),
    (_deep_space(MAX_NESTING + 2), r"spaces nested too deeply"),
    ("DEEP", r"spaces nested too deeply|nested too deeply"),
    ({"type": "Sequence", "space": None}, r"a space must be a JSON object"),
    ({"type": "Graph", "node_space": {"type": "Text", "min_length": 0, "max_length": 2,
                                      "charset": "ab"}, "edge_space": None},
     r"cannot rebuild Graph space|expected \{'__type': 'values'"),
    ({"type": "OneOf", "spaces": []}, r"cannot rebuild OneOf space|OneOf"),
])
@pytest.mark.parametrize("which", ["observation_space", "action_space"])
def test_bad_space_descriptions(make, space, match, which):
    d = make("cp")
    if space == "DEEP":  # 800 levels: too deep for json.dumps, written as text
        text = '{"type": "Tuple", "spaces": [' * 800 + json.dumps(_box()) + "]}" * 800
        mutate_manifest(d, lambda m: json.dumps({**m, which: "DEEP"}).encode().replace(
            b'"DEEP"', text.encode()))
    else:
        mutate_manifest(d, lambda m: m.update({which: space}))
    if "values'" in match:  # a space the reader rebuilds, that the recorded entries do not fit
        match = rf"cp\.manifest\.json {which}.*cannot rebuild|cp\.ep0+\.json entry 0"
    else:
        match = rf"cp\.manifest\.json {which}.*" + match
    refused(d, match)


# ---------------------------------------------------------------------------------------------
# Legacy (OpenAI gym-recording) recordings


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(batches=None), r"'batches' must be a list"),
    (lambda m: m["batches"].__setitem__(0, "x"), r"batch 0: must be an object"),
    (lambda m: m["batches"][0].update(len=-2), r"'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(len=3), r"2 entries, the manifest says 3"),
    (lambda m: m["batches"][0].update(first="0"), r"'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(fn=f"{LEGACY}.manifest.json"),
     r"batch 0: fn '.*manifest\.json' is not a batch of this writer"),
    (lambda m: m["batches"][0].update(fn="openaigym.trace.9.9.ep000000000.json"),
     r"batch 0: .*openaigym\.trace\.9\.9\.ep000000000\.json.* (not|expected)"),
    (lambda m: m["batches"][0].update(episodes="many"), r"ep000000000\.json episode \d|"
                                                        r"'episodes'"),
])
def test_hostile_legacy_manifests(make, edit, match):
    d = make("legacy")
    shutil.copy(d / f"{LEGACY}.ep000000000.json", d / "openaigym.trace.9.9.ep000000000.json")
    mutate_manifest(d, edit)
    batches = load_manifest(d)["batches"]
    if isinstance(batches, list) and isinstance(batches[0], dict) and "episodes" in batches[0]:
        # Unknown keys are ignored: the recording still reads.
        assert len(read_everything(d)) == 2
        return
    refused(d, r"openaigym\.trace\.\d\.\d+\.(manifest|ep0+)\.json.*" + match)


def test_legacy_manifest_name_required_without_format(make):
    d = make("cp")
    mutate_manifest(d, lambda m: json.dumps({"batches": m["batches"]}).encode())
    refused(d, r"cp\.manifest\.json: no format/version and not a gym-recording manifest")


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.pop("observations"), r"missing 'observations'"),
    (lambda e: e.pop("rewards"), r"missing 'rewards'"),
    (lambda e: e["observations"].update(dtype="object"), r"unsupported dtype 'object'"),
    (lambda e: e["observations"].update(dtype="O"), r"unsupported dtype 'O'"),
    (lambda e: e["observations"].update(npyoff=-1), r"npyoff must be an integer >= 0"),
    (lambda e: e["observations"].update(npyoff=10 ** 9), r"lie outside"),
    (lambda e: e["observations"].update(npyoff=10 ** 9 + 4), r"lie outside"),
    (lambda e: e["observations"].update(size=7), r"size 7 does not match shape"),
    (lambda e: e["observations"].update(shape=[2 ** 40, 2 ** 40, 0], size=0), r"too many elem"),
    (lambda e: e["observations"].update(shape=[7], size=28), r"5 rewards for 7 observations"),
    (lambda e: e.update(observations=nest(100)), r"nested too deeply"),
    (lambda e: e.update(observations=nest(900)), r"nested too deeply"),
    (lambda e: e.update(observations=[2 ** 100, 1, 2]), r"(out of range|numbers)"),
    (lambda e: e.update(rewards={"a": 1}), r"rewards"),
    (lambda e: e.update(rewards=["a", "b", "c", "d", "e"]), r"rewards"),
    (lambda e: e.update(rewards=[[1, 2], [3]]), r"rewards"),
    (lambda e: e.update(rewards=[1.0, 2.0]), r"2 rewards for 6 observations"),
])
def test_hostile_legacy_episodes(make, edit, match):
    d = make("legacy")
    rewrite_batch(d, lambda doc: edit(doc["episodes"][0]))
    refused(d, r"openaigym\.trace\.0\.4242\.ep000000000\.json episode 0.*" + match)


def test_legacy_symlinked_bin_is_refused(make, tmp_path):
    d = make("legacy")
    _, binname = batch_names(d, 0)
    (d / binname).unlink()
    os.symlink(tmp_path / "outside" / "secret.bin", d / binname)
    refused(d, r"ep000000000\.bin: .*(cannot open|not a regular file)")
