r"""Multiple-choice benchmarks: a question with lettered options, graded on the letter the reply ends on.

Every set is shown the same way: the question (after its context where the set has one:
HellaSwag's activity and opening, SciQ's support paragraph), then one option per line,
"(A) ...", under a system prompt asking the model to end with "The answer is (X).". Letters
come from the item's own option count (MMLU-Pro has up to ten, TruthfulQA MC1 two to thirteen,
ARC three to five); ARC's digit labels "1".."4" are shown as A..D too.

Grading (:func:`final_letter`) reads every letter answer of the reply (after its last
``</think>``), in the forms models write: "The answer is (C)" / "answer is C" / "Answer: C"
(MMLU-Pro's official patterns, with markdown and "option" allowed between), "\boxed{C}", and a
"**C**" that closes the reply; the reply is correct when they all name one letter and it is the
correct option's (exact match, as MMLU-Pro, lm-eval's generative tasks and simple-evals do).
**A reply that states several different answers scores 0**, whichever is right: "The answer is
A. The answer is B.", "The answer is (A) or (B)", "\boxed{A} or \boxed{C}", "Answer: A, C", a
different "(B)" after the answer (MMLU-Pro's script takes the first match, simple-evals the
last; both reward listing every letter). It is also wrong when its letter is outside the item's
options (E on a four-option item), and when it has no answer in those forms. Two deliberate departures from MMLU-Pro's script: no last fallback
to "any standalone capital letter" (it reads the pronoun "I" as option I), and no random letter
substituted for a reply without an answer: such a reply is wrong. Letters are capitals only
("the answer is a ..." is an article).

Options whose order gives the answer away are shuffled: SciQ (its correct answer is always
last), TruthfulQA MC1 (always first) and GPQA (a "Correct Answer" column). The permutation comes
from a ``random.Random`` seeded with the benchmark's name and the row id, so a task shows the
same order in every run and process, whatever the row order. ``problem_text`` (what the dedup
compares) is the question and the options' texts in the dataset's own order, without the
context: ARC and OpenBookQA questions copied into MMLU's auxiliary_train normalise to the same
text as in their own sets.
"""

from __future__ import annotations

import random
import re
import string
from typing import Any, ClassVar

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..loaders import Hub

LETTERS = string.ascii_uppercase
CHOICE_PROMPT = ("Answer the multiple choice question. Think step by step, then end your reply with "
                 "\"The answer is (X).\" where X is the letter of the correct option.")
CHOICE_GRADER = ("the letter answer (\"The answer is (C)\", \"Answer: C\", \\boxed{C}, a closing **C**) "
                 "equals the correct option's letter; two different letters anywhere, a letter outside the "
                 "options or none score 0")

# Markdown, "$" and a box may sit between "answer is" and the letter: "**Answer:** $\boxed{C}$".
# No two neighbouring parts can match the same characters: a reply of spaces stays linear.
_OPEN = r"[\s*_$:]*(?:(?i:option|choice)\s*)?(?:(?:\\boxed\{|\\text(?:bf)?\{|\()\s*)*"
_LETTER = r"([A-Z])(?![A-Za-z0-9])"
_FORMS = (
    re.compile(r"(?i:answer)[*_]*\s*(?:(?i:is)\b|:)" + _OPEN + _LETTER),
    re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?(?:\(\s*)?" + _LETTER + r"\s*(?:\)\s*)?(?:\}\s*)?\}"),
    re.compile(r"\*\*\s*(?:\(\s*)?" + _LETTER + r"\s*(?:\)\s*)?(?:[.:]\s*)?\*\*[\s.!]*\Z"),
)
_JOIN = r"(?:,|/|&|\bor\b|\band\b)"
# A second letter joined to the answer ("(A) or (B)", "A, C" but not "(C), I think") or named
# after it as "(B)".
_JOINED_AFTER = re.compile(r"[\s*_$)}]*" + _JOIN + _OPEN + r"([A-Z])(?=[ \t]*(?:[)}.,;:!?*/&$\n]|\Z)|\s+(?:or|and)\b)")
_NAMED_AFTER = re.compile(r"\(\s*([A-Z])\s*\)")
_JOINED_BEFORE = re.compile(r"(?<![A-Za-z0-9])([A-Z])\s*(?:\)|\}|\*\*)?\s*" + _JOIN + r"[\s*_$]*\Z")


