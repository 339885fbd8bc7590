"""The viewer page in real headless Chromium (Selenium), against RecordingReader's answers.

Recordings of CartPole (two writers in one directory), the image sample env, the nested Dict env
and a legacy gym-recording directory are served by the real server; the test reads what the page
shows (table cells, canvas pixels, the "at the cursor" panel, the URL) and compares it with the
reader's arrays.
"""

from __future__ import annotations

import io
import math
import tempfile
import threading
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from needs import need_module, need_program

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.integrations.view import make_server

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--window-size=1400,1100"]
WAIT_S = 60


@pytest.fixture(scope="module")
def driver():
    webdriver = need_module("selenium.webdriver", "pip install selenium")
    need_program("chromium", "apt-get install chromium")
    need_program("chromedriver", "apt-get install chromium-driver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    profile = tempfile.TemporaryDirectory(prefix="gr-view-chromium-")
    for flag in CHROME_FLAGS + [f"--user-data-dir={profile.name}"]:
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    yield d
    d.quit()
    profile.cleanup()


class Served:
    def __init__(self, directory: Path) -> None:
        self.server = make_server(directory, port=0)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = self.server.url

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def record(directory: Path, env_id: str, episodes: int, seed0: int = 0, **kwargs) -> None:
    env = RecordingWrapper(gym.make(env_id, **kwargs), directory)
    for i in range(episodes):
        env.reset(seed=seed0 + i)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait_for(driver, "return document.body.dataset.state", lambda s: s in ("ready", "error"))
    assert driver.execute_script("return document.body.dataset.state") == "ready", \
        driver.execute_script("return document.getElementById('error').textContent")


def wait_for(driver, script: str, ok, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if ok(value):
            return value
        if time.monotonic() > deadline:
            err = driver.execute_script("return document.getElementById('error').textContent")
            raise AssertionError(f"timed out waiting: {script} -> {value!r} (page error: {err!r})")
        time.sleep(0.05)


def table(driver) -> list[list[str]]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#episodes tbody tr[data-index]')].map(r => "
        "[...r.cells].map((c, i) => i === 4 ? c.dataset.value : i === 1 ? c.title : c.textContent))")


def check_table(rows: list[list[str]], directory: Path) -> None:
    with RecordingReader(directory) as reader:
        summaries = list(reader.summaries())
    assert len(rows) == len(summaries) > 0
    for row, s in zip(rows, summaries):
        assert int(row[0]) == s.index
        assert row[1] == s.writer
        assert row[2] == (s.env_id or "")
        assert int(row[3]) == s.length
        assert math.isclose(float(row[4]), s.total_reward, rel_tol=1e-12, abs_tol=1e-9)
        assert row[5] == (s.end or "")
        assert row[6] == ("" if s.seed is None else str(s.seed))
        assert row[7] == ("" if s.sub_env is None else str(s.sub_env))


def at_cursor(driver) -> dict:
    """The "at the cursor" panel: each line's exact value (its data-json; the text is rounded)."""
    import json
    pairs = driver.execute_script(
        "return [...document.querySelectorAll('#info .kv')].map(s => [s.dataset.key, s.dataset.json])")
    return {k: json.loads(v) for k, v in pairs}


def test_cartpole_two_writers_table_sort_filter_links_keys(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 4, seed0=0)
    record(rec, "CartPole-v1", 3, seed0=100)
    served = Served(rec)
    try:
        open_page(driver, served.url)
        check_table(table(driver), rec)
        assert driver.execute_script("return document.getElementById('scrub').value") == "0"
        with RecordingReader(rec) as reader:
            ep5 = reader[5]
            lengths = [s.length for s in reader.summaries()]
            n_terminated = sum(s.end == "terminated" for s in reader.summaries())
        # Histograms over the recording: 20 equal bins from min to max, as numpy makes them.
        hist = driver.execute_script("return window.viewer.state.histograms")
        assert hist["lengths"] == np.histogram(lengths, bins=20)[0].tolist()
        assert sum(hist["returns"]) == len(lengths)
        # Sorting: click "length" (ascending), again (descending).
        header = driver.find_element("css selector", "th[data-key=length]")
        header.click()
        assert [int(r[3]) for r in table(driver)] == sorted(lengths)
        header.click()
        assert [int(r[3]) for r in table(driver)] == sorted(lengths, reverse=True)
        # Filtering.
        box = driver.find_element("id", "filter")
        box.send_keys("end=terminated")
        assert len(table(driver)) == n_terminated
        box.clear()
        box.send_keys("length>=20")
        assert sorted(int(r[3]) for r in table(driver)) == sorted(x for x in lengths if x >= 20)
        # A deep link opens the same view; the keys move the cursor and the URL follows.
        step = min(3, ep5.length - 1)
        open_page(driver, f"{served.url}?episode=5&step={step}")
        assert driver.execute_script("return document.getElementById('scrub').value") == str(step)
        at = at_cursor(driver)
        assert at["step"] == step
        np.testing.assert_array_equal(np.float32(at["observations"]), ep5.observations[step])
        assert at["actions"] == int(ep5.actions[step])
        assert at["reward"] == float(ep5.rewards[step])
        driver.find_element("tag name", "body").send_keys("\ue014")  # ArrowRight
        wait_for(driver, "return document.getElementById('scrub').value", lambda v: v == str(step + 1))
        wait_for(driver, "return location.search", lambda v: v == f"?episode=5&step={step + 1}")
        np.testing.assert_array_equal(np.float32(at_cursor(driver)["observations"]),
                                      ep5.observations[step + 1])
        driver.find_element("tag name", "body").send_keys("\ue012")  # ArrowLeft
        wait_for(driver, "return document.getElementById('scrub').value", lambda v: v == str(step))
        # Charts: one per observation leaf / action leaf / rewards, the series with toggles.
        titles = driver.execute_script(
            "return [...document.querySelectorAll('#charts h2')].map(h => h.textContent)")
        assert titles == ["observations", "actions", "rewards"]
        toggles = driver.find_elements("css selector", "#charts input[data-series]")
        assert [t.get_attribute("data-series") for t in toggles] == [
            f"observations[{j}]" for j in range(4)]
    finally:
        served.close()


def canvas_pixels(driver, leaf: str = "observations") -> np.ndarray:
    w, h, data = driver.execute_script(
        "const c = document.querySelector(`canvas.frame[data-leaf='${arguments[0]}']`);"
        "return [c.width, c.height, Array.from(c.getContext('2d').getImageData(0, 0, c.width, "
        "c.height).data)];", leaf)
    return np.array(data, dtype=np.uint8).reshape(h, w, 4)


def test_image_frames_on_canvas_equal_the_recorded_frames(driver, tmp_path):
    image = need_module("PIL.Image", "pip install pillow")
    rec = tmp_path / "rec"
    record(rec, "sample_envs/Image-v0", 2, height=24, width=32, episode_length=12)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=1&step=0")
        check_table(table(driver), rec)
        with RecordingReader(rec) as reader:
            frames = reader[1].observations
        px = canvas_pixels(driver)
        np.testing.assert_array_equal(px[..., :3], frames[0])
        assert (px[..., 3] == 255).all()
        body = driver.find_element("tag name", "body")
        for k in range(1, 5):
            body.send_keys("\ue014")
            wait_for(driver, "return document.querySelector('canvas.frame').dataset.step",
                     lambda v, k=k: v == str(k))
            np.testing.assert_array_equal(canvas_pixels(driver)[..., :3], frames[k])
        # Scrub to the last frame; then play runs to the end.
        driver.execute_script("const s = document.getElementById('scrub'); s.value = 9;"
                              "s.dispatchEvent(new Event('input'));")
        wait_for(driver, "return document.querySelector('canvas.frame').dataset.step",
                 lambda v: v == "9")
        np.testing.assert_array_equal(canvas_pixels(driver)[..., :3], frames[9])
        body.send_keys(" ")
        wait_for(driver, "return document.querySelector('canvas.frame').dataset.step",
                 lambda v: v == "12")
        np.testing.assert_array_equal(canvas_pixels(driver)[..., :3], frames[12])
        # Drawn at an integer multiple of the frame's size.
        css_w = driver.execute_script("return document.querySelector('canvas.frame').clientWidth")
        assert css_w % 32 == 0 and css_w >= 32
        shot = tmp_path / "viewer.png"
        driver.save_screenshot(str(shot))
        img = np.asarray(image.open(io.BytesIO(shot.read_bytes())).convert("RGB"))
        assert img.shape[0] > 500 and img.shape[1] > 800
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # not blank
        assert img.std() > 10
    finally:
        served.close()


def leaf_paths(obj, path: str) -> list[str]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in leaf_paths(v, f"{path}/{k}")]
    if isinstance(obj, tuple):
        return [p for i, v in enumerate(obj) for p in leaf_paths(v, f"{path}/{i}")]
    return [path]


