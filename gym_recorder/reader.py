"""The reader: opens a recording directory, validates everything, hands out episodes.

A recording is untrusted input. Every manifest, batch and array reference is checked before use
(see :mod:`gym_recorder.format`); problems raise :class:`FormatError` naming the file. Arrays are
read into memory the arrays own (one read per episode part, or straight into the rows of an
episode's arrays when it spans several batches), so they stay valid after the
reader is closed. Nothing is ever unpickled.
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from . import format as _format
from .errors import ChecksumError, FormatError, RecordingClosedError
from .format import (FORMAT_NAME, FORMAT_VERSION, LEGACY_PREFIX, MANIFEST_SUFFIX, MAX_JSON_BYTES,
                     ArrayRef, check_plain_name, decode_value, loads, parse_ref)
from .spaces import ArrayLeaf, Layout, ValuesLeaf, build_space, decode_values_leaf
from .storage import LocalStorage, Storage, open_storage

__all__ = ["RecordingReader", "Episode", "EpisodeSummary", "BatchInfo", "EpisodePart",
           "scan_recorded_traces", "ENDS"]

ENDS = ("terminated", "truncated", "reset", "close")
# Parsed batch files kept in memory: enough to iterate in order and to stitch an episode whose
# parts span consecutive batches.
BATCH_CACHE_SIZE = 4
# Read an episode's arrays in one read when the span they cover is at most this much larger than
# their own bytes (else array by array, so a hostile layout cannot make us read a whole file).
SPAN_SLACK_BYTES = 1 << 20
# Arrays stay views of the span read for them unless it is more than this many times their bytes.
SPAN_KEEP_FACTOR = 2
# An episode of several parts with at least this many bytes of stacked arrays is read by
# READ_THREADS threads, part by part (page faults and copies of the fresh arrays then overlap:
# about 1.5x faster with two cores); smaller ones are read in this thread.
PARALLEL_READ_BYTES = 32 << 20
READ_THREADS = 2
# A cached batch whose entries are small (at most this many bytes of arrays each on average) has
# its whole .bin read into memory once a second episode is read from it, so that iterating small
# episodes costs one read per batch instead of one per array; episodes copy their bytes out.
SMALL_ENTRY_BYTES = 64 << 10
# ...if the .bin is at most this large (the default batch target is 5 MB).
WHOLE_BIN_MAX_BYTES = 8 << 20
# The largest Unicode code point; numpy's <U arrays fail hard (SystemError) on anything above.
MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True)
class Episode:
    """One recorded episode.

    Attributes:
        index: position of the episode in the reader.
        observations: N + 1 rows: the reset observation, then one per step. An array for Box,
            Discrete, MultiDiscrete and MultiBinary spaces, a dict of these for Dict, a tuple for
            Tuple, a list for Text, Sequence, Graph and OneOf spaces.
        actions: N rows, structured like observations.
        rewards: float64 array of shape (N,).
        terminations: bool array of shape (N,).
        truncations: bool array of shape (N,).
        infos: N + 1 dicts: the reset info, then one per step.
        seed: the seed passed to ``reset``, or None.
        options: the options passed to ``reset``, or None.
        env_id: the environment's id, or None.
        end: how the episode ended: ``"terminated"``, ``"truncated"``, ``"reset"`` (reset
            before it ended), ``"close"`` (recorder closed before it ended), or None (not ended:
            the writer is still running or was killed, or a legacy recording).
        sub_env: index of the sub-environment for vector recordings, else None.
        writer: the file prefix of the writer that recorded it.
        no_reset: True if the episode was stepped without a reset after the previous one ended
            (its first observation is that episode's last).
    """

    index: int
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list = field(repr=False)
    seed: int | None
    options: Any
    env_id: str | None
    end: str | None
    sub_env: int | None
    writer: str
    no_reset: bool = False

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def length(self) -> int:
        """Number of steps (transitions) N."""
        return len(self.rewards)

    @property
    def total_reward(self) -> float:
        """The undiscounted return."""
        return float(self.rewards.sum())


class EpisodeSummary(NamedTuple):
    """What :meth:`RecordingReader.summary` reads of an episode: no observations or actions."""

    index: int
    length: int
    total_reward: float
    end: str | None
    seed: int | None
    sub_env: int | None
    writer: str
    env_id: str | None


def read_json(storage: Storage, name: str, expected_size: int | None = None) -> tuple[bytes, Any]:
    """Reads and parses one JSON file of a recording (its bytes, and the document).

    Raises:
        FormatError: if the file is missing, too large, of the wrong size, or not valid JSON.
    """
    data = storage.read_bytes(name, MAX_JSON_BYTES)
    if expected_size is not None and len(data) != expected_size:
        raise FormatError(f"{name}: file has {len(data)} bytes, the manifest says {expected_size}")
    return data, loads(data, name)


@dataclass(frozen=True)
class BatchInfo:
    """One committed batch, as :meth:`RecordingReader.batches` lists it (small and picklable).

    Attributes:
        writer: the prefix of the writer that wrote it.
        number: the batch's position in its writer's manifest (0, 1, ...).
        json_name: its batch JSON file's name.
        bin_name: its .bin file's name ("" for a gym-recording batch, whose arrays have files
            of their own).
        episodes: the reader indices of the episodes that have a part in the batch, ascending.
    """

    writer: str
    number: int
    json_name: str
    bin_name: str
    episodes: tuple[int, ...]


@dataclass
class EpisodePart:
    """The steps of one episode that one batch holds, as :meth:`RecordingReader.read_batch`
    decodes them.

    Concatenating the parts of an episode in ``part`` order gives exactly the arrays (and
    lists) of the :class:`Episode`. Each part holds the rows the Episode holds for its steps:
    part 0 holds its steps + 1 observations and infos (the reset's first, then one after each
    action), every later part one observation and info per step (the ones after each of its
    actions; the observation before its first action is the previous part's last). Arrays may
    be views of the batch's bytes, which they keep alive.

    Attributes:
        episode: the episode's reader index.
        part: 0 for the part that starts with the reset, then 1, 2, ...
        first_step: the index in the episode of the part's first action (its steps are
            ``first_step .. first_step + len(rewards) - 1``).
        observations: the part's observation rows, structured like ``Episode.observations``.
        actions: one row per step, structured like ``Episode.actions``.
        rewards: float64, one per step.
        terminations: bool, one per step.
        truncations: bool, one per step.
        infos: the part's info dicts (as many as its observation rows).
        is_last: True if the Episode, as the reader sees it now, ends with this part.
    """

    episode: int
    part: int
    first_step: int
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    infos: list = field(repr=False)
    is_last: bool


class _Manifest:
    """One validated manifest: a writer's batches, and where its episodes start.

    ``source`` is the recording's storage, or a local directory's path.
    """

    def __init__(self, source: Storage | str, name: str) -> None:
        self.name = name
        where = name
        storage = LocalStorage(source) if isinstance(source, (str, os.PathLike)) else source
        _, doc = read_json(storage, name)
        if not isinstance(doc, dict):
            raise FormatError(f"{where}: a manifest must be a JSON object")
        self.legacy = "format" not in doc and "version" not in doc
        if self.legacy:
            if not name.startswith(LEGACY_PREFIX):
                raise FormatError(f"{where}: no format/version and not a gym-recording manifest")
            self.prefix = name[: -len(MANIFEST_SUFFIX)]
            self.created = ""
            self.env_id = None
            self.obs_layout = self.act_layout = None
            self.observation_space_desc = self.action_space_desc = None
            self.vector = None
        else:
            if doc.get("format") != FORMAT_NAME:
                raise FormatError(f"{where}: format is {doc.get('format')!r}, not {FORMAT_NAME!r}")
            version = doc.get("version")
            if type(version) is not int or version < 1:
                raise FormatError(f"{where}: bad format version {version!r}")
            if version > FORMAT_VERSION:
                raise FormatError(f"{where}: format version {version} is newer than this reader "
                                  f"({FORMAT_VERSION}); upgrade gym_recorder")
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
        self.complete = doc.get("complete") is True
        self.doc = doc
        batches = doc.get("batches")
        if not isinstance(batches, list):
            raise FormatError(f"{where}: 'batches' must be a list")
        self.batches: list[dict] = []
        self.starts: list[int] = []  # episode number of each batch's first new episode
        count = 0
        entries = 0
        for i, b in enumerate(batches):
            w = f"{where} batch {i}"
            if not isinstance(b, dict):
                raise FormatError(f"{w}: must be an object")
            first, length = b.get("first"), b.get("len")
            if type(first) is not int or type(length) is not int or first < 0 or length < 0:
                raise FormatError(f"{w}: 'first' and 'len' must be non-negative integers")
            fn = check_plain_name(b.get("fn"), w)
            if self.legacy:
                # gym-recording named batches P.epNNNNNNNNN.json; refuse another writer's files.
                if not (fn.startswith(self.prefix + ".ep") and fn.endswith(".json")):
                    raise FormatError(f"{w}: fn {fn!r} is not a batch of this writer, expected "
                                      f"{self.prefix + '.ep'}NNNNNNNNN.json")
                new = length
            else:
                if first < entries:
                    # Gaps are allowed (batches moved aside by repair); overlaps are not.
                    raise FormatError(f"{w}: first entry {first} overlaps the previous batch "
                                      f"(expected at least {entries})")
                check_plain_name(b.get("bin"), w)
                stem = _format.batch_stem(self.prefix, first)
                for key, ext in (("fn", ".json"), ("bin", ".bin")):
                    if b[key] != stem + ext:
                        raise FormatError(f"{w}: {key} {b[key]!r} is not this writer's batch "
                                          f"file, expected {stem + ext!r}")
                new = b.get("episodes")
                for key in ("json_size", "bin_size", "steps", "json_crc32"):
                    if type(b.get(key)) is not int or b[key] < 0:
                        raise FormatError(f"{w}: {key!r} must be a non-negative integer")
                if type(new) is not int or not 0 <= new <= length:
                    raise FormatError(f"{w}: 'episodes' must be an integer in [0, len]")
            entries = first + length
            self.starts.append(count)
            self.batches.append(b)
            count += new
        self.episodes = count


class _Batch:
    """One parsed and structurally checked batch file, and its .bin file once read from.

    The .bin file's size is checked once against the manifest, when first read from (the
    storage keeps the file open, so that reading many small episodes does not open it for
    each). Arrays handed out never depend on the batch: they are read into memory they own.
    """

    def __init__(self, entries: list, by_episode: dict, starts: list[int] | None = None) -> None:
        self.entries = entries
        self.by_episode = by_episode
        self.starts = starts if starts is not None else []  # positions of part-0 entries
        self.file_size: int | None = None  # the .bin's size, once checked
        self.data: np.ndarray | None = None  # the whole .bin, for batches of small entries
        self.reads = 0  # episodes read from the batch

    def close(self) -> None:
        """Drops the batch's bytes held in memory."""
        self.data = None


