"""The blocks of :mod:`gym_recorder.integrations.ray`'s read tasks: step and episode rows of one batch.

A :class:`TaskSpec` names one committed batch (one block of a read task, which reads one or
several consecutive batches) and the batches before or after it that its rows need.
:func:`read_block` decodes them through the reader of this worker process
(:meth:`~gym_recorder.RecordingReader.read_batch`, the reader's own batch decoding) and lays the
rows out as columns: step rows (obs, next_obs, action, reward, terminated, truncated, episode,
step) or episode rows (variable-shaped tensors and the episode's metadata), Dict and Tuple leaves
as dotted columns. Which tasks a recording has, and in which order, is
:class:`gym_recorder.integrations.ray.RecordingDatasource`'s job; this module imports Ray only to build a
block.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FormatError, RecorderError, UnsupportedSpaceError, UnsupportedValueError
from ..format import MAX_JSON_BYTES, exact_in, join_dtype, parse_dtype
from ..read.outside import join_leaf

__all__ = ["TaskSpec", "read_block", "check_columnar", "flatten", "column_dtypes"]


# -- columns ---------------------------------------------------------------------------------


def _stackable(space: Any) -> bool:
    from gymnasium import spaces

    return isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                              spaces.MultiBinary))


def check_columnar(space: Any, where: str, _named: set[str] | None = None) -> None:
    """Refuses a space with leaves that have no column form (Sequence, Graph, OneOf...), or
    two leaves of one dotted column name (a Dict key holding "." beside a nested key).

    Raises:
        UnsupportedValueError: naming the leaf.
        UnsupportedSpaceError: naming the column two leaves would share.
    """
    from gymnasium import spaces

    named: set[str] = set() if _named is None else _named
    if isinstance(space, spaces.Dict):
        for k, s in space.spaces.items():
            check_columnar(s, f"{where}.{k}", named)
    elif isinstance(space, spaces.Tuple):
        for i, s in enumerate(space.spaces):
            check_columnar(s, f"{where}.{i}", named)
    elif not (_stackable(space) or isinstance(space, spaces.Text)):
        raise UnsupportedValueError(f"{where}: a {type(space).__name__} space has no column form "
                                    f"in a Ray dataset (read it with RecordingReader)")
    elif where in named:
        raise UnsupportedSpaceError(f"column {where}: two leaves of the space have this dotted "
                                    f"name (a Dict key holding '.' beside a nested key); Ray "
                                    f"columns need distinct names")
    else:
        named.add(where)


def flatten(tree: Any, prefix: str) -> dict[str, Any]:
    """The leaves of a stacked tree as ``{dotted name: array or list}``, in the space's order."""
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}"))
        return out
    if isinstance(tree, tuple):
        out = {}
        for i, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: tree}


def _rows(leaf: Any, start: int, stop: int) -> Any:
    return leaf[start:stop]


def _join(where: str, pieces: list[Any]) -> Any:
    return pieces[0] if len(pieces) == 1 else join_leaf(where, pieces)


def _column(values: Any) -> Any:
    """A column for a block: arrays as they are; lists of str as a numpy str-object array."""
    if isinstance(values, np.ndarray):
        return values
    return np.array(values, dtype=object)


def _to_block(columns: dict[str, Any]) -> Any:
    from ray.data.block import BlockAccessor

    return BlockAccessor.batch_to_block({k: _column(v) for k, v in columns.items()})


def _ragged(arrays: list[Any]) -> np.ndarray:
    """An object array of per-episode arrays (a variable-shaped tensor column)."""
    out = np.empty(len(arrays), dtype=object)
    for i, a in enumerate(arrays):
        out[i] = a
    return out


# -- read tasks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSpec:
    """One block of a read task: its batch, the batches before or after it that it needs."""

    location: str
    storage_options: dict[str, Any] | None
    verify: bool
    granularity: str
    batch: Any                     # the task's BatchInfo
    extra: tuple[Any, ...] = ()              # (BatchInfo, ...) other batches it reads
    episodes: tuple[Any, ...] = ()           # episode granularity: (reader index, summary dict) it owns
    dtypes: tuple[tuple[str, str], ...] = ()  # (obs/action column, dtype) of leaves widened in
    #                                           some batches: every block gives them so


_READERS: dict[str, Any] = {}
_READERS_LOCK = threading.Lock()


