"""The layout of a space's leaves: the tree a space description gives, and how values walk it.

Both sides derive a :class:`Layout` from a space's JSON description (see "Spaces" in
:mod:`gym_recorder.format`): the writer flattens each value into its leaves
(:meth:`Layout.flattener`), the reader rebuilds values (dicts, tuples) from the stored leaves
(:meth:`Layout.unflatten`, :meth:`Layout.tree_leaves`, :func:`decode_values_leaf`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError
from .constants import MAX_NDIM, MAX_NESTING, MAX_SPACE_ELEMENTS
from .dtypes import parse_dtype
from .values import ArraySource, decode_value

__all__ = ["ArrayLeaf", "DictNode", "Layout", "TupleNode", "ValuesLeaf", "decode_values_leaf",
           "space_shape"]


def space_shape(value: Any, where: str) -> tuple[int, ...]:
    """A described shape, checked: at most MAX_NDIM sizes, each and their product at most
    MAX_SPACE_ELEMENTS."""
    if not isinstance(value, list) or len(value) > MAX_NDIM or not all(
            type(d) is int and 0 <= d <= MAX_SPACE_ELEMENTS for d in value):
        raise FormatError(f"{where}: bad shape {value!r}")
    if math.prod(value) > MAX_SPACE_ELEMENTS:
        raise FormatError(f"{where}: shape {value!r} is absurdly large")
    return tuple(value)


class ArrayLeaf:
    """A leaf stored as one stacked array per entry (Box, Discrete, MultiDiscrete, MultiBinary)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.dtype = dtype
        self.shape = shape


class ValuesLeaf:
    """A leaf stored as a list of VALUEs, one per row (Text, Sequence, Graph, OneOf, unknown)."""

    __slots__ = ("kind", "stack")

    def __init__(self, kind: str, stack: bool = False) -> None:
        self.kind = kind
        self.stack = stack


class DictNode:
    """A Dict space: keys in the space's order, one child layout per key."""

    __slots__ = ("keys", "children")

    def __init__(self, keys: list[str], children: list[Any]) -> None:
        self.keys = keys
        self.children = children


class TupleNode:
    """A Tuple space: one child layout per element."""

    __slots__ = ("children",)

    def __init__(self, children: list[Any]) -> None:
        self.children = children


