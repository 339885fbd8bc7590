"""Minari datasets in and out (needs ``gymnasium-recorder[minari]``: minari[hdf5] and pillow).

:func:`export_minari` turns a recording into a Minari dataset with Minari's own
``create_dataset_from_buffers`` (raw arrays: ``jpeg_encoding=False`` where the installed Minari
has that option, so images stay lossless), keeping spaces, the env spec, reset seeds and options,
and the infos Minari can hold (the result names the keys left out, and why). The dataset goes
into Minari's root (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``): it is written under a
temporary root inside it and moved into place at the end.

:func:`import_minari` reads every episode of a Minari dataset (an id in the local root, or the
path of a dataset's folder, the one holding ``data/``) into a new recording, bit-exact: the
arrays Minari gives back are replayed through a :class:`~gym_recorder.RecordingWrapper`, so the
recording holds exactly them, with the seeds, options and infos.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np

from ..format.agents import parse_multiagent, refuse_multiagent
from ..errors import (DatasetError, DatasetNotFoundError, EmptySelectionError, OutputExistsError,
                     ExportError, RecorderError, SpaceKeptAsWarning, SpecError,
                     UnsupportedSpaceError, require_extra)
from ..format.envspec import (MAKE_VEC_ARGUMENTS, EnvRebuilder, active_vector_wrappers,
                              fill_env_only_wrappers, import_modules)
from ..format.fileio import remove_stale_temps, temp_sibling
from ..read.reader import RecordingReader
from ..training.selection import SelectionSource, episode_indices, selection_source
from ..format.spaces import describe_space, unknown_space
from ..format.values import manifest_metadata

__all__ = ["export_minari", "import_minari", "import_env_module"]


def import_env_module(env_id: str | None) -> None:
    """Imports what registers ``env_id``: ``sample_envs`` for ``sample_envs/...`` ids, ``module``
    for ``module:EnvId`` ids (as ``gymnasium.make`` would), so that Minari can make the env."""
    if not env_id:
        return
    if env_id.startswith("sample_envs/"):
        importlib.import_module("sample_envs")
    elif ":" in env_id:
        importlib.import_module(env_id.split(":", 1)[0])


def _check_space(space: Any, where: str, desc: Any = None) -> None:
    def walk(desc: Any) -> None:
        if isinstance(desc, dict):
            if desc.get("type") == "unknown":
                raise UnsupportedSpaceError(f"{where}: the space {space} cannot be represented "
                                            f"(gym_recorder does not know {desc.get('class')})")
            for v in desc.values():
                walk(v)
        elif isinstance(desc, list):
            for v in desc:
                walk(v)
    if space is None:
        unknown = unknown_space(desc)
        if unknown is not None:  # (minigrid's MissionSpace in its Dict observation)
            path, cls = unknown
            raise UnsupportedSpaceError(f"{where}{path} is a {cls}, a space gym_recorder does "
                                        f"not know (its values are recorded and read back, but "
                                        f"the space is not rebuilt): Minari cannot store it")
        raise UnsupportedSpaceError(f"{where}: no space recorded")
    walk(describe_space(space))


# The spaces Minari's serialization knows (minari.serialization.serialize_space).
MINARI_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                 gym.spaces.MultiBinary, gym.spaces.Dict, gym.spaces.Tuple, gym.spaces.Text)


def _check_minari_space(space: gym.Space[Any] | None, where: str) -> None:
    if space is None:
        raise UnsupportedSpaceError(f"{where}: the recording describes no space")
    if not isinstance(space, MINARI_SPACES):
        raise UnsupportedSpaceError(f"{where}: Minari cannot store a {type(space).__name__} "
                                    f"space ({space})")
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) \
            else enumerate(space.spaces)
        for k, sub in items:
            if isinstance(space, gym.spaces.Dict) and (not isinstance(k, str) or "/" in k):
                # Minari's HDF5 groups are paths: "a/b" would be read back as {"a": {"b": ...}}
                raise UnsupportedSpaceError(f"{where}: Minari cannot store the Dict key {k!r} "
                                            f"(keys must be strings without '/')")
            _check_minari_space(sub, f"{where}[{k!r}]")


def _stack_info(values: list[Any], key: str) -> tuple[Any, str | None]:
    """(stacked value, None) or (None, why it cannot be stored)."""
    if all(isinstance(v, dict) for v in values):
        keys = list(values[0])
        if any(list(v) != keys for v in values):
            return None, "its dicts have different keys in different steps"
        out, why_all = {}, []
        for k in keys:
            s, why = _stack_info([v[k] for v in values], f"{key}/{k}")
            if why:
                why_all.append(f"{k}: {why}")
            else:
                out[k] = s
        return (out, None) if not why_all else (None, "; ".join(why_all))
    ok = (bool, int, float, np.bool_, np.number, np.ndarray)
    if not all(isinstance(v, ok) for v in values):
        kinds = sorted({type(v).__name__ for v in values if not isinstance(v, ok)})
        return None, f"Minari keeps only numbers and arrays in infos, not {', '.join(kinds)}"
    arrays = [np.asarray(v) for v in values]
    if len({(a.dtype, a.shape) for a in arrays}) != 1:
        return None, "its values change dtype or shape between steps"
    if arrays[0].dtype.kind not in "biuf":
        return None, f"dtype {arrays[0].dtype} is not stored by Minari's HDF5 infos"
    return np.stack(arrays), None


def _infos_for_minari(infos: list[dict[str, Any]], dropped: dict[str, str]) -> dict[str, Any]:
    keys: list[Any] = []
    for row in infos:
        keys.extend(k for k in row if k not in keys)
    out = {}
    for k in keys:
        if not isinstance(k, str) or "/" in k:
            dropped.setdefault(str(k), "Minari needs string keys without '/'")
            continue
        if any(k not in row for row in infos):
            dropped.setdefault(k, "it is not in every step's info (Minari stacks infos)")
            continue
        value, why = _stack_info([row[k] for row in infos], k)
        if why:
            dropped.setdefault(k, why)
        else:
            out[k] = value
    return out


def _env_for(source: SelectionSource) -> tuple[Any, str | None]:
    """The env of the selection's writer for Minari (which makes it with ``gymnasium.make``), and
    None; or None and why not (None too when the env id is not registered here): the dataset
    then gets the spaces only."""
    env_id = source.env_id
    if not env_id:
        return None, None
    import_env_module(env_id)
    raw = source.manifest.get("env_spec")
    recorded: dict[str, Any] = raw if isinstance(raw, dict) else {}
    vector = source.manifest.get("vector") is not None
    rebuild = EnvRebuilder(recorded, vector=vector)
    try:  # (ale_py, minigrid, highway_env, ... register their ids when imported: as replay does,
        # the recorded entry point's module and imports are imported)
        rebuild.ensure_registered(env_id)
        spec = gym.spec(env_id)
    except (SpecError, gym.error.Error) as e:
        return None, f"{str(e).splitlines()[0]}; the dataset has the spaces only"
    kwargs = dict(rebuild.kwargs)
    if vector:  # the spec of a make_vec env holds make_vec's arguments: the sub-env has the rest
        mode = kwargs.pop("vectorization_mode", None)
        wrapped = "wrappers" in kwargs
        for key in MAKE_VEC_ARGUMENTS:
            kwargs.pop(key, None)
        if mode == "vector_entry_point":
            kwargs.pop("max_episode_steps", None)  # (make_vec passes it to the vector env)
        if wrapped:
            return None, ("the sub-envs were wrapped by make_vec(wrappers=...), which a spec "
                          "cannot hold; the dataset has the spaces only")
        active = active_vector_wrappers(recorded)
        if active:
            return None, (f"recorded through the vector wrapper(s) {', '.join(active)}, which "
                          "a sub-env's spec cannot hold; the dataset has the spaces only")
    spec = replace(spec, kwargs={**spec.kwargs, **kwargs})
    steps = recorded.get("max_episode_steps", spec.max_episode_steps)
    if steps is None or (type(steps) is int and steps > 0):  # the recorded time limit
        spec = replace(spec, max_episode_steps=steps)
    made = None
    try:  # the recorded wrappers too: the env's spec then lists them (additional_wrappers)
        made = gym.make(spec)
        env = rebuild.wrap(made)
    except Exception as e:  # noqa: BLE001  (an env's own error: export without the env)
        if made is not None:
            made.close()
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        return None, (f"gymnasium.make({env_id!r}) with the recorded kwargs and wrappers failed "
                      f"({why}); the dataset has the spaces only")
    if not _same_spaces(env, source):
        env.close()  # (a wrapper that was not recorded changed them: another env than recorded)
        why = f" ({rebuild.problem})" if rebuild.problem else ""
        return None, (f"the env made again from the recorded spec has other spaces than the "
                      f"recording{why}; the dataset has the spaces only")
    if rebuild.problem:  # (same spaces, but a wrapper or kwarg is missing: another env)
        env.close()
        return None, (f"the recorded spec cannot make the recorded env again "
                      f"({rebuild.problem}); the dataset has the spaces only")
    why = _json_spec_problem(env, source)
    if why:
        env.close()
        return None, (f"Minari keeps the env spec as gymnasium's EnvSpec.to_json(), which "
                      f"cannot hold it ({why}); the dataset has the spaces only")
    return env, None


def _same_spaces(env: Any, source: SelectionSource) -> bool:
    """True if the env's spaces are the recording's, as the format describes them (a space
    recorded as a kind it is not, minigrid's MissionSpace as Text, is the same)."""
    if (env.observation_space, env.action_space) == (source.observation_space,
                                                     source.action_space):
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpaceKeptAsWarning)
        return (describe_space(env.observation_space) == source.manifest.get("observation_space")
                and describe_space(env.action_space) == source.manifest.get("action_space"))


