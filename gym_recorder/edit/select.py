"""Choosing episodes to edit: numbers and Python-style ranges, or a condition on the summaries.

``parse_indices(["3", "7", "10:20"], 100)`` is 3, 7 and 10 to 19 (negative numbers count from
the end, ``:5`` and ``95:`` and ``0:10:2`` as in Python). :func:`condition` compiles a
``--where`` expression over an episode's summary (``length``, ``reward`` (or ``return``),
``end``, ``env_id``, ``writer``, ``seed``, ``sub_env``, ``number``, ``index``) with a small
evaluator of its own: comparisons, ``and``/``or``/``not``, arithmetic, ``in`` a list, string
methods ``startswith``/``endswith``; nothing else (never ``eval``).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import EditError

__all__ = ["parse_indices", "condition", "WHERE_NAMES"]

WHERE_NAMES = ("length", "reward", "return", "end", "env_id", "writer", "seed", "sub_env",
               "number", "index")
MAX_WHERE_CHARS = 1000

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_METHODS = ("startswith", "endswith")


def parse_indices(specs: Iterable[str | int], count: int) -> list[int]:
    """The indices that numbers and ranges name, among ``count`` episodes (sorted, unique).

    Raises:
        EditError: for a spec that is not a number or range, or a number out of range.
    """
    chosen: set[int] = set()
    for spec in specs:
        text = str(spec).strip()
        try:
            if ":" in text:
                parts = [int(p) if p.strip() else None for p in text.split(":")]
                if len(parts) > 3 or parts[2:] == [0]:
                    raise ValueError
                chosen.update(range(count)[slice(*parts)])
                continue
            k = int(text)
        except ValueError:
            raise EditError(f"{text!r} is not an episode number or a range like 10:20") from None
        if not -count <= k < count:
            raise EditError(f"episode {k} out of range ({count} episodes)")
        chosen.add(k % count)
    return sorted(chosen)


def condition(text: str) -> Callable[[dict[str, Any]], bool]:
    """Compiles a ``--where`` expression into a test of a summary's fields.

    Raises:
        EditError: for an expression that does not parse, or uses anything but the names,
            constants and operations the module allows.
    """
    if not isinstance(text, str) or len(text) > MAX_WHERE_CHARS:
        raise EditError(f"--where must be an expression of at most {MAX_WHERE_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise EditError(f"--where {text!r} does not parse: {e.msg}") from None
    _check(tree.body, text)

    def test(fields: dict[str, Any]) -> bool:
        try:
            return bool(_eval(tree.body, fields))
        except (TypeError, ZeroDivisionError, AttributeError) as e:
            raise EditError(f"--where {text!r} on episode {fields.get('index')}: {e} (seed and "
                            f"end may be None: test `seed is not None and ...`)") from None

    return test


def _check(node: ast.AST, text: str) -> None:
    ok = False
    if isinstance(node, ast.BoolOp | ast.UnaryOp | ast.BinOp | ast.Compare):
        ok = isinstance(node, ast.BoolOp) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub | ast.UAdd)
        ) or (isinstance(node, ast.BinOp) and type(node.op) in _BINARY) or (
            isinstance(node, ast.Compare) and all(
                type(op) in _COMPARE or isinstance(op, ast.Is | ast.IsNot) for op in node.ops))
    elif isinstance(node, ast.Name):
        ok = node.id in WHERE_NAMES
    elif isinstance(node, ast.Constant):
        ok = node.value is None or isinstance(node.value, bool | int | float | str)
    elif isinstance(node, ast.List | ast.Tuple):
        ok = True
    elif isinstance(node, ast.Call):
        func = node.func
        ok = (isinstance(func, ast.Attribute) and func.attr in _METHODS
              and not node.keywords and len(node.args) == 1)
        if ok and isinstance(func, ast.Attribute):
            _check(func.value, text)
            _check(node.args[0], text)
            return
    if not ok:
        raise EditError(f"--where {text!r}: {type(node).__name__} "
                        f"{ast.get_source_segment(text, node) or ''!r} is not allowed; use "
                        f"{', '.join(WHERE_NAMES)}, constants, comparisons, and/or/not, "
                        f"arithmetic, in [...], .startswith(...)")
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.expr_context | ast.operator | ast.boolop | ast.unaryop
                          | ast.cmpop):
            _check(child, text)


def _eval(node: ast.AST, fields: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return fields[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(e, fields) for e in node.elts]
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, fields) for v in node.values)
        return any(_eval(v, fields) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, fields)
        return (not value) if isinstance(node.op, ast.Not) else (
            -value if isinstance(node.op, ast.USub) else +value)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, fields), _eval(node.right, fields)
        if not all(isinstance(v, int | float) for v in (left, right)):
            raise TypeError("arithmetic takes numbers")  # (no "a" * 10**12)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, fields)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, fields)
            if isinstance(op, ast.Is | ast.IsNot):
                if not isinstance(right_node, ast.Constant) or right is not None:
                    raise TypeError("'is' only compares with None")
                result = (left is None) == isinstance(op, ast.Is)
            else:
                result = _COMPARE[type(op)](left, right)
            if not result:
                return False
            left = right
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        target, arg = _eval(node.func.value, fields), _eval(node.args[0], fields)
        if not isinstance(target, str) or not isinstance(arg, str):
            raise TypeError(f".{node.func.attr}() takes strings")
        return getattr(str, node.func.attr)(target, arg)
    raise TypeError(f"{type(node).__name__} is not allowed")  # (refused by _check)
