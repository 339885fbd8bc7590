"""The source distribution: it holds every file the tests need, and installs and tests on its own.

``python -m build --sdist`` builds the sdist from this checkout (or from an unpacked sdist: the
same test runs there). Its file list is compared with what is under ``tests/``, ``benchmarks/``,
``sample_envs/`` and ``docs/`` (``git ls-files`` in a checkout, the files on disk otherwise), so a
file left out of ``MANIFEST.in`` fails here. Then the unpacked sdist is installed into a scratch
folder put first on the path (its dependencies are this environment's: nothing is downloaded)
and some of its own tests run from the unpacked copy. The classifiers claim only the platform
CI runs on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from needs import need_module

ROOT = Path(__file__).resolve().parent.parent
# Directories whose every file the sdist must carry: the tests, their data, the benchmarks, the
# C reader that test_c_reader.py builds, the documentation pages the README tests run, the
# examples, and CI's script.
REQUIRED_DIRS = ("tests", "benchmarks", "sample_envs", "readers", "docs", "examples", ".ci")
REQUIRED_FILES = ("README.md", "LICENSE", "setup.cfg", "pyproject.toml", "MANIFEST.in",
                  "gym_recorder/py.typed", "gym_recorder/__init__.py")
DIST_NAME = "gymnasium_recorder"


def _source_files() -> set[str]:
    """Files under REQUIRED_DIRS, relative to ROOT: git's list in a checkout, else the disk's."""
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(["git", "ls-files", "--", *REQUIRED_DIRS], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        # (git lists files deleted in the work tree until they are staged as deleted.)
        return {line for line in out.splitlines() if line and (ROOT / line).is_file()}
    found = set()
    for d in REQUIRED_DIRS:
        for dirpath, dirnames, filenames in os.walk(ROOT / d):
            dirnames[:] = [n for n in dirnames if n not in ("__pycache__", ".hypothesis")]
            for name in filenames:
                if not name.endswith((".pyc", ".pyo")):
                    found.add(str((Path(dirpath) / name).relative_to(ROOT)).replace(os.sep, "/"))
    return found


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_module("build", 'pip install ".[test]"')
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: build with this interpreter's setuptools (no download); a copy of the
    # tree keeps the checkout free of build/ and *.egg-info.
    src = tmp_path_factory.mktemp("src") / "tree"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", ".hypothesis", ".pytest_cache", "build", "dist", "*.egg-info",
        "recordings"))
    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation",
                           "--outdir", str(out), str(src)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # (setuptools before 69.3 keeps the hyphen of the name; later ones normalise it.)
    (path,) = [p for p in out.glob("*.tar.gz") if p.name.replace("-", "_").startswith(DIST_NAME)]
    return path


def _members(path: Path) -> set[str]:
    with tarfile.open(path) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    top = {n.split("/", 1)[0] for n in names}
    assert len(top) == 1, top  # everything under one <name>-<version>/ folder
    return {n.split("/", 1)[1] for n in names}


def test_sdist_holds_every_file_the_tests_need(sdist: Path) -> None:
    members = _members(sdist)
    expected = _source_files()
    assert "tests/conftest.py" in expected and "sample_envs/envs.py" in expected
    assert "readers/c/Makefile" in expected and "readers/c/grread.c" in expected
    assert "docs/cli.md" in expected
    missing = sorted(expected - members)
    assert not missing, f"left out of the sdist (add them to MANIFEST.in): {missing}"
    assert not [f for f in REQUIRED_FILES if f not in members]
    assert not [m for m in members if "__pycache__" in m or m.endswith(".pyc")]


@pytest.mark.stress  # (about 15 s: an install and three test files)
def test_sdist_installs_and_its_tests_pass(sdist: Path, tmp_path: Path) -> None:
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (unpacked,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    # Installed with this interpreter's pip into a scratch folder (no deps, no downloads), which
    # then comes first on the path: the dependencies are this environment's, venv or not.
    target = tmp_path / "site"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(target), str(unpacked)],
        capture_output=True, text=True, env=clean, timeout=300)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    clean["PYTHONPATH"] = str(target)
    python = sys.executable
    where = subprocess.run(
        [python, "-c", "import gym_recorder, os; d = os.path.dirname(gym_recorder.__file__);"
         " print(d); print(os.path.exists(os.path.join(d, 'py.typed')))"],
        capture_output=True, text=True, env=clean, cwd=tmp_path, timeout=60)
    assert where.returncode == 0, where.stderr
    package_dir, typed = where.stdout.split()
    assert Path(package_dir).resolve().is_relative_to(target.resolve()), package_dir
    assert typed == "True"
    cli = subprocess.run([python, "-m", "gym_recorder", "--version"], capture_output=True,
                         text=True, env=clean, cwd=tmp_path, timeout=60)
    assert cli.returncode == 0 and cli.stdout.startswith("gym-recorder "), cli
    # The sdist's own tests, run from the unpacked copy, with its conftest and sample envs.
    # (test_c_reader's first test builds readers/c from the sdist's own copy, when cc and
    # jansson are there; it skips otherwise, and fails under CI.)
    tests = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_smoke.py",
         "tests/test_sample_envs.py", "tests/test_integrity.py",
         "tests/test_c_reader.py::test_cartpole"],
        capture_output=True, text=True, env=clean, cwd=unpacked, timeout=600)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout.splitlines()[-1]


def test_classifiers_claim_only_the_platform_ci_runs_on() -> None:
    # .ci/run installs with apt-get: Linux. macOS and Windows are not tested, so not claimed.
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    systems = [c.strip() for c in cfg["metadata"]["classifiers"].splitlines()
               if c.strip().startswith("Operating System")]
    assert systems == ["Operating System :: POSIX :: Linux"]
