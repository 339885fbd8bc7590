"""Several envs in one recording directory: grouping episodes by env, and noticing a new one.

Many writers may share a directory, and nothing stops them from recording different envs.
``info``, ``plot`` and ``export`` group episodes by the env id of their writer (see
:func:`group_envs`); a writer that starts recording an env other than those already in the
directory warns once (:func:`warn_if_other_envs`).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from typing import Any

import numpy as np

from ..errors import MixedEnvsWarning, RecorderWarning, user_stacklevel  # (MixedEnvsWarning stays importable from here)
from ..format import MANIFEST_SUFFIX

__all__ = ["group_envs", "env_ids_in", "other_env_ids", "warn_if_other_envs", "MixedEnvsWarning"]

# Manifests looked at when a writer starts (each read only as far as its env id).
MAX_MANIFESTS_SCANNED = 200
HEAD_BYTES = 8192
_ENV_ID_RE = re.compile(rb'"env_id":\s*(null|"(?:[^"\\]|\\.)*")')


def _label(env_id: Any) -> str:
    return env_id if isinstance(env_id, str) else "-"


def group_envs(rows: list[dict[str, Any]], writers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per env id (in the order the writers come), its episodes' figures.

    Args:
        rows: the summary's episode table (each row has ``writer``, ``length``, ``return``,
            ``end``).
        writers: the summary's writers (each has ``env_id`` and, here, ``observation_space``
            and ``action_space``).

    Returns:
        One dict per env: ``env_id``, ``observation_space``, ``action_space``, ``writers``
        (indices), ``episodes``, ``empty_episodes`` (of 0 steps: left out of the returns and
        ends), ``steps``, ``total_reward_mean``/``min``/``max``, ``ends``.
    """
    groups: dict[Any, dict[str, Any]] = {}
    for k, w in enumerate(writers):
        g = groups.get(w["env_id"])
        if g is None:
            g = groups[w["env_id"]] = {
                "env_id": w["env_id"], "observation_space": w.get("observation_space"),
                "action_space": w.get("action_space"), "writers": [], "episodes": 0,
                "empty_episodes": 0, "steps": 0, "returns": [], "ends": {}}
        g["writers"].append(k)
    for r in rows:
        g = groups[writers[r["writer"]]["env_id"]]
        g["episodes"] += 1
        if not r["length"]:  # an empty episode: counted apart, not in the returns or ends
            g["empty_episodes"] += 1
            continue
        g["steps"] += r["length"]
        if r["total_reward"] is not None:
            g["returns"].append(r["total_reward"])
        end = r["end"] if r["end"] is not None else "none"
        g["ends"][end] = g["ends"].get(end, 0) + 1
    out = []
    for g in groups.values():
        returns = np.array(g.pop("returns"), dtype=float)
        g["total_reward_mean"] = float(returns.mean()) if returns.size else None
        g["total_reward_min"] = float(returns.min()) if returns.size else None
        g["total_reward_max"] = float(returns.max()) if returns.size else None
        g["ends"] = dict(sorted(g["ends"].items()))
        out.append(g)
    return out


def env_ids_in(directory: str, own_manifest: str) -> list[Any]:
    """The env ids (None for none) recorded by the directory's writers other than
    ``own_manifest``, each once.

    Only the start of each manifest is read (its env id comes before its batch list).
    """
    found: list[Any] = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(MANIFEST_SUFFIX))
    except OSError:
        return []
    for name in names[:MAX_MANIFESTS_SCANNED]:
        if name == own_manifest:
            continue
        try:
            with open(os.path.join(directory, name), "rb") as f:
                head = f.read(HEAD_BYTES)
        except OSError:
            continue
        m = _ENV_ID_RE.search(head)
        if m is None:
            continue
        try:
            env_id = json.loads(m.group(1))
        except ValueError:
            continue
        if env_id not in found:
            found.append(env_id)
    return found


def other_env_ids(directory: str, env_id: Any, own_manifest: str) -> list[str]:
    """The env ids other than ``env_id`` recorded by the directory's other writers."""
    return sorted({_label(other) for other in env_ids_in(directory, own_manifest)
                   if other != env_id})


def warn_if_other_envs(directory: str, env_id: Any, own_manifest: str) -> None:
    """Warns (once for this writer) when its env is new to a directory that holds recordings
    of other envs; a writer adding to an env already recorded there is not warned.

    Args:
        directory: the recording directory.
        env_id: the writer's env id.
        own_manifest: the writer's manifest name (left out of the scan).
    """
    ids = env_ids_in(directory, own_manifest)
    if env_id in ids:
        return
    others = sorted({_label(other) for other in ids})
    if others:
        warnings.warn(
            f"{directory} already holds recordings of {', '.join(others)}; this writer records "
            f"{_label(env_id)} beside them (info, plot and export group episodes by env id; "
            "export needs --env to choose one)", MixedEnvsWarning, stacklevel=user_stacklevel())
