"""A recording written as a Minari dataset (:func:`export_minari`), moved into Minari's root.

Uses Minari's own ``create_dataset_from_buffers`` (raw arrays: ``jpeg_encoding=False`` where the
installed Minari has that option, so images stay lossless), under a temporary root inside
Minari's root (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``), moved into place at the end.
"""

from __future__ import annotations

import inspect
import os
import shutil
import warnings
from collections.abc import Iterable
from typing import Any

from ..errors import (EmptySelectionError, ExportError, OutputExistsError, require_extra)
from ..format.agents import parse_multiagent, refuse_multiagent
from ..format.envspec import fill_env_only_wrappers, import_modules
from ..format.fileio import remove_stale_temps, temp_sibling
from ..read.reader import RecordingReader
from ..training.selection import episode_indices, selection_source
from .minari_env import env_for
from .minari_fit import check_minari_space, check_space, infos_for_minari, minari_metadata

__all__ = ["export_minari"]


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
            check_space(space, f"{directory}: {what}",
                        source.manifest.get(what.replace(" ", "_")))
            check_minari_space(space, f"{directory}: {what}")
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
                truncations=ep.truncations, infos=infos_for_minari(ep.infos, dropped)))
            steps += ep.length
        if not buffers:
            raise EmptySelectionError(f"{directory}: every selected episode has 0 steps (a reset "
                                      f"then a reset or close); Minari needs at least one step")
        env, env_spec_dropped = env_for(source)
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
        kwargs.update(minari_metadata(source.manifest, description is not None))
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
