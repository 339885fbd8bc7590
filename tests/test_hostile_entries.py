"""Hostile recordings, structure: manifest fields, batch entries, nested trees, info columns and
values leaves.

See tests/hostile.py for how each recording is broken and read under guard.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gym_recorder import ChecksumError, RecordingReader
from gym_recorder.format import MAX_NESTING
from hostile import (  # noqa: F401  (make and sources are fixtures)
    _load_idx, cp_obs, first_entry, info_column, load_manifest, make, mutate_manifest, nest,
    nest_dict, nest_tuple, patch_array, refused, rewrite_batch, sources)

# ---------------------------------------------------------------------------------------------
# Manifest structure


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.pop("format"), r"format is None, not 'gym_recorder'"),
    (lambda m: m.update(format="gym_recorder2"), r"format is 'gym_recorder2'"),
    (lambda m: m.update(format=["gym_recorder"]), r"format is \['gym_recorder'\]"),
    (lambda m: m.pop("version"), r"bad format version None"),
    (lambda m: m.update(version="1"), r"bad format version '1'"),
    (lambda m: m.update(version=1.0), r"bad format version 1\.0"),
    (lambda m: m.update(version=True), r"bad format version True"),
    (lambda m: m.update(version=0), r"bad format version 0"),
    (lambda m: m.update(version=-1), r"bad format version -1"),
    (lambda m: m.update(version=3), r"format version 3 is newer than this reader \(2\)"),
    (lambda m: m.update(multiagent={"api": "aec"}), r"'multiagent' in a manifest of version 1"),
    (lambda m: m.update(version=10 ** 100), r"is newer than this reader"),
    (lambda m: m.update(prefix="other"), r"prefix 'other' does not match the file name"),
    (lambda m: m.update(prefix=None), r"prefix None does not match"),
    (lambda m: m.update(prefix="../cp"), r"prefix '\.\./cp' does not match"),
    (lambda m: m.pop("batches"), r"'batches' must be a list"),
    (lambda m: m.update(batches={}), r"'batches' must be a list"),
    (lambda m: m.update(batches="cp.ep000000000.json"), r"'batches' must be a list"),
    (lambda m: m["batches"].__setitem__(0, 1), r"batch 0: must be an object"),
    (lambda m: m["batches"].__setitem__(0, []), r"batch 0: must be an object"),
    (lambda m: m["batches"].__setitem__(0, None), r"batch 0: must be an object"),
    (lambda m: m["batches"][0].pop("first"), r"batch 0: 'first' and 'len' must be non-negative"),
    (lambda m: m["batches"][0].update(first=-1), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(first=0.0), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(first=False), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len=-1), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len="2"), r"batch 0: 'first' and 'len' must be non-neg"),
    (lambda m: m["batches"][0].update(len=10 ** 30),
     r"batch 1: first entry 2 overlaps|batch 0: 'len' 10{30} entries cannot fit"),
    (lambda m: m["batches"][-1].update(len=m["batches"][-1]["len"] + 1),
     r"\d+ entries, the manifest says \d+"),
    (lambda m: m["batches"][1].update(first=0), r"batch 1: first entry 0 overlaps"),
    (lambda m: m["batches"][0].update(episodes=-1), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].update(episodes=m["batches"][0]["len"] + 1),
     r"batch 0: 'episodes' must be an integer in \[0, len\]"),
    (lambda m: m["batches"][0].update(episodes="1"), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].pop("episodes"), r"batch 0: 'episodes' must be an integer"),
    (lambda m: m["batches"][0].update(json_size=-1), r"batch 0: 'json_size' must be a non-neg"),
    (lambda m: m["batches"][0].update(json_size=1.5), r"batch 0: 'json_size' must be a non-neg"),
    (lambda m: m["batches"][0].update(json_size=m["batches"][0]["json_size"] + 1),
     r"json: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].update(bin_size=m["batches"][0]["bin_size"] + 8),
     r"bin: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].update(bin_size=m["batches"][0]["bin_size"] - 1),
     r"bin: file has \d+ bytes, the manifest says \d+"),
    (lambda m: m["batches"][0].pop("bin_size"), r"batch 0: 'bin_size' must be a non-negative"),
    (lambda m: m["batches"][0].update(json_crc32=None), r"batch 0: 'json_crc32' must be"),
    (lambda m: m["batches"][0].update(steps=True), r"batch 0: 'steps' must be a non-negative"),
    (lambda m: m.update(observation_space=None), r"observation_space: a space must be a JSON"),
    (lambda m: m.pop("action_space"), r"action_space: a space must be a JSON object"),
])
def test_bad_manifest_fields(make, edit, match):
    d = make("cp")
    mutate_manifest(d, edit)
    refused(d, r"^(?=cp\.(manifest|ep\d+)\.(json|bin)[ :]).*" + match)


def test_json_crc_mismatch_is_a_checksum_error(make):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][0].update(
        json_crc32=(m["batches"][0]["json_crc32"] + 1) % 2 ** 32))
    refused(d, r"cp\.ep000000000\.json: CRC-32 does not match the manifest", error=ChecksumError)


def test_manifest_episode_count_larger_than_the_batch_holds(make):
    """The manifest claims one more new episode than batch 0 starts: that episode is missing."""
    d = make("cp")
    man = load_manifest(d)
    b0 = man["batches"][0]
    if b0["episodes"] == b0["len"]:  # make room: claim one entry fewer starts an episode ...
        rewrite_batch(d, lambda doc: doc["episodes"][-1].update(part=1))
    mutate_manifest(d, lambda m: m["batches"][0].update(episodes=b0["len"]))
    refused(d, r"cp\.(ep0+\d+\.json|manifest\.json).*(episode|part|missing|not found)")


def test_manifest_episode_count_smaller_than_the_batch_holds(make):
    """The manifest claims one new episode fewer than batch 0 starts: refused when the batch
    is read (the reader's numbering would skip an episode silently)."""
    d = make("cp")
    b0 = load_manifest(d)["batches"][0]
    assert b0["episodes"] >= 2
    mutate_manifest(d, lambda m: m["batches"][0].update(episodes=b0["episodes"] - 1))
    refused(d, r"cp\.ep0+\.json: \d+ entries start an episode, the manifest says \d+")


def test_entries_out_of_order_or_duplicated(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: doc["episodes"].reverse())
    refused(d, r"cp\.ep000000000\.json entry 0: 'index' is not 0")


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.update(episode=-1), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(episode="0"), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.pop("part"), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(part=1.0), r"entry 0: bad 'episode' or 'part'"),
    (lambda e: e.update(index=None), r"entry 0: 'index' is not 0"),
    (lambda e: e.update(index=True), r"entry 0: 'index' is not 0"),
    (lambda e: e.update(steps=-1), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps="3"), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps=1.0), r"entry 0: 'steps' must be a non-negative integer"),
    (lambda e: e.update(steps=10 ** 30), r"entry 0: 'infos' must be \{'rows': 10{29}1,"),
    (lambda e: e.update(steps=e["steps"] + 1), r"entry 0: 'infos' must be \{'rows': \d+"),
    (lambda e: (e.update(steps=e["steps"] + 1), e["infos"].update(rows=e["steps"] + 1)),
     r"entry 0 observations: shape \(\d+, 4\), expected \(\d+, 4\)"),
    (lambda e: e.pop("observations"), r"entry 0 observations: expected an array reference"),
    (lambda e: e.update(observations=[1, 2]), r"entry 0 observations: expected an array ref"),
    # (an array leaf MAY be stored as values: a value outside the space's shape; rows counted)
    (lambda e: e.update(observations={"__type": "values", "values": []}),
     r"entry 0 observations: 0 rows, expected \d+"),
    (lambda e: e.update(actions=e["observations"]), r"entry 0 actions: shape .* expected"),
    (lambda e: e.pop("rewards"), r"entry 0 rewards: expected an array reference"),
    (lambda e: e.update(rewards=e["terminations"]), r"entry 0 rewards: dtype bool, expected"),
    (lambda e: e.update(truncations=e["rewards"]), r"entry 0 truncations: dtype float64, exp"),
    (lambda e: e.pop("infos"), r"entry 0: 'infos' must be"),
    (lambda e: e.update(infos=[]), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(rows=e["infos"]["rows"] + 1), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(rows="1"), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"].update(keys={}), r"entry 0: 'infos' must be"),
    (lambda e: e["infos"]["keys"].append(1), r"entry 0 infos column \d+: a column needs a str"),
    (lambda e: e["infos"]["keys"].append({"key": 5, "kind": "values", "values": []}),
     r"entry 0 infos column \d+: a column needs a string 'key'"),
    (lambda e: e.update(seed="7"), r"entry 0: 'seed' must be an integer or null"),
    (lambda e: e.update(seed=7.0), r"entry 0: 'seed' must be an integer or null"),
    (lambda e: e.update(end="exploded"), r"entry 0: unknown end 'exploded'"),
    (lambda e: e.update(end=["terminated"]), r"entry 0: unknown end"),
    (lambda e: e.update(sub_env="0"), r"entry 0: 'sub_env' must be an integer or null"),
    (lambda e: e.update(options={"__type": "pickle", "data": "gASVAAAA"}),
     r"entry 0 options: unknown __type 'pickle'"),
    (lambda e: e.update(options={"__type": ["ndarray"]}), r"entry 0 options: unknown __type"),
])
def test_bad_entries(make, edit, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"cp\.ep000000000\.json " + match)


