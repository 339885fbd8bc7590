"""The C reader (readers/c), written from the spec alone, agrees with RecordingReader.

The tests build ``grread`` with ``-fsanitize=address,undefined`` in a temporary directory, run it
over recordings written here (CartPole, images, Dict/Tuple, Text, several writers, episodes in
several parts, a vector env, OpenAI gym-recording files) and check that it lists the same
episodes and gives the same bytes (dtype, shape, CRC-32 of every array; Text rows) as
:class:`gym_recorder.RecordingReader`. Then every hostile file of ``tests/test_hostile*.py`` is
fed to it too: where RecordingReader raises FormatError, grread must exit 1 with one line on
stderr, and never trip a sanitizer.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import needs

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # sample_envs lives beside gym_recorder
    sys.path.insert(0, str(ROOT))

import sample_envs  # noqa: E402,F401  (registers the sample env ids)
from gym_recorder import FormatError, RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.record.vector import RecordingVectorWrapper  # noqa: E402

SOURCE = ROOT / "readers" / "c"
# A sanitizer report makes grread exit with this status (never 0, 1 or 2).
SANITIZER_STATUS = 99
SANITIZER_ENV = {
    "ASAN_OPTIONS": f"detect_leaks=1:exitcode={SANITIZER_STATUS}",
    "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:exitcode={SANITIZER_STATUS}",
    "LSAN_OPTIONS": f"exitcode={SANITIZER_STATUS}",
}
TIMEOUT = 120


# ---------------------------------------------------------------------------------------------
# Building and running grread


def _need_jansson() -> None:
    if not any(os.path.exists(os.path.join(d, "jansson.h"))
               for d in ("/usr/include", "/usr/local/include")):
        needs._missing("needs jansson's headers (apt-get install libjansson-dev)")


@pytest.fixture(scope="session")
def grread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """grread built from readers/c with the Makefile's asan target, in a temporary directory."""
    needs.need_program("cc", "apt-get install gcc")
    needs.need_program("make", "apt-get install make")
    _need_jansson()
    build = tmp_path_factory.mktemp("grread-build")
    done = subprocess.run(["make", "-f", str(SOURCE / "Makefile"), "asan", f"BUILD={build}"],
                          cwd=build, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-Werror" in done.stdout and "-fsanitize=address,undefined" in done.stdout
    return build / "grread"


def run(grread: Path, *args: str) -> subprocess.CompletedProcess:
    # (PYTEST_CURRENT_TEST holds the test's id, which for some hostile cases is too long for
    # the environment of a new process.)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(SANITIZER_ENV)
    done = subprocess.run([str(grread), *args], capture_output=True, text=True, timeout=TIMEOUT,
                          env=env)
    assert done.returncode != SANITIZER_STATUS and "Sanitizer" not in done.stderr, done.stderr
    return done


def c_lines(grread: Path, *args: str) -> list[dict]:
    done = run(grread, *args)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


# ---------------------------------------------------------------------------------------------
# What RecordingReader gives, in grread's terms


def _fields(name: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            _fields(f"{name}/{key}", sub, out)
    elif isinstance(value, tuple):
        for i, sub in enumerate(value):
            _fields(f"{name}/{i}", sub, out)
    else:
        out[name] = value


def python_view(directory: Path, verify: bool = False) -> tuple[list[dict], list[dict]]:
    """The episodes (as ``grread list`` prints them) and arrays (as ``grread dump``)."""
    episodes, arrays = [], []
    with RecordingReader(directory, verify=verify) as reader:
        for ep in reader:
            episodes.append({"index": ep.index, "writer": ep.writer, "steps": ep.length,
                             "end": ep.end, "seed": ep.seed})
            fields: dict[str, Any] = {}
            _fields("observations", ep.observations, fields)
            _fields("actions", ep.actions, fields)
            for name in ("rewards", "terminations", "truncations"):
                fields[name] = getattr(ep, name)
            for name, value in fields.items():
                line: dict[str, Any] = {"episode": ep.index, "field": name}
                if isinstance(value, np.ndarray):
                    data = np.ascontiguousarray(value).tobytes()
                    line.update(dtype=value.dtype.str, shape=list(value.shape),
                                crc32=zlib.crc32(data))
                else:
                    line["values"] = value
                arrays.append(line)
    return episodes, arrays


def assert_same_as_python(grread: Path, directory: Path, verify: bool = True) -> list[dict]:
    """grread lists the same episodes and dumps the same arrays as RecordingReader (and the
    same with --verify, unless ``verify`` is false)."""
    episodes, arrays = python_view(directory)
    listed = c_lines(grread, "list", str(directory))
    assert [{k: e[k] for k in ("index", "writer", "steps", "end", "seed")} for e in listed] \
        == episodes
    dumped = c_lines(grread, "dump", str(directory))
    python_values = [a for a in arrays if "values" in a]
    c_values = [a for a in dumped if "values" in a]
    assert len(c_values) == len(python_values)
    for c, p in zip(c_values, python_values):
        assert (c["episode"], c["field"]) == (p["episode"], p["field"])
        if all(isinstance(v, str) for v in p["values"]):  # Text rows
            assert c["values"] == p["values"]
        else:
            assert len(c["values"]) == len(p["values"])
    assert [a for a in dumped if "values" not in a] == [a for a in arrays if "values" not in a]
    if verify:
        assert c_lines(grread, "--verify", "dump", str(directory)) == dumped
    assert dumped, "nothing was compared"
    return dumped


# ---------------------------------------------------------------------------------------------
# Recordings the suite writes


def record(directory: Path, env_id: str, steps: int, *, prefix: str | None = None,
           target: int = 5_000_000, seed: int = 0, compression: Any = None,
           **kwargs: Any) -> None:
    env = RecordingWrapper(gym.make(env_id, **kwargs), directory, file_prefix=prefix,
                           target_batch_bytes=target, compression=compression)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def batches_of(directory: Path) -> list[int]:
    with RecordingReader(directory) as reader:
        return [w["batches"] for w in reader.writers]


def test_cartpole(grread, tmp_path):
    record(tmp_path, "CartPole-v1", 300)
    dumped = assert_same_as_python(grread, tmp_path)
    assert {d["field"] for d in dumped} == {"observations", "actions", "rewards",
                                            "terminations", "truncations"}


def test_values_match_numpy(grread, tmp_path):
    """--values prints every element in C order: float32 widened exactly, ints, bools."""
    record(tmp_path, "CartPole-v1", 40)
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        for field in ("observations", "actions", "rewards", "terminations"):
            (line,) = c_lines(grread, "dump", str(tmp_path), "0", field, "--values")
            expected = getattr(ep, field)
            assert line["values"] == expected.reshape(-1).tolist()
            assert line["shape"] == list(expected.shape)


def test_images_in_several_parts(grread, tmp_path):
    record(tmp_path, "sample_envs/Image-v0", 120, target=60_000, height=32, width=32)
    assert batches_of(tmp_path)[0] > 3
    with RecordingReader(tmp_path) as reader:
        assert reader[0].observations.dtype == np.uint8
    listed = c_lines(grread, "list", str(tmp_path))
    assert max(e["parts"] for e in listed) > 1, "no episode spans several batches"
    assert_same_as_python(grread, tmp_path)


@pytest.mark.parametrize("delta", ["none", "xor", "sub"])
def test_compressed_images_in_several_parts(grread, tmp_path, delta):
    """zstd-compressed leaves (format version 2), each delta coding, episodes in parts."""
    pytest.importorskip("zstandard")
    from gym_recorder import Zstd

    record(tmp_path, "sample_envs/Image-v0", 120, target=60_000, height=32, width=32,
           compression=Zstd(chunk_rows=3, delta=delta))
    doc = json.loads(next(tmp_path.glob("*.ep000000000.json")).read_text())
    assert doc["version"] == 2 and "codec" in doc["episodes"][0]["observations"]
    assert max(e["parts"] for e in c_lines(grread, "list", str(tmp_path))) > 1
    assert_same_as_python(grread, tmp_path)


def test_compressed_hostile(grread, tmp_path):
    """An unknown codec is refused by name; a flipped stored byte fails --verify; a frame
    declaring another size is refused."""
    pytest.importorskip("zstandard")
    record(tmp_path, "sample_envs/Image-v0", 30, height=16, width=16, compression="zstd")
    path = next(tmp_path.glob("*.ep000000000.json"))
    text = path.read_text()
    manifest = next(tmp_path.glob("*.manifest.json"))
    man = json.loads(manifest.read_text())

    def put(new_text: str) -> None:
        path.write_text(new_text)
        man["batches"][0]["json_size"] = len(new_text.encode())
        man["batches"][0]["json_crc32"] = zlib.crc32(new_text.encode())
        manifest.write_text(json.dumps(man))

    put(text.replace('"name":"zstd"', '"name":"lz9"', 1))
    done = run(grread, "dump", str(tmp_path))
    assert done.returncode != 0 and "unknown codec 'lz9'" in done.stderr
    put(text)
    ref = json.loads(text)["episodes"][0]["observations"]
    binf = next(tmp_path.glob("*.ep000000000.bin"))
    data = bytearray(binf.read_bytes())
    data[ref["npyoff"] + ref["stored"] - 3] ^= 0x55
    binf.write_bytes(bytes(data))
    done = run(grread, "--verify", "dump", str(tmp_path))
    assert done.returncode != 0 and "CRC-32" in done.stderr
    done = run(grread, "dump", str(tmp_path))  # without --verify: refused or decoded, no crash
    assert done.returncode in (0, 1)


def test_dict_and_tuple_spaces(grread, tmp_path):
    record(tmp_path, "sample_envs/NestedDict-v0", 60, target=3000)
    dumped = assert_same_as_python(grread, tmp_path)
    assert any(d["field"].count("/") >= 2 for d in dumped), "no nested leaf"


def test_text(grread, tmp_path):
    record(tmp_path, "sample_envs/Text-v0", 40)
    dumped = assert_same_as_python(grread, tmp_path)
    assert any("values" in d and d["values"] and all(isinstance(v, str) for v in d["values"])
               for d in dumped)


def test_changing_infos(grread, tmp_path):
    record(tmp_path, "sample_envs/ChangingInfo-v0", 60, target=2000)
    assert_same_as_python(grread, tmp_path)


def test_several_writers_in_one_directory(grread, tmp_path):
    record(tmp_path, "CartPole-v1", 80, prefix="b-writer", seed=1)
    record(tmp_path, "CartPole-v1", 80, prefix="a-writer", seed=2)
    record(tmp_path, "sample_envs/Text-v0", 20, prefix="c-writer", seed=3)
    listed = assert_same_as_python(grread, tmp_path)
    writers = [e["writer"] for e in c_lines(grread, "list", str(tmp_path))]
    # Ordered by the manifest's "created", not by prefix.
    assert writers.index("b-writer") < writers.index("a-writer") < writers.index("c-writer")
    assert listed


def test_vector_env(grread, tmp_path):
    env = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=3,
                                              vectorization_mode="sync"),
                                 tmp_path, target_batch_bytes=2000)
    env.reset(seed=0)
    for _ in range(60):
        env.step(env.action_space.sample())
    env.close()
    assert_same_as_python(grread, tmp_path)


