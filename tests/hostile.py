"""Shared by the test_hostile_*.py files: hostile recordings, and reading them under guard.

Every crafted, truncated or corrupted file ends in our named error.

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
from gym_recorder import FormatError, RecordingReader, RecordingWrapper  # noqa: E402
from conftest import run_random  # noqa: E402
from test_legacy import LegacyWriter  # noqa: E402

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
    run_random(env, steps, seed=3, reset_seed=7)
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
    """Writes a gym-recording recording the old way: two episodes, one batch."""
    d.mkdir()
    rng = np.random.default_rng(0)
    LegacyWriter(d, LEGACY).write_batch([
        {"observations": rng.standard_normal((n + 1, 4)).astype(np.float32),
         "actions": rng.integers(0, 2, n), "rewards": np.ones(n)} for n in (5, 3)])
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
    recomputed, so that the reader gets past the integrity checks to the structure, and the
    manifest's batch index is left out (as ``repair`` leaves it out of a batch it rebuilds):
    these tests are of the batch JSON's rules, and an index that no longer says what the
    edited JSON says is refused as such (tests/test_read_damage.py).
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
        b.pop("index", None)
        save_manifest(d, man)


def edit_every_batch(directory: Path, mutate: Callable[[dict], Any]) -> None:
    """Rewrites every batch JSON through ``mutate(doc)``, with the manifest's json_size and
    json_crc32 kept right (and each batch index left out, see :func:`rewrite_batch`), so that
    only the edit itself is wrong."""
    (manifest,) = directory.glob("*.manifest.json")
    doc = json.loads(manifest.read_text())
    for batch in doc["batches"]:
        path = directory / batch["fn"]
        data = json.loads(path.read_text())
        mutate(data)
        raw = json.dumps(data).encode()
        path.write_bytes(raw)
        batch["json_size"], batch["json_crc32"] = len(raw), zlib.crc32(raw)
        batch.pop("index", None)
    manifest.write_text(json.dumps(doc))


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


def read_every_batch(d: Path, verify: bool = False) -> list:
    """Opens the reader and touches everything it offers batch by batch: spaces, and every
    batch decoded (RecordingReader.read_batch)."""
    with RecordingReader(d, verify=verify) as reader:
        reader.observation_space
        reader.action_space
        return [reader.read_batch(info) for info in reader.batches()]


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


FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def read_every_row(d: Path) -> list:
    """Opens the reader and reads every field of every episode by rows
    (RecordingReader.episode_rows), for the episodes that can be read so."""
    with RecordingReader(d) as reader:
        out = []
        for i in range(len(reader)):
            rows = reader.episode_rows(i)
            if rows is not None:
                out.append([rows.rows(name, 0, len(rows) + (name == "observations"))
                            for name in FIELDS])
        return out


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
        # Reading the recording batch by batch refuses it too, with a message naming a file.
        with guarded(d):
            with pytest.raises(FormatError) as info:
                read_every_batch(d, verify)
        assert any(n in str(info.value) for n in names), f"message names no file: {info.value}"
        if not verify:
            # Read by rows, it is refused the same way, or read as far as the rows go (what
            # is broken may lie elsewhere: infos, another field's values): never another error.
            with guarded(d):
                try:
                    read_every_row(d)
                except FormatError as e:
                    assert any(n in str(e) for n in names), f"message names no file: {e}"
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss
        assert grown < MAX_RSS_GROWTH_BYTES, f"peak RSS grew by {grown} bytes"
    return message