def test_entry_that_is_not_an_object(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: doc["episodes"].__setitem__(0, "episode"))
    refused(d, r"cp\.ep000000000\.json entry 0: must be an object")


def test_continues_into_a_missing_part(make):
    d = make("cp")
    man = load_manifest(d)
    last = man["batches"][-1]["len"] - 1
    rewrite_batch(d, lambda doc: doc["episodes"][last].update(continues=True),
                  index=len(man["batches"]) - 1)
    # The episode claims a later part that no batch holds: it ends there (no later batch) ...
    with RecordingReader(d) as reader:
        assert reader[-1].end is None
    # ... but a part missing from the next batch is an error.
    d2 = make("cp", "rec2")
    man2 = load_manifest(d2)
    # A batch (not the last) whose last entry ends its episode, so the next batch has no part 1.
    index = next(i for i, b in enumerate(man2["batches"][:-1])
                 if json.loads((d2 / b["fn"]).read_bytes())["episodes"][-1]["continues"] is False)
    rewrite_batch(d2, lambda doc: doc["episodes"][-1].update(continues=True), index=index)
    refused(d2, r"cp\.ep0+\d+\.json: episode \d+ part \d+ missing")


# ---------------------------------------------------------------------------------------------
# Nested Dict/Tuple trees and stitching