@pytest.mark.parametrize("space_dtype, value", [
    (np.float32, np.array([0.5, 0.25])),                    # float64 values: f4 -> f8
    (np.int16, np.array([70000, -3], dtype=np.int32)),      # i2 -> i4
    (np.uint8, np.array([-1, 7], dtype=np.int8)),           # u1 + i1 -> i2
])
def test_a_leaf_widened_in_one_part(grread, tmp_path, space_dtype, value):
    """An episode whose parts store a leaf in different dtypes: numpy's result_type of them."""
    from test_spec_rules import ValueEnv

    inner = ValueEnv(length=6)
    inner.observation_space = gym.spaces.Box(0, 100, (2,), space_dtype)
    inner.obs = {t: np.full(2, t, space_dtype) for t in range(7)}
    inner.obs[3] = value
    env = RecordingWrapper(inner, tmp_path)
    env.reset()
    for _ in range(4):
        env.step(0)
    env.flush()  # the episode goes on in a second part, in a batch of the space's dtype
    for _ in range(2):
        env.step(0)
    env.close()
    assert c_lines(grread, "list", str(tmp_path))[0]["parts"] == 2
    dumped = assert_same_as_python(grread, tmp_path)
    (obs,) = [d for d in dumped if d["field"] == "observations"]
    assert obs["dtype"] == np.result_type(space_dtype, value.dtype).str != np.dtype(
        space_dtype).str


