"""Empty episodes (a reset, then no step) stay in the recording but out of the figures a user
reads: info, summarize, plot and the Parquet card, on MuJoCo's HalfCheetah (negative returns: an
empty episode's 0 used to be their "max") and on CartPole after gymnasium's check_env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper, cli
from gym_recorder.integrations.export import summarize

from needs import need_module


def _half_cheetah(tmp_path, episodes=2, steps=15):
    """The common loop: reset after each truncation, then close: the last reset is empty."""
    need_module("mujoco", 'pip install "gymnasium[mujoco]"')
    env = RecordingWrapper(gym.make("HalfCheetah-v5", max_episode_steps=steps), tmp_path)
    env.reset(seed=0)
    env.action_space.seed(0)
    returns = []
    total = 0.0
    while len(returns) < episodes:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        total += float(reward)
        if terminated or truncated:
            returns.append(total)
            total = 0.0
            env.reset()
    env.close()
    return returns


def test_empty_episode_is_kept_but_left_out_of_info_and_summaries(tmp_path, capsys):
    returns = _half_cheetah(tmp_path)
    assert max(returns) < 0  # what made "max 0" a lie
    with RecordingReader(tmp_path) as reader:
        assert [len(ep) for ep in reader] == [15, 15, 0]  # the real reset is kept
    s = summarize(tmp_path)
    assert s["episodes"] == 3 and s["empty_episodes"] == 1 and s["steps"] == 30
    assert s["total_reward_max"] == pytest.approx(max(returns))
    assert s["total_reward_mean"] == pytest.approx(np.mean(returns))
    assert s["ends"] == {"truncated": 2}
    (group,) = s["envs"]
    assert group["empty_episodes"] == 1 and group["ends"] == {"truncated": 2}
    assert group["total_reward_max"] == pytest.approx(max(returns))
    assert cli.main(["info", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "episodes           2, and 1 empty (reset, no step; not in the figures)" in out
    assert f"max {max(returns):.4g}"[:8] in out and "max 0," not in out
    assert "ends               truncated 2\n" in out


def test_parquet_card_and_plot_leave_the_empty_episode_out(tmp_path):
    need_module("pyarrow", 'pip install ".[arrow]"')
    need_module("matplotlib", 'pip install ".[plot]"')
    rec = tmp_path / "rec"
    returns = _half_cheetah(rec)
    out = tmp_path / "pq"
    assert cli.main(["export", str(rec), "--format", "parquet", "-o", str(out), "-q"]) == 0
    card = (out / "README.md").read_text()
    assert "- episodes: 2, steps: 30 (1 more episode of 0 steps" in card
    assert f"max {max(returns):.6g}" in card
    assert "how episodes ended: truncated 2\n" in card
    assert cli.main(["plot", str(rec), "-o", str(tmp_path / "r.png"), "-q"]) == 0
    assert (tmp_path / "r.png").stat().st_size > 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_check_env_probe_episodes_are_counted_apart(tmp_path):
    from gymnasium.utils.env_checker import check_env

    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    check_env(env, skip_render_check=True)
    env.close()
    s = summarize(tmp_path)
    with RecordingReader(tmp_path) as reader:
        lengths = [len(ep) for ep in reader]
    assert s["empty_episodes"] == lengths.count(0) > 0
    assert s["episodes"] == len(lengths)
    assert sum(s["ends"].values()) == len(lengths) - lengths.count(0)