def _json_spec_problem(env: Any, source: SelectionSource) -> str:
    """Why the env's spec does not survive Minari's JSON (``EnvSpec.to_json()`` and
    ``from_json()``, then ``gymnasium.make``, with the recording's spaces), or "" if it does.

    The kwargs JSON changes (numpy values, dtypes: not JSON at all; tuples: lists) are named
    by wrapper."""
    from gymnasium.envs.registration import EnvSpec

    spec = fill_env_only_wrappers(env.spec)
    try:
        again = gym.make(EnvSpec.from_json(spec.to_json()))
    except Exception as e:  # noqa: BLE001  (not JSON, or the wrapper refuses what JSON gave)
        failure = f"{type(e).__name__}: {e}".splitlines()[0]
    else:
        same = _same_spaces(again, source)
        again.close()
        if same:
            return ""
        failure = "the env made from it has other spaces than the recording"
    changed = [w.name for w in spec.additional_wrappers if not _survives_json(w.kwargs)]
    if not _survives_json(spec.kwargs):
        changed.insert(0, "the env's kwargs")
    named = f"; arguments JSON changes: {', '.join(changed)}" if changed else ""
    return f"{failure}{named}"


def _survives_json(value: Any) -> bool:
    """True if ``value`` comes back from JSON as it was (no tuples, numpy values, objects)."""
    import json

    try:
        back = json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return False
    return _same_json(back, value)


