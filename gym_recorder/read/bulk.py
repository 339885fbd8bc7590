"""The reader's ways of reading many episodes at once, or a part of one: a whole-recording
column, the stacked step columns (through the batch indexes), the rows of one episode, a
recording batch by batch, and summaries. :class:`~gym_recorder.read.reader.RecordingReader`
has them from :class:`BulkReading`; they read through the same batches and decoder as its
indexing, and raise the same errors for the same damage.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from ..errors import EmptySelectionError
from .assemble import PartItem, summarize
from .wholecolumn import COLUMN_KINDS, read_column
from .batches import OpenEpisodes, decode_batch, list_batches
from .batchfile import Batch
from .decode import Decoder
from .episode import BatchInfo, Episode, EpisodePart, EpisodeSummary
from .manifest import Manifest
from .rows import EpisodeRows, episode_rows
from .stepindex import FIELDS as STACKED_FIELDS, Stacked, read_stacked
from .storage import Storage, naming_urls

__all__ = ["BulkReading", "naming_urls_method"]

_Method = TypeVar("_Method", bound=Callable[..., Any])


def naming_urls_method(method: _Method) -> _Method:
    """A reader method whose FormatErrors name a remote recording's files by their URL
    (:class:`gym_recorder.read.storage.naming_urls`); a local directory's are left as they are."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with naming_urls(self._storage):
            return method(self, *args, **kwargs)

    return cast(_Method, call)

