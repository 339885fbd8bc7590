"""`video` streams frames to the encoder (bounded memory), shows progress, renders MuJoCo headless
(MUJOCO_GL=egl when there is no display), and plays image observations at the env's render_fps.
On HalfCheetah-v5 (gymnasium[mujoco]), CartPole and MiniGrid (RGB image observations)."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingWrapper, cli

from needs import need_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _frames(path):
    import imageio.v3 as iio

    return np.stack(list(iio.imiter(path)))


def test_half_cheetah_video_renders_headless_with_progress(tmp_path):
    need_module("mujoco", 'pip install "gymnasium[mujoco]"')
    need_module("imageio_ffmpeg", 'pip install ".[video]"')
    rec = tmp_path / "rec"
    env = RecordingWrapper(gym.make("HalfCheetah-v5", width=64, height=48,
                                    max_episode_steps=20), rec)
    env.reset(seed=0)
    env.action_space.seed(0)
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        done = terminated or truncated
    env.close()
    out = tmp_path / "cheetah.mp4"
    # A user's shell on a machine without a display: no MUJOCO_GL, no DISPLAY.
    clean = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY",
                                                              "PYOPENGL_PLATFORM")}
    clean["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-m", "gym_recorder", "video", str(rec), "-o",
                           str(out)], env=clean, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "gym-recorder video: 21/21 frames" in proc.stderr
    assert "wrote" in proc.stdout and "21 frames of episode 0" in proc.stdout
    assert "20 fps" in proc.stdout  # HalfCheetah's render_fps (1 / dt)
    frames = _frames(out)
    assert frames.shape == (21, 48, 64, 3)
    assert frames.std() > 0  # a picture, not a blank


RSS_SCRIPT = """
import resource, sys
from gym_recorder import cli
code = cli.main(["video", sys.argv[1], "-o", sys.argv[2], "-q"])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux
sys.exit(code)
"""


def _cartpole(directory, steps):
    env = RecordingWrapper(gym.make("CartPole-v1", max_episode_steps=steps), directory)
    env.reset(seed=1)
    for t in range(steps):  # a balancing policy keeps it up to the time limit
        s = env.unwrapped.state
        *_, terminated, truncated, _ = env.step(int(s[2] + 0.5 * s[3] > 0))
        if terminated or truncated:
            break
    env.close()
    return t + 1


def _video_peak_rss_mb(rec, out):
    env = {**os.environ, "PYTHONPATH": ROOT, "SDL_VIDEODRIVER": "dummy"}
    proc = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(rec), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1]) / 1024


def test_replayed_video_holds_no_frames_in_memory(tmp_path):
    need_module("imageio_ffmpeg", 'pip install ".[video]"')
    need_module("pygame", 'pip install "gymnasium[classic-control]"')
    long, short = _cartpole(tmp_path / "long", 400), _cartpole(tmp_path / "short", 20)
    assert (long, short) == (400, 20)
    peak_long = _video_peak_rss_mb(tmp_path / "long", tmp_path / "long.mp4")
    peak_short = _video_peak_rss_mb(tmp_path / "short", tmp_path / "short.mp4")
    held = 380 * 400 * 600 * 3 / 2**20  # the extra frames, had they been kept: 261 MiB
    assert peak_long - peak_short < held / 4, (peak_long, peak_short)
    assert _frames(tmp_path / "long.mp4").shape == (401, 400, 600, 3)


def test_video_of_image_observations_plays_at_the_envs_render_fps(tmp_path, capsys):
    minigrid = need_module("minigrid", "pip install minigrid")
    need_module("imageio_ffmpeg", 'pip install ".[video]"')
    from minigrid.wrappers import RGBImgObsWrapper

    gym.register_envs(minigrid)
    rec = tmp_path / "rec"
    env = RecordingWrapper(RGBImgObsWrapper(gym.make("MiniGrid-Empty-5x5-v0",
                                                     max_episode_steps=12)), rec)
    env.reset(seed=0)
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(0)  # turning left: never reaches the goal
        done = terminated or truncated
    env.close()
    out = tmp_path / "grid.mp4"
    assert cli.main(["video", str(rec), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    # MiniGrid's render_fps, 10 (the default would be 30)
    assert "13 frames of episode 0 from observations/image, 10 fps" in captured.out
    assert "gym-recorder video: 13/13 frames" in captured.err
    assert _frames(out).shape == (13, 40, 40, 3)
    assert cli.main(["video", str(rec), "-o", str(tmp_path / "b.mp4"), "--fps", "7"]) == 0
    assert "7 fps" in capsys.readouterr().out
