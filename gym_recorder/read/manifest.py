"""Manifests: finding a recording's writers, validating each one's batch list, and their order.

A manifest is the commit point of one writer (see "Manifest" in :mod:`gym_recorder.format`):
only the batches it lists exist. :func:`load_manifests` reads every manifest of a recording
through its :class:`~gym_recorder.read.storage.Storage`, checks each against the format's rules and
orders the writers as the reader shows them.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from ..errors import FormatError
from ..format.agents import MultiAgent, parse_multiagent
from ..format.fileio import loads
from ..format import (LEGACY_PREFIX, MANIFEST_SUFFIX, MAX_JSON_BYTES, check_batch_entry,
                     check_version, is_legacy)
from ..format.spaces import Layout
from .storage import LocalStorage, Storage

__all__ = ["Manifest", "load_manifests", "read_json"]


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


def load_manifests(storage: Storage) -> list[Manifest]:
    """Reads and checks every manifest of a recording, in the reader's order of writers.

    Writers are ordered by their manifest's creation time, then prefix; legacy recordings
    first, by name.
    """
    names = sorted(name for name in storage.list() if name.endswith(MANIFEST_SUFFIX))
    manifests = [Manifest(storage, name) for name in names]
    manifests.sort(key=lambda m: (not m.legacy, m.created, m.prefix))
    return manifests
