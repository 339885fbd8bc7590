"""The README's and the docs/ pages' shown commands still run and still print what they show.

Which pages: README.md, then every ``docs/*.md`` (found by glob when the tests are collected:
a page added to docs/ is run with no change here). Each page runs as a newcomer who read the
README's first command would run it: in a scratch directory of its own, the first command
(its install step aside) runs first, so that ``recordings/cartpole`` is there; then the page's
examples run in the page's order, in that same directory, so that a snippet writing into a
directory that later examples read is caught.

The conventions a page follows (README.md and docs/*.md alike):

- A ```python block whose first line is an import (``import ...`` / ``from ...``) is a whole
  program: it runs, and must exit 0 (an ``assert`` in it is a check). A ```python block that
  starts otherwise is a fragment, shown and not run (other tests exec some of them with the
  names they need, found by a marker through ``docpages.python_block``). Snippets that need
  torch, Ray or an S3 server (``_SNIPPET_NEEDS``) are left out.
- Any other block (```console, or unlabelled) whose first line starts with ``$ `` is a shell
  session: each ``$ gym-recorder ...`` line runs as ``python -m gym_recorder ...`` and each
  ``$ python ...`` line with this interpreter, and the lines under it, up to the next ``$``,
  are what it prints (stdout and stderr). They are compared after normalising: writer
  prefixes, byte counts (within what a writer prefix's pid moves them), Minari's root and
  ``file:///tmp/`` URLs (rewritten into the scratch directory); ``...`` on a line of its own
  stands for any lines; ``^C`` is the terminal's echo of Ctrl-C; no lines shown means it
  prints nothing. A ``--json`` command's output is shown shortened: the keys shown must be in
  it. ``$ echo $?`` checks the previous command's exit status. A command must exit 0 unless it
  is about a tampered recording. Commands of other programs (``$ readers/c/build/grread``:
  tests/test_c_reader.py) are not run here; commands that need an extra (plot, video) or a
  person (Ctrl-C, a server) are left out (``LEFT_OUT``).
- ```js and ```text blocks are not run.
- Every relative link (``[text](path)``, ``[text](path#heading)``) must point to a file of the
  checkout, and to a heading of that page when it names one (GitHub's anchors); the README
  links every docs/ page.

The README's two commands at the top stay first: the first installs and records, the second
installs the test extra and runs the tests, exactly the line ``.ci/run`` runs.
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

from docpages import README, ROOT, fenced, pages, without_fences

PAGES = pages()
# Commands that need more than the core and the local disk, and why.
LEFT_OUT = {"plot": "needs the [plot] extra", "video": "needs the [video] extra",
            "view": "a server: runs until Ctrl-C (tests/test_view_server.py runs it)",
            "--episodes 1000000": "stopped by Ctrl-C"}
_PREFIX = re.compile(r"openaigym\.trace\.[0-9T]+\.[0-9]+\.[0-9a-f]+")


def _blocks(text: str) -> list[list[str]]:
    """A page's fenced blocks that are not Python, as lists of lines."""
    return [lines for lang, lines in fenced(text) if lang != "python"]


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


def walk(page: Path) -> list[tuple[str, object]]:
    """A page in order: ("python", code) for runnable snippets, ("session", (cmd, shown))."""
    steps: list[tuple[str, object]] = []
    for lang, lines in fenced(page.read_text()):
        if lang == "python":
            if _runnable_snippet(lines):
                steps.append(("python", "\n".join(lines)))
        elif lang not in ("js", "text"):
            steps.extend(("session", session) for session in _sessions(lines))
    return steps


def shown_sessions(page: Path) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` of a page with the output lines shown under it."""
    return [session for kind, session in walk(page) if kind == "session"]  # type: ignore[misc]


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
    elif argv[0] == "python":
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


def test_the_two_commands_come_first_and_the_second_is_what_ci_runs():
    text = README.read_text()
    first, second = [lines for lang, lines in fenced(text)][:2]
    assert text.index("```") < text.index("\n## "), "the two commands come before any section"
    assert len(second) == 1 and second[0] == 'python -m pip install ".[test]" && python -m pytest'
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert second[0] in [line.strip() for line in ci], ".ci/run runs another test command"