def test_parts_that_join_only_by_rounding_are_refused(grread, tmp_path):
    """int64 beyond 2**53 in one part, float64 in the next: RecordingReader gives the rows
    exactly (a list); grread refuses the leaf with one line rather than round it."""
    from test_spec_rules import ValueEnv

    inner = ValueEnv(length=6)
    inner.observation_space = gym.spaces.Box(-2**62, 2**62, (2,), np.int64)
    inner.obs = {t: np.full(2, 2**53 + 1 + t, np.int64) for t in range(7)}
    inner.obs[4] = np.full(2, 4, np.int64)
    inner.obs[5] = np.array([0.5, 0.25])
    inner.obs[6] = np.full(2, 6, np.int64)
    env = RecordingWrapper(inner, tmp_path)
    env.reset()
    for _ in range(3):
        env.step(0)
    env.flush()
    for _ in range(3):
        env.step(0)
    env.close()
    with RecordingReader(tmp_path) as reader:
        got = reader[0].observations
    assert isinstance(got, list) and [g.tolist() for g in got] == [
        inner.obs[t].tolist() for t in range(7)]
    assert [g.dtype.str for g in got] == ["<i8"] * 4 + ["<f8"] * 3  # (part 2 widened)
    done = run(grread, "dump", str(tmp_path), "0", "observations")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "would round some of its integers" in done.stderr


