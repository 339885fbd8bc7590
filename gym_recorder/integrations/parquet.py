"""Parquet export, laid out as a Hugging Face dataset folder (needs ``gymnasium-recorder[arrow]``).

``export_parquet(directory, out)`` writes::

    OUT/data/train-00000-of-0000K.parquet   one row per step, files of at most ~max_file_bytes
    OUT/README.md                           a Hugging Face dataset card (YAML header + text)
    OUT/gym_recorder.json                   spaces, env spec, columns and episode table

Columns: ``obs``, ``next_obs``, ``action`` (for Dict/Tuple spaces one column per leaf, named by
its dotted path: ``obs.nested.pair.0``), ``reward`` (float64), ``terminated``, ``truncated``
(bool), ``episode``, ``step`` (int64). A leaf with scalar rows is a plain column of its dtype,
one with rows of shape (k,) a ``fixed_size_list<k>``, one with rows of shape (a, b, ...)
(images) a ``fixed_size_binary`` of each row's bytes (C order, little-endian), its dtype and
shape in the field's metadata (``gym_recorder.dtype``, ``gym_recorder.shape``) and in
``gym_recorder.json``: ``np.frombuffer(column.buffers()[1], dtype).reshape(-1, *shape)`` in
pyarrow, bytes to pandas, polars, DuckDB and datasets, read at memory speed;
Text leaves are strings. ``info.KEY`` (``info.KEY.SUB`` for nested dicts): the numeric infos
each step returned, in their dtype, null where a step lacks the key (see
:mod:`gym_recorder.integrations.infocolumns`); other infos are named in ``infos_left_out``.
``pyarrow.dataset.dataset(OUT / "data")``, pandas, polars, DuckDB and
``datasets.load_dataset("parquet", data_dir=OUT / "data")`` read it as it is. Everything is
written under a temporary name beside OUT (``.OUT.tmp-HOST-PID-XXXXXXXX``), renamed to OUT at
the end; one that a killed export left is removed by the next export to OUT. The card
(``README.md``) is written by :mod:`.parquet_card`.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, cast

import numpy as np

from .._version import __version__
from ..errors import OutputExistsError, UnsupportedSpaceError, require_extra
from ..format.fileio import building
from .infocolumns import InfoColumns, info_columns
from .parquet_card import METADATA_NAME, dataset_card
from ..format import exact_in
from ..format.agents import ACT_KEY, OBS_KEY, parse_multiagent
from ..read.reader import RecordingReader
from ..training.selection import SelectionSource, episode_indices, selection_source
from ..format.spaces import describe_space
from ..format.values import manifest_metadata
from ..training.transitions import Transitions, transitions, tree_leaves

__all__ = ["export_parquet", "DEFAULT_MAX_FILE_BYTES", "METADATA_NAME"]

# Hugging Face suggests Parquet files of a few hundred MB at most; we stay well below.
DEFAULT_MAX_FILE_BYTES = 256 << 20
# Steps are assembled in chunks of at most this many (uncompressed) bytes: bounds memory.
CHUNK_BYTES = 64 << 20
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
    if leaf.ndim >= 3:
        # Rows of 2 or more dimensions (images) are fixed_size_binary: each row's bytes in C
        # order, little-endian, the dtype and shape in the field's metadata (and in
        # gym_recorder.json). Parquet stores a list with a level per element, which pyarrow
        # reads at about 40-90 MB/s for nested or flat fixed-size lists and for the
        # arrow.fixed_shape_tensor extension alike, and DuckDB takes seconds for 50 rows;
        # binary rows are read at memory speed by every reader (benchmarks/bench_parquet.py).
        row = leaf.itemsize * int(np.prod(leaf.shape[1:], dtype=np.int64))
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(row), len(leaf),
                                                    [None, pa.py_buffer(leaf)])
    # Rows of shape (k,) are fixed_size_list<k>: every reader sees them as short arrays.
    out = pa.array(leaf.reshape(-1))
    for size in reversed(leaf.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, size)
    return out


def binary_field_metadata(leaf: np.ndarray) -> dict[bytes, bytes]:
    """The Parquet field metadata of a fixed_size_binary column (rows of 2+ dimensions): the
    numpy dtype and the row shape that ``np.frombuffer(bytes, dtype).reshape(shape)`` needs."""
    return {b"gym_recorder.dtype": np.dtype(leaf.dtype).newbyteorder("<").str.encode(),
            b"gym_recorder.shape": json.dumps(list(leaf.shape[1:])).encode()}


def _row_bytes(cols: dict[str, Any]) -> int:
    total = 0
    for leaf in cols.values():
        if isinstance(leaf, np.ndarray):
            total += leaf.itemsize * int(np.prod(leaf.shape[1:], dtype=np.int64))
        else:
            total += STRING_BYTES
    return max(total, 1)


class _Masked:
    """An info column that some steps lack (null there in Parquet)."""

    def __init__(self, values: np.ndarray, present: np.ndarray) -> None:
        self.values, self.present = values, present
        self.dtype, self.shape = values.dtype, values.shape

    def __len__(self) -> int:
        return len(self.values)


def _info_names(infos: InfoColumns) -> dict[str, str]:
    """Parquet column names of the info columns: ``info.`` and the key path, dotted."""
    names: dict[str, str] = {}
    for key in infos.values:
        name = "info." + key.replace("/", ".")
        if name in names.values():
            infos.left_out[key] = "another info has the same dotted name"
        else:
            names[key] = name
    return names


def _info_slice(infos: InfoColumns, names: dict[str, str], lo: int, hi: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in names.items():
        values = infos.values[key][lo:hi]
        present = infos.present.get(key)
        out[name] = values if present is None else _Masked(values, present[lo:hi])
    return out


def export_parquet(directory: str | os.PathLike[str], out: str | os.PathLike[str], *,
                   max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                   episodes: list[int] | None = None, infos: bool = True,
                   agent: str | None = None) -> dict[str, Any]:
    """Writes a recording's steps as a Hugging Face style Parquet dataset folder ``out``.

    Args:
        directory: the recording.
        out: the folder to create; it must not exist.
        max_file_bytes: each Parquet file holds at most this many bytes of (uncompressed)
            column data, and at least one row.
        episodes: reader indices to export (all by default).
        infos: export the numeric infos as ``info.KEY`` columns (reading the infos takes a
            pass over the episodes of its own: about 2.4 times the export's time for Atari
            frames; False leaves them out).
        agent: for a multi-agent recording, export only this agent's transitions (see
            :func:`~gym_recorder.training.transitions.transitions`); by default every agent's,
            with an ``agent`` column (the index in the recording's agents).

    Returns:
        ``{"path", "episodes", "steps", "files", "columns": {name: {"dtype", "shape"}},
        "infos_left_out": {info key: why}}``.

    Raises:
        OutputExistsError: if ``out`` exists.
        UnsupportedSpaceError: if a leaf has no Parquet type (Sequence, Graph, OneOf, complex).
        EmptySelectionError: if there are no episodes.
        MissingExtraError: if pyarrow is not installed.
    """
    pa = require_extra("pyarrow", "arrow")
    pq = require_extra("pyarrow.parquet", "arrow")
    out = os.path.abspath(os.fspath(out))
    if type(max_file_bytes) is not int or max_file_bytes <= 0:
        raise ValueError(f"max_file_bytes must be a positive int, got {max_file_bytes!r}")
    if os.path.lexists(out):
        raise OutputExistsError(f"{out} exists; choose a new output folder")
    with building(out, "exporting") as tmp:
        os.mkdir(tmp)  # (not mkdtemp: the folder keeps the umask's mode once renamed)
        with RecordingReader(directory) as reader:
            indices = episode_indices(reader, episodes)
            source = selection_source(reader, indices)
            forced: dict[str, np.dtype[Any]] = {}
            while True:
                try:
                    result = _write(pa, pq, reader, tmp, max_file_bytes, indices, source, forced,
                                    infos, agent)
                    break
                except _Widen as w:  # a leaf recorded wider in later batches: write it wide
                    forced[w.name] = w.dtype
                    shutil.rmtree(os.path.join(tmp, "data"))
    result["path"] = out
    return result


def _write(pa: Any, pq: Any, reader: RecordingReader, tmp: str, max_file_bytes: int,
           indices: list[int], source: SelectionSource,
           forced: dict[str, np.dtype[Any]], with_infos: bool = True,
           agent: str | None = None) -> dict[str, Any]:
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    summaries = [reader.summary(i) for i in indices]
    infos = info_columns(reader[i].infos[1:] if s.length and with_infos else []
                         for i, s in zip(indices, summaries))
    info_names = _info_names(infos)
    first = _columns(transitions(reader, indices[:1], agent=agent), forced)
    first.update(_info_slice(infos, info_names, 0, summaries[0].length))
    first = {n: (v.values if isinstance(v, _Masked) else v) for n, v in first.items()}
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

    done = 0  # step rows written so far (the info columns' rows are the selection's)

    def flush_chunk() -> None:
        nonlocal writer, in_file, schema, done
        t = transitions(reader, chunk, agent=agent)
        written[0] += len(t)
        cols = _columns(t, forced)
        cols.update(_info_slice(infos, info_names, done, done + len(t)))
        done += len(t)
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
            arrays = [_arrow(pa, n, v[lo:hi]) if not isinstance(v, _Masked)
                      else pa.array(v.values[lo:hi], mask=~v.present[lo:hi])
                      for n, v in cols.items()]
            table = pa.Table.from_arrays(arrays, schema=pa.schema([
                pa.field(n, a.type, metadata=binary_field_metadata(cols[n])
                         if pa.types.is_fixed_size_binary(a.type) else None)
                for n, a in zip(cols, arrays)]))
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema):
                differ = [f.name for f, g in zip(table.schema, schema) if not f.equals(g)]
                raise UnsupportedSpaceError(
                    f"episodes from {int(t.episode[lo])} on give column(s) {', '.join(differ)} "
                    f"another type than the episodes before them")
            if writer is None:
                # (no dictionary or min/max statistics for image bytes: neither helps a reader)
                plain = [f.name for f in schema if not pa.types.is_fixed_size_binary(f.type)]
                writer = pq.ParquetWriter(files[-1], schema, use_dictionary=plain,
                                          write_statistics=plain)
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
            "metadata": manifest_metadata(manifest),
            "observation_space": describe_space(obs_space),
            "action_space": describe_space(act_space),
            "observation_space_str": str(obs_space),
            "action_space_str": str(act_space),
            "multiagent": None if ma is None else {"api": ma.api, "agents": list(ma.agents),
                                                    "agent": agent},
            "steps": written[0], "files": names, "columns": columns,
            "infos_left_out": infos.left_out,
            "episodes": [{"index": s.index, "length": s.length,
                          "return": s.total_reward if np.isfinite(s.total_reward) else None,
                          "end": s.end, "seed": s.seed, "sub_env": s.sub_env}
                         for s in summaries]}
    with open(os.path.join(tmp, METADATA_NAME), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, allow_nan=False)
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write(dataset_card(meta, len(files)))
    return {"episodes": len(indices), "steps": meta["steps"], "files": len(files),
            "columns": columns, "infos_left_out": infos.left_out}