def test_the_first_command_runs_without_its_install_step(tmp_path):
    steps = _first_command_steps()
    outputs = []
    for step in steps:
        r = _run(step, tmp_path)
        assert r.returncode == 0, (step, r.stderr)
        outputs.append(r.stdout)
    assert r.stdout.startswith("directory          recordings/cartpole\n")
    # The README quotes what its record step prints.
    (quoted,) = re.findall(r"`(recorded 10 episodes, [^`]*)`", " ".join(README.read_text().split()))
    assert _pattern([quoted]).fullmatch(_normalise(outputs[0]) + "\n"), (quoted, outputs[0])
    (shown,), (actual,) = _byte_counts(quoted), _byte_counts(outputs[0])
    assert _bytes_close(shown, actual), (quoted, outputs[0])


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_shown_commands_print_what_the_page_shows(page, tmp_path):
    for step in _first_command_steps():  # what the newcomer has run before reading on
        assert _run(step, tmp_path).returncode == 0, step
    last = None
    for kind, item in walk(page):
        if kind == "python":
            r = subprocess.run([sys.executable, "-c", item], cwd=tmp_path, capture_output=True,
                               text=True, timeout=300,
                               env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore"))
            assert r.returncode == 0, (_page_id(page), item, r.stderr)
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
        if "--json" in command:  # shown shortened: the keys shown are there
            assert r.returncode == 0, r.stderr
            doc = json.loads(r.stdout)
            keys = re.findall(r'^  "(\w+)":', "\n".join(shown), re.MULTILINE)
            assert keys and all(k in doc for k in keys), (command, keys)
            continue
        printed = r.stdout + r.stderr
        actual = _normalise(printed) + "\n" if printed.strip() else ""
        assert _pattern(shown).fullmatch(actual), (
            f"{_page_id(page)}: {command}\n--- the page shows:\n" + "\n".join(shown)
            + "\n--- it prints:\n" + actual)
        if "..." not in shown:
            said, got = _byte_counts("\n".join(shown)), _byte_counts(r.stdout + r.stderr)
            assert len(said) == len(got) and all(map(_bytes_close, said, got)), (
                command, said, got)
        if "tampered" not in command:
            assert r.returncode == 0, (command, r.stderr)


def test_the_pages_show_enough_to_run():
    # (So that a change of the conventions above, or of the pages' fences, cannot silently make
    # the walk above run nothing.)
    steps = [step for page in PAGES for step in walk(page)]
    assert sum(kind == "session" for kind, _ in steps) >= 15
    # Record, Read, the reader in depth, the format by hand, the tampering, Training, Vector envs
    assert sum(kind == "python" for kind, _ in steps) >= 7
    readme = [kind for kind, _ in walk(README)]
    assert readme.count("python") >= 2  # Record and Read


@pytest.mark.parametrize("key", sorted(LEFT_OUT))
def test_left_out_commands_are_on_a_page(key):
    # (So that LEFT_OUT does not silently outlive the page lines it is about.)
    assert any(key in (command if " " in key else shlex.split(command)[1])
               for page in PAGES for command, _ in shown_sessions(page))


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to -."""
    anchors: set[str] = set()
    for line in without_fences(page.read_text()).splitlines():
        heading = re.match(r"#{1,6} +(.*?)#*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            n = 1
            base = slug
            while slug in anchors:  # a repeated heading gets -1, -2, ...
                slug, n = f"{base}-{n}", n + 1
            anchors.add(slug)
    return anchors


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_relative_links_point_to_files_and_headings(page):
    text = without_fences(page.read_text())
    links = [target for target in _LINK.findall(text)
             if "://" not in target and not target.startswith("mailto:")]
    for target in links:
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        assert where.exists(), f"{_page_id(page)}: {target} points to no file"
        assert where.is_relative_to(ROOT), f"{_page_id(page)}: {target} leaves the checkout"
        if anchor and where.suffix == ".md":
            assert anchor in _anchors(where), f"{_page_id(page)}: {target}: no such heading"


def test_readme_links_to_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve()
              for t in _LINK.findall(without_fences(README.read_text()))}
    assert not [p.name for p in PAGES[1:] if p.resolve() not in linked]
