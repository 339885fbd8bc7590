"""gym-recorder play: a person's key presses, simulated with pygame events, become recorded episodes.

Headless: SDL_VIDEODRIVER=dummy. A driver callback posts the key events of each frame (as
Gymnasium's own play tests do) and keeps its own account of which actions each episode should
hold; the recording must hold exactly the kept episodes, with those actions and their seeds, and
``replay`` must re-run them exactly.
"""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper, edit
from gym_recorder.integrity import verify
from gym_recorder.cli import main
from gym_recorder.errors import EditError, EmptySelectionError, PlayError
from gym_recorder.play import PlayStatus, play
from gym_recorder.play.episodes import episode_seeds
from gym_recorder.play.keys import build_key_map, key_code, parse_keys
from gym_recorder.replay.run import replay_recording

pygame = pytest.importorskip("pygame")


@pytest.fixture(autouse=True)
def headless(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")


CONTROL = {"pause": "p", "restart": "r", "discard": "backspace", "quit": "escape"}


def _post(kind: int, name: str) -> None:
    pygame.event.post(pygame.event.Event(kind, key=key_code(name)))


class Driver:
    """Plays like a person: holds keys (a scripted pattern), presses control keys on cue, and
    writes down the actions each episode attempt must have recorded.

    ``pattern(frame)`` gives the key names held at a frame, ``controls(driver, status)`` the
    control keys to press then. ``attempts`` are lists of expected actions; ``kept`` the
    attempts that ended and were not discarded since.
    """

    def __init__(self, key_map: dict[Any, Any], noop: Any, pattern: Any, controls: Any,
                 max_frames: int = 3000) -> None:
        self.key_map = {tuple(sorted(k if isinstance(k, tuple) else (k,))): v
                        for k, v in key_map.items()}
        self.noop = noop
        self.pattern = pattern
        self.controls = controls
        self.max_frames = max_frames
        self.held: tuple[str, ...] = ()
        self.current: list[Any] = []
        self.current_seed: int | None = None
        self.kept: list[tuple[int, list[Any]]] = []  # (seed, actions)
        self.discarded: list[tuple[int, list[Any]]] = []
        self.paused = False
        self.paused_steps: int | None = None

    def __call__(self, status: PlayStatus) -> None:
        if self.current_seed is None:
            self.current_seed = status.seed
        if status.step < len(self.current):  # the attempt ended at the last frame: kept
            assert status.step == 0 and not self.paused
            self.kept.append((self.current_seed, self.current))
            self.current, self.current_seed = [], status.seed
        assert status.step == len(self.current), (status.frame, status.step, len(self.current))
        assert status.kept == len(self.kept)
        if self.paused:  # nothing moved while paused
            assert status.step == self.paused_steps
        if status.frame >= self.max_frames:
            pytest.fail("the script did not finish")
        pressed = self.controls(self, status)
        for name in pressed:
            _post(pygame.KEYDOWN, CONTROL[name])
            _post(pygame.KEYUP, CONTROL[name])
        held = tuple(sorted(self.pattern(status.frame)))
        for name in self.held:
            if name not in held:
                _post(pygame.KEYUP, name)
        for name in held:
            _post(pygame.KEYDOWN, name)  # (again for keys already held: like key repeat)
        if status.frame % 7 == 3:
            _post(pygame.KEYUP, "z")  # (a KEYUP without a KEYDOWN, of a key not in the map)
        self.held = held
        if "quit" in pressed:
            return
        if "pause" in pressed:
            self.paused = not self.paused
            self.paused_steps = status.step
        if "restart" in pressed:
            self.discarded.append((status.seed, self.current))
            self.current = []
        if "discard" in pressed and self.kept:
            self.discarded.append(self.kept.pop())
        if not self.paused:
            self.current.append(self.key_map.get(held, self.noop))


def _actions(reader: RecordingReader) -> list[tuple[int, list[Any]]]:
    return [(ep.seed, list(ep.actions)) for ep in reader]


def _assert_recorded(directory: str, driver: Driver, box: bool = False) -> None:
    with RecordingReader(directory) as reader:
        recorded = _actions(reader)
        assert [seed for seed, _ in recorded] == [seed for seed, _ in driver.kept]
        for (seed, got), (_, expected) in zip(recorded, driver.kept):
            if box:
                np.testing.assert_array_equal(np.stack(got), np.stack(expected))
            else:
                assert got == expected, seed
        assert all(ep.end in ("terminated", "truncated") for ep in reader)
    checks = list(replay_recording(directory))
    assert [c.status for c in checks] == ["match"] * len(driver.kept)


def test_cartpole_pause_restart_discard_quit(tmp_path):
    directory = str(tmp_path / "demos")
    keys = {"a": 0, "d": 1}
    rng = np.random.default_rng(0)
    held = [("a",), ("d",), (), ("a",), ("d",)]
    pattern_list = [held[i] for i in rng.integers(len(held), size=3000)]
    cues: dict[str, int] = {}

    def controls(driver: Driver, status: PlayStatus) -> list[str]:
        if status.frame in (5, 9):
            return ["pause"]
        if status.frame == 15:
            return ["restart"]
        if len(driver.kept) == 2 and "discard" not in cues:
            cues["discard"] = status.frame
            return ["discard"]
        if "discard" in cues and len(driver.kept) == 3 and status.step >= 3:
            return ["quit"]
        return []

    driver = Driver(keys, 0, lambda f: pattern_list[f], controls)
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    summary = play(env, directory, keys_to_action=keys, fps=10_000, seed=11,
                   callback=driver)
    env.close()
    assert len(driver.kept) == 3 and len(summary.kept) == 3
    # a restarted attempt, a discarded episode, the unfinished one at quit
    assert summary.discarded == 3
    assert summary.seeds == [seed for seed, _ in driver.kept]
    assert summary.seeds[0] == 11 and len(set(summary.seeds)) == 3
    sequence = episode_seeds(11)
    drawn = [next(sequence) for _ in range(5)]
    # the restart kept the seed; the discarded (second) episode's seed is gone with it
    assert summary.seeds == [drawn[0], drawn[2], drawn[3]]
    _assert_recorded(directory, driver)
    # one writer for the session; the kept episodes by stable id, the discarded ones deleted
    # through the edit record (hidden, restorable), every reader agreeing
    names = os.listdir(directory)
    assert [n for n in names if n.endswith(".manifest.json") and not n.startswith("_edits")] \
        == [f"{summary.writer}.manifest.json"]
    with RecordingReader(directory) as reader:
        assert [reader.stable_id(i) for i in range(len(reader))] == summary.kept
        assert [w["prefix"] for w in reader.writers] == [summary.writer]
        assert reader.writers[0]["deleted"] == 3
    with open(os.path.join(directory, f"{summary.writer}.manifest.json")) as f:
        metadata = json.load(f)["metadata"]  # (how the session was played; info shows it)
    assert metadata["produced_by"] == "human"
    assert metadata["session_seed"] == 11 and metadata["fps"] == 10_000
    assert metadata["keys"] == [[["a"], 0], [["d"], 1]] and metadata["noop"] == 0
    deleted = edit.deleted_episodes(directory)
    assert [d.summary.end for d in deleted] == ["reset", "terminated", "close"]
    assert [d.summary.seed for d in deleted] == [drawn[0], drawn[1], drawn[4]]
    assert [d.number for d in deleted] == [0, 2, 5]
    assert [n for _, n in summary.kept] == [1, 3, 4]
    assert verify(directory) == []
    assert main(["replay", directory, "--quiet"]) == 0


def test_an_episode_deleted_by_stable_id_before_it_is_committed(tmp_path):
    """What play does to the episode being played: hidden by its stable id before any of it
    is written; readers hide it as its steps come, verify is clean all along."""
    directory = str(tmp_path / "ids")
    env = RecordingWrapper(gym.make("CartPole-v1"), directory, flush_interval=None)
    prefix = env.file_prefix
    env.reset(seed=1)
    for _ in range(5):
        env.step(0)
    generation = edit.delete_ids(directory, [(prefix, 0)])  # nothing of it is committed yet
    assert generation == 1
    env.reset(seed=2)  # (ends episode 0 as "reset")
    for _ in range(3):
        env.step(1)
    env.flush()
    with RecordingReader(directory) as reader:
        assert len(reader) == 1 and reader.stable_id(0) == (prefix, 1)
        assert reader[0].seed == 2 and list(reader[0].actions) == [1, 1, 1]
    assert verify(directory) == []
    edit.delete_ids(directory, [(prefix, 1), (prefix, 7)])  # (7: not recorded, ever)
    env.close()
    with RecordingReader(directory) as reader:
        assert len(reader) == 0 and reader.writers[0]["deleted"] == 2
    assert [d.summary.end for d in edit.deleted_episodes(directory)] == ["reset", "close"]
    assert verify(directory) == []
    edit.restore(directory, all=True)
    with RecordingReader(directory) as reader:
        assert [reader[i].seed for i in range(len(reader))] == [1, 2]
    for ids, message in [([("_edits", 0)], "not a writer prefix"),
                         ([("../x", 0)], "not a writer prefix"),
                         ([(prefix, -1)], "not in"), ([(prefix, 1.0)], "not in")]:
        with pytest.raises(EditError, match=message):
            edit.delete_ids(directory, ids)
    with pytest.raises(EmptySelectionError):
        edit.delete_ids(directory, [])


def test_atari_with_its_own_key_map(tmp_path):
    ale_py = pytest.importorskip("ale_py")
    gym.register_envs(ale_py)
    directory = str(tmp_path / "breakout")
    env = gym.make("ALE/Breakout-v5", render_mode="rgb_array", max_episode_steps=40)
    own = env.unwrapped.get_keys_to_action()  # {('e',): 0, (' ',): 1, ('d',): 2, ('a',): 3}
    cycle = [(" ",), ("d",), ("d",), ("a",), (), ("e",)]
    sizes: list[tuple[int, int]] = []

    def controls(driver: Driver, status: PlayStatus) -> list[str]:
        sizes.append(status.window.surface.get_size())
        return ["quit"] if len(driver.kept) == 2 else []

    driver = Driver(own, 0, lambda f: cycle[f % len(cycle)], controls)
    summary = play(env, directory, seed=5, fps=100_000, callback=driver)
    env.close()
    assert len(summary.kept) == 2 and summary.discarded == 0  # (quit as the third began)
    # a 160 x 210 frame, zoomed 3 times, over the status line: not square, width first
    assert sizes[0] == (480, 630 + 22)
    _assert_recorded(directory, driver)
    with RecordingReader(directory) as reader:
        assert reader[0].observations.shape == (41, 210, 160, 3)
        assert len({reader[0].seed, reader[1].seed}) == 2


@pytest.mark.parametrize("env_id,key_map,noop", [
    ("MountainCarContinuous-v0", {"left": [-1.0], "right": [1.0], ("left", "right"): [0.25]},
     None),
    ("Pendulum-v1", {"a": [-2.0], "d": [2.0], "s": [0.5]}, [0.125]),
])
def test_box_actions(tmp_path, env_id, key_map, noop):
    directory = str(tmp_path / "box")
    names = sorted({n for k in key_map for n in (k if isinstance(k, tuple) else (k,))})
    combos = [tuple(k) if isinstance(k, tuple) else (k,) for k in key_map] + [(), (names[0],)]

    def controls(driver: Driver, status: PlayStatus) -> list[str]:
        return ["quit"] if len(driver.kept) == 2 else []

    expected_noop = np.zeros(1, np.float32) if noop is None else np.asarray(noop, np.float32)
    driver = Driver({k: np.asarray(v, np.float32) for k, v in key_map.items()}, expected_noop,
                    lambda f: combos[(f // 2) % len(combos)], controls)
    env = gym.make(env_id, render_mode="rgb_array", max_episode_steps=25)
    summary = play(env, directory, keys_to_action=key_map, noop=noop, zoom=0.5, fps=10_000,
                   seed=2, callback=driver)
    env.close()
    assert len(summary.kept) == 2
    _assert_recorded(directory, driver, box=True)
    with RecordingReader(directory) as reader:
        actions = np.concatenate([ep.actions for ep in reader])
        assert actions.dtype == np.float32
        assert {float(a[0]) for a in actions} >= {float(v[0]) for v in key_map.values()}


def test_the_key_map_is_checked_before_the_window_opens(tmp_path):
    directory = tmp_path / "none"
    cartpole = gym.make("CartPole-v1", render_mode="rgb_array")
    box = gym.make("Pendulum-v1", render_mode="rgb_array")
    bad = [
        (cartpole, {"a": 2}, None, "not in the action space"),
        (cartpole, {"a": 0.5}, None, "not an integer action"),
        (cartpole, {"a": 0}, 5, "the no-op action"),
        (cartpole, {"p": 0}, None, "pause key"),
        (cartpole, {("a", "d"): 0, ("d", "a"): 1}, None, "mapped twice"),
        (cartpole, {"no such key": 0}, None, "unknown key name"),
        (cartpole, None, None, "no key map of its own"),
        (box, {"a": [3.0]}, None, "not in the action space"),
        (box, {"a": [1.0, 2.0]}, None, "not an action of"),
    ]
    for env, keys, noop, message in bad:
        with pytest.raises(PlayError, match=message):
            play(env, directory, keys_to_action=keys, noop=noop)
    with pytest.raises(PlayError, match="render_mode='rgb_array'"):
        play(gym.make("CartPole-v1"), directory, keys_to_action={"a": 0})

    class GreyFrames(gym.Wrapper):  # (an env whose rgb_array frames are not RGB)
        def render(self):
            return self.env.render()[..., 0]

    with pytest.raises(PlayError, match="height x width x 3"):
        play(GreyFrames(gym.make("CartPole-v1", render_mode="rgb_array")), directory,
             keys_to_action={"a": 0})
    assert not directory.exists()


def test_key_maps():
    assert parse_keys("a=0, d=1") == {("a",): 0, ("d",): 1}
    assert parse_keys("left=[-1,0],left+up=[1,-1],space=[0.5, 2]") == {
        ("left",): [-1, 0], ("left", "up"): [1, -1], ("space",): [0.5, 2]}
    # a float action rounds to a float32 space
    box = build_key_map(parse_keys("a=[0.1],b=[-2]"), gym.make("Pendulum-v1"))
    assert box.action({key_code("a")}).tolist() == [np.float32(0.1)]
    assert box.noop.dtype == np.float32 and box.noop.tolist() == [0.0]
    for text in ("a", "a=", "a=x", "=1", "a=0,a=1", "a={}", ""):
        with pytest.raises(PlayError):
            parse_keys(text)
    # MountainCar's own map uses SDL 1 codes for the arrows: they are the arrows
    env = gym.make("MountainCar-v0", render_mode="rgb_array")
    key_map = build_key_map(None, env)
    assert key_map.noop == 1  # its () entry
    assert key_map.action({pygame.K_LEFT}) == 0 and key_map.action({pygame.K_RIGHT}) == 2
    assert key_map.action({pygame.K_LEFT, pygame.K_RIGHT, pygame.K_a}) == 1


def test_command_line(tmp_path, capsys):
    directory = str(tmp_path / "cli")
    # no key held: CartPole falls over by itself; two episodes kept, then the info summary
    assert main(["play", "CartPole-v1", "-d", directory, "--keys", "left=0,right=1",
                 "--seed", "3", "--episodes", "2", "--fps", "10000", "--zoom", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "playing CartPole-v1" in out and "(seed 3)" in out and "kept 2 episodes" in out
    assert "episodes           2" in out and "terminated 2" in out
    with RecordingReader(directory) as reader:
        assert [ep.seed for ep in reader][0] == 3
        assert all((ep.actions == 0).all() for ep in reader)  # the no-op
    assert main(["replay", directory]) == 0
    assert "2 match" in capsys.readouterr().out
    other = str(tmp_path / "other")
    assert main(["play", "CartPole-v1", "-d", other]) == 1
    assert "no key map of its own" in capsys.readouterr().err
    assert main(["play", "CartPole-v1", "-d", other, "--keys", "a=0", "--noop", "[0]"]) == 1
    assert not os.path.exists(other)


_KILLED_PLAYER = """
import random, sys
import gymnasium as gym, pygame
from gym_recorder.play import play

journal = open(sys.argv[2], "a", buffering=1)  # (line by line: a SIGKILL loses no line written)
rng = random.Random(int(sys.argv[3]))
seen = {"kept": [], "count": 0, "seed": None}


def press(key):
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=key))
    pygame.event.post(pygame.event.Event(pygame.KEYUP, key=key))


def player(status):
    # what play did at the previous frame, written down after the fact
    kept = seen["kept"]
    if status.kept > seen["count"]:
        kept.append(seen["seed"])
        journal.write(f"kept {seen['seed']}\\n")
    elif status.kept < seen["count"]:
        journal.write(f"discarded {kept.pop()}\\n")
    seen["count"], seen["seed"] = status.kept, status.seed
    if status.frame == 0:
        journal.write("ready\\n")
    kind = pygame.KEYDOWN if status.frame % 4 < 2 else pygame.KEYUP
    pygame.event.post(pygame.event.Event(kind, key=pygame.K_d))
    r = rng.random()
    if r < 0.03:
        press(pygame.K_r)
    elif r < 0.08 and kept and 1 <= status.step <= 3:  # (this frame's step ends no episode)
        journal.write(f"discarding {kept[-1]}\\n")
        press(pygame.K_BACKSPACE)


play(gym.make("CartPole-v1", render_mode="rgb_array"), sys.argv[1], keys_to_action={"d": 1},
     seed=int(sys.argv[3]), fps=100_000, callback=player)
"""


def _shown(directory: str) -> list[tuple[int, str]]:
    with RecordingReader(directory) as reader:
        return [(s.seed, s.end) for s in reader.summaries()]


@pytest.mark.stress
@pytest.mark.skipif(not hasattr(os, "kill") or os.name != "posix", reason="SIGKILL")
def test_a_kill_at_any_moment_keeps_kept_episodes_and_never_brings_back_discarded_ones(tmp_path):
    """A player restarts and discards often; the process is killed at a random moment (during a
    step, a commit, an edit). Whatever the moment: every episode kept (and not being discarded)
    is there, whole; no discarded episode, restarted attempt or unfinished episode shows, not
    even after ``repair``; verify is clean and replay exact."""
    import random
    import subprocess
    import sys
    import time
    from pathlib import Path

    from gym_recorder.integrity import repair

    root = Path(__file__).resolve().parent.parent
    rng = random.Random(0)
    discards = 0
    for trial in range(5):
        directory = str(tmp_path / f"killed{trial}")
        journal = tmp_path / f"journal{trial}"
        journal.touch()
        child = subprocess.Popen([sys.executable, "-c", _KILLED_PLAYER, directory, str(journal),
                                  str(trial + 1)], env=dict(os.environ, PYTHONPATH=str(root)),
                                 stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while "ready" not in journal.read_text() and child.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(rng.uniform(0.2, 1.5))
        child.kill()
        _, err = child.communicate(timeout=60)
        assert child.returncode == -9, err.decode()
        lines = [line.split() for line in journal.read_text().splitlines()[1:]]
        kept = {int(seed) for what, seed in lines if what == "kept"}
        discarding = {int(seed) for what, seed in lines if what == "discarding"}
        discarded = {int(seed) for what, seed in lines if what == "discarded"}
        discards += len(discarded)
        for when in ("after the kill", "after repair"):
            shown = _shown(directory)
            seeds = {seed for seed, _ in shown}
            assert all(end in ("terminated", "truncated") for _, end in shown), (when, shown)
            assert len(seeds) == len(shown)
            assert not seeds & discarded, when
            assert kept - discarding <= seeds, when
            assert len(seeds - kept) <= 1, when  # (kept as the kill came: not written down yet)
            if when == "after the kill":
                assert verify(directory) == []
                assert {c.status for c in replay_recording(directory)} <= {"match"}
                repair(directory)
    assert discards > 0  # (the kills came during sessions that discarded)
