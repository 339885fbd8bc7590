"""The blocks of :mod:`gym_recorder.integrations.ray`'s read tasks: step and episode rows of one batch.

A :class:`TaskSpec` names one committed batch (one block of a read task, which reads one or
several consecutive batches) and the batches before or after it that its rows need.
:func:`read_block` decodes them through the reader of this worker process
(:meth:`~gym_recorder.RecordingReader.read_batch`, the reader's own batch decoding) and lays the
rows out as columns: step rows (obs, next_obs, action, reward, terminated, truncated, episode,
step) or episode rows (variable-shaped tensors and the episode's metadata), Dict and Tuple leaves
as dotted columns. Which tasks a recording has, and in which order, is
:class:`gym_recorder.integrations.ray.RecordingDatasource`'s job; how leaves become columns (names,
dtypes, Ray's block) is :mod:`.ray_columns`'.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FormatError, RecorderError
from ..read.outside import join_leaf
from .ray_columns import conform, flatten, ragged, to_block

__all__ = ["TaskSpec", "read_block"]


def _rows(leaf: Any, start: int, stop: int) -> Any:
    return leaf[start:stop]


def _join(where: str, pieces: list[Any]) -> Any:
    return pieces[0] if len(pieces) == 1 else join_leaf(where, pieces)


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
            out[k] = ragged(v) if isinstance(v[0], np.ndarray) else ragged(
                [np.array(x, dtype=object) for x in v])
    return out


def read_block(spec: TaskSpec) -> Iterator[Any]:
    """The block of one batch (none for a batch without rows): step or episode rows."""
    columns = _step_block(spec) if spec.granularity == "step" else _episode_block(spec)
    if columns:
        conform(columns, dict(spec.dtypes), f"{spec.location}: {spec.batch.json_name}")
        yield to_block(columns)
