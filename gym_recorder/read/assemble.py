"""Assembling episodes: the decoded parts of an episode made into one :class:`Episode`.

An episode of one part is its entry's arrays; one of several parts (see "Batch" in
:mod:`gym_recorder.format`) has each stacked array allocated once and every part's bytes read
straight into their rows, by :data:`READ_THREADS` threads when it is large. A whole-recording
column (:func:`stacked_column`, behind :meth:`RecordingReader.column`) is the same across
episodes: one array a leaf, every part of every episode read into its rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .columns import FastPart
from .batchfile import Batch
from .decode import Decoder
from .entries import STACKED, Part, PartData, act_layout, obs_layout
from .episode import Episode, EpisodeSummary
from ..errors import FormatError, UnsupportedSpaceError
from ..format import ENDS, ArrayRef, continues, join_dtype, parse_ref, rounding_dtypes
from .manifest import Manifest
from .outside import _mixed_leaves, join_leaf
from ..format.spaces import ArrayLeaf, Layout

__all__ = ["tree", "make_episode", "fast_episode", "single_episode", "stitched_episode",
           "summarize", "read_column", "stacked_column", "COLUMN_KINDS", "checked_refs",
           "read_rows", "allocate", "checked_parts", "PARALLEL_READ_BYTES", "READ_THREADS", "join_rows"]

# An episode of several parts with at least this many bytes of stacked arrays is read by
# READ_THREADS threads, part by part (page faults and copies of the fresh arrays then overlap:
# about 1.5x faster with two cores); smaller ones are read in this thread.
PARALLEL_READ_BYTES = 32 << 20
_new = object.__new__
READ_THREADS = 2


def tree(layout: Layout, leaves: list[Any]) -> Any:
    """The space-shaped value (an array, dict or tuple) of per-leaf values in leaf order."""
    return leaves[0] if layout.single else layout.unflatten(leaves)


def make_episode(m: Manifest, index: int, first: PartData, last: PartData, obs: list[Any],
                 act: list[Any],
                 rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray,
                 infos: list[dict[str, Any]]) -> Episode:
    """An Episode of the writer ``m``: metadata from its first and last parts."""
    return Episode(index=index, observations=tree(obs_layout(m), obs),
                   actions=tree(act_layout(m), act), rewards=rewards, terminations=terminations,
                   truncations=truncations, infos=infos, seed=first.seed, options=first.options,
                   env_id=m.env_id, end=last.end, sub_env=first.sub_env, writer=m.prefix,
                   no_reset=first.no_reset, multiagent=m.multiagent)


def fast_episode(m: Manifest, p: FastPart, index: int) -> Episode:
    """The Episode of one entry decoded column-wise: its arrays copied out of the batch's."""
    # Built without the frozen dataclass's __init__ (one object.__setattr__ per field): the
    # same fields, in the same order, as Episode(...) sets.
    episode = _new(Episode)
    episode.__dict__.update(
        index=index, observations=tree(obs_layout(m), [a.copy() for a in p.obs]),
        actions=tree(act_layout(m), [a.copy() for a in p.act]),
        rewards=p.rewards.copy(), terminations=p.terminations.copy(),
        truncations=p.truncations.copy(), infos=[{} for _ in range(p.info_rows)],
        seed=p.seed, options=None, env_id=m.env_id, end=p.end, sub_env=p.sub_env,
        writer=m.prefix, no_reset=p.no_reset, multiagent=m.multiagent)
    return episode


def single_episode(m: Manifest, p: PartData, index: int) -> Episode:
    """The Episode of one entry (an episode of one part)."""
    return make_episode(m, index, p, p, p.obs, p.act, *p.columns(), p.infos)


# One part of an episode as the reader finds it: (batch info, entry, part number, batch).
PartItem = tuple[dict[str, Any], dict[str, Any], int, Batch]