def test_nested_dict_tree_and_values_at_cursor(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, "sample_envs/NestedDict-v0", 3, episode_length=15)
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=2&step=4")
        check_table(table(driver), rec)
        with RecordingReader(rec) as reader:
            ep = reader[2]
        tree = driver.execute_script(
            "return [...document.querySelectorAll('#tree label')].map(l => l.title)")
        assert tree == leaf_paths(ep.observations, "observations") + leaf_paths(ep.actions,
                                                                                 "actions")
        at = at_cursor(driver)
        assert at["observations/position"] == ep.observations["position"][4].tolist()
        assert at["observations/nested/a"] == ep.observations["nested"]["a"][4].tolist()
        assert at["observations/nested/pair/1"] == int(ep.observations["nested"]["pair"][1][4])
        assert at["observations/count"] == int(ep.observations["count"][4])
        assert at["actions/move"] == ep.actions["move"][4].tolist()
        assert at["reward"] == float(ep.rewards[4])
        # The 5x5 uint8 grid is an H x W image: grey levels on the canvas.
        px = canvas_pixels(driver, "observations/grid")
        for c in range(3):
            np.testing.assert_array_equal(px[..., c], ep.observations["grid"][4])
        # Unticking a leaf removes its panels; the choice survives a change of episode.
        n_charts = len(driver.find_elements("css selector", "#charts .chart-box"))
        driver.find_element("css selector", "#tree input[data-leaf='observations/position']").click()
        assert len(driver.find_elements("css selector", "#charts .chart-box")) == n_charts - 1
        driver.find_element("css selector", "#episodes tbody tr[data-index='0']").click()
        wait_for(driver, "return document.getElementById('episode-title').textContent",
                 lambda t: t.startswith("Episode 0 "))
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "ready")
        assert len(driver.find_elements("css selector", "#charts .chart-box")) == n_charts - 1
    finally:
        served.close()


