"""gym_recorder.format.fileio on its own: strict JSON, safe opens, bounded JSON files and the CRC-32."""

import os
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gym_recorder import FormatError, RecordingWrapper
from gym_recorder.format import fileio
from gym_recorder.format import MAX_JSON_BYTES


def test_dumps_is_compact_ascii_and_refuses_nan():
    assert fileio.dumps({"a": [1, 2.5], "é": None}) == b'{"a":[1,2.5],"\\u00e9":null}'
    with pytest.raises(ValueError):
        fileio.dumps({"x": float("nan")})


@pytest.mark.parametrize("data, match", [
    (b'{"x": NaN}', "not valid JSON"),
    (b'{"x": Infinity}', "not valid JSON"),
    (b'\xff{}', "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
], ids=["NaN", "Infinity", "not UTF-8", "deep"])
def test_loads_refuses_what_is_not_strict_json(data, match):
    with pytest.raises(FormatError, match=f"^f.json: {match}"):
        fileio.loads(data, "f.json")


def test_loads_refuses_oversized_documents_before_parsing():
    with pytest.raises(FormatError, match=f"more than {MAX_JSON_BYTES}"):
        fileio.loads(b" " * (MAX_JSON_BYTES + 1), "big.json")


def _standard_loads(data, where):
    """fileio.loads as it is without the ``fast`` extra (the standard json module only)."""
    saved = fileio._fast_json
    fileio._fast_json = None
    try:
        return fileio.loads(data, where)
    finally:
        fileio._fast_json = saved


def _typed(value):
    """A value with every number's type made part of it (so 1 != 1.0 != True compare unequal).

    Flat, in document order: Python 3.13's parsers (both) read lists nested 5000 deep, deeper
    than a recursive walk, or a comparison of nested tuples, may go.
    """
    tokens, todo = [], [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            tokens.append(("dict", list(v)))
            todo.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            tokens.append(("list", len(v)))
            todo.extend(reversed(v))
        elif isinstance(v, float):
            tokens.append(("float", v.hex()))
        else:
            tokens.append((type(v).__name__, v))
    return tokens


def _both(data):
    """(outcome with the fast decoder, outcome with the standard one): a value or an error text."""
    pytest.importorskip("msgspec")  # the test extra has it; the fast path is what is compared
    fileio.loads(b"0", "warm")  # resolves the fast decoder
    assert fileio._fast_json is not None
    out = []
    for loads in (fileio.loads, _standard_loads):
        try:
            out.append(("value", _typed(loads(data, "f.json"))))
        except FormatError as e:
            out.append(("error", str(e)))
    return out


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2 ** 70, 2 ** 70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_the_fast_json_decoder_gives_what_the_standard_one_gives(value):
    import json
    data = json.dumps(value).encode()  # ASCII: lone surrogates as \ud8xx escapes
    fast, standard = _both(data)
    assert fast == standard


@pytest.mark.parametrize("data", [
    b'{"a":1,"b":2,"a":3}', b"18446744073709551616", b"-9223372036854775809",
    b"1" * 400, b"1" * 5000, b"1e400", b"-1e400", b"0.1000000000000000055511151231257827",
    b"4.9e-324", b"2.4703282292062328e-324", b"-0", b"-0.0", b"1E2", b"[1.0, 1, true]",
    b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\u00e9\\u0000"', b"\xef\xbb\xbf1",
    b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\x01"', b"[1,]", b"01", b"1 2", b"\x0b1",
    b"NaN", b"-Infinity", b"[" * 300 + b"]" * 300, b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 300 + b"1" + b"}" * 300, b" [1]\r\n\t", b"",
])
def test_crafted_json_gives_the_same_value_or_error_with_either_decoder(data):
    fast, standard = _both(data)
    assert fast == standard


def test_a_recorded_batch_reads_back_with_its_bytes_and_size(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), str(tmp_path))
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    env.close()
    (manifest,) = [n for n in os.listdir(tmp_path) if n.endswith(".manifest.json")]
    data, doc = fileio.read_json_file(str(tmp_path / manifest), manifest)
    (batch,) = doc["batches"]
    path = str(tmp_path / batch["fn"])
    raw, entries = fileio.read_json_file(path, batch["fn"], batch["json_size"])
    assert fileio.crc32(raw) == zlib.crc32(raw) == batch["json_crc32"]
    assert entries["episodes"][0]["steps"] == 5
    with pytest.raises(FormatError, match=f"the manifest says {batch['json_size'] + 1}"):
        fileio.read_json_file(path, batch["fn"], batch["json_size"] + 1)


def test_crc32_matches_zlib_and_continues_a_running_value():
    data = np.arange(10_000, dtype=np.float32)
    assert fileio.crc32(data) == zlib.crc32(data)
    assert fileio.crc32(data[5000:], fileio.crc32(data[:5000])) == zlib.crc32(data)


def test_open_regular_refuses_symlinks_fifos_directories_and_missing_files(tmp_path):
    real = tmp_path / "real.json"
    real.write_bytes(b"{}")
    fd = fileio.open_regular(str(real), "real.json")
    assert os.read(fd, 10) == b"{}"
    os.close(fd)
    (tmp_path / "link.json").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dir.json").mkdir()
    for name, match in [("link.json", "cannot open"), ("fifo.json", "not a regular file"),
                        ("dir.json", "not a regular file"), ("gone.json", "cannot open")]:
        with pytest.raises(FormatError, match=f"^{name}: {match}"):
            fileio.open_regular(str(tmp_path / name), name)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027])
def test_atomic_write_gives_the_umask_permissions_and_leaves_no_temp(tmp_path, mask):
    old = os.umask(mask)
    try:
        with fileio.atomic_write(str(tmp_path / "f.json")) as f:
            f.write(b"{}")
        plain = tmp_path / "plain"
        plain.write_bytes(b"")  # what open() gives, for comparison
    finally:
        os.umask(old)
    assert (tmp_path / "f.json").read_bytes() == b"{}"
    assert (tmp_path / "f.json").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 \
        == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json", "plain"]


def test_atomic_write_that_fails_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"):
        with fileio.atomic_write(str(target)) as f:
            f.write(b"new")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.json"]
    with pytest.raises(FileExistsError):
        with fileio.atomic_write(str(target), overwrite=False) as f:
            f.write(b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.json"]


def test_building_renames_the_folder_into_place_or_leaves_nothing(tmp_path):
    from gym_recorder.errors import OutputExistsError
    from gym_recorder.format.fileio import building

    out = str(tmp_path / "sub" / "out")
    with building(out, "exporting") as tmp:
        assert os.path.dirname(tmp) == os.path.dirname(out) and not os.path.exists(out)
        os.mkdir(tmp)
        (Path(tmp) / "a.txt").write_text("a")
    assert sorted(os.listdir(tmp_path / "sub")) == ["out"]
    assert (Path(out) / "a.txt").read_text() == "a"

    other = str(tmp_path / "other")
    with pytest.raises(OutputExistsError, match=r"other appeared while importing; nothing was"):
        with building(other, "importing") as tmp:
            os.mkdir(tmp)
            os.mkdir(other)  # (another process made it meanwhile)
    assert sorted(os.listdir(tmp_path)) == ["other", "sub"] and os.listdir(other) == []

    with pytest.raises(KeyError):
        with building(str(tmp_path / "third"), "exporting") as tmp:
            os.mkdir(tmp)
            raise KeyError("the builder's own error")
    assert sorted(os.listdir(tmp_path)) == ["other", "sub"]
