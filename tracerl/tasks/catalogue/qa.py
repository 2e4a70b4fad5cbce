"""HotpotQA (distractor setting) with a ``search`` tool over the question's own paragraphs.

Each row carries ten paragraphs (two gold, eight distractors) in ``context``: ``{"title": [...],
"sentences": [[...], ...]}``. The model sees only the question; the ``search`` tool ranks
those ten paragraphs with BM25 (:mod:`tracerl.tasks.search`) and returns the best three. The
reward is exact match after SQuAD normalisation (lower case, no punctuation, no articles);
:func:`f1` gives the token-overlap score for partial credit.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from typing import Any

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders.math import extract_answer
from ..loaders import Hub
from ..search import cached_index

TOP_K = 3
SYSTEM_PROMPT = ("Answer the question. Call the search tool to find Wikipedia passages. "
                 "End your reply with: The answer is <answer>.")
SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the passages for this question; returns the best three.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1(pred: str | None, ref: str) -> float:
    """Token-level F1 between normalized answers."""
    p, r = normalize_answer(pred or "").split(), normalize_answer(ref).split()
    common = sum((Counter(p) & Counter(r)).values())
    if not p or not r or not common:
        return float(p == r)
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def paragraphs(context: dict[str, Any]) -> list[str]:
    """The row's paragraphs as "Title: sentence sentence ..."."""
    return [f"{title}: {''.join(sents).strip()}" for title, sents in zip(context["title"], context["sentences"])]


class HotpotQA(Benchmark):
    name = "hotpotqa"
    domain = "search-qa"
    grader = "exact match after SQuAD normalisation (lower case, no punctuation or articles)"
    tool_names = ("search",)
    hub = Hub("hotpotqa/hotpot_qa", ("distractor",))
    splits = {"train": "train", "test": "validation"}  # the hub's test split has no answers
    id_key = "id"
    description = "multi-hop QA (hotpotqa/hotpot_qa distractor) with a BM25 search tool; exact match"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": task.data["question"]}]

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [SEARCH_TOOL]

    def call_tool(self, task: Task, name: str, arguments: dict[str, Any]) -> str:
        if name != "search":
            return f"error: unknown tool {name!r}"
        docs = paragraphs(task.data["context"])
        hits = cached_index(tuple(docs)).search(str(arguments.get("query", "")), k=TOP_K)
        return json.dumps([docs[i] for _score, i in hits]) if hits else "no passage matches"

    def is_correct(self, task: Task, text: str | None) -> bool:
        answer = extract_answer(text)
        return answer is not None and normalize_answer(answer) == normalize_answer(task.answer)

    def solution(self, task: Task) -> str | None:
        return f"The answer is {task.answer}."


BENCHMARKS: tuple[type[Benchmark], ...] = (HotpotQA,)
