"""Safe integer arithmetic over a shape's axes, for grid/block/shared-memory/scalar expressions.

Parsed with :mod:`ast` and walked against a whitelist: integer literals, axis names, ``+ - * / //
%``, unary minus, parentheses, and the functions ``ceil``, ``floor``, ``cdiv``, ``min``, ``max``.
``/`` is exact (rational) division, so ``ceil(N/256)`` is exact for any N; the final value must
be an integer. Nothing is ever passed to ``eval``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from fractions import Fraction

from evaluator.ptx.errors import SpecError

MAX_LENGTH = 200
MAX_NODES = 64
LIMIT = 2**62  # any intermediate value beyond this is refused (no giant products)

_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: Fraction(a) / b,
    ast.FloorDiv: lambda a, b: Fraction(a) // b,
    ast.Mod: lambda a, b: Fraction(a) % b,
}
_FUNCTIONS: dict[str, tuple[int, Callable[..., Fraction | int]]] = {
    "ceil": (1, lambda a: math.ceil(a)),
    "floor": (1, lambda a: math.floor(a)),
    "cdiv": (2, lambda a, b: -(-Fraction(a) // b)),
    "min": (2, lambda a, b: min(a, b)),
    "max": (2, lambda a, b: max(a, b)),
}


def parse_expression(text: str | int, axes: tuple[str, ...], where: str) -> ast.expr | int:
    """Check an expression once (at upload); returns its tree, or the integer itself."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise SpecError(f"{where}: expected an integer or an expression string, got {text!r}")
    if isinstance(text, int):
        return text
    if len(text) > MAX_LENGTH:
        raise SpecError(f"{where}: expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise SpecError(f"{where}: {text!r} does not parse: {error.msg}") from error
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise SpecError(f"{where}: expression {text!r} is too long ({len(nodes)} nodes)")
    callees = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Name) and node.id not in axes and id(node) not in callees:
            raise SpecError(f"{where}: unknown name {node.id!r} in {text!r}; axes are {', '.join(axes)}")
        _check_node(node, axes, text, where)
    return tree


def _check_node(node: ast.AST, axes: tuple[str, ...], text: str, where: str) -> None:
    allowed = (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.Load, ast.USub, ast.UAdd)
    if isinstance(node, tuple(_BINARY)):
        return
    if not isinstance(node, allowed):
        raise SpecError(f"{where}: {type(node).__name__} is not allowed in {text!r}")
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        raise SpecError(f"{where}: operator {type(node.op).__name__} is not allowed in {text!r}")
    if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int)):
        raise SpecError(f"{where}: only integer literals are allowed, not {node.value!r} in {text!r}")
    if isinstance(node, ast.Name) and node.id not in axes and node.id not in _FUNCTIONS:
        raise SpecError(f"{where}: unknown name {node.id!r} in {text!r}; axes are {', '.join(axes)}")
    if isinstance(node, ast.Call):
        _check_call(node, text, where)


def _check_call(node: ast.Call, text: str, where: str) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        raise SpecError(f"{where}: only {', '.join(_FUNCTIONS)} may be called in {text!r}")
    arity = _FUNCTIONS[node.func.id][0]
    if node.keywords or len(node.args) != arity:
        raise SpecError(f"{where}: {node.func.id}() takes {arity} argument(s) in {text!r}")


def evaluate(tree: ast.expr | int, axes: dict[str, int], where: str) -> int:
    """Value of a checked expression for one shape; must be a whole number."""
    if isinstance(tree, int):
        return tree
    try:
        value = _walk(tree, axes)
    except ZeroDivisionError as error:
        raise SpecError(f"{where}: division by zero for axes {axes}") from error
    if Fraction(value).denominator != 1:
        raise SpecError(f"{where}: {ast.unparse(tree)} = {value} is not an integer for axes {axes}")
    return int(value)


def _walk(node: ast.expr, axes: dict[str, int]) -> Fraction | int:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int)  # checked at parse time
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        return _bounded(axes[node.id])
    if isinstance(node, ast.UnaryOp):
        value = _walk(node.operand, axes)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _bounded(_BINARY[type(node.op)](_walk(node.left, axes), _walk(node.right, axes)))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    function: Callable[..., Fraction | int] = _FUNCTIONS[node.func.id][1]
    return _bounded(function(*(_walk(arg, axes) for arg in node.args)))


def _bounded(value: Fraction | int) -> Fraction | int:
    if abs(Fraction(value)) > LIMIT:
        raise SpecError(f"value {value} is out of range")
    return value
