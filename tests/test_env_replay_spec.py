"""Replay rebuilds the recorded wrapper stack (10.2) and envs registered by other packages (10.3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RescaleAction, TimeAwareObservation, TransformObservation

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.replay.run import replay_recording

ROOT = Path(__file__).resolve().parent.parent


def _record(env, directory, steps=60, seed=0):
    with RecordingWrapper(env, directory) as rec:
        rec.reset(seed=seed)
        rec.action_space.seed(seed)
        for _ in range(steps):
            _, _, term, trunc, _ = rec.step(rec.action_space.sample())
            if term or trunc:
                rec.reset()


def test_time_aware_observation_is_rebuilt(tmp_path):
    _record(TimeAwareObservation(gym.make("CartPole-v1")), tmp_path)
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        spec = reader.writers[0]["manifest"]["env_spec"]
    assert [w["name"] for w in spec["additional_wrappers"]] == ["TimeAwareObservation"]
    assert ep.observations.shape == (len(ep) + 1, 5)
    assert np.array_equal(ep.observations[:, 4], np.arange(len(ep) + 1, dtype=np.float32))
    checks = list(replay_recording(tmp_path))
    assert checks and all(c.status == "match" for c in checks), [c.message for c in checks]


def test_rescale_action_on_pendulum_is_rebuilt(tmp_path):
    _record(RescaleAction(gym.make("Pendulum-v1"), np.float32(-0.5), np.float32(0.5)), tmp_path,
            steps=40)
    with RecordingReader(tmp_path) as reader:
        actions = reader[0].actions
    assert actions.dtype == np.float32 and (np.abs(actions) <= 0.5).all()
    (check,) = list(replay_recording(tmp_path))
    assert check.status == "match", check.message
    # without the wrapper, the same actions give other observations: the check can fail
    env = gym.make("Pendulum-v1")
    env.reset(seed=0)
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
    bare = np.stack([env.step(a)[0] for a in ep.actions])
    assert not np.array_equal(bare, ep.observations[1:])


def test_a_wrapper_that_cannot_be_rebuilt_is_named(tmp_path):
    space = gym.make("CartPole-v1").observation_space
    _record(TransformObservation(gym.make("CartPole-v1"), lambda o: o * 2, space), tmp_path,
            steps=10)
    checks = list(replay_recording(tmp_path))
    assert checks and all(c.status == "skipped" for c in checks)
    assert "wrapper TransformObservation" in checks[0].message and "func=" in checks[0].message


class EnvOnlyWrapper(gym.ObservationWrapper):
    """Like minigrid's ImgObsWrapper: not a RecordConstructorArgs, but takes only ``env``."""

    def __init__(self, env):
        super().__init__(env)

    def observation(self, observation):
        return observation * 2


class WrapperWithArgument(gym.ObservationWrapper):
    """Not a RecordConstructorArgs, with an argument: it cannot be rebuilt."""

    def __init__(self, env, scale=2.0):
        super().__init__(env)
        self.scale = scale

    def observation(self, observation):
        return observation * self.scale


def test_a_wrapper_taking_only_env_is_rebuilt(tmp_path):
    """A wrapper whose __init__ takes only env (minigrid's ImgObsWrapper) has no arguments to
    record: replay rebuilds it as wrapper(env). Every such episode was skipped ("does not record
    its constructor arguments"). One with another argument is still named and skipped."""
    _record(EnvOnlyWrapper(gym.make("CartPole-v1")), tmp_path / "only", steps=30)
    with RecordingReader(tmp_path / "only") as reader:
        (w,) = reader.writers[0]["manifest"]["env_spec"]["additional_wrappers"]
    assert w["name"] == "EnvOnlyWrapper" and w["kwargs"] == {}
    checks = list(replay_recording(tmp_path / "only"))
    assert checks and all(c.status == "match" for c in checks), [c.message for c in checks]

    _record(WrapperWithArgument(gym.make("CartPole-v1"), 3.0), tmp_path / "arg", steps=10)
    checks = list(replay_recording(tmp_path / "arg"))
    assert checks and all(c.status == "skipped" for c in checks)
    assert "WrapperWithArgument" in checks[0].message and "constructor" in checks[0].message


