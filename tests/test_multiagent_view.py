"""The viewer page on multi-agent recordings (headless Chromium): every agent's reward column
named by agent and charted in "rewards by agent", the agent picker showing one agent's leaves,
and a manifest whose "multiagent" lies refused by name."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from test_view_page import Served, driver, open_page, wait_for  # noqa: E402,F401

from gym_recorder import RecordingReader  # noqa: E402


def _record(directory):
    from pettingzoo.butterfly import knights_archers_zombies_v11 as kaz

    from gym_recorder.record.multiagent import RecordingParallelWrapper

    env = RecordingParallelWrapper(kaz.parallel_env(max_cycles=80, spawn_delay=3), directory)
    env.reset(seed=4)
    for a in env.possible_agents:
        env.action_space(a).seed(4)
    while env.agents:
        env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()


# Every panel (one per dimension) as [its group's title, its series' name, its data].
CHARTS = ("return window.viewer.state.charts.map(c => [c.canvas.parentElement.dataset.group, "
          "c.series[0].name, Array.from(c.series[0].data)])")


def test_rewards_by_agent_and_the_agent_picker(driver, tmp_path):
    rec = tmp_path / "rec"
    _record(rec)
    with RecordingReader(rec) as reader:
        ep = reader[0]
        agents = list(ep.multiagent.agents)
        rewards = ep.observations["rewards"]
    served = Served(rec)
    try:
        open_page(driver, served.url)
        charts = driver.execute_script(CHARTS)
        by_agent = [(name, data) for group, name, data in charts if group == "rewards by agent"]
        assert [name for name, _ in by_agent] == agents
        for k, (_, data) in enumerate(by_agent):
            np.testing.assert_array_equal(np.array(data), rewards[:, k])
        # Pick one agent: its leaves are shown, and its rewards alone.
        driver.execute_script(
            "const s = document.getElementById('agent'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'))", "knight_1")
        chosen = wait_for(driver, "return [...window.viewer.state.chosen]",
                          lambda c: c and all("knight_1" in p for p in c))
        assert "observations/observations/knight_1" in chosen
        assert "actions/actions/knight_1" in chosen
        charts = driver.execute_script(CHARTS)
        assert [name for group, name, _ in charts if group == "rewards by agent"] == ["knight_1"]
        names = {name for _, name, _ in charts}
        assert "actions/actions/knight_1" in names and "actions/actions/knight_0" not in names
        checked = driver.execute_script(
            "return [...document.querySelectorAll('#tree input:checked')].map(i => i.dataset.leaf)")
        assert checked == ["actions/actions/knight_1"]  # (a 27x5 observation has no box)
        assert not driver.execute_script(
            "return document.getElementById('agent').parentElement.hidden")
    finally:
        served.close()


def test_a_lying_multiagent_manifest_is_refused_by_name(driver, tmp_path):
    rec = tmp_path / "rec"
    _record(rec)
    path = next(rec.glob("*.manifest.json"))
    doc = json.loads(path.read_text())
    doc["multiagent"]["agents"] = ["a", "a"]
    path.write_text(json.dumps(doc))
    served = Served(rec)
    try:
        driver.get(served.url)
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "error")
        text = driver.execute_script("return document.getElementById('error').textContent")
        assert "'multiagent' must have" in text
    finally:
        served.close()
