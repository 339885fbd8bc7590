"""The viewer's analysis views in headless Chromium: panels per dimension, shared zoom, info
series, markers, action names, frame scaling, comparison, per-dimension statistics.

Recordings of CartPole, Atari Pong (ale-py), HalfCheetah (MuJoCo, 17 observation dimensions) and
a vector CartPole are served by the real server; what the page holds (its charts' ranges and
series, canvas sizes and pixels, the cursor panel) is compared with RecordingReader's arrays.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
from needs import need_module
from test_view_page import Served, driver, open_page, table, wait_for  # noqa: F401  (fixture)

from gym_recorder import RecordingReader, RecordingVectorWrapper, RecordingWrapper

PANELS = "return [...document.querySelectorAll('#charts canvas.series-panel')].map(c => c.dataset.series)"
RANGES = "return window.viewer.state.charts.filter(c => !c.canvas.hidden).map(c => [c.map.x0, c.map.x1])"


def record(directory: Path, env: gym.Env, episodes: int, seed0: int = 0) -> None:
    env = RecordingWrapper(env, directory)
    env.action_space.seed(seed0)
    for i in range(episodes):
        env.reset(seed=seed0 + i)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()


def panel_rect(driver, series: str) -> dict:
    return driver.execute_script(
        "const r = document.querySelector(`canvas.series-panel[data-series='${arguments[0]}']`)"
        ".getBoundingClientRect(); return {left: r.left, top: r.top, width: r.width, height: r.height};",
        series)


def brush(driver, series: str, frac0: float, frac1: float) -> None:
    """Drags over a panel from frac0 to frac1 of its plot's width (a brush)."""
    r = panel_rect(driver, series)
    x = [r["left"] + 48 + (r["width"] - 56) * f for f in (frac0, frac1)]
    y = r["top"] + 30
    driver.execute_script(
        "const c = document.querySelector(`canvas.series-panel[data-series='${arguments[0]}']`);"
        "const [x0, x1, y] = [arguments[1], arguments[2], arguments[3]];"
        "c.dispatchEvent(new MouseEvent('mousedown', {clientX: x0, clientY: y, bubbles: true}));"
        "c.dispatchEvent(new MouseEvent('mousemove', {clientX: (x0 + x1) / 2, clientY: y, bubbles: true}));"
        "c.dispatchEvent(new MouseEvent('mousemove', {clientX: x1, clientY: y, bubbles: true}));"
        "window.dispatchEvent(new MouseEvent('mouseup', {clientX: x1, clientY: y}));",
        series, x[0], x[1], y)


