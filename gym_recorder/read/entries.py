"""An entry of a batch, read on its own: its structure checked, its array references collected
(:meth:`EntryReading.plan_part`, nothing read), then its arrays read and its values decoded
(:meth:`EntryReading.load_part`) into a :class:`PartData`. The reading of bytes is the
:class:`~gym_recorder.read.decode.Decoder`'s, which this is part of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FormatError
from ..format import entry_end
from ..format.spaces import ArrayLeaf, Layout, ValuesLeaf, decode_values_leaf
from ..format.values import decode_value
from .manifest import Manifest
from .outside import _as_values, _outside_values, uniform_rows

__all__ = ["STACKED", "Part", "PartData", "EntryReading", "obs_layout", "act_layout"]

# Kinds of references whose arrays are stacked over an episode's parts (the others, infos, are
# per row and are read part by part).
STACKED = frozenset(("obs", "act", "rewards", "terminations", "truncations"))

def obs_layout(m: Manifest) -> Layout:
    """The observation layout of a writer in this format (a gym-recording one has none)."""
    if m.obs_layout is None:
        raise FormatError(f"{m.name}: a gym-recording writer has no observation space")
    return m.obs_layout


def act_layout(m: Manifest) -> Layout:
    """The action layout of a writer in this format (a gym-recording one has none)."""
    if m.act_layout is None:
        raise FormatError(f"{m.name}: a gym-recording writer has no action space")
    return m.act_layout


class Part:
    """One entry of an episode, structurally checked, with the references it holds."""

    __slots__ = ("binfo", "entry", "part_no", "where", "steps", "obs_rows", "obs_stored",
                 "act_stored", "infos", "refs", "slots")

    def __init__(self, binfo: dict[str, Any], entry: dict[str, Any], part_no: int) -> None:
        self.binfo = binfo
        self.entry = entry
        self.part_no = part_no
        self.where = f"{binfo['fn']} entry {entry.get('index')}"
        self.refs: list[tuple[dict[str, Any], str]] = []
        self.slots: list[tuple[str, int, Any]] = []  # (kind, leaf number, expected shape)
        self.steps = 0
        self.obs_rows = 0
        self.obs_stored: list[Any] = []
        self.act_stored: list[Any] = []
        self.infos: Any = None


@dataclass
class PartData:
    """What one entry holds, decoded: per-leaf observations and actions, step columns, infos
    and the episode's metadata (stacked columns None when the caller reads them itself)."""

    obs: list[Any]
    act: list[Any]
    rewards: np.ndarray | None
    terminations: np.ndarray | None
    truncations: np.ndarray | None
    infos: list[dict[str, Any]]
    seed: int | None
    options: Any
    end: str | None
    sub_env: int | None
    no_reset: bool

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Its rewards, terminations and truncations (read: not skipped by the caller)."""
        if self.rewards is None or self.terminations is None or self.truncations is None:
            raise ValueError("the part's step columns were not read")
        return self.rewards, self.terminations, self.truncations

class EntryReading:
    """The entry-by-entry reading of a :class:`~gym_recorder.read.decode.Decoder`."""

    def read_arrays(self, bin_name: str, refs: list[tuple[dict[str, Any], str]], aligned: bool,
                    expected_size: int | None = None, *, file_size: int | None = None,
                    data: np.ndarray | None = None, copy: bool = True) -> list[np.ndarray]:
        """Reads checked arrays (the decoder's)."""
        raise NotImplementedError

    def plan_part(self, m: Manifest, binfo: dict[str, Any], entry: dict[str, Any], part_no: int) -> Part:
        """Checks an entry's structure and collects its array references (reads nothing)."""
        part = Part(binfo, entry, part_no)
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

        part.obs_stored = obs_stored = obs_layout(m).tree_leaves(entry.get("observations"),
                                                                f"{where} observations")
        part.act_stored = act_stored = act_layout(m).tree_leaves(entry.get("actions"),
                                                                f"{where} actions")
        for k, ((obj, w), leaf) in enumerate(zip(obs_stored, obs_layout(m).leaves)):
            if isinstance(leaf, ArrayLeaf) and not _outside_values(obj):
                want(obj, w, "obs", k, (obs_rows, *leaf.shape))
        for k, ((obj, w), leaf) in enumerate(zip(act_stored, act_layout(m).leaves)):
            if isinstance(leaf, ArrayLeaf) and not _outside_values(obj):
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
    def check_shapes(part: Part, slot_items: Iterable[tuple[tuple[str, int, Any], Any, Any, str]]) -> None:
        """Checks each (slot, shape, dtype, where) against what the entry must hold."""
        for (kind, _, expect), shape, dtype, w in slot_items:
            if expect is not None and shape != expect:
                raise FormatError(f"{w}: shape {shape}, expected {expect}")
            if kind == "rewards" and dtype != np.float64:
                raise FormatError(f"{part.where} rewards: dtype {dtype}, expected float64")
            if kind in ("terminations", "truncations") and dtype != np.bool_:
                raise FormatError(f"{part.where} {kind}: dtype {dtype}, expected bool")

    def load_part(self, m: Manifest, part: Part, file_size: int,
                  skip_stacked: bool = False, data: np.ndarray | None = None,
                  copy: bool = True) -> PartData:
        """Reads an entry's arrays and decodes its values (stacked arrays only if not skipped)."""
        binfo = part.binfo
        bin_name = binfo["bin"]
        if skip_stacked:
            chosen = [i for i, slot in enumerate(part.slots) if slot[0] not in STACKED]
        else:
            chosen = list(range(len(part.slots)))
        slots = [part.slots[i] for i in chosen]
        refs = [part.refs[i] for i in chosen]
        arrays = self.read_arrays(bin_name, refs, aligned=True, expected_size=binfo["bin_size"],
                                   file_size=file_size, data=data, copy=copy)
        self.check_shapes(part, ((slot, arr.shape, arr.dtype, w)
                                  for slot, arr, (_, w) in zip(slots, arrays, refs)))
        return self.finish_part(m, part, slots, arrays, file_size, data, copy)

    def finish_part(self, m: Manifest, part: Part, slots: list[tuple[str, int, Any]],
                    arrays: list[np.ndarray],
                    file_size: int, data: np.ndarray | None = None, copy: bool = True) -> PartData:
        """Builds an entry's leaves, infos and metadata from its read arrays."""
        entry, where, steps, info_rows = part.entry, part.where, part.steps, part.obs_rows
        obs_rows = info_rows
        obs: list[Any] = [None] * len(obs_layout(m).leaves)
        act: list[Any] = [None] * len(act_layout(m).leaves)
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

        source = self.value_source(part.binfo["bin"], part.binfo["bin_size"], file_size, data,
                                    copy)
        for out, stored, layout, want in ((obs, part.obs_stored, obs_layout(m), obs_rows),
                                          (act, part.act_stored, act_layout(m), steps)):
            for k, ((obj, w), leaf) in enumerate(zip(stored, layout.leaves)):
                if isinstance(leaf, ValuesLeaf) or _outside_values(obj):
                    decoded = decode_values_leaf(_as_values(leaf), obj, source, w)
                    if len(decoded) != want:
                        raise FormatError(f"{w}: {len(decoded)} rows, expected {want}")
                    out[k] = uniform_rows(decoded) if isinstance(leaf, ArrayLeaf) else decoded
        rows: list[dict[str, Any]] = [{} for _ in range(info_rows)]
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
        sub_env = entry.get("sub_env")
        if sub_env is not None and type(sub_env) is not int:
            raise FormatError(f"{where}: 'sub_env' must be an integer or null")
        return PartData(obs, act, named.get("rewards"), named.get("terminations"),
                        named.get("truncations"), rows, seed,
                        decode_value(entry.get("options"), source, f"{where} options"),
                        entry_end(entry, where), sub_env, entry.get("no_reset") is True)

    def value_source(self, bin_name: str, bin_size: int | None = None,
                     file_size: int | None = None, data: np.ndarray | None = None,
                     copy: bool = True) -> Callable[[dict[str, Any], str], np.ndarray]:
        def source(obj: dict[str, Any], where: str) -> np.ndarray:
            return self.read_arrays(bin_name, [(obj, where)], aligned=True,
                                     expected_size=bin_size, file_size=file_size,
                                     data=data, copy=copy)[0]
        return source
