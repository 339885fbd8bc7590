"""``play``: a person plays an env with the keyboard, and every kept episode is recorded.

The loop, once per frame: the callback (if any), the window's events (keys held, control keys),
one env step with the action of the keys held (the no-op when none is), the frame and the status
line, then the clock. Recording is :class:`~gym_recorder.RecordingWrapper`'s, one writer for the
session (:mod:`gym_recorder.play.episodes`: kept episodes are committed as they end, discarded
ones deleted through the recording's edit record), so that it sees every reset observation and
info as the env returned them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from ..errors import PlayError
from .episodes import SEED_BOUND, PlayEpisodes, episode_seeds
from .keys import CONTROL_KEYS, KeyMap, build_key_map, key_code
from .window import PlayWindow, auto_zoom, check_frame, import_pygame

__all__ = ["play", "PlayStatus", "PlaySummary", "DEFAULT_FPS"]

# Frames per second when neither fps nor the env's metadata["render_fps"] says.
DEFAULT_FPS = 30.0


@dataclass
class PlayStatus:
    """What the callback sees at each frame, before the frame's events are read.

    Attributes:
        frame: frames shown so far (0 at the first call).
        episode: the number the episode being played will have among the kept ones (1, 2, ...).
        step: steps taken in the episode being played.
        episode_return: the sum of its rewards so far.
        kept: episodes kept in this session.
        discarded: episodes discarded in this session (restarted, or discarded after they ended).
        paused: whether play is paused.
        seed: the seed the episode being played was reset with.
        window: the window (``window.save(path)`` writes a screenshot).
    """

    frame: int = 0
    episode: int = 1
    step: int = 0
    episode_return: float = 0.0
    kept: int = 0
    discarded: int = 0
    paused: bool = False
    seed: int = 0
    window: PlayWindow | None = None

    def line(self) -> str:
        """The status line under the frame."""
        text = (f"episode {self.episode}  step {self.step}  return {self.episode_return:g}  "
                f"kept {self.kept}")
        return text + ("  PAUSED" if self.paused else "")


@dataclass
class PlaySummary:
    """How a play session ended.

    Attributes:
        directory: the recording directory.
        seed: the session's seed (the first episode's; later ones are drawn from it).
        writer: the session's writer prefix (one writer for the session).
        kept: the stable ids (writer prefix, number within the writer) of the kept episodes, in
            order: what ``RecordingReader.stable_id`` gives.
        seeds: the seeds of the kept episodes, in order.
        discarded: episodes of at least one step discarded (restarted, discarded after they
            ended, or unfinished at the end).
        steps: steps of the kept episodes.
    """

    directory: str
    seed: int
    writer: str = ""
    kept: list[tuple[str, int]] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    discarded: int = 0
    steps: int = 0


class _Keys:
    """Keys held and control keys pressed, from pygame events."""

    def __init__(self, pygame: Any, key_map: KeyMap) -> None:
        self.pygame = pygame
        self.key_map = key_map
        self.held: set[int] = set()
        self.controls = {key_code(name): what for what, name in CONTROL_KEYS.items()}

    def read(self, events: list[Any]) -> set[str]:
        """Updates the keys held; returns the controls pressed (and "quit" on a window close)."""
        pygame = self.pygame
        pressed: set[str] = set()
        for event in events:
            if event.type == pygame.QUIT:
                pressed.add("quit")
            elif event.type == pygame.KEYDOWN:
                if event.key in self.controls:
                    pressed.add(self.controls[event.key])
                elif event.key in self.key_map.relevant:
                    self.held.add(event.key)
            elif event.type == pygame.KEYUP:
                self.held.discard(event.key)  # (a KEYUP without its KEYDOWN changes nothing)
            elif event.type == getattr(pygame, "WINDOWFOCUSLOST", None):
                self.held.clear()  # (keys let go in another window send no KEYUP here)
        return pressed


def _start(episodes: PlayEpisodes, status: PlayStatus, seed: int) -> None:
    episodes.start(seed)
    status.step, status.episode_return, status.seed = 0, 0.0, seed
    status.episode = status.kept + 1


def play(env: gym.Env[Any, Any], directory: str | os.PathLike[str], *,
         keys_to_action: Mapping[Any, Any] | None = None, noop: Any = None,
         fps: float | None = None, zoom: float | None = None, seed: int | None = None,
         episodes: int | None = None,
         callback: Callable[[PlayStatus], None] | None = None,
         recorder_kwargs: dict[str, Any] | None = None) -> PlaySummary:
    """Lets a person play ``env`` in a window and records the episodes they keep.

    The window shows ``env.render()`` frames under a status line (episode, step, return, kept).
    Each frame the env is stepped once with the action of the keys held, or ``noop`` when no
    mapped combination is held. Control keys: ``p`` pauses and resumes, ``r`` restarts the
    episode (same seed; the episode is discarded; nothing happens before its first step),
    ``backspace`` discards the last kept episode (again: the one before), ``escape`` or closing
    the window quits (kept episodes stay, the unfinished one is discarded). An episode that
    terminates or is truncated is kept (committed and made durable) and the next one starts.
    The session is one writer of the recording; a discarded episode is deleted with one commit
    of the recording's edit record (``gym-recorder edit DIR restore`` brings it back).

    Seeds: the first episode is reset with ``seed`` (a random one when None), each later one
    with a seed drawn from a generator seeded with ``seed``; each is recorded, so
    ``gym-recorder replay`` re-runs the episodes exactly.

    Args:
        env: the env, made with ``render_mode="rgb_array"``; it is not closed.
        directory: the recording directory (created if missing; may hold other recordings).
        keys_to_action: key combination -> action (see :mod:`gym_recorder.play.keys`); None
            takes the env's own ``get_keys_to_action()``.
        noop: the action when no mapped keys are held (default: the map's ``()`` entry, else
            0 or zeros).
        fps: steps (and frames) per second; default the env's ``metadata["render_fps"]``.
        zoom: scale of the frames; default 1, or a whole factor for frames under 480 pixels.
        seed: the session's seed.
        episodes: stop once this many episodes are kept (default: play until quit).
        callback: called with the :class:`PlayStatus` at every frame, before its events are
            read (tests post key events from it; ``status.window.save(path)`` screenshots).
        recorder_kwargs: more arguments for the session's RecordingWrapper (a ``metadata``
            there is added to play's: ``produced_by`` "human", ``keys``, ``noop``, ``fps``,
            ``session_seed``).

    Returns:
        The :class:`PlaySummary`.

    Raises:
        PlayError: before the window opens, if the key map, the no-op or the env's frames are
            not playable.
    """
    pygame = import_pygame()
    if getattr(env, "render_mode", None) != "rgb_array":
        raise PlayError(f"play needs an env made with render_mode='rgb_array', this one has "
                        f"render_mode={getattr(env, 'render_mode', None)!r}")
    if fps is None:
        fps = float(env.metadata.get("render_fps") or DEFAULT_FPS)
    if not fps > 0 or (zoom is not None and not zoom > 0):
        raise PlayError(f"fps and zoom must be positive, got fps={fps!r}, zoom={zoom!r}")
    if episodes is not None and episodes < 1:
        raise PlayError(f"episodes must be at least 1, got {episodes!r}")
    try:
        key_map = build_key_map(keys_to_action, env, noop)
    except PlayError:
        pygame.display.quit()  # (key names need the display)
        raise
    session_seed = int(seed) if seed is not None else secrets.randbelow(SEED_BOUND)
    seeds = episode_seeds(session_seed)
    first_seed = next(seeds)
    metadata = {"produced_by": "human", **key_map.describe(), "fps": fps,
                "session_seed": session_seed}
    try:
        # A look at the first frame before anything is recorded (the seeded reset is redone).
        env.reset(seed=first_seed)
        check_frame(env.render())
        recorder = PlayEpisodes(env, os.fspath(directory), metadata, recorder_kwargs)
    except BaseException:
        pygame.display.quit()
        raise
    summary = PlaySummary(os.fspath(directory), session_seed, recorder.prefix)
    status = PlayStatus()
    window: PlayWindow | None = None
    kept_steps: list[int] = []  # (steps of each kept episode, to take back on a discard)
    try:
        _start(recorder, status, first_seed)
        frame = check_frame(env.render())
        spec = getattr(env, "spec", None)
        window = PlayWindow(pygame, frame.shape[:2], zoom or auto_zoom(frame.shape[1]),
                            f"gym-recorder play {spec.id if spec else type(env.unwrapped).__name__}"
                            " (p pause, r restart, backspace discard last, esc quit)")
        status.window = window
        window.show(frame, status.line())
        keys = _Keys(pygame, key_map)
        clock = pygame.time.Clock()
        while True:
            status.discarded = summary.discarded
            if callback is not None:
                callback(status)
            controls = keys.read(pygame.event.get())
            if "quit" in controls:
                break
            if "pause" in controls:
                status.paused = not status.paused
            if "restart" in controls and status.step > 0:  # (before a step: the same start)
                summary.discarded += 1
                _start(recorder, status, status.seed)
            if "discard" in controls and recorder.drop_last_kept() is not None:
                summary.discarded += 1
                summary.steps -= kept_steps.pop()
                summary.seeds.pop()
                status.kept -= 1
                status.episode = status.kept + 1
            if not status.paused:
                _, reward, terminated, truncated, _ = recorder.step(key_map.action(keys.held))
                status.step += 1
                status.episode_return += float(reward)
                if terminated or truncated:
                    recorder.keep()
                    kept_steps.append(status.step)
                    summary.steps += status.step
                    summary.seeds.append(status.seed)
                    status.kept += 1
                    if episodes is not None and status.kept >= episodes:
                        break
                    _start(recorder, status, next(seeds))
            window.show(check_frame(env.render()), status.line())
            status.frame += 1
            clock.tick(fps)
    finally:
        if recorder.current is not None and status.step > 0:
            summary.discarded += 1
        recorder.close()
        summary.kept = [(recorder.prefix, number) for number in recorder.kept]
        if window is not None:
            window.close()
        pygame.display.quit()  # (also when no window opened: key names need the display)
    return summary
