"""What the recipe's two apps share: the prompt and the calculator (tracerl's safe evaluator)."""

from __future__ import annotations

from tracerl.tasks.synthetic import calculator as evaluate

# A small model calls the tool when the prompt asks for it on every computation (measured on
# Qwen2.5-Coder-0.5B: 1 of 16 wordy problems with a generic prompt, 9 of 16 with one like this).
SYSTEM = ("You solve arithmetic word problems. Use the calculator tool for every computation, with the whole "
          "expression, for example 37*41+12. After the tool answers, reply with: The answer is <number>.")
MODEL_CALLS = 3  # a call, a retry after a tool error, the answer


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses, e.g. 37*41+12."""
    return evaluate(expression)
