r"""Built-in reward functions, each made by a factory: ``make_exact(case_sensitive=False)``.

Every grader is ``fn(task, artifacts) -> {"reward": 1.0 | 0.0, "is_correct": bool}``. It reads
the text to grade from ``artifacts[field]`` (``field="answer"``: what a rollout function's
returned string becomes) and compares it with the reference, ``task.answer``.

They are **strict** on purpose. An earlier reward was a substring test, and training learnt
to game it: "Answer: 10 + 2 + 233" scored 1 for the answer 12. So ``exact``, ``numeric``,
``regex``, ``json`` and ``math`` all score that reply 0; only ``contains`` is lenient, and
says so. For the same reason **a reply that states several different final answers scores
0** in every grader but ``contains`` (docs/benchmarks.md, "What a grader promises"): ``regex``
and ``json`` check every match or fence, ``math`` every box and "the answer is X", and none of
them picks the first or the last. What is wrong with the *reply* scores 0; what is wrong with the *data* (no
reference, no such artifact, no tests) is a :class:`~tracerl.core.errors.GradingError`, which
marks the episode ``grading_error`` instead of training on a made-up zero.

==========  ============================================================================
exact       the stripped text equals ``str(reference)`` stripped (``case_sensitive=True``)
numeric     the whole text is one number ("1,234", "-3.5", "$12", "50%", "12.") equal to
            the reference within ``rel_tol``/``abs_tol``; "12 + 3" or "12 apples" score 0
math        mathematically equivalent final answer, by ``math-verify`` (see :func:`make_math`)
regex       ``pattern`` with one capture group matches and the group equals the reference
contains    the reference appears as a whole token ("12" is not in "123" nor "12.5"); lenient
json        the text is JSON (a ```json fence is fine); the value at ``path`` equals it
code        the extracted program plus ``task.data[tests_field]`` runs cleanly in the sandbox
==========  ============================================================================
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracerl.core.errors import ConfigError, GradingError
from tracerl.core.types import Task

from ..sandbox import Limits
from .code import extract_code, mbpp_program, run_tests
from .math import extract_answer, plain, stated_answers
from .math import grade as legacy_math_grade

log = logging.getLogger(__name__)

RewardFn = Callable[[Task, Any], Any]
"""``fn(task, artifacts_or_episode) -> float | bool | dict[str, float | bool]``."""
Rewards = dict[str, float | bool]


# ---------------------------------------------------------------------------- shared


def answer_text(task: Task, artifacts: Any, field: str) -> str:
    """The string a grader grades: ``artifacts[field]``; anything else is the data's fault."""
    if not isinstance(artifacts, Mapping):
        raise GradingError(f"task {task.id!r}: the artifacts are a {type(artifacts).__name__}, not a dict; "
                           "a built-in reward grades the agent's returned string or dict")
    if field not in artifacts:
        have = ", ".join(sorted(map(str, artifacts))) or "none"
        raise GradingError(f"task {task.id!r}: no artifact {field!r} to grade (artifacts: {have}); return it "
                           f"from the agent, or pick one with the reward's field= option")
    value = artifacts[field]
    if not isinstance(value, str):
        raise GradingError(f"task {task.id!r}: artifact {field!r} is a {type(value).__name__}, not a string; "
                           "return the text to grade, or pick another artifact with field=")
    return value


def reference(task: Task) -> Any:
    """``task.answer``; a task without one cannot be graded, which is not the reply's fault."""
    if task.answer is None:
        raise GradingError(f"task {task.id!r} has no reference answer (task.answer is None); give the "
                           "dataset an answer column, or use a reward that needs none (code, judge, your own)")
    return task.answer


def verdict(ok: bool, found: bool | None = None) -> Rewards:
    """The reward of a right or wrong answer; ``found``: whether an answer could be read from
    the reply at all (``answer_found``, 0 or 1, which ``tracerl diagnose`` tells apart from a
    wrong one), when the grader knows."""
    out: Rewards = {"reward": 1.0 if ok else 0.0, "is_correct": bool(ok)}
    if found is not None:
        out["answer_found"] = 1.0 if found else 0.0
    return out


