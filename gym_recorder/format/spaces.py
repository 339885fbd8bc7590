"""Gymnasium spaces in the recording: their JSON description, and the layout of their leaves.

A space is described once in the manifest (see "Spaces" in :mod:`gym_recorder.format`):
:func:`describe_space` writes that description, :func:`build_space` checks one read back and
rebuilds the space. The tree of leaves both sides derive from it is :mod:`.layout`'s
(:class:`Layout` and its nodes are re-exported here).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..errors import FormatError, SpaceKeptAsWarning
from .constants import MAX_NESTING
from .dtypes import parse_dtype
from .layout import (ArrayLeaf, DictNode, Layout, TupleNode, ValuesLeaf, decode_values_leaf,
                     space_shape)

# Rebuilding a Box allocates its low and high bounds in full (gymnasium's checks take about
# 4.5x this at peak): refuse bounds larger than this many bytes each, so that a hostile manifest
# cannot exhaust memory. A 4K RGB uint8 frame is 24.9 MB, a 1080p RGB float32 one 24.9 MB.
MAX_BOX_BOUND_BYTES = 1 << 26

# A Text charset of at most this many characters is described as a string (as format version 1
# always did); a larger one as code-point ranges.
MAX_CHARSET_STRING = 256
# Every Unicode code point, at most.
MAX_CODE_POINT = 0x10FFFF
MAX_CHARSET_CHARS = MAX_CODE_POINT + 1
# An unknown space is described by its class and its repr, kept for people only: cut to this
# many characters, so that a space holding large arrays does not bloat every batch header.
UNKNOWN_REPR_CHARS = 1000

# A space of its own whose values are strings (minigrid's MissionSpace) is described as a Text
# of 0 to this many printable ASCII characters: what a mission or an instruction holds (its
# values are stored as VALUEs whatever they are; the Text only describes them).
TEXT_KIND_MAX_LENGTH = 4096
TEXT_KIND_CHARSET = "".join(chr(c) for c in range(0x20, 0x7F))
TEXT_KIND_DESCRIPTION = f"Text(0 to {TEXT_KIND_MAX_LENGTH} printable ASCII characters)"


__all__ = ["space_kept_as", "describe_space", "build_space", "Layout", "ArrayLeaf", "ValuesLeaf", "DictNode",
           "TupleNode", "decode_values_leaf"]


def _bound_json(a: np.ndarray) -> Any:
    """A Box bound as JSON: one number when uniform, else a nested list; non-finite as strings."""
    def one(x: float) -> Any:
        if math.isfinite(x):
            return int(x) if a.dtype.kind in "iub" else float(x)
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")

    flat = a.ravel()
    if flat.size and (flat == flat[0]).all():
        return one(flat[0].item())
    return np.vectorize(one, otypes=[object])(a).tolist() if a.size else []


def describe_space(space: gym.Space[Any] | None) -> dict[str, Any]:
    """Describes a space as JSON (the SPACE of the format specification).

    Spaces the format does not know are described as ``{"type": "unknown"}``; their values are
    still recorded, as VALUEs.
    """
    if isinstance(space, spaces.Box):
        return {"type": "Box", "dtype": space.dtype.str, "shape": list(space.shape),
                "low": _bound_json(space.low), "high": _bound_json(space.high)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start),
                "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(),
                "start": space.start.tolist(), "dtype": space.dtype.str}
    if isinstance(space, spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": [int(x) for x in n] if isinstance(n, (tuple, list, np.ndarray)) else int(n)}
    if isinstance(space, spaces.Text):
        out = {"type": "Text", "min_length": int(space.min_length),
               "max_length": int(space.max_length)}
        chars = sorted(space.character_set)
        if len(chars) <= MAX_CHARSET_STRING:
            out["charset"] = "".join(chars)
        else:
            out["charset_ranges"] = charset_ranges(chars)
        return out
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[k, describe_space(s)] for k, s in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe_space(s) for s in space.spaces]}
    if isinstance(space, spaces.Sequence):
        return {"type": "Sequence", "space": describe_space(space.feature_space),
                "stack": bool(space.stack)}
    if isinstance(space, spaces.Graph):
        return {"type": "Graph", "node_space": describe_space(space.node_space),
                "edge_space": None if space.edge_space is None else describe_space(space.edge_space)}
    if isinstance(space, spaces.OneOf):
        return {"type": "OneOf", "spaces": [describe_space(s) for s in space.spaces]}
    cls = type(space)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if _holds_strings(space):
        # A space of its own whose values are strings (minigrid's MissionSpace): its values are
        # VALUEs either way; as Text, readers rebuild a space and Minari can store it.
        warnings.warn(f"{name} is a space gym_recorder does not know whose values are "
                      f"strings: described as {TEXT_KIND_DESCRIPTION} (the values are "
                      f"recorded exactly)", SpaceKeptAsWarning, stacklevel=2)
        return {"type": "Text", "min_length": 0, "max_length": TEXT_KIND_MAX_LENGTH,
                "charset": TEXT_KIND_CHARSET, "class": name}
    return {"type": "unknown", "class": name, "repr": repr(space)[:UNKNOWN_REPR_CHARS]}


def _holds_strings(space: Any) -> bool:
    """True for a space that is no gymnasium kind but whose values are str (numpy dtype U,
    no shape): minigrid's MissionSpace."""
    dtype = getattr(space, "dtype", None)
    return (isinstance(space, gym.Space) and isinstance(dtype, np.dtype) and dtype.kind == "U"
            and getattr(space, "shape", None) in (None, ()))