def test_legacy_and_new_writers_and_refresh(driver, tmp_path):
    from test_legacy import make_legacy

    rec = tmp_path / "rec"
    rec.mkdir()
    make_legacy(rec)
    record(rec, "CartPole-v1", 2)
    served = Served(rec)
    try:
        open_page(driver, served.url)
        check_table(table(driver), rec)
        status = driver.execute_script("return document.getElementById('status').textContent")
        assert "3 writers" in status and "2 gym-recording" in status
        # A legacy image episode (one array per step) plays on the canvas.
        with RecordingReader(rec) as reader:
            frames = reader[4].observations
        open_page(driver, f"{served.url}?episode=4&step=2")
        np.testing.assert_array_equal(canvas_pixels(driver)[..., :3], frames[2])
        # Live: batches committed after the page opened show up on Refresh.
        before = len(table(driver))
        record(rec, "CartPole-v1", 2, seed0=50)
        driver.find_element("id", "refresh").click()
        wait_for(driver, "return document.querySelectorAll('#episodes tbody tr[data-index]').length",
                 lambda n: n == before + 2)
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "ready")
        check_table(table(driver), rec)
    finally:
        served.close()


def test_long_episode_cursor_and_toggles(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, "sample_envs/FixedLength-v0", 2, episode_length=100_000, obs_shape=(2,))
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=1&step=54321")
        check_table(table(driver), rec)
        with RecordingReader(rec) as reader:
            ep = reader[1]
        assert at_cursor(driver)["observations"] == ep.observations[54321].tolist()
        body = driver.find_element("tag name", "body")
        for k in (54322, 54323):
            body.send_keys("\ue014")
            wait_for(driver, "return document.getElementById('info').textContent",
                     lambda t, k=k: t.startswith(f"step: {k}\n"))
            assert at_cursor(driver)["observations"] == ep.observations[k].tolist()
        # A click on a chart moves the shared cursor (to the step under the pointer).
        driver.execute_script(
            "const c = document.querySelector('#charts canvas'), r = c.getBoundingClientRect();"
            "c.dispatchEvent(new MouseEvent('mousedown', {clientX: r.left + 48 + (r.width - 56) / 2,"
            " clientY: r.top + 40}));")
        wait_for(driver, "return Number(document.getElementById('scrub').value)",
                 lambda v: abs(v - 50_000) < 500)
        # A series toggled off stays off in the next episode.
        box = driver.find_element("css selector", "#charts input[data-series='observations[0]']")
        box.click()
        assert driver.execute_script("return [...window.viewer.state.hidden]") == [
            "observations[0]"]
        driver.execute_script("window.viewer.select(0, 7)")
        wait_for(driver, "return document.getElementById('episode-title').textContent",
                 lambda t: t.startswith("Episode 0 "))
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "ready")
        box = driver.find_element("css selector", "#charts input[data-series='observations[0]']")
        assert not box.is_selected()
        wait_for(driver, "return location.search", lambda v: v == "?episode=0&step=7")
    finally:
        served.close()


