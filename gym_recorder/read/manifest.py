"""Manifests: finding a recording's writers, validating each one's batch list, and their order.

A manifest is the commit point of one writer (see "Manifest" in :mod:`gym_recorder.format`):
only the batches it lists exist. :func:`load_manifests` reads every manifest of a recording
through its :class:`~gym_recorder.read.storage.Storage`, checks each against the format's rules and
orders the writers as the reader shows them. It also applies the recording's edit record (see
"Edits" in the spec): it leaves out the writers a compaction replaced, and gives each
:class:`Manifest` the episodes it hides (:meth:`Manifest.hide`); every reader path maps its
positions to writer numbers through :meth:`Manifest.number` and :meth:`Manifest.position`.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format.agents import MultiAgent, parse_multiagent
from ..format.fileio import loads
from ..format import (LEGACY_PREFIX, MANIFEST_SUFFIX, MAX_JSON_BYTES, check_batch_entry,
                     check_version, is_legacy)
from ..format.edits import (EDIT_LOG_RE, EDITS_MANIFEST, EditState, check_tripwire,
                            numbers_of, parse_state)
from ..format.spaces import Layout
from .storage import LocalStorage, Storage

__all__ = ["Manifest", "load_manifests", "load_edits", "read_json"]


def read_json(storage: Storage, name: str, expected_size: int | None = None) -> tuple[bytes, Any]:
    """Reads and parses one JSON file of a recording (its bytes, and the document).

    Raises:
        FormatError: if the file is missing, too large, of the wrong size, or not valid JSON.
    """
    data = storage.read_bytes(name, MAX_JSON_BYTES)
    if expected_size is not None and len(data) != expected_size:
        raise FormatError(f"{name}: file has {len(data)} bytes, the manifest says {expected_size}")
    return data, loads(data, name)


class Manifest:
    """One validated manifest: a writer's batches, and where its episodes start.

    Attributes:
        name: the manifest's file name.
        prefix: the writer's prefix.
        legacy: True for an OpenAI gym-recording manifest.
        created: when the writer started (UTC, ISO 8601), or "".
        env_id: the env id, or None.
        observation_space_desc, action_space_desc: the SPACE descriptions (None if legacy).
        obs_layout, act_layout: their :class:`~gym_recorder.format.spaces.Layout` (None if legacy).
        vector: the manifest's "vector" object, or None.
        multiagent: the checked "multiagent" object of a multi-agent recording, or None.
        complete: True once the writer was closed cleanly.
        doc: the whole manifest document.
        batches: the BATCH objects, validated, in commit order.
        starts: per batch, the writer's number of the first episode it starts.
        episodes: how many episodes the writer's batches start.

    Args:
        source: the recording's storage, or a local directory's path.
        name: the manifest's file name.

    Raises:
        FormatError: if the manifest is malformed or of an unsupported version.
    """

    def __init__(self, source: Storage | str | os.PathLike[str], name: str) -> None:
        self.name = where = name
        storage = LocalStorage(source) if isinstance(source, (str, os.PathLike)) else source
        _, doc = read_json(storage, name)
        if not isinstance(doc, dict):
            raise FormatError(f"{where}: a manifest must be a JSON object")
        self.legacy = is_legacy(doc)
        self.obs_layout: Layout | None = None
        self.act_layout: Layout | None = None
        if self.legacy:
            if not name.startswith(LEGACY_PREFIX):
                raise FormatError(f"{where}: no format/version and not a gym-recording manifest")
            self.prefix = name[: -len(MANIFEST_SUFFIX)]
            self.created = ""
            self.env_id = None
            self.observation_space_desc = self.action_space_desc = None
            self.vector = None
            self.multiagent: MultiAgent | None = None
        else:
            check_version(doc, where)
            prefix = doc.get("prefix")
            if not isinstance(prefix, str) or prefix + MANIFEST_SUFFIX != name:
                raise FormatError(f"{where}: prefix {prefix!r} does not match the file name")
            self.prefix = prefix
            created = doc.get("created", "")
            self.created = created if isinstance(created, str) else ""
            env_id = doc.get("env_id")
            self.env_id = env_id if isinstance(env_id, str) else None
            self.observation_space_desc = doc.get("observation_space")
            self.action_space_desc = doc.get("action_space")
            self.obs_layout = Layout(self.observation_space_desc, f"{where} observation_space")
            self.act_layout = Layout(self.action_space_desc, f"{where} action_space")
            self.vector = doc.get("vector") if isinstance(doc.get("vector"), dict) else None
            self.multiagent = parse_multiagent(doc, where)
        self.complete = doc.get("complete") is True
        self.doc = doc
        batches = doc.get("batches")
        if not isinstance(batches, list):
            raise FormatError(f"{where}: 'batches' must be a list")
        self.batches: list[dict[str, Any]] = []
        self.starts: list[int] = []
        count = entries = 0
        for i, b in enumerate(batches):
            new = check_batch_entry(b, f"{where} batch {i}", self.prefix, entries, self.legacy)
            entries = b["first"] + b["len"]
            self.starts.append(count)
            self.batches.append(b)
            count += new
        self.episodes = count
        # The episodes the reader shows: all (numbers None), or those not deleted by an edit.
        self.shown = count
        self.numbers: np.ndarray | None = None
        self.deleted = np.zeros(0, dtype=np.int64)
        replaces = doc.get("replaces")
        self.replaces = replaces if isinstance(replaces, str) else None

    def hide(self, deleted: np.ndarray) -> None:
        """Hides the writer's episodes of these numbers (sorted, unique, below ``episodes``)."""
        self.deleted = deleted
        if deleted.size:
            self.numbers = np.setdiff1d(np.arange(self.episodes, dtype=np.int64), deleted,
                                        assume_unique=True)
            self.shown = int(self.numbers.size)

    def number(self, position: int) -> int:
        """The writer's number of the episode shown at ``position`` among its shown ones."""
        return position if self.numbers is None else int(self.numbers[position])

    def position(self, number: int) -> int:
        """Where the writer's episode ``number`` is among its shown episodes; -1 if deleted."""
        if self.numbers is None:
            return number
        k = int(np.searchsorted(self.numbers, number))
        return k if k < self.numbers.size and self.numbers[k] == number else -1

    def shown_numbers(self) -> range | np.ndarray:
        """The numbers of the episodes the reader shows, in order."""
        return range(self.episodes) if self.numbers is None else self.numbers

    def new_episodes(self, b: int) -> int:
        """How many episodes batch ``b`` starts."""
        binfo = self.batches[b]
        count: int = binfo["len"] if self.legacy else binfo["episodes"]
        return count

    def gap_before(self, b: int) -> bool:
        """True if entries between batch b - 1 and batch b are gone (moved aside by repair)."""
        if b == 0:
            return False
        prev = self.batches[b - 1]
        gap: bool = self.batches[b]["first"] != prev["first"] + prev["len"]
        return gap

    def first_batch(self, number: int) -> int:
        """The batch that starts the writer's episode ``number`` (or the batch before it, when
        that one starts no episode)."""
        b = bisect.bisect_right(self.starts, number) - 1
        # Batches that start no new episode share their start with the next; take the last
        # batch whose count of new episodes covers `number`.
        while b > 0 and self.starts[b] == self.starts[b - 1] and self.new_episodes(b) == 0:
            b -= 1
        return b


