"""Sampling for training: whole episodes, and fixed-length windows for sequence models.

Uniform transitions are :meth:`Transitions.sample`. Everything takes a
``numpy.random.Generator``, so a seeded Generator gives the same draws every time.

Example:
    >>> import numpy as np
    >>> from gym_recorder import RecordingReader
    >>> from gym_recorder.training.sampling import windows
    >>> from gym_recorder.training.transitions import transitions
    >>> with RecordingReader("recordings/cartpole") as reader:          # doctest: +SKIP
    ...     w = windows(transitions(reader), length=8, stride=4)
    >>> batch = w.sample(32, np.random.default_rng(0))                  # doctest: +SKIP
    >>> batch["obs"].shape, batch["mask"].shape                         # doctest: +SKIP
    ((32, 8, 4), (32, 8))
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import EmptySelectionError
from ..read.reader import Episode, RecordingReader
from .selection import episode_indices
from .transitions import Transitions, check_count

__all__ = ["sample_episodes", "Windows", "windows"]


def _check_rng(rng: object) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def sample_episodes(reader: RecordingReader, n: int, rng: np.random.Generator, *,
                    episodes: Sequence[int] | None = None, replace: bool = False) -> list[Episode]:
    """``n`` whole episodes drawn uniformly from ``episodes`` (all by default).

    Only the drawn episodes are read, in the recording's order (each batch is decoded once
    however many of its episodes are drawn); they come back in the order drawn, a repeated
    draw as a copy of its own.

    Raises:
        EmptySelectionError: if there is nothing to draw from, or fewer than ``n`` episodes
            without ``replace``.
    """
    _check_rng(rng)
    check_count(n)
    pool = np.asarray(episode_indices(reader, episodes), dtype=np.int64)
    if (n and len(pool) == 0) or (not replace and n > len(pool)):
        raise EmptySelectionError(f"cannot draw {n} of {len(pool)} episodes"
                                  f"{'' if replace else ' without replacement'}")
    drawn = rng.choice(pool, size=n, replace=replace).tolist()
    read = {i: reader[i] for i in sorted(set(drawn))}  # in order: no batch decoded twice
    out, given = [], set()
    for i in drawn:
        out.append(copy.deepcopy(read[i]) if i in given else read[i])
        given.add(i)
    return out


class Windows:
    """Fixed-length windows of consecutive steps of one episode each.

    Window ``i`` starts at step row ``starts[i]`` of the transitions and covers ``length``
    rows. A window that runs past its episode's end is padded by repeating the episode's last
    step; ``mask`` is False on those rows. With ``complete_only`` there are no such windows.

    Args:
        data: the transitions.
        length: steps per window.
        stride: steps between the starts of consecutive windows of one episode.
        complete_only: keep only windows that lie inside their episode.

    Raises:
        ValueError: if ``length`` or ``stride`` is not a positive int.
        EmptySelectionError: if ``length`` exceeds every episode's length.
    """

    def __init__(self, data: Transitions, length: int, stride: int = 1, *,
                 complete_only: bool = False) -> None:
        for name, v in (("length", length), ("stride", stride)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        lengths = np.diff(data.starts)
        if length > lengths.max(initial=0):
            raise EmptySelectionError(f"a window of {length} steps is longer than every episode "
                                      f"(the longest has {int(lengths.max(initial=0))})")
        self.data, self.length, self.stride = data, int(length), int(stride)
        span = lengths - (self.length - 1) if complete_only else lengths
        count = np.where(span > 0, (span - 1) // self.stride + 1, 0)
        owner = np.repeat(np.arange(len(lengths)), count)
        first = np.zeros(len(count) + 1, dtype=np.int64)
        np.cumsum(count, out=first[1:])
        k = np.arange(int(first[-1]), dtype=np.int64) - first[:-1][owner]
        self.starts = data.starts[:-1][owner] + k * self.stride
        self.ends = data.starts[1:][owner]  # one past each window's episode's last step row

    def __len__(self) -> int:
        return len(self.starts)

    def batch(self, windows: np.ndarray | Sequence[int]) -> dict[str, Any]:
        """Windows ``windows`` stacked: every array gets shape ``(len(windows), length, ...)``;
        ``mask`` (bool) is True on the rows that belong to the episode."""
        w = np.asarray(windows, dtype=np.int64)
        rows = self.starts[w][:, None] + np.arange(self.length, dtype=np.int64)
        mask = rows < self.ends[w][:, None]
        rows = np.minimum(rows, self.ends[w][:, None] - 1)
        out = self.data.rows(rows.ravel())
        out = {k: _reshape(v, rows.shape) for k, v in out.items()}
        out["mask"] = mask
        return out

    def __getitem__(self, i: int) -> dict[str, Any]:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"window {i} out of range: there are {n}")
        return {k: _unbatch(v) for k, v in self.batch([i % n]).items()}

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, Any]:
        """``n`` windows drawn uniformly (with replacement) with ``rng``, as :meth:`batch`."""
        _check_rng(rng)
        check_count(n)
        if n and len(self) == 0:
            raise EmptySelectionError("there are no windows to sample")
        return self.batch(rng.integers(0, len(self), size=n))


def _reshape(tree: Any, shape: tuple[Any, ...]) -> Any:
    if isinstance(tree, dict):
        return {k: _reshape(v, shape) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_reshape(v, shape) for v in tree)
    if isinstance(tree, np.ndarray):
        return tree.reshape(shape + tree.shape[1:])
    return [tree[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


def _unbatch(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _unbatch(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_unbatch(v) for v in tree)
    return tree[0]


def windows(data: Transitions, length: int, stride: int = 1, *,
            complete_only: bool = False) -> Windows:
    """The :class:`Windows` of ``data``: see there."""
    return Windows(data, length, stride, complete_only=complete_only)
