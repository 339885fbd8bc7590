"""Assembling episodes: the decoded parts of an episode made into one :class:`Episode`.

An episode of one part is its entry's arrays; one of several parts (see "Batch" in
:mod:`gym_recorder.format`) has each stacked array allocated once and every part's bytes read
straight into their rows, by :data:`READ_THREADS` threads when it is large. A whole-recording
column (:mod:`gym_recorder.read.wholecolumn`, behind :meth:`RecordingReader.column`) is the
same across episodes, with this module's reads: one array a leaf, every part of every episode
read into its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .batchfile import Batch
from .decode import Decoder
from .gather import ReadJob, read_rows
from .entries import STACKED, Part, PartData, act_layout, obs_layout
from .episode import Episode, EpisodeSummary
from ..errors import FormatError
from ..format import ENDS, ArrayRef, continues, entry_end, join_dtype, parse_ref, rounding_dtypes
from .manifest import Manifest
from .outside import _mixed_leaves, join_leaf
from ..format.spaces import Layout

__all__ = ["tree", "make_episode", "episode_of", "plan_episode", "stitched_episode",
           "summarize", "checked_refs", "allocate", "checked_parts"]

_new = object.__new__


def tree(layout: Layout, leaves: list[Any]) -> Any:
    """The space-shaped value (an array, dict or tuple) of per-leaf values in leaf order."""
    return leaves[0] if layout.single else layout.unflatten(leaves)


# The metadata an episode takes from its parts: (seed, options, sub_env, no_reset) of the first,
# end of the last.
Meta = tuple[int | None, Any, int | None, bool]


def make_episode(m: Manifest, index: int, first: PartData, last: PartData, obs: list[Any],
                 act: list[Any],
                 rewards: np.ndarray, terminations: np.ndarray, truncations: np.ndarray,
                 infos: list[dict[str, Any]]) -> Episode:
    """An Episode of the writer ``m``: metadata from its first and last parts."""
    return episode_of(m, index, obs, act, rewards, terminations, truncations, infos,
                      (first.seed, first.options, first.sub_env, first.no_reset), last.end)


def episode_of(m: Manifest, index: int, obs: list[Any], act: list[Any], rewards: np.ndarray,
               terminations: np.ndarray, truncations: np.ndarray, infos: list[dict[str, Any]],
               first: Meta, end: str | None) -> Episode:
    """The one constructor of a reader's Episode (of this format's writers): its per-leaf
    observations and actions, step columns and infos; metadata from its first part and the
    end of its last."""
    seed, options, sub_env, no_reset = first
    # Built without the frozen dataclass's __init__ (one object.__setattr__ per field): the
    # same fields, in the same order, as Episode(...) sets.
    episode = _new(Episode)
    episode.__dict__.update(
        index=index, observations=tree(obs_layout(m), obs), actions=tree(act_layout(m), act),
        rewards=rewards, terminations=terminations, truncations=truncations, infos=infos,
        seed=seed, options=options, env_id=m.env_id, end=end, sub_env=sub_env,
        writer=m.prefix, no_reset=no_reset, multiagent=m.multiagent)
    return episode


def plan_episode(dec: Decoder, m: Manifest, items: list[PartItem], index: int) -> Episode | None:
    """An episode read through its batches' plans (:mod:`gym_recorder.read.plan`): each stacked
    array allocated once and its parts' rows copied in (from a .bin held in memory) or read
    straight into them; only those rows' bytes are read. None when it must be read entry by
    entry: a part without a plan (or not ``ok`` in it), a verifying reader's episode of several
    parts or whose checksums differ (the entry path names the array), or a leaf whose parts'
    dtypes no one dtype holds exactly."""
    if len(items) == 1:  # (most episodes: without the loops over parts)
        binfo, entry, part_no, batch = items[0]
        plan = batch.plan
        if plan is None or not plan.usable(entry["index"] - binfo["first"]):
            return None
        rows = entry["steps"] + (part_no == 0)
        meta = plain_meta(entry, rows)
        if meta is not None:
            if batch.file_size is None:
                dec.batch_size(batch, binfo)
            pos = entry["index"] - binfo["first"]
            arrays = plan.arrays(pos, dec.storage, batch.data)
            if dec.verify and not plan.verified(pos, arrays):
                return None  # (the entry path names the array whose checksum differs)
            n_obs = plan.n_obs
            return episode_of(m, index, arrays[:n_obs], arrays[n_obs:-3], arrays[-3],
                              arrays[-2], arrays[-1], [{} for _ in range(rows)], meta,
                              entry_end(entry, ""))
    if dec.verify:
        return None  # (several parts: checksums checked entry by entry)
    placed = []
    for binfo, entry, _, batch in items:
        plan = batch.plan
        pos = entry["index"] - binfo["first"]
        if plan is None or not plan.usable(pos):
            return None
        placed.append((plan, pos, batch))
    for (binfo, _, _, batch) in items:
        if batch.file_size is None:
            dec.batch_size(batch, binfo)  # (every .bin's size checked before anything is read)
    if len(placed) == 1:
        plan, pos, batch = placed[0]
        arrays = plan.arrays(pos, dec.storage, batch.data)
    else:
        plans = [plan for plan, _, _ in placed]
        where = f"{items[0][0]['fn']} entry {items[0][1].get('index')}"
        dtypes = []
        for c in range(len(plans[0].dtypes)):
            column = [plan.dtypes[c] for plan in plans]
            dtype = column[0] if len(set(column)) == 1 else join_dtype(column, where)
            if rounding_dtypes(column, dtype):
                return None
            dtypes.append(dtype)
        arrays = _gathered(dec, placed, dtypes, where)
    infos: list[dict[str, Any]] = []
    first: Meta | None = None
    end = None
    for (binfo, entry, part_no, batch), (plan, pos, _) in zip(items, placed):
        rows = entry["steps"] + (part_no == 0)
        meta = plain_meta(entry, rows)
        if meta is None:
            p = dec.load_part(m, dec.plan_part(m, binfo, entry, part_no),
                              dec.batch_size(batch, binfo), skip_stacked=True)
            meta, end_here, part_infos = (p.seed, p.options, p.sub_env, p.no_reset), p.end, p.infos
        else:
            end_here = entry_end(entry, "")  # (checked by _plain)
            part_infos = [{} for _ in range(rows)]
        infos.extend(part_infos)
        first = first or meta
        end = end_here
    assert first is not None
    n_obs = placed[0][0].n_obs
    return episode_of(m, index, arrays[:n_obs], arrays[n_obs:-3], arrays[-3], arrays[-2],
                      arrays[-1], infos, first, end)


def plain_meta(entry: dict[str, Any], rows: int) -> Meta | None:
    """An entry's metadata when it holds no infos, no options and well-formed keys (else None:
    the entry's own reading checks and decodes them)."""
    infos, seed, sub_env, end = (entry.get("infos"), entry.get("seed"), entry.get("sub_env"),
                                 entry.get("end"))
    if (type(infos) is not dict or infos.get("keys") != [] or infos.get("rows") != rows
            or entry.get("options") is not None or (seed is not None and type(seed) is not int)
            or (sub_env is not None and type(sub_env) is not int)
            or (end is not None and end not in ENDS)):
        return None
    return seed, None, sub_env, entry.get("no_reset") is True