def test_a_box_of_no_elements_and_empty_numpy_strings(grread, tmp_path):
    """A Box of shape (2, 0) has bounds [] (whatever its shape); np.str_("") infos are <U1."""
    from test_spec_rules import ValueEnv

    inner = ValueEnv(length=2)
    inner.observation_space = gym.spaces.Box(0, 1, (2, 0), np.float32)
    inner.obs = {t: np.zeros((2, 0), np.float32) for t in range(3)}
    inner.infos = {0: {"s": np.str_(""), "b": np.bytes_(b"")}}
    with RecordingWrapper(inner, tmp_path) as env:
        env.reset(seed=0)
        env.step(0)
        env.step(0)
    dumped = assert_same_as_python(grread, tmp_path)
    (obs,) = [d for d in dumped if d["field"] == "observations"]
    assert obs["shape"] == [3, 2, 0]


def test_legacy_gym_recording(grread, tmp_path):
    """Two gym-recording writers: stacked arrays, one image array per step, a reset-only episode
    whose actions and rewards are np.array([[]])."""
    from test_legacy import make_legacy

    written = make_legacy(tmp_path)
    dumped = assert_same_as_python(grread, tmp_path)
    assert len({d["episode"] for d in dumped}) == len(written) == 6
    shapes = {(d["episode"], d["field"]): (d["dtype"], d["shape"]) for d in dumped}
    assert shapes[(4, "observations")] == ("|u1", [5, 6, 5, 3])  # one array per step, stacked
    assert shapes[(2, "actions")] == ("<f8", [0])                # np.array([[]]): no actions


def test_legacy_and_new_writers_in_one_directory(grread, tmp_path):
    from test_legacy import make_legacy

    make_legacy(tmp_path)
    record(tmp_path, "CartPole-v1", 50)
    listed = c_lines(grread, "list", str(tmp_path))
    assert listed[0]["writer"].startswith("openaigym.trace.0.") and listed[-1]["seed"] is None
    assert_same_as_python(grread, tmp_path)


