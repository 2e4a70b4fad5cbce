r"""Math benchmarks, part 1: the base class, competition evaluation sets and Countdown.

The model is asked to put its final answer in ``\boxed{}``, each set in its established prompt
(lighteval's for AIME/AMC/MATH-500, Qwen's for Minerva, the official one for OlympiadBench);
:func:`~tracerl.tasks.graders.builtin.math_equal` reads the reply's final answer (the last box,
else "the answer is X" or "Answer: X") and compares it with the reference as mathematics
(``\frac{3}{4}`` = 0.75, ``(x+1)^2`` = ``x^2+2x+1``, "2, 3" = "3, 2"), falling back to tracerl's
own matcher without math-verify. **A reply that states several different final answers scores
0** ("\boxed{3} \boxed{4}", "The answer is 3. The answer is 4.", "either 3 or 4"), whichever of
them is right: every stated answer must equal the reference, and several values of one answer go
in one box (``\boxed{2, 3}``). A reply that marks no final answer (no box, "the answer is X",
"Answer: X" or "#### X") is wrong: every prompt here asks for one. Where a dataset writes its answers in a form math-verify
misreads (AMC's ``27.0``, Minerva's ``4.5e33``, OlympiadBench's ``["$2$", "$3$"]``), the
reference is rewritten, or several equivalent forms tried (:meth:`MathBenchmark.golds`).
Countdown is graded by computing the expression exactly; every expression the reply states must
reach the target.

Training sets and word problems (DeepScaleR, DAPO, Geometry3K, SVAMP, GSM-Hard, ASDiv) are in
:mod:`.math_train`.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any, ClassVar

from tracerl.core.errors import GradingError
from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..dedup import normalize as normalize_problem
from ..graders import math as math_grader
from ..graders.builtin import math_equal
from ..loaders import Hub

MATH_PROMPT = "Solve the problem step by step. Put the final answer in \\boxed{}."
MATH_GRADER = "math-verify equivalence of the final \\boxed{} answer with the reference"
# lighteval's MATH_QUERY_TEMPLATE (aime24, math_500; MATH-500's own eval.yaml has the same text)
LIGHTEVAL_PROMPT = (
    "Solve the following math problem efficiently and clearly. The last line of your response should be of the "
    "following format: 'Therefore, the final answer is: $\\boxed{ANSWER}$. I hope it is correct' (without quotes) "
    "where ANSWER is just the final number or expression that solves the problem. Think step by step before "
    "answering.\n\n{problem}")
# Qwen2.5-Math's chain-of-thought prompt, also what evalscope and open-instruct use for Minerva
QWEN_PROMPT = "{problem}\nPlease reason step by step, and put your final answer within \\boxed{}."


def number_text(value: float | int) -> str:
    """A number column as an answer: 27.0 -> "27"; float noise dropped (3244047.0999999996 ->
    "3244047.1"), since math-verify would compare the float's digits, not a model's."""
    number = float(value)
    return str(int(number)) if number.is_integer() else format(number, ".12g")


def any_equal(golds: Iterable[str], text: str) -> bool:
    """Whether ``text``'s final answer equals one of ``golds`` (forms of one reference); a
    GradingError only when math-verify can read none of them."""
    error: GradingError | None = None
    readable = False
    for gold in golds:
        try:
            if math_equal(gold, text):
                return True
            readable = True
        except GradingError as exc:
            error = exc
    if error is not None and not readable:
        raise error
    return False


class MathBenchmark(Benchmark):
    """A problem, a reference answer; graded by :func:`math_equal` against :meth:`golds`.

    ``template`` (with ``{problem}``) makes the prompt one user turn in the dataset's
    established form; without one, a short system prompt asks for a ``\\boxed{}`` answer."""

    domain = "math"
    grader = MATH_GRADER
    question_key: ClassVar[str] = "problem"
    template: ClassVar[str | None] = None

    def question(self, row: dict[str, Any]) -> str:
        """The problem as the model sees it (by default the statement, :meth:`problem_text`)."""
        return self.problem_text(row)

    def messages(self, task: Task) -> list[dict[str, Any]]:
        problem = self.question(task.data)
        if self.template is not None:
            return [{"role": "user", "content": self.template.replace("{problem}", problem)}]
        return [{"role": "system", "content": MATH_PROMPT}, {"role": "user", "content": problem}]

    def golds(self, task: Task) -> list[str]:
        """The reference in the forms a reply may be compared with."""
        return [str(task.answer).strip()]

    def is_correct(self, task: Task, text: str | None) -> bool:
        # Every prompt asks for a marked final answer (a box, "Answer:"); a reply without one is
        # not graded by whichever of its numbers math-verify would take (an echoed question
        # "What is $\frac{1}{2} + \frac{1}{3}$?" would be its own answer).
        if not text or not math_grader.final_answers(text) or task.answer in (None, ""):
            return False
        return any_equal(self.golds(task), text)

    def solution(self, task: Task) -> str | None:
        if task.answer in (None, ""):
            return None
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
    template = LIGHTEVAL_PROMPT
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
    template = LIGHTEVAL_PROMPT
    grader = "math-verify equivalence of the final \\boxed{} answer with the integer answer"
    description = "90 AIME 2022-2024 problems (AI-MO/aimo-validation-aime); eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["answer"]).strip()


class AIME24(AIME):
    """The 30 AIME 2024 problems as lighteval's ``aime24`` task reads them (the same problems
    as the 2024 rows of ``aime``)."""

    name = "aime24"
    hub = Hub("HuggingFaceH4/aime_2024")
    description = "30 AIME 2024 I+II problems (HuggingFaceH4/aime_2024); eval only"


class AIME25(AIME):
    """MathArena's 30 AIME 2025 problems; ``answer`` is an int64 there."""

    name = "aime25"
    hub = Hub("MathArena/aime_2025")
    id_key = "problem_idx"
    description = "30 AIME 2025 I+II problems (MathArena/aime_2025, CC BY-NC-SA); eval only"


