"""Real benchmarks: the :class:`Benchmark` base (rows -> Tasks, splits) and the math family.

Each benchmark names its Hugging Face dataset (:class:`~tracerl.tasks.loaders.Hub`) and maps
tracerl's splits to the hub's (``splits``). A split the hub lacks is not faked: ``aime``,
``math500`` and ``humaneval`` are evaluation sets with no "train". When both tracerl splits
map to one hub split (``countdown-hub`` has only "train"), a row goes to "test" when the hash
of its id falls in the lowest 20%, so the two never overlap.

``tasks(split, n, seed)`` shuffles the split with a seeded RNG and takes ``n`` rows; "train"
cycles through reshuffled epochs when ``n`` exceeds the split (ids get an ``/e<epoch>``
suffix), "test" returns at most the whole split. ``Task.data`` is the raw row in the dataset's
own schema; ``Task.answer`` the reference the grader compares against.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import random
from collections import Counter
from fractions import Fraction
from typing import Any, ClassVar

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from .graders import math as math_grader
from .loaders import Hub, load_rows

log = logging.getLogger(__name__)

TEST_FRACTION = 0.2
CHAT_AGENT = "tracerl.tasks.bench_agents:chat_agent"
MATH_PROMPT = "Solve the problem step by step. Put the final answer in \\boxed{}."


def in_test(key: str) -> bool:
    """Whether a row with id ``key`` belongs to the held-out part of a shared hub split."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "big") < TEST_FRACTION * 2**32


class Benchmark:
    """A dataset-backed task. Subclasses set the class attributes and override the hooks."""

    name: ClassVar[str] = ""
    hub: ClassVar[Hub]
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "test"}
    description: ClassVar[str] = ""
    default_agent: ClassVar[str] = CHAT_AGENT
    max_turns: ClassVar[int] = 1
    id_key: ClassVar[str | None] = None  # the column holding a row id, if the dataset has one

    # -- hooks -----------------------------------------------------------------------------

    def row_id(self, row: dict[str, Any]) -> str:
        if self.id_key is not None:
            return str(row[self.id_key])
        return hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def reference(self, row: dict[str, Any]) -> Any:
        return row.get("answer")

    def messages(self, task: Task) -> list[dict[str, Any]]:
        raise NotImplementedError

    def is_correct(self, task: Task, text: str | None) -> bool:
        raise NotImplementedError

    def reward(self, task: Task, text: str | None, turns: int = 1) -> float:
        return 1.0 if self.is_correct(task, text) else 0.0

    def rewards(self, task: Task, text: str | None, turns: int = 1) -> dict[str, Any]:
        """What the built-in agent returns: the reward and whether the answer is right."""
        return {"reward": self.reward(task, text, turns), "is_correct": self.is_correct(task, text)}

    def feedback(self, task: Task, text: str | None, turn: int) -> str | None:
        return None

    def tools(self, task: Task) -> list[dict[str, Any]] | None:
        return None

    def call_tool(self, task: Task, name: str, arguments: dict[str, Any]) -> str:
        return f"error: unknown tool {name!r}"

    # -- loading ---------------------------------------------------------------------------

    def rows(self, split: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        """The rows of tracerl split ``split`` ("train" or "test")."""
        if split not in self.splits:
            have = ", ".join(sorted(self.splits))
            raise ConfigError(f"{self.name} has no {split!r} split (it has: {have}); "
                              f"it is an evaluation set, so train on another task")
        rows = load_rows(self.name, self.hub, self.splits[split], path)
        if self.splits.get("train") == self.splits.get("test"):
            rows = [r for r in rows if in_test(self.row_id(r)) == (split == "test")]
        return rows

    def tasks(self, split: str, n: int, seed: int = 0, path: str | os.PathLike[str] | None = None) -> list[Task]:
        """``n`` tasks of ``split`` in a seeded order (see the module docstring)."""
        rows = self.rows(split, path)
        rng = random.Random(f"{self.name}:{split}:{seed}")
        picked: list[tuple[int, int]] = []  # (epoch, row index)
        epoch = 0
        while len(picked) < n and rows and (epoch == 0 or split == "train"):
            order = list(range(len(rows)))
            rng.shuffle(order)
            picked += [(epoch, i) for i in order[: n - len(picked)]]
            epoch += 1
        if len(picked) < n:
            log.warning("%s: asked for %d %s tasks, the split has %d", self.name, n, split, len(picked))
        return [self.to_task(rows[i], split, e) for e, i in picked]

    def to_task(self, row: dict[str, Any], split: str, epoch: int = 0) -> Task:
        suffix = f"/e{epoch}" if epoch else ""
        return Task(id=f"{self.name}/{self.row_id(row)}{suffix}", data=dict(row),
                    answer=self.reference(row), dataset=self.name, split=split)


# ---------------------------------------------------------------------------- math


class MathBenchmark(Benchmark):
    """A question column, a reference answer; graded by :func:`graders.math.grade`."""

    question_key: ClassVar[str] = "problem"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": MATH_PROMPT},
                {"role": "user", "content": str(task.data[self.question_key])}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        return math_grader.grade(text, task.answer)


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


class FinQA(MathBenchmark):
    """Numerical reasoning over a filing's text and table; numbers match within 1%."""

    name = "finqa"
    # The original repo is a loading script, which datasets>=4 no longer runs; the hub's
    # own parquet conversion of it lives on the refs/convert/parquet branch.
    hub = Hub("dreamerdeo/finqa", kwargs={"revision": "refs/convert/parquet"})
    id_key = "id"
    description = "financial report QA over text + table (dreamerdeo/finqa, parquet branch)"

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["answers"])

    def messages(self, task: Task) -> list[dict[str, Any]]:
        d = task.data
        table = "\n".join(" | ".join(str(c) for c in r) for r in d.get("table") or [])
        context = "\n".join([*d.get("pre_text", []), "", table, "", *d.get("post_text", [])])
        return [{"role": "system", "content": MATH_PROMPT},
                {"role": "user", "content": f"{context.strip()}\n\nQuestion: {d['question']}"}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = math_grader.extract_answer(text)
        return math_grader.is_equiv(answer, task.answer) or math_grader.numeric_close(answer, task.answer)


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
    description = "reach a target from 3-4 numbers, each exactly once, + - * / (Jiayi-Pan/Countdown-Tasks-3to4)"

    def row_id(self, row: dict[str, Any]) -> str:
        return f"{'-'.join(map(str, row['nums']))}={row['target']}"

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
