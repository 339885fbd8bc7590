"""The command line among other processes: a reader that closes the pipe early, SIGTERM.

Before, ``gym-recorder info rec | head -1`` printed ``error: [Errno 32] Broken pipe`` and
exited 1, and SIGTERM (``kill``, ``timeout``, ``docker stop``, a batch scheduler) ended
``record`` as a crash does, losing the steps not yet committed.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_recorder import RecordingReader, cli

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")


@pytest.mark.parametrize("extra", [["--limit", "0"], ["--json"]])
def test_info_into_a_closed_pipe_exits_quietly(tmp_path, extra):
    d = tmp_path / "rec"
    # ~1,500 table rows: more than a pipe holds, so info writes after the reader has gone.
    assert cli.main(["record", "CartPole-v1", "-d", str(d), "--episodes", "1500", "--seed", "0",
                     "-q"]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "gym_recorder", "info", str(d), *extra],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # as `head -1`: one line, then the pipe is closed
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == ""


def test_an_output_error_that_is_not_a_closed_pipe_is_still_reported(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    d = tmp_path / "rec"
    assert cli.main(["record", "CartPole-v1", "-d", str(d), "--episodes", "3", "--seed", "0",
                     "-q"]) == 0
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gym_recorder", "info", str(d)], env=ENV,
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1
    assert "No space left on device" in done.stderr


def test_record_stops_cleanly_on_sigterm_and_keeps_every_step(tmp_path):
    d = tmp_path / "rec"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_recorder", "record", "CartPole-v1", "-d", str(d),
         "--episodes", "10000000", "--seed", "0"], env=ENV, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until a manifest lists a batch: recording is on
            manifests = glob.glob(str(d / "*.manifest.json"))
            try:
                if manifests and json.loads(Path(manifests[0]).read_text())["batches"]:
                    break
            except (OSError, ValueError, KeyError):
                pass  # being replaced right now
            time.sleep(0.05)
        else:
            pytest.fail("record wrote nothing within 30 s")
        time.sleep(0.5)  # steps buffered, not yet committed (flush interval 10 s)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gym-recorder record: terminated (SIGTERM); kept "), err
    ended = int(lines[0].split("kept ")[1].split(" episodes")[0].replace(",", ""))
    with RecordingReader(d) as reader:
        assert reader.writers[0]["complete"] is True  # the recorder was closed
        summaries = list(reader.summaries())
    assert len(summaries) == ended + 1
    assert [s.end for s in summaries[:-1]] == ["terminated"] * ended
    assert summaries[-1].end == "close"
