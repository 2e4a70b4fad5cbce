r"""Reading and comparing the answers of the finance benchmarks (:mod:`.finance`), and their tables.

Tables are rendered one row per line with cells joined by ``" | "`` (:func:`pipe_table`); HTML
tables (ConvFinQA, MultiHiertt) are parsed with the standard library's HTML parser, a
``colspan`` cell repeated across the columns it spans so every column keeps its header.

A reply's final answers are its ``\boxed{}`` and "The answer is X" statements
(:func:`final_answers`), and **a reply that states several different final answers scores 0**:
every one must be right (:func:`every_answer`), so "\boxed{3} \boxed{4}" is wrong whichever is
the reference. :func:`parse_number` reads one number from an answer: ``$``, thousands commas, ``(16)`` for -16, the
unicode minus, and an optional ``%`` or scale word (thousand, million, billion). A reply with
more than one number, or words around it, is not a number: the graders are strict about
what counts as an answer.

Percentages come in two forms in these datasets (a percent figure, or the fraction that
FinQA-style programs compute), so :func:`readings` compares a reply ``x%`` with the reference
x100 and as it is, and a bare ``x`` also with the reference x100 and /100 when the reply or the
reference is below 1 in magnitude (a ratio): "1.64" matches a reference of 0.01639, while
"58.29" never matches 5829. As Program-of-Thoughts does, the reference is scaled, not the
reply, so precision rules count the decimals the reply wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from typing import Any

from ..graders.math import extract_answer
from ..graders.math import final_answers as math_final_answers
from .qa import normalize_answer

SCALES = {"": 1.0, "thousand": 1e3, "million": 1e6, "billion": 1e9, "percent": 0.01}
_SCALE_WORDS = {"%": "percent", "percent": "percent", "thousand": "thousand", "thousands": "thousand",
                "million": "million", "millions": "million", "billion": "billion", "billions": "billion"}
_NUMBER = re.compile(r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")
_NUMBER_TEXT = re.compile(
    r"^(?P<sign>[-+])?(?:us\$|\$|usd)?(?P<open>\()?(?P<sign2>[-+])?(?:us\$|\$|usd)?(?P<sign3>[-+])?" + _NUMBER.pattern
    + r"(?P<close>\))?(?P<scale>%|percent|thousands?|millions?|billions?)?$")
_LATEX = (("\\%", "%"), ("\\$", "$"), ("{,}", ","), ("\\,", ""), ("\\!", ""), ("\u2212", "-"),
          ("\u2013", "-"), ("\u00a0", " "))
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")


# ---------------------------------------------------------------------------- tables


def pipe_table(rows: Sequence[Sequence[Any]]) -> str:
    """Rows as lines, cells joined by ``" | "`` (row 0 is usually the header)."""
    return "\n".join(" | ".join(str(c) for c in row) for row in rows)


class _Tables(HTMLParser):
    """Every ``<table>`` of a document as a list of rows of cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            if not self.tables[-1]:  # a cell outside any <tr>
                self.tables[-1].append([])
            self._cell = []
            span = dict(attrs).get("colspan") or "1"
            self._span = max(1, min(int(span), 50)) if span.isdigit() else 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            text = " ".join("".join(self._cell).split())
            self.tables[-1][-1].extend([text] * self._span)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_rows(html: str) -> list[list[str]]:
    """The rows of the first HTML table in ``html`` ([] if none)."""
    parser = _Tables()
    parser.feed(html)
    parser.close()
    return [row for row in parser.tables[0] if row] if parser.tables else []


def render_html_tables(text: str) -> str:
    """``text`` with each ``<table>...</table>`` replaced by its rows as a pipe table."""
    def render(match: re.Match[str]) -> str:
        return f"\n{pipe_table(html_rows(match.group(0)))}\n"
    return re.sub(r"[ \t]*<table\b.*?</table>[ \t]*", render, text, flags=re.IGNORECASE | re.DOTALL)


# ---------------------------------------------------------------------------- reading answers


def final_answer(text: str | None) -> str | None:
    r"""The reply's last final answer (last ``\boxed{}``, else "The answer is X"), LaTeX removed."""
    answer = extract_answer(text)
    return None if answer is None else _clean(answer)


def final_answers(text: str | None) -> list[str]:
    r"""Every final answer the reply states (:func:`tracerl.tasks.graders.math.final_answers`:
    boxes, "The answer is X", "Answer: X"), LaTeX removed, each once."""
    cleaned = (_clean(a) for a in math_final_answers(text, alternatives=False))
    return list(dict.fromkeys(a for a in cleaned if a is not None))


def every_answer(text: str | None, right: Callable[[str], bool]) -> bool:
    """Whether the reply states a final answer and ``right`` holds for every one it states:
    several different answers score 0, whichever of them is right."""
    answers = final_answers(text)
    return bool(answers) and all(right(answer) for answer in answers)