@pytest.mark.parametrize("edit, match", [
    (lambda e: e["observations"].pop("grid"), r"observations: missing key 'grid'"),
    (lambda e: e.update(observations=[]), r"observations: expected an object for a Dict"),
    (lambda e: e["observations"].update(__type="ndarray"),
     r"observations: expected an object for a Dict"),
    (lambda e: e["observations"]["nested"].update(pair={}),
     r"observations\['nested'\]\['pair'\]: expected a list of 2 for a Tuple"),
    (lambda e: e["observations"]["nested"]["pair"].append(None),
     r"observations\['nested'\]\['pair'\]: expected a list of 2 for a Tuple"),
    (lambda e: e["observations"]["nested"]["pair"].__setitem__(0, 3),
     r"observations\['nested'\]\['pair'\]\[0\]: expected an array reference"),
    (lambda e: e["observations"].update(grid=e["observations"]["flags"]),
     r"observations\['grid'\]: shape \(\d+, 4\), expected \(\d+, 5, 5\)"),
    (lambda e: e["actions"].update(move=e["observations"]["position"]),
     r"actions\['move'\]: shape .* expected"),
])
def test_bad_nested_trees(make, edit, match):
    d = make("nd")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"nd\.ep000000000\.json entry 0 " + match)


def test_invalid_code_points_in_a_string_array_are_refused(make):
    """<U arrays whose bytes are not Unicode code points would crash numpy (SystemError)."""
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(dtype="<U1"))  # same shape, same size
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*not (valid )?Unicode")
    d2 = make("ci", "rec2")
    rewrite_batch(d2, lambda doc: info_column(doc, "x")["values"].update(dtype="<U2"))
    refused(d2, r"ci\.ep000000000\.json entry \d+ infos column \d+ values: .*not (valid )?Unicode")


# ---------------------------------------------------------------------------------------------
# Infos columns