def _reader_for(spec: TaskSpec, fresh: bool = False) -> Any:
    """This worker process's reader of a recording (opened once; opened anew when ``fresh``)."""
    from ..read.reader import RecordingReader

    key = json.dumps([spec.location, spec.storage_options, spec.verify], sort_keys=True,
                     default=str)
    with _READERS_LOCK:
        reader = _READERS.get(key)
        if reader is None or fresh:
            # (A reader replaced here is left to the garbage collector, not closed: another
            # thread may hold it between taking it and the lock.)
            # (a task reads each batch once: the reader keeps only what it reads in order)
            kwargs: dict[str, Any] = {"verify": spec.verify, "cache_bytes": 0}
            if spec.storage_options is not None:
                kwargs["storage_options"] = spec.storage_options
            reader = _READERS[key] = RecordingReader(spec.location, **kwargs)
    return reader


def _parts(spec: TaskSpec, info: Any) -> dict[int, list[Any]]:
    """The parts of one batch by *snapshot* episode index (a newer reader may number differently:
    the episodes of a batch are mapped by position onto the snapshot's ``info.episodes``)."""
    reader = _reader_for(spec)
    with _READERS_LOCK:
        try:
            parts = reader.read_batch(info)
        except ValueError:  # not a batch of this reader (a FormatError is one too)
            parts = None
    if parts is None:
        # The reader was opened before the snapshot was taken (it does not know the batch), or
        # the recording was replaced since (a batch of that name is another file): a new one.
        reader = _reader_for(spec, fresh=True)
        with _READERS_LOCK:
            try:
                parts = reader.read_batch(info)
            except FormatError:
                raise
            except ValueError:
                raise FormatError(f"{spec.location}: batch {info.json_name} is not the one this "
                                  f"dataset was made with (the recording was replaced or "
                                  f"repaired since); make a new dataset") from None
    new = sorted({p.episode for p in parts})
    if len(new) != len(info.episodes):
        raise RecorderError(f"{spec.location}: batch {info.json_name} holds {len(new)} episodes, "
                            f"the snapshot says {len(info.episodes)}")
    to_snapshot = dict(zip(new, info.episodes))
    out: dict[int, list[Any]] = {}
    for p in sorted(parts, key=lambda p: (p.episode, p.part)):
        out.setdefault(to_snapshot[p.episode], []).append(p)
    return out


# (recording, writer, batch JSON name and CRC-32, position of the episode in the batch's episodes) ->
# (part number, {obs leaf: its last row}) of the last part of an episode that goes on after a
# batch read in this process: what the read task of the batch that continues the episode needs
# from it, so that it need not decode that batch again when the same worker has read it. Keyed
# by position, not episode index: batches never change, the reader's numbering may between
# snapshots. Bounded (the oldest are dropped).
_LAST_ROWS: OrderedDict[tuple[str, str, str, int | None, int], tuple[int, dict[str, Any]]] = \
    OrderedDict()
_LAST_ROWS_MAX = 256


def _last_key(spec: TaskSpec, info: Any, ep: int) -> tuple[str, str, str, int | None, int]:
    return (spec.location, info.writer, info.json_name, info.json_crc32, info.episodes.index(ep))


def _remember_last_rows(spec: TaskSpec, info: Any, parts: dict[int, list[Any]]) -> None:
    with _READERS_LOCK:
        for ep, ps in parts.items():
            last = max(ps, key=lambda q: q.part)
            if last.is_last:
                continue
            # Copies: views would keep the whole batch's bytes alive.
            rows = {k: _rows(v, len(v) - 1, len(v)) for k, v in
                    flatten(last.observations, "obs").items()}
            rows = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in rows.items()}
            key = _last_key(spec, info, ep)
            _LAST_ROWS[key] = (last.part, rows)
            _LAST_ROWS.move_to_end(key)
        while len(_LAST_ROWS) > _LAST_ROWS_MAX:
            _LAST_ROWS.popitem(last=False)


def _before(spec: TaskSpec, mine: dict[int, list[Any]]) -> dict[int, tuple[int, dict[str, Any]]]:
    """For each episode that this batch continues, the last observation row of its part
    before (part number, leaves), from the batches before (``spec.extra``)."""
    out: dict[int, tuple[int, dict[str, Any]]] = {}
    for info in spec.extra:
        wanted = [ep for ep in info.episodes if ep in mine]
        with _READERS_LOCK:
            known = {ep: _LAST_ROWS.get(_last_key(spec, info, ep)) for ep in wanted}
        if not all(v is not None for v in known.values()):
            _remember_last_rows(spec, info, _parts(spec, info))
            with _READERS_LOCK:
                known = {ep: _LAST_ROWS.get(_last_key(spec, info, ep)) for ep in wanted}
        for ep, v in known.items():
            if v is not None and (ep not in out or v[0] > out[ep][0]):
                out[ep] = v
    return out


