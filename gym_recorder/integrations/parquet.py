"""Parquet export, laid out as a Hugging Face dataset folder (needs ``gymnasium-recorder[arrow]``).

``export_parquet(directory, out)`` writes::

    OUT/data/train-00000-of-0000K.parquet   one row per step, files of at most ~max_file_bytes
    OUT/README.md                           a Hugging Face dataset card (YAML header + text)
    OUT/gym_recorder.json                   spaces, env spec, columns and episode table

Columns: ``obs``, ``next_obs``, ``action`` (for Dict/Tuple spaces one column per leaf, named by
its dotted path: ``obs.nested.pair.0``), ``reward`` (float64), ``terminated``, ``truncated``
(bool), ``episode``, ``step`` (int64). A leaf with scalar rows is a plain column of its dtype,
one with rows of shape (k,) a ``fixed_size_list<k>``, one with rows of shape (a, b, ...)
(images) nested fixed-size lists ``fixed_size_list<fixed_size_list<..., b>, a>`` of its dtype;
Text leaves are strings.
``pyarrow.dataset.dataset(OUT / "data")``, pandas, polars, DuckDB and
``datasets.load_dataset("parquet", data_dir=OUT / "data")`` read it as it is. Everything is
written under a temporary name beside OUT (``.OUT.tmp-HOST-PID-XXXXXXXX``), renamed to OUT at
the end; one that a killed export left is removed by the next export to OUT.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, cast

import numpy as np

from .._version import __version__
from ..errors import OutputExistsError, UnsupportedSpaceError
from ..format.fileio import remove_stale_temps, temp_sibling
from .export import _require
from ..format import exact_in
from ..format.agents import ACT_KEY, OBS_KEY, parse_multiagent
from ..read.reader import RecordingReader
from ..training.selection import SelectionSource, episode_indices, selection_source
from ..format.spaces import describe_space
from ..training.transitions import Transitions, transitions, tree_leaves

__all__ = ["export_parquet", "DEFAULT_MAX_FILE_BYTES", "METADATA_NAME"]

# Hugging Face suggests Parquet files of a few hundred MB at most; we stay well below.
DEFAULT_MAX_FILE_BYTES = 256 << 20
# Steps are assembled in chunks of at most this many (uncompressed) bytes: bounds memory.
CHUNK_BYTES = 64 << 20
METADATA_NAME = "gym_recorder.json"
# Estimated bytes of one string value (Text leaves), for sizing files.
STRING_BYTES = 64


class _Widen(Exception):
    """A column comes wider in later episodes than in the files written so far."""

    def __init__(self, name: str, dtype: np.dtype[Any]) -> None:
        super().__init__(name, dtype)
        self.name, self.dtype = name, dtype


def _columns(t: Transitions, forced: dict[str, np.dtype[Any]] | None = None) -> dict[str, Any]:
    cols: dict[str, Any] = {}
    for key, tree in (("obs", t.obs), ("next_obs", t.next_obs), ("action", t.action)):
        for path, leaf in tree_leaves(tree):
            name = f"{key}.{path}" if path else key
            if name in cols:
                raise UnsupportedSpaceError(
                    f"column {name}: two leaves of the {key} space have this dotted name (a Dict "
                    f"key holding '.' beside a nested key); Parquet columns need distinct names")
            cols[name] = leaf
    cols.update(reward=t.reward, terminated=t.terminated, truncated=t.truncated,
                episode=t.episode, step=t.step)
    if t.agent is not None:  # a multi-agent recording: every agent's transitions, stacked
        cols["agent"] = t.agent
    for name, dtype in (forced or {}).items():
        if name in cols and isinstance(cols[name], np.ndarray) and cols[name].dtype != dtype:
            cols[name] = _exactly(name, cols[name], dtype)
    return cols


def _exactly(name: str, leaf: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """``leaf`` in the column's dtype (a result_type of the recorded ones) when that keeps
    every value; else UnsupportedSpaceError (int64 beyond 2**53 in a column of float64)."""
    if not exact_in(leaf, dtype):
        raise UnsupportedSpaceError(
            f"column {name}: holds {leaf.dtype} values that {dtype}, the type other episodes "
            f"give this column, would round; no one Parquet type holds them all exactly")
    return leaf.astype(dtype)


def _arrow(pa: Any, name: str, leaf: Any) -> Any:
    if not isinstance(leaf, np.ndarray):
        if all(isinstance(x, str) for x in leaf):
            return pa.array(leaf, type=pa.string())
        raise UnsupportedSpaceError(f"column {name}: its rows have no one fixed type (values "
                                    f"outside the space, integers and floats that no one dtype "
                                    f"holds exactly, or Sequence, Graph or OneOf spaces) and "
                                    f"cannot be exported to Parquet")
    if leaf.dtype.kind in "cO" or leaf.dtype.byteorder == ">":
        raise UnsupportedSpaceError(f"column {name}: dtype {leaf.dtype} has no Parquet type")
    if 0 in leaf.shape[1:]:
        raise UnsupportedSpaceError(f"column {name}: rows of shape {leaf.shape[1:]} hold no "
                                    f"values, and Parquet's fixed-size lists need at least one")
    leaf = np.ascontiguousarray(leaf)
    # Rows of shape (a, b, ...) are fixed_size_list<a> of fixed_size_list<b> ...: every reader
    # sees the shape (polars Array, DuckDB T[][], Hugging Face datasets), where the
    # arrow.fixed_shape_tensor extension is a flat list to pandas/DuckDB/polars and an error
    # to datasets.load_dataset.
    out = pa.array(leaf.reshape(-1))
    for size in reversed(leaf.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, size)
    return out


def _row_bytes(cols: dict[str, Any]) -> int:
    total = 0
    for leaf in cols.values():
        if isinstance(leaf, np.ndarray):
            total += leaf.itemsize * int(np.prod(leaf.shape[1:], dtype=np.int64))
        else:
            total += STRING_BYTES
    return max(total, 1)


def _card(meta: dict[str, Any], files: int) -> str:
    env = meta["env_id"] or "an unnamed environment"
    eps = meta["episodes"]
    returns = np.array([e["return"] for e in eps if e["return"] is not None], dtype=float)
    ends: dict[str, int] = {}
    for e in eps:
        ends[str(e["end"])] = ends.get(str(e["end"]), 0) + 1
    seeds = sorted({e["seed"] for e in eps if e["seed"] is not None})
    tag = (meta["env_id"] or "").replace("/", "-")
    lines = ["---", "license: other", "task_categories:", "- reinforcement-learning",
             "tags:", "- gym_recorder", "- gymnasium", "- offline-rl"]
    if tag:
        lines.append(f"- {json.dumps(tag)}")
    lines += ["configs:", "- config_name: default", "  data_files:", "  - split: train",
              "    path: data/*.parquet", "---", "",
              f"# {env}, recorded with gym_recorder", "",
              f"{len(eps)} episodes, {meta['steps']} steps of `{env}`, one row per step, in "
              f"{files} Parquet file{'s' if files != 1 else ''} under `data/`. Exported by "
              f"gym_recorder {__version__} from a recording made with gym_recorder "
              f"{meta['recorder'] or 'unknown'}.", "",
              "## Environment", "",
              f"- env id: `{meta['env_id']}`",
              f"- env spec: `{json.dumps(meta['env_spec'])}`",
              f"- observation space: `{meta['observation_space_str']}`",
              f"- action space: `{meta['action_space_str']}`", "",
              "## Episodes", "",
              f"- episodes: {len(eps)}, steps: {meta['steps']}"]
    if returns.size:
        lines.append(f"- return: mean {returns.mean():.6g}, min {returns.min():.6g}, "
                     f"max {returns.max():.6g}")
    lines.append("- how episodes ended: " + ", ".join(f"{k} {v}" for k, v in sorted(ends.items())))
    lines.append(f"- reset seeds: {', '.join(map(str, seeds[:20])) or 'none'}"
                 f"{' ...' if len(seeds) > 20 else ''}")
    lines += ["", "## Columns", "", "| column | type | row shape |", "|---|---|---|"]
    for name, c in meta["columns"].items():
        lines.append(f"| `{name}` | {c['dtype']} | {tuple(c['shape'])} |")
    lines += ["", "`obs` is the observation a step was taken from, `next_obs` the one it led "
              "to; `episode` and `step` say where a row comes from. Dict and Tuple leaves are "
              "columns named by their dotted path. Spaces and the episode table are in "
              f"`{METADATA_NAME}`.", "", "## Loading", "", "```python",
              "import pyarrow.dataset as ds",
              'table = ds.dataset("data", format="parquet").to_table()',
              "# or: datasets.load_dataset(\"parquet\", data_dir=\"data\")", "```", ""]
    return "\n".join(lines)


def export_parquet(directory: str | os.PathLike[str], out: str | os.PathLike[str], *,
                   max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                   episodes: list[int] | None = None,
                   agent: str | None = None) -> dict[str, Any]:
    """Writes a recording's steps as a Hugging Face style Parquet dataset folder ``out``.

    Args:
        directory: the recording.
        out: the folder to create; it must not exist.
        max_file_bytes: each Parquet file holds at most this many bytes of (uncompressed)
            column data, and at least one row.
        episodes: reader indices to export (all by default).
        agent: for a multi-agent recording, export only this agent's transitions (see
            :func:`~gym_recorder.training.transitions.transitions`); by default every agent's,
            with an ``agent`` column (the index in the recording's agents).

    Returns:
        ``{"path", "episodes", "steps", "files", "columns": {name: {"dtype", "shape"}}}``.

    Raises:
        OutputExistsError: if ``out`` exists.
        UnsupportedSpaceError: if a leaf has no Parquet type (Sequence, Graph, OneOf, complex).
        EmptySelectionError: if there are no episodes.
        MissingExtraError: if pyarrow is not installed.
    """
    pa = _require("pyarrow", "arrow")
    pq = _require("pyarrow.parquet", "arrow")
    out = os.path.abspath(os.fspath(out))
    if type(max_file_bytes) is not int or max_file_bytes <= 0:
        raise ValueError(f"max_file_bytes must be a positive int, got {max_file_bytes!r}")
    if os.path.lexists(out):
        raise OutputExistsError(f"{out} exists; choose a new output folder")
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temps(parent, os.path.basename(out))  # (of exports killed before)
    tmp = temp_sibling(parent, os.path.basename(out))
    os.mkdir(tmp)  # (not mkdtemp: the folder keeps the umask's mode once renamed)
    try:
        with RecordingReader(directory) as reader:
            indices = episode_indices(reader, episodes)
            source = selection_source(reader, indices)
            forced: dict[str, np.dtype[Any]] = {}
            while True:
                try:
                    result = _write(pa, pq, reader, tmp, max_file_bytes, indices, source, forced,
                                    agent)
                    break
                except _Widen as w:  # a leaf recorded wider in later batches: write it wide
                    forced[w.name] = w.dtype
                    shutil.rmtree(os.path.join(tmp, "data"))
        if os.path.lexists(out):
            raise OutputExistsError(f"{out} appeared while exporting; nothing was written")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result["path"] = out
    return result


def _write(pa: Any, pq: Any, reader: RecordingReader, tmp: str, max_file_bytes: int,
           indices: list[int], source: SelectionSource,
           forced: dict[str, np.dtype[Any]], agent: str | None) -> dict[str, Any]:
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    summaries = [reader.summary(i) for i in indices]
    first = _columns(transitions(reader, indices[:1], agent=agent), forced)
    row_bytes = _row_bytes(first)
    columns = {n: {"dtype": str(v.dtype) if isinstance(v, np.ndarray) else "string",
                   "shape": list(v.shape[1:]) if isinstance(v, np.ndarray) else []}
               for n, v in first.items()}
    rows_per_file = max(1, max_file_bytes // row_bytes)
    rows_per_chunk = max(1, min(rows_per_file, CHUNK_BYTES // row_bytes))
    files: list[str] = []
    writer, in_file, schema = None, 0, None
    chunk: list[int] = []
    chunk_rows = 0
    written = [0]

    def flush_chunk() -> None:
        nonlocal writer, in_file, schema
        t = transitions(reader, chunk, agent=agent)
        written[0] += len(t)
        cols = _columns(t, forced)
        for n, v in cols.items():
            if isinstance(v, np.ndarray) and str(v.dtype) != columns[n]["dtype"] \
                    and v.dtype.kind in "biuf" and columns[n]["dtype"] != "string":
                wide = np.result_type(np.dtype(str(columns[n]["dtype"])), v.dtype)
                if str(wide) != columns[n]["dtype"]:
                    raise _Widen(n, wide)
                cols[n] = _exactly(n, v, wide)
        lo = 0
        while lo < len(t):
            if writer is None:
                files.append(os.path.join(data, f"part-{len(files):05d}.parquet"))
                in_file = 0
            hi = min(len(t), lo + rows_per_file - in_file)
            arrays = [_arrow(pa, n, v[lo:hi]) for n, v in cols.items()]
            table = pa.Table.from_arrays(arrays, names=list(cols))
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                differ = [f.name for f, g in zip(table.schema, schema) if not f.equals(g)]
                raise UnsupportedSpaceError(
                    f"episodes from {int(t.episode[lo])} on give column(s) {', '.join(differ)} "
                    f"another type than the episodes before them")
            if writer is None:
                writer = pq.ParquetWriter(files[-1], schema)
            writer.write_table(table)
            in_file += hi - lo
            lo = hi
            if in_file >= rows_per_file:
                writer.close()
                writer = None

    try:
        for i, s in zip(indices, summaries):
            chunk.append(i)
            chunk_rows += s.length
            if chunk_rows >= rows_per_chunk:
                flush_chunk()
                chunk, chunk_rows = [], 0
        if chunk:
            flush_chunk()
    finally:
        if writer is not None:
            writer.close()
    names = []
    for k, part in enumerate(files):
        name = f"train-{k:05d}-of-{len(files):05d}.parquet"
        os.rename(part, os.path.join(data, name))
        names.append(f"data/{name}")
    manifest = source.manifest
    obs_space, act_space = source.observation_space, source.action_space
    ma = parse_multiagent(manifest, str(reader.directory))
    if ma is not None:  # the rows are one agent's transitions each: its spaces (they agree)
        obs_space = cast(Any, obs_space)[OBS_KEY][agent or ma.agents[0]]
        act_space = cast(Any, act_space)[ACT_KEY][agent or ma.agents[0]]
    meta = {"format": "gym_recorder-parquet", "version": 1, "exported_by": __version__,
            "recorder": (manifest.get("writer") or {}).get("library_version"),
            "env_id": source.env_id, "env_spec": manifest.get("env_spec"),
            "observation_space": describe_space(obs_space),
            "action_space": describe_space(act_space),
            "observation_space_str": str(obs_space),
            "action_space_str": str(act_space),
            "multiagent": None if ma is None else {"api": ma.api, "agents": list(ma.agents),
                                                    "agent": agent},
            "steps": written[0], "files": names, "columns": columns,
            "episodes": [{"index": s.index, "length": s.length,
                          "return": s.total_reward if np.isfinite(s.total_reward) else None,
                          "end": s.end, "seed": s.seed, "sub_env": s.sub_env}
                         for s in summaries]}
    with open(os.path.join(tmp, METADATA_NAME), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, allow_nan=False)
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write(_card(meta, len(files)))
    return {"episodes": len(indices), "steps": meta["steps"], "files": len(files),
            "columns": columns}
