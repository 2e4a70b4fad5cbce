"""The tools both example apps give the model, as plain functions (each framework wraps them)."""

from __future__ import annotations

from tracerl.tasks.synthetic import calculator as evaluate

# A word problem's units ("3 dozen eggs") need numbers the question does not state.
CONSTANTS = {"dozen": 12, "score": 20, "gross": 144, "week": 7, "hour": 60, "minute": 60}


def calculator(expression: str) -> str:
    """Evaluate + - * and parentheses on integers."""
    return evaluate(expression)  # tracerl's safe evaluator: the value, or "error: ..." to read and retry


def lookup_constant(name: str) -> str:
    """How many of the smaller unit one NAME holds: dozen, score, gross, week (days), hour (minutes), ..."""
    key = name.strip().lower()
    found = CONSTANTS.get(key, CONSTANTS.get(key.removesuffix("s")))  # "dozens" too
    return str(found) if found is not None else f"error: unknown constant {name!r}; known: {', '.join(CONSTANTS)}"
