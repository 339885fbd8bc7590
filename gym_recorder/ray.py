"""Ray: read a recording as a Ray Data dataset, record with many Ray actors, feed RLlib.

Install with ``pip install "gymnasium-recorder[ray]"`` (``ray[data]``); add ``[cloud]`` for URLs.

- :func:`read_recording` makes a :class:`ray.data.Dataset` from a recording directory or URL,
  with one read task per committed batch. The tasks are fixed when the dataset is made, from the
  manifests (never by listing files): a dataset is a snapshot, so a batch committed afterwards is
  wholly absent from it (and wholly present in a dataset made later), and a batch being written is
  never seen half. Rows come in the reader's order whatever Ray's scheduling: batch by batch as
  ``reader.batches()`` lists them, by episode and step inside a batch. For single-env writers
  that is exactly the order of iterating the reader, episode by episode, step by step; the
  sub-envs of a vector writer interleave batch by batch, as they were committed.
- :func:`record_parallel` records an env with ``num_workers`` Ray actors into one directory
  (in :mod:`gym_recorder.ray_record`, re-exported here).
- :func:`to_rllib` renames step columns to RLlib's offline-data columns.

Step rows (``granularity="step"``), one per transition::

    obs, next_obs      the observation before and after the step
    action             the action
    reward             float64
    terminated, truncated   bool
    episode            the reader's episode index
    step               the index of the step in its episode (0 first)

Episode rows (``granularity="episode"``), one per episode: ``obs`` (N + 1 rows), ``action``,
``reward``, ``terminated``, ``truncated`` (N rows each) as variable-shaped tensors, and the
metadata ``episode``, ``length``, ``return``, ``end``, ``seed``, ``env_id``, ``writer`` (``end``,
``seed``, ``env_id`` are null where the reader gives None).

Dict and Tuple spaces give one column per leaf, named with dots (``obs.position``,
``action.0``); Box, Discrete, MultiDiscrete and MultiBinary leaves are tensor columns with the
recorded dtype, Text leaves string columns. Sequence, Graph and OneOf leaves have no column form:
:func:`read_recording` refuses them with :class:`~gym_recorder.errors.UnsupportedValueError`.
The rows are exactly what :class:`~gym_recorder.RecordingReader` gives:
``np.concatenate([ep.observations[:-1] for ep in reader])`` is the ``obs`` column of
``read_recording(path).iter_batches(batch_format="numpy")`` concatenated, and so on.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import RecorderError, UnsupportedValueError
from .ray_record import ParallelSummary, record_parallel, worker_seeds

__all__ = ["read_recording", "RecordingDatasource", "record_parallel", "ParallelSummary",
           "to_rllib", "RLLIB_COLUMNS", "worker_seeds"]

GRANULARITIES = ("step", "episode")
# Step columns and RLlib's offline-data (SingleAgentEpisode) column names for them.
RLLIB_COLUMNS = {"obs": "obs", "next_obs": "new_obs", "action": "actions", "reward": "rewards",
                 "terminated": "terminateds", "truncated": "truncateds", "episode": "eps_id",
                 "step": "t"}


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(f"gym_recorder.ray needs Ray Data: pip install "
                          f"\"gymnasium-recorder[ray]\" ({e})") from e
    return ray


# -- columns ---------------------------------------------------------------------------------


def _stackable(space: Any) -> bool:
    from gymnasium import spaces

    return isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                              spaces.MultiBinary))


def check_columnar(space: Any, where: str) -> None:
    """Refuses a space with leaves that have no column form (Sequence, Graph, OneOf...).

    Raises:
        UnsupportedValueError: naming the leaf.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        for k, s in space.spaces.items():
            check_columnar(s, f"{where}.{k}")
    elif isinstance(space, spaces.Tuple):
        for i, s in enumerate(space.spaces):
            check_columnar(s, f"{where}.{i}")
    elif not (_stackable(space) or isinstance(space, spaces.Text)):
        raise UnsupportedValueError(f"{where}: a {type(space).__name__} space has no column form "
                                    f"in a Ray dataset (read it with RecordingReader)")


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


def _join(pieces: list[Any]) -> Any:
    if isinstance(pieces[0], np.ndarray):
        return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    out: list[Any] = []
    for p in pieces:
        out.extend(p)
    return out


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