class Layout:
    """The leaves of a space, in a fixed depth-first order, and how to walk values through them.

    Attributes:
        root: the tree of :class:`DictNode`, :class:`TupleNode`, :class:`ArrayLeaf` and
            :class:`ValuesLeaf`.
        leaves: the leaves in depth-first order.
        single: True when the space is one leaf (values need no flattening).
    """

    def __init__(self, desc: Any, where: str = "space") -> None:
        self.leaves: list[Any] = []
        self.root = self._node(desc, where, 0)
        self.single = not isinstance(self.root, (DictNode, TupleNode))

    def _node(self, desc: Any, where: str, depth: int) -> Any:
        if depth > MAX_NESTING:
            raise FormatError(f"{where}: spaces nested too deeply")
        if not isinstance(desc, dict):
            raise FormatError(f"{where}: a space must be a JSON object")
        kind = desc.get("type")
        if kind == "Dict":
            pairs = desc.get("spaces")
            if not isinstance(pairs, list) or not all(
                    isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
                raise FormatError(f"{where}: Dict spaces must be [key, space] pairs")
            return DictNode([k for k, _ in pairs],
                            [self._node(s, f"{where}[{k!r}]", depth + 1) for k, s in pairs])
        if kind == "Tuple":
            subs = desc.get("spaces")
            if not isinstance(subs, list):
                raise FormatError(f"{where}: Tuple spaces must be a list")
            return TupleNode([self._node(s, f"{where}[{i}]", depth + 1) for i, s in enumerate(subs)])
        if kind == "Box":
            leaf: Any = ArrayLeaf(parse_dtype(desc.get("dtype"), where), space_shape(desc.get("shape"), where))
        elif kind == "Discrete":
            leaf = ArrayLeaf(parse_dtype(desc.get("dtype", "<i8"), where), ())
        elif kind == "MultiDiscrete":
            nvec = desc.get("nvec")
            try:
                nvec_shape = np.shape(nvec) if isinstance(nvec, list) else ()
            except ValueError as e:  # ragged, or nested deeper than numpy allows
                raise FormatError(f"{where}: MultiDiscrete nvec is not a rectangular array") from e
            leaf = ArrayLeaf(parse_dtype(desc.get("dtype"), where), nvec_shape)
            space_shape(list(leaf.shape), where)
        elif kind == "MultiBinary":
            n = desc.get("n")
            leaf = ArrayLeaf(np.dtype(np.int8), space_shape(n, where) if isinstance(n, list) else space_shape([n], where))
        elif kind in ("Text", "Graph", "OneOf", "unknown"):
            leaf = ValuesLeaf(kind)
        elif kind == "Sequence":
            leaf = ValuesLeaf(kind, bool(desc.get("stack")))
        else:
            raise FormatError(f"{where}: unknown space type {kind!r}")
        self.leaves.append(leaf)
        return leaf

    def leaf_paths(self) -> list[str]:
        """Each leaf's path in the space, in leaf order: ``""``, ``"['position']"``, ``"[0]"``."""
        out: list[str] = []

        def walk(node: Any, path: str) -> None:
            if isinstance(node, DictNode):
                for key, child in zip(node.keys, node.children):
                    walk(child, f"{path}[{key!r}]")
            elif isinstance(node, TupleNode):
                for i, child in enumerate(node.children):
                    walk(child, f"{path}[{i}]")
            else:
                out.append(path)

        walk(self.root, "")
        return out

    def flattener(self) -> Callable[[Any], list[Any]]:
        """Returns a function mapping one value of the space to the list of its leaf values."""
        def walk(node: Any, value: Any, out: list[Any]) -> None:
            if isinstance(node, DictNode):
                for key, child in zip(node.keys, node.children):
                    walk(child, value[key], out)
            elif isinstance(node, TupleNode):
                if len(value) != len(node.children):
                    raise ValueError(f"expected {len(node.children)} items, got {len(value)}")
                for item, child in zip(value, node.children):
                    walk(child, item, out)
            else:
                out.append(value)

        root = self.root

        def flatten(value: Any) -> list[Any]:
            out: list[Any] = []
            walk(root, value, out)
            return out

        return flatten

    def unflatten(self, leaves: list[Any]) -> Any:
        """Builds the space-shaped value (dicts, tuples) from per-leaf items in leaf order."""
        it = iter(leaves)

        def build(node: Any) -> Any:
            if isinstance(node, DictNode):
                return {k: build(c) for k, c in zip(node.keys, node.children)}
            if isinstance(node, TupleNode):
                return tuple(build(c) for c in node.children)
            return next(it)

        return build(self.root)

    def tree_leaves(self, tree: Any, where: str) -> list[Any]:
        """Returns the stored leaf objects of a TREE (as in a batch JSON), in leaf order.

        Raises:
            FormatError: if the tree does not have the shape of the space.
        """
        out: list[Any] = []

        def walk(node: Any, t: Any, w: str) -> None:
            if isinstance(node, DictNode):
                if not isinstance(t, dict) or "__type" in t:
                    raise FormatError(f"{w}: expected an object for a Dict space")
                for key, child in zip(node.keys, node.children):
                    if key not in t:
                        raise FormatError(f"{w}: missing key {key!r}")
                    walk(child, t[key], f"{w}[{key!r}]")
            elif isinstance(node, TupleNode):
                if not isinstance(t, list) or len(t) != len(node.children):
                    raise FormatError(f"{w}: expected a list of {len(node.children)} for a Tuple space")
                for i, (item, child) in enumerate(zip(t, node.children)):
                    walk(child, item, f"{w}[{i}]")
            else:
                out.append((t, w))

        walk(self.root, tree, where)
        return out


def decode_values_leaf(leaf: ValuesLeaf, stored: Any, source: ArraySource,
                       where: str) -> list[Any]:
    """Decodes a ValuesLeaf's stored rows into Python values, per the leaf's kind."""
    if not isinstance(stored, dict) or stored.get("__type") != "values" or not isinstance(
            stored.get("values"), list):
        raise FormatError(f"{where}: expected {{'__type': 'values', 'values': [...]}}")
    rows = [decode_value(v, source, where) for v in stored["values"]]
    if leaf.kind == "Text" and not all(isinstance(r, str) for r in rows):
        raise FormatError(f"{where}: Text rows must be strings")
    return rows
