"""The command line's training formats: export --format parquet|minari, import-minari."""

from __future__ import annotations

import os

import numpy as np

from gym_recorder import RecordingReader, cli

from needs import need_module


def _record(tmp_path, n=5):
    rec = tmp_path / "rec"
    assert cli.main(["record", "CartPole-v1", "-d", str(rec), "--seed", "0", "-q",
                     "--episodes", str(n)]) == 0
    return rec


def test_export_parquet_and_minari_then_import(tmp_path, capsys, monkeypatch):
    pads = need_module("pyarrow.dataset", 'pip install ".[arrow]"')
    need_module("minari", 'pip install ".[minari]"')
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "mroot"))
    rec = _record(tmp_path)
    with RecordingReader(rec) as reader:
        rewards = np.concatenate([ep.rewards for ep in reader])
        actions = np.concatenate([ep.actions for ep in reader])
    out = tmp_path / "pq"
    assert cli.main(["export", str(rec), "--format", "parquet", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: 5 episodes, {len(rewards)} steps in 1 Parquet file")
    table = pads.dataset(out / "data", format="parquet").to_table()
    assert np.array_equal(table.column("reward").to_numpy(), rewards)
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id",
                     "cli/cartpole-v0"]) == 0
    assert "wrote Minari dataset cli/cartpole-v0" in capsys.readouterr().out
    back = tmp_path / "back"
    assert cli.main(["import-minari", "cli/cartpole-v0", str(back)]) == 0
    assert capsys.readouterr().out == (f"imported 5 episodes, {len(rewards)} steps of Minari "
                                       f"dataset cli/cartpole-v0 into {back}\n")
    with RecordingReader(back) as reader:
        assert np.array_equal(np.concatenate([ep.actions for ep in reader]), actions)
    # an output that exists: one line, exit 1, nothing touched
    assert cli.main(["export", str(rec), "--format", "parquet", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"gym-recorder export: error: {out} exists; choose a new output folder\n"
    assert cli.main(["import-minari", "cli/cartpole-v0", str(back)]) == 1
    assert "exists; choose a new recording directory" in capsys.readouterr().err
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id",
                     "cli/cartpole-v0"]) == 1
    assert "the Minari dataset cli/cartpole-v0 exists" in capsys.readouterr().err


def test_export_argument_mistakes_are_one_line(tmp_path, capsys):
    rec = _record(tmp_path, 1)
    assert cli.main(["export", str(rec), "--format", "minari", "-o", "x"]) == 1
    assert "takes --dataset-id NS/NAME-vN and no --output" in capsys.readouterr().err
    assert cli.main(["export", str(rec), "--format", "parquet"]) == 1
    assert "--format parquet takes --output" in capsys.readouterr().err
    assert cli.main(["export", str(rec)]) == 1
    assert "--format npz takes --output" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["rec"]
