"""Hostile recordings, space descriptions and legacy (OpenAI gym-recording) recordings.

See tests/hostile.py for how each recording is broken and read under guard.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest

from gym_recorder.format import MAX_NESTING
from hostile import (  # noqa: F401  (make and sources are fixtures)
    LEGACY, batch_names, load_manifest, make, mutate_manifest, nest, read_everything, refused,
    rewrite_batch, sources)

# ---------------------------------------------------------------------------------------------
# Space descriptions


def _box(**kw: Any) -> dict:
    out = {"type": "Box", "dtype": "<f4", "shape": [4], "low": -1.0, "high": 1.0}
    out.update(kw)
    return out


def _deep_space(depth: int) -> dict:
    s: dict = _box()
    for _ in range(depth):
        s = {"type": "Tuple", "spaces": [s]}
    return s


@pytest.mark.parametrize("space, match", [
    (_box(shape=[2 ** 16, 2 ** 16]), r"(too large|absurd|shape)"),
    (_box(shape=[2 ** 20, 2 ** 20, 2 ** 20]), r"(too large|absurd|bad shape)"),
    (_box(shape=[2 ** 26]), r"too large to rebuild"),
    (_box(shape=[2 ** 24 + 1]), r"too large to rebuild"),
    (_box(dtype="<f8", shape=[4096, 4096]), r"too large to rebuild"),
    (_box(shape=[-4]), r"bad shape \[-4\]"),
    (_box(shape=[4.0]), r"bad shape"),
    (_box(shape="4"), r"bad shape"),
    (_box(shape=[1] * 40), r"bad shape"),
    (_box(dtype="O"), r"unsupported dtype 'O'"),
    (_box(dtype="|V8"), r"unsupported dtype"),
    (_box(dtype=None), r"unsupported dtype None"),
    (_box(low=[1, 2]), r"Box bound of shape \(2,\) for shape \(4,\)"),
    (_box(low="abc"), r"bad Box bound 'abc'"),
    (_box(low={"a": 1}), r"bad Box bound"),
    (_box(low=None), r"bad Box bound None"),
    (_box(low=nest(40)), r"Box bound|nested"),
    (_box(low=nest(900)), r"Box bound|nested"),
    (_box(dtype="|u1", low=-1, high=1e300), r"does not fit|cannot rebuild"),
    (_box(dtype="<i8", low="nan"), r"does not fit|cannot rebuild"),
    (_box(low=2.0, high=1.0), r"cannot rebuild Box space"),
    ({"type": "Discrete", "n": -1, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": 0, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": "3", "start": 0}, r"space field 'n' is missing or malformed"),
    ({"type": "Discrete", "n": True, "start": 0}, r"space field 'n' is missing or malformed"),
    ({"type": "Discrete", "n": 2 ** 70, "start": 0}, r"cannot rebuild Discrete space"),
    ({"type": "Discrete", "n": 3, "start": 0, "dtype": "O"}, r"unsupported dtype 'O'"),
    ({"type": "Discrete", "n": 3}, r"space field 'start' is missing or malformed"),
    ({"type": "MultiDiscrete", "nvec": [[1, 2], [3]], "start": [0, 0], "dtype": "<i8"},
     r"(bad|ragged|malformed|nvec)"),
    ({"type": "MultiDiscrete", "nvec": nest(100), "start": [0], "dtype": "<i8"},
     r"(bad|malformed|nvec)"),
    ({"type": "MultiDiscrete", "nvec": [-1], "start": [0], "dtype": "<i8"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiDiscrete", "nvec": ["a"], "start": [0], "dtype": "<i8"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiDiscrete", "nvec": [3], "start": [0], "dtype": "<f4"},
     r"cannot rebuild MultiDiscrete space"),
    ({"type": "MultiBinary", "n": -1}, r"bad shape \[-1\]"),
    ({"type": "MultiBinary", "n": [2 ** 40, 2 ** 40]}, r"bad shape|absurd"),
    ({"type": "MultiBinary", "n": "4"}, r"bad shape"),
    ({"type": "Text", "min_length": 0, "max_length": -1, "charset": "ab"},
     r"cannot rebuild Text space"),
    ({"type": "Text", "min_length": 0, "max_length": 3, "charset": 5},
     r"space field 'charset' is missing or malformed"),
    ({"type": "Pickle", "data": "gASV"}, r"unknown space type 'Pickle'"),
    ({"type": ["Box"]}, r"unknown space type \['Box'\]"),
    ({}, r"unknown space type None"),
    ([], r"a space must be a JSON object"),
    ("Box", r"a space must be a JSON object"),
    ({"type": "Dict", "spaces": {"a": _box()}}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [["a"]]}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [[1, _box()]]}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Dict", "spaces": [["a", _box(), 3]]}, r"Dict spaces must be \[key, space\]"),
    ({"type": "Dict", "spaces": [["a", None]]}, r"a space must be a JSON object"),
    ({"type": "Tuple", "spaces": _box()}, r"Tuple spaces must be a list"),
    ({"type": "Tuple", "spaces": [1]}, r"a space must be a JSON object"),
    (_deep_space(MAX_NESTING + 2), r"spaces nested too deeply"),
    ("DEEP", r"spaces nested too deeply|nested too deeply"),
    ({"type": "Sequence", "space": None}, r"a space must be a JSON object"),
    ({"type": "Graph", "node_space": {"type": "Text", "min_length": 0, "max_length": 2,
                                      "charset": "ab"}, "edge_space": None},
     r"cannot rebuild Graph space|expected \{'__type': 'values'"),
    ({"type": "OneOf", "spaces": []}, r"cannot rebuild OneOf space|OneOf"),
])
@pytest.mark.parametrize("which", ["observation_space", "action_space"])
def test_bad_space_descriptions(make, space, match, which):
    d = make("cp")
    if space == "DEEP":  # 800 levels: too deep for json.dumps, written as text
        text = '{"type": "Tuple", "spaces": [' * 800 + json.dumps(_box()) + "]}" * 800
        mutate_manifest(d, lambda m: json.dumps({**m, which: "DEEP"}).encode().replace(
            b'"DEEP"', text.encode()))
    else:
        mutate_manifest(d, lambda m: m.update({which: space}))
    if "values'" in match:  # a space the reader rebuilds, that the recorded entries do not fit
        match = rf"cp\.manifest\.json {which}.*cannot rebuild|cp\.ep0+\.json entry 0"
    else:
        match = rf"cp\.manifest\.json {which}.*" + match
    refused(d, match)


# ---------------------------------------------------------------------------------------------
# Legacy (OpenAI gym-recording) recordings


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(batches=None), r"'batches' must be a list"),
    (lambda m: m["batches"].__setitem__(0, "x"), r"batch 0: must be an object"),
    (lambda m: m["batches"][0].update(len=-2), r"'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(len=3), r"2 entries, the manifest says 3"),
    (lambda m: m["batches"][0].update(first="0"), r"'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(fn=f"{LEGACY}.manifest.json"),
     r"batch 0: fn '.*manifest\.json' is not a batch of this writer"),
    (lambda m: m["batches"][0].update(fn="openaigym.trace.9.9.ep000000000.json"),
     r"batch 0: .*openaigym\.trace\.9\.9\.ep000000000\.json.* (not|expected)"),
    (lambda m: m["batches"][0].update(episodes="many"), r"ep000000000\.json episode \d|"
                                                        r"'episodes'"),
])
def test_hostile_legacy_manifests(make, edit, match):
    d = make("legacy")
    shutil.copy(d / f"{LEGACY}.ep000000000.json", d / "openaigym.trace.9.9.ep000000000.json")
    mutate_manifest(d, edit)
    batches = load_manifest(d)["batches"]
    if isinstance(batches, list) and isinstance(batches[0], dict) and "episodes" in batches[0]:
        # Unknown keys are ignored: the recording still reads.
        assert len(read_everything(d)) == 2
        return
    refused(d, r"openaigym\.trace\.\d\.\d+\.(manifest|ep0+)\.json.*" + match)


def test_legacy_manifest_name_required_without_format(make):
    d = make("cp")
    mutate_manifest(d, lambda m: json.dumps({"batches": m["batches"]}).encode())
    refused(d, r"cp\.manifest\.json: no format/version and not a gym-recording manifest")


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.pop("observations"), r"missing 'observations'"),
    (lambda e: e.pop("rewards"), r"missing 'rewards'"),
    (lambda e: e["observations"].update(dtype="object"), r"unsupported dtype 'object'"),
    (lambda e: e["observations"].update(dtype="O"), r"unsupported dtype 'O'"),
    (lambda e: e["observations"].update(npyoff=-1), r"npyoff must be an integer >= 0"),
    (lambda e: e["observations"].update(npyoff=10 ** 9), r"lie outside"),
    (lambda e: e["observations"].update(npyoff=10 ** 9 + 4), r"lie outside"),
    (lambda e: e["observations"].update(size=7), r"size 7 does not match shape"),
    (lambda e: e["observations"].update(shape=[2 ** 40, 2 ** 40, 0], size=0), r"too many elem"),
    (lambda e: e["observations"].update(shape=[7], size=28), r"5 rewards for 7 observations"),
    (lambda e: e.update(observations=nest(100)), r"nested too deeply"),
    (lambda e: e.update(observations=nest(900)), r"nested too deeply"),
    (lambda e: e.update(observations=[2 ** 100, 1, 2]), r"(out of range|numbers)"),
    (lambda e: e.update(rewards={"a": 1}), r"rewards"),
    (lambda e: e.update(rewards=["a", "b", "c", "d", "e"]), r"rewards"),
    (lambda e: e.update(rewards=[[1, 2], [3]]), r"rewards"),
    (lambda e: e.update(rewards=[1.0, 2.0]), r"2 rewards for 6 observations"),
])
def test_hostile_legacy_episodes(make, edit, match):
    d = make("legacy")
    rewrite_batch(d, lambda doc: edit(doc["episodes"][0]))
    refused(d, r"openaigym\.trace\.0\.4242\.ep000000000\.json episode 0.*" + match)


def test_legacy_symlinked_bin_is_refused(make, tmp_path):
    d = make("legacy")
    _, binname = batch_names(d, 0)
    (d / binname).unlink()
    os.symlink(tmp_path / "outside" / "secret.bin", d / binname)
    refused(d, r"ep000000000\.bin: .*(cannot open|not a regular file)")
