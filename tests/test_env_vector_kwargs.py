"""Vector recordings keep every kwarg they can, name the rest, and replay (10.4)."""

from __future__ import annotations

import fractions
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from gym_recorder import RecordingReader, RecordingVectorWrapper
from gym_recorder.replay.run import replay_frames, replay_recording
from needs import need_module

ROOT = Path(__file__).resolve().parent.parent


class ScaledPendulum(PendulumEnv):
    """Pendulum whose torque is scaled by a kwarg that need not be JSON (a Fraction)."""

    def __init__(self, scale=1, g=10.0, render_mode=None):
        super().__init__(render_mode=render_mode, g=g)
        self.scale = float(scale)

    def step(self, u):
        return super().step(np.asarray(u) * self.scale)


if "ScaledPendulum-v0" not in gym.registry:
    gym.register("ScaledPendulum-v0", entry_point=ScaledPendulum, max_episode_steps=50)


def test_readme_vector_example_replays_and_films(tmp_path):
    """gym.make_vec with the default (native vector entry point) mode, as in docs/vector-envs.md."""
    envs = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=8), tmp_path)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(120):
        envs.step(envs.action_space.sample())
    envs.close()
    with RecordingReader(tmp_path) as reader:
        n = len(reader)
        ended = [ep.index for ep in reader if ep.end in ("terminated", "truncated")]
        ep = reader[ended[0]]
    checks = list(replay_recording(tmp_path))
    assert len(checks) == n
    assert {c.status for c in checks} == {"match"}, [c.message for c in checks if c.message]
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    check = replay_frames(tmp_path, ep.index)
    assert check.status == "match"
    assert len(check.frames) == ep.length + 1 and check.frames[0].shape == (400, 600, 3)
    # the frames are the sub-env's own: its cart's position moves as its observations do
    assert not np.array_equal(check.frames[0], check.frames[-1])


def test_readme_vector_example_from_the_cli(tmp_path):
    need_module("imageio", 'pip install ".[video]"')
    script = ("import gymnasium as gym\n"
              "from gym_recorder import RecordingVectorWrapper\n"
              f"envs = RecordingVectorWrapper(gym.make_vec('CartPole-v1', num_envs=4), {str(tmp_path / 'rec')!r})\n"
              "envs.reset(seed=0)\nenvs.action_space.seed(0)\n"
              "for _ in range(60):\n    envs.step(envs.action_space.sample())\n"
              "envs.close()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SDL_VIDEODRIVER": "dummy"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    proc = subprocess.run([sys.executable, "-m", "gym_recorder", "replay", str(tmp_path / "rec")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "0 mismatch, 0 skipped" in proc.stdout, proc.stderr
    out = tmp_path / "ep0.gif"
    proc = subprocess.run([sys.executable, "-m", "gym_recorder", "video", str(tmp_path / "rec"),
                           "-o", str(out), "--episode", "0"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "from replay" in proc.stdout, proc.stderr
    assert out.stat().st_size > 1000


def test_non_json_kwarg_is_named_and_given_back_with_env_kwargs(tmp_path):
    vec = gym.make_vec("ScaledPendulum-v0", num_envs=2, vectorization_mode="sync",
                       scale=fractions.Fraction(1, 2), g=9.0)
    envs = RecordingVectorWrapper(vec, tmp_path)
    envs.reset(seed=3)
    for k in range(12):
        envs.step(np.full((2, 1), 0.3 * (k % 3), np.float32))
    envs.close()
    with RecordingReader(tmp_path) as reader:
        spec = reader.writers[0]["manifest"]["env_spec"]
        obs = reader[0].observations
    assert spec["kwargs"]["g"] == 9.0 and spec["kwargs"]["vectorization_mode"] == "sync"
    assert spec["missing_kwargs"] == {"scale": "Fraction(1, 2)"}
    assert obs.shape == (13, 3)
    checks = list(replay_recording(tmp_path))
    assert checks and all(c.status == "skipped" for c in checks)
    assert "scale=Fraction(1, 2)" in checks[0].message and "--env-kwargs" in checks[0].message
    checks = list(replay_recording(tmp_path, env_kwargs={"scale": 0.5}))
    assert [c.status for c in checks] == ["match", "match"], [c.message for c in checks]
    # a wrong value is found out: the check can fail
    checks = list(replay_recording(tmp_path, env_kwargs={"scale": 0.25}))
    assert all(c.status == "mismatch" for c in checks)