def test_cartpole_panels_zoom_fit_markers_and_outliers(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, gym.make("CartPole-v1"), 12)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=3&step=2")
        with RecordingReader(rec) as reader:
            ep = reader[3]
        n = ep.length
        # One panel a dimension: 4 observations, the action, the reward.
        assert driver.execute_script(PANELS) == [f"observations[{j}]" for j in range(4)] + [
            "actions", "rewards"]
        widths = driver.execute_script(
            "return [document.getElementById('charts').clientWidth, "
            "...[...document.querySelectorAll('canvas.series-panel')].map(c => c.width)]")
        assert all(w >= widths[0] - 40 for w in widths[1:]), widths  # the page's width
        for j in range(4):
            data = driver.execute_script(
                "return Array.from(window.viewer.state.charts[arguments[0]].series[0].data)", j)
            np.testing.assert_array_equal(np.float32(data), ep.observations[:, j])
        assert driver.execute_script(RANGES) == [[0, n]] * 6
        # The episode ended by termination: a marker after the last step on every panel.
        assert driver.execute_script("return window.viewer.state.markers") == [
            {"x": n, "colour": "#c62828", "kind": "terminated"}]
        # A brush over one panel zooms every panel to the same steps; the cursor moves in.
        brush(driver, "observations[1]", 0.5, 0.9)
        ranges = wait_for(driver, RANGES, lambda r: r[0] != [0, n])
        assert all(r == ranges[0] for r in ranges)
        x0, x1 = ranges[0]
        assert abs(x0 - 0.5 * n) <= 1.5 and abs(x1 - 0.9 * n) <= 1.5
        step = int(driver.execute_script("return document.getElementById('scrub').value"))
        assert x0 <= step <= x1
        # The wheel alone scrolls the page; with Ctrl it zooms in around the pointer, on every panel.
        r = panel_rect(driver, "rewards")
        assert driver.execute_script(
            "return document.querySelector(`canvas.series-panel[data-series='rewards']`).dispatchEvent("
            "new WheelEvent('wheel', {deltaY: -100, clientX: arguments[0], clientY: arguments[1],"
            " bubbles: true, cancelable: true}))", r["left"] + r["width"] / 2, r["top"] + 30)
        assert driver.execute_script(RANGES) == ranges  # (not cancelled, nothing zoomed)
        driver.execute_script(
            "document.querySelector(`canvas.series-panel[data-series='rewards']`).dispatchEvent("
            "new WheelEvent('wheel', {deltaY: -100, ctrlKey: true, clientX: arguments[0], clientY: arguments[1],"
            " bubbles: true, cancelable: true}))", r["left"] + r["width"] / 2, r["top"] + 30)
        zoomed = wait_for(driver, RANGES, lambda r: r[0] != [x0, x1])
        assert all(r == zoomed[0] for r in zoomed)
        assert zoomed[0][1] - zoomed[0][0] < x1 - x0
        # Shift+wheel zooms the y axis of every panel (the same factor), not the steps.
        y_before = driver.execute_script("return window.viewer.state.charts.map(c => c.yRange())")
        driver.execute_script(
            "document.querySelector(`canvas.series-panel[data-series='actions']`).dispatchEvent("
            "new WheelEvent('wheel', {deltaX: -100, shiftKey: true, ctrlKey: true, clientX: arguments[0],"
            " clientY: arguments[1], bubbles: true, cancelable: true}))", r["left"] + 100, r["top"] + 30)
        assert driver.execute_script("return window.viewer.state.view.yZoom") == 1.25
        assert driver.execute_script(RANGES) == zoomed
        y_after = driver.execute_script("return window.viewer.state.charts.map(c => c.yRange())")
        for (a0, a1), (b0, b1) in zip(y_before, y_after):
            assert math.isclose(b1 - b0, (a1 - a0) / 1.25) and math.isclose(a0 + a1, b0 + b1)
        # Play runs through the steps shown, then stops.
        z0, z1 = zoomed[0]
        driver.find_element("id", "play").click()
        wait_for(driver, "return window.viewer.state.playing", lambda p: p is False, timeout=20)
        assert driver.execute_script("return window.viewer.state.step") == min(n, math.floor(z1))
        # "fit" shows every step again.
        driver.find_element("id", "fit").click()
        assert driver.execute_script(RANGES) == [[0, n]] * 6
        # A zoomed, compared view is a link: the URL keeps it and opens it again.
        brush(driver, "observations[0]", 0.2, 0.6)
        driver.find_element("id", "compare").send_keys("4\ue007")
        wait_for(driver, "return window.viewer.state.charts[0].series.length", lambda k: k == 2)
        z = driver.execute_script(RANGES)[0]
        link = wait_for(driver, "return location.search", lambda q: "compare=4" in q and "from=" in q)
        assert f"&from={round(z[0])}&to={round(z[1])}" in link
        open_page(driver, served.url + link)
        assert driver.execute_script(RANGES) == [[round(z[0]), round(z[1])]] * 6
        assert driver.execute_script("return window.viewer.state.compare.ep.index") == 4
        driver.find_element("id", "fit").click()
        # Readable numbers, exact on hover; dtype names; short writer labels.
        obs_line = driver.execute_script("return document.querySelector('#info .kv[data-key=observations]')")
        assert len(obs_line.text) < 80 and "float32" not in obs_line.text
        assert driver.execute_script(
            "return [...document.querySelectorAll('#tree small')].map(s => s.textContent)") == [
            "[4] float32", "[] int64"]
        assert {row[1] for row in driver.execute_script(
            "return [...document.querySelectorAll('#episodes tbody tr[data-index]')].map(r => "
            "[r.cells[1].title, r.cells[1].textContent])")} == {"w1"}
    finally:
        served.close()