def charset_ranges(chars: list[str]) -> list[list[int]]:
    """Sorted characters as inclusive code-point ranges: ``[[first, last], ...]``."""
    out: list[list[int]] = []
    for c in chars:
        cp = ord(c)
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def _charset(desc: dict[str, Any], where: str) -> str:
    """A Text space's charset from ``charset`` (a string) or ``charset_ranges``."""
    if "charset_ranges" not in desc:
        charset: str = _get(desc, "charset", str, where)
        return charset
    ranges = desc["charset_ranges"]
    if not isinstance(ranges, list) or len(ranges) > MAX_CHARSET_CHARS:
        raise FormatError(f"{where}: charset_ranges must be a list of [first, last] pairs")
    total = 0
    prev = -1
    for r in ranges:
        if not (isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)
                and prev < r[0] <= r[1] <= MAX_CODE_POINT):
            raise FormatError(f"{where}: bad charset range {r!r} (ascending, disjoint code "
                              "points)")
        total += r[1] - r[0] + 1
        prev = r[1]
    if total > MAX_CHARSET_CHARS:
        raise FormatError(f"{where}: a charset of {total} characters is too large to rebuild")
    return "".join(chr(cp) for a, b in ranges for cp in range(a, b + 1))


def _get(desc: dict[str, Any], key: str, types: type | tuple[Any, ...], where: str) -> Any:
    value = desc.get(key)
    if not isinstance(value, types) or isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)):
        raise FormatError(f"{where}: space field {key!r} is missing or malformed")
    return value


def _bound(value: Any, shape: tuple[Any, ...], dtype: np.dtype, where: str) -> np.ndarray:
    def conv(x: Any, depth: int = 0) -> Any:
        if isinstance(x, list):
            if depth >= len(shape):
                raise FormatError(f"{where}: Box bound nested deeper than its shape {shape}")
            return [conv(v, depth + 1) for v in x]
        if isinstance(x, str):
            if x not in ("nan", "inf", "-inf"):
                raise FormatError(f"{where}: bad Box bound {x!r}")
            return float(x)
        if type(x) not in (int, float):
            raise FormatError(f"{where}: bad Box bound {x!r}")
        return x

    arr = np.array(conv(value), dtype=np.float64 if dtype.kind == "f" else object)
    if arr.size == 0 and 0 in shape:
        return np.zeros(shape, dtype)  # (a Box of no elements: [] whatever its shape)
    if arr.shape not in ((), shape):
        raise FormatError(f"{where}: Box bound of shape {arr.shape} for shape {shape}")
    try:
        return np.broadcast_to(arr, shape).astype(dtype)
    except (OverflowError, ValueError, TypeError) as e:
        raise FormatError(f"{where}: Box bound does not fit {dtype.str}") from e


def unknown_space(desc: Any, path: str = "", depth: int = 0) -> tuple[str, str] | None:
    """The first ``unknown`` space in a description, as ``(path, class)`` (path like
    ``"['mission']"``, "" for the space itself), or None: why :func:`build_space` gives None."""
    return _first_space(desc, path, depth, kept_as=False)


def space_kept_as(desc: Any) -> tuple[str, str, str] | None:
    """The first space in a description that was recorded as a kind of the format although it
    is another class (a :data:`TEXT_KIND_CLASSES` space as ``Text``), as ``(path, kind,
    class)``, or None."""
    found = _first_space(desc, "", 0, kept_as=True)
    if found is None:
        return None
    path, cls = found
    return path, "Text", cls


