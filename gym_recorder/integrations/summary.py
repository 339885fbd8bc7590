"""A recording summarised (:func:`summarize`): its envs, writers, episodes, returns and bytes.

What ``gym-recorder info`` prints and :func:`~gym_recorder.integrations.export.plot_returns`
plots: one row an episode (length, return, end, seed, writer, env), each writer's spaces and
metadata, the recording's envs grouped, per-agent returns for multi-agent recordings, and the
bytes on disk.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format.values import manifest_metadata
from ..read.envgroups import group_envs
from ..read.reader import RecordingReader

__all__ = ["dir_bytes", "summarize"]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def dir_bytes(directory: str | os.PathLike[str]) -> int:
    """Bytes of the regular files directly in ``directory``."""
    with os.scandir(os.fspath(directory)) as it:
        return sum(e.stat(follow_symlinks=False).st_size for e in it
                   if e.is_file(follow_symlinks=False))


def _space_text(space: Any, desc: Any) -> str | None:
    """A space as text; for one that holds a space gym_recorder does not know (so ``space`` is
    None), what it is and which class, rather than nothing."""
    from ..format.spaces import space_kept_as, unknown_space

    if space is not None:
        kept = space_kept_as(desc)
        if kept is not None:  # (minigrid's MissionSpace, described as Text)
            path, kind, cls = kept
            return f"{space} ({kind}{' at ' + path if path else ''}: a {cls}, recorded as {kind})"
        return str(space)
    unknown = unknown_space(desc)
    if unknown is None:
        return None
    path, cls = unknown
    where = f"{desc.get('type')} holding {cls} at {path}" if path else cls
    return f"{where} (a space gym_recorder does not know: not rebuilt)"


def _writer_spaces(writer: dict[str, Any]) -> tuple[str | None, str | None]:
    """A writer's spaces as text (from its manifest), for the per-env summary."""
    from ..format.spaces import build_space

    if writer.get("legacy"):
        return None, None
    out = []
    for key in ("observation_space", "action_space"):
        desc = writer["manifest"].get(key)
        try:
            space = build_space(desc, key)
        except FormatError:
            space = desc = None
        out.append(_space_text(space, desc))
    return out[0], out[1]


