"""Requirements of tests on programs and optional packages: skip on a developer's machine, fail in CI.

A test that needs a program (node, chromium, cc) or an optional package (ray, pyarrow, minari...)
calls :func:`need_program` or :func:`need_module` first. Where the thing is missing, the test is
skipped with a reason that says how to get it, except when the environment variable ``CI`` is set:
there the test fails, so that CI never passes by skipping what it was meant to run.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: this test must run in CI)", pytrace=False)
    pytest.skip(reason)


def need_module(name: str, install: str) -> ModuleType:
    """Imports and returns module ``name``, or skips (fails under CI) saying how to install it.

    Args:
        name: the module to import, e.g. ``"pyarrow.parquet"``.
        install: what installs it, e.g. ``'pip install ".[arrow]"'``.
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        _missing(f"needs {name} ({install}): {e}")
        raise  # unreachable: _missing raises


def need_program(name: str, install: str) -> str:
    """Returns the path of program ``name`` on PATH, or skips (fails under CI).

    Args:
        name: the program, e.g. ``"node"``.
        install: what installs it, e.g. ``"apt-get install nodejs"``.
    """
    path = shutil.which(name)
    if path is None:
        _missing(f"needs the program {name} ({install})")
    return path  # type: ignore[return-value]
