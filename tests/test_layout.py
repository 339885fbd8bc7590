"""The package's layout: every module has a home among the tests, and is named by its wing.

A module of ``gym_recorder`` *has a home* when

1. a test file is named for it: ``tests/test_<name>.py`` or ``tests/test_<wing>_<name>.py``
   (``<name>`` the module's name without a leading underscore; a wing's ``__init__`` is named
   by the wing), or
2. :data:`HOMES` names the test file(s) that cover it (a module driven through another one's
   entry point: ``minari_export`` through ``minari_io``, the CLI's parser through ``main``).

Either way each test file must exist and must *reach* the module: the module is among those the
test file imports (``import gym_recorder.x``, ``from gym_recorder.x import name``, a name
imported from a package counting for the module that defines it, and the imports of the test's
own helper modules), or among those they import in turn, following the package's own imports
(module-level and function-local alike). A package's ``__init__`` is reached with any of its
modules (importing one runs it), but its own imports are not followed from there. The scripts a
test runs count as imported: ``python -m gym_recorder`` (``__main__``), and a child script held
in a string. A new module with neither a test named for it nor a line in
:data:`HOMES` fails here, and so does a line that names a file that does not reach its module.

The second test checks that each wing's ``__init__`` docstring names every module of the wing
(``format``'s, whose docstring is the format's specification, are named in the package's own
docstring), so that a newcomer finds the module that owns each step from the docstrings alone.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gym_recorder"
TESTS = ROOT / "tests"

# Module (dotted) -> the test files that cover it, for modules with no test file named for them.
HOMES: dict[str, tuple[str, ...]] = {
    "gym_recorder": ("test_smoke.py", "test_roundtrip.py"),
    "gym_recorder.__main__": ("test_cli_os.py",),
    "gym_recorder._version": ("test_packaging.py",),
    # the command line, driven through main()
    "gym_recorder.cli.inspect": ("test_cli.py",),
    "gym_recorder.cli.output": ("test_cli.py",),
    "gym_recorder.cli.parser": ("test_cli.py", "test_cli_newcomer.py"),
    "gym_recorder.cli.record": ("test_cli.py", "test_cli_newcomer.py"),
    # editing
    "gym_recorder.edit.compact": ("test_edit.py", "test_edit_compressed.py"),
    "gym_recorder.edit.copies": ("test_edit.py",),
    "gym_recorder.edit.episodes": ("test_edit.py",),
    "gym_recorder.edit.health": ("test_edit_hostile.py",),
    "gym_recorder.edit.join": ("test_edit.py",),
    "gym_recorder.edit.log": ("test_edit.py", "test_edit_crash.py"),
    "gym_recorder.edit.rewrite": ("test_edit.py", "test_edit_compressed.py"),
    "gym_recorder.edit.select": ("test_edit.py",),
    # the format
    "gym_recorder.format": ("test_spec_rules.py", "test_hostile_arrays.py"),
    "gym_recorder.format.constants": ("test_spec_rules.py",),
    "gym_recorder.format.names": ("test_spec_rules.py", "test_hostile_names.py"),
    "gym_recorder.format.refs": ("test_spec_rules.py", "test_hostile_arrays.py"),
    "gym_recorder.format.rules": ("test_spec_rules.py", "test_stepindex.py"),
    "gym_recorder.format._zstd": ("test_compress.py",),
    "gym_recorder.format.agents": ("test_multiagent.py",),
    "gym_recorder.format.codecs": ("test_compress.py",),
    "gym_recorder.format.edits": ("test_edit.py", "test_edit_hostile.py"),
    "gym_recorder.format.envspec": ("test_env_replay_spec.py", "test_env_gym_wrappers.py"),
    "gym_recorder.format.layout": ("test_spaces.py",),
    "gym_recorder.format.rebuild": ("test_env_replay_spec.py", "test_replay_skip_wrapper.py"),
    # integrations
    "gym_recorder.integrations": ("test_cloud.py",),
    "gym_recorder.integrations.export": ("test_leaf_names.py", "test_empty_episodes.py"),
    "gym_recorder.integrations.infocolumns": ("test_info_columns.py",),
    "gym_recorder.integrations.minari_env": ("test_minari_env_spec.py",),
    "gym_recorder.integrations.minari_export": ("test_minari_io.py",),
    "gym_recorder.integrations.minari_import": ("test_minari_io.py",),
    "gym_recorder.integrations.npz": ("test_leaf_names.py", "test_info_columns.py"),
    "gym_recorder.integrations.parquet_card": ("test_parquet.py",),
    "gym_recorder.integrations.push": ("test_cloud.py",),
    "gym_recorder.integrations.ray_blocks": ("test_ray.py",),
    "gym_recorder.integrations.ray_columns": ("test_ray.py", "test_ray_columns.py"),
    "gym_recorder.integrations.ray_record": ("test_ray.py",),
    "gym_recorder.integrations.summary": ("test_metadata.py", "test_empty_episodes.py"),
    "gym_recorder.integrations.video": ("test_video_stream.py",),
    "gym_recorder.integrations.view": ("test_view_server.py", "test_view_page.py"),
    "gym_recorder.integrations.view_handler": ("test_view_server.py",),
    # integrity
    "gym_recorder.integrity._checks": ("test_integrity.py",),
    "gym_recorder.integrity._repair": ("test_integrity.py", "test_repair_access.py"),
    "gym_recorder.integrity._salvage": ("test_repair_salvage.py",),
    # human play
    "gym_recorder.play.episodes": ("test_play.py",),
    "gym_recorder.play.keys": ("test_play.py",),
    "gym_recorder.play.loop": ("test_play.py",),
    "gym_recorder.play.window": ("test_play.py",),
    # reading
    "gym_recorder.read": ("test_reader_parts.py",),
    "gym_recorder.read.agents": ("test_multiagent_read.py",),
    "gym_recorder.read.assemble": ("test_reader_parts.py", "test_column.py"),
    "gym_recorder.read.batchfile": ("test_decode.py", "test_read_damage.py"),
    "gym_recorder.read.batchindex": ("test_stepindex.py", "test_read_damage.py"),
    "gym_recorder.read.bulk": ("test_column.py", "test_reader_summary.py", "test_batches.py"),
    "gym_recorder.read.entries": ("test_decode.py", "test_read_damage.py"),
    "gym_recorder.read.envgroups": ("test_env_mixed_dirs.py",),
    "gym_recorder.read.episode": ("test_roundtrip.py",),
    "gym_recorder.read.manifest": ("test_decode.py", "test_edit.py"),
    "gym_recorder.read.outside": ("test_env_outside_space.py",),
    "gym_recorder.read.reader": ("test_roundtrip.py", "test_iterate.py"),
    "gym_recorder.read.rows": ("test_episode_rows.py",),
    "gym_recorder.read.wholecolumn": ("test_column.py", "test_training.py"),
    # recording
    "gym_recorder.record": ("test_roundtrip.py",),
    "gym_recorder.record.agent_rows": ("test_multiagent.py",),
    "gym_recorder.record.batch": ("test_writer_policies.py",),
    "gym_recorder.record.binsink": ("test_encode.py", "test_writer_columns.py"),
    "gym_recorder.record.prefix": ("test_writer_policies.py", "test_ray.py"),
    "gym_recorder.record.session": ("test_env_mixed_dirs.py", "test_env_fork.py"),
    "gym_recorder.record.shell": ("test_vector_policies.py", "test_env_copies.py"),
    "gym_recorder.record.vector_buffer": ("test_vector.py", "test_buffer.py"),
    "gym_recorder.record.vector_columns": ("test_vector.py", "test_buffer.py"),
    "gym_recorder.record.vector_rows": ("test_vector.py",),
    "gym_recorder.record.wrapper": ("test_wrapper_behaviour.py", "test_roundtrip.py"),
    "gym_recorder.record.writeback": ("test_writer_policies.py",),
    "gym_recorder.record.writer": ("test_writer_policies.py", "test_write_errors.py"),
    "gym_recorder.record.writechild": ("test_writeprocess.py",),
    "gym_recorder.record.batchfiles": ("test_write_errors.py", "test_crash.py"),
    # replay
    "gym_recorder.replay": ("test_env_replay_spec.py",),
    "gym_recorder.replay.drive": ("test_record_wrappers.py", "test_cli.py"),
    "gym_recorder.replay.drive_agents": ("test_multiagent_replay.py",),
    "gym_recorder.replay.episode": ("test_env_replay_spec.py", "test_env_autoreset.py"),
    "gym_recorder.replay.factory": ("test_env_replay_spec.py", "test_replay_skip_wrapper.py"),
    "gym_recorder.replay.multiagent": ("test_multiagent_replay.py",),
    "gym_recorder.replay.run": ("test_env_replay_spec.py", "test_env_autoreset.py"),
    "gym_recorder.replay.vector": ("test_env_vector_kwargs.py",),
    # training
    "gym_recorder.training": ("test_training.py",),
    "gym_recorder.training.agents": ("test_multiagent_read.py",),
    "gym_recorder.training.itemcache": ("test_datasets.py",),
    "gym_recorder.training.sampling": ("test_training.py", "test_datasets.py"),
    "gym_recorder.training.selection": ("test_training.py", "test_datasets.py"),
    "gym_recorder.training.transitions": ("test_training.py", "test_stack_at_read_time.py"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (the viewer page's files are not Python)."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, package: str) -> set[str]:
    """The package's modules that the file at ``path`` imports (``package``: where its relative
    imports start; "" for a test file)."""
    return _imports_of(path.read_text(encoding="utf-8"), package)


def _imports_of(source: str, package: str) -> set[str]:
    found: set[str] = set()
    known = modules()
    tree = ast.parse(source)
    if not package:  # a test: the scripts it runs count too (python -m gym_recorder, children)
        if '"-m", "gym_recorder"' in source:
            found.add("gym_recorder.__main__")
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    "gym_recorder" in node.value and "import" in node.value:
                try:
                    found |= _imports_of(node.value, "")
                except SyntaxError:
                    pass  # (not a script: a message or a doc)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source not in known:
                continue
            found.add(source)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif not package and alias.name != "*":  # a test: the module defining the name
                    obj = getattr(importlib.import_module(source), alias.name, None)
                    defined = getattr(obj, "__module__", None)
                    if defined in known:
                        found.add(defined)
    return found


@cache
def _package_imports(name: str) -> frozenset[str]:
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return frozenset(_imports(path, package))


def reached(test_file: str) -> set[str]:
    """The package's modules a test file imports, directly, through its helper modules in
    tests/, or through the package's own imports of those."""
    path = TESTS / test_file
    todo = set(_imports(path, ""))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # (conftest's helpers, training_helpers, multiagent_helpers...)
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for name in names:
            helper = TESTS / f"{name}.py"
            if name and helper.exists() and not name.startswith("test_"):
                todo |= _imports(helper, "")
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo |= _package_imports(name) - seen
    # (importing a module runs its packages' __init__ first; what they import is not followed)
    return seen | {name.rsplit(".", k)[0] for name in seen for k in range(1, name.count(".") + 1)}