# ---------------------------------------------------------------------------- exact, numeric

def make_exact(field: str = "answer", case_sensitive: bool = True) -> RewardFn:
    """1 when the stripped text equals ``str(task.answer)`` stripped (casefolded if not
    ``case_sensitive``). The strictest grader: the agent must return the bare answer."""
    def exact(task: Task, artifacts: Any) -> Rewards:
        got, want = answer_text(task, artifacts, field).strip(), str(reference(task)).strip()
        if not case_sensitive:
            got, want = got.casefold(), want.casefold()
        return verdict(got == want)
    return exact


_NUMBER = re.compile(
    r"(?P<sign>[+-]?)\$?(?P<sign2>[+-]?)"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)"
    r"(?P<exp>[eE][+-]?\d+)?%?\.?"
)


def parse_number(text: str) -> float | None:
    """The value of a text that is one number and nothing else, else None.

    Allowed: a sign (before or after a ``$``), thousands separators in groups of three
    ("1,234,567"), a decimal part, an exponent, a trailing ``%`` (dropped: "50%" is 50) and a
    trailing period. "12 + 3", "12 apples", "1,23" and "" are not one number.
    """
    m = _NUMBER.fullmatch(text.strip().replace("\u2212", "-"))
    if m is None or (m["sign"] and m["sign2"]):
        return None
    value = float(m["digits"].replace(",", "") + (m["exp"] or ""))
    return -value if "-" in (m["sign"] + m["sign2"]) else value


def _numeric_reference(task: Task) -> float:
    ref = reference(task)
    value = None if isinstance(ref, bool) else float(ref) if isinstance(ref, (int, float)) else parse_number(str(ref))
    if value is None or not math.isfinite(value):
        raise GradingError(f"task {task.id!r}: the reference {ref!r} is not a number, so the numeric reward "
                           "cannot grade it; use the exact or math reward for this dataset")
    return value


def make_numeric(field: str = "answer", rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> RewardFn:
    """1 when the whole text is one number (see :func:`parse_number`) within ``rel_tol`` /
    ``abs_tol`` of the reference. A text with anything else in it is not a number: 0."""
    def numeric(task: Task, artifacts: Any) -> Rewards:
        want = _numeric_reference(task)
        got = parse_number(answer_text(task, artifacts, field))
        return verdict(got is not None and math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol), got is not None)
    return numeric


# ---------------------------------------------------------------------------- regex, contains

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def make_regex(pattern: str | None = None, field: str = "answer", flags: str = "") -> RewardFn:
    r"""1 when ``pattern`` matches and its one capture group, stripped, equals
    ``str(task.answer)`` stripped, at every match: "Answer: 13\nAnswer: 12" states two
    answers and scores 0 (the pattern never picks one). The pattern can demand a format:
    ``r"Answer: (-?\d+)$"`` scores "Answer: 10 + 2 + 233" 0 for 12. ``flags``: letters of
    "i", "m", "s"."""
    if not pattern:
        raise ConfigError("the regex reward needs pattern=, a regular expression with one capture group "
                          r"around the answer, e.g. pattern='Answer: (-?\d+)$'")
    unknown = sorted(set(flags) - set(_FLAGS))
    if unknown:
        raise ConfigError(f"regex reward: unknown flag(s) {''.join(unknown)!r} in flags={flags!r}; "
                          "use letters of 'i' (ignore case), 'm' (multiline), 's' (dot matches newline)")
    bits = 0
    for letter in flags:
        bits |= _FLAGS[letter]
    try:
        compiled = re.compile(pattern, bits)
    except re.error as exc:
        raise ConfigError(f"regex reward: pattern {pattern!r} is not a valid regular expression: {exc}") from exc
    if compiled.groups != 1:
        raise ConfigError(f"regex reward: pattern {pattern!r} has {compiled.groups} capture groups; it needs "
                          "exactly one, around the answer (make others non-capturing: (?:...))")

    def regex(task: Task, artifacts: Any) -> Rewards:
        want = str(reference(task)).strip()
        found = {(m.group(1) or "").strip() for m in compiled.finditer(answer_text(task, artifacts, field))}
        return verdict(found == {want}, bool(found))  # two different matches: two answers, 0
    return regex