def stitched_episode(dec: Decoder, m: Manifest, items: list[PartItem],
                     index: int) -> Episode:
    """Reads an episode of several parts: each stacked array allocated once, read in place.

    Every part's references are checked (and every .bin's size) before anything is
    allocated or read; then each part's bytes are read straight into their rows of the
    episode's arrays. At most READ_THREADS .bin files are open at a time, however many
    parts the episode has.
    """
    parts, parsed = checked_parts(dec, m, items)
    # The stacked slots are the same in every part: the layout's array leaves, then the
    # three step columns, in that order.
    stacked = [slot[:2] for slot in parts[0].slots if slot[0] in STACKED]
    for part in parts[1:]:
        if [slot[:2] for slot in part.slots if slot[0] in STACKED] != stacked:
            if _mixed_leaves(part.slots, parts[0].slots):
                return _stitched_mixed(dec, m, parts, index)
            raise FormatError(f"{part.where}: holds other arrays than the episode's first "
                              "part")
    columns: dict[tuple[str, int], list[ArrayRef]] = {key: [] for key in stacked}
    for part, refs in zip(parts, parsed):
        for slot, ref_or_none in zip(part.slots, refs):
            if ref_or_none is not None:
                columns[slot[:2]].append(ref_or_none)
    joined = {key: _joined_dtype(parts[0].where, column) for key, column in columns.items()}
    exact = {key: dtype for key, dtype in joined.items() if dtype is not None}
    if len(exact) != len(joined):
        return _stitched_mixed(dec, m, parts, index)
    dests = {key: allocate(parts[0].where, column, exact[key])
             for key, column in columns.items()}
    # Where each part's rows go: the rows of the parts before it.
    jobs: list[ReadJob] = []
    filled = dict.fromkeys(stacked, 0)
    for part, refs in zip(parts, parsed):
        bin_name = part.binfo["bin"]
        for slot, ref_or_none, (_, w) in zip(part.slots, refs, part.refs):
            if ref_or_none is not None:
                key = slot[:2]
                jobs.append((bin_name, ref_or_none, w, dests[key], filled[key]))
                filled[key] += ref_or_none.shape[0]
    read_rows(dec, jobs, sum(out.nbytes for out in dests.values()))
    loaded = []
    for part in parts:
        loaded.append(dec.load_part(m, part, part.binfo["bin_size"], skip_stacked=True))

    def leaves(kind: str, count: int) -> list[Any]:
        return [dests[(kind, k)] if (kind, k) in dests
                else join_leaf(parts[0].where, [getattr(p, kind)[k] for p in loaded])
                for k in range(count)]

    return make_episode(m, index, loaded[0], loaded[-1],
                        leaves("obs", len(obs_layout(m).leaves)),
                        leaves("act", len(act_layout(m).leaves)),
                        dests[("rewards", 0)], dests[("terminations", 0)],
                        dests[("truncations", 0)], [row for p in loaded for row in p.infos])


def checked_parts(dec: Decoder, m: Manifest, items: list[PartItem]) -> tuple[
        list[Part], list[list[ArrayRef | None]]]:
    """Each part of an episode planned, and its stacked references checked against its .bin
    (every part's, before anything is allocated or read)."""
    parts = [dec.plan_part(m, binfo, entry, part_no) for binfo, entry, part_no, _ in items]
    return parts, [checked_refs(dec, part, dec.batch_size(batch, part.binfo))
                   for part, (_, _, _, batch) in zip(parts, items)]


def _stitched_mixed(dec: Decoder, m: Manifest, parts: list[Part], index: int) -> Episode:
    """An episode whose parts store a leaf both as arrays and as values (a value outside the
    space's shape arrived in a later part), or in dtypes that no one dtype may hold exactly
    (int64 beside float64): such a leaf comes back as a list of rows when it must
    (:func:`~gym_recorder.format.join_arrays`)."""
    loaded = [dec.load_part(m, part, part.binfo["bin_size"]) for part in parts]
    where = parts[0].where
    obs = [join_leaf(where, [p.obs[k] for p in loaded]) for k in range(len(obs_layout(m).leaves))]
    act = [join_leaf(where, [p.act[k] for p in loaded]) for k in range(len(act_layout(m).leaves))]
    return make_episode(m, index, loaded[0], loaded[-1], obs, act,
                        np.concatenate([p.rewards for p in loaded]),
                        np.concatenate([p.terminations for p in loaded]),
                        np.concatenate([p.truncations for p in loaded]),
                        [row for p in loaded for row in p.infos])


# The reader's lookups (writer, number): an episode's parts (never empty), and its
# column-decoded only part if the reader has one.
PartsLookup = Callable[[Manifest, int], list[PartItem]]
FastLookup = Callable[[Manifest, int], FastPart | None]
# The Episode fields a whole-recording column can be built of, and their kind of slot.
COLUMN_KINDS = {"observations": "obs", "actions": "act", "rewards": "rewards",
                "terminations": "terminations", "truncations": "truncations"}


