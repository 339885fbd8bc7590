"""The dtypes Ray blocks give each leaf come from each batch's plan, as the reader reads the batch
(gym_recorder.integrations.ray_columns.batch_forms, issue 33 §1): from the batch's index, from
its parsed JSON, or entry by entry, on real recordings; a batch the reader refuses raises the
reader's error. (Ray itself is not needed here: read_recording's blocks are in test_ray.py.)"""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401  (registers sample_envs/...)
from conftest import run_random
from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.integrations.ray_columns import batch_forms, column_dtypes, flatten
from gym_recorder.read.batchfile import parse_batch
from gym_recorder.read.batchindex import read_index
from gym_recorder.read.manifest import load_manifests
from hostile import edit_every_batch, rewrite_batch


class _Float64Reset(gym.Wrapper):
    """CartPole whose reset gives float64 observations: the batches that hold a reset store the
    leaf widened to float64, the others float32."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs.astype(np.float64), info


def _record(d: Path, env: gym.Env, steps: int, **kwargs) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the widening warning)
        rec = RecordingWrapper(env, d, **kwargs)
        run_random(rec, steps, seed=3, reset_seed=7)
        rec.close()
    return d


def _widened(d: Path) -> Path:
    return _record(d, _Float64Reset(gym.make("CartPole-v1")), 300, target_batch_bytes=1500)


def _reader_forms(reader: RecordingReader, info) -> list[set[str]]:
    """How the reader's read_batch gives each leaf: its arrays' dtypes, or "values"."""
    out: dict[str, set[str]] = {}
    for p in reader.read_batch(info):
        leaves = {**flatten(p.observations, "obs"), **flatten(p.actions, "action")}
        for name, leaf in leaves.items():
            out.setdefault(name, set()).add(leaf.dtype.str if isinstance(leaf, np.ndarray)
                                            else "values")
    return list(out.values())


def _forms_and_paths(d: Path) -> tuple[list[list[set[str]]], set[str]]:
    """batch_forms of every batch, checked against the reader's, and which ways they took."""
    paths = set()
    out = []
    with RecordingReader(d) as reader:
        manifests = {m.prefix: m for m in load_manifests(reader.storage)}
        for info in reader.batches():
            m = manifests[info.writer]
            forms = batch_forms(reader.storage, m, info.number)
            assert forms == _reader_forms(reader, info), info
            out.append(forms)
            if read_index(reader.storage, m, info.number) is not None:
                paths.add("index")
            elif parse_batch(reader.storage, m, info.number).plan is not None:
                paths.add("json plan")
            else:
                paths.add("entries")
    return out, paths


def _column_dtypes(d: Path) -> tuple[tuple[str, str], ...]:
    with RecordingReader(d) as reader:
        return column_dtypes(reader.storage, reader.batches(), load_manifests(reader.storage))


def test_a_widened_leaf_is_found_from_the_batch_indexes(tmp_path):
    d = _widened(tmp_path / "rec")
    forms, paths = _forms_and_paths(d)
    assert paths == {"index"}
    assert {"<f4"} in [f[0] for f in forms] and {"<f8"} in [f[0] for f in forms]
    assert _column_dtypes(d) == (("obs", "<f8"),)


def test_without_indexes_the_parsed_batches_plans_tell_the_same(tmp_path):
    d = _widened(tmp_path / "rec")
    edit_every_batch(d, lambda doc: doc.pop("index", None))  # (as repair rebuilds a batch)
    forms, paths = _forms_and_paths(d)
    assert paths == {"json plan"}
    assert {"<f8"} in [f[0] for f in forms]
    assert _column_dtypes(d) == (("obs", "<f8"),)


def test_a_text_leaf_is_values_entry_by_entry(tmp_path):
    d = _record(tmp_path / "rec", gym.make("sample_envs/Text-v0"), 40, target_batch_bytes=2000)
    forms, paths = _forms_and_paths(d)
    assert paths == {"entries"}
    assert all(f[0] == {"values"} for f in forms)
    assert _column_dtypes(d) == ()


def test_compressed_arrays_are_read_entry_by_entry(tmp_path):
    pytest.importorskip("zstandard")
    env = gym.make("sample_envs/Image-v0", height=16, width=16, episode_length=20)
    d = _record(tmp_path / "rec", env, 80, compression="zstd", target_batch_bytes=20_000)
    forms, paths = _forms_and_paths(d)
    assert paths == {"entries"}
    assert all(f[0] == {"|u1"} for f in forms)


def test_a_batch_the_reader_refuses_raises_the_reader_s_error(tmp_path):
    d = _widened(tmp_path / "rec")

    def wrong_dtype(doc: dict) -> None:
        r = doc["episodes"][0]["rewards"]
        r.update(dtype="<f4", size=r["size"] // 2)

    rewrite_batch(d, wrong_dtype)
    with RecordingReader(d) as reader:
        info = reader.batches()[0]
        with pytest.raises(FormatError) as by_reader:
            reader.read_batch(info)
        (m,) = load_manifests(reader.storage)
        with pytest.raises(FormatError) as by_forms:
            batch_forms(reader.storage, m, info.number)
    assert str(by_forms.value) == str(by_reader.value)
    assert "float64" in str(by_reader.value)
    # (the dataset's hint leaves the batch out: its read task raises that error)
    assert _column_dtypes(d) == (("obs", "<f8"),)
