"""What the recipe's two apps share: the prompts and the calculator (tracerl's safe evaluator)."""

from __future__ import annotations

from tracerl.tasks.synthetic import calculator as evaluate

# Measured on Qwen2.5-Coder-0.5B with these apps (docs/real-model.md): it calls the calculator
# by this name when the prompt names it, and it answers after the tool only when a user turn
# asks for the answer; with the tool's result alone it calls the tool again, on the result.
SYSTEM = ("You have one tool, named calculator. For every question, first call calculator with the arithmetic "
          "expression of the problem. When the tool returns the number, reply exactly: The answer is <that number>.")
AFTER_TOOL = "The calculator has answered. Reply with one sentence: The answer is <the calculator's result>."
MODEL_CALLS = 3  # a call, a retry after a tool error, the answer


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses, e.g. 37*41+12."""
    return evaluate(expression)