# -- the datasource ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _TaskSpec:
    """What one read task reads: its batch, the batches before or after it that it needs."""

    location: str
    storage_options: dict[str, Any] | None
    verify: bool
    granularity: str
    batch: Any                     # the task's BatchInfo
    extra: tuple[Any, ...] = ()              # (BatchInfo, ...) other batches it reads
    episodes: tuple[Any, ...] = ()           # episode granularity: (reader index, summary dict) it owns


_READERS: dict[str, Any] = {}
_READERS_LOCK = threading.Lock()


def _reader_for(spec: _TaskSpec) -> Any:
    """This worker process's reader of a recording (opened once, refreshed when needed)."""
    from .reader import RecordingReader

    key = json.dumps([spec.location, spec.storage_options, spec.verify], sort_keys=True,
                     default=str)
    with _READERS_LOCK:
        reader = _READERS.get(key)
        if reader is None:
            kwargs: dict[str, Any] = {"verify": spec.verify}
            if spec.storage_options is not None:
                kwargs["storage_options"] = spec.storage_options
            reader = _READERS[key] = RecordingReader(spec.location, **kwargs)
    return reader


def _parts(spec: _TaskSpec, info: Any) -> dict[int, list[Any]]:
    """The parts of one batch by *snapshot* episode index (a newer reader may number differently:
    the episodes of a batch are mapped by position onto the snapshot's ``info.episodes``)."""
    reader = _reader_for(spec)
    with _READERS_LOCK:
        try:
            parts = reader.read_batch(info)
        except ValueError:  # not a batch of this reader (a FormatError is one too)
            reader.refresh()  # it was opened before the snapshot was taken: learn its batches
            parts = reader.read_batch(info)
    new = sorted({p.episode for p in parts})
    if len(new) != len(info.episodes):
        raise RecorderError(f"{spec.location}: batch {info.json_name} holds {len(new)} episodes, "
                            f"the snapshot says {len(info.episodes)}")
    to_snapshot = dict(zip(new, info.episodes))
    out: dict[int, list[Any]] = {}
    for p in sorted(parts, key=lambda p: (p.episode, p.part)):
        out.setdefault(to_snapshot[p.episode], []).append(p)
    return out


# (recording, writer, batch JSON name, position of the episode in the batch's episodes) ->
# (part number, {obs leaf: its last row}) of the last part of an episode that goes on after a
# batch read in this process: what the read task of the batch that continues the episode needs
# from it, so that it need not decode that batch again when the same worker has read it. Keyed
# by position, not episode index: batches never change, the reader's numbering may between
# snapshots. Bounded (the oldest are dropped).
_LAST_ROWS: OrderedDict[tuple[str, str, str, int], tuple[int, dict[str, Any]]] = OrderedDict()
_LAST_ROWS_MAX = 256


def _last_key(spec: _TaskSpec, info: Any, ep: int) -> tuple[str, str, str, int]:
    return (spec.location, info.writer, info.json_name, info.episodes.index(ep))


def _remember_last_rows(spec: _TaskSpec, info: Any, parts: dict[int, list[Any]]) -> None:
    with _READERS_LOCK:
        for ep, ps in parts.items():
            last = max(ps, key=lambda q: q.part)
            if last.is_last:
                continue
            # Copies: views would keep the whole batch's bytes alive.
            rows = {k: _join([_rows(v, len(v) - 1, len(v))]) for k, v in
                    flatten(last.observations, "obs").items()}
            rows = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in rows.items()}
            key = _last_key(spec, info, ep)
            _LAST_ROWS[key] = (last.part, rows)
            _LAST_ROWS.move_to_end(key)
        while len(_LAST_ROWS) > _LAST_ROWS_MAX:
            _LAST_ROWS.popitem(last=False)


def _before(spec: _TaskSpec, mine: dict[int, list[Any]]) -> dict[int, tuple[int, dict[str, Any]]]:
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


def _step_block(spec: _TaskSpec) -> Any:
    """Step rows of one batch (obs of a continuing part's first step from the batch before)."""
    mine = _parts(spec, spec.batch)
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
                first = {k: _join([last[k], _rows(v, 0, n - 1)]) for k, v in obs.items()}
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
    return {k: _join(v) for k, v in cols.items()}