def read_column(dec: Decoder, where: str, name: str, located: list[tuple[int, Manifest, int]],
                fast: FastLookup, parts: PartsLookup, episode: Callable[[int], Episode]) -> Any:
    """The ``name`` field of the located episodes (index, writer, number), joined in order.

    Array leaves of this format's writers are read by :func:`stacked_column`; anything else
    (gym-recording writers, leaves stored as values) is joined from the episodes themselves.

    Raises:
        UnsupportedSpaceError: if the episodes' writers lay the field out differently.
    """
    kind = COLUMN_KINDS[name]
    writers = {m.name: m for _, m, _ in located}  # each writer once (episodes share them)
    layouts = {key: (None if m.legacy else
                     obs_layout(m) if kind == "obs" else act_layout(m) if kind == "act"
                     else None) for key, m in writers.items()}
    signatures = {key: _signature(m.legacy, layouts[key]) for key, m in writers.items()}
    first_name = located[0][1].name
    for writer, sig in signatures.items():
        if sig != signatures[first_name]:
            raise UnsupportedSpaceError(f"{where}: writers {first_name} and {writer} "
                                        f"record {name} of different spaces; select the "
                                        "episodes of one of them")
    layout = layouts[first_name]
    count = 1 if layout is None else len(layout.leaves)
    leaves = None
    if not any(m.legacy for _, m, _ in located):
        leaves = stacked_column(dec, kind, count, ((m, number) for _, m, number in located),
                                fast, parts)
    if leaves is None:
        flatten: Callable[[Any], list[Any]] = (_one_leaf if layout is None
                                               else layout.flattener())
        values = [flatten(getattr(episode(index), name)) for index, _, _ in located]
        # (rows of other shapes: a gym-recording writer's refused by name; this format's
        # leaves outside their space come back as lists of rows)
        join = (join_rows if any(m.legacy for _, m, _ in located)
                else lambda where, name, cols: join_leaf(where, cols))
        leaves = [join(where, name, [v[k] for v in values]) for k in range(count)]
    return leaves[0] if layout is None else tree(layout, leaves)


def _one_leaf(value: Any) -> list[Any]:
    return [value]


def join_rows(where: str, name: str, columns: list[Any]) -> Any:
    """join_leaf, refusing by name arrays whose rows do not stack (gym-recording writers
    declare no space: their episodes may hold anything).

    Raises:
        UnsupportedSpaceError: naming ``where`` and ``name``, for rows that do not stack.
    """
    for c in columns:
        if not isinstance(c, (np.ndarray, list)) or (isinstance(c, np.ndarray) and c.ndim == 0):
            raise UnsupportedSpaceError(f"{where}: an episode holds {name} that are not rows "
                                        f"(a {type(c).__name__} of shape {np.shape(c)}); read "
                                        "its episodes one by one")
    arrays = [c for c in columns if isinstance(c, np.ndarray)]
    if len(arrays) == len(columns) and len({a.shape[1:] for a in arrays}) > 1:
        raise UnsupportedSpaceError(f"{where}: the episodes hold {name} rows of different "
                                    f"shapes ({', '.join(sorted({str(a.shape[1:]) for a in arrays}))}); "
                                    "select episodes of one shape")
    return join_leaf(where, columns)


def _signature(legacy: bool, layout: Layout | None) -> Any:
    """What two writers must share for one column of their episodes: each leaf's path and form
    (shape and dtype: int64 and uint64 leaves would meet in float64, which rounds)."""
    if layout is None:
        return "legacy" if legacy else None
    return [(path, (leaf.shape, str(leaf.dtype)) if isinstance(leaf, ArrayLeaf) else "values")
            for path, leaf in zip(layout.leaf_paths(), layout.leaves)]


