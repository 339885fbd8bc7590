"""Choosing episodes of a recording: by index, writer, env id or a predicate, and splits.

Everything here works on :meth:`RecordingReader.summaries` (lengths, returns, ends, seeds: only
the rewards are read), so the arrays of episodes a selection drops are never read.

Example:
    >>> from gym_recorder import RecordingReader
    >>> from gym_recorder.training.selection import select, split
    >>> with RecordingReader("recordings/cartpole") as reader:            # doctest: +SKIP
    ...     long = select(reader, where=lambda s: s.length >= 20 and s.end == "terminated")
    ...     train, val = split(long, (0.9, 0.1), seed=0)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import EmptySelectionError, UnsupportedSpaceError
from ..read.reader import EpisodeSummary, RecordingReader
from ..format.spaces import build_space

__all__ = ["select", "split", "episode_indices", "selection_source", "SelectionSource",
           "writer_positions"]


def episode_indices(reader: RecordingReader, episodes: Iterable[int] | None) -> list[int]:
    """``episodes`` checked and made non-negative (all of the reader's when None), in order.

    Raises:
        TypeError: if an index is not an integer (``1.7``, ``True``).
        IndexError: if an index is out of range.
    """
    n = len(reader)
    if episodes is None:
        return list(range(n))
    indices = []
    for i in episodes:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"episode indices must be ints, got {i!r}")
        if not -n <= i < n:
            raise IndexError(f"episode {int(i)} out of range: the recording has {n} episodes")
        indices.append(int(i) % n)
    return indices


def writer_positions(reader: RecordingReader, indices: Sequence[int] | np.ndarray
                     ) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The reader's writers, and for each of ``indices`` (non-negative) the position of its
    writer in that list and its episode number within that writer."""
    writers = reader.writers
    starts = np.cumsum([0] + [w["episodes"] for w in writers]).astype(np.int64)
    chosen = np.asarray(indices, dtype=np.int64)
    owner = (np.searchsorted(starts, chosen, side="right") - 1).astype(np.int64)
    return writers, owner, chosen - starts[owner]


@dataclass(frozen=True)
class SelectionSource:
    """What recorded a selection of episodes: the spaces, env id and manifest of its writers.

    Attributes:
        observation_space, action_space: the writers' spaces (one pair: they are checked equal).
        env_id: the writers' env id, or None if they differ or none was recorded.
        manifest: the manifest of the first writer of the selection (its ``env_spec``, versions),
            with ``env_spec`` None when the writers' env ids differ.
    """

    observation_space: gym.Space[Any] | None
    action_space: gym.Space[Any] | None
    env_id: str | None
    manifest: dict[str, Any]


def selection_source(reader: RecordingReader, indices: Sequence[int]) -> SelectionSource:
    """The spaces and env of the writers of ``indices`` (exports describe these, not the first
    writer of the directory).

    Raises:
        EmptySelectionError: if ``indices`` is empty.
        UnsupportedSpaceError: if the episodes were recorded with different spaces.
    """
    if not len(indices):
        raise EmptySelectionError(f"no episodes selected in {reader.directory}")
    writers, owner, _ = writer_positions(reader, indices)
    order, at = np.unique(owner, return_index=True)
    seen = {writers[int(k)]["prefix"]: (int(indices[int(a)]), writers[int(k)])
            for a, k in sorted(zip(at, order))}  # in the order they first appear
    (i0, first), *others = seen.values()
    doc = first["manifest"] or {}

    def spaces(d: dict[str, Any]) -> str:
        return json.dumps([d.get("observation_space"), d.get("action_space")], sort_keys=True)

    for i, w in others:
        if spaces(w["manifest"] or {}) != spaces(doc):
            raise UnsupportedSpaceError(
                f"{reader.directory}: episodes {i0} ({first['env_id'] or 'no env id'}, writer "
                f"{first['prefix']}) and {i} ({w['env_id'] or 'no env id'}, writer {w['prefix']}) "
                f"were recorded with different spaces; choose one env's episodes (select(reader, "
                f"env_id=...), or --env ID on the command line)")
    env_ids = {w["env_id"] for _, w in seen.values()}
    env_id = env_ids.pop() if len(env_ids) == 1 else None
    if env_id is None and first["env_id"] is not None:
        doc = {**doc, "env_spec": None}
    where = f"{reader.directory} writer {first['prefix']}"
    return SelectionSource(
        observation_space=build_space(doc.get("observation_space"), f"{where} observation_space")
        if doc.get("observation_space") is not None else None,
        action_space=build_space(doc.get("action_space"), f"{where} action_space")
        if doc.get("action_space") is not None else None,
        env_id=env_id, manifest=doc)


def select(reader: RecordingReader, *, episodes: Iterable[int] | None = None,
           writer: str | Iterable[str] | None = None, env_id: str | Iterable[str] | None = None,
           where: Callable[[EpisodeSummary], bool] | None = None) -> list[int]:
    """Returns the reader indices of the episodes that pass every given filter, in order.

    Args:
        reader: an open reader.
        episodes: only these indices (negative ones count from the end); in the given order.
        writer: only episodes of this writer prefix (or of any of these prefixes).
        env_id: only episodes recorded from this env id (or any of these).
        where: a predicate on the episode's :class:`~gym_recorder.read.reader.EpisodeSummary`
            (``length``, ``total_reward``, ``end``, ``seed``, ``sub_env``, ``writer``, ``env_id``).

    Raises:
        EmptySelectionError: if no episode passes.
        IndexError: if an index in ``episodes`` is out of range.
    """
    n = len(reader)
    indices = episode_indices(reader, episodes)
    writers = {writer} if isinstance(writer, str) else None if writer is None else set(writer)
    env_ids = {env_id} if isinstance(env_id, str) else None if env_id is None else set(env_id)
    if writers is not None or env_ids is not None or where is not None:
        kept = []
        every = list(reader.summaries()) if len(indices) > n // 4 else None  # faster in bulk
        for i in indices:
            s = every[i] if every is not None else reader.summary(i)
            if writers is not None and s.writer not in writers:
                continue
            if env_ids is not None and s.env_id not in env_ids:
                continue
            if where is not None and not where(s):
                continue
            kept.append(i)
        indices = kept
    if not indices:
        what = [f"{k}={v!r}" for k, v in (("episodes", episodes), ("writer", writer),
                                            ("env_id", env_id)) if v is not None]
        if where is not None:
            what.append("where=<predicate>")
        raise EmptySelectionError(f"no episode of the {n} in {reader.directory} matches "
                                  f"{', '.join(what) or 'the selection'}")
    return indices


def split(episodes: Sequence[int] | RecordingReader, fractions: Sequence[float], *,
          seed: int | None = None) -> list[list[int]]:
    """Splits episodes into disjoint parts (train, validation, ...) of the given fractions.

    Episodes are shuffled with ``numpy.random.default_rng(seed)`` (not shuffled when ``seed`` is
    None), then cut into consecutive parts of ``round``-ed sizes; the last part takes what is
    left. No episode is in two parts, so no two parts share a step.

    Args:
        episodes: episode indices (e.g. from :func:`select`), or a reader for all its episodes.
        fractions: positive numbers summing to 1 (within 1e-6).
        seed: the shuffle's seed; the same seed gives the same split.

    Raises:
        ValueError: if the fractions are not positive or do not sum to 1.
        EmptySelectionError: if a part would get no episode.
    """
    if isinstance(episodes, RecordingReader):
        episodes = list(range(len(episodes)))
    fr = [float(f) for f in fractions]
    if not fr or any(not (f > 0) or not math.isfinite(f) for f in fr) or abs(sum(fr) - 1) > 1e-6:
        raise ValueError(f"fractions must be positive and sum to 1, got {list(fractions)!r}")
    order = np.asarray(list(episodes), dtype=np.int64)
    values, counts = np.unique(order, return_counts=True)
    if len(values) < len(order):
        raise ValueError(f"episode {int(values[counts > 1][0])} is given more than once: a split "
                         f"would put it in two parts")
    if seed is not None:
        order = order[np.random.default_rng(seed).permutation(len(order))]
    cuts = np.round(np.cumsum(fr)[:-1] * len(order)).astype(np.int64)
    parts = [p.tolist() for p in np.split(order, cuts)]
    for k, p in enumerate(parts):
        if not p:
            raise EmptySelectionError(f"split part {k} (fraction {fr[k]:g}) of {len(order)} "
                                      f"episodes would be empty")
    return parts
