"""Rows of an episode read alone: :class:`EpisodeRows`, behind :meth:`RecordingReader.episode_rows`.

An episode's parts are found in their batches' plans (:mod:`gym_recorder.read.plan`; entry by
entry, :func:`gym_recorder.read.assemble.checked_parts`, for a batch without one), their
references checked as reading the episode checks them; then any rows of any field are read from the
parts that hold them, only their bytes (a shuffled training item of a long episode of images
reads its own rows, not the episode's 20 MB).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .assemble import PartItem, checked_parts, tree
from .wholecolumn import COLUMN_KINDS
from .decode import Decoder
from .entries import act_layout, obs_layout
from ..format import ArrayRef
from .manifest import Manifest
from ..format.spaces import Layout
from .storage import naming_urls

__all__ = ["EpisodeRows", "episode_rows", "SMALL_LEAF_BYTES"]

# An EpisodeRows leaf of at most this many bytes (the whole episode's) is read once and kept.
SMALL_LEAF_BYTES = 1 << 16


class EpisodeRows:
    """The checked array references of one episode's parts: any rows of its fields, read alone.

    Made by :meth:`RecordingReader.episode_rows` for an episode whose array leaves are stored
    as arrays of one dtype in every part; reading rows reads only their bytes (a shuffled
    training item of a long episode of images reads its own rows, not the episode). Holds no
    bytes and no open file: it reads through its reader, which must stay open.
    """

    __slots__ = ("_dec", "_layouts", "_columns", "_starts", "_small_keys", "_small")

    def __init__(self, dec: Decoder, layouts: dict[str, Layout | None],
                 columns: dict[tuple[str, int], list[tuple[str, ArrayRef, str]]]) -> None:
        self._dec = dec
        self._layouts = layouts
        self._columns = columns
        # Per (kind, leaf): the first row of each part in the episode's rows, then the total.
        self._starts = {key: np.cumsum([0] + [ref.shape[0] for _, ref, _ in col]).tolist()
                        for key, col in columns.items()}
        # Leaves of at most SMALL_LEAF_BYTES for the whole episode (the step columns, most
        # actions) are read whole on first use and kept: rows of them then read nothing.
        self._small_keys = {key for key, col in columns.items()
                            if sum(ref.size for _, ref, _ in col) <= SMALL_LEAF_BYTES}
        self._small: dict[tuple[str, int], np.ndarray] = {}

    def __len__(self) -> int:
        """The episode's steps."""
        return int(self._starts[("rewards", 0)][-1])

    @property
    def nbytes(self) -> int:
        """Bytes of the episode's arrays (every field)."""
        return sum(ref.size for column in self._columns.values() for _, ref, _ in column)

    def rows(self, name: str, start: int, stop: int) -> Any:
        """Rows ``start:stop`` of field ``name``: ``getattr(episode, name)[start:stop]``, leaf
        by leaf for Dict and Tuple spaces.

        Raises:
            ValueError: for an unknown field name.
            TypeError: unless ``start`` and ``stop`` are ints.
            IndexError: unless ``0 <= start <= stop <=`` the field's rows.
            FormatError: if a file is missing or shorter than its references say.
        """
        kind = COLUMN_KINDS.get(name)
        if kind is None:
            raise ValueError(f"no field {name!r}; one of {', '.join(COLUMN_KINDS)}")
        layout = self._layouts.get(kind)
        count = 1 if layout is None else len(layout.leaves)
        total = self._starts[(kind, 0)][-1] if count else (
            len(self) + 1 if kind == "obs" else len(self))
        if isinstance(start, bool) or isinstance(stop, bool) or not (
                isinstance(start, (int, np.integer)) and isinstance(stop, (int, np.integer))):
            raise TypeError(f"rows must be ints, got {start!r}:{stop!r}")
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= total:
            raise IndexError(f"rows {start!r}:{stop!r} of {name} out of range 0:{total}")
        with naming_urls(self._dec.storage):  # (a remote recording's files by their URL)
            leaves = [self._leaf_rows((kind, k), start, stop) for k in range(count)]
        return leaves[0] if layout is None else tree(layout, leaves)

    def _leaf_rows(self, key: tuple[str, int], start: int, stop: int) -> np.ndarray:
        if key not in self._small_keys:
            return self._read(key, start, stop)
        small = self._small.get(key)
        if small is None:
            small = self._small[key] = self._read(key, 0, self._starts[key][-1])
        return np.array(small[start:stop])

    def _read(self, key: tuple[str, int], start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of one leaf, read from the parts that hold them."""
        column, starts = self._columns[key], self._starts[key]
        first = column[0][1]
        out = np.empty((stop - start, *first.shape[1:]), dtype=first.dtype)
        row_bytes = first.dtype.itemsize * int(np.prod(first.shape[1:], dtype=np.int64))
        for (bin_name, ref, where), lo, hi in zip(column, starts, starts[1:]):
            a, b = max(start, lo), min(stop, hi)
            if a >= b:
                continue
            if ref.codec is not None:  # only the chunks that hold rows a..b are read
                self._dec.decode_rows(bin_name, ref, where, a - lo, b - lo,
                                      out[a - start:b - start])
                continue
            # (a reference already checked to lie in its file: its rows a..b do too)
            part = ArrayRef(bin_name, ref.dtype, (b - a, *ref.shape[1:]),
                            ref.offset + (a - lo) * row_bytes, (b - a) * row_bytes, None)
            self._dec.read_rows(bin_name, part, where, out, a - start)
        return out


_STEP_KINDS = ("rewards", "terminations", "truncations")


def episode_rows(dec: Decoder, m: Manifest, items: list[PartItem]) -> EpisodeRows | None:
    """The :class:`EpisodeRows` of writer m's episode of parts ``items``, with every part's
    references checked as reading the episode checks them; None if a leaf is stored as values
    in some part, or in other dtypes in different parts (the episode joins those: read it)."""
    columns: dict[tuple[str, int], list[tuple[str, ArrayRef, str]]] = {}
    planned = [(batch.plan, entry["index"] - binfo["first"]) for binfo, entry, _, batch in items]
    if all(plan is not None and plan.usable(pos) for plan, pos in planned):
        # Through the batches' plans: every reference checked once, with its batch.
        for (binfo, entry, _, batch), (plan, pos) in zip(items, planned):
            assert plan is not None
            dec.batch_size(batch, binfo)
            where = f"{binfo['fn']} entry {entry.get('index')}"
            n_obs, n_columns = plan.n_obs, len(plan.dtypes)
            for c in range(n_columns):
                key = (("obs", c) if c < n_obs else ("act", c - n_obs) if c < n_columns - 3
                       else (_STEP_KINDS[c - n_columns + 3], 0))
                columns.setdefault(key, []).append((binfo["bin"], plan.ref(c, pos), where))
    else:
        parts, parsed = checked_parts(dec, m, items)
        for part, refs in zip(parts, parsed):
            for slot, ref, (_, where) in zip(part.slots, refs, part.refs):
                if ref is not None:
                    columns.setdefault(slot[:2], []).append((part.binfo["bin"], ref, where))
    layouts = {"obs": obs_layout(m), "act": act_layout(m)}
    keys = [(kind, k) for kind in ("obs", "act") for k in range(len(layouts[kind].leaves))]
    for key in keys + [("rewards", 0), ("terminations", 0), ("truncations", 0)]:
        column = columns.get(key, [])
        if len(column) != len(items) or len({ref.dtype for _, ref, _ in column}) != 1:
            return None
    return EpisodeRows(dec, {"obs": layouts["obs"], "act": layouts["act"]}, columns)