def stacked_column(dec: Decoder, kind: str, leaves: int,
                   episodes: Iterable[tuple[Manifest, int]], fast: FastLookup,
                   parts: PartsLookup) -> list[np.ndarray] | None:
    """One stacked kind (``"obs"``, ``"act"``, ``"rewards"``...) of many episodes, one array a leaf.

    Every part of every episode (writer, number) is planned and checked first, keeping only
    the references of ``kind`` (or, for an episode the reader has decoded column-wise with its
    batch, the arrays of that decoding); then each leaf's array is allocated once, the
    episodes' rows one after another, and every part's bytes are read (or copied) straight
    into their rows. None when some part does not store every leaf of ``kind`` as an array (a
    Text leaf, values outside the space): the caller then joins the episodes' own values.
    """
    wanted = frozenset((kind,))
    columns: list[list[tuple[str, ArrayRef, str] | np.ndarray]] = [[] for _ in range(leaves)]
    first_where = ""
    for m, number in episodes:
        p = fast(m, number)
        if p is not None:
            arrays = p.obs if kind == "obs" else p.act if kind == "act" else [getattr(p, kind)]
            if len(arrays) != leaves or not all(isinstance(a, np.ndarray) for a in arrays):
                return None
            for column, a in zip(columns, arrays):
                column.append(a)
            first_where = first_where or f"{m.name} episode {number}"
            continue
        for binfo, entry, part_no, batch in parts(m, number):
            part = dec.plan_part(m, binfo, entry, part_no)
            first_where = first_where or part.where
            found = 0
            refs = checked_refs(dec, part, dec.batch_size(batch, binfo), wanted)
            for (slot_kind, k, _), ref, (_, w) in zip(part.slots, refs, part.refs):
                if ref is not None and slot_kind == kind:
                    columns[k].append((binfo["bin"], ref, w))
                    found += 1
            if found != leaves:
                return None
    held: list[list[ArrayRef | np.ndarray]] = [
        [s if isinstance(s, np.ndarray) else s[1] for s in column] for column in columns]
    joined = [_joined_dtype(first_where, column) for column in held]
    dtypes = [dtype for dtype in joined if dtype is not None]
    if len(dtypes) != len(joined):
        return None  # (the episodes' own leaves are joined, exactly or as rows)
    dests = [allocate(first_where, column, dtype) for column, dtype in zip(held, dtypes)]
    jobs: list[ReadJob] = []
    for column, out in zip(columns, dests):
        row = 0
        tail = out.shape[1:]
        run: list[np.ndarray] = []  # consecutive decoded arrays: copied in one concatenation
        for source in column:
            rows = source if isinstance(source, np.ndarray) else source[1]
            if rows.shape[1:] != tail:
                raise FormatError(f"{first_where}: the episodes store one {kind} leaf in rows "
                                  f"of different shapes ({rows.shape[1:]}, {tail})")
            if isinstance(source, np.ndarray):
                run.append(source)
            else:
                row = _copy_run(run, out, row)
                jobs.append((source[0], source[1], source[2], out, row))
            row += rows.shape[0]
        _copy_run(run, out, row)
    read_rows(dec, jobs, sum(job[1].size for job in jobs))
    return dests


def _copy_run(run: list[np.ndarray], out: np.ndarray, end: int) -> int:
    """Copies the arrays of ``run`` into the rows of ``out`` that end at ``end`` (their rows
    counted in it already), and empties the run; returns ``end``."""
    if run:
        start = end - sum(len(a) for a in run)
        np.concatenate(run, out=out[start:end], casting="unsafe")
        run.clear()
    return end


def summarize(dec: Decoder, m: Manifest, number: int, index: int,
              parts: list[PartItem]) -> EpisodeSummary:
    """The summary of writer m's episode ``number`` (reader index ``index``) from its parts
    (at least one), reading only their rewards."""
    length, total, end, seed, sub_env = 0, 0.0, None, None, None
    for binfo, entry, part_no, batch in parts:
        where = f"{binfo['fn']} entry {entry.get('index')}"
        steps = entry.get("steps")
        if type(steps) is not int or steps < 0:
            raise FormatError(f"{where}: 'steps' must be a non-negative integer")
        ref = entry.get("rewards")
        if not isinstance(ref, dict) or ref.get("__type") != "ndarray":
            raise FormatError(f"{where} rewards: expected an array reference")
        (rewards,) = dec.read_arrays(
            binfo["bin"], [(ref, f"{where} rewards")], aligned=True,
            expected_size=binfo["bin_size"],
            file_size=dec.batch_size(batch, binfo))
        if rewards.shape != (steps,) or rewards.dtype != np.float64:
            raise FormatError(f"{where} rewards: expected a float64 array of shape ({steps},)")
        length += steps
        total += float(rewards.sum())
        if part_no == 0:
            seed, sub_env = entry.get("seed"), entry.get("sub_env")
        end = None if continues(entry) else entry.get("end")
    if end is not None and end not in ENDS:
        raise FormatError(f"{m.name}: episode {number} has unknown end {end!r}")
    return EpisodeSummary(index, length, total,
                          end, seed if type(seed) is int else None,
                          sub_env if type(sub_env) is int else None, m.prefix, m.env_id)


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """The process's READ_THREADS reader threads (started once; a forked child starts its own)."""
    global _POOL
    pid = os.getpid()
    if _POOL is None or _POOL[0] != pid:
        _POOL = (pid, ThreadPoolExecutor(READ_THREADS, thread_name_prefix="gym_recorder-read"))
    return _POOL[1]


