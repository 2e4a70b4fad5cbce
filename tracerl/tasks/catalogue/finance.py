"""Finance benchmarks: numerical reasoning over a report's text and tables.

Numbers are compared the way FinQA's own evaluation does, within rounding: the reply's final
answer equals the reference as mathematics, or is within 1% of it (``25%`` and ``0.25`` both
match a reference of 0.25 written as a percentage).
"""

from __future__ import annotations

from typing import Any

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders import math as math_grader
from ..loaders import Hub
from .math import MATH_PROMPT


class FinQA(Benchmark):
    """Numerical reasoning over a filing's text and table; numbers match within 1%."""

    name = "finqa"
    domain = "finance"
    grader = "the final answer equals the reference, or is within 1% of it (percent or fraction)"
    # The original repo is a loading script, which datasets>=4 no longer runs; the hub's
    # own parquet conversion of it lives on the refs/convert/parquet branch.
    hub = Hub("dreamerdeo/finqa", kwargs={"revision": "refs/convert/parquet"})
    id_key = "id"
    description = "financial report QA over text + table (dreamerdeo/finqa, parquet branch)"

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["answers"])

    def problem_text(self, row: dict[str, Any]) -> str:
        return f"{row['question']} {' '.join(row.get('pre_text') or [])}"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        d = task.data
        table = "\n".join(" | ".join(str(c) for c in r) for r in d.get("table") or [])
        context = "\n".join([*d.get("pre_text", []), "", table, "", *d.get("post_text", [])])
        return [{"role": "system", "content": MATH_PROMPT},
                {"role": "user", "content": f"{context.strip()}\n\nQuestion: {d['question']}"}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = math_grader.extract_answer(text)
        return math_grader.is_equiv(answer, task.answer) or math_grader.numeric_close(answer, task.answer)

    def solution(self, task: Task) -> str | None:
        return f"The answer is \\boxed{{{task.answer}}}."


BENCHMARKS: tuple[type[Benchmark], ...] = (FinQA,)
