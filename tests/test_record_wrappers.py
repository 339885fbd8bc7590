"""`record --wrapper NAME:KEY=VALUE,...` applies Gymnasium wrappers by name (Atari's
AtariPreprocessing and FrameStackObservation), around each sub-env with --num-envs, and `replay`
rebuilds them. On ALE's Breakout through ale-py."""

from __future__ import annotations

import numpy as np
import pytest

from gym_recorder import RecordingReader, cli
from gym_recorder.replay.drive import parse_wrapper

from needs import need_module

ATARI = ["--import", "ale_py", "--env-kwargs", '{"frameskip": 1}',
         "--wrapper", "AtariPreprocessing:noop_max=5,screen_size=84",
         "--wrapper", "FrameStackObservation:stack_size=4"]


@pytest.mark.parametrize("vector", [[], ["--num-envs", "2"]], ids=["single", "vector"])
def test_breakout_preprocessed_and_stacked_from_the_cli_replays(tmp_path, capsys, vector):
    need_module("ale_py", "pip install ale-py")
    need_module("cv2", "pip install opencv-python-headless")
    rec = tmp_path / "rec"
    assert cli.main(["record", "ALE/Breakout-v5", "-d", str(rec), "--steps", "24", "--seed",
                     "3", "-q", *ATARI, *vector]) == 0
    with RecordingReader(rec) as reader:
        assert reader.observation_space.shape == (4, 84, 84)
        obs = reader.column("observations")
        assert obs.dtype == np.uint8 and obs.shape[1:] == (4, 84, 84)
        # the stack: frame k of a row is frame k + 1 of the row before (within an episode)
        ep = reader[0]
        assert np.array_equal(ep.observations[1:, :3], ep.observations[:-1, 1:])
        wrappers = reader.writers[0]["manifest"]["env_spec"]["additional_wrappers"]
        assert [w["name"] for w in wrappers] == ["AtariPreprocessing", "FrameStackObservation"]
    capsys.readouterr()
    assert cli.main(["replay", str(rec)]) == 0
    out = capsys.readouterr().out
    assert "0 mismatch, 0 skipped" in out and "match" in out


def test_wrapper_syntax_and_errors(tmp_path, capsys):
    assert parse_wrapper("FrameStackObservation") == ("FrameStackObservation", {})
    assert parse_wrapper("AtariPreprocessing:noop_max=0,screen_size=[84, 84],grayscale_obs=true,"
                         "x=a b") == ("AtariPreprocessing", {"noop_max": 0, "screen_size": [84, 84],
                                                             "grayscale_obs": True, "x": "a b"})
    with pytest.raises(SystemExit):
        cli.main(["record", "CartPole-v1", "-d", str(tmp_path), "--wrapper", "Frame:stack"])
    assert "'stack' is not KEY=VALUE" in capsys.readouterr().err
    assert cli.main(["record", "CartPole-v1", "-d", str(tmp_path), "--wrapper", "NoSuchWrapper",
                     "-q"]) == 1
    assert "no wrapper 'NoSuchWrapper' in gymnasium.wrappers" in capsys.readouterr().err
    assert cli.main(["record", "CartPole-v1", "-d", str(tmp_path), "--wrapper",
                     "TimeLimit:max_episode_steps=-1", "-q"]) == 1
    assert "wrapper TimeLimit(max_episode_steps=-1) cannot wrap the env" in \
        capsys.readouterr().err
    assert not list(tmp_path.glob("*.manifest.json"))
