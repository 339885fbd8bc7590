"""The README's shown commands still run and still print what the README shows.

Every ``$ gym-recorder ...`` line of the README's examples is run in order in a scratch directory
(as ``python -m gym_recorder``), and its output is compared with the lines shown under it:
writer prefixes, byte counts and the shortened ``--json`` output aside, and ``...`` standing for
any lines. Commands that need an extra (plot, video) or a person (Ctrl-C) are left out; so is
the install step of the first command, whose other commands run as given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Commands that need more than the core and the local disk, and why.
LEFT_OUT = {"plot": "needs the [plot] extra", "video": "needs the [video] extra",
            "view": "a server: runs until Ctrl-C (tests/test_view_server.py runs it)",
            "--episodes 1000000": "stopped by Ctrl-C"}
_PREFIX = re.compile(r"openaigym\.trace\.[0-9T]+\.[0-9]+\.[0-9a-f]+")


def _blocks(text: str) -> list[list[str]]:
    """The README's fenced blocks that are not Python, as lists of lines."""
    blocks, current, lang = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                if lang != "python":
                    blocks.append(current)
                current = None
            continue
        if current is not None:
            current.append(line)
    return blocks


def shown_sessions() -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the README with the output lines shown under it."""
    sessions: list[tuple[str, list[str]]] = []
    for block in _blocks(README.read_text()):
        for line in block:
            if line.startswith("$ "):
                sessions.append((line[2:], []))
            elif sessions and block[0].startswith("$ "):
                sessions[-1][1].append(line)
    for _, shown in sessions:
        while shown and not shown[-1].strip():
            shown.pop()
    return sessions


def _normalise(text: str) -> str:
    text = _PREFIX.sub("PREFIX", text)
    text = re.sub(r"file://\S*/remote/", "file:///tmp/remote/", text)  # (push's scratch URL)
    text = re.sub(r"\S*/\.minari/datasets/", "MINARI_ROOT/", text)  # (where Minari's root is)
    text = re.sub(r"[\d,]+ bytes", "N bytes", text)
    text = re.sub(r"bytes on disk .*", "bytes on disk", text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def _pattern(shown: list[str]) -> re.Pattern[str]:
    parts = []
    for line in shown:
        line = line.removeprefix("^C")  # the terminal's echo of Ctrl-C
        parts.append(r"(?:.*\n)*?" if line.strip() == "..." else re.escape(_normalise(line))
                     + r"\n")
    return re.compile("".join(parts), re.DOTALL)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = [a.replace("file:///tmp/", f"file://{cwd}/") for a in shlex.split(command)]
    if argv[0] == "gym-recorder":
        argv = [sys.executable, "-m", "gym_recorder", *argv[1:]]
    elif argv[:3] == ["python", "-m", "gym_recorder"]:
        argv = [sys.executable, *argv[1:]]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore",
               MINARI_DATASETS_PATH=str(cwd / ".minari" / "datasets"))  # not the user's own
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _tamper(directory: Path) -> None:
    """What the README did to recordings/tampered: flip the action of episode 1's step 3."""
    from test_cli import change_action

    shutil.copytree(directory.parent / "cartpole", directory)
    change_action(directory, episode=1, step=2)


def test_the_first_command_runs_without_its_install_step(tmp_path):
    first = _blocks(README.read_text())[0]
    assert len(first) == 1 and first[0].startswith('python -m pip install ".[fast]" && ')
    steps = first[0].split(" && ")[1:]
    assert steps and all(step.startswith("python -m gym_recorder ") for step in steps)
    for step in steps:
        r = _run(step, tmp_path)
        assert r.returncode == 0, (step, r.stderr)
    assert r.stdout.startswith("directory          recordings/cartpole\n")


def test_shown_commands_print_what_the_readme_shows(tmp_path):
    sessions = shown_sessions()
    assert len(sessions) >= 10
    ran = 0
    last = None
    for command, shown in sessions:
        if command == "echo $?":
            assert last is not None and [str(last.returncode)] == shown, command
            continue
        words = shlex.split(command)
        if words[0] not in ("gym-recorder", "python"):
            continue  # another program (the C reader: tests/test_c_reader.py runs it)
        if words[1] in LEFT_OUT or any(key in command for key in LEFT_OUT if " " in key):
            continue
        if "recordings/tampered" in command:
            _tamper(tmp_path / "recordings" / "tampered")
        last = r = _run(command, tmp_path)
        ran += 1
        if "--json" in command:  # shown shortened: the keys shown are there
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            keys = re.findall(r'^  "(\w+)":', "\n".join(shown), re.MULTILINE)
            assert keys and all(k in doc for k in keys), (command, keys)
            continue
        actual = _normalise(r.stdout + r.stderr) + "\n"
        assert _pattern(shown).fullmatch(actual), (
            f"{command}\n--- README shows:\n" + "\n".join(shown) + "\n--- it prints:\n" + actual)
        if "tampered" not in command:
            assert r.returncode == 0, (command, r.stderr)
    assert ran >= 7


@pytest.mark.parametrize("key", sorted(LEFT_OUT))
def test_left_out_commands_are_in_the_readme(key):
    # (So that LEFT_OUT does not silently outlive the README lines it is about.)
    assert any(key in (command if " " in key else shlex.split(command)[1])
               for command, _ in shown_sessions())
