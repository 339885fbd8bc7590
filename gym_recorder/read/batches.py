"""A recording batch by batch: which episodes each batch holds, and one batch decoded once.

:func:`list_batches` tells from the manifests alone which episodes have a part in each batch
(a single-env writer's batch continues at most the episode its previous batch ended with); a
vector writer's sub-environments interleave, so for its batches that continue episodes the
batch files before them are read (:class:`OpenEpisodes`). :func:`decode_batch` reads a batch's
.bin in one read and hands out each entry as an :class:`~gym_recorder.read.episode.EpisodePart`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .assemble import PartItem, plain_meta, plan_episode, tree
from .batchfile import Batch
from .decode import Decoder, gc_paused
from .entries import act_layout, obs_layout
from .episode import BatchInfo, Episode, EpisodePart
from ..errors import FormatError
from ..format import continues
from .legacy import legacy_episode
from .manifest import Manifest

__all__ = ["OpenEpisodes", "list_batches", "decode_batch", "episode_parts", "episode_items",
           "iterate", "hold_bin"]

# While iterating (or fetching a second episode of a batch), a batch whose entries are small (at most this many bytes of arrays each on
# average) has its whole .bin read once, so that iterating small episodes costs one read per
# batch instead of one per array; episodes copy their bytes out.
SMALL_ENTRY_BYTES = 64 << 10
# ...if the .bin is at most this large (the default batch target is 5 MB).
WHOLE_BIN_MAX_BYTES = 8 << 20

# writer episode id -> (the writer's episode number, the part number expected next, the index
# in the episode of that part's first step)
Open = dict[int, tuple[int, int, int]]


def episode_parts(m: Manifest, number: int, b: int,
                  batch_of: Callable[[Manifest, int], Batch]) -> Iterator[PartItem]:
    """Yields (batch info, entry, part number, batch) for each part of writer m's episode
    ``number``, from batch b on (``batch_of`` parses a batch, e.g. through a cache)."""
    part_no = 0
    episode_id = number
    # The part-0 entry is in batch b, or (if b starts no episode) a later one. It is found
    # by its position among the batch's part-0 entries, so that batches moved aside by
    # repair (a gap in the entry numbers) do not shift the episodes after them.
    while b < len(m.batches):
        batch = batch_of(m, b)
        if part_no == 0:
            k = number - m.starts[b]
            if not 0 <= k < len(batch.starts):
                b += 1
                continue
            pos = batch.starts[k]
            episode_id = batch.entries[pos]["episode"]
        else:
            found = batch.by_episode.get((episode_id, part_no))
            if found is None:
                if m.gap_before(b):
                    break  # the next part was in a batch that is gone: the episode ends here
                raise FormatError(f"{m.batches[b]['fn']}: episode {number} part {part_no} "
                                  "missing")
            pos = found
        entry = batch.entries[pos]
        yield m.batches[b], entry, part_no, batch
        if not continues(entry):
            break
        part_no += 1
        b += 1


def episode_items(m: Manifest, number: int,
                  batch_of: Callable[[Manifest, int], Batch]) -> list[PartItem]:
    """Every part of writer m's episode ``number`` (:func:`episode_parts` from its first batch).

    Raises:
        FormatError: if none of its batches holds it.
    """
    items = list(episode_parts(m, number, m.first_batch(number), batch_of))
    if not items:
        raise FormatError(f"{m.name}: episode {number} not found in its batches")
    return items


def iterate(manifests: list[Manifest], starts: list[int], count: int, dec: Decoder,
            batch_of: Callable[[Manifest, int], Batch], fetch: Callable[[int], Episode],
            stale: Callable[[], bool]) -> Iterator[Episode]:
    """Every episode of a reader in order, as ``fetch`` (its indexing) gives them.

    An episode of one part is made here through its batch's plan, from the batch's .bin read
    once when its entries are small; any other is fetched. When ``stale()`` (the reader was
    refreshed or closed), the rest is fetched, up to the count the iteration started with.
    """
    for k, m in enumerate(manifests):
        index = starts[k]
        batch: Batch | None = None
        binfo: dict[str, Any] = {}
        lo = hi = 0  # the writer's numbers of the episodes the batch starts
        for number in m.shown_numbers():
            number = int(number)
            if stale():
                for i in range(index, count):
                    yield fetch(i)
                return
            episode = None
            if not m.legacy:
                if batch is None or not lo <= number < hi:
                    b = m.first_batch(number)
                    batch, binfo = batch_of(m, b), m.batches[b]
                    lo = m.starts[b]
                    hi = lo + len(batch.starts)
                    if batch.plan is not None:
                        batch.plan.check_all()  # (read whole: every entry at once)
                        hold_bin(dec, batch, binfo)
                if lo <= number < hi:
                    entry = batch.entries[batch.starts[number - lo]]
                    if not continues(entry):
                        episode = plan_episode(dec, m, [(binfo, entry, 0, batch)], index)
            yield fetch(index) if episode is None else episode
            index += 1


def hold_bin(dec: Decoder, batch: Batch, binfo: dict[str, Any]) -> None:
    """Reads a batch's whole .bin into memory (``batch.data``, dropped when the batch leaves the
    reader's cache) if its entries are small: episodes are then copied out of it, one read a
    batch instead of one per array. Only where the bytes come from changes: the plan is the
    same."""
    if batch.data is None and batch.plan is not None:
        size = dec.batch_size(batch, binfo)
        if size <= WHOLE_BIN_MAX_BYTES and size <= len(batch.entries) * SMALL_ENTRY_BYTES:
            batch.data = dec.read_exact(binfo["bin"], 0, size)


def check_starts(m: Manifest, b: int, batch: Batch) -> None:
    """Checks that batch b starts as many episodes as its manifest entry says."""
    if len(batch.starts) != m.batches[b]["episodes"]:
        raise FormatError(f"{m.batches[b]['fn']}: {len(batch.starts)} entries start an "
                          f"episode, the manifest says {m.batches[b]['episodes']}")


class OpenEpisodes:
    """The episodes still open when each batch starts, worked out from the batches before it
    and remembered per batch (until the reader refreshes).

    Args:
        batch_of: returns the parsed batch b of a writer (the reader's cache).
    """

    def __init__(self, batch_of: Callable[[Manifest, int], Batch]) -> None:
        self._batch_of = batch_of
        self._memo: dict[tuple[str, int], Open] = {}

    def at(self, m: Manifest, b: int) -> Open:
        """The episodes whose next part batch b must hold."""
        memo = self._memo
        c = b
        state: Open | None = None
        exact = True  # whether `state` is what batch c must continue (else only what matters)
        # Walk back to a batch whose open episodes are known: remembered, the first, after a
        # gap, or after a batch that continues no episode; or to one whose open episodes do
        # not matter for what follows it (a single-env batch that starts an episode).
        while state is None:
            prev = m.batches[c - 1] if c else None
            if (m.name, c) in memo:
                state = memo[(m.name, c)]
            elif prev is None or m.gap_before(c):
                state = {}
            elif prev["len"] == prev["episodes"]:
                c -= 1
                state = {}
            elif m.vector is None and prev["episodes"]:
                c -= 1
                state, exact = {}, False
            else:
                c -= 1
        while True:
            if exact:
                memo[(m.name, c)] = state
            exact = True
            if c == b:
                return state
            state = self._after(m, c, state)
            c += 1
            if m.gap_before(c):
                state = {}

    def _after(self, m: Manifest, c: int, state: Open) -> Open:
        """The episodes open after batch c, given those open before it."""
        binfo = m.batches[c]
        if (m.vector is None and binfo["len"] == 1 and binfo["episodes"] == 0 and len(state) == 1
                and c + 1 < len(m.batches) and not m.gap_before(c + 1)
                and m.batches[c + 1]["len"] > m.batches[c + 1]["episodes"]):
            # A single-env batch holding only the next part of the open episode, which goes
            # on in the next batch: its steps are the batch's, no need to read it (the batch
            # that holds the part read checks the episode and part it finds).
            ((ep_id, (number, part_no, first)),) = state.items()
            return {ep_id: (number, part_no + 1, first + binfo["steps"])}
        batch = self._batch_of(m, c)
        check_starts(m, c, batch)
        after: Open = {}
        rank = 0
        for entry in batch.entries:
            steps = entry.get("steps")
            if type(steps) is not int or steps < 0:
                raise FormatError(f"{m.batches[c]['fn']} entry {entry.get('index')}: "
                                  "'steps' must be a non-negative integer")
            part_no, ep_id = entry["part"], entry["episode"]
            if part_no == 0:
                number, first = m.starts[c] + rank, 0
                rank += 1
            else:
                number, expected, first = state.get(ep_id, (-1, -1, 0))
                if expected != part_no:
                    continue  # an episode the reader does not show
            if continues(entry):
                after[ep_id] = (number, part_no + 1, first + steps)
        return after


def list_batches(manifests: list[Manifest], starts: list[int],
                 open_episodes: OpenEpisodes) -> list[BatchInfo]:
    """Every batch of the writers, in the reader's order (``starts``: each writer's first
    episode index in the reader)."""
    out: list[BatchInfo] = []
    for m, base in zip(manifests, starts):
        simple = m.legacy or (m.vector is None and all(
            b["len"] - b["episodes"] <= 1 for b in m.batches))
        open_no: int | None = None  # single-env: the episode that may continue into batch b
        for b, binfo in enumerate(m.batches):
            new = m.new_episodes(b)
            cont: list[int] = []
            if not m.legacy and binfo["len"] > new and not m.gap_before(b):
                if simple:
                    cont = [] if open_no is None else [open_no]
                else:
                    cont = sorted(number for number, _, _ in open_episodes.at(m, b).values())
            if new:
                open_no = m.starts[b] + new - 1
            elif not cont:
                open_no = None
            shown = [base + k for k in map(m.position, cont + list(
                range(m.starts[b], m.starts[b] + new))) if k >= 0]  # (not deleted by an edit)
            out.append(BatchInfo(m.prefix, b, binfo["fn"], "" if m.legacy else binfo["bin"],
                                 tuple(shown),
                                 None if m.legacy else binfo.get("json_crc32")))
    return out


def decode_batch(dec: Decoder, m: Manifest, b: int, base: int, batch: Batch,
                 open_episodes: OpenEpisodes) -> list[EpisodePart]:
    """Decodes batch b of writer ``m`` (whose first episode is the reader's ``base``)."""
    with gc_paused():
        return _decode_batch(dec, m, b, base, batch, open_episodes)


def _decode_batch(dec: Decoder, m: Manifest, b: int, base: int, batch: Batch,
                  open_episodes: OpenEpisodes) -> list[EpisodePart]:
    if m.legacy:
        parts = []
        for pos in range(m.batches[b]["len"]):
            shown = m.position(m.starts[b] + pos)
            if shown < 0:
                continue  # deleted by an edit
            ep = legacy_episode(dec, m, batch, b, pos, base + shown)
            parts.append(EpisodePart(ep.index, 0, 0, ep.observations, ep.actions, ep.rewards,
                                     ep.terminations, ep.truncations, ep.infos, True))
        return parts
    binfo = m.batches[b]
    check_starts(m, b, batch)
    opened = dict(open_episodes.at(m, b))
    size = dec.batch_size(batch, binfo)
    data = dec.read_exact(binfo["bin"], 0, size)
    last = b + 1 >= len(m.batches) or m.gap_before(b + 1)
    plan = batch.plan
    if plan is not None:
        plan.check_all()
    parts = []
    rank = 0
    for pos, entry in enumerate(batch.entries):
        part_no = entry["part"]
        if part_no == 0:
            number, first_step = m.starts[b] + rank, 0
            rank += 1
        else:
            number, expected, first_step = opened.pop(entry["episode"], (-1, -1, 0))
            if expected != part_no:
                continue  # an episode the reader does not show
        shown = m.position(number)
        if shown < 0:
            continue  # deleted by an edit
        rows = int(entry["steps"]) + (part_no == 0)
        arrays = None
        if plan is not None and plan.usable(pos) and plain_meta(entry, rows) is not None:
            arrays = [plan.view(c, pos, data) for c in range(len(plan.dtypes))]
            if dec.verify and not plan.verified(pos, arrays):
                arrays = None  # (the entry path names the array whose checksum differs)
        if arrays is not None:
            assert plan is not None
            n_obs = plan.n_obs
            parts.append(EpisodePart(base + shown, part_no, first_step,
                                     tree(obs_layout(m), arrays[:n_obs]),
                                     tree(act_layout(m), arrays[n_obs:-3]), arrays[-3],
                                     arrays[-2], arrays[-1],
                                     [{} for _ in range(rows)],
                                     not continues(entry) or last))
            continue
        p = dec.load_part(m, dec.plan_part(m, binfo, entry, part_no), size, data=data,
                          copy=False)
        parts.append(EpisodePart(base + shown, part_no, first_step, tree(obs_layout(m), p.obs),
                                 tree(act_layout(m), p.act), *p.columns(), p.infos, not continues(entry) or last))
    for number, part_no, _ in opened.values():
        raise FormatError(f"{binfo['fn']}: episode {number} part {part_no} missing")
    return parts
