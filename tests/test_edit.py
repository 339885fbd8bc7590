"""Editing recordings as a user does: delete, keep, restore, merge, split, compact; the arrays
checked through the reader, transitions, an export, and the C reader."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401  (registers sample_envs/Image-v0)
from conftest import record_cartpole
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder import edit
from gym_recorder.cli import main
from gym_recorder.edit.compact import compact, reclaimable
from gym_recorder.edit.copies import merge, split
from gym_recorder.errors import EditError, EmptySelectionError, FormatError
from gym_recorder.integrations.export import export_npz
from gym_recorder.integrity import repair, verify
from gym_recorder.training.transitions import transitions
from test_c_reader import c_lines, grread  # noqa: F401  (the session's asan build)

FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def episodes(d: Path) -> list[tuple]:
    """Every shown episode's arrays, end and stable id."""
    with RecordingReader(d) as reader:
        out = []
        for i, ep in enumerate(reader):
            out.append(tuple(np.asarray(getattr(ep, f)).copy() for f in FIELDS)
                       + (ep.end, reader.stable_id(i)))
        return out


def same(got: list[tuple], expected: list[tuple], ids: bool = True) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        for a, b in zip(g[:5], e[:5]):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
        assert g[5] == e[5]
        if ids:
            assert g[6] == e[6]


def fingerprint(ep: tuple) -> bytes:
    return b"".join(np.ascontiguousarray(a).tobytes() for a in ep[:5])


def test_delete_and_restore_hide_episodes_everywhere(tmp_path: Path, grread) -> None:
    d = tmp_path / "rec"
    record_cartpole(d, episodes=12)
    before = episodes(d)
    result = edit.delete(d, [1, "3:6"])
    assert (result.changed, result.shown, result.deleted) == (4, 8, 4)
    kept = [before[i] for i in (0, 2, 6, 7, 8, 9, 10, 11)]
    same(episodes(d), kept)  # stable ids: the writer's numbers of the kept episodes
    with RecordingReader(d) as reader:
        assert len(reader) == 8 and [s.index for s in reader.summaries()] == list(range(8))
        t = transitions(reader)
        np.testing.assert_array_equal(t.reward, np.concatenate([k[2] for k in kept]))
        np.testing.assert_array_equal(reader.column("observations"),
                                      np.concatenate([k[0] for k in kept]))
        parts = [p for info in reader.batches() for p in reader.read_batch(info)]
        assert sorted({p.episode for p in parts}) == list(range(8))
    npz = export_npz(d, tmp_path / "out.npz")
    assert npz is not None
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_array_equal(z["episode_lengths"], [len(k[2]) for k in kept])
        np.testing.assert_array_equal(z["rewards"], np.concatenate([k[2] for k in kept]))
    lines = c_lines(grread, "list", str(d))
    assert [line["steps"] for line in lines] == [len(k[2]) for k in kept]
    assert verify(d) == []
    listed = edit.deleted_episodes(d)
    assert [(x.index, x.number) for x in listed] == [(1, 1), (3, 3), (4, 4), (5, 5)]
    edit.restore(d, ["3"])
    assert len(episodes(d)) == 9
    edit.restore(d, all=True)
    same(episodes(d), before)
    assert [line["steps"] for line in c_lines(grread, "list", str(d))] == [
        len(b[2]) for b in before]


def test_cli_where_keep_and_info(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d = tmp_path / "rec"
    record_cartpole(d, episodes=15)
    lengths = [len(e[2]) for e in episodes(d)]
    assert main(["edit", str(d), "delete", "--where", "length < 20 or end != 'terminated'"]) == 0
    assert [len(e[2]) for e in episodes(d)] == [n for n in lengths if n >= 20]
    assert main(["info", str(d)]) == 0
    out = capsys.readouterr().out
    assert "deleted" in out and "compact would free" in out
    assert main(["info", str(d), "--deleted"]) == 0
    assert "restore takes these indices" in capsys.readouterr().out
    assert main(["edit", str(d), "restore", "--where", "length < 15"]) == 0
    assert sorted(len(e[2]) for e in episodes(d)) == sorted(
        n for n in lengths if n >= 20 or n < 15)
    assert main(["edit", str(d), "keep", "0", "2:4"]) == 0
    assert len(episodes(d)) == 3
    assert main(["edit", str(d), "restore", "--all"]) == 0
    assert [len(e[2]) for e in episodes(d)] == lengths


@pytest.mark.parametrize("args, match", [
    (["delete", "x"], "not an episode number"),
    (["delete", "99"], "out of range"),
    (["delete", "--where", "__import__('os')"], "not allowed"),
    (["delete", "--where", "writer * 10 ** 9"], "not allowed"),
    (["delete", "--where", "'a' * 1000000000000 == ''"], "arithmetic takes numbers"),
    (["delete", "--where", "seed > 3"], "seed and end may be None"),
    (["restore", "0"], "not deleted"),
    (["delete"], "name the episodes"),
])
def test_bad_selections_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture,
                                       args: list[str], match: str) -> None:
    d = tmp_path / "rec"
    record_cartpole(d, episodes=3)
    record = sorted(os.listdir(d))
    assert main(["edit", str(d), *args]) == 1
    assert match in capsys.readouterr().err
    assert sorted(os.listdir(d)) == record
    with pytest.raises(EmptySelectionError):
        edit.delete(d, where="length < 0")