def test_outlier_episodes_are_marked(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, gym.make("sample_envs/FixedLength-v0", episode_length=10), 10)
    record(rec, gym.make("sample_envs/FixedLength-v0", episode_length=300), 1, seed0=50)
    served = Served(rec)
    try:
        open_page(driver, served.url)
        box = driver.find_element("id", "filter")
        box.send_keys("outlier=1")
        assert [int(r[0]) for r in table(driver)] == [10]
        title = driver.execute_script(
            "return document.querySelector('#episodes tbody tr[data-index]').title")
        assert "length 300" in title
    finally:
        served.close()


def test_halfcheetah_17_panels_info_series_and_statistics(driver, tmp_path):
    need_module("mujoco", 'pip install "gymnasium[mujoco]"')
    rec = tmp_path / "rec"
    record(rec, gym.make("HalfCheetah-v5", max_episode_steps=120), 3)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=1&step=10")
        with RecordingReader(rec) as reader:
            ep = reader[1]
            episodes = [reader[i] for i in range(3)]
        panels = driver.execute_script(PANELS)
        assert [p for p in panels if p.startswith("observations")] == [
            f"observations[{j}]" for j in range(17)]
        assert [p for p in panels if p.startswith("actions")] == [f"actions[{j}]" for j in range(6)]
        # Each info key is a series on the observations' axis: reset's info (none of these
        # keys: NaN), then one value a step, equal to the recorded infos.
        infos = driver.execute_script(
            "return Object.fromEntries([...window.viewer.state.infoSeries].map(([k, v]) => "
            "[k, Array.from(v, x => Number.isNaN(x) ? null : x)]))")
        for key in ("x_position", "x_velocity", "reward_forward", "reward_ctrl"):
            expected = [float(i[key]) if key in i else None for i in ep.infos]
            assert infos[f"infos/{key}"] == expected
        assert "infos/x_velocity" in panels
        # A zoom by the wheel changes the visible range of every one of the panels.
        r = panel_rect(driver, "observations[16]")
        driver.execute_script(
            "document.querySelector(`canvas.series-panel[data-series='observations[16]']`)"
            ".dispatchEvent(new WheelEvent('wheel', {deltaY: -300, altKey: true, clientX: arguments[0], "
            "clientY: arguments[1], bubbles: true, cancelable: true}))",
            r["left"] + r["width"] / 3, r["top"] + 30)
        ranges = wait_for(driver, RANGES, lambda r: r[0] != [0, 120])
        assert len(ranges) == len(panels) and all(r == ranges[0] for r in ranges)
        # Statistics per dimension over the (filtered) episodes.
        driver.find_element("css selector", "#stats-panel summary").click()
        driver.find_element("id", "stats-button").click()
        wait_for(driver, "return document.body.dataset.stats", lambda v: v == "shown")
        stats = {r["name"]: r for r in driver.execute_script("return window.viewer.state.stats")}
        obs = np.concatenate([e.observations for e in episodes])
        acts = np.concatenate([e.actions for e in episodes]).astype(np.float64)
        for j in range(17):
            s = stats[f"observations[{j}]"]
            assert s["min"] == obs[:, j].min() and s["max"] == obs[:, j].max()
            assert math.isclose(s["mean"], obs[:, j].mean(), rel_tol=1e-9, abs_tol=1e-12)
            assert math.isclose(s["std"], obs[:, j].std(), rel_tol=1e-6, abs_tol=1e-9)
            assert s["count"] == len(obs)
        assert math.isclose(stats["actions[5]"]["mean"], acts[:, 5].mean(), rel_tol=1e-6)
    finally:
        served.close()