def _episode_block(spec: _TaskSpec) -> Any:
    """Episode rows of the episodes that start in this batch, joined from every batch they span."""
    owned = dict(spec.episodes)
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
                leaves[k] = _join([pp[k] for pp in per_part])
        for name, attr in (("reward", "rewards"), ("terminated", "terminations"),
                           ("truncated", "truncations")):
            leaves[name] = _join([getattr(p, attr) for p in parts])
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


def _read(spec: _TaskSpec) -> Iterator[Any]:
    columns = _step_block(spec) if spec.granularity == "step" else _episode_block(spec)
    if columns:
        yield _to_block(columns)


def _make_read_task(spec: _TaskSpec, rows: int | None, size: int | None) -> Any:
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    meta = BlockMetadata(num_rows=rows, size_bytes=size, input_files=None, exec_stats=None)
    return ReadTask(lambda: _read(spec), meta)


_DATASOURCE: type | None = None


def _datasource_class() -> type:
    """Makes :class:`RecordingDatasource` (a subclass of ``ray.data.Datasource``) on first use,
    so that importing this module does not import Ray."""
    global _DATASOURCE
    if _DATASOURCE is not None:
        return _DATASOURCE
    ray = _ray()

    class _RecordingDatasource(ray.data.Datasource):  # type: ignore[misc, name-defined]
        """A recording as a Ray Data datasource: one read task per committed batch.

        The batches, and for episode rows the episodes' metadata, are taken from the manifests
        when the datasource is made (a snapshot).
        """

        def __init__(self, location: str, *, granularity: str = "step",
                     storage_options: dict[str, Any] | None = None, verify: bool = False) -> None:
            super().__init__()
            from .reader import RecordingReader

            if granularity not in GRANULARITIES:
                raise ValueError(f"granularity must be one of {GRANULARITIES}, got "
                                 f"{granularity!r}")
            kwargs: dict[str, Any] = {"verify": verify}
            if storage_options is not None:
                kwargs["storage_options"] = storage_options
            with RecordingReader(location, **kwargs) as reader:
                if len(reader):
                    check_columnar(reader.observation_space, "obs")
                    check_columnar(reader.action_space, "action")
                infos = list(reader.batches())
                summaries = {s.index: s for s in reader.summaries()} \
                    if granularity == "episode" else {}
                entries = _manifest_entries(reader.storage)
            self._specs: list[_TaskSpec] = []
            self._sizes: list[tuple[int | None, int | None]] = []
            seen: dict[int, int] = {}   # episode -> index of the last batch holding a part
            owner: dict[int, int] = {}  # episode -> the batch its first part is in
            for i, info in enumerate(infos):
                for ep in info.episodes:
                    owner.setdefault(ep, i)
            for i, info in enumerate(infos):
                if granularity == "step":
                    extra = tuple(infos[seen[ep]] for ep in info.episodes
                                  if ep in seen and owner[ep] < i)
                    extra = tuple(dict.fromkeys(extra))
                    eps: tuple[Any, ...] = ()
                else:
                    owned = [ep for ep in info.episodes if owner[ep] == i]
                    later = sorted({j for j in range(i + 1, len(infos))
                                    if set(infos[j].episodes) & set(owned)})
                    extra = tuple(infos[j] for j in later)
                    eps = tuple((ep, _summary_dict(summaries[ep])) for ep in owned)
                for ep in info.episodes:
                    seen[ep] = i
                if granularity == "episode" and not eps:
                    continue
                self._specs.append(_TaskSpec(location, storage_options, verify, granularity,
                                             info, extra, eps))
                self._sizes.append(_estimate(entries.get((info.writer, info.json_name)),
                                             eps, granularity))

        @property
        def tasks(self) -> int:
            """The number of read tasks."""
            return len(self._specs)

        def estimate_inmemory_data_size(self) -> int | None:
            sizes = [size for _, size in self._sizes]
            return None if None in sizes else sum(s for s in sizes if s is not None)

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[Any]:
            return [_make_read_task(spec, rows, size)
                    for spec, (rows, size) in zip(self._specs, self._sizes)]

        def get_name(self) -> str:
            return "Recording"

    _RecordingDatasource.__name__ = _RecordingDatasource.__qualname__ = "RecordingDatasource"
    _RecordingDatasource.__module__ = __name__
    _DATASOURCE = _RecordingDatasource
    return _DATASOURCE


