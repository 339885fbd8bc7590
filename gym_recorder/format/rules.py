"""The rules of manifests, batches and entries, as the reader and ``integrity`` check them:
versions, a manifest's BATCH, an ENTRY's flags and end, a BATCH's INDEX (see
:mod:`gym_recorder.format`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import FormatError
from .codecs import CODEC_NAMES
from .constants import (ALIGNMENT, BATCH_COUNTS, ENDS, FORMAT_NAME, FORMAT_VERSION, INDEX_TABLE_WIDTH,
                        MAX_INDEX_UNIT, MAX_JSON_BYTES, MIN_ENTRY_BYTES)
from .dtypes import parse_dtype
from .names import batch_stem, check_plain_name
from .refs import check_int

__all__ = ["is_legacy", "check_version", "check_version_number", "check_batch_entry",
           "batch_codecs", "check_flags", "continues", "entry_end", "IndexColumn",
           "parse_batch_index"]


def is_legacy(doc: dict[str, Any]) -> bool:
    """True for an OpenAI gym-recording manifest or batch: no "format" and no "version"."""
    return "format" not in doc and "version" not in doc


def check_version(doc: dict[str, Any], where: str) -> int:
    """Checks a manifest's "format" and "version" against this reader's; returns the version.

    Raises:
        FormatError: if the format is not ours, the version malformed or newer than
            :data:`FORMAT_VERSION`.
    """
    if doc.get("format") != FORMAT_NAME:
        raise FormatError(f"{where}: format is {doc.get('format')!r}, not {FORMAT_NAME!r}")
    return check_version_number(doc, where, 1, FORMAT_VERSION, "format")


def check_version_number(doc: dict[str, Any], where: str, lowest: int, newest: int,
                         what: str) -> int:
    """A document's "version": an int from ``lowest`` to ``newest`` (this reader's); returns it.

    Raises:
        FormatError: "bad {what} version", or "{what} version N is newer than this reader".
    """
    version = doc.get("version")
    if type(version) is not int or version < lowest:
        raise FormatError(f"{where}: bad {what} version {version!r}")
    if version > newest:
        raise FormatError(f"{where}: {what} version {version} is newer than this reader "
                          f"({newest}); upgrade gym_recorder")
    return version


def check_batch_entry(batch: Any, where: str, prefix: str, entries: int,
                      legacy: bool = False) -> int:
    """Checks one BATCH of a manifest; returns how many episodes it starts.

    Args:
        batch: the decoded BATCH object.
        where: names the manifest and the batch, for messages.
        prefix: the writer's prefix (the batch's files must be its own).
        entries: the entry index after the previous batch (batches must not overlap).
        legacy: a gym-recording manifest (``first``, ``len`` and ``fn`` only; every entry is
            an episode).

    Raises:
        FormatError: naming ``where`` and what is wrong.
    """
    if not isinstance(batch, dict):
        raise FormatError(f"{where}: must be an object")
    first, length = batch.get("first"), batch.get("len")
    if type(first) is not int or type(length) is not int or first < 0 or length < 0:
        raise FormatError(f"{where}: 'first' and 'len' must be non-negative integers")
    fn = check_plain_name(batch.get("fn"), where)
    if legacy:
        # gym-recording named batches P.epNNNNNNNNN.json; refuse another writer's files.
        if not (fn.startswith(prefix + ".ep") and fn.endswith(".json")):
            raise FormatError(f"{where}: fn {fn!r} is not a batch of this writer, expected "
                              f"{prefix + '.ep'}NNNNNNNNN.json")
        if length * MIN_ENTRY_BYTES > MAX_JSON_BYTES:
            raise FormatError(f"{where}: 'len' {length} episodes cannot fit a batch JSON of at "
                              f"most {MAX_JSON_BYTES} bytes")
        return length
    if first < entries:
        # Gaps are allowed (batches moved aside by repair); overlaps are not.
        raise FormatError(f"{where}: first entry {first} overlaps the previous batch "
                          f"(expected at least {entries})")
    check_plain_name(batch.get("bin"), where)
    stem = batch_stem(prefix, first)
    for key, ext in (("fn", ".json"), ("bin", ".bin")):
        if batch[key] != stem + ext:
            raise FormatError(f"{where}: {key} {batch[key]!r} is not this writer's batch "
                              f"file, expected {stem + ext!r}")
    new = batch.get("episodes")
    for key in BATCH_COUNTS:
        if type(batch.get(key)) is not int or batch[key] < 0:
            raise FormatError(f"{where}: {key!r} must be a non-negative integer")
    if type(new) is not int or not 0 <= new <= length:
        raise FormatError(f"{where}: 'episodes' must be an integer in [0, len]")
    batch_codecs(batch, where)
    if batch["json_size"] > MAX_JSON_BYTES or length * MIN_ENTRY_BYTES > batch["json_size"]:
        raise FormatError(f"{where}: 'len' {length} entries cannot fit a batch JSON of "
                          f"{batch['json_size']} bytes (at most {MAX_JSON_BYTES} bytes, at least "
                          f"{MIN_ENTRY_BYTES} byte an entry)")
    return new


def batch_codecs(batch: dict[str, Any], where: str) -> list[str]:
    """A BATCH's ``"codecs"``: the names of the codecs its arrays use (empty: none).

    Raises:
        FormatError: for a codec this reader does not know (named), or a BATCH with both codecs
            and an INDEX (whose offsets cannot describe compressed arrays).
    """
    names = batch.get("codecs", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise FormatError(f"{where}: 'codecs' must be a list of codec names")
    for name in names:
        if name not in CODEC_NAMES:
            raise FormatError(f"{where}: unknown codec {name!r} (this reader knows "
                              f"{', '.join(CODEC_NAMES)}); upgrade gym_recorder")
    if names and batch.get("index") is not None:
        raise FormatError(f"{where}: a batch with compressed arrays has no index")
    return names


def check_flags(entry: dict[str, Any], where: str) -> None:
    """Checks an ENTRY's flags: ``continues`` and ``no_reset`` are absent, true or false.

    Raises:
        FormatError: for any other value (``1``, ``"yes"``, ``null``, ``1e308``), named.
    """
    for key in ("continues", "no_reset"):
        if key in entry and type(entry[key]) is not bool:
            raise FormatError(f"{where}: {key!r} must be true or false, got {entry[key]!r}")


def continues(entry: dict[str, Any]) -> bool:
    """True if a later entry holds more of this entry's episode."""
    return entry.get("continues") is True


