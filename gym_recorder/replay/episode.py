"""Replaying one episode on its stream's env, step by step, compared with what was recorded.

A *stream* is the env replaying one (writer, sub_env): :func:`replay_episode` resets it with the
recorded seed and options (or steps on, for an episode recorded without a reset), steps it with
the recorded actions and stops at the first difference (rendering goes on to the episode's end);
a mismatch leaves the stream out of step, so its later unseeded episodes are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from .compare import EpisodeCheck, first_difference, same_float, tree_row
from .factory import env_factory

__all__ = ["FrameSink", "Stream", "replay_episode"]

# on_frame(frame, render_fps): a rendered frame handed on as it comes (see replay_recording).
FrameSink = Callable[[Any, "float | None"], None]


class Stream:
    """The env replaying one (writer, sub_env) stream, and whether it is in step with it."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.synced = False  # the env's state follows the recording (a seeded reset happened)
        self.lost = ("no seeded reset before this episode in its env; its random state is "
                     "unknown")  # why it does not, when not synced

    def close(self) -> None:
        self.env.close()


def replay_episode(ep: Any, writer: Mapping[str, Any], factories: dict[str, Any],
                   streams: dict[tuple[Any, ...], Stream],
                   render: bool, env_kwargs: Mapping[str, Any] | None = None,
                   skip_wrappers: Collection[str] = (),
                   on_frame: FrameSink | None = None) -> EpisodeCheck:
    """Replays one episode on its stream's env (made by ``factories``' factory of its writer
    on first use) and compares it with the recording: its check."""
    def result(status: str, step: int | None = None, message: str = "",
               frames: list[Any] | None = None) -> EpisodeCheck:
        fps = None
        if frames is not None and stream is not None:
            fps = stream.env.metadata.get("render_fps")
            fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        return EpisodeCheck(ep.index, ep.writer, ep.sub_env, ep.length, status, step, message,
                            frames if isinstance(frames, list) else None, fps)

    stream = None

    if writer.get("legacy"):
        return result("skipped", message="gym-recording (legacy) episode: no env id or seeds")
    if ep.writer not in factories:
        factories[ep.writer] = env_factory(writer["manifest"], render, env_kwargs,
                                           skip_wrappers)
    env_id, factory, reason = factories[ep.writer]
    if factory is None:
        return result("skipped", message=reason)
    key = (ep.writer, ep.sub_env)
    stream = streams.get(key)
    if stream is None:
        stream = streams[key] = Stream(factory())
    env = stream.env
    frames: Any = None
    if render:
        frames = [] if on_frame is None else Streamed(on_frame, env)
    if ep.no_reset:
        if not stream.synced:
            return result("skipped", message=f"stepped on without a reset, and {stream.lost}")
        first = None  # the first observation is the previous episode's last: already compared
    else:
        if ep.seed is None and not stream.synced:
            return result("skipped", message=stream.lost)
        try:
            first, _ = env.reset(seed=ep.seed, options=ep.options)
        except Exception as e:  # noqa: BLE001  (the env's own error is the finding)
            return _lost(result("mismatch", 0, f"reset raised {type(e).__name__}: {e}"), stream)
        stream.synced = True
    if frames is not None:
        frames.append(env.render())
    mismatch: tuple[int, str] | None = None
    if first is not None:
        d = first_difference(tree_row(ep.observations, 0), first, "reset observation")
        if d is not None:
            mismatch = (0, d)
    for t in range(ep.length):
        if mismatch is not None and not render:
            break
        try:
            obs, reward, terminated, truncated, _ = env.step(tree_row(ep.actions, t))
        except Exception as e:  # noqa: BLE001
            mismatch = mismatch or (t + 1, f"step raised {type(e).__name__}: {e}")
            break
        if frames is not None:
            frames.append(env.render())
        if mismatch is not None:
            if terminated or truncated:
                break  # diverged and ended: stepping on would be outside the env's contract
            continue  # diverged, but still rendering the recorded actions
        d = first_difference(tree_row(ep.observations, t + 1), obs, "observation")
        if d is not None:
            mismatch = (t + 1, d)
        elif not same_float(float(ep.rewards[t]), reward):
            mismatch = (t + 1, f"reward {float(reward)!r}, recorded {float(ep.rewards[t])!r}")
        elif bool(terminated) != bool(ep.terminations[t]):
            mismatch = (t + 1, f"terminated {bool(terminated)}, recorded "
                               f"{bool(ep.terminations[t])}")
        elif bool(truncated) != bool(ep.truncations[t]):
            mismatch = (t + 1, f"truncated {bool(truncated)}, recorded {bool(ep.truncations[t])}")
    if mismatch is not None:
        return _lost(result("mismatch", mismatch[0], mismatch[1], frames), stream)
    return result("match", frames=frames)


class Streamed:
    """In place of a list of frames: hands each frame on with the env's render_fps."""

    def __init__(self, sink: FrameSink, env: Any) -> None:
        fps = getattr(env, "metadata", {}).get("render_fps")
        self.fps = float(fps) if isinstance(fps, (int, float)) and fps > 0 else None
        self.sink = sink

    def append(self, frame: Any) -> None:
        self.sink(frame, self.fps)


def _lost(check: EpisodeCheck, stream: Stream) -> EpisodeCheck:
    """Marks a stream out of step with the recording after ``check`` (a mismatch)."""
    stream.synced = False
    stream.lost = f"its env diverged from the recording in episode {check.index}"
    return check
