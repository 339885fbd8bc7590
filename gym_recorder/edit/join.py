"""Joining consecutive parts of one episode into one entry, for compaction.

A batch may not hold two parts of one episode (see "Episodes of a recording"), so joining two
small batches where an episode runs from one into the next means joining its parts: every
ARRAY becomes the rows of the first part followed by the second's (bytes concatenated, the
CRC-32 continued), the infos' columns likewise. Parts join only when that is exact: every
leaf an ARRAY of one dtype and row shape in both, the same info columns (same key, kind and
pytype, present in every row, arrays of one dtype and row shape); otherwise the batches stay
apart. A compressed ARRAY (``"codec"``) never joins: its stored bytes are a chunk table and
zstd frames of its own rows, which concatenated are not one compressed array (joining would
mean recompressing); the parts stay apart, each copied byte for byte.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import EditError
from ..format import parse_ref
from ..format.fileio import crc32
from ..format.spaces import ArrayLeaf, DictNode, Layout, TupleNode

__all__ = ["Segments", "can_join", "check_crc", "has_codec", "join_parts", "segments_of"]

# id(ARRAY dict) -> where its bytes are: (the old .bin's bytes, offset, size), in order.
Segments = dict[int, list[tuple[memoryview, int, int]]]
_STEPS = ("rewards", "terminations", "truncations")


def _is_array(x: Any) -> bool:
    return isinstance(x, dict) and x.get("__type") == "ndarray" and isinstance(
        x.get("shape"), list) and len(x["shape"]) >= 1


def _same_rows(a: Any, b: Any) -> bool:
    return _is_array(a) and _is_array(b) and a.get("dtype") == b.get("dtype") and \
        a["shape"][1:] == b["shape"][1:]


def has_codec(value: Any) -> bool:
    """Whether any ARRAY in ``value`` (an entry, a tree) is stored compressed."""
    if isinstance(value, dict):
        if value.get("__type") == "ndarray":
            return value.get("codec") is not None
        return any(has_codec(v) for v in value.values())
    if isinstance(value, list):
        return any(has_codec(v) for v in value)
    return False


def _leaves(node: Any, tree: Any, out: list[Any]) -> bool:
    """The TREE's leaves in order; False where the tree does not follow the layout."""
    try:
        if isinstance(node, DictNode):
            return all(_leaves(c, tree[k], out) for k, c in zip(node.keys, node.children))
        if isinstance(node, TupleNode):
            return all(_leaves(c, tree[i], out) for i, c in enumerate(node.children))
    except (KeyError, IndexError, TypeError):
        return False
    out.append(tree if isinstance(node, ArrayLeaf) else None)
    return True


def _arrays(entry: dict[str, Any], obs: Layout, act: Layout) -> list[Any] | None:
    out: list[Any] = []
    if not (_leaves(obs.root, entry.get("observations"), out)
            and _leaves(act.root, entry.get("actions"), out)):
        return None
    return out + [entry.get(k) for k in _STEPS]


def _info_columns(entry: dict[str, Any]) -> list[Any] | None:
    infos = entry.get("infos")
    keys = infos.get("keys") if isinstance(infos, dict) else None
    return keys if isinstance(keys, list) else None


def can_join(first: dict[str, Any], second: dict[str, Any], obs: Layout, act: Layout) -> bool:
    """Whether part p + 1 (``second``) joins part p (``first``) exactly."""
    if has_codec(first) or has_codec(second):
        return False
    a, b = _arrays(first, obs, act), _arrays(second, obs, act)
    if a is None or b is None or not all(_same_rows(x, y) for x, y in zip(a, b)):
        return False
    ca, cb = _info_columns(first), _info_columns(second)
    if ca is None or cb is None or len(ca) != len(cb):
        return False
    for x, y in zip(ca, cb):
        if not (isinstance(x, dict) and isinstance(y, dict)) or x.get("index") is not None or \
                y.get("index") is not None:
            return False
        if (x.get("key"), x.get("kind"), x.get("pytype")) != (
                y.get("key"), y.get("kind"), y.get("pytype")):
            return False
        if x.get("kind") == "array" and not _same_rows(x.get("values"), y.get("values")):
            return False
        if x.get("kind") == "values" and not (isinstance(x.get("values"), list)
                                              and isinstance(y.get("values"), list)):
            return False
    return True


