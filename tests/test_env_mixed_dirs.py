"""Several envs in one directory: info, plot and export group by env id; a warning (10.10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.read.envgroups import MixedEnvsWarning
from gym_recorder.integrations.export import ExportError, export_npz, plot_returns, summarize
from needs import need_module

ROOT = Path(__file__).resolve().parent.parent


def _record(env_id, directory, episodes, seed):
    truth = []
    with RecordingWrapper(gym.make(env_id), directory) as env:
        env.action_space.seed(seed)
        for k in range(episodes):
            env.reset(seed=seed + k)
            total, n = 0.0, 0
            while True:
                _, r, term, trunc, _ = env.step(env.action_space.sample())
                total += float(r)
                n += 1
                if term or trunc or n == 30:
                    break
            truth.append((n, total))
    return truth


@pytest.fixture
def mixed(tmp_path):
    cart = _record("CartPole-v1", tmp_path, 3, 0)
    with pytest.warns(MixedEnvsWarning, match="CartPole-v1"):
        pend = _record("Pendulum-v1", tmp_path, 2, 10)
    return tmp_path, cart, pend


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "gym_recorder", *map(str, args)],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)


def test_info_groups_by_env(mixed):
    d, cart, pend = mixed
    s = summarize(d)
    assert s["env_id"] is None
    by_id = {g["env_id"]: g for g in s["envs"]}
    assert set(by_id) == {"CartPole-v1", "Pendulum-v1"}
    assert by_id["CartPole-v1"]["episodes"] == 3 and by_id["Pendulum-v1"]["episodes"] == 2
    assert by_id["CartPole-v1"]["steps"] == sum(n for n, _ in cart)
    assert by_id["Pendulum-v1"]["total_reward_min"] == pytest.approx(min(t for _, t in pend))
    assert "Box(-2.0, 2.0, (1,), float32)" == by_id["Pendulum-v1"]["action_space"]
    assert by_id["CartPole-v1"]["action_space"] == "Discrete(2)"
    proc = _cli("info", d)
    assert proc.returncode == 0, proc.stderr
    assert "envs               2" in proc.stdout
    assert "  env id           CartPole-v1" in proc.stdout
    assert "  env id           Pendulum-v1" in proc.stdout
    doc = json.loads(_cli("info", d, "--json").stdout)
    assert [g["episodes"] for g in doc["envs"]] == [by_id[g["env_id"]]["episodes"]
                                                     for g in doc["envs"]]


def test_export_needs_an_env_and_exports_only_its_episodes(mixed, tmp_path_factory):
    d, cart, pend = mixed
    out = tmp_path_factory.mktemp("out")
    with pytest.raises(ExportError, match=r"2 envs \(CartPole-v1, Pendulum-v1\).*--env"):
        export_npz(d, out / "all.npz")
    proc = _cli("export", d, "-o", out / "x.npz")
    assert proc.returncode == 1 and "--env" in proc.stderr
    proc = _cli("export", d, "-o", out / "pend.npz", "--env", "Pendulum-v1")
    assert proc.returncode == 0, proc.stderr
    data = np.load(out / "pend.npz")
    with RecordingReader(d) as reader:
        eps = [ep for ep in reader if ep.env_id == "Pendulum-v1"]
    assert np.array_equal(data["episode_lengths"], [n for n, _ in pend])
    assert np.array_equal(data["observations"], np.concatenate([ep.observations for ep in eps]))
    assert np.array_equal(data["actions"], np.concatenate([ep.actions for ep in eps]))
    assert data["observations"].shape[1] == 3


def test_plot_draws_one_series_per_env(mixed, tmp_path_factory):
    need_module("matplotlib", 'pip install ".[plot]"')
    import matplotlib

    d, _, _ = mixed
    out = tmp_path_factory.mktemp("plot") / "returns.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text stays text in the svg
        plot_returns(summarize(d), out)
    svg = out.read_text()
    assert "CartPole-v1" in svg and "Pendulum-v1" in svg and "2 envs" in svg


def test_no_warning_for_the_same_env(tmp_path):
    import warnings

    _record("CartPole-v1", tmp_path, 1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedEnvsWarning)
        _record("CartPole-v1", tmp_path, 1, 5)
    assert summarize(tmp_path)["env_id"] == "CartPole-v1"


def test_a_writer_adding_to_an_env_already_in_the_directory_is_not_warned(tmp_path):
    """Only a writer whose env is new to the directory is warned (at the user's line)."""
    import warnings

    from gym_recorder.record import session

    _record("CartPole-v1", tmp_path, 1, 0)
    with pytest.warns(MixedEnvsWarning) as record:
        _record("Pendulum-v1", tmp_path, 1, 10)
    assert record[0].filename == __file__
    session._CHECKED_ENVS.clear()  # (as a new process would: it checks once per env)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedEnvsWarning)
        _record("CartPole-v1", tmp_path, 1, 20)  # CartPole is recorded there already
