"""The ``gym-recorder`` commands that run an env: ``record``, ``replay`` and ``video``.

``record`` drives an env with a random policy (or ``--policy``) through
:func:`gym_recorder.replay.drive.record_env`, with a progress bar and a clean stop on Ctrl-C;
``replay`` re-runs the recorded seeds and actions and reports the first difference; ``video``
films an episode from its image observations or, if there are none, from a replay rendered with
``render_mode='rgb_array'``. The parser and :func:`~gym_recorder.cli.main` are in
:mod:`gym_recorder.cli`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
from typing import Any, cast

from .output import EXIT_INTERRUPTED, EXIT_OK, MB, PROG, count, say
from ..errors import CommandError

__all__ = ["cmd_record", "cmd_replay", "cmd_video", "DEFAULT_EPISODES"]

# Episodes recorded when neither --episodes nor --steps is given: enough to look at and replay.
DEFAULT_EPISODES = 10
# Seeds drawn when --seed is not given: below 2**31 so that every env's seeding accepts them.
RANDOM_SEED_BOUND = 2**31
# How often the progress bar is updated, and how often its MB figure re-scans the directory
# (seconds): often enough to look live, rarely enough to cost nothing per step.
PROGRESS_UPDATE_INTERVAL = 0.1
PROGRESS_BYTES_INTERVAL = 0.5
# Without tqdm, a plain progress line on a terminal's stderr this often (seconds).
PLAIN_PROGRESS_INTERVAL = 3.0


# video's progress line is written at most this often (seconds).
VIDEO_PROGRESS_SECONDS = 1.0


def _action_text(action: Any) -> str:
    import numpy as np

    if isinstance(action, np.ndarray):
        return np.array2string(action, threshold=20, separator=", ")
    return str(action) if isinstance(action, (int, float, np.generic)) else repr(action)


class _CheckedPolicy:
    """The user's policy, remembering its last action so a bad one can be named."""

    def __init__(self, policy: Any, spec: str) -> None:
        self.policy = policy
        self.spec = spec
        self.last: Any = None
        self.calls = 0

    def __call__(self, observation: Any) -> Any:
        try:
            self.last = self.policy(observation)
        except Exception as e:  # noqa: BLE001  (the user's code: say whose error it is)
            raise CommandError(f"policy {self.spec} raised {type(e).__name__}: {e}") from e
        self.calls += 1
        return self.last

    def explain(self, args: argparse.Namespace) -> CommandError | None:
        """If the last action is not in the env's action space: the error that says so."""
        if not self.calls:
            return None
        from ..replay.run import make_env

        try:
            env = make_env(args.env_id, args.env_kwargs, num_envs=args.num_envs)
        except Exception:  # noqa: BLE001  (the original error is reported instead)
            return None
        try:
            space = env.action_space
            try:
                inside = bool(space.contains(self.last))
            except Exception:  # noqa: BLE001  (a value the space cannot even compare)
                inside = False
        finally:
            env.close()
        if inside:
            return None
        return CommandError(f"policy returned {_action_text(self.last)}, which is not in "
                            f"{space}")