def homes(name: str) -> tuple[str, ...]:
    """The test files that are the module's home (none: it has no home)."""
    if name in HOMES:
        return HOMES[name]
    parts = name.split(".")
    stem = parts[-1].lstrip("_")
    candidates = [f"test_{stem}.py"]
    if len(parts) > 2:
        candidates.append(f"test_{parts[1]}_{stem}.py")
    return tuple(c for c in candidates if (TESTS / c).exists())


@pytest.mark.parametrize("name", sorted(modules()))
def test_every_module_has_a_home_in_the_tests(name: str) -> None:
    files = homes(name)
    assert files, (f"{name} has no test file named for it (tests/test_<name>.py) and no line "
                   f"in test_layout.HOMES naming the test files that cover it")
    for test_file in files:
        assert (TESTS / test_file).exists(), f"HOMES[{name!r}]: no tests/{test_file}"
        assert name in reached(test_file), (
            f"tests/{test_file} does not reach {name}: it imports none of the modules that "
            f"import it (named as the home of {name})")


def test_homes_names_only_modules_that_exist() -> None:
    assert sorted(set(HOMES) - set(modules())) == []


def test_a_module_without_a_home_is_found() -> None:
    """The rule itself: a name no test is named for and HOMES does not list has no home."""
    assert homes("gym_recorder.integrations.no_such_module") == ()
    assert homes("gym_recorder.format.dtypes") == ("test_dtypes.py",)
    assert "gym_recorder.integrations.minari_export" in reached("test_minari_io.py")
    assert "gym_recorder.integrations.minari_export" not in reached("test_dtypes.py")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _wings() -> list[object]:
    wings = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    return list(wings)


@pytest.mark.parametrize("wing", _wings())
def test_each_wing_docstring_names_its_modules(wing: str) -> None:
    where = PACKAGE / wing / "__init__.py"
    text = _docstring(PACKAGE / "__init__.py") if wing == "format" else _docstring(where)
    unnamed = [p.stem for p in sorted((PACKAGE / wing).glob("*.py"))
               if p.stem != "__init__" and f"``{p.stem}``" not in text and
               f".{p.stem}`" not in text and f"{wing}.{p.stem}`" not in text]
    assert unnamed == [], f"{wing}/__init__.py's docstring does not name {unnamed}"