def final_letter(text: str | None) -> str | None:
    """The option letter ``text`` answers (see the module docstring); None when the reply has no
    answer in the accepted forms or states two different letters."""
    if not text:
        return None
    text = text.rsplit("</think>", 1)[-1]
    found = [(m.start(1), m.start(), m.end(), m.group(1)) for form in _FORMS for m in form.finditer(text)]
    if len({letter for *_where, letter in found}) != 1:  # none, or several different answers
        return None
    _pos, start, end, letter = max(found)
    others = {m.group(1) for m in _NAMED_AFTER.finditer(text, end)}
    joined = _JOINED_AFTER.match(text, end)
    before = _JOINED_BEFORE.search(text[max(0, start - 40):start])
    others |= {m.group(1) for m in (joined, before) if m}
    return letter if others <= {letter} else None


def lettered(options: list[str]) -> str:
    """``options`` one per line as "(A) ...", "(B) ..."."""
    return "\n".join(f"({LETTERS[i]}) {option}" for i, option in enumerate(options))


def clean(text: str) -> str:
    """lm-eval's HellaSwag preprocessing: WikiHow markup gone, spaces collapsed."""
    text = re.sub(r"\[.*?\]", "", text.strip().replace(" [title]", ". "))
    return re.sub(r" {2,}", " ", text).strip()


