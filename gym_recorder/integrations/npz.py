"""A recording as one flat ``.npz`` (:func:`export_npz`): every leaf a named, stacked array.

Observations, actions, rewards and ends of the selected episodes are concatenated, with each
episode's start and length; Dict and Tuple leaves get ``key/...`` names (:func:`flatten_tree`),
and the infos that stack into columns are kept (those left out are named).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ExportError, UnsupportedSpaceError
from ..read.reader import RecordingReader
from .infocolumns import info_columns

__all__ = ["export_npz", "flatten_tree"]


def flatten_tree(tree: Any, prefix: str) -> list[tuple[str, Any]]:
    """``(name, leaf)`` for each leaf of a stacked tree: ``prefix`` for a single leaf, else
    ``prefix/key/...`` for Dict keys and ``prefix/0/...`` for Tuple positions.

    Raises:
        UnsupportedSpaceError: if two leaves get one name (a Dict key holding "/" beside a
            nested Dict: ``{"a/b": ..., "a": {"b": ...}}``); one would overwrite the other.
    """
    out = list(_flatten(tree, prefix))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        name = next(n for n in names if names.count(n) > 1)
        raise UnsupportedSpaceError(f"{name}: two leaves of the space have this name (a Dict "
                                    f"key holding '/' beside a nested key); rename the key")
    return out


def _flatten(tree: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _flatten(v, f"{prefix}/{k}")
    elif isinstance(tree, tuple):
        for i, v in enumerate(tree):
            yield from _flatten(v, f"{prefix}/{i}")
    else:
        yield prefix, tree


def _as_array(name: str, leaf: Any) -> np.ndarray:
    if isinstance(leaf, np.ndarray):
        return leaf
    if all(isinstance(x, str) for x in leaf):  # Text leaves
        return np.array(leaf, dtype=str) if leaf else np.zeros(0, dtype="<U1")
    raise ExportError(f"{name}: its rows have no one shape and dtype (values recorded outside "
                      f"the space, which the recorder warned about, or a Sequence, Graph or "
                      f"OneOf space) and cannot be exported to npz")


def export_npz(directory: str | os.PathLike[str], path: str | os.PathLike[str], *,
               compress: bool = False, env_id: str | None = None) -> dict[str, Any]:
    """Writes every episode of a recording, concatenated, into one ``.npz`` file.

    With E episodes of N_0, ..., N_{E-1} steps and S = sum(N_i) steps in all, the file holds:

    - ``observations`` (or ``observations/<key>/...`` per leaf of a Dict or Tuple space, e.g.
      ``observations/position``, ``observations/nested/pair/0``): S + E rows, each episode's
      N_i + 1 observations (its reset observation first) one after another.
    - ``actions`` (or ``actions/<key>/...``): S rows.
    - ``rewards`` (float64), ``terminations`` and ``truncations`` (bool): S rows.
    - ``episode_starts`` (int64, E): the first step row of each episode; episode i's actions,
      rewards and flags are rows ``episode_starts[i] : episode_starts[i] + episode_lengths[i]``.
    - ``episode_lengths`` (int64, E): N_i.
    - ``observation_starts`` (int64, E): ``episode_starts + arange(E)``, the first observation
      row of each episode; episode i's observations are rows
      ``observation_starts[i] : observation_starts[i] + episode_lengths[i] + 1``, and the
      observation before step row ``s`` of episode i is row ``s + i``.
    - ``episode_seeds`` (int64, E): the reset seed, -1 when none was passed.
    - ``episode_sub_envs`` (int64, E): the sub-environment of vector recordings, -1 otherwise.
    - ``agents`` (str, K): for a multi-agent (PettingZoo) recording, its agents in the order of
      the per-agent columns (``observations/rewards`` and the like: one column an agent); its
      leaves are those of the joint rows (see "Multi-agent recordings" in the format spec).

    - ``infos/<key>`` (or ``infos/<key>/<sub>`` for nested dicts): S rows, the numeric info
      each step returned (see :mod:`gym_recorder.integrations.infocolumns`), in the dtype
      its values had; ``infos_present/<key>`` (bool, S) where some steps lack the key (the
      values are 0 there). Other infos are left out, named in ``"infos_left_out"``.

    Leaves keep their recorded dtype and shape; Text leaves become unicode arrays. Everything
    is assembled in memory before writing.

    Args:
        directory: the recording directory.
        path: the output file (``.npz`` is appended by numpy if missing).
        compress: use ``np.savez_compressed``.
        env_id: export only the episodes of this env; required when the directory holds
            several envs.

    Returns:
        ``{"path": ..., "episodes": E, "steps": S, "arrays": {name: [shape, dtype str]},
        "infos_left_out": {info key: why}}``.

    Raises:
        ExportError: if the recording is empty, its episodes have different structures, or a
            leaf cannot be stored as one array.
    """
    obs_parts: dict[str, list[Any]] = {}
    act_parts: dict[str, list[Any]] = {}
    rewards, terms, truncs, seeds, subs = [], [], [], [], []
    lengths: list[int] = []
    agents: tuple[str, ...] | None = None
    step_infos: list[list[dict[str, Any]]] = []
    with RecordingReader(directory) as reader:
        ids = list(dict.fromkeys(w["env_id"] for w in reader.writers))
        if env_id is None and len(ids) > 1:
            raise ExportError(f"{os.fspath(directory)} holds episodes of {len(ids)} envs "
                              f"({', '.join(map(str, ids))}); choose one with --env ID "
                              "(env_id=...)")
        if env_id is not None and env_id not in ids:
            raise ExportError(f"{os.fspath(directory)} holds no episodes of env {env_id!r} "
                              f"(it holds {', '.join(map(str, ids))})")
        for ep in reader:
            if env_id is not None and ep.env_id != env_id:
                continue
            ma = ep.multiagent
            if lengths and agents != (None if ma is None else ma.agents):
                raise ExportError(f"episode {ep.index}: its agents ({ma and list(ma.agents)}) "
                                  f"differ from earlier episodes' ({agents and list(agents)})")
            agents = None if ma is None else ma.agents
            for parts, tree, prefix in ((obs_parts, ep.observations, "observations"),
                                        (act_parts, ep.actions, "actions")):
                leaves = dict(flatten_tree(tree, prefix))
                if parts and set(parts) != set(leaves):
                    raise ExportError(f"episode {ep.index}: its {prefix} have leaves "
                                      f"{sorted(leaves)}, earlier episodes {sorted(parts)}")
                for name, leaf in leaves.items():
                    parts.setdefault(name, []).append(_as_array(name, leaf))
            step_infos.append(ep.infos[1:] if ep.length else [])
            rewards.append(ep.rewards)
            terms.append(ep.terminations)
            truncs.append(ep.truncations)
            lengths.append(ep.length)
            seeds.append(-1 if ep.seed is None else ep.seed)
            subs.append(-1 if ep.sub_env is None else ep.sub_env)
    if not lengths:
        raise ExportError(f"{os.fspath(directory)}: the recording holds no episodes")
    arrays: dict[str, np.ndarray] = {}
    for parts in (obs_parts, act_parts):
        for name, items in parts.items():
            try:
                arrays[name] = np.concatenate(items)
            except ValueError as e:
                raise ExportError(f"{name}: episodes do not concatenate ({e})") from e
    arrays["rewards"] = np.concatenate(rewards).astype(np.float64, copy=False)
    arrays["terminations"] = np.concatenate(terms).astype(bool, copy=False)
    arrays["truncations"] = np.concatenate(truncs).astype(bool, copy=False)
    length_arr = np.array(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(length_arr)[:-1]]).astype(np.int64)
    arrays["episode_starts"] = starts
    arrays["episode_lengths"] = length_arr
    arrays["observation_starts"] = starts + np.arange(len(lengths), dtype=np.int64)
    arrays["episode_seeds"] = np.array(seeds, dtype=np.int64)
    arrays["episode_sub_envs"] = np.array(subs, dtype=np.int64)
    infos = info_columns(step_infos)
    for key, column in infos.values.items():
        if f"infos/{key}" in arrays:  # (two paths joined alike: "a/b" and {"a": {"b"}})
            infos.left_out[key] = "another info has the same name"
            continue
        arrays[f"infos/{key}"] = column
        if key in infos.present:
            arrays[f"infos_present/{key}"] = infos.present[key]
    if agents is not None:  # a multi-agent recording: the order of its per-agent columns
        arrays["agents"] = np.array(agents, dtype=str)
    save: Any = np.savez_compressed if compress else np.savez
    path = os.fspath(path)
    with open(path, "wb") as f:
        save(f, **arrays)
    return {"path": path, "episodes": len(lengths), "steps": int(length_arr.sum()),
            "arrays": {k: [list(v.shape), v.dtype.str] for k, v in arrays.items()},
            "infos_left_out": infos.left_out}