def test_missing_directory_and_usage(grread, tmp_path):
    done = run(grread, "list", str(tmp_path / "nope"))
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert run(grread, "frobnicate").returncode == 2
    record(tmp_path / "cp", "CartPole-v1", 20)
    done = run(grread, "dump", str(tmp_path / "cp"), "999")
    assert done.returncode == 1 and "out of range" in done.stderr


# ---------------------------------------------------------------------------------------------
# The hostile files of tests/test_hostile*.py, fed to grread as well

_GRREAD: list[Path] = []
_C_RUNS: list[Path] = []  # hostile recordings grread was run over, in the current test


def _c_refuses(d: Path, verify_modes: tuple[bool, ...]) -> None:
    _C_RUNS.append(d)
    for verify in verify_modes:
        args = ["--verify"] if verify else []
        done = run(_GRREAD[0], *args, "dump", str(d))
        assert done.returncode == 1, (
            f"grread {'--verify ' if verify else ''}read a recording that RecordingReader "
            f"refuses (exit {done.returncode}, stderr {done.stderr!r})")
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("grread: "), done.stderr


def _hostile_modules() -> list[Any]:
    names = sorted(p.stem for p in Path(__file__).parent.glob("test_hostile*.py"))
    return [importlib.import_module(n) for n in names]


_HOSTILE = _hostile_modules()
_ORIGINAL_REFUSED = {m.__name__: m.refused for m in _HOSTILE if hasattr(m, "refused")}
_ORIGINAL_READ = {m.__name__: m.read_everything for m in _HOSTILE
                  if hasattr(m, "read_everything")}


def _refused_by_both(module_name: str):
    original = _ORIGINAL_REFUSED[module_name]

    def refused(d: Path, match: str, *, error: type[Exception] = FormatError,
                verify_modes: tuple[bool, ...] = (False, True)) -> str:
        message = original(d, match, error=error, verify_modes=verify_modes)
        _c_refuses(d, verify_modes)
        return message

    return refused


def _read_by_both(module_name: str):
    original = _ORIGINAL_READ[module_name]

    def read_everything(d: Path, verify: bool = False) -> list:
        out = original(d, verify)
        # RecordingReader read it (an edit the format allows): grread must read it the same.
        _C_RUNS.append(d)
        assert_same_as_python(_GRREAD[0], d, verify)
        return out

    return read_everything


@pytest.fixture
def c_hostile(grread, monkeypatch):
    """Makes every hostile module's ``refused`` also run grread over the hostile file (and its
    ``read_everything``, where a test expects the edited recording to read), and fails the test
    if grread never ran (the hostile module no longer calls its own helpers)."""
    _GRREAD[:] = [grread]
    _C_RUNS.clear()
    for module in _HOSTILE:
        if module.__name__ in _ORIGINAL_REFUSED:
            monkeypatch.setattr(module, "refused", _refused_by_both(module.__name__))
        if module.__name__ in _ORIGINAL_READ:
            monkeypatch.setattr(module, "read_everything", _read_by_both(module.__name__))
    yield
    assert _C_RUNS, "the hostile test did not go through refused(): grread was not run"