def _record_image(d: Path, episodes: int) -> None:
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=150), d, target_batch_bytes=20_000)
    env.action_space.seed(5)
    for e in range(episodes):
        env.reset(seed=e)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()


def test_image_episodes_in_parts_delete_and_compact(tmp_path: Path, grread) -> None:
    d = tmp_path / "img"
    _record_image(d, 3)
    before = episodes(d)
    with RecordingReader(d) as reader:
        assert len(reader.writers[0]["manifest"]["batches"]) > 6  # episodes in parts
    edit.delete(d, [1])
    deleted_bytes, _ = reclaimable(d)
    assert deleted_bytes > 0
    size = sum(f.stat().st_size for f in d.iterdir())
    result = compact(d, grace=0)
    assert len(result.replaced) == 1 and result.freed > 0
    assert sum(f.stat().st_size for f in d.iterdir()) < size * 0.8
    same(episodes(d), [before[0], before[2]], ids=False)
    assert [i[1] for i in (e[6] for e in episodes(d))] == [0, 1]  # renumbered from 0
    assert verify(d) == []
    assert [x["steps"] for x in c_lines(grread, "list", str(d))] == [150, 150]
    with RecordingReader(d) as reader:
        np.testing.assert_array_equal(transitions(reader).reward,
                                      np.concatenate([before[0][2], before[2][2]]))
        assert all("index" in b for b in reader.writers[0]["manifest"]["batches"])


def test_vector_recording_delete_compact(tmp_path: Path, grread) -> None:
    d = tmp_path / "vec"
    assert main(["record", "CartPole-v1", "-d", str(d), "--num-envs", "3", "-n", "12",
                 "--seed", "1", "--target-batch-bytes", "2000", "-q"]) == 0
    before = episodes(d)
    with RecordingReader(d) as reader:
        subs = [s.sub_env for s in reader.summaries()]
    edit.delete(d, where="sub_env == 1")
    kept = [b for b, s in zip(before, subs) if s != 1]
    same(episodes(d), kept)
    compact(d, grace=0)
    same(episodes(d), kept, ids=False)
    assert verify(d) == []
    assert [x["steps"] for x in c_lines(grread, "list", str(d))] == [len(k[2]) for k in kept]
    with RecordingReader(d) as reader:
        np.testing.assert_array_equal(transitions(reader).reward,
                                      np.concatenate([k[2] for k in kept]))


