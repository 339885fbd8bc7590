"""verify checks a batch's stacked arrays where the reader's plan places them
(gym_recorder.integrity._stacked, issue 33 §1), with the same verdicts and messages as checking
every reference by parse_ref, and one damage gives one error whichever method reads it.

Recordings of real envs (CartPole-v1, sample_envs/NestedDict-v0: six leaves in nested Dicts and
Tuples) with batches of more entries than PLANNED_MIN_ENTRIES, so that verify plans them. Each
damage is checked twice: verify as it runs (the plan) and verify with planning switched off
(every reference by parse_ref, verify's way before the plan): the problem lists must be equal.
"""

from __future__ import annotations

import json
import re
import shutil
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sample_envs  # noqa: F401  (registers sample_envs/...)
from conftest import run_random
from gym_recorder import ChecksumError, FormatError, RecordingReader, RecordingWrapper
from gym_recorder.errors import BatchIndexError
from gym_recorder.format import parse_ref
from gym_recorder.integrity import _stacked, verify
from gym_recorder.integrity._checks import check_batch
from gym_recorder.read.batchfile import EntryRefs
from gym_recorder.read.manifest import Manifest
from hostile import load_manifest, manifest_path, rewrite_batch, save_manifest
from test_fuzz import SCALARS, SPECIAL
from test_read_damage import _edit_table

ENVS = {"cartpole": ("CartPole-v1", 3000), "nested": ("sample_envs/NestedDict-v0", 1500)}


@pytest.fixture(scope="module", params=sorted(ENVS))
def pristine(request, tmp_path_factory) -> Path:
    env_id, steps = ENVS[request.param]
    d = tmp_path_factory.mktemp(request.param)
    env = RecordingWrapper(gym.make(env_id), d, target_batch_bytes=100_000)
    run_random(env, steps, seed=3, reset_seed=7)
    env.close()
    batches = load_manifest(d)["batches"]
    assert len(batches) >= 2 and all("index" in b for b in batches)
    assert batches[0]["len"] >= _stacked.PLANNED_MIN_ENTRIES  # (the case under test)
    assert verify(d) == []
    return d


@pytest.fixture
def rec(pristine, tmp_path) -> Path:
    d = tmp_path / "rec"
    shutil.copytree(pristine, d)
    return d


def _manifest(d: Path) -> Manifest:
    return Manifest(str(d), manifest_path(d).name)


def _doc(d: Path, b: int = 0) -> dict:
    return json.loads((d / load_manifest(d)["batches"][b]["fn"]).read_bytes())


def _unplanned(d: Path, monkeypatch) -> list:
    """verify with every reference checked by parse_ref (no batch planned)."""
    with monkeypatch.context() as mp:
        mp.setattr(_stacked, "PLANNED_MIN_ENTRIES", 1 << 60)
        return verify(d)


def test_the_plan_places_every_stacked_array_where_parse_ref_does(pristine):
    m = _manifest(pristine)
    for binfo in m.batches:
        if binfo["len"] < _stacked.PLANNED_MIN_ENTRIES:
            continue  # (checked by parse_ref alone: test_a_small_batch_is_not_planned)
        doc = json.loads((pristine / binfo["fn"]).read_bytes())
        entries = doc["episodes"]
        planned = _stacked.planned_arrays(m, entries, binfo["fn"], binfo["bin"],
                                          binfo["bin_size"])
        assert planned is not None
        columns = EntryRefs(m, entries, binfo["fn"]).columns()
        assert len(planned.refs) == sum(map(len, columns)) == len(entries) * len(columns)
        for objs in columns:
            for obj in objs:
                ref = parse_ref(obj, "", file=binfo["bin"])
                assert planned.refs[id(obj)] == (ref.offset, ref.size, ref.dtype.kind)
        # The same check either way: nothing found, the same manifest entry to rebuild from.
        with_plan = check_batch(str(pristine), m.prefix, binfo["first"], binfo["fn"], binfo,
                                manifest=m)
        without = check_batch(str(pristine), m.prefix, binfo["first"], binfo["fn"], binfo)
        assert with_plan.problems == without.problems == []
        assert with_plan.info == without.info and "index" in with_plan.info


def test_a_small_batch_is_not_planned(pristine):
    m = _manifest(pristine)
    binfo = m.batches[0]
    entries = _doc(pristine)["episodes"][:_stacked.PLANNED_MIN_ENTRIES - 1]
    assert _stacked.planned_arrays(m, entries, binfo["fn"], binfo["bin"],
                                   binfo["bin_size"]) is None