def __getattr__(name: str) -> Any:
    # RecordingDatasource(location, *, granularity="step", storage_options=None, verify=False):
    # the datasource behind read_recording, for ray.data.read_datasource.
    if name == "RecordingDatasource":
        return _datasource_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _summary_dict(s: Any) -> dict[str, Any]:
    return {"length": int(s.length), "return": float(s.total_reward), "end": s.end,
            "seed": s.seed, "env_id": s.env_id, "writer": s.writer}


def _manifest_entries(storage: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Every writer's manifest entries by (writer prefix, batch JSON name), for the sizes of
    the read tasks (the manifests are read again: the reader keeps its own to itself)."""
    from .manifest import load_manifests

    return {(m.prefix, b["fn"]): b for m in load_manifests(storage) for b in m.batches}


def _estimate(entry: dict[str, Any] | None, eps: tuple[Any, ...],
              granularity: str) -> tuple[int | None, int | None]:
    """(rows, bytes in memory) of a read task's block, as told to Ray. Rows only where exact
    (Ray counts a dataset from them): one per episode the task owns; a batch's step rows are
    its steps that the reader shows, which its manifest entry need not be. Bytes from the
    batch's .bin size (step rows carry each observation twice)."""
    rows = len(eps) if granularity == "episode" else None
    size = None if entry is None else entry.get("bin_size")  # None: not in the 2nd reading
    if type(size) is not int:
        return rows, None
    return rows, size if granularity == "episode" else 2 * size


def read_recording(path_or_url: str | os.PathLike[str], *, granularity: str = "step",
                   storage_options: dict[str, Any] | None = None, verify: bool = False,
                   **read_args: Any) -> Any:
    """A recording as a Ray Data dataset, one read task per committed batch.

    Example::

        ds = read_recording("recordings/cartpole")
        for batch in ds.iter_batches(batch_format="numpy"):
            batch["obs"], batch["action"], batch["reward"]

    Args:
        path_or_url: a recording directory, or any fsspec URL (``s3://bucket/rec``).
        granularity: ``"step"`` (one row per transition) or ``"episode"`` (one per episode).
        storage_options: passed to the fsspec filesystem of a URL.
        verify: check every array's CRC-32 as it is read.
        **read_args: passed to :func:`ray.data.read_datasource` (e.g. ``concurrency``).

    Returns:
        A :class:`ray.data.Dataset` that preserves the reader's row order.

    Raises:
        FormatError: if the recording is malformed.
        UnsupportedValueError: for spaces with no column form (Sequence, Graph, OneOf).
        ValueError: for an unknown granularity.
    """
    ray = _ray()
    location = os.fspath(path_or_url)
    source = _datasource_class()(location, granularity=granularity,
                                 storage_options=storage_options, verify=verify)
    if source.tasks and "parallelism" not in read_args:
        # One block per read task: left to itself, Ray Data would split each task's block in
        # up to 200 / tasks pieces (its default minimum of blocks), each piece costing a round
        # through the object store and scheduler for nothing.
        read_args.setdefault("override_num_blocks", source.tasks)
    ds = ray.data.read_datasource(source, **read_args)
    ds.context.execution_options.preserve_order = True
    return ds


# -- RLlib -----------------------------------------------------------------------------------


def to_rllib(dataset: Any) -> Any:
    """Renames a step dataset's columns to RLlib's offline columns.

    ``obs, new_obs, actions, rewards, terminateds, truncateds, eps_id, t``; dotted leaf columns
    keep their leaf names (``obs.position`` stays, ``next_obs.position`` becomes
    ``new_obs.position``, ``action.0`` becomes ``actions.0``).

    Args:
        dataset: a dataset from ``read_recording(..., granularity="step")``.

    Returns:
        The renamed dataset (order preserved).

    Raises:
        ValueError: if the dataset lacks the step columns.
    """
    names = dataset.columns()
    mapping: dict[str, str] = {}
    for name in names:
        head, dot, rest = name.partition(".")
        if head not in RLLIB_COLUMNS:
            raise ValueError(f"to_rllib needs a step dataset from read_recording; column "
                             f"{name!r} is not one of its columns")
        mapping[name] = RLLIB_COLUMNS[head] + dot + rest
    missing = [c for c in ("reward", "terminated", "truncated", "episode", "step")
               if c not in names]
    if missing:
        raise ValueError(f"to_rllib needs a step dataset; missing columns {missing}")
    out = dataset.rename_columns(mapping)
    out.context.execution_options.preserve_order = True
    return out
