"""Assembling episodes: the decoded parts of an episode made into one :class:`Episode`.

An episode of one part is its entry's arrays; one of several parts (see "Batch" in
:mod:`gym_recorder.format`) has each stacked array allocated once and every part's bytes read
straight into their rows, by :data:`READ_THREADS` threads when it is large. A whole-recording
column (:mod:`gym_recorder.read.wholecolumn`, behind :meth:`RecordingReader.column`) is the
same across episodes, with this module's reads: one array a leaf, every part of every episode
read into its rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .columns import FastPart
from .batchfile import Batch
from .decode import Decoder
from .entries import STACKED, Part, PartData, act_layout, obs_layout
from .episode import Episode, EpisodeSummary
from ..errors import FormatError
from ..format import ENDS, ArrayRef, continues, join_dtype, parse_ref, rounding_dtypes
from .manifest import Manifest
from .outside import _mixed_leaves, join_leaf
from ..format.spaces import Layout

__all__ = ["tree", "make_episode", "fast_episode", "single_episode", "stitched_episode",
           "summarize", "checked_refs", "read_rows", "allocate", "checked_parts",
           "PARALLEL_READ_BYTES", "READ_THREADS"]

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

