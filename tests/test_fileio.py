"""gym_recorder.fileio on its own: strict JSON, safe opens, bounded JSON files and the CRC-32."""

import os
import zlib

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import FormatError, RecordingWrapper
from gym_recorder import fileio
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
