"""A Minari dataset read into a new recording (:func:`import_minari`), bit-exact.

The arrays Minari gives back are replayed through a :class:`~gym_recorder.RecordingWrapper` on a
playback env, so the recording holds exactly them, with the seeds, options and infos; Minari
checks nothing on read, so every episode's lengths are checked here first.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym

from ..errors import (DatasetError, DatasetNotFoundError, OutputExistsError, RecorderError,
                      UnsupportedSpaceError, require_extra)
from ..format.fileio import building
from .minari_fit import check_space, metadata_from_minari

__all__ = ["import_minari"]


class _Playback(gym.Env):
    """An env that gives back one recorded episode after another (for :func:`import_minari`)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], spec: Any) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        self.spec = spec
        self.episode: dict[str, Any] = {}
        self.k = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, ...]:
        self.k = 0
        e = self.episode
        return _row(e["observations"], 0), e["infos"][0]

    def step(self, action: Any) -> tuple[Any, ...]:
        e, k = self.episode, self.k
        self.k = k + 1
        return (_row(e["observations"], k + 1), e["rewards"][k], bool(e["terminations"][k]),
                bool(e["truncations"][k]), e["infos"][k + 1])


def _row(tree: Any, k: int) -> Any:
    if isinstance(tree, dict):
        return {key: _row(v, k) for key, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_row(v, k) for v in tree)
    return tree[k]


def _info_rows(infos: Any, n: int, where: str) -> list[dict[str, Any]]:
    """Minari's infos (a dict of stacked arrays, N + 1 rows) as N + 1 dicts."""
    if not infos:
        return [{} for _ in range(n + 1)]

    def rows_of(tree: Any, path: str) -> int:
        if isinstance(tree, dict):
            counts = {rows_of(v, f"{path}/{k}") for k, v in tree.items()}
            if len(counts) > 1:
                raise UnsupportedSpaceError(f"{where}: infos {path or '/'} have leaves of "
                                            f"different lengths {sorted(counts)}")
            return counts.pop() if counts else n + 1
        return len(tree)

    rows = rows_of(infos, "")
    if rows not in (n, n + 1):
        raise UnsupportedSpaceError(f"{where}: infos have {rows} rows for {n} steps")
    shift = n + 1 - rows  # N rows: the reset's info was not stored
    return [{} if k < shift else _row(infos, k - shift) for k in range(n + 1)]


def _open_dataset(minari: Any, dataset: str | os.PathLike[str]) -> Any:
    path = os.fspath(dataset)
    try:
        if os.path.isdir(os.path.join(path, "data")):
            return minari.MinariDataset(os.path.join(path, "data"))
        if os.path.isdir(path) and os.path.basename(os.path.normpath(path)) == "data":
            return minari.MinariDataset(path)
        if os.path.isabs(path) or os.path.exists(path) or path.startswith("."):
            raise DatasetNotFoundError(f"{path}: not a Minari dataset folder (none holds data/)")
        return minari.load_dataset(path)  # an id in the local root (MINARI_DATASETS_PATH honoured)
    except RecorderError:
        raise
    except FileNotFoundError:
        from minari.storage.datasets_root_dir import get_dataset_path
        raise DatasetNotFoundError(
            f"Minari dataset {path} not found: not a folder holding data/, nor an id in the "
            f"local root {get_dataset_path()} (MINARI_DATASETS_PATH); download remote datasets "
            f"with `minari download {path}` first") from None
    except Exception as e:  # h5py, json and Minari's own checks on files we did not write
        raise _unreadable(path, e) from e


def _unreadable(dataset: Any, e: BaseException) -> DatasetError:
    what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return DatasetError(f"Minari dataset {os.fspath(dataset)} cannot be read ({what.splitlines()[0]})")


def _check_lengths(ep: Any, where: str) -> int:
    """The episode's step count N, once actions, rewards, ends (N) and observations (N + 1)
    agree (Minari checks none of it on read)."""
    def rows(tree: Any) -> set[int]:
        if isinstance(tree, dict):
            return set().union(*(rows(v) for v in tree.values())) if tree else set()
        if isinstance(tree, tuple):
            return set().union(*(rows(v) for v in tree)) if tree else set()
        return {len(tree)}

    n = len(ep.rewards)
    found = {"actions": rows(ep.actions), "terminations": {len(ep.terminations)},
             "truncations": {len(ep.truncations)}}
    for name, got in found.items():
        if got and got != {n}:
            raise DatasetError(f"{where}: {name} have {sorted(got)} rows for {n} rewards")
    obs = rows(ep.observations)
    if obs and obs != {n + 1}:
        raise DatasetError(f"{where}: observations have {sorted(obs)} rows for {n} steps "
                           f"(a Minari episode has one more observation than steps)")
    return n


def import_minari(dataset: str | os.PathLike[str], directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads every episode of a Minari dataset into a new recording ``directory``.

    Args:
        dataset: a dataset id in Minari's local root, or the path of a dataset's folder.
        directory: the recording to create; it must not exist.

    Returns:
        ``{"path", "dataset_id", "episodes", "steps"}``.

    Raises:
        OutputExistsError: if ``directory`` exists.
        UnsupportedSpaceError: if the dataset's spaces or infos cannot be represented.
        DatasetNotFoundError: if there is no such dataset (a FileNotFoundError).
        DatasetError: if the dataset's files are damaged or inconsistent (its metadata, HDF5,
            episodes whose arrays disagree on the number of steps); nothing is written.
    """
    minari = require_extra("minari", "minari")
    from ..record.wrapper import RecordingWrapper

    out = os.path.abspath(os.fspath(directory))
    if os.path.lexists(out):
        raise OutputExistsError(f"{out} exists; choose a new recording directory")
    ds = _open_dataset(minari, dataset)
    try:
        obs_space, act_space, spec, name = ds.observation_space, ds.action_space, ds.env_spec, ds.id
    except Exception as e:
        raise _unreadable(dataset, e) from e
    check_space(obs_space, f"Minari dataset {name} observation space")
    check_space(act_space, f"Minari dataset {name} action space")
    play = _Playback(obs_space, act_space, spec)
    steps = count = 0
    with building(out, "importing") as tmp:
        env = RecordingWrapper(play, tmp, metadata=metadata_from_minari(ds, name))
        try:
            try:
                ids = ds.episode_indices
                metas = list(ds.storage.get_episode_metadata(ids))
                episodes = ds.iterate_episodes()
            except Exception as e:
                raise _unreadable(dataset, e) from e
            if len(metas) != len(ids):
                raise DatasetError(f"Minari dataset {name}: {len(metas)} episode metadata for "
                                   f"{len(ids)} episodes")
            for meta in metas:
                try:
                    ep = next(episodes)
                    where = f"Minari dataset {name} episode {ep.id}"
                    n = _check_lengths(ep, where)
                    seed = meta.get("seed")
                    seed = None if seed is None else int(seed)
                    options = meta.get("options")
                except RecorderError:
                    raise
                except Exception as e:  # h5py, numpy, Minari on a damaged file
                    raise _unreadable(dataset, e) from e
                play.episode = {"observations": ep.observations, "rewards": ep.rewards,
                                "terminations": ep.terminations, "truncations": ep.truncations,
                                "infos": _info_rows(ep.infos, n, where)}
                env.reset(seed=seed, options=options)
                for k in range(n):
                    env.step(_row(ep.actions, k))
                steps += n
                count += 1
        finally:
            env.close()
    return {"path": out, "dataset_id": name, "episodes": count, "steps": steps}
