"""Benchmarks the viewer (``gym-recorder view``) in headless Chromium.

1. Time to table: a 10,000-episode CartPole recording; the time from navigation start until the
   episode table is in the page (the page's own ``performance.now()`` when the table is shown,
   and the wall time seen by the driver). Baseline in the same run: the same page on a
   1-episode recording (the page's fixed cost). Target: under 1 s.
2. A 100,000-step episode (``FixedLength-v0``, 2-dimensional observations): the time from
   navigation until the episode is shown (charts drawn, cursor at step 54,321), and the time of
   one cursor move (the mean of 20 presses of the right arrow key, each waited for).
3. Bytes of one episode: a large image recording (default 2,000 MB of 84x84x3 frames in
   1,000-step episodes); the page is opened on episode 0, then one episode in the middle is
   selected, and the server's byte count for that selection is compared with the bytes of that
   episode's arrays (the page reads the charted columns whole and image frames one at a time, so
   it must not exceed them) and with the recording's size.

Run from the repository root (needs /usr/bin/chromium, /usr/bin/chromedriver, selenium)::

    python benchmarks/bench_view.py                 # about a minute plus writing the big recording
    python benchmarks/bench_view.py --big-mb 300    # a smaller "big" recording
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # benchmark the checkout, not whatever version is installed

import gymnasium as gym  # noqa: E402

import sample_envs  # noqa: E402,F401
from gym_recorder import RecordingReader, RecordingWrapper  # noqa: E402
from gym_recorder.integrations.view import make_server  # noqa: E402

TABLE_TARGET_MS = 1000.0
LONG_STEPS = 100_000
FRAME_BYTES = 84 * 84 * 3
EPISODE_STEPS = 1000
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--window-size=1400,1000"]


def record_cartpole(directory: str, episodes: int) -> None:
    env = RecordingWrapper(gym.make("CartPole-v1"), directory)
    env.action_space.seed(0)
    for i in range(episodes):
        env.reset(seed=i)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()


def record_images(directory: str, megabytes: int) -> None:
    episodes = max(3, round(megabytes * 1e6 / (FRAME_BYTES * (EPISODE_STEPS + 1))))
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=84, width=84,
                                    episode_length=EPISODE_STEPS), directory)
    for i in range(episodes):
        env.reset(seed=i)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(0)
            done = term or trunc
    env.close()


def driver_factory(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in CHROME_FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def serve(directory: str):
    server = make_server(directory, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def wait(driver, script: str, ok, timeout: float = 300.0):
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {script} -> {value!r}")
        time.sleep(0.01)


def time_to_table(driver, url: str) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    driver.get(url)
    wait(driver, "return document.body.dataset.table || document.body.dataset.state",
         lambda v: v in ("shown", "error"))
    wall = (time.perf_counter() - t0) * 1000
    page = driver.execute_script("return window.viewer.timings.tableMs")
    rows = driver.execute_script("return window.viewer.state.rec.episodes.length")
    if page is None:
        raise RuntimeError(driver.execute_script("return document.getElementById('error').textContent"))
    return page, wall, rows


def long_episode(driver, work: str) -> tuple[float, float]:
    """(ms to show step 54,321 of a 100,000-step episode, ms per cursor move)."""
    from selenium.webdriver.common.keys import Keys

    directory = os.path.join(work, "long")
    env = RecordingWrapper(gym.make("sample_envs/FixedLength-v0", episode_length=LONG_STEPS,
                                    obs_shape=(2,)), directory)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        done = term or trunc
    env.close()
    server = serve(directory)
    try:
        t0 = time.perf_counter()
        driver.get(f"{server.url}?episode=0&step=54321")
        wait(driver, "return document.body.dataset.state", lambda v: v in ("ready", "error"))
        shown = (time.perf_counter() - t0) * 1000
        body = driver.find_element("tag name", "body")
        moves = 20
        t0 = time.perf_counter()
        for k in range(54322, 54322 + moves):
            body.send_keys(Keys.ARROW_RIGHT)
            wait(driver, "return document.getElementById('scrub').value", lambda v, k=k: v == str(k))
        move = (time.perf_counter() - t0) * 1000 / moves
    finally:
        server.shutdown()
        server.server_close()
    return shown, move


def episode_bytes(directory: str, index: int) -> int:
    """Bytes of every array of an episode's entries (from the batch JSON, as the spec says)."""
    with RecordingReader(directory) as reader:
        writer = reader[index].writer
        number = index  # one writer: the episode number is the index
    total = 0
    for name in sorted(os.listdir(directory)):
        if not (name.startswith(writer) and name.endswith(".json") and ".ep" in name):
            continue
        with open(os.path.join(directory, name)) as f:
            doc = json.load(f)
        for entry in doc["episodes"]:
            if entry["episode"] == number:
                total += sum(r["size"] for r in refs(entry))
    return total


