"""The Minari export keeps the env spec of envs registered by other packages (ALE through ale-py):
it imports the recorded entry point's module as replay does, takes --import MODULE, and says on one
line when the spec still cannot be kept. Exports run in a fresh interpreter, as a user's would,
where ale_py is not imported yet."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gym_recorder import cli

from needs import need_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, cwd, minari_root):
    env = {**os.environ, "PYTHONPATH": ROOT, "MINARI_DATASETS_PATH": str(minari_root)}
    return subprocess.run([sys.executable, "-m", "gym_recorder", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _recover(dataset_id, minari_root):
    code = ("import minari, json; ds = minari.load_dataset(%r); env = ds.recover_environment();"
            "print(json.dumps([env.spec.id, list(env.observation_space.shape)]))" % dataset_id)
    env = {**os.environ, "PYTHONPATH": ROOT, "MINARI_DATASETS_PATH": str(minari_root)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_breakout_exported_to_minari_keeps_its_env_spec(tmp_path):
    need_module("ale_py", "pip install ale-py")
    need_module("minari", 'pip install ".[minari]"')
    rec = tmp_path / "rec"
    assert cli.main(["record", "ALE/Breakout-v5", "-d", str(rec), "--steps", "20", "--seed",
                     "0", "--import", "ale_py", "-q"]) == 0
    root = tmp_path / "minari"
    r = _run("export", str(rec), "--format", "minari", "--dataset-id",
             "atari/breakout-random-v0", cwd=tmp_path, minari_root=root)
    assert r.returncode == 0, r.stderr
    assert "env spec not exported" not in r.stdout + r.stderr
    assert _recover("atari/breakout-random-v0", root) == ["ALE/Breakout-v5", [210, 160, 3]]


def test_import_option_and_the_one_line_note_when_the_spec_cannot_be_kept(tmp_path):
    need_module("minari", 'pip install ".[minari]"')
    # An env registered by a module of the test's own, which the recording names but a
    # fresh interpreter cannot import from elsewhere: without --import the spec is dropped, and
    # one line says why.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "myenvs.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('MyCartPole-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv',"
        " max_episode_steps=50)\n")
    rec = tmp_path / "rec"
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "gym_recorder", "record", "MyCartPole-v0", "-d",
                          str(rec), "--steps", "20", "--seed", "0", "--import", "myenvs", "-q"],
                         cwd=pkg, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    root = tmp_path / "minari"
    r = _run("export", str(rec), "--format", "minari", "--dataset-id", "my/cp-v0",
             cwd=tmp_path, minari_root=root)
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stdout.splitlines() if "env spec not exported" in line]
    assert len(notes) == 1 and "'MyCartPole-v0'" in notes[0] and "myenvs" in notes[0], r.stdout
    assert "--import" in notes[0]
    r = _run("export", str(rec), "--format", "minari", "--dataset-id", "my/cp-v1",
             "--import", "myenvs", cwd=pkg, minari_root=root)
    assert r.returncode == 0, r.stderr
    assert "env spec not exported" not in r.stdout
    r = _run("export", str(rec), "--format", "minari", "--dataset-id", "my/cp-v2",
             "--import", "no_such_module_here", cwd=pkg, minari_root=root)
    assert r.returncode == 1 and "no_such_module_here" in r.stderr
