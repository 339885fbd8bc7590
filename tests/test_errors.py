"""gym_recorder/errors.py: every named error and warning lives there, and the old homes still work."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gym_recorder import errors

PACKAGE = Path(errors.__file__).resolve().parent


def _defined_classes() -> dict[str, str]:
    """Each public class of the package whose name ends in Error or Warning: where it is defined."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and node.name.endswith(("Error", "Warning", "Needed"))):
                found[node.name] = str(path.relative_to(PACKAGE))
    return found


def test_every_named_error_is_defined_in_errors_py():
    classes = _defined_classes()
    assert {"ExportError", "ReplayError", "MixedEnvsWarning", "FormatError"} <= set(classes)
    assert {name: where for name, where in classes.items() if where != "errors.py"} == {}
    assert sorted(classes) == sorted(n for n in errors.__all__ if isinstance(
        getattr(errors, n), type))


def test_every_error_is_a_recorder_error_or_warning():
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type):
            assert issubclass(cls, (errors.RecorderError, errors.RecorderWarning)), name


@pytest.mark.parametrize("module, name", [
    ("gym_recorder.integrations.export", "ExportError"),
    ("gym_recorder.integrations.export", "MissingExtraError"),
    ("gym_recorder.replay.run", "ReplayError"),
    ("gym_recorder.read.envgroups", "MixedEnvsWarning"),
])
def test_moved_errors_stay_importable_from_their_old_modules(module, name):
    import importlib

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_require_extra_names_the_extra_to_install():
    assert errors.require_extra("json", "fast").dumps([1]) == "[1]"
    with pytest.raises(errors.MissingExtraError, match=r'no_such_module_0x is not installed; '
                       r'install it with: python -m pip install "\.\[plot\]"') as caught:
        errors.require_extra("no_such_module_0x", "plot")
    assert isinstance(caught.value, ImportError)
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