def refs(obj) -> list:
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            return [obj]
        return [r for v in obj.values() for r in refs(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in refs(v)]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--big-mb", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-view-")
    ok = True
    try:
        small, many, big = (os.path.join(work, n) for n in ("small", "many", "big"))
        t = time.perf_counter()
        record_cartpole(small, 1)
        record_cartpole(many, args.episodes)
        print(f"recorded {args.episodes} CartPole episodes in {time.perf_counter() - t:.1f} s")
        driver = driver_factory(os.path.join(work, "profile"))
        try:
            servers = {}
            for name, d in (("small", small), ("many", many)):
                servers[name] = serve(d)
            results = {"small": [], "many": []}
            for _ in range(args.repeats):
                for name in ("small", "many"):
                    results[name].append(time_to_table(driver, servers[name].url))
            base = min(r[0] for r in results["small"])
            best = min(results["many"], key=lambda r: r[0])
            median = sorted(r[0] for r in results["many"])[len(results["many"]) // 2]
            t = time.perf_counter()
            with RecordingReader(many) as reader:
                sum(1 for _ in reader.summaries())
            py_ms = (time.perf_counter() - t) * 1000
            verdict = "ok" if best[0] < TABLE_TARGET_MS else "MISS"
            ok &= verdict == "ok"
            print(f"time to table, {best[2]} episodes: {best[0]:.0f} ms in the page "
                  f"({best[1]:.0f} ms wall; best of {args.repeats}, median {median:.0f} ms); 1-episode baseline "
                  f"{base:.0f} ms, ratio {best[0] / base:.2f}; Python RecordingReader.summaries() "
                  f"{py_ms:.0f} ms; target < {TABLE_TARGET_MS:.0f} ms: {verdict}")
            for s in servers.values():
                s.shutdown()
                s.server_close()

            shown, move = long_episode(driver, work)
            print(f"a {LONG_STEPS:,}-step episode: shown in {shown:.0f} ms (navigation to "
                  f"ready), one cursor move {move:.1f} ms (mean of 20)")

            t = time.perf_counter()
            record_images(big, args.big_mb)
            size = sum(os.path.getsize(os.path.join(big, n)) for n in os.listdir(big))
            print(f"recorded a {size / 1e6:.0f} MB image recording in "
                  f"{time.perf_counter() - t:.1f} s")
            server = serve(big)
            driver.get(server.url)
            wait(driver, "return document.body.dataset.state", lambda v: v in ("ready", "error"))
            n_eps = driver.execute_script("return window.viewer.state.rec.episodes.length")
            pick = n_eps // 2
            before = server.bytes_sent
            driver.execute_script(f"window.viewer.select({pick})")
            wait(driver, "return document.getElementById('episode-title').textContent",
                 lambda v: v.startswith(f"Episode {pick} "))
            wait(driver, "return document.body.dataset.state", lambda v: v in ("ready", "error"))
            time.sleep(0.5)  # let the frame read-ahead finish
            fetched = server.bytes_sent - before
            own = episode_bytes(big, pick)
            verdict = "ok" if 0 < fetched <= own else "MISS"
            ok &= verdict == "ok"
            print(f"one episode of {n_eps} ({size / 1e6:.0f} MB recording): fetched "
                  f"{fetched:,} bytes; the episode's arrays are {own:,} bytes "
                  f"(ratio {fetched / own:.4f}); of the recording {fetched / size:.6f}: {verdict}")
            server.shutdown()
            server.server_close()
        finally:
            driver.quit()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
