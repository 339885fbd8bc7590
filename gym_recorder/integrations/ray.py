"""Ray: read a recording as a Ray Data dataset, record with many Ray actors, feed RLlib.

Install with ``pip install "gymnasium-recorder[ray]"`` (``ray[data]``); add ``[cloud]`` for URLs.

- :func:`read_recording` makes a :class:`ray.data.Dataset` from a recording directory or URL:
  one block per committed batch, read by tasks of consecutive batches (about
  :data:`TASK_BYTES` each; ``batches_per_task=1`` gives a task per batch). The batches are fixed
  when the dataset is made, from the manifests (never by listing files): a dataset is a snapshot,
  so a batch committed afterwards is wholly absent from it (and wholly present in a dataset made
  later), and a batch being written is never seen half. Rows come in the reader's order
  whatever Ray's scheduling: batch by batch as ``reader.batches()`` lists them, by episode and
  step inside a batch. For single-env writers
  that is exactly the order of iterating the reader, episode by episode, step by step; the
  sub-envs of a vector writer interleave batch by batch, as they were committed.
- :func:`record_parallel` records an env with ``num_workers`` Ray actors into one directory
  (in :mod:`gym_recorder.integrations.ray_record`, re-exported here).
- :func:`to_rllib` renames step columns to RLlib's offline-data columns.

The rows of one batch (one block) are built in :mod:`gym_recorder.integrations.ray_blocks`. Why tasks of
several batches: every read task costs Ray Data a round through its scheduler and object store
(about 10 ms each on a 2-CPU machine), so a task per 5 MB batch holds throughput to a few
hundred MB/s where tasks of 64 MB reach about twice that (``benchmarks/bench_ray.py``).

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
A leaf widened in some batches only (values outside the space's dtype: an env returning float64
at reset into a float32 Box) is given in the widened dtype in every block, as
``reader.column`` gives it (Ray Data does not concatenate blocks of different tensor dtypes): when
the dataset is made, the dtype each batch stores each leaf in is read from the batch's plan, as
the reader reads it (its index alone when it has one, else its JSON).
The rows are exactly what :class:`~gym_recorder.RecordingReader` gives:
``np.concatenate([ep.observations[:-1] for ep in reader])`` is the ``obs`` column of
``read_recording(path).iter_batches(batch_format="numpy")`` concatenated, and so on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import install_hint
from .ray_blocks import TaskSpec, read_block
from .ray_columns import check_columnar, column_dtypes
from .ray_record import ParallelSummary, record_parallel, worker_seeds

__all__ = ["read_recording", "RecordingDatasource", "record_parallel", "ParallelSummary",
           "to_rllib", "RLLIB_COLUMNS", "TASK_BYTES", "worker_seeds"]

GRANULARITIES = ("step", "episode")
# Read tasks hold consecutive batches up to about this many bytes of rows (batches_per_task=None).
TASK_BYTES = 64 << 20
# Step columns and RLlib's offline-data (SingleAgentEpisode) column names for them.
RLLIB_COLUMNS = {"obs": "obs", "next_obs": "new_obs", "action": "actions", "reward": "rewards",
                 "terminated": "terminateds", "truncated": "truncateds", "episode": "eps_id",
                 "step": "t"}


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(f"gym_recorder.integrations.ray needs Ray Data: {install_hint('ray')} ({e})") from e
    return ray


# -- the datasource ----------------------------------------------------------------------------


def _read_blocks(specs: tuple[TaskSpec, ...]) -> Iterator[Any]:
    """A read task's blocks: one per batch, in order (a batch without rows gives none)."""
    for spec in specs:
        yield from read_block(spec)


def _make_read_task(specs: tuple[TaskSpec, ...],
                    sizes: list[tuple[int | None, int | None]]) -> Any:
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    rows = [r for r, _ in sizes]
    nbytes = [b for _, b in sizes]
    meta = BlockMetadata(num_rows=None if None in rows else sum(r or 0 for r in rows),
                         size_bytes=None if None in nbytes else sum(b or 0 for b in nbytes),
                         input_files=None, exec_stats=None)
    return ReadTask(lambda: _read_blocks(specs), meta)


def _group(sizes: list[tuple[int | None, int | None]],
           batches_per_task: int | None) -> list[tuple[int, int]]:
    """Consecutive batches per read task, as [start, stop) ranges of the batches: a fixed
    number, or (None) up to :data:`TASK_BYTES` of rows; a batch of unknown size (a
    gym-recording batch) gets a task of its own."""
    if batches_per_task is not None:
        return [(a, min(a + batches_per_task, len(sizes)))
                for a in range(0, len(sizes), batches_per_task)]
    groups: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, (_, size) in enumerate(sizes):
        if i > start and (size is None or total + size > TASK_BYTES):
            groups.append((start, i))
            start, total = i, 0
        total += TASK_BYTES if size is None else size
    if start < len(sizes):
        groups.append((start, len(sizes)))
    return groups


def _check_batches_per_task(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"batches_per_task must be None or a positive int, got {value!r}")
    return int(value)


_DATASOURCE: type | None = None


