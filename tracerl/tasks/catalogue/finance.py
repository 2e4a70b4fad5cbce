r"""Finance benchmarks: numerical reasoning over reports' text and tables (FinQA, TAT-QA,
ConvFinQA, MultiHiertt, FinanceBench).

Each prompt shows the report (tables one row per line, cells joined by " | ") and the question,
and asks for the final answer in ``\boxed{}``. Grading follows each dataset's own evaluation,
on the final answer only (:mod:`.finance_answers` reads it). **A reply that states several
different final answers scores 0** ("\boxed{3} \boxed{4}", "The answer is 3. The answer is 4."):
every answer it states must pass the rule below, so the grader never picks one of them; several
TAT-QA spans go in one box, separated by semicolons, as its prompt asks.

- FinQA: the answer equals the reference as mathematics, or is within 1% of it (``25%`` and
  ``0.25`` both match a reference of 0.25 written as a percentage).
- TAT-QA: the official EM: numbers with their scale applied (thousand, million, billion,
  percent), equal at 2 decimals of the gold's unit; spans by SQuAD-normalised exact match,
  several spans as a bag.
- ConvFinQA: Program-of-Thoughts' ``finqa_equal`` (within 0.1%, or equal at the shorter
  precision), a percentage also read as its fraction.
- MultiHiertt: the official check, numbers within 0.1% (at most 0.1 absolute), spans by exact
  match.
- FinanceBench: the rows whose answer is one number, within 1% or equal at its precision.

Where a rule deviates from the official script, the class docstring says so and why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders import math as math_grader
from ..loaders import Hub
from .finance_answers import (
    SCALES,
    decimals,
    every_answer,
    finqa_equal,
    html_rows,
    multihiertt_close,
    numbers_match,
    parse_number,
    pipe_table,
    render_html_tables,
    spans_equal,
    tatqa_number_equal,
)
from .math import MATH_PROMPT

FINANCE_PROMPT = ("Answer the question from the report's text and tables. Reason step by step, then put "
                  "the final answer alone in \\boxed{}: a number (no units unless asked), or the words "
                  "copied from the report when the answer is not a number.")
TATQA_PROMPT = ("Answer the question from the table and the text. Reason step by step, then put the final "
                "answer alone in \\boxed{}. Give a number with its scale as the report states it (e.g. "
                "\\boxed{1,234 thousand}, \\boxed{2.5 million}) or with a % sign for a percentage; copy words "
                "from the report when the answer is not a number, and separate several answers with "
                "semicolons.")
_PLACEHOLDER = re.compile(r"\{answer(\d+)\}")
_TABLE_MARKER = re.compile(r"^\s*##\s*Table\s+(\d+)\s*##\s*$", re.IGNORECASE)


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
        context = "\n".join([*d.get("pre_text", []), "", pipe_table(d.get("table") or []), "",
                             *d.get("post_text", [])])
        return [{"role": "system", "content": MATH_PROMPT},
                {"role": "user", "content": f"{context.strip()}\n\nQuestion: {d['question']}"}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        answers = math_grader.final_answers(text, alternatives=False)
        return bool(answers) and all(math_grader.is_equiv(a, task.answer) or math_grader.numeric_close(a, task.answer)
                                     for a in answers)

    def solution(self, task: Task) -> str | None:
        return f"The answer is \\boxed{{{task.answer}}}."


class TATQA(Benchmark):
    """TAT-QA: hybrid table + text questions from annual reports (Zhu et al., ACL 2021).

    A hub row is one context (a table, its paragraphs, about six questions); :meth:`hub_rows`
    makes one row per question: the context's columns as they are, plus ``qa``, that
    question's record. Graded as the official ``tatqa_metric.py``'s exact match: an
    arithmetic or count answer, and a span that is a number, must equal the gold with its
    scale applied at 2 decimals of the gold's unit ("-2.87%" or "-0.0287" for -2.87 percent,
    "-2,383 thousand" for -2383 thousand; a bare "-2383" is wrong, as it is officially). Spans
    match after SQuAD normalisation; multi-span answers as a bag, in any order, separated by
    semicolons, commas or "and". Deviations: a number in another unit counts when it is the
    same value ("2.383 million"), and the scale of a text span is not compared.
    """

    name = "tatqa"
    domain = "finance"
    grader = ("official TAT-QA exact match: numbers with their scale applied, equal at 2 decimals; "
              "spans (several as a bag) after SQuAD normalisation")
    # A plain load_dataset fails: the unanswered test file and the gold one land in one split.
    hub = Hub("next-tat/TAT-QA", files={"train": ("tatqa_dataset_train.json",),
                                        "validation": ("tatqa_dataset_dev.json",),
                                        "test": ("tatqa_dataset_test_gold.json",)})
    splits = {"train": "train", "test": "validation"}  # dev, as LLM papers report; see the notes
    description = "hybrid table + text QA over annual reports (next-tat/TAT-QA), one task per question"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        return [{**row, "qa": qa} for row in super().hub_rows(hub_split, path) for qa in row["questions"]]

    @staticmethod
    def _qa(row: dict[str, Any]) -> dict[str, Any]:
        return row.get("qa") or row["questions"][0]  # a context row not flattened: its first question

    def row_id(self, row: dict[str, Any]) -> str:
        return str(self._qa(row)["uid"])

    def reference(self, row: dict[str, Any]) -> Any:
        return self._qa(row)["answer"]

    def _paragraphs(self, row: dict[str, Any]) -> list[str]:
        return [p["text"] for p in sorted(row.get("paragraphs") or [], key=lambda p: p.get("order") or 0)]

    def problem_text(self, row: dict[str, Any]) -> str:
        return f"{self._qa(row)['question']} {' '.join(self._paragraphs(row))}"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        row = task.data
        table = pipe_table((row.get("table") or {}).get("table") or [])
        text = "\n".join(self._paragraphs(row))
        user = f"Table:\n{table}\n\nText:\n{text}\n\nQuestion: {self._qa(row)['question'].strip()}"
        return [{"role": "system", "content": TATQA_PROMPT}, {"role": "user", "content": user}]

    def _gold(self, task: Task) -> list[tuple[str, float | None, float]]:
        """Each gold answer as (text, its number or None for words, the multiplier of its scale)."""
        qa = self._qa(task.data)
        unit = SCALES.get(qa.get("scale") or "", 1.0)
        answer = task.answer
        items = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
        gold: list[tuple[str, float | None, float]] = []
        for item in items:
            parsed = parse_number(item)
            if parsed is None:
                gold.append((item, None, unit))
            elif parsed[1]:  # the span writes its own scale ("$75 million", "21.3%")
                gold.append((item, parsed[0], SCALES[parsed[1]]))
            else:
                gold.append((item, parsed[0], unit))
        return gold

    def is_correct(self, task: Task, text: str | None) -> bool:
        gold = self._gold(task)
        if not gold:
            return False
        if len(gold) == 1:
            return every_answer(text, lambda answer: _tatqa_item(answer, gold[0]))
        return every_answer(text, lambda answer: any(_bag_match(parts, gold) for parts in _tatqa_parts(answer)))

    def solution(self, task: Task) -> str | None:
        scale = self._qa(task.data).get("scale") or ""
        parts = []
        for text, value, _unit in self._gold(task):
            own_scale = (parse_number(text) or (0.0, ""))[1]
            if value is None or own_scale or not scale:
                parts.append(text)
            else:
                parts.append(f"{text}%" if scale == "percent" else f"{text} {scale}")
        return f"The answer is \\boxed{{{'; '.join(parts)}}}."


def _tatqa_item(reply: str, gold: tuple[str, float | None, float]) -> bool:
    text, value, unit = gold
    if value is None:
        return spans_equal(reply, text)
    return tatqa_number_equal(reply, value, unit)


def _tatqa_parts(answer: str) -> list[list[str]]:
    """Ways to read a multi-span answer: split on ; , "and" newlines, or (spans holding "and")
    on ; , newlines only. A scale word closing the answer applies to bare numbers before it."""
    readings = []
    for pattern in (r"\s*(?:;|\n|,\s+|\s+and\s+|\s+&\s+)\s*", r"\s*(?:;|\n|,\s+)\s*"):
        parts = [p for p in re.split(pattern, answer.strip()) if p]
        last = parse_number(parts[-1]) if parts else None
        if last is not None and last[1] and last[1] != "percent":
            parts = [f"{p} {last[1]}" if (n := parse_number(p)) is not None and not n[1] else p for p in parts]
        readings.append(parts)
    return readings


def _bag_match(parts: Sequence[str], gold: Sequence[tuple[str, float | None, float]]) -> bool:
    """Whether each gold item matches its own reply part, and no part is left over."""
    if len(parts) != len(gold):
        return False
    left = list(parts)
    for item in gold:
        hit = next((p for p in left if _tatqa_item(p, item)), None)
        if hit is None:
            return False
        left.remove(hit)
    return True


class ConvFinQA(Benchmark):
    """ConvFinQA: conversational numerical reasoning over FinQA's reports (Chen et al., EMNLP 2022),
    FinBen's turn-level copy: one row per turn, ``query`` a finished prompt.

    The test queries hold ``{answer0}``... where the earlier turns' answers go; :meth:`hub_rows`
    adds ``prior_answers`` (the gold answers of the same dialogue's earlier turns), and the
    prompt fills them in (teacher forcing, as the original's turn-level evaluation feeds gold
    history). The prompt drops FinBen's instruction for the system prompt and renders the
    HTML table as pipes. Graded by Program-of-Thoughts' ``finqa_equal`` on the final number,
    a percentage also read as its fraction (references are fractions: 0.01639 for 1.639%);
    stricter than PoT, a bare number is read x100 or /100 only when it or the reference is
    below 1 (PoT would take 58.29 for 5829).
    """

    name = "convfinqa"
    domain = "finance"
    grader = "the final number within 0.1% of the reference, or equal at the shorter precision (percent or fraction)"
    hub = Hub("TheFinAI/flare-convfinqa")
    id_key = "id"
    description = "conversational numerical QA over financial reports (TheFinAI/flare-convfinqa), one task per turn"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        rows = super().hub_rows(hub_split, path)
        answers = {(r["dialogue_id"], r["turn"]): r["answer"] for r in rows}
        return [{**r, "prior_answers": [answers.get((r["dialogue_id"], t)) for t in range(r["turn"])]}
                for r in rows]

    @staticmethod
    def _query(row: dict[str, Any]) -> str:
        """The query with the earlier turns' answers filled in (placeholders left where unknown)."""
        prior = row.get("prior_answers") or []

        def fill(m: re.Match[str]) -> str:
            i = int(m.group(1))
            return str(prior[i]) if i < len(prior) and prior[i] is not None else m.group(0)
        return _PLACEHOLDER.sub(fill, str(row["query"]))

    def problem_text(self, row: dict[str, Any]) -> str:
        query = str(row["query"])
        question = query.rsplit("\nQuestion:", 1)[-1].split("\nAnswer:")[0].strip()
        context = query.split("\nContext:", 1)[-1].split("<table", 1)[0].strip()
        return f"{question} {context}"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        query = self._query(task.data)
        body = "Context:" + query.split("\nContext:", 1)[1] if "\nContext:" in query else query
        body = re.sub(r"\s*\nAnswer:\s*$", "", body.rstrip())
        return [{"role": "system", "content": FINANCE_PROMPT},
                {"role": "user", "content": render_html_tables(body).strip()}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        reference = str(task.answer)

        def right(answer: str) -> bool:
            def close(value: float, ref: float, shift: int) -> bool:
                return finqa_equal(value, ref, min(decimals(answer), decimals(reference) - shift))
            return numbers_match(answer, reference, close)
        return every_answer(text, right)

    def solution(self, task: Task) -> str | None:
        return f"The answer is \\boxed{{{task.answer}}}."


class MultiHiertt(Benchmark):
    """MultiHiertt: numerical reasoning over several hierarchical tables and long text
    (Zhao et al., ACL 2022). The prompt inlines each table (pipes, ``colspan`` headers
    repeated) at its ``## Table i ##`` marker, tables with no marker at the end, the whole
    document (no truncation: the longest are about 170 sentences). Graded as the official
    ``evaluate.py``: a numeric reference matches within ``min(|min(a, b)| / 1000, 0.1)``, a
    percentage also read as its fraction; a text reference by exact match after SQuAD
    normalisation. Deviation: the official ``str_to_num`` drops minus signs; a wrong sign is
    wrong here.
    """

    name = "multihiertt"
    domain = "finance"
    grader = "numbers within 0.1% (at most 0.1 absolute; percent or fraction), spans by normalised exact match"
    hub = Hub("rootsautomation/MultiHiertt")
    splits = {"train": "train", "test": "validation"}  # the official test set has no answers
    id_key = "uid"
    description = "QA over several hierarchical tables + text of a report (rootsautomation/MultiHiertt)"

    def problem_text(self, row: dict[str, Any]) -> str:
        text = [p for p in row.get("paragraphs") or [] if not _TABLE_MARKER.match(p)]
        return f"{row['question']} {' '.join(text[:10])}"

    def document(self, row: dict[str, Any]) -> str:
        """The paragraphs with each table rendered where its marker sits."""
        tables = [pipe_table(html_rows(t)) for t in row.get("tables") or []]
        blocks: list[str] = []
        sentences: list[str] = []
        placed: set[int] = set()
        for paragraph in row.get("paragraphs") or []:
            m = _TABLE_MARKER.match(paragraph)
            if m is None:
                sentences.append(paragraph.strip())
                continue
            i = int(m.group(1))
            blocks += [" ".join(sentences)] if sentences else []
            sentences = []
            if i < len(tables):
                blocks.append(f"Table {i}:\n{tables[i]}")
                placed.add(i)
        blocks += [" ".join(sentences)] if sentences else []
        blocks += [f"Table {i}:\n{t}" for i, t in enumerate(tables) if i not in placed]
        return "\n\n".join(b for b in blocks if b)

    def messages(self, task: Task) -> list[dict[str, Any]]:
        user = f"{self.document(task.data)}\n\nQuestion: {task.data['question']}"
        return [{"role": "system", "content": FINANCE_PROMPT}, {"role": "user", "content": user}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        reference = str(task.answer or "")
        if not reference.strip():
            return False
        if parse_number(reference) is None:
            return every_answer(text, lambda answer: spans_equal(answer, reference))
        return every_answer(text, lambda answer: numbers_match(answer, reference, multihiertt_close))

    def solution(self, task: Task) -> str | None:
        return f"The answer is \\boxed{{{task.answer}}}." if str(task.answer or "").strip() else None


class FinanceBench(Benchmark):
    """FinanceBench's open-source sample (Islam et al., 2023), in the paper's oracle setting: the
    question with its evidence pages (in the rows), prompted as the paper's notebook does.

    Eval only, and only the rows whose answer is one number (the metrics-generated questions:
    "$1577.00", "1.9%", "24.26"): :meth:`hub_rows` leaves out the free-text answers, which the
    paper graded by human review and no rule can grade ("No, the company is managing its
    CAPEX ... pretty efficiently"). A reply matches within 1% or when equal at the
    reference's precision, a percentage also read as its fraction.
    """

    name = "financebench"
    domain = "finance"
    grader = "numeric-answer rows only: within 1% of the reference or equal at its precision (percent or fraction)"
    hub = Hub("PatronusAI/financebench")
    splits = {"test": "train"}  # the hub's one split is the 150-question evaluation sample
    id_key = "financebench_id"
    description = "questions on public filings with evidence pages (PatronusAI/financebench); numeric answers, eval only"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        return [r for r in super().hub_rows(hub_split, path) if parse_number(r.get("answer")) is not None]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        d = task.data
        pages = "\n\n".join(e.get("evidence_text_full_page") or e.get("evidence_text") or ""
                            for e in d.get("evidence") or [])
        user = (f"Answer this question: {d['question']} \nHere is the relevant evidence that you need to "
                f"answer the question:\n[START OF FILING] {pages} [END OF FILING]")
        return [{"role": "system", "content": FINANCE_PROMPT}, {"role": "user", "content": user}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        reference = str(task.answer or "")

        def close(value: float, ref: float, shift: int) -> bool:
            places = max(decimals(reference) - shift, 0)
            return abs(value - ref) <= 0.01 * abs(ref) or round(value, places) == round(ref, places)
        return every_answer(text, lambda answer: numbers_match(answer, reference, close))

    def solution(self, task: Task) -> str | None:
        return f"The answer is \\boxed{{{task.answer}}}."


BENCHMARKS: tuple[type[Benchmark], ...] = (FinQA, TATQA, ConvFinQA, MultiHiertt, FinanceBench)
