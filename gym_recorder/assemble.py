"""Assembling episodes: the decoded parts of an episode made into one :class:`Episode`.

An episode of one part is its entry's arrays; one of several parts (see "Batch" in
:mod:`gym_recorder.format`) has each stacked array allocated once and every part's bytes read
straight into their rows, by :data:`READ_THREADS` threads when it is large.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .columns import FastPart
from .decode import STACKED, Batch, Decoder, Part, PartData, act_layout, obs_layout
from .episode import Episode
from .errors import FormatError
from .format import ArrayRef, parse_ref
from .manifest import Manifest
from .outside import _mixed_leaves, join_leaf
from .spaces import Layout

__all__ = ["tree", "make_episode", "fast_episode", "single_episode", "stitched_episode", "PARALLEL_READ_BYTES",
           "READ_THREADS"]

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
                   no_reset=first.no_reset)


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
        writer=m.prefix, no_reset=p.no_reset)
    return episode


def single_episode(m: Manifest, p: PartData, index: int) -> Episode:
    """The Episode of one entry (an episode of one part)."""
    return make_episode(m, index, p, p, p.obs, p.act, *p.columns(), p.infos)


def stitched_episode(dec: Decoder, m: Manifest, items: list[tuple[dict[str, Any], dict[str, Any], int, Batch]],
                     index: int) -> Episode:
    """Reads an episode of several parts: each stacked array allocated once, read in place.

    Every part's references are checked (and every .bin's size) before anything is
    allocated or read; then each part's bytes are read straight into their rows of the
    episode's arrays. At most READ_THREADS .bin files are open at a time, however many
    parts the episode has.
    """
    parts = [dec.plan_part(m, binfo, entry, part_no) for binfo, entry, part_no, _ in items]
    parsed: list[list[ArrayRef | None]] = []
    for part in parts:
        binfo = part.binfo
        bin_name, bin_size = binfo["bin"], binfo["bin_size"]
        dec.check_bin(bin_name, bin_size)  # the real size, before allocating
        refs: list[ArrayRef | None] = []
        for (obj, w), (kind, _, _) in zip(part.refs, part.slots):
            if kind not in STACKED:
                refs.append(None)  # read (and checked) with the part's infos
                continue
            ref = parse_ref(obj, w, file=bin_name)
            if ref.offset + ref.size > bin_size:
                raise FormatError(f"{w}: bytes {ref.offset}..{ref.offset + ref.size} lie "
                                  f"outside {bin_name} ({bin_size} bytes)")
            refs.append(ref)
        dec.check_shapes(part, ((slot, ref.shape, ref.dtype, w)
                                  for slot, ref, (_, w) in zip(part.slots, refs, part.refs)
                                  if ref is not None))
        parsed.append(refs)
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
    dests = {key: _allocate(parts[0].where, column) for key, column in columns.items()}
    # Where each part's rows go: the rows of the parts before it.
    jobs = []
    filled = dict.fromkeys(stacked, 0)
    for part, refs in zip(parts, parsed):
        rows = []
        for slot, ref_or_none, (_, w) in zip(part.slots, refs, part.refs):
            if ref_or_none is not None:
                key = slot[:2]
                rows.append((ref_or_none, w, dests[key], filled[key]))
                filled[key] += ref_or_none.shape[0]
        jobs.append((part, rows))
    if sum(out.nbytes for out in dests.values()) >= PARALLEL_READ_BYTES:
        # Leaving the with block waits for every read, also when one of them failed.
        with ThreadPoolExecutor(READ_THREADS) as pool:
            for _ in pool.map(lambda job: _read_part_rows(dec, job), jobs):
                pass
    else:
        for job in jobs:
            _read_part_rows(dec, job)
    loaded = []
    for part in parts:
        loaded.append(dec.load_part(m, part, part.binfo["bin_size"], skip_stacked=True))

    def leaves(kind: str, count: int) -> list[Any]:
        return [dests[(kind, k)] if (kind, k) in dests
                else [x for p in loaded for x in getattr(p, kind)[k]] for k in range(count)]

    return make_episode(m, index, loaded[0], loaded[-1],
                        leaves("obs", len(obs_layout(m).leaves)),
                        leaves("act", len(act_layout(m).leaves)),
                        dests[("rewards", 0)], dests[("terminations", 0)],
                        dests[("truncations", 0)], [row for p in loaded for row in p.infos])


def _stitched_mixed(dec: Decoder, m: Manifest, parts: list[Part], index: int) -> Episode:
    """An episode whose parts store a leaf both as arrays and as values (a value outside the
    space's shape arrived in a later part): that leaf comes back as a list of rows."""
    loaded = [dec.load_part(m, part, part.binfo["bin_size"]) for part in parts]
    obs = [join_leaf([p.obs[k] for p in loaded]) for k in range(len(obs_layout(m).leaves))]
    act = [join_leaf([p.act[k] for p in loaded]) for k in range(len(act_layout(m).leaves))]
    return make_episode(m, index, loaded[0], loaded[-1], obs, act,
                        np.concatenate([p.rewards for p in loaded]),
                        np.concatenate([p.terminations for p in loaded]),
                        np.concatenate([p.truncations for p in loaded]),
                        [row for p in loaded for row in p.infos])


def _allocate(where: str, column: list[ArrayRef]) -> np.ndarray:
    """Allocates one stacked array of an episode, of the parts' (common) dtype."""
    dtypes = [ref.dtype for ref in column]
    dtype = dtypes[0]
    if any(d != dtype for d in dtypes):
        # A leaf widened in one batch (see "Trees" in the format): numbers mix, as do
        # strings of one kind; numbers and strings do not.
        kinds = {d.kind for d in dtypes}
        if not (kinds <= set("biufc") or kinds == {"U"} or kinds == {"S"}):
            raise FormatError(f"{where}: the episode's parts store one leaf with dtypes "
                              f"that do not mix: {sorted({d.str for d in dtypes})}")
        dtype = np.result_type(*dtypes)
    shape = (sum(ref.shape[0] for ref in column), *column[0].shape[1:])
    try:
        return np.empty(shape, dtype=dtype)
    except (MemoryError, ValueError) as e:
        raise FormatError(f"{where}: cannot allocate an array of shape {shape} of "
                          f"{dtype.str} for the episode") from e

def _read_part_rows(dec: Decoder, job: tuple[Part, list[Any]]) -> None:
    """Reads one part's stacked arrays into their rows of the episode's arrays."""
    part, rows = job
    bin_name = part.binfo["bin"]
    for ref, where, out, row in rows:
        dec.read_rows(bin_name, ref, where, out, row)