# -- damages: each edits batch 0 of the recording in d ---------------------------------------

ENTRY = 5  # the damaged entry of batch 0


def _flip(d: Path, ref: dict, at: int = 0, value: int | None = None) -> None:
    """Changes one byte of an array's bytes (its CRC-32 left as it was)."""
    path = d / ref["npyfile"]
    data = bytearray(path.read_bytes())
    pos = ref["npyoff"] + at
    data[pos] = (data[pos] ^ 0x40) if value is None else value
    path.write_bytes(bytes(data))


def _first_obs_ref(entry: dict) -> dict:
    obj = entry["observations"]
    while obj.get("__type") != "ndarray":
        obj = next(iter(obj.values())) if isinstance(obj, dict) else obj[0]
    return obj


def _obs_bytes(d: Path) -> None:
    _flip(d, _first_obs_ref(_doc(d)["episodes"][ENTRY]), at=3)


def _bool_byte(d: Path) -> None:
    """A termination's byte made 2, its CRC-32 recomputed (only the bool rule can tell)."""
    def edit(doc: dict) -> None:
        ref = doc["episodes"][ENTRY]["terminations"]
        _flip(d, ref, value=2)
        with open(d / ref["npyfile"], "rb") as f:
            f.seek(ref["npyoff"])
            ref["crc32"] = zlib.crc32(f.read(ref["size"]))
    rewrite_batch(d, edit)


