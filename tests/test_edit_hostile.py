"""Hostile edit records: refused by name (Python reader, verify, C reader), and fuzzed like
manifests; never a crash, a hang or a huge allocation."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import record_cartpole
from gym_recorder import RecordingReader
from gym_recorder import edit
from gym_recorder.errors import FormatError
from gym_recorder.integrity import verify
from test_c_reader import grread, run  # noqa: F401  (the session's asan build)
from test_fuzz import mutate_bytes, mutate_json

NEWEST = "_edits.000000001.json"


@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("edited") / "rec"
    record_cartpole(d, episodes=6)
    edit.delete(d, [1, 3])
    return d


def _copy(edited: Path, tmp_path: Path) -> Path:
    d = tmp_path / "rec"
    shutil.copytree(edited, d)
    return d


def _doc(d: Path) -> dict:
    return json.loads((d / NEWEST).read_text())


def _save(d: Path, doc: Any) -> None:
    (d / NEWEST).write_text(json.dumps(doc))


HOSTILE: list[tuple[Callable[[dict], Any], str]] = [
    (lambda m: m.update(version=3), r"edit record version 3 is newer than this reader"),
    (lambda m: m.update(version=1), r"bad edit record version"),
    (lambda m: m.update(generation=7), r"'generation' 7 is not the 1 of the file's name"),
    (lambda m: m.update(generation=1.0), r"'generation' 1.0"),
    (lambda m: m.update(format="other"), r"not a gym_recorder edit record"),
    (lambda m: m.update(deleted=[]), r"'deleted' must be an object"),
    (lambda m: m.update(deleted={"../x": [[0, 1]]}), r"is not a writer prefix"),
    (lambda m: m.update(deleted={"_edits": [[0, 1]]}), r"reserved"),
    (lambda m: m["deleted"].update({next(iter(m["deleted"])): [[3, 1]]}), r"not a non-empty"),
    (lambda m: m["deleted"].update({next(iter(m["deleted"])): [[0, 2], [1, 4]]}),
     r"after the previous one"),
    (lambda m: m["deleted"].update({next(iter(m["deleted"])): [[0, 2 ** 64]]}),
     r"not a non-empty"),
    (lambda m: m["deleted"].update({next(iter(m["deleted"])): [[0.0, 1]]}), r"two integers"),
    (lambda m: m["deleted"].update({next(iter(m["deleted"])): "0:3"}), r"list of"),
    (lambda m: m.update(replaced={"a": "a"}), r"names a replaced writer"),
    (lambda m: m.update(replaced={"a": "b", "b": "c"}), r"names a replaced writer"),
    (lambda m: m.update(replaced={"a": "zz"}), r"writers a compaction wrote are missing"),
    (lambda m: m.update(pending={"a": 3}), r"must say what brings it in"),
]


@pytest.mark.parametrize("mutate, match", HOSTILE)
def test_hostile_edit_records_are_refused_by_name(edited: Path, tmp_path: Path, grread,
                                                  mutate: Callable[[dict], Any],
                                                  match: str) -> None:
    d = _copy(edited, tmp_path)
    doc = _doc(d)
    mutate(doc)
    _save(d, doc)
    with pytest.raises(FormatError, match=match) as e:
        RecordingReader(d)
    assert "_edits.000000001.json" in str(e.value)
    problems = verify(d)
    assert problems and any("_edits" in str(p) for p in problems)
    done = run(grread, "list", str(d))  # (under the sanitizers: never a crash)
    c_checks = ("newer", "bad edit", "generation", "non-empty", "after the previous", "two "
                "integers", "list of", "'deleted' must")
    if any(word in match for word in c_checks):  # what the C reader needs, it checks
        assert done.returncode != 0 and "_edits.000000001.json" in done.stderr


@pytest.mark.parametrize("mutate, match", [
    (lambda t: t.update(batches=[{"first": 0}]), r"lists no batches"),
    (lambda t: t.pop("batches"), r"lists no batches"),
    (lambda t: t.update(prefix="x"), r"not a gym_recorder edit record"),
    (lambda t: t.update(version=1), r"not a gym_recorder edit record"),
])
def test_a_tripwire_other_than_the_spec_says_is_refused(edited: Path, tmp_path: Path,
                                                        mutate: Callable[[dict], Any],
                                                        match: str) -> None:
    """The spec: readers MUST refuse a tripwire whose format, prefix or version is another,
    or whose "batches" is not an empty list (a writer's manifest by that name is no edit
    record)."""
    d = _copy(edited, tmp_path)
    with RecordingReader(d) as reader:
        assert len(reader) == 4
    trip = d / "_edits.manifest.json"
    doc = json.loads(trip.read_text())
    mutate(doc)
    trip.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=match) as e:
        RecordingReader(d)
    assert "_edits.manifest.json" in str(e.value)


def test_a_range_up_to_the_largest_number_is_read_and_one_past_it_refused(
        edited: Path, tmp_path: Path) -> None:
    d = _copy(edited, tmp_path)
    doc = _doc(d)
    prefix = next(iter(doc["deleted"]))
    doc["deleted"][prefix] = [[2, 2 ** 63 - 1]]
    _save(d, doc)
    with RecordingReader(d) as reader:
        assert len(reader) == 2
    doc["deleted"][prefix] = [[2, 2 ** 63]]
    _save(d, doc)
    with pytest.raises(FormatError, match="not a non-empty range"):
        RecordingReader(d)


def test_huge_ranges_allocate_nothing(edited: Path, tmp_path: Path, grread) -> None:
    d = _copy(edited, tmp_path)
    doc = _doc(d)
    prefix = next(iter(doc["deleted"]))
    doc["deleted"][prefix] = [[2, 2 ** 62]]  # every episode from 2 on, and far beyond
    _save(d, doc)
    with RecordingReader(d) as reader:
        assert len(reader) == 2
    assert len(run(grread, "list", str(d)).stdout.splitlines()) == 2


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_edit_records(edited: Path, tmp_path_factory: pytest.TempPathFactory,
                             data: st.DataObject) -> None:
    d = _copy(edited, tmp_path_factory.mktemp("fuzz"))
    raw = (d / NEWEST).read_bytes()
    if data.draw(st.booleans(), label="bytes"):
        (d / NEWEST).write_bytes(mutate_bytes(data, raw))
    else:
        _save(d, mutate_json(data, json.loads(raw)))
    try:
        with RecordingReader(d) as reader:
            for ep in reader:
                ep.rewards.tolist()
    except FormatError as e:
        assert str(e)
    verify(d)
