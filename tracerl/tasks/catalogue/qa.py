"""Open-domain QA benchmarks with a ``search`` tool over the question's own passages.

Six datasets, one shape (:class:`SearchQA`): the model sees only the question; the ``search``
tool ranks that row's passages with BM25 (:mod:`tracerl.tasks.search`) and returns the best
three as a JSON list of "Title: text" strings. Where each benchmark's passages come from:

- ``hotpotqa``, ``2wiki``: the row's ten ``context`` paragraphs (2 gold, 8 distractors in
  HotpotQA's distractor setting; 2WikiMultihopQA has the same layout with ``content`` lists).
- ``musique``: the row's 20 ``paragraphs`` (2-4 supporting).
- ``nq``: the row's positive and BM25 hard-negative DPR passages, in an order that does not
  say which are positive.
- ``triviaqa``: the row's Wikipedia entity pages, split into paragraphs of at most
  :data:`MAX_WORDS` words.
- ``squad``: the sentences of the row's own context paragraph (the row holds no other
  paragraph of its article), so the tool narrows one paragraph down to its best sentences.

Grading, as Search-R1 and the official HotpotQA / 2Wiki / MuSiQue / NQ-open / SQuAD scripts
do it: exact match after SQuAD normalisation (lower case, punctuation and a/an/the dropped,
whitespace squeezed) against *any* reference (a list: answer aliases, several annotators).
The answers are read from the ``<answer>...</answer>`` tags (Search-R1's), ``\\boxed{}``, "The
answer is X" and "Answer: X" (:func:`final_answers`). **A reply that states several different
answers scores 0** ("The answer is Paris. The answer is Lyon.", two tags that differ), whichever
is right: Search-R1 and the official scripts read one answer (the last tag, the whole
prediction), and a policy rewarded on the last would learn to list candidates. Two names of one
reference ("USA", "United States", both among its aliases) are not different answers.
:func:`f1` gives the token-overlap score over the same references for partial credit.
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
from ..graders.math import final_answers as math_final_answers
from ..loaders import Hub
from ..search import cached_index

TOP_K = 3
MAX_WORDS = 120  # a TriviaQA passage: Wikipedia paragraphs run to hundreds of words, DPR uses 100
MAX_QUERY_CHARS = 1000  # a runaway query is cut, not tokenised whole
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
_PUNCTUATION = frozenset(string.punctuation)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[A-Z0-9])")
_YES_NO = frozenset({"yes", "no", "noanswer"})


# ---------------------------------------------------------------------------- grading


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def references(answer: Any) -> list[str]:
    """A reference as a list of answers: one string, or a list of aliases (empty ones dropped)."""
    items = answer if isinstance(answer, (list, tuple)) else [answer]
    return [str(a) for a in items if a is not None and str(a).strip()]


def _f1(pred: str, ref: str) -> float:
    p, r = normalize_answer(pred).split(), normalize_answer(ref).split()
    # HotpotQA's rule (2Wiki keeps it): a yes/no answer earns no partial credit for sharing a word
    if (" ".join(p) in _YES_NO or " ".join(r) in _YES_NO) and p != r:
        return 0.0
    common = sum((Counter(p) & Counter(r)).values())
    if not p or not r or not common:
        return float(p == r)
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def f1(pred: str | None, ref: Any) -> float:
    """Token-level F1 between normalised answers; the best over ``ref`` when it is a list."""
    return max((_f1(pred or "", r) for r in references(ref)), default=0.0)


def final_answer(text: str | None) -> str | None:
    """The last answer a reply gives: its last ``<answer>`` tag, else its boxed / "The answer is"
    one (for partial credit by :func:`f1`; :func:`exact_match` reads them all)."""
    if not isinstance(text, str):
        return None
    tags = _ANSWER_TAG.findall(text)
    return tags[-1] if tags else extract_answer(text)


def final_answers(text: str | None) -> list[str]:
    """Every answer a reply states after its last ``</think>``, SQuAD-normalised, each once:
    its ``<answer>`` tags, boxes, "The answer is X", "Answer: X" lines
    (:func:`tracerl.tasks.graders.math.final_answers`; a span's "or" is not split)."""
    if not isinstance(text, str):
        return []
    text = text.rsplit("</think>", 1)[-1]
    spans = [*_ANSWER_TAG.findall(text), *math_final_answers(_ANSWER_TAG.sub(r"\1", text), alternatives=False)]
    return list(dict.fromkeys(n for n in map(normalize_answer, spans) if n))


def exact_match(text: str | None, reference: Any) -> bool:
    """Whether the reply states an answer and every answer it states (:func:`final_answers`)
    equals a reference after SQuAD normalisation: "The answer is Paris. The answer is Lyon."
    is two different answers, and scores 0 whichever is right."""
    answers, refs = final_answers(text), {normalize_answer(r) for r in references(reference)}
    return bool(answers) and all(answer in refs for answer in answers)


# ---------------------------------------------------------------------------- passages


def paragraphs(context: dict[str, Any]) -> list[str]:
    """HotpotQA's paragraphs as "Title: sentence sentence ..." (its sentences keep their leading space)."""
    return [f"{title}: {''.join(sents).strip()}" for title, sents in zip(context["title"], context["sentences"])]


def chunks(text: str, max_words: int = MAX_WORDS) -> list[str]:
    """``text``'s non-blank lines, each cut into pieces of at most ``max_words`` words."""
    out = []
    for line in text.split("\n"):
        words = line.split()
        out += [" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)]
    return out


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``/``!``/``?`` where a capital, digit, quote or bracket follows."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


# ---------------------------------------------------------------------------- the shared task


class SearchQA(Benchmark):
    """A question answered with a BM25 ``search`` tool over :meth:`passages`; exact match."""

    domain = "search-qa"
    grader = ("exact match after SQuAD normalisation (lower case, no punctuation or articles) to any reference; "
              "two different answers score 0")
    tool_names = ("search",)

    def passages(self, row: dict[str, Any]) -> list[str]:
        """The corpus the ``search`` tool ranks for this row: "Title: text" strings."""
        raise NotImplementedError

    def question(self, row: dict[str, Any]) -> str:
        """The question as the model is asked it."""
        return self.problem_text(row)

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": self.question(task.data)}]

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [SEARCH_TOOL]

    def call_tool(self, task: Task, name: str, arguments: Any) -> str:
        """The best :data:`TOP_K` passages as a JSON list; a bad call is answered, never raised."""
        if name != "search":
            return f"error: unknown tool {name!r} (the only tool is 'search')"
        query = arguments.get("query") if isinstance(arguments, dict) else None
        if isinstance(query, (int, float)) and not isinstance(query, bool):
            query = str(query)  # a model searching for a year sends 1960, not "1960"
        if not isinstance(query, str):
            return 'error: search takes {"query": "<words to look for>"}'
        if not query.strip():
            return "error: the query is empty"
        docs = self.passages(task.data)
        hits = cached_index(tuple(docs)).search(query[:MAX_QUERY_CHARS], k=TOP_K)
        return json.dumps([docs[i] for _score, i in hits]) if hits else "no passage matches"

    def is_correct(self, task: Task, text: str | None) -> bool:
        return exact_match(text, task.answer)

    def solution(self, task: Task) -> str | None:
        refs = references(task.answer)
        return f"The answer is {refs[0]}." if refs else None


# ---------------------------------------------------------------------------- the benchmarks


class HotpotQA(SearchQA):
    """HotpotQA, distractor setting: two-hop questions over ten paragraphs (two gold)."""

    name = "hotpotqa"
    hub = Hub("hotpotqa/hotpot_qa", ("distractor",))
    splits = {"train": "train", "test": "validation"}  # the hub's test split has no answers
    id_key = "id"
    description = "multi-hop QA (hotpotqa/hotpot_qa distractor) with a BM25 search tool; exact match"

    def passages(self, row: dict[str, Any]) -> list[str]:
        return paragraphs(row["context"])


class TwoWiki(SearchQA):
    """2WikiMultihopQA: comparison, inference, compositional and bridge-comparison questions
    over ten paragraphs. The official v1.1 script also accepts entity aliases from
    ``id_aliases.json``, which this parquet mirror does not hold: the answer string is the
    one reference, as in Search-R1 and FlashRAG."""

    name = "2wiki"
    hub = Hub("ohjoonhee/2WikiMultihopQA")
    splits = {"train": "train", "test": "validation"}  # the test split hides its answers
    id_key = "_id"
    description = "multi-hop QA (ohjoonhee/2WikiMultihopQA, 2WikiMultihopQA) with a BM25 search tool; exact match"

    def passages(self, row: dict[str, Any]) -> list[str]:
        context = row["context"]
        # unlike HotpotQA's, these sentences carry no leading space
        return [f"{title}: {' '.join(sents).strip()}" for title, sents in zip(context["title"], context["content"])]


class MuSiQue(SearchQA):
    """MuSiQue-Ans: 2-4 hop questions composed from single-hop ones, 20 paragraphs each; the
    answer or any of its ``answer_aliases`` counts (StonyBrookNLP's evaluate_v1.0.py)."""

    name = "musique"
    hub = Hub("dgslibisey/MuSiQue")  # musique_ans_v1.0_{train,dev}.jsonl; "dev" loads as validation
    splits = {"train": "train", "test": "validation"}  # the test file (no answers) was deleted
    id_key = "id"
    description = "multi-hop QA (dgslibisey/MuSiQue, MuSiQue-Ans) with a BM25 search tool; exact match to any alias"

    def reference(self, row: dict[str, Any]) -> list[str]:
        return references([row.get("answer"), *(row.get("answer_aliases") or [])])

    def passages(self, row: dict[str, Any]) -> list[str]:
        return [f"{p['title']}: {p['paragraph_text']}" for p in row["paragraphs"]]


class NaturalQuestions(SearchQA):
    """Natural Questions (open, DPR's version): the corpus is the row's positive and hard
    negative 100-word passages, sorted by text so that rank ties do not give the positives
    away. Tevatron's test split has no passages, so DPR's dev split is the test role."""

    name = "nq"
    # a loading-script repo: datasets>=4 reads the hub's parquet export, by explicit files
    # (its own split inference would rename "dev" to "validation")
    hub = Hub("Tevatron/wikipedia-nq", kwargs={"revision": "refs/convert/parquet"}, builder="parquet",
              files={"train": ("default/train/*.parquet",), "dev": ("default/dev/*.parquet",)})
    splits = {"train": "train", "test": "dev"}
    id_key = "query_id"
    question_key = "query"
    description = "open-domain QA (Tevatron/wikipedia-nq, DPR's NQ) with a BM25 search tool; exact match to any answer"

    def reference(self, row: dict[str, Any]) -> list[str]:
        return references(row.get("answers"))

    def question(self, row: dict[str, Any]) -> str:
        # NQ queries are lower case with no "?"; Search-R1 adds one before asking
        query = str(row.get("query") or "").strip()
        return query if query.endswith("?") else f"{query}?"

    def passages(self, row: dict[str, Any]) -> list[str]:
        docs = {f"{p['title']}: {p['text']}" for p in [*row["positive_passages"], *row["negative_passages"]]}
        return sorted(docs)


class TriviaQA(SearchQA):
    """TriviaQA reading comprehension, Wikipedia evidence (``rc.wikipedia``): the row's entity
    pages cut into paragraphs of at most :data:`MAX_WORDS` words. Any of ``answer.aliases``
    counts, SQuAD-normalised as Search-R1 does; the official script normalises differently
    (punctuation becomes a space), so its ``normalized_aliases`` are not used. The train split
    is 3.3 GB of articles: save a subset to ``$TRACERL_DATA_DIR`` for small runs."""

    name = "triviaqa"
    hub = Hub("mandarjoshi/trivia_qa", ("rc.wikipedia",))
    splits = {"train": "train", "test": "validation"}  # the test split's answers are empty
    id_key = "question_id"
    description = "trivia QA (mandarjoshi/trivia_qa rc.wikipedia) with a BM25 search tool; exact match to any alias"

    def reference(self, row: dict[str, Any]) -> list[str]:
        answer = row.get("answer") or {}
        refs = references([answer.get("value"), *(answer.get("aliases") or [])])
        return list(dict.fromkeys(refs))  # the canonical value first, for solution()

    def passages(self, row: dict[str, Any]) -> list[str]:
        pages = row["entity_pages"]
        return [f"{title}: {chunk}" for title, text in zip(pages["title"], pages["wiki_context"])
                for chunk in chunks(text)]


class SQuAD(SearchQA):
    """SQuAD v1.1: the corpus is the sentences of the row's own context paragraph (a row holds
    no other paragraph of its article); any annotator's answer counts (evaluate-v1.1.py)."""

    name = "squad"
    hub = Hub("rajpurkar/squad", ("plain_text",))
    splits = {"train": "train", "test": "validation"}  # the hub has no test split
    id_key = "id"
    description = "reading comprehension (rajpurkar/squad v1.1) with a BM25 search tool over the paragraph; exact match"

    def reference(self, row: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(references((row.get("answers") or {}).get("text"))))

    def passages(self, row: dict[str, Any]) -> list[str]:
        title = str(row.get("title") or "").replace("_", " ")
        return [f"{title}: {s}" for s in sentences(row["context"])]


BENCHMARKS: tuple[type[Benchmark], ...] = (HotpotQA, TwoWiki, MuSiQue, NaturalQuestions, TriviaQA, SQuAD)
