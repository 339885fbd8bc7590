"""The command line where a newcomer meets it: each command run as a user would (``python -m
gym_recorder`` in a subprocess), checking the exit status and the exact message."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gym_recorder import RecordingReader

ROOT = Path(__file__).resolve().parent.parent
DIRECTORY_COMMANDS = {
    "info": [], "replay": [], "verify": [], "repair": [],
    "plot": ["-o", "x.png"], "video": ["-o", "x.gif"], "export": ["-o", "x.npz"]}


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "gym_recorder", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


# -- 7: a policy's bad action is named -------------------------------------------------------

def test_policy_action_outside_the_space_is_named(tmp_path):
    (tmp_path / "pol.py").write_text("def two(obs):\n    return 2\n\n"
                                     "def broken(obs):\n    return 1 / 0\n")
    r = run("record", "CartPole-v1", "-d", "rec", "--policy", "pol.py:two", "--seed", "0",
            cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "gym-recorder record: error: policy returned 2, which is not in Discrete(2)"]
    r = run("record", "CartPole-v1", "-d", "rec2", "--policy", "pol.py:broken", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "gym-recorder record: error: policy pol.py:broken raised ZeroDivisionError: "
        "division by zero"]


def test_vector_policy_bad_batch_is_named(tmp_path):
    (tmp_path / "pol.py").write_text("import numpy as np\n"
                                     "def bad(obs):\n    return np.array([0, 5])\n")
    r = run("record", "CartPole-v1", "-d", "rec", "--num-envs", "2", "--policy", "pol.py:bad",
            cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "gym-recorder record: error: policy returned [0, 5], which is not in "
        "MultiDiscrete([2 2])"]


# -- 8: --traceback anywhere ------------------------------------------------------------------

@pytest.mark.parametrize("where", ["before", "after"])
def test_traceback_before_or_after_the_command(tmp_path, where):
    args = (["--traceback", "info", "missing"] if where == "before"
            else ["info", "missing", "--traceback"])
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback (most recent call last):")
    assert r.stderr.splitlines()[-1] == (
        "gym_recorder.errors.CommandError: missing: no such directory")
    plain = run("info", "missing", cwd=tmp_path)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr


# -- 9: a missing directory, an empty one ----------------------------------------------------

@pytest.mark.parametrize("command", sorted(DIRECTORY_COMMANDS))
def test_missing_directory_same_one_line(tmp_path, command):
    r = run(command, "nowhere", *DIRECTORY_COMMANDS[command], cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"gym-recorder {command}: error: nowhere: no such directory"]
    assert r.stdout == ""
    (tmp_path / "afile").write_text("x")
    r = run(command, "afile", *DIRECTORY_COMMANDS[command], cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"gym-recorder {command}: error: afile: not a directory"]


def test_info_on_a_directory_without_a_recording(tmp_path):
    (tmp_path / "empty").mkdir()
    for extra in ([], ["--json"]):
        r = run("info", "empty", *extra, cwd=tmp_path)
        assert r.returncode == 1
        assert r.stderr.splitlines() == ["gym-recorder info: error: no recording in empty"]
        assert r.stdout == ""


# -- 10: grammar ------------------------------------------------------------------------------

def test_one_episode_one_step(tmp_path):
    r = run("record", "sample_envs/FixedLength-v0", "-d", "rec", "--episodes", "1", "--seed",
            "0", "--env-kwargs", '{"episode_length": 1}', "--file-prefix", "w", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("recorded 1 episode, 1 step of sample_envs/FixedLength-v0 ")
    r = run("info", "rec", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "    0  w  1 episode, 1 batch, complete" in r.stdout.splitlines()
    r = run("replay", "rec", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["episode 0: match (1 step)",
                                     "1 episode replayed: 1 match, 0 mismatch, 0 skipped"]
    r = run("export", "rec", "-o", "rec.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "wrote rec.npz: 1 episode, 1 step"


# -- 12: progress without tqdm on a terminal --------------------------------------------------

NO_TQDM = """
import sys
sys.modules["tqdm"] = None  # as if tqdm were not installed
from gym_recorder import cli
from gym_recorder.cli import record as cli_record
cli_record.PLAIN_PROGRESS_INTERVAL = 0.2
sys.exit(cli.main(sys.argv[1:]))
"""


def test_plain_progress_lines_on_a_terminal_without_tqdm(tmp_path):
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-c", NO_TQDM, "record", "CartPole-v1", "-d", "rec",
                             "--steps", "60000", "--seed", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    err = b""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        elif proc.poll() is not None:
            break
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    assert out.startswith("recorded ") and ", 60,000 steps of CartPole-v1" in out
    lines = err.decode().replace("\r\n", "\n").splitlines()
    pattern = re.compile(r"gym-recorder record: [\d,]+/60,000 steps, [\d,]+ episodes?, "
                         r"\d+\.\d\d MB written, [\d,]+ steps/s")
    assert lines and all(pattern.fullmatch(line) for line in lines), lines
    steps = [int(line.split()[2].split("/")[0].replace(",", "")) for line in lines]
    assert steps == sorted(steps) and steps[-1] <= 60000


# -- 13: replay's step numbers, one name for the total reward ---------------------------------

def test_replay_states_its_step_numbering(tmp_path):
    from test_cli import change_action

    r = run("record", "CartPole-v1", "-d", "rec", "--episodes", "3", "--seed", "0",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    change_action(tmp_path / "rec", episode=1, step=2)  # the action of the 3rd env.step
    r = run("replay", "rec", cwd=tmp_path)
    assert r.returncode == 1
    line = r.stdout.splitlines()[1]
    assert line.startswith("episode 1: MISMATCH at step 3 of ")
    assert "(step 0 is the reset, 1 the first step): " in line
    help_text = run("replay", "--help", cwd=tmp_path).stdout
    assert "step 0 is the reset, step 1 the first env.step" in " ".join(help_text.split())


def test_total_reward_is_one_name_in_text_json_and_code(tmp_path):
    r = run("record", "CartPole-v1", "-d", "rec", "--episodes", "3", "--seed", "0",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with RecordingReader(tmp_path / "rec") as reader:
        totals = [reader.summary(i).total_reward for i in range(len(reader))]
        assert [ep.total_reward for ep in reader] == totals
    doc = json.loads(run("info", "rec", "--json", cwd=tmp_path).stdout)
    assert [row["total_reward"] for row in doc["episode_table"]] == totals
    assert doc["total_reward_mean"] == sum(totals) / 3
    assert doc["total_reward_min"] == min(totals) and doc["total_reward_max"] == max(totals)
    assert not any("return" in key for key in doc)
    text = run("info", "rec", cwd=tmp_path).stdout.splitlines()
    assert any(line.startswith("total_reward       mean ") for line in text)
    assert any(line.split()[:3] == ["episode", "length", "total_reward"] for line in text)
