r"""Math benchmarks: a problem, a reference answer, graded by math-verify's equivalence.

The model is asked to put its final answer in ``\boxed{}``; :func:`~tracerl.tasks.graders.
builtin.math_equal` reads the reply's final answer (the last box, else "the answer is X")
and compares it with the reference as mathematics (``\frac{3}{4}`` = 0.75, ``(x+1)^2`` =
``x^2+2x+1``), falling back to tracerl's own matcher without math-verify. Countdown is graded
by computing the expression exactly.
"""

from __future__ import annotations

import ast
from collections import Counter
from fractions import Fraction
from typing import Any, ClassVar

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders import math as math_grader
from ..graders.builtin import math_equal
from ..loaders import Hub

MATH_PROMPT = "Solve the problem step by step. Put the final answer in \\boxed{}."
MATH_GRADER = "math-verify equivalence of the final \\boxed{} answer with the reference"


class MathBenchmark(Benchmark):
    """A question column, a reference answer; graded by :func:`math_equal`."""

    domain = "math"
    grader = MATH_GRADER
    question_key: ClassVar[str] = "problem"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": MATH_PROMPT},
                {"role": "user", "content": str(task.data[self.question_key])}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        if not text or not text.strip() or task.answer in (None, ""):
            return False
        return math_equal(str(task.answer).strip(), text)

    def solution(self, task: Task) -> str | None:
        return f"The final answer is $\\boxed{{{task.answer}}}$."


class GSM8K(MathBenchmark):
    name = "gsm8k"
    hub = Hub("openai/gsm8k", ("main",))
    question_key = "question"
    description = "grade-school word problems (openai/gsm8k main); reference after '####'"

    def reference(self, row: dict[str, Any]) -> str:
        return row["answer"].split("####")[-1].strip().replace(",", "")


class MATH500(MathBenchmark):
    name = "math500"
    hub = Hub("HuggingFaceH4/MATH-500")
    splits = {"test": "test"}
    id_key = "unique_id"
    description = "500 MATH competition problems (HuggingFaceH4/MATH-500); eval only"


class HendrycksMath(MathBenchmark):
    name = "hendrycks_math"
    hub = Hub("EleutherAI/hendrycks_math", ("algebra", "counting_and_probability", "geometry",
                                            "intermediate_algebra", "number_theory", "prealgebra",
                                            "precalculus"))
    description = "MATH, all 7 subjects (EleutherAI/hendrycks_math); answer = \\boxed{} of the solution"

    def reference(self, row: dict[str, Any]) -> str | None:
        return math_grader.last_boxed(row["solution"])


class AIME(MathBenchmark):
    name = "aime"
    hub = Hub("AI-MO/aimo-validation-aime")
    splits = {"test": "train"}  # the hub calls its only split "train"; it is an eval set
    id_key = "id"
    description = "90 AIME 2022-2024 problems (AI-MO/aimo-validation-aime); eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["answer"])


# ---------------------------------------------------------------------------- countdown


def countdown_value(expression: str) -> tuple[Fraction, list[int]] | None:
    """The exact value of ``expression`` over + - * / and integers, and the integers used in
    order; None if it is anything else (parsed with ``ast``, never evaluated by Python)."""
    expr = expression.replace("\\times", "*").replace("\\div", "/").replace("\u00d7", "*")
    expr = expr.replace("\u00f7", "/").replace("\u2212", "-").replace("$", "").split("=")[0]
    if len(expr) > 200:
        return None
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    numbers: list[int] = []
    ops = {ast.Add: Fraction.__add__, ast.Sub: Fraction.__sub__, ast.Mult: Fraction.__mul__,
           ast.Div: Fraction.__truediv__}

    def value(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            numbers.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](value(node.left), value(node.right))
        raise ValueError("not + - * / over integers")

    try:
        return value(tree), numbers
    except (ValueError, ZeroDivisionError):
        return None


class CountdownHub(Benchmark):
    """TinyZero's Countdown: every given number exactly once, + - * / and parentheses."""

    name = "countdown-hub"
    hub = Hub("Jiayi-Pan/Countdown-Tasks-3to4")
    splits = {"train": "train", "test": "train"}
    domain = "math"
    grader = "the expression's exact value equals the target, each number used exactly once"
    description = "reach a target from 3-4 numbers, each exactly once, + - * / (Jiayi-Pan/Countdown-Tasks-3to4)"

    def row_id(self, row: dict[str, Any]) -> str:
        return f"{'-'.join(map(str, row['nums']))}={row['target']}"

    def problem_text(self, row: dict[str, Any]) -> str:
        return self.row_id(row)

    def reference(self, row: dict[str, Any]) -> int:
        return int(row["target"])

    def messages(self, task: Task) -> list[dict[str, Any]]:
        nums = ", ".join(map(str, task.data["nums"]))
        question = (f"Using the numbers {nums}, write an expression that equals {task.data['target']}. "
                    "Use + - * / and parentheses, and each number exactly once.")
        return [{"role": "system", "content": "End your reply with: The answer is <expression>."},
                {"role": "user", "content": question}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = math_grader.extract_answer(text)
        found = countdown_value(answer) if answer else None
        if found is None:
            return False
        value, used = found
        return value == task.data["target"] and Counter(used) == Counter(task.data["nums"])


BENCHMARKS: tuple[type[Benchmark], ...] = (GSM8K, MATH500, HendrycksMath, AIME, CountdownHub)
