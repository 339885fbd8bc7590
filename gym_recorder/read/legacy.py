"""OpenAI gym-recording ("legacy") recordings: their episodes, read as gym-recording wrote them.

A legacy batch (``P.epNNNNNNNNN.json`` without "format"/"version", see "Version history" in
:mod:`gym_recorder.format`) holds per episode observations, actions and rewards as nested lists
of values and array references (possibly one array per step, stacked here); arrays lie in any
file of the directory the references name, unaligned. Such episodes carry no terminations,
truncations, infos, seed or end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .batchfile import Batch
from .decode import Decoder
from .episode import Episode
from ..errors import FormatError
from ..format import MAX_NESTING, check_plain_name
from .manifest import Manifest

__all__ = ["legacy_episode"]


def legacy_episode(dec: Decoder, m: Manifest, batch: Batch, b: int, pos: int,
                   index: int) -> Episode:
    """Reads episode ``pos`` of a gym-recording batch (``batch``, batch ``b`` of ``m``)."""
    where = f"{m.batches[b]['fn']} episode {pos}"
    entry = batch.entries[pos]
    bins: dict[str, list[Any]] = {}

    def collect(obj: Any, w: str, depth: int = 0) -> None:
        if depth > MAX_NESTING:
            raise FormatError(f"{w}: nested too deeply")
        if isinstance(obj, dict):
            if obj.get("__type") == "ndarray":
                name = check_plain_name(obj.get("npyfile"), w)
                bins.setdefault(name, []).append((obj, w))
            else:
                for k, v in obj.items():
                    collect(v, f"{w}[{k!r}]", depth + 1)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                collect(v, f"{w}[{i}]", depth + 1)

    for key in ("observations", "actions", "rewards"):
        if key not in entry:
            raise FormatError(f"{where}: missing {key!r}")
        collect(entry[key], f"{where} {key}")
    loaded: dict[int, np.ndarray] = {}
    for name, refs in bins.items():
        for (obj, _), arr in zip(refs, dec.read_arrays(name, refs, aligned=False)):
            loaded[id(obj)] = arr

    def build(obj: Any) -> Any:
        if isinstance(obj, dict):
            if obj.get("__type") == "ndarray":
                return loaded[id(obj)]
            return {k: build(v) for k, v in obj.items()}
        if isinstance(obj, list):
            items = [build(v) for v in obj]
            if items and all(isinstance(x, np.ndarray) for x in items) and all(
                    x.shape == items[0].shape and x.dtype == items[0].dtype for x in items):
                return np.stack(items)
            if items and all(type(x) in (int, float, bool) for x in items):
                arr = np.array(items)
                if arr.dtype.kind not in "biuf":  # ints beyond 64 bits come back as objects
                    raise FormatError(f"{where}: numbers out of range for an array")
                return arr
            return items
        return obj

    obs = build(entry["observations"])
    act = build(entry["actions"])
    rew = build(entry["rewards"])
    n_obs = len(obs) if isinstance(obs, (list, dict)) or (
        isinstance(obs, np.ndarray) and obs.ndim) else 0
    steps = max(n_obs - 1, 0)
    try:
        rewards = np.asarray(rew, dtype=np.float64).reshape(-1) if steps else np.zeros(0)
    except (TypeError, ValueError) as e:
        raise FormatError(f"{where}: rewards are not a list of numbers") from e
    if rewards.shape != (steps,):
        raise FormatError(f"{where}: {rewards.shape[0]} rewards for {n_obs} observations")
    if isinstance(act, np.ndarray) and act.ndim == 2 and act.shape == (1, 0):
        act = act.reshape(0)  # gym-recording wrote np.array([[]]) for "no actions"
    return Episode(index=index, observations=obs, actions=act, rewards=rewards,
                   terminations=np.zeros(steps, bool), truncations=np.zeros(steps, bool),
                   infos=[{} for _ in range(steps + 1)], seed=None, options=None,
                   env_id=None, end=None, sub_env=None, writer=m.prefix)