def allocate(where: str, column: Sequence[ArrayRef | np.ndarray],
             dtype: np.dtype[Any]) -> np.ndarray:
    """Allocates one stacked array (of an episode, or a column of episodes) of ``dtype`` for
    the rows of ``column``'s references or arrays."""
    shape = (sum(ref.shape[0] for ref in column), *column[0].shape[1:])
    try:
        return np.empty(shape, dtype=dtype)
    except (MemoryError, ValueError) as e:
        raise FormatError(f"{where}: cannot allocate an array of shape {shape} of "
                          f"{dtype.str} for the episode") from e


def _joined_dtype(where: str, column: Sequence[ArrayRef | np.ndarray]) -> np.dtype[Any] | None:
    """The dtype ``column``'s parts are joined in (a leaf widened in one batch, see "Trees"
    in the format: numbers mix, as do strings of one kind; FormatError for others), or None
    when it may not hold every value of theirs (int64 parts beside float64 ones: only their
    values can tell, :func:`~gym_recorder.format.join_arrays`)."""
    dtypes = [ref.dtype for ref in column]
    dtype = join_dtype(dtypes, where)
    return None if rounding_dtypes(dtypes, dtype) else dtype


def checked_refs(dec: Decoder, part: Part, file_size: int,
                 kinds: frozenset[str] = STACKED) -> list[ArrayRef | None]:
    """The references of a part's stacked arrays, each checked against its .bin, in slot order.

    ``file_size`` is the .bin's real size, already checked against the manifest
    (:meth:`Decoder.batch_size`: before anything is allocated). Checks each reference
    (:func:`parse_ref`), that its bytes lie inside the file, and its shape and dtype against
    the slot; None stands for a slot that is not stacked (read with the part's infos) or not
    of ``kinds``.
    """
    bin_name = part.binfo["bin"]
    refs: list[ArrayRef | None] = []
    for (obj, w), (kind, _, _) in zip(part.refs, part.slots):
        if kind not in STACKED or kind not in kinds:
            refs.append(None)
            continue
        ref = parse_ref(obj, w, file=bin_name)
        if ref.end > file_size:
            raise FormatError(f"{w}: bytes {ref.offset}..{ref.end} lie "
                              f"outside {bin_name} ({file_size} bytes)")
        refs.append(ref)
    dec.check_shapes(part, ((slot, ref.shape, ref.dtype, w)
                            for slot, ref, (_, w) in zip(part.slots, refs, part.refs)
                            if ref is not None))
    return refs


# One read into an allocated array: (.bin name, checked reference, where, array, first row).
ReadJob = tuple[str, ArrayRef, str, np.ndarray, int]


def read_rows(dec: Decoder, jobs: list[ReadJob], nbytes: int) -> None:
    """Runs reads into their rows: in this thread, or split over READ_THREADS threads when
    they fill at least PARALLEL_READ_BYTES. Returns when every read has ended; raises the
    first failure, in job order."""
    if nbytes < PARALLEL_READ_BYTES or len(jobs) < 2:
        for job in jobs:
            dec.read_rows(*job)
        return
    # Contiguous shares of about equal bytes, one per thread.
    shares: list[list[ReadJob]] = [[] for _ in range(READ_THREADS)]
    done, per = 0, nbytes / READ_THREADS
    for job in jobs:
        shares[min(int(done // per), READ_THREADS - 1)].append(job)
        done += job[1].size
    futures = [_pool().submit(_run, dec, share) for share in shares if share]
    for f in futures:
        f.exception()  # waits for every share, also when one of them failed
    for f in futures:
        f.result()


def _run(dec: Decoder, jobs: list[ReadJob]) -> None:
    for job in jobs:
        dec.read_rows(*job)