def _same_json(back: Any, value: Any) -> bool:
    if type(back) is not type(value):  # (np.float64, a float subclass, comes back a float)
        return False
    if isinstance(value, dict):
        return back.keys() == value.keys() and all(_same_json(back[k], v)
                                                   for k, v in value.items())
    if isinstance(value, list):
        return len(back) == len(value) and all(_same_json(b, v) for b, v in zip(back, value))
    return bool(back == value)


# Metadata keys (RecordingWrapper(metadata=...), record --meta) that Minari's datasets have.
MINARI_METADATA_KEYS = ("algorithm_name", "author", "author_email", "code_permalink",
                        "description")


def _minari_metadata(manifest: Any, has_description: bool) -> dict[str, Any]:
    """The recording's metadata that Minari keeps, as create_dataset_from_buffers' arguments
    (strings only: a recording's metadata is untrusted; ``description`` given to the export
    wins)."""
    metadata = manifest_metadata(manifest) or {}
    out = {key: metadata[key] for key in MINARI_METADATA_KEYS
           if isinstance(metadata.get(key), str) and metadata[key]}
    if has_description:
        out.pop("description", None)
    return out


def _metadata_from_minari(ds: Any, name: str) -> dict[str, Any]:
    """The recording's metadata for an imported dataset: its id and the keys of
    :data:`MINARI_METADATA_KEYS` it has (a set of authors as a list; what is not plain JSON
    is left out)."""
    try:
        stored = dict(ds.storage.metadata)
    except Exception:  # noqa: BLE001  (metadata is a courtesy: the episodes are what counts)
        stored = {}
    out: dict[str, Any] = {"minari_dataset_id": str(name)}
    for key in MINARI_METADATA_KEYS:
        value = stored.get(key)
        if isinstance(value, (set, frozenset, tuple, list)):
            value = sorted(str(v) for v in value)
        if isinstance(value, str) and value or isinstance(value, list) and value:
            out[key] = value
    return out


