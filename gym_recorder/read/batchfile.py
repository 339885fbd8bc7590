"""A batch file parsed: its JSON checked against the manifest (and its batch index held to it),
and planned (:mod:`gym_recorder.read.plan`), once; its .bin's bytes held in memory while its
small entries are read (:func:`~gym_recorder.read.batches.hold_bin`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BatchIndexError, ChecksumError, FormatError
from ..format import check_flags
from ..format import fileio as _fileio
from .batchindex import STEP_NAMES, check_entries, read_index
from .decode import Decoder, gc_paused
from .entries import act_layout, obs_layout
from .manifest import Manifest, read_json
from .plan import BatchPlan, plan_batch
from ..format.spaces import ArrayLeaf
from .storage import Storage

__all__ = ["Batch", "parse_batch", "EntryRefs"]


class Batch:
    """One parsed and structurally checked batch file, and its .bin's bytes once read whole.

    The .bin file's size is checked once against the manifest, when first read from (the
    storage keeps the file open, so that reading many small episodes does not open it for
    each). Arrays handed out never depend on the batch: they are read into memory they own.
    """

    def __init__(self, entries: list[Any], by_episode: dict[tuple[int, int], int],
                 starts: list[int] | None = None, plan: BatchPlan | None = None) -> None:
        self.entries = entries
        self.by_episode = by_episode  # (writer episode id, part) -> position
        self.starts = starts if starts is not None else []  # positions of part-0 entries
        self.file_size: int | None = None  # the .bin's size, once checked
        self.data: np.ndarray | None = None  # the whole .bin, for small entries read again
        self.fetches = 0  # episodes fetched from it by indexing
        # Where every entry's stacked arrays lie (:mod:`gym_recorder.read.plan`), or None: the
        # batch is read entry by entry.
        self.plan = plan

    def close(self) -> None:
        """Drops the batch's bytes held in memory."""
        self.data = None


def parse_batch(storage: Storage, m: Manifest, b: int) -> Batch:
    """Reads batch ``b`` of a writer and checks its structure against the manifest.

    Raises:
        FormatError: if the file is missing, of the wrong size or malformed.
        ChecksumError: if its CRC-32 is not the manifest's.
    """
    info = m.batches[b]
    where = info["fn"]
    with gc_paused():  # (the JSON's objects all stay alive: nothing for the collector)
        data, doc = read_json(storage, info["fn"], None if m.legacy else info["json_size"])
    if not m.legacy and _fileio.crc32(data) != info["json_crc32"]:
        raise ChecksumError(f"{where}: CRC-32 does not match the manifest")
    if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
        raise FormatError(f"{where}: a batch must be an object with an 'episodes' list")
    entries = doc["episodes"]
    if len(entries) != info["len"]:
        raise FormatError(f"{where}: {len(entries)} entries, the manifest says {info['len']}")
    by_episode = {}
    said: list[tuple[int, int, int, int]] = []  # (episode, part, steps, flags), for the index
    for pos, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise FormatError(f"{where} entry {pos}: must be an object")
        if not m.legacy:
            ep, part = entry.get("episode"), entry.get("part")
            if type(ep) is not int or type(part) is not int or ep < 0 or part < 0:
                raise FormatError(f"{where} entry {pos}: bad 'episode' or 'part'")
            if entry.get("index") != info["first"] + pos:
                raise FormatError(f"{where} entry {pos}: 'index' is not {info['first'] + pos}")
            steps = entry.get("steps")
            if type(steps) is not int or steps < 0:
                raise FormatError(f"{where} entry {entry['index']}: 'steps' must be a "
                                  "non-negative integer")
            goes, no_reset = entry.get("continues", False), entry.get("no_reset", False)
            if type(goes) is not bool or type(no_reset) is not bool:
                check_flags(entry, f"{where} entry {entry['index']}")  # (raises, naming it)
            by_episode[(ep, part)] = pos
            said.append((ep, part, steps, goes + 2 * no_reset))
    starts = [pos for pos, entry in enumerate(entries) if entry.get("part") == 0]
    if not m.legacy and len(starts) != info["episodes"]:
        # The reader numbers episodes by the manifests' counts: a count that disagrees with
        # the entries would shift or drop episodes silently.
        raise FormatError(f"{where}: {len(starts)} entries start an episode, the manifest "
                          f"says {info['episodes']}")
    if m.legacy:
        return Batch(entries, by_episode, starts)
    index = read_index(storage, m, b)
    try:
        table = np.array(said, dtype=np.int64).reshape(len(said), 4)
    except OverflowError:  # (a number no index holds: the entry's own reading names it)
        return Batch(entries, by_episode, starts)
    refs = EntryRefs(m, entries, where)
    plannable = all(isinstance(leaf, ArrayLeaf)
                    for leaf in obs_layout(m).leaves + act_layout(m).leaves)
    if index is not None:
        try:
            check_entries(index, table, refs.columns(), info["bin_size"])
        except BatchIndexError as e:
            # An entry that is wrong by itself is named for what is wrong with it.
            if e.entry is not None:
                _check_entry(storage, m, info, entries[e.entry])
            raise
    plan = plan_batch(m, info, table, refs, index) if plannable else None
    return Batch(entries, by_episode, starts, plan)


def _check_entry(storage: Storage, m: Manifest, binfo: dict[str, Any],
                 entry: dict[str, Any]) -> None:
    """Reads one entry as the entry-by-entry path does, raising what it finds wrong."""
    dec = Decoder(storage)
    part = dec.plan_part(m, binfo, entry, entry["part"])
    dec.load_part(m, part, dec.check_bin(binfo["bin"], binfo["bin_size"]))


class EntryRefs:
    """A parsed batch's stacked references as stored, found when asked (not kept: a batch of
    short episodes holds hundreds of thousands of them): each column's (:meth:`columns`: each
    observation leaf's, each action leaf's, rewards', terminations', truncations') or one
    entry's (:meth:`entry`, None when its trees are not shaped as the spaces)."""

    __slots__ = ("_entries", "_layouts", "_where")

    def __init__(self, m: Manifest, entries: list[dict[str, Any]], where: str) -> None:
        assert m.obs_layout is not None and m.act_layout is not None
        self._entries = entries
        self._layouts = ((m.obs_layout, "observations"), (m.act_layout, "actions"))
        self._where = where

    def columns(self) -> list[list[Any]]:
        """Each column's references, one per entry (FormatError for a tree not shaped as
        its space, naming it)."""
        out: list[list[Any]] = []
        entries, where = self._entries, self._where
        for lay, key in self._layouts:
            if lay.single:
                out.append([e.get(key) for e in entries])
                continue
            per = [[obj for obj, _ in lay.tree_leaves(e.get(key),
                                                      f"{where} entry {e['index']} {key}")]
                   for e in entries]
            out.extend([p[k] for p in per] for k in range(len(lay.leaves)))
        for name in STEP_NAMES:
            out.append([e.get(name) for e in entries])
        return out

    def entry(self, pos: int) -> list[Any] | None:
        """Entry ``pos``'s reference in each column (None: a tree not shaped as its space)."""
        e = self._entries[pos]
        out: list[Any] = []
        for lay, key in self._layouts:
            if lay.single:
                out.append(e.get(key))
                continue
            try:
                out.extend(obj for obj, _ in lay.tree_leaves(e.get(key), ""))
            except FormatError:
                return None
        out.extend(e.get(name) for name in STEP_NAMES)
        return out