class ChoiceBenchmark(Benchmark):
    """A question and its options; graded on the letter the reply ends on (:func:`final_letter`).

    Subclasses give ``options`` (the dataset's order) and ``gold`` (the correct one's index in
    it), and ``question``/``context``/``lead`` where the defaults do not fit; ``shuffle`` where
    the dataset's order gives the answer away."""

    domain = "multiple-choice"
    grader = CHOICE_GRADER
    shuffle: ClassVar[bool] = False

    def options(self, row: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def gold(self, row: dict[str, Any]) -> int:
        raise NotImplementedError

    def question(self, row: dict[str, Any]) -> str:
        return str(row.get(self.question_key) or "").strip()

    def context(self, row: dict[str, Any]) -> str:
        """Text shown before the question (a passage); not part of ``problem_text``."""
        return ""

    def lead(self, row: dict[str, Any]) -> str:
        """An instruction line shown first, where the question alone does not say what to choose."""
        return ""

    def presented(self, row: dict[str, Any]) -> tuple[list[str], int]:
        """The options in the order shown, and the correct one's index in that order."""
        options, gold = self.options(row), self.gold(row)
        if not self.shuffle:
            return options, gold
        order = list(range(len(options)))
        random.Random(f"{self.name}/{self.row_id(row)}").shuffle(order)
        return [options[i] for i in order], order.index(gold) if gold in order else -1

    def reference(self, row: dict[str, Any]) -> str | None:
        options, gold = self.presented(row)
        return LETTERS[gold] if 0 <= gold < len(options) else None

    def problem_text(self, row: dict[str, Any]) -> str:
        return "\n".join([self.question(row), *self.options(row)])

    def messages(self, task: Task) -> list[dict[str, Any]]:
        row = task.data
        parts = [self.lead(row), self.context(row), self.question(row), lettered(self.presented(row)[0])]
        return [{"role": "system", "content": CHOICE_PROMPT},
                {"role": "user", "content": "\n\n".join(p for p in parts if p)}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        # A letter outside the options can never equal the reference, which is always inside.
        return task.answer is not None and final_letter(text) == task.answer

    def solution(self, task: Task) -> str | None:
        return None if task.answer is None else f"The answer is ({task.answer})."


def _index(labels: list[Any], key: Any) -> int:
    """Where ``key`` (stripped: OpenBookQA's keys may carry a space) is in ``labels``; -1 if absent."""
    key = str(key or "").strip()
    labels = [str(label).strip() for label in labels]
    return labels.index(key) if key in labels else -1


class MMLU(ChoiceBenchmark):
    """MMLU, config ``all``. The train role is ``auxiliary_train`` (ARC, OpenBookQA, MCTest and
    RACE items, subject ""); its ARC/OpenBookQA rows are those sets' train splits."""

    name = "mmlu"
    hub = Hub("cais/mmlu", ("all",))
    splits: ClassVar[dict[str, str]] = {"train": "auxiliary_train", "test": "test"}
    description = "57-subject knowledge questions, 4 options (cais/mmlu all); train = auxiliary_train"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [str(c).strip() for c in row["choices"]]

    def gold(self, row: dict[str, Any]) -> int:
        return int(row["answer"])

    def lead(self, row: dict[str, Any]) -> str:
        subject = str(row.get("subject") or "").replace("_", " ")
        return f"The following is a multiple choice question about {subject}." if subject else ""


class MMLUPro(ChoiceBenchmark):
    """MMLU-Pro: up to ten options; "N/A" padding options are dropped, as the official script does."""

    name = "mmlu-pro"
    hub = Hub("TIGER-Lab/MMLU-Pro")
    splits: ClassVar[dict[str, str]] = {"test": "test"}  # validation is only the few-shot pool
    id_key = "question_id"
    description = "harder 10-option MMLU successor (TIGER-Lab/MMLU-Pro); eval only"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [str(o).strip() for o in row["options"] if str(o).strip() != "N/A"]

    def gold(self, row: dict[str, Any]) -> int:
        index = int(row["answer_index"])
        kept = [i for i, o in enumerate(row["options"]) if str(o).strip() != "N/A"]
        return kept.index(index) if index in kept else -1

    def lead(self, row: dict[str, Any]) -> str:
        category = str(row.get("category") or "")
        return f"The following is a multiple choice question about {category}." if category else ""


class GPQADiamond(ChoiceBenchmark):
    """GPQA diamond (gated). The correct answer has its own column, so the four are shuffled
    per row (seeded by ``Record ID``). Texts are only stripped: lm-eval also deletes every
    ``[...]``, which would take "[H+]" out of a chemistry question."""

    name = "gpqa-diamond"
    hub = Hub("Idavidrein/gpqa", ("gpqa_diamond",))
    splits: ClassVar[dict[str, str]] = {"test": "train"}  # the hub's only split; an eval set
    id_key = "Record ID"
    question_key = "Question"
    shuffle = True
    description = "198 graduate-level science questions (Idavidrein/gpqa gpqa_diamond, gated); eval only"

    def options(self, row: dict[str, Any]) -> list[str]:
        columns = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
        return [" ".join(str(row[c] or "").split()) for c in columns]

    def gold(self, row: dict[str, Any]) -> int:
        return 0


class ARCChallenge(ChoiceBenchmark):
    """ARC-Challenge: 3-5 options labelled A.. or 1..; shown as A.. in the dataset's order."""

    name = "arc-challenge"
    hub = Hub("allenai/ai2_arc", ("ARC-Challenge",))
    id_key = "id"
    description = "grade-school science questions, hard set (allenai/ai2_arc ARC-Challenge)"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [str(t).strip() for t in row["choices"]["text"]]

    def gold(self, row: dict[str, Any]) -> int:
        return _index(row["choices"]["label"], row["answerKey"])


class CommonsenseQA(ARCChallenge):
    """CommonsenseQA: five options; the hub's test split has no answers, so validation is the test."""

    name = "commonsenseqa"
    hub = Hub("tau/commonsense_qa")
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "validation"}
    description = "commonsense questions, 5 options (tau/commonsense_qa); test = validation"


class OpenBookQA(ARCChallenge):
    """OpenBookQA: the stem is often a sentence to complete ("The sun is responsible for")."""

    name = "openbookqa"
    hub = Hub("allenai/openbookqa", ("main",))
    question_key = "question_stem"
    description = "elementary science, open-book style (allenai/openbookqa main)"

    def lead(self, row: dict[str, Any]) -> str:
        return "Choose the option that best answers the question or completes the statement."


class HellaSwag(ChoiceBenchmark):
    """HellaSwag: pick the ending of a caption. Context and endings are cleaned as lm-eval does
    (WikiHow "[header]"/"[step]" markup gone); the hub's test labels are empty, so validation
    is the test."""

    name = "hellaswag"
    hub = Hub("Rowan/hellaswag")
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "validation"}
    id_key = "ind"
    question_key = "ctx"
    description = "commonsense sentence completion, 4 endings (Rowan/hellaswag); test = validation"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [clean(str(e)) for e in row["endings"]]

    def gold(self, row: dict[str, Any]) -> int:
        label = str(row.get("label") or "").strip()
        return int(label) if label.isdigit() else -1

    def question(self, row: dict[str, Any]) -> str:
        text = f"{row['activity_label']}: {row['ctx_a']} {str(row['ctx_b']).capitalize()}"
        return clean(text)

    def problem_text(self, row: dict[str, Any]) -> str:
        return "\n".join([str(row["ctx"]), *(str(e) for e in row["endings"])])

    def lead(self, row: dict[str, Any]) -> str:
        return "Which ending continues the text most plausibly?"


