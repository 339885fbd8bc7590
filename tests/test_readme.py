"""The README's shown commands still run and still print what the README shows.

As a newcomer walks the README: the first command (its install step aside) runs in a scratch
directory, then every ``$ gym-recorder ...`` line of the README's examples (as
``python -m gym_recorder``) and every Python snippet that needs only the core, in the README's
order and in that same directory, so that a snippet writing into a directory that later examples
read is caught. Each command's output is compared with the lines shown under it: writer
prefixes and the shortened ``--json`` output aside, byte counts within what a writer prefix's
pid moves them, and ``...`` standing for any lines. Commands that need an extra (plot, video) or
a person (Ctrl-C) are left out, and snippets that need torch, Ray or a server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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


def _fenced(text: str) -> list[tuple[str, list[str]]]:
    """The README's fenced blocks in order, as (language, lines)."""
    blocks, current, lang = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                blocks.append((lang, current))
                current = None
            continue
        if current is not None:
            current.append(line)
    return blocks


def _blocks(text: str) -> list[list[str]]:
    """The README's fenced blocks that are not Python, as lists of lines."""
    return [lines for lang, lines in _fenced(text) if lang != "python"]


# Snippets left out: they need torch, Ray (its own test: tests/test_ray.py) or an S3 server.
_SNIPPET_NEEDS = ("import torch", "gym_recorder.integrations.ray", "s3://")


def _runnable_snippet(lines: list[str]) -> bool:
    """A whole program (it imports what it uses) that needs only the core."""
    code = "\n".join(lines)
    return (bool(lines) and lines[0].startswith(("import ", "from "))
            and not any(need in code for need in _SNIPPET_NEEDS))


def _sessions(lines: list[str]) -> list[tuple[str, list[str]]]:
    sessions: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions and lines[0].startswith("$ "):
            sessions[-1][1].append(line)
    for _, shown in sessions:
        while shown and not shown[-1].strip():
            shown.pop()
    return sessions


def walk() -> list[tuple[str, object]]:
    """The README in order: ("python", code) for runnable snippets, ("session", (cmd, shown))."""
    steps: list[tuple[str, object]] = []
    for lang, lines in _fenced(README.read_text()):
        if lang == "python":
            if _runnable_snippet(lines):
                steps.append(("python", "\n".join(lines)))
        elif lang != "js":
            steps.extend(("session", session) for session in _sessions(lines))
    return steps


def shown_sessions() -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of the README with the output lines shown under it."""
    return [session for block in _blocks(README.read_text()) for session in _sessions(block)]


_BYTES = re.compile(r"([\d,]+) bytes|bytes on disk +([\d,]+)")


def _byte_counts(text: str) -> list[int]:
    return [int((a or b).replace(",", "")) for a, b in _BYTES.findall(text)]


def _bytes_close(shown: int, actual: int) -> bool:
    # A writer prefix holds the pid (its digits: about 55 bytes each in the CartPole recording)
    # and the manifest the hostname; anything beyond that is the README out of date.
    return abs(shown - actual) <= max(100, shown // 100)


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


def _first_command_steps() -> list[str]:
    first = _blocks(README.read_text())[0]
    assert len(first) == 1 and first[0].startswith('python -m pip install ".[fast]" && ')
    steps = first[0].split(" && ")[1:]
    assert steps and all(step.startswith("python -m gym_recorder ") for step in steps)
    return steps


def test_the_first_command_runs_without_its_install_step(tmp_path):
    steps = _first_command_steps()
    outputs = []
    for step in steps:
        r = _run(step, tmp_path)
        assert r.returncode == 0, (step, r.stderr)
        outputs.append(r.stdout)
    assert r.stdout.startswith("directory          recordings/cartpole\n")
    # The README quotes what its record step prints (in "### record").
    (quoted,) = re.findall(r"`(recorded 10 episodes, [^`]*)`", " ".join(README.read_text().split()))
    assert _pattern([quoted]).fullmatch(_normalise(outputs[0]) + "\n"), (quoted, outputs[0])
    (shown,), (actual,) = _byte_counts(quoted), _byte_counts(outputs[0])
    assert _bytes_close(shown, actual), (quoted, outputs[0])


def test_shown_commands_print_what_the_readme_shows(tmp_path):
    assert len(shown_sessions()) >= 10
    for step in _first_command_steps():  # what the newcomer has run before reading on
        assert _run(step, tmp_path).returncode == 0, step
    ran = snippets = 0
    last = None
    for kind, item in walk():
        if kind == "python":
            r = subprocess.run([sys.executable, "-c", item], cwd=tmp_path, capture_output=True,
                               text=True, timeout=300,
                               env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore"))
            assert r.returncode == 0, (item, r.stderr)
            snippets += 1
            continue
        command, shown = item
        if command == "echo $?":
            assert last is not None and [str(last.returncode)] == shown, command
            continue
        words = shlex.split(command)
        if words[0] not in ("gym-recorder", "python"):
            continue  # another program (the C reader: tests/test_c_reader.py runs it)
        if words[1] in LEFT_OUT or any(key in command for key in LEFT_OUT if " " in key):
            continue
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
        if "..." not in shown:
            said, got = _byte_counts("\n".join(shown)), _byte_counts(r.stdout + r.stderr)
            assert len(said) == len(got) and all(map(_bytes_close, said, got)), (
                command, said, got)
        if "tampered" not in command:
            assert r.returncode == 0, (command, r.stderr)
    assert ran >= 7
    assert snippets >= 4  # Record, Read, the tampering, Training, Vector environments


@pytest.mark.parametrize("key", sorted(LEFT_OUT))
def test_left_out_commands_are_in_the_readme(key):
    # (So that LEFT_OUT does not silently outlive the README lines it is about.)
    assert any(key in (command if " " in key else shlex.split(command)[1])
               for command, _ in shown_sessions())
