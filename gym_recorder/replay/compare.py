"""Comparing a replay with its recording, exactly: the one rule of what "the same" means.

:func:`first_difference` compares a recorded value (an observation, a reward, an info) with what
the env returned and names the first place they differ; :class:`EpisodeCheck` is the outcome of
replaying one episode; :func:`tree_row` takes one row out of a recorded (stacked) tree, the
value the env returned at that step. :mod:`gym_recorder.replay.run` and
:mod:`gym_recorder.replay.vector` drive the envs and use these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EpisodeCheck", "first_difference", "same_float", "tree_row"]


@dataclass
class EpisodeCheck:
    """The outcome of replaying one recorded episode.

    Attributes:
        index: the episode's index in the reader.
        writer: the file prefix of the writer that recorded it.
        sub_env: its sub-environment, for vector recordings, else None.
        length: its recorded number of steps.
        status: ``"match"``, ``"mismatch"`` or ``"skipped"``.
        step: for a mismatch, the first step that differs (0: the reset observation; k: what
            ``step`` number k returned), else None.
        message: what differs, or why the episode was skipped; "" for a match.
        frames: with ``render=True``, the env's ``render()`` after the reset and after each
            step (N + 1 frames), else None.
        render_fps: with ``render=True``, the env's ``metadata["render_fps"]`` (or None).
    """

    index: int
    writer: str
    sub_env: int | None
    length: int
    status: str
    step: int | None = None
    message: str = ""
    frames: list[Any] | None = field(default=None, repr=False)
    render_fps: float | None = None



def tree_row(tree: Any, i: int) -> Any:
    """Row ``i`` of a stacked tree (dict of arrays, tuple of arrays, array or list of values)."""
    if isinstance(tree, dict):
        return {k: tree_row(v, i) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_row(v, i) for v in tree)
    if isinstance(tree, np.ndarray):
        return tree[i].copy()
    return tree[i]


def first_difference(recorded: Any, actual: Any, where: str = "") -> str | None:
    """Compares one recorded value with what an env returned, exactly.

    Arrays must have equal shapes and equal elements (NaN equals NaN); dicts the same keys;
    tuples and lists the same length; everything else must compare equal.

    Returns:
        None if equal, else a short description naming where they differ (e.g. ``['position']``).
    """
    from gymnasium.spaces import GraphInstance

    if isinstance(recorded, dict):
        if not isinstance(actual, Mapping) or set(actual) != set(recorded):
            return f"{where or 'value'}: keys differ"
        for k in recorded:
            d = first_difference(recorded[k], actual[k], f"{where}[{k!r}]")
            if d is not None:
                return d
        return None
    if isinstance(recorded, GraphInstance):
        if not isinstance(actual, GraphInstance):
            return f"{where or 'value'}: not a graph"
        for name in ("nodes", "edges", "edge_links"):
            d = first_difference(getattr(recorded, name), getattr(actual, name),
                                 f"{where}.{name}")
            if d is not None:
                return d
        return None
    if isinstance(recorded, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(recorded):
            return f"{where or 'value'}: length differs"
        for i, (r, a) in enumerate(zip(recorded, actual)):
            d = first_difference(r, a, f"{where}[{i}]")
            if d is not None:
                return d
        return None
    if isinstance(recorded, (np.ndarray, np.generic)) or isinstance(actual, (np.ndarray,
                                                                             np.generic)):
        r, a = np.asarray(recorded), np.asarray(actual)
        if r.shape != a.shape:
            return f"{where or 'value'}: shape {a.shape}, recorded {r.shape}"
        nan_ok = r.dtype.kind in "fc" and a.dtype.kind in "fc"
        try:
            same = np.array_equal(r, a, equal_nan=nan_ok)
        except TypeError:
            same = False
        if not same:
            if r.size == 1:
                return (f"{where or 'value'}: {a.reshape(-1)[0].item()!r}, recorded "
                        f"{r.reshape(-1)[0].item()!r}")
            n = int(np.sum(r != a)) if r.dtype.kind == a.dtype.kind else r.size
            return f"{where or 'value'}: {n} of {r.size} elements differ"
        return None
    if isinstance(recorded, float) and isinstance(actual, float) and math.isnan(
            recorded) and math.isnan(actual):
        return None
    if recorded != actual:
        return f"{where or 'value'}: {actual!r}, recorded {recorded!r}"
    return None


def same_float(recorded: float, actual: Any) -> bool:
    """A recorded float and what the env returned are the same number (NaN equals NaN)."""
    a = float(actual)
    return a == recorded or (math.isnan(a) and math.isnan(recorded))
