"""What of a recording Minari can hold: its spaces, its infos (stacked per key), its metadata.

Checks a space both ways (:func:`check_space`: one gym_recorder can represent;
:func:`check_minari_space`: one Minari's serialization knows), stacks infos as Minari keeps them
(naming each key left out, and why), and maps the metadata keys Minari's datasets have.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import UnsupportedSpaceError
from ..format.spaces import describe_space, unknown_space
from ..format.values import manifest_metadata

__all__ = ["MINARI_METADATA_KEYS", "MINARI_SPACES", "check_minari_space", "check_space",
           "infos_for_minari", "metadata_from_minari", "minari_metadata"]


def check_space(space: Any, where: str, desc: Any = None) -> None:
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


def check_minari_space(space: gym.Space[Any] | None, where: str) -> None:
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
            check_minari_space(sub, f"{where}[{k!r}]")


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


def infos_for_minari(infos: list[dict[str, Any]], dropped: dict[str, str]) -> dict[str, Any]:
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


# Metadata keys (RecordingWrapper(metadata=...), record --meta) that Minari's datasets have.
MINARI_METADATA_KEYS = ("algorithm_name", "author", "author_email", "code_permalink",
                        "description")


def minari_metadata(manifest: Any, has_description: bool) -> dict[str, Any]:
    """The recording's metadata that Minari keeps, as create_dataset_from_buffers' arguments
    (strings only: a recording's metadata is untrusted; ``description`` given to the export
    wins)."""
    metadata = manifest_metadata(manifest) or {}
    out = {key: metadata[key] for key in MINARI_METADATA_KEYS
           if isinstance(metadata.get(key), str) and metadata[key]}
    if has_description:
        out.pop("description", None)
    return out


def metadata_from_minari(ds: Any, name: str) -> dict[str, Any]:
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
