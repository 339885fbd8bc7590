"""Who or what made a recording: RecordingWrapper(metadata=...), RecordingVectorWrapper(metadata=...)
and `record --meta KEY=VALUE` put it in every writer's manifest; info shows it; the Minari and
Parquet exports keep it. On ALE's Breakout (through ale-py) and CartPole."""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest

from gym_recorder import RecordingReader, RecordingWrapper, UnsupportedValueError, cli
from gym_recorder.integrations.export import summarize
from gym_recorder.record.vector import RecordingVectorWrapper

from needs import need_module

META = {"algorithm_name": "random", "author": "Ada", "notes": "first try", "lr": 0.5,
        "layers": [64, 64]}


def _manifests(directory):
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.manifest.json"))]


def test_record_meta_on_breakout_is_in_the_manifest_and_shown_by_info(tmp_path, capsys):
    need_module("ale_py", "pip install ale-py")
    rec = tmp_path / "rec"
    assert cli.main(["record", "ALE/Breakout-v5", "-d", str(rec), "--steps", "30", "--seed", "1",
                     "--import", "ale_py", "--meta", "author=Ada", "--meta",
                     "algorithm_name=random", "--meta", "notes=a=b c", "-q"]) == 0
    (manifest,) = _manifests(rec)
    assert manifest["metadata"] == {"author": "Ada", "algorithm_name": "random",
                                    "notes": "a=b c"}
    assert summarize(rec)["metadata"] == manifest["metadata"]
    assert cli.main(["info", str(rec)]) == 0
    out = capsys.readouterr().out
    assert "metadata           author: Ada\n" in out
    assert "                   algorithm_name: random\n" in out
    assert "                   notes: a=b c\n" in out
    with pytest.raises(SystemExit):
        cli.main(["record", "ALE/Breakout-v5", "-d", str(rec), "--meta", "author"])
    assert "is not KEY=VALUE" in capsys.readouterr().err


def test_metadata_is_kept_by_every_writer_and_refused_when_not_json(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, metadata=META)
    env.reset(seed=0)
    env.step(0)
    twin = copy.deepcopy(env)  # a copy records as a writer of its own
    twin.reset(seed=1)
    twin.step(1)
    twin.close()
    env.close()
    vec = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=2), tmp_path,
                                 metadata={"author": "Ada"})
    vec.reset(seed=2)
    vec.step(vec.action_space.sample())
    vec.close()
    manifests = _manifests(tmp_path)
    assert sorted(json.dumps(m["metadata"], sort_keys=True) for m in manifests) == sorted(
        [json.dumps(META, sort_keys=True)] * 2 + ['{"author": "Ada"}'])
    with RecordingReader(tmp_path) as reader:
        assert len(reader) == 4
    for bad, match in (({"x": object()}, "builtins.object"), ({1: "a"}, "not a string"),
                       ({"x": float("nan")}, "not a finite"), ("me", "must be a dict"),
                       ({"x": "y" * 70000}, "bytes of JSON")):
        with pytest.raises(UnsupportedValueError, match=match):
            RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "bad", metadata=bad)


def test_metadata_goes_to_minari_and_the_parquet_card(tmp_path, monkeypatch):
    minari = need_module("minari", 'pip install ".[minari]"')
    need_module("pyarrow", 'pip install ".[arrow]"')
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    rec = tmp_path / "rec"
    meta = {**META, "code_permalink": "https://example.org/run.py", "author_email": "a@b.c"}
    with RecordingWrapper(gym.make("CartPole-v1"), rec, metadata=meta) as env:
        env.reset(seed=0)
        for _ in range(5):
            env.step(0)
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id",
                     "test/meta-v0", "-q"]) == 0
    ds = minari.load_dataset("test/meta-v0")
    assert ds.storage.metadata["algorithm_name"] == "random"
    assert ds.storage.metadata["author"] == {"Ada"}
    assert ds.storage.metadata["author_email"] == {"a@b.c"}
    assert ds.storage.metadata["code_permalink"] == "https://example.org/run.py"
    out = tmp_path / "pq"
    assert cli.main(["export", str(rec), "--format", "parquet", "-o", str(out), "-q"]) == 0
    card = (out / "README.md").read_text()
    assert "## Provenance\n\n- algorithm_name: random\n- author: Ada\n" in card
    assert "- layers: [64, 64]\n" in card
    assert json.loads((out / "gym_recorder.json").read_text())["metadata"] == meta


def test_import_minari_keeps_the_datasets_metadata(tmp_path, monkeypatch):
    need_module("minari", 'pip install ".[minari]"')
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    rec = tmp_path / "rec"
    with RecordingWrapper(gym.make("CartPole-v1"), rec, metadata={"author": "Ada",
                                                                  "algorithm_name": "random"}) as env:
        env.reset(seed=0)
        for _ in range(3):
            env.step(1)
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id", "test/meta-import-v0",
                     "-q"]) == 0
    assert cli.main(["import-minari", "test/meta-import-v0", str(tmp_path / "back"), "-q"]) == 0
    (manifest,) = _manifests(tmp_path / "back")
    assert manifest["metadata"] == {"minari_dataset_id": "test/meta-import-v0",
                                    "algorithm_name": "random", "author": ["Ada"],
                                    "description": f"Exported by gym_recorder from {rec}."}