def _clean(answer: str) -> str | None:
    for old, new in _LATEX:
        answer = answer.replace(old, new)
    answer = _TEXT_COMMAND.sub(r"\1", answer).strip()
    if len(answer) > 2 and answer.count("$") == 2 and answer[0] == answer[-1] == "$":  # $...$ math mode
        answer = answer[1:-1].strip()
    return answer.rstrip(".").strip() or None


def parse_number(text: Any) -> tuple[float, str] | None:
    """``(value, scale)`` for text that is one number, scale one of :data:`SCALES` ("" when
    none is written): ``"-$2,383 thousand"`` -> (-2383.0, "thousand"), ``"(16)"`` -> (-16.0, "")."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text), ""
    if not isinstance(text, str) or len(text) > 60:
        return None
    s = text.lower().replace("\u2212", "-").replace("\u2013", "-").strip().rstrip(".")
    s = re.sub(r"\s+", "", s)
    m = _NUMBER_TEXT.match(s)
    if m is None or bool(m.group("open")) != bool(m.group("close")):
        return None
    signs = [g for g in (m.group("sign"), m.group("sign2"), m.group("sign3")) if g]
    if len(signs) > 1:
        return None
    value = float(m.group("num").replace(",", ""))
    negative = (signs == ["-"]) != bool(m.group("open"))
    return (-value if negative else value), _SCALE_WORDS.get(m.group("scale") or "", "")


def decimals(text: str) -> int:
    """How many decimals ``text``'s number is written with ("24.26" -> 2, "5829" -> 0)."""
    m = _NUMBER.search(text.replace(" ", ""))
    return len(m.group("num").split(".")[1]) if m and "." in m.group("num") else 0


def readings(value: float, percent: bool, reference: float) -> list[tuple[float, int]]:
    """The reference in the units the reply may be written in, as (reference, shift): shift 2
    for the percent figure of a fraction (x100, two decimals fewer), -2 for the fraction of a
    percent figure, 0 as it is (see the module docstring for when each applies)."""
    if percent:
        return [(reference * 100, 2), (reference, 0)]
    if min(abs(value), abs(reference)) < 1:
        return [(reference, 0), (reference * 100, 2), (reference / 100, -2)]
    return [(reference, 0)]


Close = Callable[[float, float, int], bool]  # (reply's number, reference in its units, shift)


def numbers_match(reply: str | None, reference: str, close: Close) -> bool:
    """Whether ``reply`` is one number that is ``close`` to the numeric ``reference`` read in
    one of the reply's possible units (:func:`readings`). A scale word is ignored: the unit is
    the table's, or the question's."""
    parsed, ref = parse_number(reply), parse_number(reference)
    if parsed is None or ref is None:
        return False
    value, scale = parsed
    return any(close(value, want, shift) for want, shift in readings(value, scale == "percent", ref[0]))


def spans_equal(reply: str | None, reference: str) -> bool:
    """Exact match after SQuAD normalisation (lower case, no punctuation or articles)."""
    if reply is None:
        return False
    want = normalize_answer(reference)
    return bool(want) and normalize_answer(reply) == want


# ---------------------------------------------------------------------------- the per-dataset rules


def finqa_equal(value: float, reference: float, places: int) -> bool:
    """Program-of-Thoughts' ``finqa_equal`` for one reading: within 0.1% relative, or equal when
    both are rounded to ``places``, the shorter of the two precisions (at least 2 decimals)."""
    if abs(value - reference) <= 1e-3 * max(abs(value), abs(reference)):
        return True
    return round(value, max(places, 2)) == round(reference, max(places, 2))


def multihiertt_close(value: float, reference: float, _shift: int = 0) -> bool:
    """MultiHiertt's ``evaluate.py``: ``isclose(abs_tol=min(|min(a, b)| / 1000, 0.1))``."""
    return abs(value - reference) <= min(abs(min(value, reference)) / 1000, 0.1) + 1e-12


def tatqa_number_equal(reply: str, gold: float, unit: float) -> bool:
    """TAT-QA's numeric match: the gold, rounded to 2 decimals in its own unit (``unit``: the
    multiplier of its scale), equals the reply with the reply's own scale applied, either as
    the official script compares them (``'%.4f'`` of each, rounded to 2 decimals in its own
    unit) or within half a cent of the gold's unit (so "2.383 million" = 2,383 thousand)."""
    parsed = parse_number(reply)
    if parsed is None:
        return False
    value, scale = parsed
    want, got = round(gold, 2) * unit, value * SCALES[scale]
    official = {f"{round(value, 2) * SCALES[scale]:.4f}", f"{got:.4f}"}
    return f"{want:.4f}" in official or abs(got - want) <= 0.005 * unit * (1 + 1e-9)
