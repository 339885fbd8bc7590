"""The stacked arrays of many episodes at once, through the batches' indexes, without their JSON.

A batch of short episodes has more JSON than array bytes: reading the step columns of 45,000
CartPole episodes through the batch files means parsing 50 MB of JSON for 36 MB of arrays. The
writer therefore puts in each BATCH of its manifest an INDEX ("Batch index" in
:mod:`gym_recorder.format`): every entry's episode, part, steps and flags in a small table in
the .bin, and for each stacked column its dtype, first offset and padding unit, from which every
entry's array is found. :func:`read_stacked` checks the indexes of the writers of a selection,
finds each selected episode's entries, and copies every column's rows into one array per column
with a few vectorised gathers a batch: no per-episode Python, no JSON.

This is only a fast path, taken when it gives exactly what the batch JSON would. It returns None
(the caller then reads the batch JSON) for a gym-recording writer, a batch without an index (a
leaf stored as values, an older writer, a batch ``repair`` wrote anew), an episode whose parts
link in a way only the JSON rules resolve (a gap ``repair`` left before its next part, a part
missing or given twice), a leaf whose dtype changes between batches (widened: the JSON path
joins it exactly), and a verifying reader (checksums cover the JSON's arrays). An index that does not check out (an offset outside the .bin, a table
whose CRC-32 or counts disagree with the manifest, a step column of the wrong dtype) is a
:class:`~gym_recorder.FormatError` naming the batch, as the same fault in the JSON is.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .assemble import tree
from .batchindex import exclusive_cumsum, read_index
from .decode import Decoder
from .gather import gather_rows, groups
from .plan import BatchPlan, index_plan
from .manifest import Manifest
from ..format.spaces import ArrayLeaf

__all__ = ["FIELDS", "Stacked", "read_stacked"]



@dataclass(frozen=True)
class Stacked:
    """Every selected episode's rows, one array per column, episodes one after another.

    Attributes:
        observations: (sum of N + 1, *shape) rows; dicts/tuples of them for Dict/Tuple spaces.
        actions: (sum of N, *shape) rows; dicts/tuples of them for Dict/Tuple spaces.
        rewards, terminations, truncations: (sum of N,) arrays.
        lengths: int64 steps N of each selected episode, in the selection's order.

    A field not asked for is None.
    """

    observations: Any
    actions: Any
    rewards: np.ndarray | None
    terminations: np.ndarray | None
    truncations: np.ndarray | None
    lengths: np.ndarray

    def step_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards, terminations and truncations (read: asked for)."""
        if self.rewards is None or self.terminations is None or self.truncations is None:
            raise ValueError("the step columns were not read")
        return self.rewards, self.terminations, self.truncations


class _Batch:
    """One batch whose index checked out, planned (:func:`~gym_recorder.read.plan.index_plan`),
    numbered among the batches read."""

    __slots__ = ("m", "number", "plan", "starts", "base")

    def __init__(self, m: Manifest, number: int, plan: BatchPlan, base: int) -> None:
        self.m = m
        self.number = number
        self.plan = plan
        self.starts = np.flatnonzero(plan.part == 0)  # the entries that start episodes
        self.base = base  # the number of its first entry among all batches read


FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")