def _first_space(desc: Any, path: str, depth: int, kept_as: bool) -> tuple[str, str] | None:
    if not isinstance(desc, dict) or depth > MAX_NESTING:
        return None
    kind = desc.get("type")
    if kind == "unknown" and not kept_as:
        return path, str(desc.get("class"))
    if kept_as and kind == "Text" and isinstance(desc.get("class"), str):
        return path, desc["class"]
    subs: list[tuple[str, Any]] = []
    if kind == "Dict" and isinstance(desc.get("spaces"), list):
        subs = [(f"[{kv[0]!r}]", kv[1]) for kv in desc["spaces"]
                if isinstance(kv, list) and len(kv) == 2]
    elif kind in ("Tuple", "OneOf") and isinstance(desc.get("spaces"), list):
        subs = [(f"[{i}]", sub) for i, sub in enumerate(desc["spaces"])]
    elif kind == "Sequence":
        subs = [(".feature_space", desc.get("space"))]
    elif kind == "Graph":
        subs = [(".node_space", desc.get("node_space")), (".edge_space", desc.get("edge_space"))]
    for p, sub in subs:
        found = _first_space(sub, path + p, depth + 1, kept_as)
        if found:
            return found
    return None


def build_space(desc: Any, where: str = "space", depth: int = 0) -> gym.Space[Any] | None:
    """Rebuilds a gymnasium space from its description; ``None`` for an ``unknown`` space.

    Raises:
        FormatError: if the description is malformed.
    """
    if depth > MAX_NESTING:
        raise FormatError(f"{where}: spaces nested too deeply")
    if not isinstance(desc, dict):
        raise FormatError(f"{where}: a space must be a JSON object")
    kind = desc.get("type")
    try:
        if kind == "Box":
            dtype = parse_dtype(desc.get("dtype"), where)
            shape = space_shape(desc.get("shape"), where)
            if math.prod(shape) * dtype.itemsize > MAX_BOX_BOUND_BYTES:
                raise FormatError(f"{where}: Box of shape {shape} and dtype {dtype.str} is too "
                                  f"large to rebuild (bounds of more than {MAX_BOX_BOUND_BYTES} "
                                  "bytes)")
            return spaces.Box(_bound(desc.get("low"), shape, dtype, where),
                              _bound(desc.get("high"), shape, dtype, where), shape, dtype)
        if kind == "Discrete":
            n, start = _get(desc, "n", int, where), _get(desc, "start", int, where)
            dtype = parse_dtype(desc.get("dtype", "<i8"), where)
            if dtype == np.int64:  # (gymnasium before 1.2.2 has no dtype argument: all int64)
                return spaces.Discrete(n, start=start)
            return spaces.Discrete(n, start=start, dtype=dtype)
        if kind == "MultiDiscrete":
            return spaces.MultiDiscrete(np.array(_get(desc, "nvec", list, where)),
                                        dtype=parse_dtype(desc.get("dtype"), where),
                                        start=np.array(_get(desc, "start", list, where)))
        if kind == "MultiBinary":
            n = desc.get("n")
            return spaces.MultiBinary(list(space_shape(n, where)) if isinstance(n, list) else _get(desc, "n", int, where))
        if kind == "Text":
            return spaces.Text(_get(desc, "max_length", int, where),
                               min_length=_get(desc, "min_length", int, where),
                               charset=_charset(desc, where))
        if kind == "Dict":
            pairs = _get(desc, "spaces", list, where)
            if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
                raise FormatError(f"{where}: Dict spaces must be [key, space] pairs")
            built = {k: build_space(s, f"{where}[{k!r}]", depth + 1) for k, s in pairs}
            children = {k: s for k, s in built.items() if s is not None}
            if len(children) != len(built):
                return None
            return spaces.Dict(children)
        if kind in ("Tuple", "OneOf"):
            subs = [build_space(s, f"{where}[{i}]", depth + 1)
                    for i, s in enumerate(_get(desc, "spaces", list, where))]
            built_subs = [s for s in subs if s is not None]
            if len(built_subs) != len(subs):
                return None
            return spaces.Tuple(built_subs) if kind == "Tuple" else spaces.OneOf(built_subs)
        if kind == "Sequence":
            sub = build_space(desc.get("space"), f"{where}.space", depth + 1)
            return None if sub is None else spaces.Sequence(sub, stack=bool(desc.get("stack")))
        if kind == "Graph":
            node = build_space(desc.get("node_space"), f"{where}.node_space", depth + 1)
            edge_desc = desc.get("edge_space")
            edge = None if edge_desc is None else build_space(edge_desc, f"{where}.edge_space",
                                                               depth + 1)
            if node is None or (edge_desc is not None and edge is None):
                return None
            return spaces.Graph(node, edge)
        if kind == "unknown":
            return None
    except FormatError:
        raise
    except (ValueError, TypeError, AssertionError, OverflowError) as e:
        raise FormatError(f"{where}: cannot rebuild {kind} space ({e})") from e
    raise FormatError(f"{where}: unknown space type {kind!r}")