class Winogrande(ChoiceBenchmark):
    """WinoGrande (xl): fill the blank "_" with option1 (A) or option2 (B); validation is the test
    (the hub's test answers are empty)."""

    name = "winogrande"
    hub = Hub("allenai/winogrande", ("winogrande_xl",))
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "validation"}
    question_key = "sentence"
    description = "pronoun-resolution fill-in-the-blank, 2 options (allenai/winogrande winogrande_xl)"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [str(row["option1"]).strip(), str(row["option2"]).strip()]

    def gold(self, row: dict[str, Any]) -> int:
        answer = str(row.get("answer") or "").strip()
        return int(answer) - 1 if answer in ("1", "2") else -1

    def lead(self, row: dict[str, Any]) -> str:
        return "Which option correctly fills the blank (_) in the sentence?"


class SciQ(ChoiceBenchmark):
    """SciQ: the support paragraph is shown before the question where the row has one, as lm-eval
    does; the correct answer is the last column, so the four are shuffled per row."""

    name = "sciq"
    hub = Hub("allenai/sciq")
    shuffle = True
    description = "crowd-sourced science exam questions, 4 options (allenai/sciq)"

    def options(self, row: dict[str, Any]) -> list[str]:
        columns = ("distractor1", "distractor2", "distractor3", "correct_answer")
        return [str(row[c]).strip() for c in columns]

    def gold(self, row: dict[str, Any]) -> int:
        return 3

    def context(self, row: dict[str, Any]) -> str:
        return str(row.get("support") or "").strip()


class TruthfulQA(ChoiceBenchmark):
    """TruthfulQA MC1 (one true answer among 2-13); the true one is always first on the hub, so
    the options are shuffled per row. MC2 (several true answers) is not graded."""

    name = "truthfulqa"
    hub = Hub("truthfulqa/truthful_qa", ("multiple_choice",))
    splits: ClassVar[dict[str, str]] = {"test": "validation"}  # the only split; an eval set
    shuffle = True
    description = "questions that elicit common misconceptions, MC1 (truthfulqa/truthful_qa multiple_choice); eval only"

    def options(self, row: dict[str, Any]) -> list[str]:
        return [str(c).strip() for c in row["mc1_targets"]["choices"]]

    def gold(self, row: dict[str, Any]) -> int:
        labels = list(row["mc1_targets"]["labels"])
        return labels.index(1) if labels.count(1) == 1 else -1


BENCHMARKS: tuple[type[Benchmark], ...] = (MMLU, MMLUPro, GPQADiamond, ARCChallenge, CommonsenseQA,
                                           HellaSwag, Winogrande, OpenBookQA, SciQ, TruthfulQA)
