"""One answer for one damage: every read method refuses a damaged recording with the same error
class (issue 33 §1), on a real CartPole and a real image env recording.

Each damage is made as a writer would have left it, so that every source of a fact says the
same thing: an edit of a batch JSON leaves the manifest's batch index out (as ``repair`` does for
a batch it rebuilds; an index that disagrees with its JSON is a damage of its own, "lying
index"). The damaged column is the rewards, which every method reads (summaries too). Each case
first reads the undamaged recording with the same method, so that the damage is what fails it.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401  (registers sample_envs/...)
from gym_recorder import ChecksumError, FormatError, RecordingReader, RecordingWrapper
from gym_recorder.errors import BatchIndexError
from gym_recorder.integrity import verify
from gym_recorder.training.transitions import transitions
from hostile import rewrite_batch
from test_stepindex import _record


ENVS = {
    "cartpole": lambda d: _record(d, lambda: gym.make("CartPole-v1"), 400, 3_000),
    "image": lambda d: _record(d, lambda: gym.make("sample_envs/Image-v0", height=16, width=16,
                                                   episode_length=30), 120, 50_000),
}


@pytest.fixture(scope="module", params=sorted(ENVS))
def pristine(request, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp(request.param)
    ENVS[request.param](d)
    man = _manifest(d)
    assert len(man["batches"]) >= 2 and all("index" in b for b in man["batches"])
    return d


def _manifest_path(d: Path) -> Path:
    (p,) = d.glob("*.manifest.json")
    return p


def _manifest(d: Path) -> dict:
    return json.loads(_manifest_path(d).read_bytes())


def _batch0(d: Path) -> dict:
    return _manifest(d)["batches"][0]


# -- damages: each edits the recording in d ---------------------------------------------------


def _truncated_bin(d: Path) -> None:
    path = d / _batch0(d)["bin"]
    path.write_bytes(path.read_bytes()[:-40])


def _missing_bin(d: Path) -> None:
    (d / _batch0(d)["bin"]).unlink()


def _missing_json(d: Path) -> None:
    (d / _batch0(d)["fn"]).unlink()


def _rewards(edit):
    def damage(d: Path) -> None:
        rewrite_batch(d, lambda doc: edit(doc["episodes"][0]["rewards"], d))
    return damage


def _crc_mismatch(d: Path) -> None:
    b = _batch0(d)
    doc = json.loads((d / b["fn"]).read_bytes())
    ref = doc["episodes"][0]["rewards"]
    path = d / b["bin"]
    data = bytearray(path.read_bytes())
    data[ref["npyoff"] + 3] ^= 0x40  # a reward's bytes: read fine, only the CRC-32 can tell
    path.write_bytes(bytes(data))


def _bad_continues(d: Path) -> None:
    rewrite_batch(d, lambda doc: doc["episodes"][0].update(continues=1e308))


def _edit_table(d: Path, edit) -> None:
    """Edits batch 0's index table in its .bin with ``edit(table)`` and recomputes its CRC-32 in
    the manifest (a forgery: every check of the table alone passes)."""
    p = _manifest_path(d)
    man = json.loads(p.read_bytes())
    b = man["batches"][0]
    path = d / b["bin"]
    data = bytearray(path.read_bytes())
    at = b["index"]["table"]
    table = np.frombuffer(bytes(data[at:at + 32 * b["len"]]), "<i8").reshape(-1, 4).copy()
    edit(table)
    data[at:at + table.nbytes] = table.tobytes()
    path.write_bytes(bytes(data))
    b["index"]["crc32"] = zlib.crc32(table.tobytes())
    p.write_text(json.dumps(man))


def _lying_index(d: Path) -> None:
    """The table's first entry given one step more (the manifest's step count not)."""
    _edit_table(d, lambda table: table.__setitem__((0, 2), table[0, 2] + 1))


DAMAGES = {
    "truncated bin": (_truncated_bin, FormatError, r"file has \d+ bytes, the manifest says"),
    "missing bin": (_missing_bin, FormatError, r"ep000000000\.bin"),
    "missing json": (_missing_json, FormatError, r"ep000000000\.json"),
    "offset outside the bin": (_rewards(lambda r, d: r.update(npyoff=(d / r["npyfile"]).stat()
                                                              .st_size + 8)),
                               FormatError, "outside"),
    "misaligned offset": (_rewards(lambda r, d: r.update(npyoff=r["npyoff"] + 4)),
                          FormatError, "multiple of 8"),
    "wrong dtype": (_rewards(lambda r, d: r.update(dtype="<f4", size=r["size"] // 2)),
                    FormatError, "float64"),
    "shape against steps": (_rewards(lambda r, d: r.update(shape=[r["shape"][0] - 1],
                                                           size=r["size"] - 8)),
                            FormatError, r"shape \(\d+,\)"),
    "crc mismatch": (_crc_mismatch, ChecksumError, "CRC-32"),
    "bad continues": (_bad_continues, FormatError, "'continues' must be true or false"),
    "bad no_reset": (lambda d: rewrite_batch(d, lambda doc: doc["episodes"][0].update(no_reset=1)),
                     FormatError, "'no_reset' must be true or false"),
    "lying index": (_lying_index, BatchIndexError, "batch index"),
}


# -- read methods: each reads every episode's rewards (and what else it reads) ----------------


def _getitem(r: RecordingReader) -> None:
    for i in range(len(r)):
        r[i].rewards


def _iterate(r: RecordingReader) -> None:
    for ep in r:
        ep.rewards


def _column(r: RecordingReader) -> None:
    r.column("rewards")
    r.column("observations")


def _transitions(r: RecordingReader) -> None:
    transitions(r)


def _episode_rows(r: RecordingReader) -> None:
    for i in range(len(r)):
        rows = r.episode_rows(i)
        if rows is None:  # (verify=True: the episode is read whole)
            r[i]
        else:
            rows.rows("rewards", 0, len(rows))


def _read_batch(r: RecordingReader) -> None:
    for info in r.batches():
        r.read_batch(info)


def _summaries(r: RecordingReader) -> None:
    list(r.summaries())


METHODS = {"reader[i]": _getitem, "iteration": _iterate, "column": _column,
           "transitions": _transitions, "episode_rows": _episode_rows,
           "read_batch": _read_batch, "summaries": _summaries}


@pytest.mark.parametrize("method", sorted(METHODS) + ["verify"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_every_method_refuses_the_same_damage_alike(pristine, tmp_path, damage, method):
    d = tmp_path / "rec"
    shutil.copytree(pristine, d)
    edit, error, match = DAMAGES[damage]
    checked = damage == "crc mismatch"  # (only a verifying reader checks array CRC-32s)
    if method == "verify":
        assert verify(d) == []
        edit(d)
        problems = verify(d)
        assert problems, damage
        return
    with RecordingReader(d, verify=checked) as reader:
        METHODS[method](reader)  # the undamaged recording reads
    edit(d)
    with RecordingReader(d, verify=checked) as reader, pytest.raises(error, match=match):
        METHODS[method](reader)


def test_without_verify_a_crc_mismatch_reads_the_changed_bytes_in_every_method(pristine,
                                                                               tmp_path):
    d = tmp_path / "rec"
    shutil.copytree(pristine, d)
    _crc_mismatch(d)
    with RecordingReader(d) as reader:
        want = np.concatenate([ep.rewards for ep in reader])
        assert np.array_equal(reader.column("rewards"), want)
        assert np.array_equal(transitions(reader).reward, want)


def test_an_index_whose_lie_the_manifest_cannot_show_is_refused_where_the_json_is_read(
        pristine, tmp_path):
    """Steps moved from one entry to the next, the totals kept and the CRC-32 recomputed: the
    methods that parse the batch JSON refuse it by name; those that read the index alone cannot
    tell (nothing in the manifest differs) and give what it says; verify reports it."""
    d = tmp_path / "rec"
    shutil.copytree(pristine, d)

    def move_steps(table: np.ndarray) -> None:
        assert len(table) >= 2 and table[0, 2] > 3
        table[0, 2] -= 3
        table[1, 2] += 3

    _edit_table(d, move_steps)
    for method in ("reader[i]", "iteration", "episode_rows", "read_batch", "summaries"):
        with RecordingReader(d) as reader, pytest.raises(BatchIndexError, match="batch index"):
            METHODS[method](reader)
    assert any("index" in problem.message for problem in verify(d))


@pytest.mark.parametrize("value", [1, 0, "yes", None, 1e308, [True], {"v": True}])
def test_a_flag_that_is_not_a_bool_is_refused_not_read_as_false(pristine, tmp_path, value):
    d = tmp_path / "rec"
    shutil.copytree(pristine, d)
    rewrite_batch(d, lambda doc: doc["episodes"][0].update(continues=value))
    for method in METHODS.values():
        with RecordingReader(d) as reader, pytest.raises(FormatError, match="continues"):
            method(reader)
    assert any("'continues' must be true or false" in p.message for p in verify(d))