def _with_grread(fn: Any) -> Any:
    """The hostile test ``fn`` (same parameters and marks) with grread checking it too."""
    @functools.wraps(fn)
    def test(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return pytest.mark.usefixtures("c_hostile")(test)


def _hostile_tests() -> dict[str, Any]:
    """Every hostile test that ends in ``refused(...)``, re-collected here under test_c_*."""
    out = {}
    for module in _HOSTILE:
        for name, fn in vars(module).items():
            if name.startswith("test_") and callable(fn) and "refused(" in inspect.getsource(fn):
                out["test_c_" + name[len("test_"):]] = _with_grread(fn)
        for fixture in ("sources", "make"):
            if hasattr(module, fixture):
                out.setdefault(fixture, getattr(module, fixture))
    return out


_REUSED = _hostile_tests()
globals().update(_REUSED)


def test_the_hostile_cases_are_reused():
    """If the hostile tests move, this file must follow them rather than silently test less."""
    assert sum(name.startswith("test_c_") for name in _REUSED) >= 40


def _grow_every_other(obs: np.ndarray) -> np.ndarray:
    # CartPole's (4,) float32, but from the 6th observation on, every other one a (5,) float64:
    # outside the space
    _grow_every_other.n += 1  # type: ignore[attr-defined]
    n = _grow_every_other.n  # type: ignore[attr-defined]
    return np.append(obs, 1.5) if n > 5 and n % 2 else obs


def test_values_outside_the_space(grread, tmp_path):
    """An array leaf stored as values (issue 10.5): grread gives every row with its own dtype
    and shape, the bytes RecordingReader gives; an episode whose parts store the leaf both ways
    is refused with one line (this reader does not join them)."""
    import warnings

    from gymnasium.wrappers import TransformObservation

    _grow_every_other.n = 0  # type: ignore[attr-defined]
    inner = TransformObservation(gym.make("CartPole-v1"), _grow_every_other,
                                 gym.make("CartPole-v1").observation_space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with RecordingWrapper(inner, tmp_path, target_batch_bytes=400) as env:
            env.reset(seed=3)
            env.action_space.seed(3)  # (deterministic: 60 steps make at least 2 episodes)
            for _ in range(60):
                *_, term, trunc, _ = env.step(env.action_space.sample())
                if term or trunc:
                    env.reset()
    with RecordingReader(tmp_path) as reader:
        episodes = list(reader)
    assert len(episodes) >= 2 and isinstance(episodes[1].observations, list)
    done = run(grread, "dump", str(tmp_path), "0", "observations")  # began as arrays
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "both as arrays and as values" in done.stderr
    for ep in episodes[1:]:
        (line,) = c_lines(grread, "dump", str(tmp_path), str(ep.index), "observations")
        assert len(line["values"]) == len(ep.observations)
        for ref, row in zip(line["values"], ep.observations):
            assert ref["__type"] == "ndarray" and ref["dtype"] == row.dtype.str
            assert ref["shape"] == list(row.shape)
            got = np.fromfile(tmp_path / ref["npyfile"], dtype=ref["dtype"],
                              count=int(np.prod(ref["shape"])), offset=ref["npyoff"])
            assert np.array_equal(got.reshape(ref["shape"]), row)
        (rewards,) = c_lines(grread, "dump", str(tmp_path), str(ep.index), "rewards")
        assert rewards["crc32"] == zlib.crc32(ep.rewards.tobytes())


# ---------------------------------------------------------------------------------------------
# Hostile recordings grread alone tripped over (a sanitizer report, a crash): each must be
# refused with one line, or read as RecordingReader reads it


def _edit_batches(directory: Path, mutate: Any) -> None:
    from hostile import edit_every_batch

    edit_every_batch(directory, mutate)


def _c_refused(grread: Path, directory: Path, match: str) -> None:
    for args in (["dump"], ["--verify", "dump"], ["list"]):
        done = run(grread, *args, str(directory))
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert match in done.stderr, done.stderr


def test_c_steps_beyond_64_bits_when_counting_rows(grread, tmp_path):
    """'steps' 2**63 - 1: part 0 has steps + 1 rows, which overflowed int64 (UBSan)."""
    record(tmp_path, "CartPole-v1", 30)

    def huge_steps(doc: dict) -> None:
        doc["episodes"][0]["steps"] = 2**63 - 1

    _edit_batches(tmp_path, huge_steps)
    _c_refused(grread, tmp_path, "'steps' must be an integer in [0, 2^48]")


def test_c_first_plus_len_beyond_64_bits(grread, tmp_path):
    """A batch whose first + len passes 2**63 - 1 overflowed int64 (UBSan); a len larger than
    its json_size is refused up front, as the spec says and RecordingReader does."""
    record(tmp_path, "CartPole-v1", 30, target=1500)
    (manifest,) = tmp_path.glob("*.manifest.json")
    doc = json.loads(manifest.read_text())
    last = doc["batches"][-1]
    assert last["first"] > 0
    last["len"] = 2**63 - 1
    manifest.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="cannot fit a batch JSON"):
        RecordingReader(tmp_path).close()
    _c_refused(grread, tmp_path, "cannot fit a batch JSON")
    last["len"] = last["json_size"] + 1
    manifest.write_text(json.dumps(doc))
    _c_refused(grread, tmp_path, "cannot fit a batch JSON")


class _WideDictEnv(gym.Env):
    """A Dict observation space of 70 Box keys (more leaves than grread's old search stack)."""

    observation_space = gym.spaces.Dict(
        {f"k{i:02d}": gym.spaces.Box(0, 1, (2,), np.float32) for i in range(70)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return self.observation_space.sample(), 1.0, False, False, {}


def test_c_a_dict_of_many_keys(grread, tmp_path):
    """A Dict of 70 leaves: grread looked leaves up through a stack of 66 slots, skipped the
    ones it did not reach and divided by their zero item size (UBSan)."""
    env = RecordingWrapper(_WideDictEnv(), tmp_path)
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    env.close()
    dumped = assert_same_as_python(grread, tmp_path)
    assert len({d["field"] for d in dumped}) == 70 + 4


def test_c_an_array_larger_than_its_file_is_refused_before_allocating(grread, tmp_path):
    """A MultiBinary leaf of 2**32 elements a row, whose 64 GiB per episode the .bin does not
    hold: grread allocated the episode's array before checking it against the file (ASan:
    allocator out of memory), for gym-recording files (a 1 TiB array) as well."""
    from test_legacy import make_legacy

    new, legacy = tmp_path / "new", tmp_path / "legacy"
    record(new, "CartPole-v1", 30)
    (manifest,) = new.glob("*.manifest.json")
    doc = json.loads(manifest.read_text())
    doc["observation_space"] = {"type": "MultiBinary", "n": [2**32]}
    manifest.write_text(json.dumps(doc))

    def huge_rows(doc: dict) -> None:
        for entry in doc["episodes"]:
            obs = entry["observations"]
            obs.update(shape=[obs["shape"][0], 2**32], size=obs["shape"][0] * 2**32,
                       dtype="|i1")

    _edit_batches(new, huge_rows)
    _c_refused(grread, new, "lie outside")
    legacy.mkdir()
    make_legacy(legacy)
    path = legacy / "openaigym.trace.0.1234.ep000000000.json"
    doc = json.loads(path.read_text())
    doc["episodes"][0]["observations"].update(shape=[2**40], size=2**40, dtype="uint8")
    path.write_text(json.dumps(doc))
    _c_refused(grread, legacy, "lie outside")


def test_c_a_shape_whose_byte_count_wraps_64_bits(grread, tmp_path):
    """2**40 elements of <U4194304 (2**24 bytes each): 2**64 bytes, which wrapped to 0 in
    grread's check, so it took the array as 0 bytes; RecordingReader refuses it."""
    record(tmp_path, "CartPole-v1", 20)

    def wrapping_options(doc: dict) -> None:
        entry = doc["episodes"][0]
        entry["options"] = {"a": {"__type": "ndarray", "shape": [2**40], "order": "C",
                                  "dtype": "<U4194304", "npyfile": entry["rewards"]["npyfile"],
                                  "npyoff": 0, "size": 0, "crc32": 0}}

    _edit_batches(tmp_path, wrapping_options)
    with pytest.raises(FormatError, match="too many elements"):
        with RecordingReader(tmp_path) as reader:
            reader[0]
    _c_refused(grread, tmp_path, "too many elements")


def test_c_a_multiagent_recording_is_refused_by_name(grread, tmp_path):
    """Format version 2 (PettingZoo recordings): grread refuses it with one line naming it;
    a single-agent writer beside it does not make it read the multi-agent one."""
    tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    from gym_recorder.record.multiagent import RecordingAECWrapper

    env = RecordingAECWrapper(tictactoe.env(), tmp_path)
    env.reset(seed=0)
    for _ in range(3):
        env.step(int(np.flatnonzero(env.last()[0]["action_mask"])[0]))
    env.close()
    for args in (("list",), ("dump",)):
        done = run(grread, *args, str(tmp_path))
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "multi-agent (PettingZoo) recording" in done.stderr