PACKAGE = {
    "tinyenvs/__init__.py": """
        import gymnasium as gym
        gym.register("TinyWalk-v0", entry_point="tinyenvs.walk:TinyWalk", max_episode_steps=25)
    """,
    "tinyenvs/walk.py": """
        import gymnasium as gym
        import numpy as np

        class TinyWalk(gym.Env):
            observation_space = gym.spaces.Box(-100, 100, (2,), np.float64)
            action_space = gym.spaces.Discrete(3)

            def __init__(self, drift=0.5):
                self.drift = drift

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.pos = self.np_random.normal(size=2)
                return self.pos.copy(), {}

            def step(self, action):
                self.pos = self.pos + (action - 1) * self.drift + self.np_random.normal(size=2)
                return self.pos.copy(), float(-abs(self.pos).sum()), bool(abs(self.pos).max() > 8), False, {}
    """,
    # registers a second id for the same class, from another module
    "tinyplugin/__init__.py": """
        import gymnasium as gym
        gym.register("TinyPlugin-v0", entry_point="tinyenvs.walk:TinyWalk", kwargs={"drift": 2.0})
    """,
}


def _cli(args, cwd, pythonpath):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + pythonpath)}
    return subprocess.run([sys.executable, "-m", "gym_recorder", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_env_of_another_package_replays_from_the_cli(tmp_path):
    pkg = tmp_path / "pkg"
    for name, text in PACKAGE.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(textwrap.dedent(text))
    rec = tmp_path / "rec"
    # gymnasium's module:EnvId form, run from the package's directory
    proc = _cli(["record", "tinyenvs:TinyWalk-v0", "-d", str(rec), "--episodes", "3",
                 "--seed", "5"], cwd=pkg, pythonpath=[])
    assert proc.returncode == 0, proc.stderr
    with RecordingReader(rec) as reader:
        assert reader.writers[0]["manifest"]["env_spec"]["module"] == "tinyenvs.walk"
        obs = reader[0].observations
    assert obs.dtype == np.float64 and obs.shape[1] == 2
    # replay (elsewhere, the package importable): the recorded module is imported
    proc = _cli(["replay", str(rec)], cwd=tmp_path, pythonpath=[str(pkg)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(": match") == 3
    # an id registered by a module that the recording cannot know: --import
    rec2 = tmp_path / "rec2"
    proc = _cli(["record", "TinyPlugin-v0", "--import", "tinyplugin", "-d", str(rec2),
                 "--steps", "30", "--seed", "1"], cwd=pkg, pythonpath=[])
    assert proc.returncode == 0, proc.stderr
    with RecordingReader(rec2) as reader:
        spec = reader.writers[0]["manifest"]["env_spec"]
        assert spec["imports"] == ["tinyplugin"] and spec["kwargs"] == {"drift": 2.0}
    proc = _cli(["replay", str(rec2)], cwd=tmp_path, pythonpath=[str(pkg)])
    assert proc.returncode == 0 and proc.stdout.count(": match") >= 1, proc.stdout + proc.stderr
    # a recording that names no module that registers it: replay says to --import one
    rec3 = tmp_path / "rec3"
    script = ("import gymnasium as gym, tinyplugin\n"
              "from gym_recorder import RecordingWrapper\n"
              f"env = RecordingWrapper(gym.make('TinyPlugin-v0'), {str(rec3)!r})\n"
              "env.reset(seed=2)\n"
              "for a in [0, 1, 2, 1]:\n"
              "    env.step(a)\n"
              "env.close()\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=pkg,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc = _cli(["replay", str(rec3)], cwd=tmp_path, pythonpath=[str(pkg)])
    assert proc.returncode == 1 and "--import MODULE" in proc.stderr, proc.stderr
    proc = _cli(["replay", str(rec3), "--import", "tinyplugin"], cwd=tmp_path,
                pythonpath=[str(pkg)])
    assert proc.returncode == 0 and "episode 0: match (4 steps)" in proc.stdout, proc.stderr