def test_atari_action_names_and_frame_scaling(driver, tmp_path):
    ale_py = need_module("ale_py", "pip install ale-py")
    gym.register_envs(ale_py)
    rec = tmp_path / "rec"
    record(rec, gym.make("ALE/Pong-v5", max_episode_steps=60), 1)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=0&step=5")
        with RecordingReader(rec) as reader:
            ep = reader[0]
        names = ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
        # The actions' panel is drawn as steps, its y axis labelled with the action names.
        chart = "window.viewer.state.charts.find(c => c.name === 'actions')"
        assert driver.execute_script(f"return {chart}.series[0].step") is True
        labels = driver.execute_script(f"return {chart}.drawnYLabels")
        lo, hi = int(ep.actions.min()), int(ep.actions.max())
        assert labels == names[lo:hi + 1]
        # The cursor panel names the action at the cursor.
        for k in (5, 6, 7):
            if k != 5:
                driver.find_element("id", "next").click()
            wait_for(driver, "return document.getElementById('step-label').textContent",
                     lambda t, k=k: t.startswith(f"step {k} "))
            name = wait_for(driver, "return document.querySelector('#info .action-name')?.textContent",
                            lambda v: v is not None)
            assert name == names[int(ep.actions[driver.execute_script(
                "return window.viewer.state.step")])]
        # Frames: 160x210 pixels, scaled by CSS without changing a pixel.
        size = "const c = document.querySelector('canvas.frame'); return [c.width, c.height, c.clientWidth, c.clientHeight]"
        w, h, cw, ch = driver.execute_script(size)
        assert (w, h) == (160, 210) and cw % 160 == 0 and ch == cw // 160 * 210 and cw >= 320
        select = driver.find_element("id", "frame-scale")
        for value, scale in (("3", 3), ("1", 1), ("2", 2)):
            select.find_element("css selector", f"option[value='{value}']").click()
            assert driver.execute_script(size) == [160, 210, 160 * scale, 210 * scale]
        rendering = driver.execute_script(
            "return getComputedStyle(document.querySelector('canvas.frame')).imageRendering")
        assert rendering == "pixelated"
        px = driver.execute_script(
            "const c = document.querySelector('canvas.frame'); return Array.from(c.getContext('2d')"
            ".getImageData(0, 0, c.width, c.height).data)")
        step = driver.execute_script("return window.viewer.state.step")
        np.testing.assert_array_equal(np.array(px, np.uint8).reshape(210, 160, 4)[..., :3],
                                      ep.observations[step])
    finally:
        served.close()


def test_vector_recording_sub_env_column_and_compare(driver, tmp_path):
    rec = tmp_path / "rec"
    env = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=3,
                                              vectorization_mode="sync"), rec)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(80):
        env.step(env.action_space.sample())
    env.close()
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=0&step=0")
        with RecordingReader(rec) as reader:
            summaries = list(reader.summaries())
            first, second = reader[0], reader[1]
        rows = table(driver)
        assert [r[7] for r in rows] == [str(s.sub_env) for s in summaries]
        assert {r[7] for r in rows} == {"0", "1", "2"}
        assert len(driver.execute_script(PANELS)) == 4 + 1 + 1
        # Compare: the second episode over the first, on one step axis, on every panel.
        pixels = ("const c = document.querySelector('canvas.series-panel');"
                  "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)")
        before = np.array(driver.execute_script(pixels), np.uint8).reshape(-1, 4)
        box = driver.find_element("id", "compare")
        box.send_keys("1")
        box.send_keys("\ue007")  # Enter: a change event
        wait_for(driver, "return document.getElementById('compare-label').textContent",
                 lambda t: "episode 1" in t)
        series = driver.execute_script(
            "return window.viewer.state.charts.map(c => [c.name, c.series.length, "
            "c.series.map(s => s.data.length)])")
        assert all(n == 2 for _, n, _ in series), series
        assert series[0][2] == [first.length + 1, second.length + 1]
        data = driver.execute_script(
            "return Array.from(window.viewer.state.charts[2].series[1].data)")
        np.testing.assert_array_equal(np.float32(data), second.observations[:, 2])
        longest = max(first.length, second.length)
        assert driver.execute_script(RANGES) == [[0, longest]] * 6
        # Both are drawn: the compared episode's dark dashes are new on the canvas.
        after = np.array(driver.execute_script(pixels), np.uint8).reshape(-1, 4)
        changed = (before != after).any(axis=1) & (after[:, :3] < 60).all(axis=1)
        assert changed.sum() > 50, changed.sum()
        box.clear()
        box.send_keys("\ue007")
        wait_for(driver, "return window.viewer.state.charts[0].series.length", lambda n: n == 1)
    finally:
        served.close()


class _TwoCamerasEnv(gym.Env):
    """A Dict of two images of different sizes (RGB and grey) and a Box."""

    observation_space = gym.spaces.Dict({
        "front": gym.spaces.Box(0, 255, (30, 40, 3), np.uint8),
        "side": gym.spaces.Box(0, 255, (20, 16), np.uint8),
        "speed": gym.spaces.Box(-1, 1, (2,), np.float32)})
    action_space = gym.spaces.MultiDiscrete([3, 4])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 0.0, False, self.t >= 9, {}


