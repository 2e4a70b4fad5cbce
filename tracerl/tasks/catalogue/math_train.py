r"""Math benchmarks, part 2: training sets (DeepScaleR, DAPO-Math-17k, Geometry3K) and word
problems (SVAMP, GSM-Hard, ASDiv).

Graded like part 1 (:mod:`.math`): math-verify equivalence of the reply's final answer with the
reference. Differences from the datasets' own reward functions, each said where it applies:
DeepScaleR's reward needs a ``</think>`` and DAPO's reads the last "Answer:" line and scores -1
when wrong; Geometry3K's adds 0.1 for the ``<think>`` format. Here every reward is 1 for a right
final answer and 0 otherwise, so the sets can be mixed in one run.

The training sets are assembled from old competitions, so their rows are checked against the
test problems of every math benchmark when loaded (:mod:`~tracerl.tasks.dedup`): DeepScaleR
holds AIME 1984-2023 and all of Omni-MATH, and those copies never reach a run.
"""

from __future__ import annotations

import re
from typing import Any

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders import math as math_grader
from ..loaders import Hub
from .math import MathBenchmark, any_equal, number_text

# DeepScaleR's training prompt (the verl-style preprocessors' "Please output the final answer
# within \boxed{}." asks the same)
DEEPSCALER_PROMPT = "{problem} Let's think step by step and output the final answer within \\boxed{}."
# verl's examples/data_preprocess/geo3k.py and EasyR1 (with the diagram attached there)
GEO3K_PROMPT = ("{problem} You FIRST think about the reasoning process as an internal monologue and then provide "
                "the final answer. The reasoning process MUST BE enclosed within <think> </think> tags. The final "
                "answer MUST BE put in \\boxed{}.")


class DeepScaleR(MathBenchmark):
    """40k competition problems (AIME 1984-2023, AMC before 2023, Omni-MATH, STILL). ``answer``
    is a bare string ("35", ``\\frac{3}{28}``); DeepScaleR's reward grades the last box after
    ``</think>`` by MATH normalisation and sympy, here by math-verify without the ``</think>``
    requirement."""

    name = "deepscaler"
    hub = Hub("agentica-org/DeepScaleR-Preview-Dataset")
    splits = {"train": "train"}
    template = DEEPSCALER_PROMPT
    description = "40k AIME/AMC/Omni-MATH/STILL problems (agentica-org/DeepScaleR-Preview-Dataset); train only"

    def reference(self, row: dict[str, Any]) -> str:
        answer = str(row["answer"]).strip()
        return (math_grader.last_boxed(answer) or answer) if "\\boxed" in answer else answer


DAPO_PREFIX = ("Solve the following math problem step by step. The last line of your response should be of the "
               "form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
DAPO_SUFFIX = "\n\nRemember to put your answer on its own line after \"Answer:\"."
_ANSWER_LINE = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


class DAPOMath(MathBenchmark):
    """DAPO-Math-17k: 17,917 problems rewritten to have integer answers, each stored 100 times
    (1,791,700 rows): :meth:`hub_rows` keeps the first row of each problem (by ``extra_info.index``
    or by prompt text). The prompt is the dataset's own (asks for a last line "Answer: X");
    the graded answer is the "Answer:" line in the reply's last 300 characters, as DAPO's
    ``math_dapo`` reward reads it, else the reply's final answer (a box). Where DAPO's reward
    takes the last of several "Answer:" lines, here they must all be right (several different
    final answers score 0)."""

    name = "dapo-math"
    hub = Hub("BytedTsinghua-SIA/DAPO-Math-17k")
    splits = {"train": "train"}
    grader = "math-verify equivalence of the last 'Answer:' line (else the final \\boxed{}) with the integer answer"
    description = "17.9k competition problems with integer answers (BytedTsinghua-SIA/DAPO-Math-17k); train only"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        kept, ids, texts = [], set(), set()
        for row in super().hub_rows(hub_split, path):
            key, text = self.row_id(row), self.problem_text(row)
            if key not in ids and text not in texts:
                kept.append(row)
            ids.add(key)
            texts.add(text)
        return kept

    def row_id(self, row: dict[str, Any]) -> str:
        return str((row.get("extra_info") or {}).get("index") or super().row_id(row))

    def problem_text(self, row: dict[str, Any]) -> str:
        content = str(row["prompt"][0]["content"]) if row.get("prompt") else ""
        return content.removeprefix(DAPO_PREFIX).removesuffix(DAPO_SUFFIX).strip()

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["reward_model"]["ground_truth"]).strip()

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "user", "content": str(task.data["prompt"][0]["content"])}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        if not text or not text.strip() or task.answer in (None, ""):
            return False
        lines = dict.fromkeys(line.strip() for line in _ANSWER_LINE.findall(text[-300:]))
        if not lines:
            return any_equal(self.golds(task), text)
        return all(any_equal(self.golds(task), line) for line in lines)  # two different "Answer:" lines: 0

    def solution(self, task: Task) -> str | None:
        return f"Answer: {task.answer}"


