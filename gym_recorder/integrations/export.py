"""Turning a recording into other things: a summary, a flat ``.npz``, a plot (videos:
:mod:`gym_recorder.integrations.video`).

Everything here reads a recording with :class:`~gym_recorder.RecordingReader`. Optional libraries
(matplotlib for :func:`plot_returns`, imageio for :func:`write_video`) are imported only by the
function that needs them; a missing one raises :class:`MissingExtraError` naming the extra to
install.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..read.envgroups import group_envs
# (ExportError and MissingExtraError live in errors; they stay importable from here.)
from ..errors import (ExportError, FormatError, MissingExtraError, UnsupportedSpaceError,
                      require_extra)
from ..format.values import manifest_metadata
from .infocolumns import info_columns
from ..read.reader import RecordingReader
# (the video part lives in .video; its names stay importable from here)
from .video import DEFAULT_FPS, VIDEO_SUFFIXES, VideoWriter, write_video

__all__ = [
    "ExportError",
    "MissingExtraError",
    "summarize",
    "export_npz",
    "flatten_tree",
    "image_leaves",
    "plot_returns",
    "write_video",
    "VideoWriter",
    "VIDEO_SUFFIXES",
    "DEFAULT_FPS",
]

# Default plot size in pixels (width, height) and resolution.
DEFAULT_PLOT_SIZE = (1000, 600)
DEFAULT_PLOT_DPI = 100


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


# -- plot ----------------------------------------------------------------------------------------

def plot_returns(summary: dict[str, Any], path: str | os.PathLike[str], *,
                 size: tuple[int, int] = DEFAULT_PLOT_SIZE, dpi: int = DEFAULT_PLOT_DPI) -> None:
    """Plots episode return and length over episodes into an image file.

    Two panels share the episode axis: the return of each episode (with a moving average once
    there are enough episodes) and its length in steps. The file type follows the suffix (png,
    svg, pdf, ...); a png is exactly ``size`` pixels.

    Args:
        summary: what :func:`summarize` returned.
        path: the output file.
        size: (width, height) in pixels.
        dpi: dots per inch (with ``size``, sets the figure size in inches).

    Raises:
        MissingExtraError: if matplotlib is not installed.
        ExportError: if the recording has no episodes.
    """
    rows = [r for r in summary["episode_table"] if r["length"]]  # empty ones: no return
    if not rows:
        raise ExportError(f"{summary['directory']}: the recording holds no episodes to plot")
    require_extra("matplotlib", "plot")
    # No pyplot: no global figure state and no GUI backend, just the Agg canvas.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    ax_ret, ax_len = fig.subplots(2, 1, sharex=True)
    ids = list(dict.fromkeys(r.get("env_id") for r in rows))
    if len(ids) > 1:  # several envs: one series per env, over the episode index
        for env_id in ids:
            mine = [r for r in rows if r.get("env_id") == env_id]
            x = np.array([r["index"] for r in mine])
            label = env_id if isinstance(env_id, str) else "(no env id)"
            ax_ret.plot(x, [np.nan if r["total_reward"] is None else r["total_reward"] for r in mine],
                        marker="o" if len(mine) <= 50 else None, markersize=3, linewidth=1,
                        label=label)
            ax_len.plot(x, [r["length"] for r in mine], marker="o" if len(mine) <= 50 else None,
                        markersize=3, linewidth=1, label=label)
        ax_ret.legend(loc="best")
        ax_ret.set_ylabel("episode return")
        ax_len.set_ylabel("episode length (steps)")
        ax_len.set_xlabel("episode")
        for ax in (ax_ret, ax_len):
            ax.grid(True, alpha=0.3)
        fig.suptitle(f"{len(ids)} envs: return and length of {len(rows)} episodes "
                     f"({summary['steps']:,} steps)")
        fig.tight_layout()
        fig.savefig(os.fspath(path), dpi=dpi)
        return
    x = np.array([r["index"] for r in rows])
    returns = np.array([np.nan if r["total_reward"] is None else r["total_reward"] for r in rows], float)
    lengths = np.array([r["length"] for r in rows])
    marker = "o" if len(rows) <= 50 else None
    ax_ret.plot(x, returns, marker=marker, markersize=3, linewidth=1, label="return")
    window = max(len(rows) // 20, 1)
    if window > 1:
        kernel = np.ones(window) / window
        ax_ret.plot(x[window - 1:], np.convolve(returns, kernel, mode="valid"), linewidth=2,
                    label=f"moving average of {window} episodes")
        ax_ret.legend(loc="best")
    ax_ret.set_ylabel("episode return")
    ax_ret.grid(True, alpha=0.3)
    ax_len.plot(x, lengths, marker=marker, markersize=3, linewidth=1, color="tab:green")
    ax_len.set_ylabel("episode length (steps)")
    ax_len.set_xlabel("episode")
    ax_len.grid(True, alpha=0.3)
    name = summary.get("env_id") or os.path.basename(os.path.normpath(summary["directory"]))
    fig.suptitle(f"{name}: return and length of {len(rows)} episodes "
                 f"({summary['steps']:,} steps)")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=dpi)


# -- video ---------------------------------------------------------------------------------------

def image_leaves(tree: Any) -> list[tuple[str, np.ndarray]]:
    """The leaves of a stacked observation tree that are image sequences: uint8 (T, H, W, 3).

    Names are ``""`` for a single leaf, else ``key/...`` paths as in :func:`flatten_tree`.
    """
    out = []
    for name, leaf in flatten_tree(tree, ""):
        if isinstance(leaf, np.ndarray) and leaf.dtype == np.uint8 and leaf.ndim == 4 \
                and leaf.shape[-1] == 3:
            out.append((name.lstrip("/"), leaf))
    return out
