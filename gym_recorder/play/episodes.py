"""The episodes of a play session: one writer each, so that one can leave the recording whole.

Every episode is recorded by a :class:`~gym_recorder.RecordingWrapper` of its own around the
user's env (a writer, a prefix, a manifest, in the format's terms). A finished episode the player
keeps is committed and made durable when it ends (the writer is closed: fsync, manifest
``complete``); an episode restarted, abandoned at quit, or discarded after it ended leaves the
recording by deleting its writer's files: the manifest first (from then on no reader sees the
episode; this is the step that counts), then its batch files and the key map beside it. Nothing
else in the directory is touched, so demonstrations can be added to an existing recording.

Beside each kept episode's manifest, ``P.play.json`` (a file readers ignore, as the format says
of files it does not name) holds how it was played: the key map, the no-op action, the seeds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from ..format import manifest_name
from ..format.fileio import atomic_write, dumps
from ..record.wrapper import RecordingWrapper

__all__ = ["PlayEpisodes", "episode_seeds", "remove_writer", "SIDECAR_SUFFIX", "SEED_BOUND"]

# Seeds drawn for later episodes (and for a session without a seed): below 2**31, so that every
# env's seeding accepts them.
SEED_BOUND = 2**31
SIDECAR_SUFFIX = ".play.json"


def episode_seeds(seed: int) -> Iterator[int]:
    """The seeds of a session's episodes: ``seed`` itself, then seeds drawn from a generator
    seeded with it (reproducible, and a different start for every episode)."""
    yield int(seed)
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.integers(SEED_BOUND))


def _fsync_dir(directory: str) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_writer(directory: str, prefix: str) -> list[str]:
    """Deletes one writer's files: its manifest first, then its batches and its ``.play.json``.

    Returns:
        The names deleted.
    """
    removed = []
    manifest = manifest_name(prefix)
    try:
        os.remove(os.path.join(directory, manifest))
        removed.append(manifest)
    except FileNotFoundError:
        pass
    _fsync_dir(directory)  # (the episode has left the recording for every reader from here on)
    pattern = re.compile(re.escape(prefix) + r"\.ep[0-9]{9,}\.(json|bin)")
    for name in sorted(os.listdir(directory)):
        if pattern.fullmatch(name) or name == prefix + SIDECAR_SUFFIX:
            try:
                os.remove(os.path.join(directory, name))
                removed.append(name)
            except FileNotFoundError:
                pass
    return removed


class PlayEpisodes:
    """Starts, keeps and drops the episodes of one play session.

    Args:
        env: the user's env (never closed here).
        directory: the recording directory.
        notes: JSON-able data written beside each kept episode (the key map).
        recorder_kwargs: more arguments for each episode's RecordingWrapper.

    Attributes:
        kept: prefixes of the kept episodes of this session, in order.
        current: the recorder of the episode being played (None between episodes).
        seed: the seed the current episode was reset with.
    """

    def __init__(self, env: gym.Env[Any, Any], directory: str, notes: dict[str, Any],
                 recorder_kwargs: dict[str, Any] | None = None) -> None:
        self.env = env
        self.directory = os.fspath(directory)
        self.notes = notes
        # An unfinished episode is only wanted once it ends: no commit on time (a batch that
        # fills is still committed, which bounds the memory held).
        self.recorder_kwargs = {"flush_interval": None, **(recorder_kwargs or {})}
        self.kept: list[str] = []
        self.current: RecordingWrapper | None = None
        self.seed: int | None = None

    def start(self, seed: int) -> tuple[Any, dict[str, Any]]:
        """Starts an episode with its own writer: ``reset(seed=seed)``."""
        if self.current is not None:
            self.drop_current()
        recorder = RecordingWrapper(self.env, self.directory, **self.recorder_kwargs)
        self.current = recorder
        self.seed = int(seed)
        return recorder.reset(seed=self.seed)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Steps the current episode (recorded)."""
        assert self.current is not None, "start() first"
        return self.current.step(action)

    def _end(self) -> str:
        recorder = self.current
        assert recorder is not None
        self.current = None
        # The env is the user's: only the recording ends (RecordingWrapper.close would close it).
        recorder._env_closed = True
        recorder.close()
        return recorder.file_prefix

    def keep(self, extra: dict[str, Any]) -> str:
        """Ends the finished current episode and keeps it: committed and durable on return."""
        prefix = self._end()
        with atomic_write(os.path.join(self.directory, prefix + SIDECAR_SUFFIX)) as f:
            f.write(dumps({**self.notes, **extra, "seed": self.seed}))
        self.kept.append(prefix)
        return prefix

    def drop_current(self) -> None:
        """Ends the current episode and deletes it from the recording."""
        if self.current is not None:
            remove_writer(self.directory, self._end())

    def drop_last_kept(self) -> str | None:
        """Deletes the last kept episode of this session (None if there is none)."""
        if not self.kept:
            return None
        prefix = self.kept.pop()
        remove_writer(self.directory, prefix)
        return prefix

    def close(self) -> None:
        """Drops the unfinished current episode; kept episodes stay."""
        self.drop_current()