def _rewards_dtype(d: Path) -> None:
    def edit(doc: dict) -> None:
        r = doc["episodes"][ENTRY]["rewards"]
        r.update(dtype="<f4", size=r["size"] // 2)
    rewrite_batch(d, edit)


def _misaligned(d: Path) -> None:
    rewrite_batch(d, lambda doc: doc["episodes"][ENTRY]["rewards"].update(
        npyoff=doc["episodes"][ENTRY]["rewards"]["npyoff"] + 4))


def _outside(d: Path) -> None:
    size = (d / load_manifest(d)["batches"][0]["bin"]).stat().st_size
    rewrite_batch(d, lambda doc: doc["episodes"][ENTRY]["rewards"].update(npyoff=size + 8))


def _padding(d: Path) -> None:
    """A byte of the padding after a termination array made 1 (no array covers it)."""
    ref = _doc(d)["episodes"][ENTRY]["terminations"]
    assert ref["size"] % 8  # (the bool array leaves padding before the next 8-aligned one)
    _flip(d, ref, at=ref["size"], value=1)


def _moved_steps(d: Path) -> None:
    """Steps moved from one entry to the next in the index's table, its CRC-32 recomputed."""
    def move(table: np.ndarray) -> None:
        table[ENTRY, 2] -= 1
        table[ENTRY + 1, 2] += 1
    _edit_table(d, move)


def _index_column(d: Path) -> None:
    """The manifest's index places the actions' column 8 bytes on."""
    n_obs = len(_manifest(d).obs_layout.leaves)
    man = load_manifest(d)
    man["batches"][0]["index"]["columns"][n_obs][1] += 8
    save_manifest(d, man)


DAMAGES = {
    "obs bytes": (_obs_bytes, "CRC-32 of the array's bytes"),
    "bool byte": (_bool_byte, "a bool byte is neither 0 nor 1"),
    "rewards dtype": (_rewards_dtype, "CRC-32 of the array's bytes"),
    "misaligned": (_misaligned, "multiple of 8"),
    "outside the bin": (_outside, "lie outside the file"),
    "padding": (_padding, "padding bytes .* are not zero"),
    "moved steps": (_moved_steps, "its table says entry 5 is"),
    "index column": (_index_column, "places entry 0's array at"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damage_is_reported_alike_with_and_without_the_plan(rec, damage, monkeypatch):
    edit, match = DAMAGES[damage]
    edit(rec)
    problems = verify(rec)
    assert any(re.search(match, p.message) for p in problems), problems
    assert problems == _unplanned(rec, monkeypatch)


def test_damaged_entries_are_the_same_for_repair(rec):
    """check_batch's per-entry verdicts (what repair keeps) do not depend on the plan."""
    _obs_bytes(rec)
    _flip(rec, _doc(rec)["episodes"][ENTRY + 3]["rewards"], at=1)
    m = _manifest(rec)
    binfo = m.batches[0]
    args = (str(rec), m.prefix, binfo["first"], binfo["fn"], binfo)
    with_plan, without = check_batch(*args, manifest=m), check_batch(*args)
    assert sorted(with_plan.bad) == [ENTRY, ENTRY + 3]
    assert with_plan.bad == without.bad and with_plan.problems == without.problems


# -- one damage, one error: reader[i], read_batch, Ray blocks, verify --------------------------

# (damage, verify the reader, the error every reading method raises)
ALIKE = {
    "obs bytes": (_obs_bytes, True, ChecksumError),
    "misaligned": (_misaligned, False, FormatError),
    "moved steps": (_moved_steps, False, BatchIndexError),
}


def _reader_error(d: Path, checked: bool) -> tuple[Exception, Exception]:
    """The errors of reader[i] (every episode) and read_batch (every batch)."""
    got = []
    for read in (lambda r: [r[i] for i in range(len(r))],
                 lambda r: [r.read_batch(info) for info in r.batches()]):
        with RecordingReader(d, verify=checked) as reader, pytest.raises(Exception) as e:
            read(reader)
        got.append(e.value)
    return got[0], got[1]


@pytest.mark.parametrize("damage", sorted(ALIKE))
def test_one_damage_one_error_for_the_reader_and_verify(rec, damage):
    edit, checked, error = ALIKE[damage]
    edit(rec)
    by_index, by_batch = _reader_error(rec, checked)
    assert type(by_index) is type(by_batch) is error
    assert str(by_index) == str(by_batch)
    bad = load_manifest(rec)["batches"][0]
    assert any(p.path.endswith((bad["fn"], bad["bin"])) or "index" in p.message
               for p in verify(rec))


@pytest.mark.usefixtures("ray_cluster")
def test_ray_blocks_raise_the_reader_s_error_for_the_same_damage(pristine, tmp_path):
    from needs import need_module

    need_module("ray.data", 'pip install ".[ray]"')
    from gym_recorder.integrations.ray import read_recording

    for damage in sorted(ALIKE):
        d = tmp_path / damage.replace(" ", "_")
        shutil.copytree(pristine, d)
        edit, checked, error = ALIKE[damage]
        edit(d)
        by_index, _ = _reader_error(d, checked)
        with pytest.raises(Exception) as e:
            read_recording(d, verify=checked).take_all()
        assert f"{error.__name__}: {by_index}" in str(e.value), damage


# -- fuzzing: any damage to a planned batch, the same report ---------------------------------

FUZZ_EXAMPLES = 40


@settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_fuzzed_batches_are_reported_alike_with_and_without_the_plan(pristine, tmp_path_factory,
                                                                     data):
    """Random edits of batch 0's stacked references (the JSON's size and CRC-32 kept right in
    the manifest, its index kept or left out) and random byte flips in its .bin: verify reports
    the same problems, in the same order, through the plan as through parse_ref alone."""
    d = tmp_path_factory.mktemp("fuzz") / "rec"
    shutil.copytree(pristine, d)
    man = load_manifest(d)
    b = man["batches"][0]
    if data.draw(st.booleans(), label="edit the JSON"):
        doc = _doc(d)
        columns = EntryRefs(_manifest(d), doc["episodes"], b["fn"]).columns()
        for _ in range(data.draw(st.integers(1, 3), label="edits")):
            objs = columns[data.draw(st.integers(0, len(columns) - 1), label="column")]
            ref = objs[data.draw(st.integers(0, len(objs) - 1), label="entry")]
            key = data.draw(st.sampled_from(["shape", "dtype", "npyoff", "size", "npyfile",
                                             "crc32", "order", "__type"]), label="key")
            if data.draw(st.booleans(), label="delete"):
                ref.pop(key, None)
            else:
                ref[key] = data.draw(SPECIAL | SCALARS, label="value")
        raw = json.dumps(doc).encode()
        (d / b["fn"]).write_bytes(raw)
        b["json_size"], b["json_crc32"] = len(raw), zlib.crc32(raw)
        if data.draw(st.booleans(), label="drop the index"):
            b.pop("index")
        save_manifest(d, man)
    if data.draw(st.booleans(), label="flip bytes"):
        path = d / b["bin"]
        raw = bytearray(path.read_bytes())
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            raw[data.draw(st.integers(0, len(raw) - 1), label="at")] ^= data.draw(
                st.integers(1, 255), label="bits")
        path.write_bytes(bytes(raw))
    problems = verify(d)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_stacked, "PLANNED_MIN_ENTRIES", 1 << 60)
        assert verify(d) == problems