def test_episodes_in_parts_and_vector_writers(driver, tmp_path):
    from gym_recorder import RecordingVectorWrapper

    rec = tmp_path / "rec"
    # Tiny batches: episodes are split into parts over several batches.
    env = RecordingWrapper(gym.make("CartPole-v1"), rec, target_batch_bytes=2048)
    env.reset(seed=1)
    for _ in range(300):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()
    venv = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=3), rec,
                                  target_batch_bytes=4096)
    venv.reset(seed=0)
    for _ in range(150):
        venv.step(venv.action_space.sample())
    venv.close()
    import json
    parts = {}
    for batch in rec.glob("*.ep*.json"):
        prefix = batch.name.split(".ep")[0]
        parts[prefix] = parts.get(prefix, 0) + sum(
            e["part"] > 0 for e in json.loads(batch.read_text())["episodes"])
    assert len(parts) == 2 and all(n > 0 for n in parts.values()), parts
    served = Served(rec)
    try:
        open_page(driver, served.url)
        check_table(table(driver), rec)
        with RecordingReader(rec) as reader:
            multi = next(i for i, s in enumerate(reader.summaries()) if s.sub_env is not None
                         and s.length > 20)
            ep = reader[multi]
        open_page(driver, f"{served.url}?episode={multi}&step={ep.length - 1}")
        at = at_cursor(driver)
        np.testing.assert_array_equal(np.float32(at["observations"]), ep.observations[-2])
        assert at["actions"] == int(ep.actions[-1])
    finally:
        served.close()


def test_a_broken_recording_shows_one_error_naming_the_file(driver, tmp_path):
    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 1)
    batch = sorted(rec.glob("*.ep*.json"))[0]
    batch.write_bytes(batch.read_bytes()[:-20])  # a truncated batch file
    served = Served(rec)
    try:
        driver.get(served.url)
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "error")
        text = driver.execute_script("return document.getElementById('error').textContent")
        assert text.startswith("Error: ") and batch.name in text
        assert "bytes, the manifest says" in text
    finally:
        served.close()


_MARKUP = '<img src=x onerror="window.__xss = 1">'
_CLOSE = "</script><script>window.__xss = 2</script>"


class _HostileNamesEnv(gym.Env):
    """Dict keys and info keys that are Object.prototype's names or markup; Text rows of
    markup."""

    observation_space = gym.spaces.Dict({
        _MARKUP: gym.spaces.Box(0, 1, (2,), np.float32),
        "__proto__": gym.spaces.Box(0, 1, (1,), np.float32),
        "constructor": gym.spaces.Box(0, 1, (1,), np.float32),
        "__leaf": gym.spaces.Box(0, 1, (1,), np.float32),
        "text": gym.spaces.Text(60, charset="<>/=\"' abcdefghijklmnopqrstuvwxyz_.12"),
    })
    action_space = gym.spaces.Discrete(2)

    def _obs(self) -> dict:
        obs = self.observation_space.sample()
        obs["text"] = "<img src=x onerror=window.__xss=3>"
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {_MARKUP: _CLOSE, "__proto__": {"a": 1}, "constructor": 2}

    def step(self, action):
        return self._obs(), 1.0, False, False, {_MARKUP: _MARKUP, "__proto__": 5}


def test_hostile_names_are_shown_as_text_and_never_run(driver, tmp_path):
    """Markup in Dict keys, info keys and values, Text rows and the env id runs nowhere; Dict
    keys "__proto__"/"constructor"/"__leaf" are leaves like any other (the leaf tree was a plain
    object: "__proto__" set Object.prototype.__leaf, which made every node a leaf, and hid those
    leaves), and an info key "__proto__" is shown (it set the shown dict's prototype)."""
    import json

    rec = tmp_path / "rec"
    env = RecordingWrapper(_HostileNamesEnv(), rec)
    env.reset(seed=0, options={_MARKUP: _CLOSE})
    for _ in range(4):
        env.step(0)
    env.close()
    (manifest,) = rec.glob("*.manifest.json")
    doc = json.loads(manifest.read_text())
    doc["env_id"] = _MARKUP + _CLOSE
    manifest.write_text(json.dumps(doc))
    served = Served(rec)
    try:
        open_page(driver, served.url)
        assert driver.execute_script("return window.__xss === undefined && "
                                     "Object.prototype.__leaf === undefined")
        assert table(driver)[0][2] == _MARKUP + _CLOSE
        tree = driver.execute_script(
            "return [...document.querySelectorAll('#tree label')].map(l => l.title)")
        assert tree == ["observations/" + k for k in  # (gymnasium sorts a Dict's keys)
                        sorted((_MARKUP, "__proto__", "constructor", "__leaf", "text"))] + ["actions"]
        at = at_cursor(driver)
        assert at["observations/text"] == "<img src=x onerror=window.__xss=3>"
        assert at["info"] == {_MARKUP: _CLOSE, "__proto__": {"a": 1}, "constructor": 2}
        driver.find_element("css selector", "#next").click()
        wait_for(driver, "return document.getElementById('step-label').textContent",
                 lambda t: t.startswith("step 1 "))
        wait_for(driver, "return document.querySelector('#info .kv[data-key=info]').dataset.json",
                 lambda t: '"__proto__":5' in t)
        assert driver.execute_script("return window.__xss === undefined")
    finally:
        served.close()