def _gathered(dec: Decoder, placed: list[tuple[Any, int, Batch]], dtypes: list[np.dtype[Any]],
              where: str) -> list[np.ndarray]:
    """Each column of an episode of several parts: allocated once, every part's rows read
    straight into it (part by part, so that each reading thread takes whole parts)."""
    refs = [[plan.ref(c, pos) for c in range(len(dtypes))] for plan, pos, _ in placed]
    out = [allocate(dec, where, [part[c] for part in refs], dtype) for c, dtype in enumerate(dtypes)]
    jobs: list[ReadJob] = []
    rows = [0] * len(dtypes)
    for part in refs:
        for c, ref in enumerate(part):
            jobs.append((ref.file, ref, where, out[c], rows[c]))
            rows[c] += ref.shape[0]
    read_rows(dec, jobs, sum(a.nbytes for a in out))
    return out


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
    dests = {key: allocate(dec, parts[0].where, column, exact[key])
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


# The reader's lookup (writer, number): an episode's parts (never empty).
PartsLookup = Callable[[Manifest, int], list[PartItem]]

def summarize(dec: Decoder, m: Manifest, number: int, index: int,
              parts: list[PartItem]) -> EpisodeSummary:
    """The summary of writer m's episode ``number`` (reader index ``index``) from its parts
    (at least one), reading only their rewards."""
    length, total, end, seed, sub_env = 0, 0.0, None, None, None
    for binfo, entry, part_no, batch in parts:
        plan = None if dec.verify else batch.plan
        pos = entry["index"] - binfo["first"]
        if plan is not None and plan.usable(pos):  # (its rewards checked with the batch)
            dec.batch_size(batch, binfo)
            rewards = plan.array(len(plan.dtypes) - 3, pos, dec.storage, batch.data)
            length += len(rewards)
            total += float(rewards.sum())
            if part_no == 0:
                seed, sub_env = entry.get("seed"), entry.get("sub_env")
            end = None if continues(entry) else entry.get("end")
            continue
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


def allocate(dec: Decoder, where: str, column: Sequence[ArrayRef | np.ndarray],
             dtype: np.dtype[Any]) -> np.ndarray:
    """Allocates one stacked array (of an episode, or a column of episodes) of ``dtype`` for
    the rows of ``column``'s references or arrays (on the reader's recycled pages when large)."""
    shape = (sum(ref.shape[0] for ref in column), *column[0].shape[1:])
    try:
        return dec.pages.empty(shape, np.dtype(dtype))
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