def summarize(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Summarises a recording: one row per episode, totals, spaces, env id, writers, bytes.

    Every value is JSON-encodable; non-finite total rewards are given as None. An episode's
    total reward (its return) is named ``total_reward`` as in :class:`~gym_recorder.Episode`.

    Returns:
        A dict with ``directory``, ``env_id``, ``episodes`` (count), ``steps``, ``bytes``,
        ``observation_space`` and ``action_space`` (their ``str``), ``total_reward_mean``,
        ``total_reward_min``, ``total_reward_max`` (None without episodes), ``ends`` (count per way an
        episode ended; ``"none"`` for episodes that did not end), ``empty_episodes`` (how many
        of ``episodes`` have 0 steps: a reset, then no step, as a loop that resets after the
        last truncation and then closes leaves; they are left out of the returns and
        ``ends``, and kept in ``episode_table``), ``writers`` (a list of dicts:
        ``prefix``, ``env_id``, ``episodes``, ``batches``, ``complete``, ``legacy``, ``vector``, ``metadata``), ``metadata`` (the first writer's that has one:
        who or what produced the recording, see ``RecordingWrapper(metadata=...)``)
        and ``episode_table`` (a list of dicts: ``index``, ``length``, ``total_reward``, ``end``,
        ``seed``, ``sub_env``, ``writer``, the writer being an index into ``writers``,
        ``env_id``), and ``envs``: one dict per env id (see
        :func:`gym_recorder.read.envgroups.group_envs`). With several envs, the top-level
        ``env_id`` and spaces are None.
    """
    with RecordingReader(directory) as reader:
        writers = reader.writers
        number = {w["prefix"]: k for k, w in enumerate(writers)}
        rows: list[dict[str, Any]] = []
        ends: dict[str, int] = {}
        for ep in reader.summaries():  # rewards only: no observations are read
            if ep.length:  # an empty episode (a reset, then no step) has no end to count
                end = ep.end if ep.end is not None else "none"
                ends[end] = ends.get(end, 0) + 1
            rows.append({"index": ep.index, "length": ep.length,
                         "total_reward": _finite(ep.total_reward), "end": ep.end, "seed": ep.seed,
                         "sub_env": ep.sub_env, "writer": number[ep.writer]})
        obs_space, act_space = reader.observation_space, reader.action_space
        env_id = reader.env_id
        spaces = [_writer_spaces(w) for w in writers]
        first = next((w["manifest"] for w in writers if not w["legacy"]), None) or {}
        for r in rows:  # the stable id: the writer's own number of the episode
            r["number"] = reader.stable_id(r["index"])[1]
        deleted = sum(w["deleted"] for w in writers)
        agents = _agent_returns(reader)
    reclaim = 0
    if deleted or reader.edits.replaced:
        from ..edit.compact import reclaimable

        reclaim = sum(reclaimable(directory))
    writer_rows = [{"prefix": w["prefix"], "env_id": w["env_id"], "episodes": w["episodes"],
                    "deleted": w["deleted"],
                    "batches": w["batches"], "complete": w["complete"], "legacy": w["legacy"],
                    "vector": w["manifest"].get("vector") if not w["legacy"] else None,
                    "metadata": manifest_metadata(w["manifest"]) if not w["legacy"] else None}
                   for w in writers]
    envs = group_envs(rows, [{**w, "observation_space": o, "action_space": a}
                             for w, (o, a) in zip(writer_rows, spaces)])
    for r in rows:
        r["env_id"] = writers[r["writer"]]["env_id"]
    if len(envs) > 1:  # several envs: no single env id or spaces for the whole directory
        env_id = obs_space = act_space = None
        first = {}
    returns = np.array([r["total_reward"] for r in rows
                        if r["total_reward"] is not None and r["length"]], dtype=float)
    return {
        "directory": os.fspath(directory),
        "env_id": env_id,
        "episodes": len(rows),
        "empty_episodes": sum(1 for r in rows if not r["length"]),
        "metadata": next((w["metadata"] for w in writer_rows if w["metadata"]), None),
        "steps": int(sum(r["length"] for r in rows)),
        "bytes": dir_bytes(directory),
        "observation_space": _space_text(obs_space, first.get("observation_space")),
        "action_space": _space_text(act_space, first.get("action_space")),
        "total_reward_mean": float(returns.mean()) if returns.size else None,
        "total_reward_min": float(returns.min()) if returns.size else None,
        "total_reward_max": float(returns.max()) if returns.size else None,
        "ends": dict(sorted(ends.items())),
        "writers": writer_rows,
        "deleted": deleted,
        "reclaimable": reclaim,
        "envs": envs,
        "episode_table": rows,
        "multiagent": agents,
    }


def _agent_returns(reader: RecordingReader) -> dict[str, Any] | None:
    """For a multi-agent recording (its first writer): the api, the agents, each agent's
    return (the sum of its step rewards) over the episodes (mean, min, max) and the env (its
    entry point, else its metadata name). Reads every episode."""
    first = next((m for m in reader._manifests if not m.legacy), None)
    ma = None if first is None else first.multiagent
    if ma is None:
        return None
    sums: list[np.ndarray] = []
    for ep in reader:
        if ep.multiagent is not None and ep.multiagent.agents == ma.agents:
            sums.append(ep.observations["rewards"][1:].sum(axis=0))
    table = np.array(sums, dtype=float).reshape(len(sums), len(ma.agents))
    returns = {name: {"mean": _finite(float(table[:, k].mean())) if len(sums) else None,
                      "min": _finite(float(table[:, k].min())) if len(sums) else None,
                      "max": _finite(float(table[:, k].max())) if len(sums) else None}
               for k, name in enumerate(ma.agents)}
    env = ma.env.get("entry_point") or ma.env.get("name")
    return {"api": ma.api, "agents": list(ma.agents), "returns": returns,
            "env": env if isinstance(env, str) else None}


# -- npz -----------------------------------------------------------------------------------------