class _EmptyBoxEnv(gym.Env):
    """A Dict with a Box of shape (0,) (rows of no elements) beside an ordinary one."""

    observation_space = gym.spaces.Dict({"empty": gym.spaces.Box(0, 1, (0,), np.float32),
                                         "x": gym.spaces.Box(0, 1, (2,), np.float32)})
    action_space = gym.spaces.Box(0, 1, (0,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


def test_a_box_of_shape_0_is_shown(driver, tmp_path):
    """Rows of no elements: the page failed on them ("Cannot read properties of undefined")."""
    rec = tmp_path / "rec"
    env = RecordingWrapper(_EmptyBoxEnv(), rec)
    env.reset(seed=0)
    for _ in range(4):
        env.step(env.action_space.sample())
    env.close()
    served = Served(rec)
    try:
        open_page(driver, f"{served.url}?episode=0&step=2")
        with RecordingReader(rec) as reader:
            ep = reader[0]
        at = at_cursor(driver)
        assert at["observations/empty"] == [] == ep.observations["empty"][2].tolist()
        assert at["actions"] == []
        assert at["observations/x"] == ep.observations["x"][2].tolist()
    finally:
        served.close()


def _edit_batches(directory: Path, mutate) -> None:
    from hostile import edit_every_batch

    edit_every_batch(directory, mutate)


def test_rows_the_entry_does_not_have_are_refused_not_looped_over(driver, tmp_path):
    """Hostile shapes of no bytes: observations of shape [2**40, 0] and an info column whose
    values have rows of 2**32 - 1 elements hung the tab (a loop over every row or element);
    the page now checks an entry's rows against its steps, and info values against the rows
    the key is in, and names the file."""
    rec = tmp_path / "rec"
    record(rec, "sample_envs/ChangingInfo-v0", 2)

    def huge_rows(doc: dict) -> None:
        for entry in doc["episodes"]:
            entry["observations"].update(shape=[2**40, 0], size=0)

    def huge_info_rows(doc: dict) -> None:
        for entry in doc["episodes"]:
            for col in entry["infos"]["keys"]:
                if col["kind"] == "array":
                    col["values"].update(shape=[0, 2**32 - 1], size=0)
                    col["index"] = None

    served = Served(rec)
    driver.set_script_timeout(10)
    try:
        _edit_batches(rec, huge_info_rows)
        open_page(driver, served.url)
        wait_for(driver, "return document.getElementById('info').textContent",
                 lambda t: "rows of values for" in t)
        assert "unreadable: " in at_cursor(driver)["info"]
        _edit_batches(rec, huge_rows)
        driver.get(served.url)
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "error")
        text = driver.execute_script("return document.getElementById('error').textContent")
        assert ".json entry 0: observations: 1099511627776 rows, the entry has" in text
    finally:
        driver.set_script_timeout(30)  # (selenium's default)
        served.close()


def test_a_manifest_larger_than_max_json_bytes_is_refused_unread(driver, tmp_path):
    """A (sparse) manifest of more than 2**28 bytes: the page read it all into memory (a larger
    one can exhaust the tab) before failing; it is refused from its Content-Length."""
    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 1)
    with open(rec / "openaigym.trace.huge.manifest.json", "wb") as f:
        f.truncate(2**28 + 1)
    served = Served(rec)
    try:
        driver.get(served.url)
        wait_for(driver, "return document.body.dataset.state", lambda s: s == "error")
        text = driver.execute_script("return document.getElementById('error').textContent")
        assert "openaigym.trace.huge.manifest.json: 268435457 bytes of JSON is more than" in text
    finally:
        served.close()