def entry_end(entry: dict[str, Any], where: str) -> str | None:
    """How the episode ends at this entry: one of :data:`ENDS`, or None (it continues, or was
    not ended).

    Raises:
        FormatError: for an "end" that is not one of :data:`ENDS`.
    """
    end = entry.get("end")
    if end is not None and end not in ENDS:
        raise FormatError(f"{where}: unknown end {end!r}")
    return None if continues(entry) else end


class IndexColumn:
    """One checked column of a batch INDEX: its dtype, first offset and padding unit."""

    __slots__ = ("dtype", "offset", "unit")

    def __init__(self, dtype: np.dtype, offset: int, unit: int) -> None:
        self.dtype = dtype
        self.offset = offset
        self.unit = unit


def parse_batch_index(index: Any, where: str, length: int, bin_size: int,
                      n_columns: int) -> tuple[int, int, list[IndexColumn]]:
    """Checks a BATCH's ``"index"`` as far as the manifest shows it (see "Batch index").

    Args:
        index: the decoded INDEX.
        where: names the manifest and the batch, for messages.
        length: the BATCH's ``len``.
        bin_size: the BATCH's ``bin_size``.
        n_columns: the columns the writer's spaces have (leaves of both, plus 3).

    Returns:
        (the table's offset, its CRC-32, the columns).

    Raises:
        FormatError: naming ``where`` and what is wrong.
    """
    if not isinstance(index, dict):
        raise FormatError(f"{where}: 'index' must be an object")
    table, crc, columns = index.get("table"), index.get("crc32"), index.get("columns")
    table_bytes = length * INDEX_TABLE_WIDTH * 8
    if type(table) is not int or table < 0 or table % ALIGNMENT or table + table_bytes > bin_size:
        raise FormatError(f"{where}: index table at {table!r} ({table_bytes} bytes) is not an "
                          f"offset aligned to {ALIGNMENT} inside the .bin ({bin_size} bytes)")
    crc = check_int(crc, where, "the index's crc32", 0, 0xFFFFFFFF)
    if not isinstance(columns, list) or len(columns) != n_columns:
        got = len(columns) if isinstance(columns, list) else type(columns).__name__
        raise FormatError(f"{where}: the index must have {n_columns} columns (the spaces' "
                          f"leaves, rewards, terminations, truncations), got {got}")
    out = []
    for k, col in enumerate(columns):
        here = f"{where} index column {k}"
        if not isinstance(col, list) or len(col) != 3:
            raise FormatError(f"{here}: must be [dtype, npyoff, unit]")
        dtype = parse_dtype(col[0], here)
        offset = check_int(col[1], here, "npyoff", 0, bin_size)
        unit = check_int(col[2], here, "unit", ALIGNMENT, MAX_INDEX_UNIT)
        if offset % ALIGNMENT or unit % ALIGNMENT:
            raise FormatError(f"{here}: npyoff {offset} and unit {unit} must be multiples of "
                              f"{ALIGNMENT}")
        out.append(IndexColumn(dtype, offset, unit))
    return table, crc, out