class _Part:
    """One entry of an episode, structurally checked, with the references it holds."""

    __slots__ = ("binfo", "entry", "part_no", "where", "steps", "obs_rows", "obs_stored",
                 "act_stored", "infos", "refs", "slots")

    def __init__(self, binfo: dict, entry: dict, part_no: int) -> None:
        self.binfo = binfo
        self.entry = entry
        self.part_no = part_no
        self.where = f"{binfo['fn']} entry {entry.get('index')}"
        self.refs: list[tuple[dict, str]] = []
        self.slots: list[tuple[str, int, Any]] = []  # (kind, leaf number, expected shape)


# Kinds of references whose arrays are stacked over an episode's parts (the others, infos, are
# per row and are read part by part).
_STACKED = frozenset(("obs", "act", "rewards", "terminations", "truncations"))


class RecordingReader:
    """Reads a recording directory: every writer's episodes, in a deterministic order.

    Writers are ordered by their manifest's creation time, then prefix (legacy recordings first,
    by name); episodes by their number within a writer. Opening reads only the manifests;
    fetching an episode parses only the batches that hold it.

    Example:
        >>> with RecordingReader(tmp_dir) as reader:
        ...     for episode in reader:
        ...         print(episode.length, episode.total_reward)

    Args:
        location: the recording directory, or a URL (``s3://bucket/run``, read through fsspec:
            see :func:`gym_recorder.storage.open_storage`).
        verify: check every array's CRC-32 while reading (raises :class:`ChecksumError`).
        storage_options: fsspec options for a URL (credentials, endpoint).

    Raises:
        FormatError: if a manifest is malformed or of an unsupported version.
        FileNotFoundError: if the directory does not exist.
    """

    def __init__(self, location: str | os.PathLike, *, verify: bool = False,
                 storage_options: dict | None = None) -> None:
        self._storage: Storage = open_storage(location, storage_options)
        self._directory = self._storage.location
        self._verify = verify
        self._cache: OrderedDict[tuple[str, int], _Batch] = OrderedDict()
        self._closed = False
        self._manifests: list[_Manifest] = []
        self._starts: list[int] = []
        self._count = 0
        self.refresh()

    # -- the directory ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-reads the manifests, to see batches committed since the reader was opened.

        The reader always shows a consistent snapshot: only batches listed in a manifest.
        """
        self._check_open()
        forget = getattr(self._storage, "forget", None)
        if forget is not None:
            forget()  # files replaced since (by repair) are opened anew
        names = sorted(name for name in self._storage.list() if name.endswith(MANIFEST_SUFFIX))
        manifests = [_Manifest(self._storage, name) for name in names]
        manifests.sort(key=lambda m: (not m.legacy, m.created, m.prefix))
        self._manifests = manifests
        self._starts = []
        count = 0
        for m in manifests:
            self._starts.append(count)
            count += m.episodes
        self._count = count
        self._by_prefix = {m.prefix: (k, m) for k, m in enumerate(manifests)}
        # Per (manifest name, batch): the episodes open when the batch starts (see _open_at).
        self._open: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = {}
        self._clear_cache()

    @property
    def directory(self) -> str:
        """The recording directory (or URL)."""
        return self._directory

    @property
    def storage(self) -> Storage:
        """Where the reader reads every byte from."""
        return self._storage

    @property
    def writers(self) -> list[dict]:
        """One dict per writer: prefix, env_id, episodes, batches, complete, and its manifest."""
        return [{"prefix": m.prefix, "env_id": m.env_id, "episodes": m.episodes,
                 "batches": len(m.batches), "complete": m.complete, "legacy": m.legacy,
                 "manifest": m.doc} for m in self._manifests]

    def _first_described(self):
        for m in self._manifests:
            if not m.legacy:
                return m
        return None

    @property
    def observation_space(self):
        """The observation space rebuilt from the recording (the first writer's), or None."""
        m = self._first_described()
        return None if m is None else build_space(m.observation_space_desc,
                                                  f"{m.name} observation_space")

    @property
    def action_space(self):
        """The action space rebuilt from the recording (the first writer's), or None."""
        m = self._first_described()
        return None if m is None else build_space(m.action_space_desc, f"{m.name} action_space")

    @property
    def env_id(self) -> str | None:
        """The env id of the first writer that recorded one."""
        return next((m.env_id for m in self._manifests if m.env_id), None)

    # -- episodes --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _normalise(self, index: int) -> int:
        self._check_open()
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"episode indices must be integers, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"episode {index} out of range ({self._count} episodes)")
        return index

    def __getitem__(self, index: int) -> Episode:
        index = self._normalise(index)
        k = bisect.bisect_right(self._starts, index) - 1
        return self._episode(self._manifests[k], index - self._starts[k], index)

    def __iter__(self) -> Iterator[Episode]:
        for i in range(self._count):
            yield self[i]

    def close(self) -> None:
        """Releases cached batches and closes their files. Episodes already returned stay valid."""
        self._clear_cache()
        self._storage.close()
        self._closed = True

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RecordingClosedError("the RecordingReader is closed")

    # -- loading ------------------------------------------------------------------------------

    def _batch(self, m: _Manifest, b: int) -> _Batch:
        key = (m.name, b)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        info = m.batches[b]
        where = info["fn"]
        data, doc = read_json(self._storage, info["fn"], None if m.legacy else info["json_size"])
        if not m.legacy and _format.crc32(data) != info["json_crc32"]:
            raise ChecksumError(f"{where}: CRC-32 does not match the manifest")
        if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), list):
            raise FormatError(f"{where}: a batch must be an object with an 'episodes' list")
        entries = doc["episodes"]
        if len(entries) != info["len"]:
            raise FormatError(f"{where}: {len(entries)} entries, the manifest says {info['len']}")
        by_episode = {}
        for pos, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise FormatError(f"{where} entry {pos}: must be an object")
            if not m.legacy:
                ep, part = entry.get("episode"), entry.get("part")
                if type(ep) is not int or type(part) is not int or ep < 0 or part < 0:
                    raise FormatError(f"{where} entry {pos}: bad 'episode' or 'part'")
                if entry.get("index") != info["first"] + pos:
                    raise FormatError(f"{where} entry {pos}: 'index' is not {info['first'] + pos}")
                by_episode[(ep, part)] = pos
        starts = [pos for pos, entry in enumerate(entries) if entry.get("part") == 0]
        batch = _Batch(entries, by_episode, starts)
        self._cache[key] = batch
        while len(self._cache) > BATCH_CACHE_SIZE:
            self._cache.popitem(last=False)[1].close()
        return batch

    def _clear_cache(self) -> None:
        batches = list(self._cache.values())
        self._cache.clear()
        for batch in batches:
            batch.close()

    def _episode(self, m: _Manifest, number: int, index: int) -> Episode:
        b = self._first_batch(m, number)
        if m.legacy:
            return self._legacy_episode(m, b, number - m.starts[b], index)
        items = list(self._entries(m, number, b))
        if not items:
            raise FormatError(f"{m.name}: episode {number} not found in its batches")
        if len(items) > 1:
            return self._stitched(m, items, index)
        # One part, in the batch loaded last (still cached): one read for all its arrays.
        binfo, entry, part_no, batch = items[0]
        part = self._plan_part(m, binfo, entry, part_no)
        p = self._load_part(m, part, self._batch_size(batch, binfo),
                            data=self._batch_data(batch, binfo))
        return Episode(
            index=index,
            observations=p["obs"][0] if m.obs_layout.single else m.obs_layout.unflatten(p["obs"]),
            actions=p["act"][0] if m.act_layout.single else m.act_layout.unflatten(p["act"]),
            rewards=p["rewards"], terminations=p["terminations"], truncations=p["truncations"],
            infos=p["infos"], seed=p["seed"], options=p["options"], env_id=m.env_id,
            end=p["end"], sub_env=p["sub_env"], writer=m.prefix, no_reset=p["no_reset"])

    def _first_batch(self, m: _Manifest, number: int) -> int:
        b = bisect.bisect_right(m.starts, number) - 1
        # Batches that start no new episode share their start with the next; take the last
        # batch whose count of new episodes covers `number`.
        while b > 0 and m.starts[b] == m.starts[b - 1] and m.batches[b].get(
                "episodes", m.batches[b]["len"]) == 0:
            b -= 1
        return b

    def _entries(self, m: _Manifest, number: int,
                 b: int) -> Iterator[tuple[dict, dict, int, _Batch]]:
        """Yields (batch info, entry, part number, batch) for each part of a writer's episode."""
        part_no = 0
        episode_id = number
        # The part-0 entry is in batch b, or (if b starts no episode) a later one. It is found
        # by its position among the batch's part-0 entries, so that batches moved aside by
        # repair (a gap in the entry numbers) do not shift the episodes after them.
        while b < len(m.batches):
            batch = self._batch(m, b)
            if part_no == 0:
                k = number - m.starts[b]
                if not 0 <= k < len(batch.starts):
                    b += 1
                    continue
                pos = batch.starts[k]
                episode_id = batch.entries[pos]["episode"]
            else:
                pos = batch.by_episode.get((episode_id, part_no))
            if pos is None:
                prev = m.batches[b - 1]
                if m.batches[b]["first"] != prev["first"] + prev["len"]:
                    break  # the next part was in a batch that is gone: the episode ends here
                raise FormatError(f"{m.batches[b]['fn']}: episode {number} part {part_no} missing")
            entry = batch.entries[pos]
            yield m.batches[b], entry, part_no, batch
            if entry.get("continues") is not True:
                break
            part_no += 1
            b += 1

    # -- batch by batch ---------------------------------------------------------------------------

    def batches(self) -> list[BatchInfo]:
        """Lists every committed batch the reader knows, in the reader's order.

        A snapshot of the manifests read by the last :meth:`refresh`. For a single-env writer
        it reads only the manifests; for a vector writer, the batch files whose entries
        continue episodes of earlier batches (to tell which episodes those are).
        """
        self._check_open()
        out: list[BatchInfo] = []
        for k, m in enumerate(self._manifests):
            base = self._starts[k]
            simple = m.legacy or (m.vector is None and all(
                b["len"] - b["episodes"] <= 1 for b in m.batches))
            open_no: int | None = None  # single-env: the episode that may continue into b
            for b, binfo in enumerate(m.batches):
                new = binfo["len"] if m.legacy else binfo["episodes"]
                cont: list[int] = []
                if not m.legacy and binfo["len"] > new and not self._gap_before(m, b):
                    if simple:
                        cont = [] if open_no is None else [open_no]
                    else:
                        cont = sorted(number for number, _, _ in self._open_at(m, b).values())
                if new:
                    open_no = m.starts[b] + new - 1
                elif not cont:
                    open_no = None
                first = base + m.starts[b]
                out.append(BatchInfo(m.prefix, b, binfo["fn"], "" if m.legacy else binfo["bin"],
                                     tuple([base + n for n in cont]
                                           + list(range(first, first + new)))))
        return out

    def read_batch(self, info: BatchInfo) -> list[EpisodePart]:
        """Decodes one batch, once: the part of every episode it holds, in entry order.

        The batch's .bin is read whole, in one read; arrays are views of it. Entries whose
        episode the reader does not show (its earlier part was in a batch ``repair`` moved
        aside) are left out.

        Args:
            info: a batch from :meth:`batches` (of this reader, since its last refresh).

        Raises:
            ValueError: if ``info`` is not a batch of this reader.
            FormatError: if the batch is malformed, as reading its episodes would.
        """
        self._check_open()
        k, m = self._by_prefix.get(info.writer, (None, None))
        b = info.number
        if m is None or not 0 <= b < len(m.batches) or m.batches[b]["fn"] != info.json_name:
            raise ValueError(f"{info!r} is not a batch of this reader")
        base = self._starts[k]
        if m.legacy:
            parts = []
            for pos in range(m.batches[b]["len"]):
                ep = self._legacy_episode(m, b, pos, base + m.starts[b] + pos)
                parts.append(EpisodePart(ep.index, 0, 0, ep.observations, ep.actions, ep.rewards,
                                         ep.terminations, ep.truncations, ep.infos, True))
            return parts
        binfo = m.batches[b]
        batch = self._batch(m, b)
        self._check_starts(m, b, batch)
        opened = dict(self._open_at(m, b))
        size = self._batch_size(batch, binfo)
        data = self._read_exact(binfo["bin"], 0, size)
        last = b + 1 >= len(m.batches) or self._gap_before(m, b + 1)
        parts = []
        rank = 0
        for entry in batch.entries:
            part_no = entry["part"]
            if part_no == 0:
                number, first_step = m.starts[b] + rank, 0
                rank += 1
            else:
                number, expected, first_step = opened.pop(entry["episode"], (None, None, 0))
                if number is None or expected != part_no:
                    continue  # an episode the reader does not show
            p = self._load_part(m, self._plan_part(m, binfo, entry, part_no), size, data=data,
                                copy=False)
            parts.append(EpisodePart(
                base + number, part_no, first_step,
                p["obs"][0] if m.obs_layout.single else m.obs_layout.unflatten(p["obs"]),
                p["act"][0] if m.act_layout.single else m.act_layout.unflatten(p["act"]),
                p["rewards"], p["terminations"], p["truncations"], p["infos"],
                entry.get("continues") is not True or last))
        for number, part_no, _ in opened.values():
            raise FormatError(f"{binfo['fn']}: episode {number} part {part_no} missing")
        return parts

    def _gap_before(self, m: _Manifest, b: int) -> bool:
        """True if entries between batch b - 1 and batch b are gone (moved aside by repair)."""
        if b == 0:
            return False
        prev = m.batches[b - 1]
        return m.batches[b]["first"] != prev["first"] + prev["len"]

    @staticmethod
    def _check_starts(m: _Manifest, b: int, batch: _Batch) -> None:
        if len(batch.starts) != m.batches[b]["episodes"]:
            raise FormatError(f"{m.batches[b]['fn']}: {len(batch.starts)} entries start an "
                              f"episode, the manifest says {m.batches[b]['episodes']}")

    def _open_at(self, m: _Manifest, b: int) -> dict[int, tuple[int, int, int]]:
        """The episodes whose next part batch b must hold: writer episode id -> (episode number
        in the writer, part number, first step of that part). Remembered per batch.
        """
        memo = self._open
        c = b
        state: dict[int, tuple[int, int, int]] | None = None
        # Walk back to a batch whose open episodes are known: remembered, the first, after a
        # gap, or after a batch that continues no episode (whose open episodes do not matter).
        while state is None:
            if (m.name, c) in memo:
                state = memo[(m.name, c)]
            elif c == 0 or self._gap_before(m, c):
                state = {}
            elif m.batches[c - 1]["len"] == m.batches[c - 1]["episodes"]:
                c -= 1
                state = {}
            else:
                c -= 1
        while True:
            memo[(m.name, c)] = state
            if c == b:
                return state
            batch = self._batch(m, c)
            self._check_starts(m, c, batch)
            after: dict[int, tuple[int, int, int]] = {}
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
                    number, expected, first = state.get(ep_id, (None, None, 0))
                    if number is None or expected != part_no:
                        continue
                if entry.get("continues") is True:
                    after[ep_id] = (number, part_no + 1, first + steps)
            c += 1
            state = {} if self._gap_before(m, c) else after

    def summary(self, index: int) -> EpisodeSummary:
        """Returns an episode's length, return, end and seed, reading only its rewards.

        Much cheaper than ``reader[index]`` for recordings of large observations (the
        command line's ``info`` and ``plot`` use it).
        """
        index = self._normalise(index)
        k = bisect.bisect_right(self._starts, index) - 1
        m = self._manifests[k]
        number = index - self._starts[k]
        if m.legacy:
            ep = self[index]
            return EpisodeSummary(index, ep.length, ep.total_reward, ep.end, ep.seed, ep.sub_env,
                                  ep.writer, ep.env_id)
        length, total, end, seed, sub_env = 0, 0.0, None, None, None
        found = False
        for binfo, entry, part_no, batch in self._entries(m, number,
                                                          self._first_batch(m, number)):
            where = f"{binfo['fn']} entry {entry.get('index')}"
            steps = entry.get("steps")
            if type(steps) is not int or steps < 0:
                raise FormatError(f"{where}: 'steps' must be a non-negative integer")
            ref = entry.get("rewards")
            if not isinstance(ref, dict) or ref.get("__type") != "ndarray":
                raise FormatError(f"{where} rewards: expected an array reference")
            (rewards,) = self._read_arrays(binfo["bin"], [(ref, f"{where} rewards")],
                                           aligned=True, expected_size=binfo["bin_size"],
                                           file_size=self._batch_size(batch, binfo))
            if rewards.shape != (steps,) or rewards.dtype != np.float64:
                raise FormatError(f"{where} rewards: expected a float64 array of shape ({steps},)")
            length += steps
            total += float(rewards.sum())
            if part_no == 0:
                seed, sub_env = entry.get("seed"), entry.get("sub_env")
            end = entry.get("end") if entry.get("continues") is not True else None
            found = True
        if not found:
            raise FormatError(f"{m.name}: episode {number} not found in its batches")
        if end is not None and end not in ENDS:
            raise FormatError(f"{m.name}: episode {number} has unknown end {end!r}")
        return EpisodeSummary(index, length, total,
                              end, seed if type(seed) is int else None,
                              sub_env if type(sub_env) is int else None, m.prefix, m.env_id)

    def summaries(self) -> Iterator[EpisodeSummary]:
        """Yields :meth:`summary` for every episode, in order."""
        for i in range(self._count):
            yield self.summary(i)

    def _read_arrays(self, bin_name: str, refs: list[tuple[dict, str]], aligned: bool,
                     expected_size: int | None = None, *, file_size: int | None = None,
                     data: np.ndarray | None = None, copy: bool = True) -> list:
        """Validates references into one .bin file and reads them (one read when compact).

        ``expected_size`` is the file's size as the manifest records it (None for legacy files).
        ``file_size`` is the file's size when already checked against the manifest; without it
        the size is read and checked here. ``data`` is the whole file's bytes already read (the
        arrays are then copied out of it, or views of it when ``copy`` is false).
        """
        parsed: list[ArrayRef] = []
        for obj, where in refs:
            parsed.append(parse_ref(obj, where, aligned=aligned, file=bin_name))
        if not parsed:
            return []
        if file_size is None:
            file_size = self._check_bin(bin_name, expected_size)
        for ref, (_, where) in zip(parsed, refs):
            if ref.offset + ref.size > file_size:
                raise FormatError(f"{where}: bytes {ref.offset}..{ref.offset + ref.size} lie "
                                  f"outside {bin_name} ({file_size} bytes)")
        if data is not None:
            if copy:
                return [self._view(data[ref.offset:ref.offset + ref.size].copy(), 0, ref, where)
                        for ref, (_, where) in zip(parsed, refs)]
            return [self._view(data, ref.offset, ref, where)
                    for ref, (_, where) in zip(parsed, refs)]
        if len(parsed) == 1:
            ref = parsed[0]
            return [self._view(self._read_exact(bin_name, ref.offset, ref.size), 0, ref,
                               refs[0][1])]
        lo = min(r.offset for r in parsed)
        hi = max(r.offset + r.size for r in parsed)
        total = sum(r.size for r in parsed)
        out = []
        if hi - lo <= total + SPAN_SLACK_BYTES:
            buf = self._read_exact(bin_name, lo, hi - lo)
            # Views keep the span alive: copy the arrays out when it is mostly other data.
            copy = hi - lo > SPAN_KEEP_FACTOR * total
            for ref, (_, where) in zip(parsed, refs):
                arr = self._view(buf, ref.offset - lo, ref, where)
                out.append(arr.copy() if copy else arr)
        else:
            for ref, (_, where) in zip(parsed, refs):
                buf = self._read_exact(bin_name, ref.offset, ref.size)
                out.append(self._view(buf, 0, ref, where))
        return out

    def _check_bin(self, bin_name: str, expected_size: int | None) -> int:
        """Checks a .bin file's size against the manifest's (if any); returns the size."""
        file_size = self._storage.size(bin_name)
        if expected_size is not None and file_size != expected_size:
            raise FormatError(
                f"{bin_name}: file has {file_size} bytes, the manifest says {expected_size}")
        return file_size

    def _read_exact(self, name: str, offset: int, size: int) -> np.ndarray:
        """Reads ``size`` bytes at ``offset`` of a file into a new uint8 array."""
        try:
            buf = np.empty(size, dtype=np.uint8)
        except MemoryError as e:  # sizes are bounded by the file, but a sparse file can be huge
            raise FormatError(f"{name}: cannot allocate {size} bytes for array data, more than "
                              "available memory") from e
        if size:
            self._storage.readinto(name, offset, memoryview(buf))
        return buf

    def _batch_data(self, batch: _Batch, binfo: dict) -> np.ndarray | None:
        """The batch's whole .bin once it is worth reading whole (see SMALL_ENTRY_BYTES)."""
        batch.reads += 1
        size = self._batch_size(batch, binfo)
        if (batch.data is None and batch.reads >= 2 and size <= WHOLE_BIN_MAX_BYTES
                and size <= len(batch.entries) * SMALL_ENTRY_BYTES):
            batch.data = self._read_exact(binfo["bin"], 0, size)
        return batch.data

    def _batch_size(self, batch: _Batch, binfo: dict) -> int:
        """The cached batch's .bin size, checked against the manifest on first use."""
        if batch.file_size is None:
            batch.file_size = self._check_bin(binfo["bin"], binfo["bin_size"])
        return batch.file_size

    def _view(self, buf: np.ndarray, start: int, ref: ArrayRef, where: str) -> np.ndarray:
        raw = buf[start:start + ref.size]
        self._check_bytes(raw, ref, where)
        if start % ref.dtype.alignment == 0:
            return raw.view(ref.dtype).reshape(ref.shape)
        return raw.copy().view(ref.dtype).reshape(ref.shape)

    def _check_bytes(self, raw: np.ndarray, ref: ArrayRef, where: str) -> None:
        """Checks an array's raw bytes: CRC-32 when verifying, and that <U holds code points."""
        if self._verify and ref.crc32 is not None and _format.crc32(raw) != ref.crc32:
            raise ChecksumError(f"{where}: CRC-32 of the array's bytes does not match")
        if ref.dtype.kind == "U" and ref.size:
            # numpy crashes (SystemError) on any access to a code point beyond U+10FFFF.
            codes = raw.view(np.dtype(np.uint32).newbyteorder(ref.dtype.byteorder))
            if codes.max() > MAX_CODE_POINT:
                raise FormatError(f"{where}: {ref.dtype.str} array holds values that are not "
                                  "Unicode code points")

    def _plan_part(self, m: _Manifest, binfo: dict, entry: dict, part_no: int) -> _Part:
        """Checks an entry's structure and collects its array references (reads nothing)."""
        part = _Part(binfo, entry, part_no)
        where = part.where
        steps = entry.get("steps")
        if type(steps) is not int or steps < 0:
            raise FormatError(f"{where}: 'steps' must be a non-negative integer")
        obs_rows = steps + 1 if part_no == 0 else steps
        part.steps, part.obs_rows = steps, obs_rows
        refs, slots = part.refs, part.slots

        def want(obj: Any, w: str, kind: str, k: int, expect: Any = None) -> None:
            if not isinstance(obj, dict) or obj.get("__type") != "ndarray":
                raise FormatError(f"{w}: expected an array reference")
            refs.append((obj, w))
            slots.append((kind, k, expect))

        part.obs_stored = obs_stored = m.obs_layout.tree_leaves(entry.get("observations"),
                                                                f"{where} observations")
        part.act_stored = act_stored = m.act_layout.tree_leaves(entry.get("actions"),
                                                                f"{where} actions")
        for k, ((obj, w), leaf) in enumerate(zip(obs_stored, m.obs_layout.leaves)):
            if isinstance(leaf, ArrayLeaf):
                want(obj, w, "obs", k, (obs_rows, *leaf.shape))
        for k, ((obj, w), leaf) in enumerate(zip(act_stored, m.act_layout.leaves)):
            if isinstance(leaf, ArrayLeaf):
                want(obj, w, "act", k, (steps, *leaf.shape))
        for name in ("rewards", "terminations", "truncations"):
            want(entry.get(name), f"{where} {name}", name, 0, (steps,))
        part.infos = infos = entry.get("infos")
        if not isinstance(infos, dict) or infos.get("rows") != obs_rows or not isinstance(
                infos.get("keys"), list):
            raise FormatError(f"{where}: 'infos' must be {{'rows': {obs_rows}, 'keys': [...]}}")
        for k, col in enumerate(infos["keys"]):
            w = f"{where} infos column {k}"
            if not isinstance(col, dict) or not isinstance(col.get("key"), str):
                raise FormatError(f"{w}: a column needs a string 'key'")
            if col.get("index") is not None:
                want(col["index"], w + " index", "info_index", k)
            if col.get("kind") == "array":
                want(col.get("values"), w + " values", "info_values", k)
            elif col.get("kind") != "values" or not isinstance(col.get("values"), list):
                raise FormatError(f"{w}: 'kind' must be 'array' or 'values'")
        return part

    @staticmethod
    def _check_shapes(part: _Part, slot_items: Iterator[tuple[tuple, Any, str]]) -> None:
        """Checks each (slot, shape, dtype, where) against what the entry must hold."""
        for (kind, _, expect), shape, dtype, w in slot_items:
            if expect is not None and shape != expect:
                raise FormatError(f"{w}: shape {shape}, expected {expect}")
            if kind == "rewards" and dtype != np.float64:
                raise FormatError(f"{part.where} rewards: dtype {dtype}, expected float64")
            if kind in ("terminations", "truncations") and dtype != np.bool_:
                raise FormatError(f"{part.where} {kind}: dtype {dtype}, expected bool")

    def _load_part(self, m: _Manifest, part: _Part, file_size: int,
                   skip_stacked: bool = False, data: np.ndarray | None = None,
                   copy: bool = True) -> dict:
        """Reads an entry's arrays and decodes its values (stacked arrays only if not skipped)."""
        binfo = part.binfo
        bin_name = binfo["bin"]
        if skip_stacked:
            chosen = [i for i, slot in enumerate(part.slots) if slot[0] not in _STACKED]
        else:
            chosen = range(len(part.slots))
        slots = [part.slots[i] for i in chosen]
        refs = [part.refs[i] for i in chosen]
        arrays = self._read_arrays(bin_name, refs, aligned=True, expected_size=binfo["bin_size"],
                                   file_size=file_size, data=data, copy=copy)
        self._check_shapes(part, ((slot, arr.shape, arr.dtype, w)
                                  for slot, arr, (_, w) in zip(slots, arrays, refs)))
        return self._finish_part(m, part, slots, arrays, file_size, data, copy)

    def _finish_part(self, m: _Manifest, part: _Part, slots: list, arrays: list,
                     file_size: int, data: np.ndarray | None = None, copy: bool = True) -> dict:
        """Builds an entry's leaves, infos and metadata from its read arrays."""
        entry, where, steps, info_rows = part.entry, part.where, part.steps, part.obs_rows
        obs_rows = info_rows
        obs: list[Any] = [None] * len(m.obs_layout.leaves)
        act: list[Any] = [None] * len(m.act_layout.leaves)
        named: dict[str, np.ndarray] = {}
        info_index: dict[int, np.ndarray] = {}
        info_values: dict[int, np.ndarray] = {}
        for (kind, k, _), arr in zip(slots, arrays):
            if kind == "obs":
                obs[k] = arr
            elif kind == "act":
                act[k] = arr
            elif kind == "info_index":
                info_index[k] = arr
            elif kind == "info_values":
                info_values[k] = arr
            else:
                named[kind] = arr

        source = self._value_source(part.binfo["bin"], part.binfo["bin_size"], file_size, data,
                                    copy)
        for k, ((obj, w), leaf) in enumerate(zip(part.obs_stored, m.obs_layout.leaves)):
            if isinstance(leaf, ValuesLeaf):
                obs[k] = decode_values_leaf(leaf, obj, source, w)
                if len(obs[k]) != obs_rows:
                    raise FormatError(f"{w}: {len(obs[k])} rows, expected {obs_rows}")
        for k, ((obj, w), leaf) in enumerate(zip(part.act_stored, m.act_layout.leaves)):
            if isinstance(leaf, ValuesLeaf):
                act[k] = decode_values_leaf(leaf, obj, source, w)
                if len(act[k]) != steps:
                    raise FormatError(f"{w}: {len(act[k])} rows, expected {steps}")
        rows: list[dict] = [{} for _ in range(info_rows)]
        for k, col in enumerate(part.infos["keys"]):
            w = f"{where} infos column {k}"
            if k in info_index:
                idx = info_index[k]
                if idx.dtype != np.int64 or idx.ndim != 1 or (idx.size and (
                        idx[0] < 0 or idx[-1] >= info_rows or (np.diff(idx) <= 0).any())):
                    raise FormatError(f"{w}: index must be ascending int64 rows in [0, {info_rows})")
                positions = idx.tolist()
            else:
                positions = range(info_rows)
            if col["kind"] == "array":
                values = info_values[k]
                if values.ndim == 0 or values.shape[0] != len(positions):
                    raise FormatError(f"{w}: {values.shape} values for {len(positions)} rows")
                pytype = col.get("pytype")
                if pytype in ("bool", "int", "float"):
                    items = values.tolist()
                elif pytype is None:
                    items = list(values)
                else:
                    raise FormatError(f"{w}: unknown pytype {pytype!r}")
            else:
                if len(col["values"]) != len(positions):
                    raise FormatError(f"{w}: {len(col['values'])} values for {len(positions)} rows")
                items = [decode_value(v, source, w) for v in col["values"]]
            key = col["key"]
            for pos, item in zip(positions, items):
                rows[pos][key] = item
        seed = entry.get("seed")
        if seed is not None and type(seed) is not int:
            raise FormatError(f"{where}: 'seed' must be an integer or null")
        end = entry.get("end")
        if end is not None and end not in ENDS:
            raise FormatError(f"{where}: unknown end {end!r}")
        sub_env = entry.get("sub_env")
        if sub_env is not None and type(sub_env) is not int:
            raise FormatError(f"{where}: 'sub_env' must be an integer or null")
        return {"obs": obs, "act": act, "rewards": named.get("rewards"),
                "terminations": named.get("terminations"),
                "truncations": named.get("truncations"),
                "infos": rows, "seed": seed,
                "options": decode_value(entry.get("options"), source, f"{where} options"),
                "end": end if entry.get("continues") is not True else None, "sub_env": sub_env,
                "no_reset": entry.get("no_reset") is True}

    def _value_source(self, bin_name: str, bin_size: int | None = None,
                      file_size: int | None = None, data: np.ndarray | None = None,
                      copy: bool = True) -> Callable[[dict, str], np.ndarray]:
        def source(obj: dict, where: str) -> np.ndarray:
            return self._read_arrays(bin_name, [(obj, where)], aligned=True,
                                     expected_size=bin_size, file_size=file_size,
                                     data=data, copy=copy)[0]
        return source

    def _stitched(self, m: _Manifest, items: list[tuple[dict, dict, int, _Batch]],
                  index: int) -> Episode:
        """Reads an episode of several parts: each stacked array allocated once, read in place.

        Every part's references are checked (and every .bin's size) before anything is
        allocated or read; then each part's bytes are read straight into their rows of the
        episode's arrays. At most READ_THREADS .bin files are open at a time, however many
        parts the episode has.
        """
        parts = [self._plan_part(m, binfo, entry, part_no) for binfo, entry, part_no, _ in items]
        parsed: list[list[ArrayRef | None]] = []
        for part in parts:
            binfo = part.binfo
            bin_name, bin_size = binfo["bin"], binfo["bin_size"]
            self._check_bin(bin_name, bin_size)  # the real size, before allocating
            refs: list[ArrayRef | None] = []
            for (obj, w), (kind, _, _) in zip(part.refs, part.slots):
                if kind not in _STACKED:
                    refs.append(None)  # read (and checked) with the part's infos
                    continue
                ref = parse_ref(obj, w, file=bin_name)
                if ref.offset + ref.size > bin_size:
                    raise FormatError(f"{w}: bytes {ref.offset}..{ref.offset + ref.size} lie "
                                      f"outside {bin_name} ({bin_size} bytes)")
                refs.append(ref)
            self._check_shapes(part, ((slot, ref.shape, ref.dtype, w)
                                      for slot, ref, (_, w) in zip(part.slots, refs, part.refs)
                                      if ref is not None))
            parsed.append(refs)
        # The stacked slots are the same in every part: the layout's array leaves, then the
        # three step columns, in that order.
        stacked = [slot[:2] for slot in parts[0].slots if slot[0] in _STACKED]
        for part in parts[1:]:
            if [slot[:2] for slot in part.slots if slot[0] in _STACKED] != stacked:
                raise FormatError(f"{part.where}: holds other arrays than the episode's first "
                                  "part")
        columns: dict[tuple[str, int], list[ArrayRef]] = {key: [] for key in stacked}
        for part, refs in zip(parts, parsed):
            for slot, ref in zip(part.slots, refs):
                if ref is not None:
                    columns[slot[:2]].append(ref)
        dests = {key: self._allocate(parts[0].where, column) for key, column in columns.items()}
        # Where each part's rows go: the rows of the parts before it.
        jobs = []
        filled = dict.fromkeys(stacked, 0)
        for part, refs in zip(parts, parsed):
            rows = []
            for slot, ref, (_, w) in zip(part.slots, refs, part.refs):
                if ref is not None:
                    key = slot[:2]
                    rows.append((ref, w, dests[key], filled[key]))
                    filled[key] += ref.shape[0]
            jobs.append((part, rows))
        if sum(out.nbytes for out in dests.values()) >= PARALLEL_READ_BYTES:
            # Leaving the with block waits for every read, also when one of them failed.
            with ThreadPoolExecutor(READ_THREADS) as pool:
                for _ in pool.map(self._read_part_rows, jobs):
                    pass
        else:
            for job in jobs:
                self._read_part_rows(job)
        loaded = []
        for part in parts:
            loaded.append(self._load_part(m, part, part.binfo["bin_size"], skip_stacked=True))
        first, last = loaded[0], loaded[-1]

        def leaves(kind: str, count: int) -> list:
            return [dests[(kind, k)] if (kind, k) in dests
                    else [x for p in loaded for x in p[kind][k]] for k in range(count)]

        obs = leaves("obs", len(m.obs_layout.leaves))
        act = leaves("act", len(m.act_layout.leaves))
        return Episode(
            index=index,
            observations=obs[0] if m.obs_layout.single else m.obs_layout.unflatten(obs),
            actions=act[0] if m.act_layout.single else m.act_layout.unflatten(act),
            rewards=dests[("rewards", 0)], terminations=dests[("terminations", 0)],
            truncations=dests[("truncations", 0)],
            infos=[row for p in loaded for row in p["infos"]],
            seed=first["seed"], options=first["options"], env_id=m.env_id, end=last["end"],
            sub_env=first["sub_env"], writer=m.prefix, no_reset=first["no_reset"])

    @staticmethod
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

    def _read_part_rows(self, job: tuple[_Part, list]) -> None:
        """Reads one part's stacked arrays into their rows of the episode's arrays."""
        part, rows = job
        bin_name = part.binfo["bin"]
        for ref, where, out, row in rows:
            self._read_rows(bin_name, ref, where, out, row)

    def _read_rows(self, bin_name: str, ref: ArrayRef, where: str, out: np.ndarray,
                   row: int) -> None:
        """Reads one part's array into ``out[row:]``: in place, or through a cast if widened."""
        n = ref.shape[0]
        if ref.dtype == out.dtype:
            if not ref.size:
                return
            start = row * (ref.size // n)
            raw = out.reshape(-1).view(np.uint8)[start:start + ref.size]
            self._storage.readinto(bin_name, ref.offset, memoryview(raw))
            self._check_bytes(raw, ref, where)
        else:
            raw = self._read_exact(bin_name, ref.offset, ref.size)
            self._check_bytes(raw, ref, where)
            out[row:row + n] = raw.view(ref.dtype).reshape(ref.shape)

    # -- OpenAI gym-recording files -------------------------------------------------------------

    def _legacy_episode(self, m: _Manifest, b: int, pos: int, index: int) -> Episode:
        batch = self._batch(m, b)
        where = f"{m.batches[b]['fn']} episode {pos}"
        entry = batch.entries[pos]
        bins: dict[str, list] = {}

        def collect(obj: Any, w: str, depth: int = 0) -> None:
            if depth > 64:
                raise FormatError(f"{w}: nested too deeply")
            if isinstance(obj, dict):
                if obj.get("__type") == "ndarray":
                    name = check_plain_name(obj.get("npyfile"), w)
                    bins.setdefault(name, []).append((obj, w))
                else:
                    for k, v in obj.items():
                        collect(v, f"{w}[{k!r}]", depth + 1)
            elif isinstance(obj, list):
                for i, v in enumerate(obj):
                    collect(v, f"{w}[{i}]", depth + 1)

        for key in ("observations", "actions", "rewards"):
            if key not in entry:
                raise FormatError(f"{where}: missing {key!r}")
            collect(entry[key], f"{where} {key}")
        loaded: dict[int, np.ndarray] = {}
        for name, refs in bins.items():
            for (obj, _), arr in zip(refs, self._read_arrays(name, refs, aligned=False)):
                loaded[id(obj)] = arr

        def build(obj: Any) -> Any:
            if isinstance(obj, dict):
                if obj.get("__type") == "ndarray":
                    return loaded[id(obj)]
                return {k: build(v) for k, v in obj.items()}
            if isinstance(obj, list):
                items = [build(v) for v in obj]
                if items and all(isinstance(x, np.ndarray) for x in items) and all(
                        x.shape == items[0].shape and x.dtype == items[0].dtype for x in items):
                    return np.stack(items)
                if items and all(type(x) in (int, float, bool) for x in items):
                    arr = np.array(items)
                    if arr.dtype.kind not in "biuf":  # ints beyond 64 bits come back as objects
                        raise FormatError(f"{where}: numbers out of range for an array")
                    return arr
                return items
            return obj

        obs = build(entry["observations"])
        act = build(entry["actions"])
        rew = build(entry["rewards"])
        n_obs = len(obs) if isinstance(obs, (list, dict)) or (
            isinstance(obs, np.ndarray) and obs.ndim) else 0
        steps = max(n_obs - 1, 0)
        try:
            rewards = np.asarray(rew, dtype=np.float64).reshape(-1) if steps else np.zeros(0)
        except (TypeError, ValueError) as e:
            raise FormatError(f"{where}: rewards are not a list of numbers") from e
        if rewards.shape != (steps,):
            raise FormatError(f"{where}: {rewards.shape[0]} rewards for {n_obs} observations")
        if isinstance(act, np.ndarray) and act.ndim == 2 and act.shape == (1, 0):
            act = act.reshape(0)  # gym-recording wrote np.array([[]]) for "no actions"
        return Episode(index=index, observations=obs, actions=act, rewards=rewards,
                       terminations=np.zeros(steps, bool), truncations=np.zeros(steps, bool),
                       infos=[{} for _ in range(steps + 1)], seed=None, options=None,
                       env_id=None, end=None, sub_env=None, writer=m.prefix)


def scan_recorded_traces(directory: str | os.PathLike,
                         episode_cb: Callable[[Any, Any, Any], Any],
                         max_episodes: int | None = None) -> None:
    """Calls ``episode_cb(observations, actions, rewards)`` for every episode, in order.

    The same signature as OpenAI gym-recording's function, for code that used it.

    Args:
        directory: the recording directory.
        episode_cb: called once per episode.
        max_episodes: stop after this many episodes.
    """
    with RecordingReader(directory) as reader:
        for n, episode in enumerate(reader):
            if max_episodes is not None and n >= max_episodes:
                return
            episode_cb(episode.observations, episode.actions, episode.rewards)