class AMC(AIME):
    """AMC 12 2022-2023 problems rewritten to have an integer answer, stored as a float (27.0):
    the reference is the number as an integer, so 27 and 27.0 both match."""

    name = "amc"
    hub = Hub("AI-MO/aimo-validation-amc")
    description = "83 AMC 12 2022-2023 problems with integer answers (AI-MO/aimo-validation-amc); eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return number_text(row["answer"])


_SCIENTIFIC = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])")


def scientific_latex(text: str) -> str:
    """``4.5e33`` written as ``4.5\\times10^{33}``: math-verify reads the former as 4.5*e*33."""
    return _SCIENTIFIC.sub(lambda m: f"{m.group(1)}\\times10^{{{int(m.group(2))}}}", text)


class Minerva(MathBenchmark):
    """Minerva's 272 OCW STEM problems; answers are numbers (some as ``4.5e33``) or
    expressions, units stated in the question. Qwen2.5-Math grades them with numeric and
    sympy equivalence; here math-verify, with e-notation turned into ``\\times10^{}`` on both
    sides."""

    name = "minerva"
    hub = Hub("math-ai/minervamath")
    splits = {"test": "test"}
    question_key = "question"
    template = QWEN_PROMPT
    description = "272 undergraduate STEM problems of Minerva (math-ai/minervamath); eval only"

    def golds(self, task: Task) -> list[str]:
        return [scientific_latex(str(task.answer).strip())]

    def is_correct(self, task: Task, text: str | None) -> bool:
        return super().is_correct(task, scientific_latex(text) if text else text)


def _unwrap_dollars(answer: str) -> str:
    return answer.strip().strip("$").strip()


_ANSWER_TYPES = {"Numerical": "a numerical value", "Expression": "an expression", "Equation": "an equation",
                 "Interval": "an interval"}


def olympiad_prompt(row: dict[str, Any]) -> str:
    """OlympiadBench's official English prompt for an open-ended problem (as lighteval has it)."""
    kinds = [next((v for k, v in _ANSWER_TYPES.items() if k in t), "") for t in str(row["answer_type"]).split(",")]
    kind_text = ""
    if kinds and all(kinds) and "Tuple" not in row["answer_type"] and "Need_human_evaluate" not in row["answer_type"]:
        if not row["is_multiple_answer"]:
            kind_text = f"The answer of The problem should be {kinds[0]}. "
        elif len(set(kinds)) == 1:
            kind_text = f"The problem has multiple answers, each of them should be {kinds[0]}. "
        else:
            kind_text = f"The problem has multiple answers, with the answers in order being {', '.join(kinds)}. "
    box = "\\boxed{multiple answers connected with commas}" if row["is_multiple_answer"] else "\\boxed{answer}"
    unit_text = ""
    if row.get("unit"):
        box += "(unit)"
        unit_text = ", note that the unit of the answer should not be included in \\boxed{}"
    subject = "Math" if "Math" in str(row.get("subject") or "Math") else "Physics"
    instruction = (f"The following is an open-ended problem from an International {subject} competition. "
                   f"{kind_text}Please calculate the answer according to the given requirements and the "
                   "information provided. Please use LaTeX format to represent the variables and formulas used "
                   f"in the solution process and results. Please end your solution with \"So the final answer is "
                   f"{box}.\" and give the result explicitly{unit_text}.")
    context = f"{row['context']}\n" if row.get("context") else ""
    return f"{instruction}\n{context}{row['question']}"