def load_edits(storage: Storage, names: list[str] | None = None) -> EditState:
    """The recording's edit state: its newest edit log generation (empty when it has none).

    Raises:
        FormatError: if the record is malformed, or lost (the tripwire without a log: the
            deleted episodes would show again; ``repair`` says so and accepts it).
    """
    names = storage.list() if names is None else names
    generations = [(int(match["generation"]), name) for name in names
                   if (match := EDIT_LOG_RE.fullmatch(name))]
    if EDITS_MANIFEST in names:
        _, doc = read_json(storage, EDITS_MANIFEST)
        check_tripwire(doc, EDITS_MANIFEST)
        if not generations:
            raise FormatError(f"{EDITS_MANIFEST}: the recording has edits, but its edit log "
                              f"(_edits.NNNNNNNNN.json) is missing: episodes it deleted would "
                              f"show again; `gym-recorder repair` accepts that")
    if not generations:
        return EditState()
    generation, name = max(generations)
    _, doc = read_json(storage, name)
    return parse_state(doc, name, generation)


def load_manifests(storage: Storage, edits: EditState | None = None) -> list[Manifest]:
    """Reads and checks every manifest of a recording, in the reader's order of writers, with
    the edit state applied (the recording's own, unless ``edits`` is given).

    Writers are ordered by their manifest's creation time, then prefix; legacy recordings
    first, by name. Writers a compaction replaced or a merge is bringing in are left out,
    as are a compaction's writers that no committed edit put in; each writer hides the
    episodes the edit state deletes.
    """
    listed = storage.list()
    state = load_edits(storage, listed) if edits is None else edits
    names = sorted(name for name in listed if name.endswith(MANIFEST_SUFFIX)
                   and name != EDITS_MANIFEST
                   and not state.hides_writer(name[: -len(MANIFEST_SUFFIX)]))
    manifests = []
    for name in names:
        m = Manifest(storage, name)
        if m.replaces is not None and state.replaced.get(m.replaces) != m.prefix:
            continue  # written by a compaction that did not commit
        m.hide(numbers_of(state.hidden(m.prefix), m.episodes))
        manifests.append(m)
    missing = set(state.replaced.values()) - {m.prefix for m in manifests} - set(state.replaced)
    if missing:
        raise FormatError(f"_edits.{state.generation:09d}.json: the writers a compaction "
                          f"wrote are missing: {sorted(missing)}")
    manifests.sort(key=lambda m: (not m.legacy, m.created, m.prefix))
    return manifests