class _StopOnInterrupt:
    """Turns the first Ctrl-C (SIGINT) or SIGTERM into a flag the recording loop polls, so that
    the recorder is closed and keeps every step; a second one acts as it would have.

    SIGTERM is what ``kill``, ``timeout``, ``docker stop``, systemd and batch schedulers send;
    left to its default it ended the process as a crash does, losing the steps not yet committed.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None  # the signal that stopped the recording
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signum = self.signum or signum
        signal.signal(signum, self._previous[signum])

    def __enter__(self) -> _StopOnInterrupt:
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handler)
            except ValueError:  # not the main thread: the signals act as usual
                break
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


class _Progress:
    """A tqdm bar on stderr: steps, steps/s, episodes and MB written (none if tqdm is missing,
    with --quiet, or when stderr is not a terminal)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.bar: Any = None
        self.plain = False  # no tqdm: a plain line every PLAIN_PROGRESS_INTERVAL seconds
        self.episodes_total = args.episodes
        self.steps_total = args.steps
        self._next_bytes = 0.0
        self._next_update = 0.0
        self._mb = 0.0
        self._start = time.monotonic()
        if args.quiet:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self.plain = sys.stderr.isatty()
            self._next_update = self._start + PLAIN_PROGRESS_INTERVAL
            return
        self.bar = tqdm(total=args.steps, unit="step", desc="recording", file=sys.stderr,
                        disable=None, dynamic_ncols=True, leave=False)

    def __call__(self, status: Any) -> None:
        if self.plain:
            self._plain(status)
            return
        bar = self.bar
        if bar is None or bar.disable:
            return
        now = time.monotonic()
        if now < self._next_update:
            return
        self._next_update = now + PROGRESS_UPDATE_INTERVAL
        if now >= self._next_bytes:
            from ..replay.drive import writer_bytes

            self._next_bytes = now + PROGRESS_BYTES_INTERVAL
            self._mb = writer_bytes(status.directory, status.prefix) / MB
        total = f"/{self.episodes_total}" if self.episodes_total else ""
        bar.set_postfix_str(f"episodes={status.episodes}{total}, {self._mb:.2f} MB written",
                            refresh=False)
        bar.update(status.steps - bar.n)

    def _plain(self, status: Any) -> None:
        now = time.monotonic()
        if now < self._next_update:
            return
        from ..replay.drive import writer_bytes

        self._next_update = now + PLAIN_PROGRESS_INTERVAL
        mb = writer_bytes(status.directory, status.prefix) / MB
        steps = f"{status.steps:,}" + (f"/{self.steps_total:,}" if self.steps_total else "")
        episodes = f"{status.episodes:,}" + (f"/{self.episodes_total:,}"
                                             if self.episodes_total else "")
        rate = status.steps / max(now - self._start, 1e-9)
        noun = "episode" if episodes == "1" else "episodes"
        print(f"{PROG} record: {steps} steps, {episodes} {noun}, {mb:.2f} MB written, "
              f"{rate:,.0f} steps/s", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_record(args: argparse.Namespace) -> int:
    from ..replay.drive import record_env, writer_bytes
    from ..replay.run import load_policy

    policy = _CheckedPolicy(load_policy(args.policy), args.policy) if args.policy else None
    if args.episodes is None and args.steps is None:
        args.episodes = DEFAULT_EPISODES
    seed = args.seed if args.seed is not None else secrets.randbelow(RANDOM_SEED_BOUND)
    recorder_kwargs: dict[str, Any] = {"target_batch_bytes": args.target_batch_bytes,
                                       "flush_interval": args.flush_interval}
    if args.file_prefix:
        recorder_kwargs["file_prefix"] = args.file_prefix
    if getattr(args, "compress", False):
        recorder_kwargs["compression"] = "zstd"
    if getattr(args, "meta", None):
        recorder_kwargs["metadata"] = dict(args.meta)
    if args.num_envs is not None:
        try:
            from ..record import vector  # noqa: F401  (imported lazily: only vector recording needs it)
        except ImportError as e:
            raise CommandError(f"--num-envs needs gym_recorder.record.vector, which cannot be imported "
                               f"({e})") from e
    _import_modules(args)
    from ..replay.drive_agents import multiagent_entry, record_multiagent

    multiagent = multiagent_entry(args.env_id)
    if multiagent and args.num_envs is not None:
        raise CommandError("a PettingZoo env (module:function) is recorded without --num-envs")
    progress = _Progress(args)
    try:
        with _StopOnInterrupt() as stop:
            if multiagent:
                status = record_multiagent(
                    args.env_id, args.directory, episodes=args.episodes, steps=args.steps,
                    policy=cast(Any, load_policy(args.policy)) if args.policy else None,
                    seed=seed, env_kwargs=args.env_kwargs, recorder_kwargs=recorder_kwargs,
                    on_step=progress, should_stop=lambda: stop.requested)
            else:
                status = record_env(
                    args.env_id, args.directory, policy=policy, episodes=args.episodes,
                    steps=args.steps, seed=seed, num_envs=args.num_envs, env_kwargs=args.env_kwargs,
                    recorder_kwargs=recorder_kwargs, on_step=progress,
                    should_stop=lambda: stop.requested,
                    wrappers=getattr(args, "wrappers", None) or ())
    except Exception as e:
        better = policy.explain(args) if policy is not None and not isinstance(
            e, CommandError) else None
        if better is not None:
            raise better from e
        raise
    finally:
        progress.close()
    size = writer_bytes(status.directory, status.prefix)
    unfinished = (f" + {status.unfinished} unfinished (end 'close')"
                  if status.unfinished else "")
    what = (f"{count(status.episodes, 'episode')}{unfinished}, "
            f"{count(status.steps, 'step')} of {args.env_id} "
            f"into {args.directory} (seed {seed}, {size:,} bytes, writer {status.prefix})")
    if status.interrupted:
        if stop.signum == signal.SIGTERM:
            print(f"{PROG} record: terminated (SIGTERM); kept {what}", file=sys.stderr)
            return 128 + signal.SIGTERM
        print(f"{PROG} record: interrupted; kept {what}", file=sys.stderr)
        return EXIT_INTERRUPTED
    say(args, f"recorded {what}")
    return EXIT_OK


def _import_modules(args: argparse.Namespace) -> None:
    """Imports the ``--import`` modules (packages that register envs or define wrappers)."""
    from ..format.envspec import import_modules
    from ..replay.run import ReplayError

    try:
        import_modules(args.imports)
    except ImportError as e:
        raise ReplayError(str(e)) from e


def cmd_replay(args: argparse.Namespace) -> int:
    from ..replay.run import replay_recording

    counts = {"match": 0, "mismatch": 0, "skipped": 0}
    first_bad = None
    for check in replay_recording(args.directory, only=args.episode, env_kwargs=args.env_kwargs,
                                  imports=args.imports or (), skip_wrappers=args.skip_wrappers):
        counts[check.status] += 1
        where = f"episode {check.index}" + (f" (sub-env {check.sub_env})"
                                            if check.sub_env is not None else "")
        if check.status == "match":
            say(args, f"{where}: match ({count(check.length, 'step')})")
        elif check.status == "skipped":
            say(args, f"{where}: skipped: {check.message}")
        else:
            first_bad = first_bad or check
            print(f"{where}: MISMATCH at step {check.step} of {check.length} (step 0 is the "
                  f"reset, 1 the first step): {check.message}")
    total = sum(counts.values())
    summary = (f"{count(total, 'episode')} replayed: {counts['match']} match, "
               f"{counts['mismatch']} "
               f"mismatch, {counts['skipped']} skipped")
    if first_bad is not None:
        raise CommandError(f"{summary} (first: episode {first_bad.index} at step "
                           f"{first_bad.step})")
    if total and not counts["match"]:
        raise CommandError(f"{summary}: nothing could be checked")
    say(args, summary)
    return EXIT_OK


class _VideoProgress:
    """``video``'s progress on stderr: frames written of the episode's, at most once a second
    (on one line that is rewritten when stderr is a terminal)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.quiet = total, quiet
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.shown = False

    def __call__(self, n: int) -> None:
        now = time.monotonic()
        if self.quiet or (n < self.total and now - self.last < VIDEO_PROGRESS_SECONDS):
            return
        self.last = now
        start = "\r" if self.tty else ""
        end = "" if self.tty and n < self.total else "\n"
        print(f"{start}{PROG} video: {n}/{self.total} frames", end=end, file=sys.stderr,
              flush=True)


def cmd_video(args: argparse.Namespace) -> int:
    from ..integrations.export import VideoWriter, image_leaves
    from ..read.reader import RecordingReader
    from ..replay.run import recorded_render_fps

    frames: Any = None
    with RecordingReader(args.directory) as reader:
        episode = reader[args.episode]
        index = episode.index
        manifest: dict[str, Any] = next((w["manifest"] for w in reader.writers
                         if w["prefix"] == episode.writer), {})
        if args.source != "render":
            leaves = image_leaves(episode.observations)
            if args.key is not None:
                leaves = [(k, v) for k, v in leaves if k == args.key.strip("/")]
                if not leaves:
                    raise CommandError(f"episode {index} has no uint8 H x W x 3 observation "
                                       f"leaf {args.key!r}")
            if leaves:
                key, frames = leaves[0]
                source = f"observations{'/' + key if key else ''}"
            elif args.source == "observations":
                raise CommandError(f"episode {index}: the observations hold no uint8 H x W x 3 "
                                   f"images; use --source render")
    progress = _VideoProgress(episode.length + 1, args.quiet)
    if frames is not None:  # the env's render_fps (the class's), else the default
        video = VideoWriter(args.output, fps=args.fps or recorded_render_fps(manifest),
                            on_frame=progress)
        for frame in frames:
            video.append(frame)  # (a frame it refuses leaves no file)
    else:
        from ..replay.run import replay_frames

        # rgb_array rendering needs no window; pygame-based envs (classic control) otherwise
        # probe the display system and print errors on headless machines, and MuJoCo renders
        # without a display through EGL (Debian: libegl1 libgl1-mesa-dri).
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("MUJOCO_GL", "egl")
        video = VideoWriter(args.output, fps=args.fps, on_frame=progress)
        # Each frame goes to the encoder as it is rendered: memory stays bounded.
        try:
            check = replay_frames(args.directory, index, env_kwargs=args.env_kwargs,
                                  imports=args.imports or (), skip_wrappers=args.skip_wrappers,
                                  on_frame=video.append)
        except BaseException:
            video.abort()  # (no partial video left behind)
            raise
        source = "replay with render_mode='rgb_array'"
        if check.status == "mismatch":
            print(f"{PROG} video: warning: the replay of episode {index} diverges from the "
                  f"recording at step {check.step} ({check.message})", file=sys.stderr)
    written = video.count
    stored = video.close()
    merged = (f" ({stored} stored: identical consecutive frames merged, timing kept)"
              if stored != written else "")
    say(args, f"wrote {args.output}: {count(written, 'frame')} of episode {index} "
               f"from {source}, "
               f"{video.fps:g} fps{merged}")
    return EXIT_OK