def _datasource_class() -> type:
    """Makes :class:`RecordingDatasource` (a subclass of ``ray.data.Datasource``) on first use,
    so that importing this module does not import Ray."""
    global _DATASOURCE
    if _DATASOURCE is not None:
        return _DATASOURCE
    ray = _ray()

    class _RecordingDatasource(ray.data.Datasource):  # type: ignore[misc, name-defined]
        """A recording as a Ray Data datasource: one block per committed batch.

        The batches, and for episode rows the episodes' metadata, are taken from the manifests
        when the datasource is made (a snapshot). A read task reads ``batches_per_task``
        consecutive batches, or (None) consecutive batches up to :data:`TASK_BYTES` of rows.
        """

        def __init__(self, location: str, *, granularity: str = "step",
                     storage_options: dict[str, Any] | None = None, verify: bool = False,
                     batches_per_task: int | None = None) -> None:
            super().__init__()
            from ..read.reader import RecordingReader

            if granularity not in GRANULARITIES:
                raise ValueError(f"granularity must be one of {GRANULARITIES}, got "
                                 f"{granularity!r}")
            per_task = _check_batches_per_task(batches_per_task)
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
                manifests = _manifests(reader.storage)
                entries = {(m.prefix, b["fn"]): b for m in manifests for b in m.batches}
                dtypes = column_dtypes(reader.storage, infos, manifests)
            self._specs: list[TaskSpec] = []
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
                self._specs.append(TaskSpec(location, storage_options, verify, granularity,
                                             info, extra, eps, dtypes))
                self._sizes.append(_estimate(entries.get((info.writer, info.json_name)),
                                             eps, granularity))
            self._groups = _group(self._sizes, per_task)

        @property
        def tasks(self) -> int:
            """The number of read tasks."""
            return len(self._groups)

        @property
        def task_batches(self) -> list[int]:
            """How many batches each read task reads, in order."""
            return [b - a for a, b in self._groups]

        @property
        def batches(self) -> int:
            """The number of batches read (for episode rows: the batches where episodes start)."""
            return len(self._specs)

        def estimate_inmemory_data_size(self) -> int | None:
            sizes = [size for _, size in self._sizes]
            return None if None in sizes else sum(s for s in sizes if s is not None)

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[Any]:
            return [_make_read_task(tuple(self._specs[a:b]), self._sizes[a:b])
                    for a, b in self._groups]

        def get_name(self) -> str:
            return "Recording"

    _RecordingDatasource.__name__ = _RecordingDatasource.__qualname__ = "RecordingDatasource"
    _RecordingDatasource.__module__ = __name__
    _DATASOURCE = _RecordingDatasource
    return _DATASOURCE


def __getattr__(name: str) -> Any:
    # RecordingDatasource(location, *, granularity="step", storage_options=None, verify=False,
    # batches_per_task=None):
    # the datasource behind read_recording, for ray.data.read_datasource.
    if name == "RecordingDatasource":
        return _datasource_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _summary_dict(s: Any) -> dict[str, Any]:
    return {"length": int(s.length), "return": float(s.total_reward), "end": s.end,
            "seed": s.seed, "env_id": s.env_id, "writer": s.writer}


def _manifests(storage: Any) -> list[Any]:
    """Every writer's manifest, for the sizes of the read tasks and the plans of the batches
    (the manifests are read again: the reader keeps its own to itself)."""
    from ..read.manifest import load_manifests

    return load_manifests(storage)


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
                   batches_per_task: int | None = None, **read_args: Any) -> Any:
    """A recording as a Ray Data dataset, one block per committed batch.

    Example::

        ds = read_recording("recordings/cartpole")
        for batch in ds.iter_batches(batch_format="numpy"):
            batch["obs"], batch["action"], batch["reward"]

    Args:
        path_or_url: a recording directory, or any fsspec URL (``s3://bucket/rec``).
        granularity: ``"step"`` (one row per transition) or ``"episode"`` (one per episode).
        storage_options: passed to the fsspec filesystem of a URL.
        verify: check every array's CRC-32 as it is read.
        batches_per_task: consecutive batches each read task reads; None (the default) groups
            them up to :data:`TASK_BYTES` (64 MB) of rows a task, 1 gives a task per batch.
        **read_args: passed to :func:`ray.data.read_datasource` (e.g. ``concurrency``).

    Returns:
        A :class:`ray.data.Dataset` that preserves the reader's row order.

    Raises:
        FormatError: if the recording is malformed.
        UnsupportedValueError: for spaces with no column form (Sequence, Graph, OneOf).
        ValueError: for an unknown granularity or a bad ``batches_per_task``.
    """
    ray = _ray()
    location = os.fspath(path_or_url)
    source = _datasource_class()(location, granularity=granularity,
                                 storage_options=storage_options, verify=verify,
                                 batches_per_task=batches_per_task)
    if source.tasks and "parallelism" not in read_args:
        # The tasks' blocks as they are: left to itself, Ray Data would split each task's
        # output in up to 200 / tasks pieces (its default minimum of blocks), each piece costing
        # a round through the object store and scheduler for nothing.
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