def segments_of(entry: dict[str, Any], source: memoryview, segments: Segments) -> None:
    """Records where each ARRAY of a (copied) entry has its bytes: in its own batch's .bin (a
    compressed ARRAY's are its ``stored`` bytes: table and frames, copied as they are)."""
    if isinstance(entry, dict):
        if entry.get("__type") == "ndarray":
            size = entry["size"]
            if entry.get("codec") is not None:  # (checked: the stored size is what is copied)
                size = parse_ref(entry, f"{entry.get('npyfile')}: an array").stored or 0
            segments[id(entry)] = [(source, entry["npyoff"], size)]
            return
        for v in entry.values():
            segments_of(v, source, segments)
    elif isinstance(entry, list):
        for v in entry:
            segments_of(v, source, segments)


def check_crc(ref: dict[str, Any], data: memoryview | bytes) -> None:
    """Refuses an old ARRAY whose bytes (its stored bytes, when compressed) do not match its
    CRC-32: compaction does not copy damage into a new writer."""
    if type(ref.get("crc32")) is int and crc32(data) != ref["crc32"]:
        raise EditError(f"{ref.get('npyfile')}: the bytes of an array at {ref.get('npyoff')} do "
                        "not match its CRC-32 (nothing was changed); run gym-recorder verify "
                        "and repair first")


def _joined_ref(refs: list[tuple[dict[str, Any], memoryview]],
                segments: Segments) -> dict[str, Any]:
    out = dict(refs[0][0])
    rows = sum(r["shape"][0] for r, _ in refs)
    out["shape"] = [rows] + list(refs[0][0]["shape"][1:])
    out["size"] = sum(r["size"] for r, _ in refs)
    if all(type(r.get("crc32")) is int for r, _ in refs):
        crc = 0
        for r, src in refs:
            part = src[r["npyoff"]: r["npyoff"] + r["size"]]
            check_crc(r, part)  # (else the joined CRC-32 would vouch for damaged bytes)
            crc = crc32(part, crc)
        out["crc32"] = crc
    else:
        out.pop("crc32", None)
    segments[id(out)] = [(src, r["npyoff"], r["size"]) for r, src in refs]
    return out


def _join_tree(node: Any, trees: list[tuple[Any, memoryview]], segments: Segments) -> Any:
    if isinstance(node, DictNode):
        return {k: _join_tree(c, [(t[k], s) for t, s in trees], segments)
                for k, c in zip(node.keys, node.children)}
    if isinstance(node, TupleNode):
        return [_join_tree(c, [(t[i], s) for t, s in trees], segments)
                for i, c in enumerate(node.children)]
    return _joined_ref(trees, segments)


def join_parts(parts: list[tuple[dict[str, Any], memoryview]], obs: Layout, act: Layout,
               segments: Segments) -> dict[str, Any]:
    """One entry of consecutive parts (each pair checked by :func:`can_join`)."""
    head, last = parts[0][0], parts[-1][0]
    entry = copy.deepcopy(head)
    segments_of(entry, parts[0][1], segments)  # (its other ARRAYs: options, say)
    entry["observations"] = _join_tree(obs.root, [(p["observations"], s) for p, s in parts],
                                       segments)
    entry["actions"] = _join_tree(act.root, [(p["actions"], s) for p, s in parts], segments)
    for key in _STEPS:
        entry[key] = _joined_ref([(p[key], s) for p, s in parts], segments)
    entry["steps"] = sum(p["steps"] for p, _ in parts)
    entry["continues"], entry["end"] = last.get("continues"), last.get("end")
    columns = []
    for k, col in enumerate(head["infos"]["keys"]):
        new = dict(col)
        if col.get("kind") == "array":
            new["values"] = _joined_ref([(p["infos"]["keys"][k]["values"], s) for p, s in parts],
                                        segments)
        else:
            new["values"] = []
            for p, s in parts:
                values = copy.deepcopy(p["infos"]["keys"][k]["values"])
                segments_of(values, s, segments)
                new["values"].extend(values)
        columns.append(new)
    entry["infos"] = {"rows": sum(p["infos"].get("rows", 0) for p, _ in parts), "keys": columns}
    return entry