def _step_block(spec: TaskSpec) -> Any:
    """Step rows of one batch (obs of a continuing part's first step from the batch before)."""
    mine = _parts(spec, spec.batch)
    where = f"{spec.location}: {spec.batch.json_name}"
    _remember_last_rows(spec, spec.batch, mine)
    before = _before(spec, mine)
    cols: dict[str, list[Any]] = {}
    for ep, parts in mine.items():
        for p in parts:
            n = len(p.rewards)
            if n == 0:
                continue
            obs = flatten(p.observations, "obs")
            if p.part == 0:
                first = {k: _rows(v, 0, n) for k, v in obs.items()}
                nxt = {k: _rows(v, 1, n + 1) for k, v in obs.items()}
            else:
                prev = [q for q in parts if q.part < p.part]
                if prev:
                    o = flatten(max(prev, key=lambda q: q.part).observations, "obs")
                    last = {k: _rows(v, len(v) - 1, len(v)) for k, v in o.items()}
                elif ep in before and before[ep][0] == p.part - 1:
                    last = before[ep][1]
                else:
                    raise RecorderError(f"{spec.location}: part {p.part} of episode {ep} in "
                                        f"{spec.batch.json_name} has no earlier part")
                first = {k: _join(where, [last[k], _rows(v, 0, n - 1)]) for k, v in obs.items()}
                nxt = {k: _rows(v, 0, n) for k, v in obs.items()}
            row = dict(first)
            row.update({"next_" + k: v for k, v in nxt.items()})
            row.update(flatten(p.actions, "action"))
            row["reward"] = p.rewards
            row["terminated"] = p.terminations
            row["truncated"] = p.truncations
            row["episode"] = np.full(n, ep, dtype=np.int64)
            row["step"] = np.arange(p.first_step, p.first_step + n, dtype=np.int64)
            for k, v in row.items():
                cols.setdefault(k, []).append(v)
    return {k: _join(where, v) for k, v in cols.items()}


def _episode_block(spec: TaskSpec) -> Any:
    """Episode rows of the episodes that start in this batch, joined from every batch they span."""
    owned = dict(spec.episodes)
    where = f"{spec.location}: {spec.batch.json_name}"
    found: dict[int, list[Any]] = {ep: [] for ep in owned}
    for info in (spec.batch, *spec.extra):
        for ep, ps in _parts(spec, info).items():
            if ep in found:
                found[ep].extend(ps)
    cols: dict[str, list[Any]] = {}
    for ep, meta in owned.items():
        parts = sorted(found[ep], key=lambda p: p.part)
        length = meta["length"]
        leaves = {}
        for name, attr in (("obs", "observations"), ("action", "actions")):
            per_part = [flatten(getattr(p, attr), name) for p in parts]
            for k in per_part[0]:
                leaves[k] = _join(where, [pp[k] for pp in per_part])
        for name, attr in (("reward", "rewards"), ("terminated", "terminations"),
                           ("truncated", "truncations")):
            leaves[name] = _join(where, [getattr(p, attr) for p in parts])
        # Cut to the snapshot: a part committed after it is not in this dataset.
        for k, v in leaves.items():
            rows = length + 1 if k.startswith("obs") else length
            leaves[k] = v[:rows]
        for k, v in leaves.items():
            cols.setdefault(k, []).append(v)
        for k in ("episode", "length", "return", "end", "seed", "env_id", "writer"):
            cols.setdefault(k, []).append(ep if k == "episode" else meta[k])
    out: dict[str, Any] = {}
    for k, v in cols.items():
        if k in ("episode", "length", "seed"):
            out[k] = (np.array(v, dtype=np.int64) if all(x is not None for x in v)
                      else np.array(v, dtype=object))
        elif k == "return":
            out[k] = np.array(v, dtype=np.float64)
        elif k in ("end", "env_id", "writer"):
            out[k] = np.array(v, dtype=object)
        else:
            out[k] = _ragged(v) if isinstance(v[0], np.ndarray) else _ragged(
                [np.array(x, dtype=object) for x in v])
    return out


def read_block(spec: TaskSpec) -> Iterator[Any]:
    """The block of one batch (none for a batch without rows): step or episode rows."""
    columns = _step_block(spec) if spec.granularity == "step" else _episode_block(spec)
    if columns:
        _conform(columns, dict(spec.dtypes), f"{spec.location}: {spec.batch.json_name}")
        yield _to_block(columns)


