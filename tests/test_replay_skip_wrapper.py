"""`replay --skip-wrapper NAME` replays a recording made through an info-only wrapper that cannot
be rebuilt (as Stable-Baselines3's Monitor, from make_vec_env(wrapper_class=...)), and the skip
message says so. The wrapper comes from a temporary package, as a user's own would."""

from __future__ import annotations

import importlib
import json

import gymnasium as gym

from gym_recorder import RecordingWrapper, cli

WRAPPER = '''
import gymnasium as gym


class EpisodeMonitor(gym.Wrapper):
    """Counts steps and adds them to the infos, as SB3's Monitor adds its "episode" info."""

    def __init__(self, env, note):
        super().__init__(env)
        self.note, self.t, self.total = note, 0, 0.0

    def reset(self, **kwargs):
        self.t, self.total = 0, 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        self.total += float(reward)
        if terminated or truncated:
            info = dict(info, episode={"r": self.total, "l": self.t, "note": self.note})
        return obs, reward, terminated, truncated, info
'''


def test_replay_skips_an_info_only_wrapper_when_told(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mymonitor.py").write_text(WRAPPER)
    monkeypatch.syspath_prepend(str(pkg))
    mymonitor = importlib.import_module("mymonitor")
    rec = tmp_path / "rec"
    env = RecordingWrapper(mymonitor.EpisodeMonitor(gym.make("CartPole-v1"), note="run 1"), rec)
    env.action_space.seed(0)
    for seed in (5, None):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            done = terminated or truncated
    env.close()
    assert info["episode"]["l"] > 0
    (manifest,) = [json.loads(p.read_text()) for p in rec.glob("*.manifest.json")]
    (wrapper,) = manifest["env_spec"]["additional_wrappers"]
    assert wrapper["name"] == "EpisodeMonitor" and wrapper["kwargs"] is None

    assert cli.main(["replay", str(rec)]) == 1
    captured = capsys.readouterr()
    assert "episode 0: skipped: wrapper EpisodeMonitor (mymonitor:EpisodeMonitor) cannot be " \
           "rebuilt" in captured.out
    assert "--skip-wrapper EpisodeMonitor" in captured.out
    assert "nothing could be checked" in captured.err

    assert cli.main(["replay", str(rec), "--skip-wrapper", "EpisodeMonitor"]) == 0
    out = capsys.readouterr().out
    assert "episode 0: match" in out and "episode 1: match" in out
    assert "2 episodes replayed: 2 match, 0 mismatch, 0 skipped" in out