def test_several_images_side_by_side_and_multidiscrete_steps(driver, tmp_path):
    rec = tmp_path / "rec"
    env = _TwoCamerasEnv()
    env.observation_space.seed(0)
    record(rec, env, 1)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=0&step=3")
        with RecordingReader(rec) as reader:
            ep = reader[0]
        boxes = driver.execute_script(
            "return [...document.querySelectorAll('canvas.frame')].map(c => {"
            "const r = c.getBoundingClientRect(); return [c.dataset.leaf, c.width, c.height,"
            " r.top, r.left, c.clientWidth, c.clientHeight]; })")
        assert [b[:3] for b in boxes] == [["observations/front", 40, 30],
                                          ["observations/side", 16, 20]]
        (_, _, _, top0, left0, w0, h0), (_, _, _, top1, left1, w1, h1) = boxes
        assert top0 == top1 and left1 >= left0 + w0  # side by side, one row
        scale = w0 // 40
        assert scale >= 2 and (w0, h0, w1, h1) == (40 * scale, 30 * scale, 16 * scale, 20 * scale)
        for leaf in ("front", "side"):
            px = driver.execute_script(
                "const c = document.querySelector(`canvas.frame[data-leaf='observations/${arguments[0]}']`);"
                "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)", leaf)
            frame = ep.observations[leaf][3]
            rgb = np.array(px, np.uint8).reshape(*frame.shape[:2], 4)[..., :3]
            np.testing.assert_array_equal(rgb, frame if frame.ndim == 3 else np.stack([frame] * 3, -1))
        # MultiDiscrete actions: a panel a dimension, drawn as steps; the Box per dimension.
        steps = driver.execute_script(
            "return Object.fromEntries(window.viewer.state.charts.map(c => [c.name, c.series[0].step]))")
        assert steps["actions[0]"] is True and steps["actions[1]"] is True
        assert steps["observations/speed[0]"] is False
        for j in range(2):
            data = driver.execute_script(
                "return Array.from(window.viewer.state.charts.find(c => c.name === arguments[0])"
                ".series[0].data)", f"actions[{j}]")
            np.testing.assert_array_equal(data, ep.actions[:, j])
    finally:
        served.close()


class _NestedInfoEnv(gym.Env):
    """Infos with numbers at several depths, a bool, a string, a small array and a key that
    comes and goes."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"start": 1}

    def step(self, action):
        self.t += 1
        info = {"stats": {"speed": 0.5 * self.t, "deep": {"n": self.t * 3}}, "ok": self.t % 2 == 0,
                "name": f"t{self.t}", "vec": np.arange(3, dtype=np.int16) + self.t,
                "pair": (self.t, -self.t)}
        if self.t % 3 == 0:
            info["sometimes"] = np.float32(self.t / 4)
        return np.full(1, self.t / 10, np.float32), 1.0, False, self.t >= 7, info


def test_numeric_leaves_of_nested_infos_are_series(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, _NestedInfoEnv(), 1)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=0&step=2")
        with RecordingReader(rec) as reader:
            infos = reader[0].infos
        got = driver.execute_script(
            "return Object.fromEntries([...window.viewer.state.infoSeries].map(([k, v]) => "
            "[k, Array.from(v, x => Number.isNaN(x) ? null : x)]))")

        def column(get) -> list:
            out = []
            for info in infos:
                try:
                    out.append(float(get(info)))
                except KeyError:
                    out.append(None)
            return out

        expected = {
            "infos/start": column(lambda i: i["start"]),
            "infos/stats/speed": column(lambda i: i["stats"]["speed"]),
            "infos/stats/deep/n": column(lambda i: i["stats"]["deep"]["n"]),
            "infos/ok": column(lambda i: i["ok"]),
            "infos/vec[0]": column(lambda i: i["vec"][0]),
            "infos/vec[2]": column(lambda i: i["vec"][2]),
            "infos/pair[0]": column(lambda i: i["pair"][0]),
            "infos/pair[1]": column(lambda i: i["pair"][1]),
            "infos/sometimes": column(lambda i: i["sometimes"]),
        }
        for name, values in expected.items():
            assert got[name] == values, name
        assert not any(k.startswith("infos/name") for k in got)  # strings are not series
        panels = driver.execute_script(PANELS)
        assert set(expected) <= set(panels)
    finally:
        served.close()