def test_compact_joins_small_batches(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    record_cartpole(d, episodes=30, target_batch_bytes=1500)
    before = episodes(d)
    with RecordingReader(d) as reader:
        batches = reader.writers[0]["batches"]
    result = compact(d, grace=0, target_batch_bytes=20_000)  # parts of episodes joined
    with RecordingReader(d) as reader:
        assert 1 < reader.writers[0]["batches"] < batches
    same(episodes(d), before, ids=False)
    assert verify(d) == [] and result.freed > 0
    compact(d, grace=0)  # again, into one batch: joined parts renumber the later ones
    with RecordingReader(d) as reader:
        assert reader.writers[0]["batches"] == 1
        assert all(not b.get("continues") for b in reader.writers[0]["manifest"]["batches"])
    same(episodes(d), before, ids=False)
    assert verify(d) == []
    assert compact(d, grace=0).replaced == []  # nothing left to do


def test_a_prefix_that_ends_like_a_compaction_suffix_is_kept_whole(tmp_path: Path) -> None:
    """A default prefix's random part can read like compaction's suffix ("...1234.c0123407",
    about 1 prefix in 170): compaction kept only "openaigym.trace.<time>.<pid>" of it, so the
    replacement lost the part that tells writers of one process apart. Only a compacted
    writer's own suffix is replaced."""
    d = tmp_path / "rec"
    prefix = "openaigym.trace.20261206T000000.1234.c0123407"
    record_cartpole(d, episodes=4, file_prefix=prefix)
    edit.delete(d, [1])
    first = compact(d, grace=0)
    [(old, new)] = first.replaced
    assert old == prefix and new.startswith(prefix + ".c") and new.count(".c") == 2
    edit.delete(d, [0])
    [(old2, new2)] = compact(d, grace=0).replaced
    assert old2 == new and new2.startswith(prefix + ".c") and new2 != new  # (suffix replaced)
    assert len(episodes(d)) == 2 and verify(d) == []


def test_two_writers_merge_and_split(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    record_cartpole(a, episodes=5, seed=0)
    record_cartpole(b, episodes=4, seed=1)
    record_cartpole(c, episodes=3, seed=2)
    edit.delete(a, [2])
    ea, eb, ec = episodes(a), episodes(b), episodes(c)
    dest = tmp_path / "all"
    assert main(["merge", str(a), str(b), str(dest)]) == 0
    same(episodes(dest), ea + eb)
    assert [x.number for x in edit.deleted_episodes(dest)] == [2]  # still restorable
    assert os.stat(next(dest.glob("*.bin"))).st_nlink >= 2  # hard links
    merge([c], dest)  # into an existing recording
    same(episodes(dest), ea + eb + ec)
    listing = sorted(os.listdir(dest))
    with pytest.raises(EditError, match="already has writer"):
        merge([a], dest)
    assert sorted(os.listdir(dest)) == listing
    assert main(["split", str(dest), "--into", f"{tmp_path / 'tr'}=0.75",
                 f"{tmp_path / 'ev'}=0.25", "--seed", "3"]) == 0
    tr, ev = episodes(tmp_path / "tr"), episodes(tmp_path / "ev")
    assert (len(tr), len(ev)) == (8, 3)  # round(0.75 * 11), the rest
    whole = sorted(fingerprint(e) for e in ea + eb + ec)
    assert sorted(fingerprint(e) for e in tr + ev) == whole  # each episode exactly once
    split(dest, {str(tmp_path / "tr2"): 0.75, str(tmp_path / "ev2"): 0.25}, seed=3)
    same(episodes(tmp_path / "tr2"), tr)
    assert verify(tmp_path / "tr") == [] and verify(dest) == []


def test_old_readers_refuse_and_lost_log_is_said(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "rec"
    record_cartpole(d, episodes=4)
    edit.delete(d, [0])
    import gym_recorder.format.rules as rules
    from gym_recorder.read.manifest import Manifest

    with monkeypatch.context() as m:
        m.setattr(rules, "FORMAT_VERSION", 1)  # a reader of version 1 reads every manifest
        with pytest.raises(FormatError, match=r"_edits\.manifest\.json: format version 2 is "
                                              r"newer than this reader"):
            [Manifest(d, n) for n in sorted(os.listdir(d)) if n.endswith(".manifest.json")]
    for f in d.glob("_edits.0*.json"):
        f.unlink()
    with pytest.raises(FormatError, match="edit log .* is missing"):
        RecordingReader(d)
    assert "missing" in str(verify(d)[0])
    actions = repair(d)
    assert any("show again" in a for a in actions)
    assert len(episodes(d)) == 4 and verify(d) == []


def test_edits_while_the_writer_records(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    env = RecordingWrapper(gym.make("CartPole-v1"), d)
    env.action_space.seed(0)

    def run(n: int) -> None:
        for _ in range(n):
            env.reset()
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(env.action_space.sample())
                done = term or trunc
        env.flush()

    run(3)
    first = episodes(d)
    edit.delete(d, [0, 2])
    run(3)
    env.close()
    got = episodes(d)
    assert [e[6][1] for e in got] == [1, 3, 4, 5]  # the writer's numbers: stable ids
    same(got[:1], [first[1]])
    assert compact(d, grace=0).replaced and len(episodes(d)) == 4


def test_gym_recording_writers_delete_but_do_not_merge(tmp_path: Path) -> None:
    from hostile import _write_legacy

    d = _write_legacy(tmp_path / "legacy")
    before = episodes(d)
    edit.delete(d, [0])
    same(episodes(d), before[1:])
    with pytest.raises(EditError, match="gym-recording writers"):
        merge([d], tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
    assert compact(d, grace=0).replaced == [] and len(episodes(d)) == 1


def test_viewer_server_lists_shown_writers_and_the_deleted_ranges(tmp_path):
    """The page reads raw files: the server lists the writers it shows and what is deleted."""
    import threading

    from conftest import record_cartpole
    from gym_recorder.edit.compact import compact
    from gym_recorder.integrations.view import make_server
    from test_view_server import request
    import json

    d = tmp_path / "rec"
    first = record_cartpole(d, episodes=4)
    second = record_cartpole(d, episodes=3, seed=1)
    edit.delete(d, [0, 5])
    compact(d, grace=60)  # both replaced; the old files still there for the grace period
    srv = make_server(d, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        _, _, body = request(srv, "/api/manifests")
        names = json.loads(body)
        assert sorted(names) == sorted(f"{p}.c000002.manifest.json" for p in (first, second))
        edit.delete(d, [0])
        _, _, body = request(srv, "/api/edits")
        assert json.loads(body) == {f"{first}.c000002": [[0, 1]]}
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(10)