def read_stacked(decoder: Decoder, manifests: Sequence[Manifest], starts: Sequence[int],
                 indices: Sequence[int], fields: Sequence[str] = FIELDS) -> Stacked | None:
    """The stacked columns of the episodes ``indices`` (reader indices, in that order), or None
    where the batch JSON must be read instead (see the module's docstring), also when their
    writers' spaces differ (the caller refuses the selection).

    Only the batches that hold a part of a selected episode are read: the batch that starts
    each (from the manifest's counts), then for an episode that continues the batches after
    it, as the batch JSON path finds them.

    Args:
        decoder: the reader's decoder (its storage; None is returned when it verifies).
        manifests: the reader's writers, in its order.
        starts: the reader index of each writer's first episode.
        indices: normalised reader indices (repeats allowed).
        fields: which of :data:`FIELDS` to read.

    Raises:
        FormatError: if an index needed does not check out.
    """
    if decoder.verify or not indices:
        return None
    sel = np.asarray(indices, dtype=np.int64)
    writer_of = np.searchsorted(np.asarray(starts, dtype=np.int64), sel, side="right") - 1
    plan = _Plan(decoder)
    first = np.empty(len(sel), dtype=np.int64)  # each selected episode's part 0, as an entry
    for k, mine in groups(writer_of):
        m = manifests[k]
        if m.legacy or m.obs_layout is None or m.act_layout is None or not all(
                isinstance(leaf, ArrayLeaf) for leaf in m.obs_layout.leaves + m.act_layout.leaves):
            return None
        numbers = sel[mine] - starts[k]
        if m.numbers is not None:  # positions among the shown episodes -> writer numbers
            numbers = m.numbers[numbers]
        # The batch that starts episode n: the last batch starting episodes whose first is <= n.
        starting = np.flatnonzero(np.asarray([m.new_episodes(b) for b in range(len(m.batches))],
                                             dtype=np.int64))
        batch_of = starting[np.searchsorted(np.asarray(m.starts, dtype=np.int64)[starting],
                                            numbers, side="right") - 1]
        for b, here in groups(batch_of):
            batch = plan.batch(m, b)
            if batch is None:
                return None
            first[mine[here]] = batch.base + batch.starts[numbers[here] - m.starts[b]]
    chosen, counts = plan.chains(first)
    if chosen is None:
        return None
    batches = plan.batches
    plans = [b.plan for b in batches]
    n_columns = len(plans[0].dtypes)
    m0 = batches[0].m
    shapes = plans[0].tails
    if any(len(p.dtypes) != n_columns or p.tails != shapes for p in plans):
        return None  # writers of other spaces (the caller refuses the selection)
    # Every column must have one dtype in every batch (a widened leaf is joined by the JSON
    # path, exactly).
    if any(len({p.dtypes[c] for p in plans}) != 1 for c in range(n_columns)):
        return None
    part = np.concatenate([p.part for p in plans])[chosen]
    steps = np.concatenate([p.steps for p in plans])[chosen]
    lengths = np.add.reduceat(steps, exclusive_cumsum(counts))
    obs_rows = steps + (part == 0)
    batch_of_entry = np.repeat(np.arange(len(batches), dtype=np.int64),
                               [len(p) for p in plans])[chosen]
    lay_o, lay_a = m0.obs_layout, m0.act_layout
    assert lay_o is not None and lay_a is not None  # (only writers of this format get here)
    n_obs, n_act = len(lay_o.leaves), len(lay_a.leaves)
    wanted = {"observations": range(n_obs), "actions": range(n_obs, n_obs + n_act),
              "rewards": [n_columns - 3], "terminations": [n_columns - 2],
              "truncations": [n_columns - 1]}
    out: list[np.ndarray | None] = [None] * n_columns
    for name in fields:
        for c in wanted[name]:
            rows = obs_rows if c < n_obs else steps
            offsets = np.concatenate([p.offsets[c] for p in plans])[chosen]
            out[c] = gather_rows(decoder, [p.bin_name for p in plans], batch_of_entry,
                                 offsets, rows, plans[0].dtypes[c], shapes[c])
    return Stacked(tree(lay_o, out[:n_obs]) if "observations" in fields else None,
                   tree(lay_a, out[n_obs:-3]) if "actions" in fields else None,
                   out[-3], out[-2], out[-1], lengths.astype(np.int64, copy=False))


class _Plan:
    """The batches read so far (each once), and the entries of the selected episodes."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.batches: list[_Batch] = []
        self._bases: list[int] = []  # each batch's base, ascending (for bisect)
        self._by_key: dict[tuple[str, int], _Batch | None] = {}
        self._entries = 0

    def batch(self, m: Manifest, b: int) -> _Batch | None:
        """Batch b of writer m with its index checked (None: it has none)."""
        key = (m.name, b)
        if key not in self._by_key:
            batch = _read_index(self.decoder, m, b, self._entries)
            self._by_key[key] = batch
            if batch is not None:
                self.batches.append(batch)
                self._bases.append(batch.base)
                self._entries += len(batch.plan)
        return self._by_key[key]

    def chains(self, first: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """Every selected episode's entries in part order (the parts after the first found in
        the batches that follow, as the JSON path finds them), and how many each has; None
        where only the JSON path can say (a gap, a part missing or given twice)."""
        flags = np.concatenate([b.plan.flags for b in self.batches])
        counts = np.ones(len(first), dtype=np.int64)
        going = np.flatnonzero(flags[first] & 1)
        extra: dict[int, list[int]] = {}
        for i in going.tolist():  # (episodes cut by a batch's end: few)
            chain = self._rest(int(first[i]))
            if chain is None:
                return None, counts
            extra[i] = chain
            counts[i] += len(chain)
        if not extra:
            return first, counts
        chosen = np.empty(int(counts.sum()), dtype=np.int64)
        at = exclusive_cumsum(counts)
        chosen[at] = first
        for i, chain in extra.items():
            chosen[at[i] + 1:at[i] + 1 + len(chain)] = chain
        return chosen, counts

    def _rest(self, entry: int) -> list[int] | None:
        """The entries of the parts after ``entry``'s, in order."""
        chain: list[int] = []
        while True:
            # (not a list of the bases built per part: a vector writer's episodes have a part
            # in nearly every batch, which made this quadratic in the batches)
            batch = self.batches[bisect.bisect_right(self._bases, entry) - 1]
            pos = entry - batch.base
            m, b = batch.m, batch.number
            if not batch.plan.flags[pos] & 1 or b + 1 == len(m.batches):
                return chain  # it ends here (in the writer's last batch: for now)
            if m.gap_before(b + 1):
                return None  # (the JSON path ends it there)
            nxt = self.batch(m, b + 1)
            if nxt is None:
                return None
            found = np.flatnonzero((nxt.plan.episode == batch.plan.episode[pos])
                                   & (nxt.plan.part == batch.plan.part[pos] + 1))
            if len(found) != 1:
                return None
            entry = nxt.base + int(found[0])
            chain.append(entry)


def _read_index(decoder: Decoder, m: Manifest, b: int, base: int) -> _Batch | None:
    """Reads and checks batch b's index (None when it has none)."""
    index = read_index(decoder.storage, m, b)
    if index is None:
        return None
    binfo = m.batches[b]
    plan = index_plan(m, index, binfo["bin"], binfo["bin_size"])
    return None if plan is None else _Batch(m, b, plan, base)
