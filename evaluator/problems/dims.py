"""Safe arithmetic over axis names: the dimension expressions of problem.toml (``size - k + 1``)
and the axis expressions and constraints of imported definitions (``hidden * 2``, ``M <= 64``).

Only numbers, names given by the caller, ``+ - * / // % **``, comparisons and ``and``/``or``:
``ast.parse`` reads the text and a small walker evaluates it, so nothing a problem file says can
call a function or reach an attribute. Pure Python, no torch.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip
#: Exponents above this are refused: ``2 ** 10 ** 9`` would hang the loader.
MAX_EXPONENT = 64


def _compare(node: ast.Compare, walk: Callable[[ast.AST], Any]) -> bool:
    left = walk(node.left)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        if type(op) not in _COMPARE:
            raise ValueError("unsupported comparison")
        right = walk(right_node)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _binary(node: ast.BinOp, walk: Callable[[ast.AST], Any]) -> Any:
    left, right = walk(node.left), walk(node.right)
    if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
        raise ValueError(f"exponent {right} is too large")
    return _BINARY[type(node.op)](left, right)


def evaluate(expression: str, names: Mapping[str, int | float]) -> Any:
    """The value of ``expression`` over ``names``; ValueError for anything outside the grammar
    (ArithmeticError, such as a division by zero, passes through)."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"unknown name {node.id!r}")
            return names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            value = walk(node.operand)
            return value if isinstance(node.op, ast.UAdd) else -value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _binary(node, walk)
        if isinstance(node, ast.Compare):
            return _compare(node, walk)
        if isinstance(node, ast.BoolOp):
            values = [walk(value) for value in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        raise ValueError(f"unsupported expression element {type(node).__name__}")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not an expression ({error.msg})") from None
    return walk(tree)


def evaluate_dim(expression: str, axes: Mapping[str, int]) -> int:
    """An integer dimension: ``evaluate`` whose result must be a whole number."""
    try:
        value = evaluate(expression, axes)
    except ArithmeticError as error:
        raise ValueError(str(error)) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ValueError(f"{expression} = {value!r} at {dict(axes)} is not a whole number")
    return int(value)