class OlympiadBench(MathBenchmark):
    """OlympiadBench's open-ended, text-only, English maths competition problems. The official
    judge compares with sympy (multiple answers unordered, a tolerance from ``error``); here
    math-verify on the ``final_answer`` list joined by commas (math-verify compares such a
    list as a set, so the order does not matter). ``error`` (a tolerance, usually null) is not
    used: math-verify compares numbers to 6 decimal places."""

    name = "olympiadbench"
    hub = Hub("Hothan/OlympiadBench", ("OE_TO_maths_en_COMP",))
    splits = {"test": "train"}  # each config's only split is "train"; it is an eval set
    id_key = "id"
    question_key = "question"
    description = "674 olympiad maths problems, open-ended, English (Hothan/OlympiadBench OE_TO_maths_en_COMP); eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return ", ".join(_unwrap_dollars(a) for a in row["final_answer"] or [])

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "user", "content": olympiad_prompt(task.data)}]

    def solution(self, task: Task) -> str | None:
        return f"So the final answer is $\\boxed{{{task.answer}}}$." if task.answer else None


_TEXT_NOTE = re.compile(r"\s*\\text\{\s*\([^{}]*\)\s*\}")
_PROOF = re.compile(r"\b(?:prove|show)\b", re.IGNORECASE)
_RELATION = re.compile(r"[=<>]|\\(?:le|ge|leq|geq|neq|ne|parallel|perp|equiv|cong|sim)(?![a-zA-Z])")


class OmniMath(MathBenchmark):
    """Omni-MATH's 4428 olympiad problems. The official grader is a GPT-4o (or Omni-Judge)
    equivalence judge; here math-verify, which under-counts free-form text answers. A note
    such as ``4122 \\text{ (minimum)}`` is left out of both sides. Proof problems, whose
    "answer" restates what is to be proved (``AE + AP = PD``), have no reference (restating it
    would score 1): they are scored 0 and ``tracerl tasks check`` counts them as unsolvable."""

    name = "omni-math"
    hub = Hub("KbsdJames/Omni-MATH")
    splits = {"test": "test"}
    template = QWEN_PROMPT
    grader = "math-verify equivalence of the final \\boxed{} answer with the reference (the official grader is an LLM judge)"
    description = "4428 olympiad problems by domain and difficulty (KbsdJames/Omni-MATH); eval only"

    def reference(self, row: dict[str, Any]) -> str | None:
        answer = str(row.get("answer") or "").strip()
        statement = normalize_problem(answer)
        if _PROOF.search(row["problem"]) and _RELATION.search(answer) and statement and \
                f" {statement} " in f" {normalize_problem(row['problem'])} ":
            return None  # "prove AE + AP = PD": the answer is the claim itself
        return answer

    def golds(self, task: Task) -> list[str]:
        # math-verify reads "4122 \text{ (minimum)}, 6049 ..." as 4122 alone: compare without notes
        return [_TEXT_NOTE.sub("", str(task.answer)).strip()]

    def is_correct(self, task: Task, text: str | None) -> bool:
        return super().is_correct(task, _TEXT_NOTE.sub("", text) if text else text)


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


def countdown_solve(nums: list[int], target: int) -> str | None:
    """An expression using each of ``nums`` once, with + - * / and parentheses, whose exact
    value is ``target``; None if there is none. Exhaustive: any two values are combined into
    one until one is left (3-4 numbers: a few thousand expressions)."""
    if not nums or any(n < 0 for n in nums):  # a negative literal would parse as a unary minus
        return None

    def search(items: list[tuple[Fraction, str]]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        for i, j in itertools.combinations(range(len(items)), 2):
            (a, x), (b, y) = items[i], items[j]
            rest = [item for k, item in enumerate(items) if k not in (i, j)]
            options = [(a + b, f"{x} + {y}"), (a * b, f"{x} * {y}"), (a - b, f"{x} - {y}"), (b - a, f"{y} - {x}")]
            options += [(a / b, f"{x} / {y}")] if b else []
            options += [(b / a, f"{y} / {x}")] if a else []
            for value, expr in options:
                found = search([*rest, (value, f"({expr})")])
                if found is not None:
                    return found
        return None

    found = search([(Fraction(n), str(n)) for n in nums])
    return found[1:-1] if found is not None and len(nums) > 1 else found


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
        # Every expression the reply states must reach the target ("The answer is A. The answer
        # is B." is two answers: 0, whichever is right).
        answers = math_grader.final_answers(text)
        return bool(answers) and all(self._reaches(task, answer) for answer in answers)

    @staticmethod
    def _reaches(task: Task, answer: str) -> bool:
        found = countdown_value(answer)
        if found is None:
            return False
        value, used = found
        return value == task.data["target"] and Counter(used) == Counter(task.data["nums"])

    def solution(self, task: Task) -> str | None:
        expression = countdown_solve(list(task.data["nums"]), int(task.data["target"]))
        return None if expression is None else f"The answer is {expression}."


BENCHMARKS: tuple[type[Benchmark], ...] = (GSM8K, MATH500, HendrycksMath, AIME, AIME24, AIME25, AMC, Minerva,
                                           OlympiadBench, OmniMath, CountdownHub)