@pytest.mark.parametrize("key, edit, match", [
    ("x", lambda d, c: patch_array(d, c["index"], _load_idx(d, c["index"])[::-1]),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: patch_array(d, c["index"], np.full(c["index"]["shape"], 10 ** 6)),
     r"index must be ascending int64 rows in \[0, \d+\)"),
    ("x", lambda d, c: patch_array(d, c["index"], np.full(c["index"]["shape"], -1)),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: patch_array(d, c["index"], np.zeros(c["index"]["shape"], np.int64)),
     r"index must be ascending int64 rows"),
    ("x", lambda d, c: c["index"].update(dtype="<f8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype=">i8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype="<u8"), r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(dtype="<i4", shape=[c["index"]["shape"][0] * 2]),
     r"index must be ascending int64"),
    ("x", lambda d, c: c["index"].update(shape=[c["index"]["shape"][0], 1]),
     r"index must be ascending int64"),
    ("x", lambda d, c: c.update(index=[0, 1]), r"index: expected an array reference"),
    ("x", lambda d, c: c.update(index="all"), r"index: expected an array reference"),
    ("x", lambda d, c: c["values"].update(shape=[1], size=8, crc32=None),
     r"\(1,\) values for \d+ rows"),
    ("x", lambda d, c: c["values"].update(shape=[], size=8, crc32=None),
     r"\(\) values for \d+ rows"),
    ("x", lambda d, c: c.update(kind="pickle"), r"'kind' must be 'array' or 'values'"),
    ("x", lambda d, c: c.update(kind=None), r"'kind' must be 'array' or 'values'"),
    ("x", lambda d, c: c.update(pytype="object"), r"unknown pytype 'object'"),
    ("x", lambda d, c: c.update(values=[1.0]), r"values: expected an array reference"),
    ("name", lambda d, c: c.update(values="step"), r"'kind' must be 'array' or 'values'"),
    ("name", lambda d, c: c["values"].append("x"), r"\d+ values for \d+ rows"),
    ("name", lambda d, c: c.update(values=[]), r"0 values for \d+ rows"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "pickle"}),
     r"unknown __type 'pickle'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i1",
                                                          "value": 300}),
     r"300 out of range for \|i1"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<u2",
                                                          "value": -1}),
     r"-1 out of range for <u2"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i8",
                                                          "value": 2 ** 63}),
     r"out of range for <i8"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f2",
                                                          "value": 1e10}),
     r"out of range for <f2"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f4",
                                                          "value": -1e300}),
     r"out of range for <f4"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<c8",
                                                          "value": [1e300, 0]}),
     r"out of range for <c8"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<f4",
                                                          "value": "NaN"}),
     r"bad float 'NaN'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "|b1",
                                                          "value": 1}),
     r"bool scalar must be true or false"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<c16",
                                                          "value": [1]}),
     r"complex scalar must be \[real, imag\]"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "|O",
                                                          "value": 1}),
     r"unsupported dtype '\|O'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<U3",
                                                          "value": "abc"}),
     r"bad scalar of dtype <U3"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "scalar", "dtype": "<i4",
                                                          "value": {"k": 1}}),
     r"scalar array does not match dtype <i4"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "float", "value": "1e999"}),
     r"bad float '1e999'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "float", "value": True}),
     r"expected a number, got bool"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes", "base64": "!!"}),
     r"bad base64"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes", "base64": "\u00e9"}),
     r"bad base64"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "bytes"}),
     r"bytes need a base64 string"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "tuple", "items": 3}),
     r"tuple items must be a list"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": [[1]]}),
     r"dict items must be a list of \[key, value\] pairs"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": {"a": 1}}),
     r"dict items must be a list of \[key, value\] pairs"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict", "items": [[[1], 2]]}),
     r"unhashable dict key"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "dict",
                                                          "items": [[{"a": 1}, 2]]}),
     r"unhashable dict key"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "../outside/secret.bin"}),
     r"file name '\.\./outside/secret\.bin' is not a plain file name"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "ci.manifest.json", "dtype": "|u1",
                                                          "shape": [1], "npyoff": 0,
                                                          "size": 1}),
     r"npyfile 'ci\.manifest\.json' is not this batch's"),
    ("nested", lambda d, c: c["values"].__setitem__(0, {"__type": "ndarray", "npyfile":
                                                          "ci.ep000000000.bin", "dtype": "|O",
                                                          "shape": [1], "npyoff": 0,
                                                          "size": 8}),
     r"unsupported dtype '\|O'"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest(900)),
     r"nested deeper than \d+ levels|nested too deeply"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest_dict(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
    ("nested", lambda d, c: c["values"].__setitem__(0, nest_tuple(MAX_NESTING + 5)),
     r"nested deeper than \d+ levels"),
])
def test_bad_info_columns(make, key, edit, match):
    d = make("ci")
    rewrite_batch(d, lambda doc: edit(d, info_column(doc, key)))
    refused(d, r"ci\.ep000000000\.json entry \d+ infos column \d+.*" + match)






# ---------------------------------------------------------------------------------------------
# Values leaves (Text)


@pytest.mark.parametrize("edit, match", [
    (lambda e: e.update(observations=[]), r"expected \{'__type': 'values'"),
    (lambda e: e["observations"].update(values="abc"), r"expected \{'__type': 'values'"),
    (lambda e: e["observations"].update(__type="ndarray"), r"expected \{'__type': 'values'|"
                                                            r"expected an array"),
    (lambda e: e["observations"]["values"].append("extra"), r"\d+ rows, expected \d+"),
    (lambda e: e["observations"]["values"].__setitem__(0, 5), r"Text rows must be strings"),
    (lambda e: e["observations"]["values"].__setitem__(0, {"__type": "bytes", "base64": "YQ=="}),
     r"Text rows must be strings"),
    (lambda e: e["observations"]["values"].__setitem__(0, nest(500)),
     r"nested deeper than \d+ levels"),
])
def test_bad_values_leaves(make, edit, match):
    d = make("tx")
    rewrite_batch(d, lambda doc: edit(first_entry(doc)))
    refused(d, r"tx\.ep000000000\.json entry 0 observations: " + match)