class Geometry3K(MathBenchmark):
    """Geometry3K as text: the prompt is the problem without its ``<image>`` placeholder, and
    the diagram stays in the row (``images``) for a multimodal agent. Many problems ("Find x.")
    need the diagram, so a text-only model cannot solve them. The reference is the correct
    choice's text in InterGPS's spaced LaTeX ("2 \\sqrt { 221 }"); verl grades it with
    mathruler's ``grade_answer`` (plus 0.1 for the format), here math-verify. For the dedup the
    problem is its text and its four choices: "Find x." alone is a hundred different problems."""

    name = "geo3k"
    hub = Hub("hiyouga/geometry3k")
    id_key = "id"
    template = GEO3K_PROMPT
    description = ("geometry problems with diagrams, text only here: some need the diagram "
                   "(hiyouga/geometry3k); validation unused")

    def question(self, row: dict[str, Any]) -> str:
        return str(row["problem"]).replace("<image>", "").strip()

    def problem_text(self, row: dict[str, Any]) -> str:
        choices = "; ".join(map(str, row.get("choices") or []))
        return self.question(row) + (f" Choices: {choices}" if choices else "")


class SVAMP(MathBenchmark):
    """SVAMP (ChilleD's random 700/300 split of the 1000 problems). ``Answer`` is a float
    (51.0): the reference is the number (51). No official harness; the established use is a
    chain-of-thought prompt and numeric comparison of the final answer."""

    name = "svamp"
    hub = Hub("ChilleD/SVAMP")
    id_key = "ID"
    question_key = "question_concat"
    description = "1000 varied grade-school word problems (ChilleD/SVAMP, 700 train / 300 test)"

    def problem_text(self, row: dict[str, Any]) -> str:
        return str(row.get("question_concat") or f"{row['Body']} {row['Question']}")

    def reference(self, row: dict[str, Any]) -> str:
        return number_text(row["Answer"])


class GSMHard(MathBenchmark):
    """GSM-Hard: GSM8K's test problems with a number made large. ``target`` is a float, at
    times with float noise (3244047.0999999996): the reference is the number rounded to 12
    significant digits. PAL runs a program; here the final answer is compared."""

    name = "gsm-hard"
    hub = Hub("reasoning-machines/gsm-hard")
    splits = {"test": "train"}  # one jsonl file, so the hub calls it "train"; it is an eval set
    question_key = "input"
    description = "GSM8K test problems with large numbers (reasoning-machines/gsm-hard); eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return number_text(row["target"])


class ASDiv(MathBenchmark):
    """ASDiv's 2305 word problems. ``answer`` carries a unit in parentheses ("9 (apples)"):
    the reference is the part before it, as lm-eval's asdiv task takes it."""

    name = "asdiv"
    hub = Hub("EleutherAI/asdiv", ("asdiv",), kwargs={"revision": "refs/pr/1"})  # main is a loading script
    splits = {"test": "validation"}
    description = "2305 diverse grade-school word problems (EleutherAI/asdiv, CC BY-NC); eval only"

    def problem_text(self, row: dict[str, Any]) -> str:
        return f"{row['body']} {row['question']}"  # what lm-eval decontaminates on

    def reference(self, row: dict[str, Any]) -> str:
        return str(row["answer"]).split(" (")[0].strip()


BENCHMARKS: tuple[type[Benchmark], ...] = (DeepScaleR, DAPOMath, Geometry3K, SVAMP, GSMHard, ASDiv)