# -- leaves widened in some batches ----------------------------------------------------------

# How much of a batch JSON is read to find the dtypes of its first entry (the whole file when
# that entry is longer).
HINT_BYTES = 16 << 10
HINT_THREADS = 8
_EPISODES_KEY = '"episodes":['


def _stored_forms(obj: Any, name: str, out: dict[str, str]) -> None:
    """The dtype string (or "values") of each leaf of a stored TREE, by dotted column name."""
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _stored_forms(v, f"{name}.{i}", out)
    elif isinstance(obj, dict):
        kind = obj.get("__type")
        if kind == "ndarray" and isinstance(obj.get("dtype"), str):
            out[name] = obj["dtype"]
        elif kind == "values":
            out[name] = "values"
        elif kind is None:
            for k, v in obj.items():
                _stored_forms(v, f"{name}.{k}", out)


def _first_entry(storage: Any, name: str, size: int) -> Any:
    """The first entry of a batch JSON, read from its first bytes (None when it has none)."""
    head = storage.read_range(name, 0, min(size, HINT_BYTES))
    if len(head) < size:
        text = head.decode("utf-8", "replace")
        at = text.find(_EPISODES_KEY)
        if at >= 0:
            try:
                return json.JSONDecoder().raw_decode(text, at + len(_EPISODES_KEY))[0]
            except ValueError:
                pass  # (longer than the bytes read, or not our writer's layout: all of it)
        head = storage.read_range(name, 0, size)
    doc = json.loads(head)
    entries = doc.get("episodes") if isinstance(doc, dict) else None
    return entries[0] if isinstance(entries, list) and entries else None


def column_dtypes(storage: Any, infos: list[Any],
                  entries: dict[tuple[str, str], dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The dtype every block gives each observation and action leaf that batches store in
    different dtypes (a leaf widened in some batches, see "Trees" in the format): the dtype
    they join in. Widening applies to a whole batch, so each batch's first entry tells.

    Leaves stored as values in some batch, gym-recording batches and dtypes that do not join
    are left as each batch has them (a batch that cannot be read is refused by its task).
    """
    def batch_forms(info: Any) -> dict[str, str]:
        found: dict[str, str] = {}
        size = (entries.get((info.writer, info.json_name)) or {}).get("json_size")
        if not info.bin_name or type(size) is not int or not 0 < size <= MAX_JSON_BYTES:
            return found
        try:
            entry = _first_entry(storage, info.json_name, size)
            if isinstance(entry, dict):
                _stored_forms(entry.get("observations"), "obs", found)
                _stored_forms(entry.get("actions"), "action", found)
        except (OSError, ValueError, RecursionError):
            return {}  # (a hint only: the batch's task reads and checks the whole file)
        return found

    forms: dict[str, set[str]] = {}
    with ThreadPoolExecutor(HINT_THREADS) as pool:  # (object storage: one request a batch)
        for found in pool.map(batch_forms, infos):
            for name, form in found.items():
                forms.setdefault(name, set()).add(form)
    out = []
    for name, seen in forms.items():
        if len(seen) < 2 or "values" in seen:
            continue
        try:
            dtype = join_dtype([parse_dtype(d, name) for d in sorted(seen)], name)
        except FormatError:
            continue
        out.append((name, dtype.str))
    return tuple(out)


def _conform(columns: dict[str, Any], dtypes: dict[str, str], where: str) -> None:
    """Gives the leaves of ``dtypes`` in that dtype (each episode's array, for episode rows).

    Raises:
        UnsupportedValueError: when that dtype would round some value (int64 beyond 2**53
            here, float64 in another batch): no one tensor dtype holds the column.
    """
    for name, col in columns.items():
        target = dtypes.get(name[5:] if name.startswith("next_") else name)
        if target is None:
            continue
        dtype = np.dtype(target)

        def cast(a: np.ndarray) -> np.ndarray:
            if a.dtype == dtype:
                return a
            if not exact_in(a, dtype):
                raise UnsupportedValueError(
                    f"{where}: column {name} holds {a.dtype} values that {dtype}, its dtype in "
                    f"other batches, would round; read this recording with RecordingReader "
                    f"(which gives such a leaf as a list of rows)")
            return a.astype(dtype)

        if isinstance(col, np.ndarray) and col.dtype != object:
            columns[name] = cast(col)
        elif isinstance(col, np.ndarray):  # episode rows: one array an episode
            for i, a in enumerate(col):
                if isinstance(a, np.ndarray) and a.dtype != object:
                    col[i] = cast(a)