def make_contains(field: str = "answer", case_sensitive: bool = True) -> RewardFn:
    """1 when the reference appears in the text as a whole token: not inside a word or a
    number ("12" is not in "123", "112", "12.5" or "1,12"; it is in "so 12." and "(12)").

    The **lenient** one: "12 or 13" scores 1 for 12, so a policy can learn to list guesses.
    Use it for free-text answers (HotpotQA-style), not where a strict grader fits.
    """
    def contains(task: Task, artifacts: Any) -> Rewards:
        want = str(reference(task)).strip()
        if not want:
            raise GradingError(f"task {task.id!r}: the reference is empty, so it is in every text")
        pattern = rf"(?<!\w)(?<!\d[.,]){re.escape(want)}(?!\w)(?![.,]\d)"
        found = re.search(pattern, answer_text(task, artifacts, field), 0 if case_sensitive else re.IGNORECASE)
        return verdict(found is not None)
    return contains


# ---------------------------------------------------------------------------- json

_JSON_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MISSING = object()


def _json_path(path: str | None) -> list[str]:
    if path is None or path == "":
        return []
    parts = path.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"json reward: path {path!r} has an empty part; write keys and list indices "
                          "separated by dots, e.g. 'result.items.0.total'")
    return parts


def _select(doc: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if isinstance(doc, Mapping):
            doc = doc.get(part, _MISSING)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return _MISSING
        if doc is _MISSING:
            return _MISSING
    return doc


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def json_equal(value: Any, ref: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    """Numbers numerically (a numeric string reference too: "12" for 12.0); a string reference
    holding JSON against a non-string value as that JSON ('[1, 2]', 'true'); a boolean only
    equals the same boolean (true is not 1); anything else by ``==``."""
    if _is_number(value):
        want = float(ref) if _is_number(ref) else parse_number(ref) if isinstance(ref, str) else None
        return want is not None and math.isclose(value, want, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(ref, str) and not isinstance(value, str):
        try:
            ref = json.loads(ref)
        except ValueError:
            return False
    if isinstance(value, bool) or isinstance(ref, bool):
        return value is ref
    return bool(value == ref)


def make_json(path: str | None = None, field: str = "answer", rel_tol: float = 1e-6,
              abs_tol: float = 1e-9) -> RewardFn:
    """1 when the text is a JSON document (alone, or in ```json fences) whose value at ``path``
    (dotted keys and list indices: "result.items.0") equals the reference (see
    :func:`json_equal`). Invalid JSON or a missing path scores 0: that is the reply's fault.
    Every fence that holds JSON must hold the answer: two documents with different values are
    two answers, and score 0 whichever is right."""
    parts = _json_path(path)

    def json_reward(task: Task, artifacts: Any) -> Rewards:
        ref = reference(task)
        text = answer_text(task, artifacts, field)
        values = [_select(doc, parts) for doc in _json_docs(_JSON_FENCE.findall(text) or [text])]
        found = bool(values) and all(v is not _MISSING for v in values)
        return verdict(found and all(json_equal(v, ref, rel_tol, abs_tol) for v in values), found)
    return json_reward


def _json_docs(texts: Sequence[str]) -> list[Any]:
    docs = []
    for text in texts:
        try:
            docs.append(json.loads(text))
        except ValueError:
            continue  # a fence that is not JSON (an example, a schema sketch) states no answer
    return docs


# ---------------------------------------------------------------------------- code


def make_code(field: str = "answer", tests_field: str = "tests", timeout_s: float = 10.0,
              memory_mb: int = 1024) -> RewardFn:
    """1 when the reply's code (the last fenced block, else the whole text: see
    :func:`~tracerl.tasks.graders.code.extract_code`) followed by ``task.data[tests_field]``
    (Python asserts: a string, or a list of strings joined by newlines) runs to its end with
    exit status 0 in the sandbox (:mod:`tracerl.tasks.sandbox`). A failing assert, an error,
    a timeout or a blocked syscall is 0; the sandbox's reason is logged at debug level."""
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)

    def code(task: Task, artifacts: Any) -> Rewards:
        tests = task.data.get(tests_field)
        if isinstance(tests, str):
            tests = [tests]
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            have = ", ".join(sorted(task.data)) or "none"
            raise GradingError(f"task {task.id!r}: task.data[{tests_field!r}] should be Python asserts (a string "
                               f"or a list of strings), found {type(tests).__name__} (data fields: {have}); "
                               "set tests_field= to the column that holds them")
        program = mbpp_program({"test_list": tests}, extract_code(answer_text(task, artifacts, field)))
        result = run_tests(program, limits)
        log.debug("task %s: code reward: %s", task.id, result.reason)
        return verdict(result.ok)
    return code


# ---------------------------------------------------------------------------- math


def make_math(field: str = "answer") -> RewardFn:
    r"""1 when the reply's final answer is mathematically equivalent to the reference, judged
    by Hugging Face's ``math-verify`` (``pip install 'tracerl[tasks]'``).

    What it accepts, checked in ``tests/test_graders.py``: ``\frac{1}{2}`` = 0.5,
    ``\boxed{\frac{3}{4}}`` = 3/4 = 0.75, "x = 2" = 2, ``2\sqrt{2}`` = ``\sqrt{8}``,
    "1,234" = 1234, ``(x+1)^2`` = ``x^2+2x+1``. **Units are dropped**: "5 cm" and
    ``5\text{ cm}`` equal 5 (math-verify's unit normalisation, kept: MATH/GSM8K references
    carry no units and a unit is not a wrong answer). An **unevaluated expression** that
    equals the reference counts ("10 + 2" for 12; "Answer: 10 + 2 + 233" is 245, so 0): use
    ``numeric`` where computing the number is the task. **A reply that states several
    different final answers scores 0**, whichever is right (the rule of every text grader,
    docs/benchmarks.md "What a grader promises"): every box, "the answer is X", "Answer: X" and
    "#### X" must equal the reference, and alternatives outside a box ("either 13 or 12")
    count as several; a reply that marks no final answer counts only when it is one answer
    ("5 cm", not a paragraph whose last number happens to be right). Several values of one
    answer go in one box (``\boxed{2, 3}``): ``\boxed{2} \boxed{3}`` is two answers. How
    the answers are read, and why, is in :func:`math_equivalent`.

    Without math-verify (0.8 or later) it falls back, with one warning, to
    :func:`tracerl.tasks.graders.math.grade` (tracerl's own extraction and equivalence).
    """
    if _math_verify() is None:  # said when the reward is made, not at the first episode
        _warn_no_math_verify()

    def math_reward(task: Task, artifacts: Any) -> Rewards:
        want = str(reference(task)).strip()
        return verdict(math_equal(want, answer_text(task, artifacts, field)))
    return math_reward


def math_equal(gold: str, text: str) -> bool:
    """:func:`math_equivalent` by math-verify; tracerl's own matching (one warning) without it."""
    if _math_verify() is None:
        _warn_no_math_verify()
        return _legacy_equal(gold, text)
    return math_equivalent(gold, text)


def _legacy_equal(gold: str, text: str) -> bool:
    if stated_answers(text):
        return legacy_math_grade(text, gold)
    return _one_answer(text) and legacy_math_grade(f"\\boxed{{{text.strip()}}}", gold)


_warned = threading.Event()


def _warn_no_math_verify() -> None:
    if not _warned.is_set():
        _warned.set()
        log.warning("the math reward uses tracerl's own answer matching because math-verify (0.8 or later) is "
                    "not installed; for LaTeX-aware equivalence install it with: pip install 'tracerl[tasks]'")


# ---------------------------------------------------------------------------- math-verify

_DELIMITERS = ("$", "\\(", "\\[", "\\boxed", "\\fbox")
_COMMAND = re.compile(r"\\[a-zA-Z]+")
_TEXT_ARG = re.compile(r"\\(?:text|textbf|textit|mathrm|mbox|operatorname)\s*\{[^{}]*\}")
_MAX_NODES = 400  # a final answer is small; simplify() on a huge expression is not
_MAX_EXPONENT = 1000  # 9^9^9^9 would make sympy compute for ever


@functools.cache
def _math_verify() -> Any | None:
    """The math_verify module, or None when it is not installed or older than 0.8 (before
    0.8 its timeouts cannot be turned off, and parse() off the main thread returns nothing)."""
    try:
        import math_verify
    except ImportError:
        return None
    found = _version("math-verify")
    if found is not None and found < (0, 8):
        log.warning("math-verify %s is too old for the math reward (it needs 0.8 or later to run off the main "
                    "thread); upgrade it with: pip install -U 'math-verify>=0.8'", ".".join(map(str, found)))
        return None
    # We turn math-verify's timeouts off (see math_equivalent) and guard against slow answers
    # ourselves, so its "Timeout is disabled ... you must provide the logic" notice would only
    # alarm; drop exactly that message, nothing else it logs.
    for name in ("math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).addFilter(_drop_timeout_notice)
    return math_verify


def _version(dist: str) -> tuple[int, ...] | None:
    try:
        text = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


def _drop_timeout_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Timeout is disabled")


def _parse(text: str) -> list[Any]:
    # parsing_timeout=None: math-verify's timeout is signal.alarm(), which works only on the
    # main thread; rollouts (and so graders) run on a thread pool, where it raises ValueError.
    # Without it, _tame() keeps the known slow inputs away from sympy instead.
    return list(_math_verify().parse(text, parsing_timeout=None))  # type: ignore[union-attr]


def _is_bare(text: str) -> bool:
    r"""Whether ``text`` is one formula written without math delimiters ("2\sqrt{2}", "(x+1)^2",
    "x = 2"): one short line, no ``$``/``\(``/``\[``/``\boxed``, and no word of two letters or
    more outside LaTeX commands. math-verify reads LaTeX only inside delimiters, and would
    read a bare "2\sqrt{2}" as 2, so such a text is read as if it were in ``$...$``."""
    if "\n" in text or len(text) > 300 or any(d in text for d in _DELIMITERS):
        return False
    return re.search(r"[A-Za-z]{2,}", _COMMAND.sub(" ", _TEXT_ARG.sub(" ", text))) is None


def _has_math(parsed: Sequence[Any]) -> bool:
    return any(not isinstance(p, str) for p in parsed)


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple[Any, ...]:
    """The reference, parsed once per distinct reference (a group of rollouts shares one).
    A reference is the bare answer ("\\frac{14}{3}"), so it is read as math (``$...$``) first."""
    attempts = [gold] if any(d in gold for d in _DELIMITERS) else [f"${gold}$", gold]
    parsed: list[Any] = []
    for attempt in attempts:
        parsed = _parse(attempt)
        if _has_math(parsed):
            break
    return tuple(parsed)


def _parse_prediction(text: str) -> list[Any]:
    """math-verify's default extraction (LaTeX, then plain expressions; a ``\\boxed{}`` or an
    "answer:" anchor first, else the last candidate), except for formulas without delimiters:
    a text that is one bare formula (see :func:`_is_bare`), or a reply without any delimiter
    whose final answer ("the answer is X", "#### X": :func:`~.math.extract_answer`) is one, is
    read as ``$formula$`` first, so "The answer is 2\\sqrt{2}" is 2*sqrt(2), not 2."""
    stripped = text.strip()
    candidate = stripped if stripped and _is_bare(stripped) else None
    if candidate is None and not any(d in text for d in _DELIMITERS):
        found = (extract_answer(text) or "").strip()
        candidate = found if found and _is_bare(found) else None
    if candidate:
        parsed = _parse(f"${candidate}$")
        if _has_math(parsed):
            return parsed
    return _parse(text)


def _small_exponent(exp: Any, sympy: Any) -> bool:
    if exp.has(sympy.Pow):  # a tower: x^{x^x}, 9^{9^9}
        return False
    if exp.free_symbols:
        return True
    try:
        return bool(abs(float(exp.evalf(5))) <= _MAX_EXPONENT)
    except (TypeError, ValueError):  # complex or undefined exponent: not a final answer
        return False


def _tame(parsed: Sequence[Any]) -> bool:
    """Whether comparing ``parsed`` is safe without a timeout: few nodes, no huge or stacked
    powers, no huge factorials, no unevaluated calculus (sympy would try to compute them)."""
    import sympy

    slow = (sympy.Integral, sympy.Sum, sympy.Product, sympy.Limit, sympy.Derivative)
    big_args = (sympy.factorial, sympy.factorial2, sympy.subfactorial, sympy.gamma, sympy.binomial)
    for item in parsed:
        if not isinstance(item, sympy.Basic):
            continue
        for count, node in enumerate(sympy.preorder_traversal(item)):
            if count > _MAX_NODES or isinstance(node, slow):
                return False
            if isinstance(node, sympy.Pow) and not _small_exponent(node.exp, sympy):
                return False
            if isinstance(node, big_args) and any(a.is_Number and abs(a) > 10_000 for a in node.args):
                return False
    return True


def math_equivalent(gold: str, text: str) -> bool:
    """Whether the final answer of ``text`` is mathematically equal to ``gold``, by math-verify.

    ``verify(gold, prediction)`` with math-verify's defaults (strict: variables matter; floats
    rounded to 6 places, so 0.333333 = 1/3 but 0.33 != 1/3) and ``timeout_seconds=None`` (as
    for parsing: its signal-based timeout needs the main thread). An answer too big to compare
    safely (:func:`_tame`) is not equal. A reference math-verify cannot read at all is a
    GradingError (grade it with the exact reward instead). Every final answer the reply states
    must be equal (:func:`_predictions`): math-verify alone would pick one of them.
    """
    mv = _math_verify()
    if mv is None:
        raise GradingError("the math reward needs math-verify: pip install 'tracerl[tasks]'")
    gold_parsed = list(_parse_gold(gold))
    if not gold_parsed:
        raise GradingError(f"math-verify cannot read the reference {gold!r} as math; grade this dataset "
                           "with the exact reward")
    if not _tame(gold_parsed):
        return False
    predictions = _predictions(text)
    return bool(predictions) and all(
        p and _tame(p) and mv.verify(gold_parsed, p, timeout_seconds=None) for p in predictions)


_MATH_SEGMENT = re.compile(r"\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL)
_NUMBER_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def _predictions(text: str) -> list[list[Any]]:
    r"""What math-verify compares with the reference: each final answer the reply states
    (:func:`~.math.stated_answers`: a box read as ``$\boxed{...}$``, a stated "X" as
    :func:`_parse_prediction` reads it; [] for one that is not :func:`~.math.plain`), or, when
    it states none, the whole reply if it is one answer (:func:`_one_answer`), else nothing."""
    stated = stated_answers(text)
    if not stated:
        return [_parse_prediction(text)] if _one_answer(text) else []
    return [(_parse(f"$\\boxed{{{a}}}$") if boxed else _parse_prediction(a)) if plain(a) else []
            for a, boxed in stated]


def _one_answer(text: str) -> bool:
    """Whether a reply that marks no final answer is one answer as a whole: one bare formula
    ("2\\sqrt{2}", "x = 2"), or one line holding one number or one ``$...$`` with words around
    it ("5 cm", "$\\frac{1}{2}$ cup"). Anything longer ("either 3 or 4", a paragraph of
    working, a list of numbers) leaves math-verify to pick one of its numbers: not an answer."""
    stripped = text.strip()
    if stripped and _is_bare(stripped):
        return True
    if not stripped or "\n" in stripped or len(stripped) > 200 or not plain(stripped):
        return False
    segments = _MATH_SEGMENT.findall(stripped)
    return len(segments) + len(_NUMBER_TOKEN.findall(_MATH_SEGMENT.sub(" ", stripped))) == 1
