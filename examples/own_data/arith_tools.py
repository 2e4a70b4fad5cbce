"""The tools both example apps give the model, as plain functions (each framework wraps them)."""

from __future__ import annotations

import ast
import operator

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
# A word problem's units ("3 dozen eggs") need numbers the question does not state.
CONSTANTS = {"dozen": 12, "score": 20, "gross": 144, "week": 7, "hour": 60, "minute": 60}


def calculator(expression: str) -> str:
    """Evaluate + - * and parentheses on integers."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError("only integers, + - * and parentheses")

    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, RecursionError) as exc:
        return f"error: {exc}"  # the model reads the error and can try again


def lookup_constant(name: str) -> str:
    """How many of the smaller unit one NAME holds: dozen, score, gross, week (days), hour (minutes), ..."""
    key = name.strip().lower()
    found = CONSTANTS.get(key, CONSTANTS.get(key.removesuffix("s")))  # "dozens" too
    return str(found) if found is not None else f"error: unknown constant {name!r}; known: {', '.join(CONSTANTS)}"
