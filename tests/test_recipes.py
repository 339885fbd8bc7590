"""docs/recipes.md runs: its whole-program ```python blocks (those starting with an import) and
its `$ gym-recorder ...` lines, in the page's order, in one scratch directory, as a reader would
(the README tests compare the shown output too). Needs ale-py, gymnasium[mujoco] and the
[video] extra, as the page says."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from needs import need_module

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "recipes.md"


def _blocks(text):
    blocks, current, lang = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                blocks.append((lang, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_every_recipe_runs(tmp_path):
    for module, install in (("ale_py", "pip install ale-py"),
                            ("mujoco", 'pip install "gymnasium[mujoco]"'),
                            ("imageio_ffmpeg", 'pip install ".[video]"')):
        need_module(module, install)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore",
               SDL_VIDEODRIVER="dummy")
    env.pop("DISPLAY", None)
    ran = {"python": 0, "console": 0}
    for lang, lines in _blocks(PAGE.read_text()):
        if lang == "python":
            if not lines[0].startswith(("import ", "from ")):
                continue  # a fragment (the SB3 one needs torch)
            r = subprocess.run([sys.executable, "-c", "\n".join(lines)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, ("\n".join(lines), r.stderr)
            ran["python"] += 1
        elif lang == "console":
            for line in lines:
                if not line.startswith("$ gym-recorder ") or line.startswith("$ gym-recorder video"):
                    continue  # (the page's video command is the Python block's, run there)
                argv = [sys.executable, "-m", "gym_recorder", *shlex.split(line[2:])[1:]]
                r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                   timeout=300)
                assert r.returncode == 0, (line, r.stderr)
                ran["console"] += 1
    assert ran == {"python": 7, "console": 2}, ran
    assert (tmp_path / "cheetah.mp4").stat().st_size > 0
