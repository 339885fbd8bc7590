"""The episodes of a play session: one writer for the session, discards through the edit record.

The session is recorded by one :class:`~gym_recorder.RecordingWrapper` around the user's env (one
writer, one prefix, one manifest, in the format's terms), with no commit on time: an episode
being played is committed when it ends. Each episode's stable id is the writer's prefix and its
number within the writer (the resets so far, counted from 0), so it holds whatever other
episodes are discarded.

- An episode that ends (terminated or truncated) and is kept is committed and made durable
  (``flush()``: written, listed in the manifest, fsynced) before the next one starts: a crash
  or a kill later keeps it.
- An episode discarded (restarted, unfinished at quit, or kept and then discarded) is deleted
  with one commit of the recording's edit record (:func:`gym_recorder.edit.delete_ids`), by its
  stable id. The episode being played is hidden *before* it ends: its number may name steps not
  yet committed (readers hide them once they are), so at no moment can a kill leave it shown.
  A deleted episode stays hidden whatever happens later (``repair`` included) until someone
  restores it (``gym-recorder edit DIR restore``).

How the session was played (``produced_by`` "human", the key map, the no-op, the frames per
second, the session's seed) is the recording's metadata (the manifest's ``metadata``, which ``info``
shows); each episode's seed is recorded with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from ..edit.episodes import delete_ids
from ..errors import EditConflictError
from ..record.wrapper import RecordingWrapper

__all__ = ["PlayEpisodes", "episode_seeds", "SEED_BOUND"]

# Seeds drawn for later episodes (and for a session without a seed): below 2**31, so that every
# env's seeding accepts them.
SEED_BOUND = 2**31
# Tries of an edit commit that another editor of the directory keeps beating.
_EDIT_TRIES = 5


def episode_seeds(seed: int) -> Iterator[int]:
    """The seeds of a session's episodes: ``seed`` itself, then seeds drawn from a generator
    seeded with it (reproducible, and a different start for every episode)."""
    yield int(seed)
    rng = np.random.default_rng(seed)
    while True:
        yield int(rng.integers(SEED_BOUND))


class PlayEpisodes:
    """Starts, keeps and discards the episodes of one play session (one writer).

    Args:
        env: the user's env (never closed here).
        directory: the recording directory.
        metadata: the recording's metadata (how the session is played); a ``metadata`` among
            ``recorder_kwargs`` is added to it.
        recorder_kwargs: more arguments for the RecordingWrapper.

    Attributes:
        recorder: the session's RecordingWrapper.
        prefix: its writer's prefix.
        kept: the numbers (within the writer) of the kept episodes of this session, in order.
        current: the number of the episode being played (None between episodes).
        seed: the seed the current episode was reset with.
    """

    def __init__(self, env: gym.Env[Any, Any], directory: str, metadata: dict[str, Any],
                 recorder_kwargs: dict[str, Any] | None = None) -> None:
        self.directory = os.fspath(directory)
        # An unfinished episode is only wanted once it ends: no commit on time (a batch that
        # fills is still committed, which bounds the memory held).
        kwargs = {"flush_interval": None, **(recorder_kwargs or {})}
        kwargs["metadata"] = {**metadata, **(kwargs.get("metadata") or {})}
        self.recorder = RecordingWrapper(env, self.directory, **kwargs)
        self.prefix = self.recorder.file_prefix
        self.kept: list[int] = []
        self.current: int | None = None
        self.seed: int | None = None
        self._started = 0  # resets so far: the next episode's number

    def start(self, seed: int) -> tuple[Any, dict[str, Any]]:
        """Starts an episode: ``reset(seed=seed)``; an unfinished one is discarded first."""
        self.drop_current()
        result = self.recorder.reset(seed=int(seed))
        self.current, self.seed = self._started, int(seed)
        self._started += 1
        return result

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Steps the current episode (recorded)."""
        assert self.current is not None, "start() first"
        return self.recorder.step(action)

    def keep(self) -> int:
        """Keeps the current episode, which has just ended (terminated or truncated): committed
        and durable on return. Returns its number within the writer."""
        assert self.current is not None, "start() first"
        self.recorder.flush()
        number, self.current = self.current, None
        self.kept.append(number)
        return number

    def _delete(self, number: int, what: str) -> None:
        for attempt in range(_EDIT_TRIES):
            try:
                delete_ids(self.directory, [(self.prefix, number)],
                           f"play: discard {what} {self.prefix} {number}")
                return
            except EditConflictError:
                if attempt == _EDIT_TRIES - 1:
                    raise

    def drop_current(self) -> None:
        """Discards the episode being played (if any): hidden first, so that no moment shows
        it; its end is recorded by whatever ends it next (a reset, or close)."""
        if self.current is not None:
            self._delete(self.current, "unfinished episode")
            self.current = None

    def drop_last_kept(self) -> int | None:
        """Discards the last kept episode of this session; its number (None if none is left)."""
        if not self.kept:
            return None
        number = self.kept[-1]
        self._delete(number, "kept episode")
        self.kept.pop()
        return number

    def close(self) -> None:
        """Discards the unfinished episode, then closes the writer (the env stays open)."""
        try:
            self.drop_current()
        finally:
            # The env is the user's: only the recording ends (close() would close the env too).
            self.recorder._env_closed = True
            self.recorder.close()
