"""repair() on files it cannot open, or in a directory it cannot change: a named error, and a
file that is merely unreadable is never taken for a damaged one.

Before, a batch whose .bin another user's umask had left unreadable (or a process out of file
descriptors) was "cannot open (Permission denied)": repair moved the intact batch aside and
rewrote the manifest without its episodes. And a read-only recording gave the raw
PermissionError of a temporary file's name.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gym_recorder import RecordingReader
from gym_recorder.format import fileio
from gym_recorder.errors import RepairError
from gym_recorder.integrity import repair, verify

from conftest import record_cartpole


def record(directory: Path, episodes: int = 4) -> None:
    record_cartpole(directory, episodes, target_batch_bytes=1_500)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(directory.rglob("*"))}


@pytest.mark.parametrize("code", [errno.EACCES, errno.EMFILE])
@pytest.mark.parametrize("which", ["bin", "json", "manifest"])
def test_a_file_that_cannot_be_opened_is_not_moved_aside(tmp_path, monkeypatch, code, which):
    record(tmp_path)
    with RecordingReader(tmp_path) as reader:
        episodes = len(reader)
    names = sorted(os.listdir(tmp_path))
    assert sum(n.endswith(".bin") for n in names) >= 2
    victim = next(n for n in names if n.endswith({"bin": ".bin", "json": "0.json",
                                                  "manifest": ".manifest.json"}[which]))
    before = snapshot(tmp_path)
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if os.path.basename(os.fspath(path)) == victim:
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(fileio.os, "open", refusing_open)
    with pytest.raises(RepairError, match=f"{victim}: cannot read .*repair changed nothing"):
        repair(tmp_path)
    assert snapshot(tmp_path) == before
    monkeypatch.undo()
    assert verify(tmp_path) == []
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == episodes


def _without_root_powers() -> list[str]:
    """A command prefix under which permissions hold (root ignores them), or skip."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def test_repair_of_a_read_only_recording_is_a_named_error_and_changes_nothing(tmp_path):
    rec = tmp_path / "rec"
    record(rec)
    bin_name = sorted(n for n in os.listdir(rec) if n.endswith(".bin"))[0]
    data = bytearray((rec / bin_name).read_bytes())
    data[0] ^= 0xFF  # a damaged array: repair has something to do
    (rec / bin_name).write_bytes(bytes(data))
    assert verify(rec)
    before = snapshot(rec)
    script = ("import sys\n"
              "from gym_recorder.errors import RepairError\n"
              "from gym_recorder.integrity import repair\n"
              "try:\n"
              "    repair(sys.argv[1])\n"
              "except RepairError as e:\n"
              "    print(e)\n"
              "    sys.exit(3)\n")
    os.chmod(rec, 0o555)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(_without_root_powers() + [sys.executable, "-c", script, str(rec)],
                              capture_output=True, text=True, env=env, timeout=120)
    finally:
        os.chmod(rec, 0o755)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(f"{rec}: repair stopped, writing into {rec}: Permission "
                                  "denied; the recording stays readable"), done.stdout
    assert snapshot(rec) == before
