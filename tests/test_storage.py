"""gym_recorder.read.storage: the one door the reader's bytes come through."""

import os
import threading

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from conftest import assert_same, run_random
from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.read import storage as storage_module
from gym_recorder.read.storage import LocalStorage, Storage, open_storage


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "b.json").write_bytes(b'{"x": 1}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.bin").symlink_to(tmp_path / "a.bin")
    return tmp_path


def test_list_names_only_regular_files(files):
    s = LocalStorage(files)
    assert s.list() == ["a.bin", "b.json"]
    assert isinstance(s, Storage)
    assert s.location == str(files)
    assert s.describe("a.bin") == os.path.join(str(files), "a.bin")


def test_sizes_and_ranges(files):
    s = LocalStorage(files)
    data = bytes(range(256)) * 4
    assert s.size("a.bin") == 1024
    assert s.read_range("a.bin", 100, 50) == data[100:150]
    assert s.read_range("a.bin", 1024, 0) == b""
    out = np.zeros(16, dtype=np.uint64)
    s.readinto("a.bin", 8, memoryview(out))
    assert out.tobytes() == data[8:136]
    assert s.read_bytes("b.json", 100) == b'{"x": 1}'
    s.close()


def test_missing_short_and_oversized_files_are_named_errors(files):
    s = LocalStorage(files)
    with pytest.raises(FormatError, match=r"^nope\.bin: cannot open"):
        s.size("nope.bin")
    with pytest.raises(FormatError, match=r"^a\.bin: EOF reading array data, expected 30 bytes "
                                          r"got 24"):
        s.read_range("a.bin", 1000, 30)
    with pytest.raises(FormatError, match=r"^b\.json: 8 bytes of JSON is more than 7"):
        s.read_bytes("b.json", 7)


def test_symlinks_fifos_and_directories_are_refused(files):
    s = LocalStorage(files)
    for name in ("link.bin", "sub"):
        with pytest.raises(FormatError, match=f"^{name}: "):
            s.read_range(name, 0, 1)
        with pytest.raises(FormatError, match=f"^{name}: "):
            s.read_bytes(name, 100)
    os.mkfifo(files / "fifo.bin")
    with pytest.raises(FormatError, match=r"^fifo\.bin: not a regular file"):
        s.size("fifo.bin")


def test_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no recording directory"):
        LocalStorage(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no recording directory"):
        RecordingReader(tmp_path / "missing")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_open_files_stay_bounded_and_close(tmp_path):
    names = [f"f{i}.bin" for i in range(3 * storage_module.MAX_OPEN_FILES)]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(bytes([i]) * 64)
    before = _fds()
    s = LocalStorage(tmp_path)
    for i, name in enumerate(names):
        assert s.read_range(name, 10, 3) == bytes([i]) * 3
        assert _fds() - before <= storage_module.MAX_OPEN_FILES
    s.close()
    assert _fds() == before
    assert s.read_range(names[0], 0, 1) == b"\0"  # reopens after close
    s.close()


def test_threads_reading_many_files_at_once_get_their_own_bytes(tmp_path):
    names = [f"f{i}.bin" for i in range(10)]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(np.full(1 << 16, i, dtype=np.uint8).tobytes())
    s = LocalStorage(tmp_path)
    errors = []

    def work(k):
        try:
            for j in range(300):
                i = (j * 7 + k) % len(names)
                out = np.empty(4096, dtype=np.uint8)
                s.readinto(names[i], (j * 4096) % (1 << 16), memoryview(out))
                if not (out == i).all():
                    errors.append((names[i], j))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.close()
    assert errors == []


def test_open_storage(tmp_path):
    assert isinstance(open_storage(tmp_path), LocalStorage)
    s = open_storage(f"file://{tmp_path}")
    assert isinstance(s, LocalStorage) and s.location == str(tmp_path)
    assert open_storage(s) is s
    with pytest.raises(ValueError, match="storage_options apply to URLs only"):
        open_storage(tmp_path, {"anon": True})


class MemoryStorage:
    """A second, real Storage: a recording's files held in memory, the directory gone."""

    def __init__(self, directory) -> None:
        self.location = f"memory:{directory}"
        self.files = {name: (directory / name).read_bytes() for name in os.listdir(directory)
                      if (directory / name).is_file()}
        self.calls: list[str] = []

    def _get(self, name: str) -> bytes:
        self.calls.append(name)
        if name not in self.files:
            raise FormatError(f"{name}: no such file")
        return self.files[name]

    def list(self) -> list[str]:
        return sorted(self.files)

    def size(self, name: str) -> int:
        return len(self._get(name))

    def read_bytes(self, name: str, limit: int) -> bytes:
        data = self._get(name)
        if len(data) > limit:
            raise FormatError(f"{name}: too large")
        return data

    def read_range(self, name: str, offset: int, size: int) -> bytes:
        data = self._get(name)[offset:offset + size]
        if len(data) != size:
            raise FormatError(f"{name}: short")
        return data

    def readinto(self, name: str, offset: int, out: memoryview) -> None:
        view = out.cast("B")
        view[:] = self.read_range(name, offset, view.nbytes)

    def describe(self, name: str) -> str:
        return f"{self.location}/{name}"

    def close(self) -> None:
        pass


def test_every_byte_the_reader_reads_comes_through_its_storage(tmp_path):
    """The recording is deleted from disk after loading it into a MemoryStorage; episodes,
    summaries and batches still read exactly as they did from the directory."""
    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=8, width=8,
                                    episode_length=120), d, target_batch_bytes=8_000)
    run_random(env, 400)
    env.close()
    with RecordingReader(d) as reader:
        want = list(reader)
        want_summaries = list(reader.summaries())
    memory = MemoryStorage(d)
    for name in os.listdir(d):
        os.remove(d / name)
    os.rmdir(d)
    with RecordingReader(memory, verify=True) as reader:
        assert reader.directory == memory.location
        assert len(reader) == len(want)
        for got, exp in zip(reader, want):
            for name in ("observations", "actions", "rewards", "infos", "end", "seed"):
                assert_same(getattr(got, name), getattr(exp, name), name)
        assert list(reader.summaries()) == want_summaries
        parts = [p for info in reader.batches() for p in reader.read_batch(info)]
        assert sum(len(p.rewards) for p in parts) == sum(ep.length for ep in want)
    assert any(name.endswith(".bin") for name in memory.calls)
    assert any(name.endswith(".manifest.json") for name in memory.calls)