def _parse_id(parse_dataset_id: Any, dataset_id: Any) -> str | None:
    """The namespace of ``NAMESPACE/NAME-vN`` (ValueError, one line, for anything else)."""
    try:
        if not isinstance(dataset_id, str):
            raise TypeError
        namespace, name, version = parse_dataset_id(dataset_id)
        if not name or version is None:
            raise ValueError
    except (ValueError, TypeError):
        raise ValueError(f"{dataset_id!r} is not a Minari dataset id: use NAMESPACE/NAME-vN or "
                         f"NAME-vN (e.g. cartpole/expert-v0)") from None
    return namespace  # type: ignore[no-any-return]


def export_minari(directory: str | os.PathLike[str], dataset_id: str, *,
                  episodes: Iterable[int] | None = None, description: str | None = None,
                  imports: Iterable[str] = ()) -> dict[str, Any]:
    """Writes a recording as the Minari dataset ``dataset_id`` in Minari's local root.

    Args:
        directory: the recording.
        dataset_id: ``NAMESPACE/NAME-vN`` (or ``NAME-vN``); it must not exist yet.
        episodes: reader indices to export (all by default).
        description: the dataset's description.
        imports: modules to import first (packages that register the env or define its
            wrappers; the recorded entry point's module and imports are tried by themselves).

    Returns:
        ``{"dataset_id", "path", "episodes", "steps", "dropped": {info key: why},
        "env_spec_dropped": why or None, "skipped": [reader indices]}``: episodes of 0 steps (a reset followed by a reset or by
        ``close()``, as a recording loop often ends) are skipped, since a Minari episode has at
        least one step; the spaces and env are those of the selected episodes' writers (a
        env spec keeps the recorded kwargs, time limit and wrappers; a vector writer's is one
        sub-env's; an env that cannot be made again here, not with the recorded spaces or not
        with every recorded wrapper, or whose spec does not survive Minari's JSON
        (``EnvSpec.to_json()``), is left out, ``"env_spec_dropped"`` saying why; else None).

    Raises:
        OutputExistsError: if the dataset exists.
        UnsupportedSpaceError: if a space cannot be represented, or the selected episodes were
            recorded with different spaces.
        EmptySelectionError: if no selected episode has a step.
        ValueError: if ``dataset_id`` is not ``NAMESPACE/NAME-vN`` or ``NAME-vN``.
        MissingExtraError: if minari is not installed.
        ExportError: if a module of ``imports`` cannot be imported.
    """
    minari = require_extra("minari", "minari")
    try:
        import_modules(list(imports))
    except ImportError as e:
        raise ExportError(str(e)) from e
    from minari.data_collector import EpisodeBuffer
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.storage.datasets_root_dir import get_dataset_path

    namespace = _parse_id(parse_dataset_id, dataset_id)
    root = os.path.realpath(get_dataset_path())
    final = os.path.realpath(os.path.join(root, dataset_id))
    if os.path.commonpath([root, final]) != root:
        raise ValueError(f"dataset id {dataset_id!r} leads out of Minari's root {root}")
    if os.path.lexists(final):
        raise OutputExistsError(f"the Minari dataset {dataset_id} exists at {final}")
    dropped: dict[str, str] = {}
    with RecordingReader(directory) as reader:
        chosen = episode_indices(reader, episodes)
        source = selection_source(reader, chosen)  # (EmptySelectionError for no episodes)
        refuse_multiagent(parse_multiagent(source.manifest, str(directory)), "Minari export")
        for space, what in ((source.observation_space, "observation space"),
                            (source.action_space, "action space")):
            _check_space(space, f"{directory}: {what}",
                         source.manifest.get(what.replace(" ", "_")))
            _check_minari_space(space, f"{directory}: {what}")
        buffers: list[Any] = []
        steps, skipped = 0, []
        for i in chosen:
            ep = reader[i]
            if not ep.length:  # Minari's episodes have at least one step
                skipped.append(i)
                continue
            options = ep.options
            if options is not None and not isinstance(options, dict):
                dropped.setdefault("<reset options>", "Minari keeps only dict options")
                options = None
            buffers.append(EpisodeBuffer(
                id=len(buffers), seed=ep.seed, options=options, observations=ep.observations,
                actions=ep.actions, rewards=ep.rewards, terminations=ep.terminations,
                truncations=ep.truncations, infos=_infos_for_minari(ep.infos, dropped)))
            steps += ep.length
        if not buffers:
            raise EmptySelectionError(f"{directory}: every selected episode has 0 steps (a reset "
                                      f"then a reset or close); Minari needs at least one step")
        env, env_spec_dropped = _env_for(source)
        spec = env.spec if env is not None else None
        if spec is not None and any(w.kwargs is None for w in spec.additional_wrappers):
            # env.spec lists env-only wrappers (minigrid's ImgObsWrapper) without kwargs, which
            # gymnasium.make (recover_environment) refuses: Minari gets the spec that has them
            spec = fill_env_only_wrappers(spec)
        kwargs: dict[str, Any] = dict(
            env=env if spec is None or spec == env.spec else spec,
            observation_space=source.observation_space,
            action_space=source.action_space, data_format="hdf5", eval_env=spec,
            algorithm_name="recorded with gym_recorder",
            description=description or f"Exported by gym_recorder from {directory}.")
        kwargs.update(_minari_metadata(source.manifest, description is not None))
        if "jpeg_encoding" in inspect.signature(minari.create_dataset_from_buffers).parameters:
            kwargs["jpeg_encoding"] = False
        remove_stale_temps(root, "gym_recorder")  # (of exports killed before)
        tmp_root = temp_sibling(root, "gym_recorder")
        os.makedirs(tmp_root)
        saved = os.environ.get("MINARI_DATASETS_PATH")
        try:
            os.environ["MINARI_DATASETS_PATH"] = tmp_root
            with warnings.catch_warnings():
                # Minari warns about each metadata field left None (author, permalink, ...)
                warnings.filterwarnings("ignore", category=UserWarning, module=r"minari\.")
                minari.create_dataset_from_buffers(dataset_id, buffers, **kwargs)
            os.environ.pop("MINARI_DATASETS_PATH")
            if saved is not None:
                os.environ["MINARI_DATASETS_PATH"] = saved
            if namespace is not None and not os.path.isdir(os.path.join(root, namespace)):
                os.makedirs(os.path.dirname(os.path.join(root, namespace)), exist_ok=True)
                os.rename(os.path.join(tmp_root, namespace), os.path.join(root, namespace))
            else:
                os.makedirs(os.path.dirname(final), exist_ok=True)
                if os.path.lexists(final):
                    raise OutputExistsError(f"the Minari dataset {dataset_id} appeared at {final}"
                                            f" while exporting")
                os.rename(os.path.join(tmp_root, dataset_id), final)
        finally:
            if saved is None:
                os.environ.pop("MINARI_DATASETS_PATH", None)
            else:
                os.environ["MINARI_DATASETS_PATH"] = saved
            shutil.rmtree(tmp_root, ignore_errors=True)
            if env is not None:
                env.close()
    return {"dataset_id": dataset_id, "path": final, "episodes": len(buffers), "steps": steps,
            "dropped": dropped, "env_spec_dropped": env_spec_dropped, "skipped": skipped}


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
    _check_space(obs_space, f"Minari dataset {name} observation space")
    _check_space(act_space, f"Minari dataset {name} action space")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temps(parent, os.path.basename(out))  # (of imports killed before)
    tmp = temp_sibling(parent, os.path.basename(out))
    play = _Playback(obs_space, act_space, spec)
    steps = count = 0
    try:
        env = RecordingWrapper(play, tmp, metadata=_metadata_from_minari(ds, name))
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
        if os.path.lexists(out):
            raise OutputExistsError(f"{out} appeared while importing; nothing was written")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"path": out, "dataset_id": name, "episodes": count, "steps": steps}
