"""One plan per batch: where every entry's stacked arrays lie, resolved once.

A batch's stacked arrays (each observation leaf, each action leaf, rewards, terminations,
truncations: "columns") are what indexing, iteration, ``column``, ``transitions``,
``episode_rows`` and ``read_batch`` read. A :class:`BatchPlan` says, for every entry of a batch,
its episode, part, steps, rows and flags, and for every column its dtype, a row's shape and each
entry's offset in the .bin; :mod:`gym_recorder.read.gather` then copies any rows of any entries
out of it. A plan is made once per batch, when the batch is parsed
(:func:`~gym_recorder.read.batchfile.parse_batch` keeps it with the batch), or from the batch's
index alone (:func:`index_plan`) by readers that need no JSON:

- from the batch's INDEX when it has one ("Batch index" in :mod:`gym_recorder.format`): the
  index is the plan for every method, so all of them give one answer. When the JSON is parsed,
  each entry's references are held to it (:meth:`BatchPlan.hold`: an entry's when it is first
  read, a batch's at once when it is read whole): an entry whose reference is not the one the
  index places (a crafted or damaged reference) is not ``usable``, and is read entry by entry,
  which names what is wrong with it;
- else from the batch JSON, its references checked column by column with the rules of
  :func:`~gym_recorder.format.parse_ref` (the same rules, checked over a column at once);
- else none (a gym-recording writer, a leaf stored as values, compressed arrays, a reference
  any check refuses, a string column whose code points need checking): the batch is then read
  entry by entry (:mod:`gym_recorder.read.entries`), which raises the precise error or reads
  what it can. So nothing is read through a plan that the entry-by-entry path would refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from math import prod
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import FormatError
from ..format import fileio as _fileio
from ..format import ALIGNMENT, MAX_DIM, MAX_NDIM, ArrayRef, parse_dtype, parse_ref
from ..format.spaces import ArrayLeaf
from .batchindex import IndexTable, leaf_shapes
from .manifest import Manifest
from .storage import Storage

if TYPE_CHECKING:  # (the batch JSON's references, as batchfile finds them)
    from .batchfile import EntryRefs

__all__ = ["BatchPlan", "plan_batch", "index_plan", "plannable", "column_offsets"]

_INT = {int}
_INT_OR_NONE = {int, type(None)}
_LIST = {list}
_NDARRAY = {"ndarray"}
_C_ORDER = {"C"}
# A reference's keys: the first four every reference of a column shares, the rest differ.
_REF = itemgetter("__type", "order", "npyfile", "dtype", "shape", "npyoff", "size", "crc32")


# Entries of a batch held to their references one by one before the plan lists its values.
_FEW = 16


class BatchPlan:
    """Where each entry's stacked arrays lie in one batch's .bin (see the module docstring).

    Attributes:
        bin_name, bin_size: the batch's .bin and its size (the manifest's).
        episode, part, steps, flags: int64 per entry (flags: 1 continues, 2 no_reset).
        obs_rows: each entry's observation rows (steps, plus 1 for a part 0).
        n_obs: the number of observation columns (the first ones); then the actions', then
            rewards, terminations and truncations.
        dtypes, tails: each column's dtype (in this batch) and a row's shape.
        offsets: each column's int64 offset of every entry's array.
        ok: None when every entry's references are the plan's, else a bool per entry (an entry
            not ok is read entry by entry).
    """

    __slots__ = ("bin_name", "bin_size", "episode", "part", "steps", "flags", "obs_rows",
                 "n_obs", "dtypes", "tails", "offsets", "ok", "_lists", "_flat", "_held",
                 "_checked", "_py", "_refs")


    def __init__(self, bin_name: str, bin_size: int, table: np.ndarray, n_obs: int,
                 dtypes: list[np.dtype[Any]], tails: list[tuple[int, ...]],
                 offsets: list[np.ndarray], ok: np.ndarray | None = None) -> None:
        self.bin_name = bin_name
        self.bin_size = bin_size
        self.episode, self.part, self.steps, self.flags = (table[:, j] for j in range(4))
        self.obs_rows = self.steps + (self.part == 0)
        self.n_obs = n_obs
        self.dtypes = dtypes
        self.tails = tails
        self.offsets = offsets
        self.ok = ok
        self._lists: list[tuple[list[int], list[int], list[int], bool]] | None = None
        self._flat: tuple[np.ndarray, list[np.ndarray]] | None = None
        self._held = False  # the JSON's references not yet held to the plan (see hold)
        self._checked: dict[int, bool] = {}
        self._refs: EntryRefs | None = None  # the JSON's references, for checks and CRC-32s
        self._py: tuple[list[int], list[int], list[list[int]]] | None = None

    def __len__(self) -> int:
        return len(self.steps)

    def rows(self, c: int) -> np.ndarray:
        """Each entry's rows in column c."""
        return self.obs_rows if c < self.n_obs else self.steps

    def usable(self, pos: int) -> bool:
        """Whether entry ``pos`` is read through the plan (its references held to the plan
        when first asked, unless :meth:`check_all` held them all)."""
        if self._held:
            got = self._checked.get(pos)
            if got is None:
                got = self._checked[pos] = self._entry_usable(pos)
            return got
        return self.ok is None or bool(self.ok[pos])

    def _entry_usable(self, pos: int) -> bool:
        assert self._refs is not None
        refs = self._refs.entry(pos)
        if refs is None:
            return False
        if self._py is None and len(self._checked) >= _FEW:
            # (Python values for every entry: numpy's scalars cost more than the checks)
            self._py = (self.obs_rows.tolist(), self.steps.tolist(),
                        [offsets.tolist() for offsets in self.offsets])
        if self._py is None:  # (the first few entries: their values alone)
            obs_rows_here, steps_here = int(self.obs_rows[pos]), int(self.steps[pos])
            offsets_here = [int(offsets[pos]) for offsets in self.offsets]
        else:
            obs_rows_here, steps_here = self._py[0][pos], self._py[1][pos]
            offsets_here = [offsets[pos] for offsets in self._py[2]]
        n_obs, name = self.n_obs, self.bin_name
        for c, (obj, at_here, dtype, tail_t) in enumerate(zip(refs, offsets_here, self.dtypes,
                                                              self.tails)):
            rows = obs_rows_here if c < n_obs else steps_here
            dtype_str, row_bytes, tail = dtype.str, dtype.itemsize * prod(tail_t), list(tail_t)
            # The reference as the writer writes it, compared key by key (the plan's offset is
            # aligned and its array inside the .bin, its dtype and shape within parse_ref's
            # bounds); any other spelling is held to parse_ref's rules by _entry_ok.
            if type(obj) is dict:
                get = obj.get
                at, size, shape, crc = get("npyoff"), get("size"), get("shape"), get("crc32")
                if (at == at_here and type(at) is int and size == rows * row_bytes
                        and type(size) is int and get("dtype") == dtype_str
                        and get("npyfile") == name and get("__type") == "ndarray"
                        and type(shape) is list and len(shape) == len(tail) + 1
                        and shape[0] == rows and type(shape[0]) is int
                        and (not tail or (shape[1:] == tail
                                          and set(map(type, shape)) == _INT))
                        and (crc is None or (type(crc) is int and 0 <= crc <= 0xFFFFFFFF))
                        and get("order", "C") == "C" and "codec" not in obj):
                    continue
            if not _entry_ok(obj, rows, tail_t, dtype, at_here, name, self.bin_size):
                return False
        return True

    def hold(self, refs: EntryRefs) -> None:
        """Holds the entries to the batch JSON's references: an entry whose reference is not
        the plan's is not :meth:`usable`."""
        self._refs = refs
        self._held = True
        self._checked = {}

    def verified(self, pos: int, arrays: list[np.ndarray]) -> bool:
        """Whether entry ``pos``'s arrays (one per column, contiguous) have the CRC-32s of its
        references (and bool arrays only 0 and 1), as a verifying reader checks them; False
        also when the plan holds no references (the entry path then says what is wrong)."""
        refs = None if self._refs is None else self._refs.entry(pos)
        if refs is None:
            return False
        for obj, arr in zip(refs, arrays):
            raw = arr.reshape(-1).view(np.uint8)
            crc = obj.get("crc32")
            if crc is not None and _fileio.crc32(raw) != crc:
                return False
            if arr.dtype.kind == "b" and raw.size and raw.max() > 1:
                return False
        return True

    def check_all(self) -> None:
        """Holds every entry to its references at once (a batch read whole: a few passes a
        column instead of one :func:`~gym_recorder.format.parse_ref` per reference)."""
        if not self._held:
            return
        assert self._refs is not None
        refs = self._refs.columns()
        steps, obs_rows = self.steps.tolist(), self.obs_rows.tolist()
        ok: np.ndarray | None = None
        for c, objs in enumerate(refs):
            rows = obs_rows if c < self.n_obs else steps
            got = column_offsets(objs, rows, self.tails[c], self.bin_name, self.bin_size)
            if (got is not None and got[0] == self.dtypes[c]
                    and np.array_equal(got[1], self.offsets[c])):
                continue
            mask = np.fromiter((_entry_ok(obj, r, self.tails[c], self.dtypes[c], int(o),
                                          self.bin_name, self.bin_size)
                                for obj, r, o in zip(objs, rows, self.offsets[c])),
                               dtype=bool, count=len(objs))
            ok = mask if ok is None else ok & mask
        self.ok = ok
        self._held = False

    def ref(self, c: int, pos: int) -> ArrayRef:
        """Entry ``pos``'s array of column c (checked to lie in the .bin)."""
        n = int(self.rows(c)[pos])
        dtype, tail = self.dtypes[c], self.tails[c]
        return ArrayRef(self.bin_name, dtype, (n, *tail), int(self.offsets[c][pos]),
                        n * prod(tail) * dtype.itemsize, None)

    def arrays(self, pos: int, storage: Storage, data: np.ndarray | None) -> list[np.ndarray]:
        """Entry ``pos``'s array of every column, in memory they own: copied out of ``data``
        (the whole .bin, held while iterating) when given, else only their bytes read."""
        if data is None:
            return [self.array(c, pos, storage, None) for c in range(len(self.dtypes))]
        lists = self._lists
        if lists is None:  # each column's starts and sizes, in its items or bytes (Python ints)
            lists = self._lists = []
            for c, (dtype, tail) in enumerate(zip(self.dtypes, self.tails)):
                rows = self.rows(c)
                isz = dtype.itemsize if ALIGNMENT % dtype.itemsize == 0 else 1  # (else bytes)
                lists.append(((self.offsets[c] // isz).tolist(),
                              (rows * (prod(tail) * dtype.itemsize // isz)).tolist(),
                              rows.tolist(), isz == 1 and dtype.itemsize != 1))
        flat = self._flat
        if flat is None or flat[0] is not data:  # the .bin viewed in each column's dtype
            flat = self._flat = (data, [
                data if ALIGNMENT % dtype.itemsize else
                data[:len(data) // dtype.itemsize * dtype.itemsize].view(dtype)
                for dtype in self.dtypes])
        out = []
        for (starts, sizes, nrows, in_bytes), view, dtype, tail in zip(
                lists, flat[1], self.dtypes, self.tails):
            at = starts[pos]
            rows = view[at:at + sizes[pos]]
            if in_bytes:
                rows = rows.view(dtype)
            out.append((rows.reshape(nrows[pos], *tail) if tail else rows).copy())
        return out

    def view(self, c: int, pos: int, data: np.ndarray) -> np.ndarray:
        """Entry ``pos``'s array of column c, a view of ``data`` (the whole .bin)."""
        n = int(self.rows(c)[pos])
        dtype, tail = self.dtypes[c], self.tails[c]
        offset = int(self.offsets[c][pos])
        out: np.ndarray = data[offset:offset + n * prod(tail) * dtype.itemsize].view(
            dtype).reshape(n, *tail)
        return out

    def array(self, c: int, pos: int, storage: Storage, data: np.ndarray | None) -> np.ndarray:
        """Entry ``pos``'s array of column c, in memory it owns: copied out of ``data`` (the
        whole .bin) when given, else only its bytes read from ``storage``."""
        n = int(self.rows(c)[pos])
        dtype, tail = self.dtypes[c], self.tails[c]
        offset = int(self.offsets[c][pos])
        nbytes = n * prod(tail) * dtype.itemsize
        if data is not None:
            out: np.ndarray = data[offset:offset + nbytes].view(dtype).reshape(n, *tail).copy()
            return out
        out = np.empty((n, *tail), dtype)
        if nbytes:
            storage.readinto(self.bin_name, offset, out.reshape(-1).view(np.uint8).data)
        return out


def plannable(dtype: np.dtype[Any]) -> bool:
    """Whether a column of ``dtype`` is read through a plan: its arrays are views of 8-aligned
    bytes, with nothing to check in them (strings' code points are checked entry by entry)."""
    return dtype.kind != "U" and dtype.itemsize > 0 and ALIGNMENT % dtype.alignment == 0


def index_plan(m: Manifest, index: IndexTable, bin_name: str, bin_size: int) -> BatchPlan | None:
    """The plan of a batch from its checked index alone (None for a column not plannable)."""
    if not all(plannable(col.dtype) for col in index.columns):
        return None
    assert m.obs_layout is not None  # (a batch with an index is of this format)
    table = np.stack([index.episode, index.part, index.steps, index.flags], axis=1)
    return BatchPlan(bin_name, bin_size, table, len(m.obs_layout.leaves),
                     [col.dtype for col in index.columns], index.shapes, index.offsets)


def plan_batch(m: Manifest, binfo: dict[str, Any], table: np.ndarray,
               refs: EntryRefs, index: IndexTable | None) -> BatchPlan | None:
    """The plan of a parsed batch (its entries structurally checked): ``table`` is what its
    entries say (episode, part, steps, flags per entry), ``refs`` its references as stored
    (:class:`~gym_recorder.read.batchfile.EntryRefs`). With ``index`` (checked against the JSON
    by :func:`~gym_recorder.read.batchindex.check_entries`), the index's plan with each entry's
    references held to it; else the references' own, or None (see the module docstring)."""
    if m.obs_layout is None or m.act_layout is None or not all(
            isinstance(leaf, ArrayLeaf) for leaf in m.obs_layout.leaves + m.act_layout.leaves):
        return None
    bin_name, bin_size = binfo["bin"], binfo["bin_size"]
    n_obs = len(m.obs_layout.leaves)
    tails = leaf_shapes(m)
    if index is not None:
        plan = index_plan(m, index, bin_name, bin_size)
        if plan is not None:
            plan.hold(refs)
        return plan
    try:
        columns = refs.columns()
    except FormatError:
        return None  # (an entry not shaped as its space: named when read entry by entry)
    steps = table[:, 2].tolist()
    obs_rows = (table[:, 2] + (table[:, 1] == 0)).tolist()
    dtypes, offsets = [], []
    for c, objs in enumerate(columns):
        got = column_offsets(objs, obs_rows if c < n_obs else steps, tails[c], bin_name,
                             bin_size)
        if got is None or (c >= len(columns) - 3
                           and got[0] != _STEP_DTYPES[c - len(columns) + 3]):
            return None
        dtypes.append(got[0])
        offsets.append(got[1])
    plan = BatchPlan(bin_name, bin_size, table, n_obs, dtypes, tails, offsets)
    plan._refs = refs  # (every entry checked above: for the CRC-32s of a verifying reader)
    return plan


_STEP_DTYPES = (np.dtype(np.float64), np.dtype(np.bool_), np.dtype(np.bool_))


def column_offsets(objs: Sequence[Any], rows: list[int], tail: tuple[int, ...], bin_name: str,
                   file_size: int) -> tuple[np.dtype[Any], np.ndarray] | None:
    """Checks one column's references (one per entry, of ``rows[j]`` rows of shape ``tail``)
    with :func:`~gym_recorder.format.parse_ref`'s rules and the entry's shape and bounds checks,
    over the column at once: their dtype and offsets, or None if any is not as a well-formed
    batch has it, or of one dtype, or not :func:`plannable`."""
    if not objs:
        return None
    try:
        if any("codec" in obj for obj in objs):
            return None  # compressed arrays: decoded entry by entry (format.codecs)
        kinds, orders, names, dtypes, shapes, offs, sizes, crcs = zip(*map(_REF, objs))
        if (set(kinds) != _NDARRAY or set(orders) != _C_ORDER or set(names) != {bin_name}
                or len(set(dtypes)) != 1):
            return None
    except (KeyError, TypeError, ValueError):
        return None  # not an object, or a key left out ("order" and "crc32" may be): one by one
    try:
        dtype = parse_dtype(dtypes[0], bin_name)
    except (FormatError, TypeError):
        return None
    isz = dtype.itemsize
    if not plannable(dtype) or len(tail) + 1 > MAX_NDIM or any(d > MAX_DIM for d in tail):
        return None
    # Every shape is [rows[j], *tail], of ints: checked on the shapes' items laid end to end
    # (each shape of len(tail) + 1 items, so item k of shape j is at j * ndim + k).
    ndim = len(tail) + 1
    if set(map(type, shapes)) != _LIST or set(map(len, shapes)) != {ndim}:
        return None
    items = list(chain.from_iterable(shapes))
    if not set(map(type, items)) <= _INT or items[::ndim] != rows or any(
            items[k::ndim] != [d] * len(rows) for k, d in enumerate(tail, 1)):
        return None
    max_rows = max(rows)
    nonzero = prod(d for d in tail if d) * isz
    if max_rows > MAX_DIM or max(max_rows, 1) * nonzero > MAX_DIM:
        return None
    if not (set(map(type, offs)) <= _INT and set(map(type, sizes)) <= _INT
            and set(map(type, crcs)) <= _INT_OR_NONE):
        return None
    given = [c for c in crcs if c is not None] if None in crcs else crcs
    if given and (min(given) < 0 or max(given) > 0xFFFFFFFF):
        return None
    try:
        offs_a = np.array(offs, dtype=np.int64)
        sizes_a = np.array(sizes, dtype=np.int64)
    except OverflowError:
        return None
    if ((offs_a < 0).any() or (offs_a % ALIGNMENT).any() or (offs_a > file_size).any()
            or (sizes_a != np.array(rows, dtype=np.int64) * (prod(tail) * isz)).any()
            or (offs_a + sizes_a > file_size).any()):
        return None
    return dtype, offs_a


def _entry_ok(obj: Any, rows: int, tail: tuple[int, ...], dtype: np.dtype[Any], offset: int,
              bin_name: str, file_size: int) -> bool:
    """Whether one reference passes :func:`~gym_recorder.format.parse_ref` and is the array the
    plan places (its offset, dtype and shape, raw, inside the .bin)."""
    if type(obj) is not dict or obj.get("__type") != "ndarray":
        return False
    try:
        ref = parse_ref(obj, "", file=bin_name)
    except FormatError:
        return False
    return (ref.codec is None and ref.dtype == dtype and ref.shape == (rows, *tail)
            and ref.offset == offset and ref.end <= file_size)