class BulkReading:
    """Column, stacked, rows, batch-by-batch and summary reading of a
    :class:`~gym_recorder.read.reader.RecordingReader` (whose state and indexing they use)."""

    _storage: Storage
    _decoder: Decoder
    _manifests: list[Manifest]
    _starts: list[int]
    _count: int
    _by_prefix: dict[str, int]
    _open: OpenEpisodes

    @property
    def directory(self) -> str:
        raise NotImplementedError

    def __getitem__(self, index: int) -> Episode:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def _locate(self, index: int) -> tuple[int, Manifest, int]:
        raise NotImplementedError

    def _batch(self, m: Manifest, b: int) -> Batch:
        raise NotImplementedError

    def _parts(self, m: Manifest, number: int) -> list[PartItem]:
        raise NotImplementedError

    @naming_urls_method
    def _stacked(self, indices: Sequence[int],
                 fields: Sequence[str] = STACKED_FIELDS) -> Stacked | None:
        """The stacked step columns of episodes (normalised indices, in that order) read
        through the batches' indexes, or None where the batch JSON must be read (see
        :mod:`gym_recorder.read.stepindex`); for :func:`gym_recorder.training.transitions.transitions`."""
        self._check_open()
        return read_stacked(self._decoder, self._manifests, self._starts, indices, fields)

    @naming_urls_method
    def column(self, name: str = "observations", episodes: Iterable[int] | None = None) -> Any:
        """One field of many episodes as one array: every episode's rows in turn.

        Equal to concatenating ``getattr(episode, name)`` over the episodes, leaf by leaf for
        Dict and Tuple spaces (a leaf widened in some batches comes back widened), but each
        leaf is allocated once and every part's bytes are read straight into its rows, with no
        per-episode arrays in between. Leaves stored as values (Text, values outside the
        space) and gym-recording writers come back joined from the episodes.

        Example:
            >>> with RecordingReader(tmp_dir) as reader:
            ...     obs = reader.column("observations")   # (sum of N + 1, *obs shape)

        Args:
            name: ``"observations"`` (each episode's N + 1 rows), ``"actions"``,
                ``"rewards"``, ``"terminations"`` or ``"truncations"``.
            episodes: reader indices, in the order wanted (every episode by default).

        Raises:
            ValueError: if ``name`` is not one of those.
            EmptySelectionError: if no episode is selected.
            UnsupportedSpaceError: if the selected episodes' writers lay the field out
                differently (different spaces).
            FormatError: if a file is malformed, as reading the episodes would.
        """
        self._check_open()
        if name not in COLUMN_KINDS:
            raise ValueError(f"no column {name!r}; one of {', '.join(COLUMN_KINDS)}")
        indices = (list(range(self._count)) if episodes is None
                   else [self._locate(i)[0] for i in episodes])
        if not indices:
            raise EmptySelectionError(f"no episodes selected in {self.directory}")
        # Through the batches' indexes when they have them (no JSON parsed).
        stacked = read_stacked(self._decoder, self._manifests, self._starts, indices, [name])
        if stacked is not None:
            return getattr(stacked, name)
        located = [self._locate(i) for i in indices]
        return read_column(self._decoder, self.directory, name, located, self._parts,
                           self.__getitem__)

    @naming_urls_method
    def episode_rows(self, index: int) -> EpisodeRows | None:
        """An episode's checked references, to read any rows of its fields alone.

        ``reader.episode_rows(i).rows("observations", a, b)`` equals
        ``reader[i].observations[a:b]`` but reads only those rows' bytes: for a long episode of
        large observations, a few kB instead of the episode. Its batch files are read (their
        JSON) and every reference is checked when it is made, as reading the episode would.

        Returns:
            None when the episode must be read whole: with ``verify=True`` (a checksum covers
            a whole array), for a gym-recording writer, or when a leaf is stored as values or
            in different dtypes in different parts.

        Raises:
            IndexError, TypeError: for a bad index, as indexing raises.
            FormatError: if a file is malformed, as reading the episode would.
        """
        index, m, number = self._locate(index)
        if m.legacy or self._decoder.verify:
            return None
        return episode_rows(self._decoder, m, self._parts(m, number))

    # -- batch by batch ---------------------------------------------------------------------------

    @naming_urls_method
    def batches(self) -> list[BatchInfo]:
        """Lists every committed batch the reader knows, in the reader's order.

        A snapshot of the manifests read by the last :meth:`refresh`. For a single-env writer
        it reads only the manifests; for a vector writer, the batch files whose entries
        continue episodes of earlier batches (to tell which episodes those are).
        """
        self._check_open()
        return list_batches(self._manifests, self._starts, self._open)

    @naming_urls_method
    def read_batch(self, info: BatchInfo) -> list[EpisodePart]:
        """Decodes one batch, once: the part of every episode it holds, in entry order.

        The batch's .bin is read whole, in one read; arrays are views of it. Entries whose
        episode the reader does not show (its earlier part was in a batch ``repair`` moved
        aside) are left out.

        Args:
            info: a batch from :meth:`batches` (of this reader, or of another reader of the
                same recording).

        Raises:
            ValueError: if ``info`` is not a batch of this reader (nor the same file: its
                ``json_crc32`` differs from this reader's manifest).
            FormatError: if the batch is malformed, as reading its episodes would.
        """
        self._check_open()
        k = self._by_prefix.get(info.writer)
        m = None if k is None else self._manifests[k]
        b = info.number
        if k is None or m is None or not 0 <= b < len(m.batches) or m.batches[b]["fn"] != info.json_name:
            raise ValueError(f"{info!r} is not a batch of this reader")
        if info.json_crc32 is not None and m.batches[b].get("json_crc32") != info.json_crc32:
            raise ValueError(f"{info.json_name} of this reader is not the batch {info!r} names "
                             f"(another file of that name: the recording was replaced)")
        return decode_batch(self._decoder, m, b, self._starts[k], self._batch(m, b), self._open)

    # -- summaries --------------------------------------------------------------------------------

    @naming_urls_method
    def summary(self, index: int) -> EpisodeSummary:
        """Returns an episode's length, return, end and seed, reading only its rewards.

        Much cheaper than ``reader[index]`` for recordings of large observations (the
        command line's ``info`` and ``plot`` use it).
        """
        index, m, number = self._locate(index)
        if m.legacy:
            ep = self[index]
            return EpisodeSummary(index, ep.length, ep.total_reward, ep.end, ep.seed, ep.sub_env,
                                  ep.writer, ep.env_id, number)
        return summarize(self._decoder, m, number, index,
                         self._parts(m, number))._replace(number=number)

    def summaries(self) -> Iterator[EpisodeSummary]:
        """Yields :meth:`summary` for every episode, in order."""
        for i in range(self._count):
            yield self.summary(i)
