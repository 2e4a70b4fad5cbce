r"""Math answer grading: extract the final answer from a reply, then compare it to a reference.

    grade("... so the answer is \boxed{\dfrac34}.", "0.75")   # True

Extraction (:func:`extract_answer`), first match wins: the last ``\boxed{...}`` / ``\fbox{...}``
(nested braces kept), the last "The answer is X" / "Final answer: X", the last "#### X".
:func:`grade` reads them all (:func:`final_answers`): a reply that states several different
final answers ("\boxed{3} \boxed{4}", "The answer is 3. The answer is 4.", "either 3 or 4")
is wrong, whichever of them is right.

Comparison (:func:`is_equiv`) after :func:`normalize` (LaTeX spacing, ``\left``/``\right``,
``\text{}``, ``\dfrac``/``\tfrac``, ``\frac34``, ``\sqrt2``, ``$``/``%``/degrees, trailing units
and words, "x = ...", thousands separators, the unicode minus): equal strings; or equal
exact rationals (``3/4 == 0.75 == \frac{3}{4}``; no float tolerance, so ``0.33 != 1/3``); or,
only when sympy is installed, symbolically equal expressions (``\frac{\sqrt2}{2} ==
1/\sqrt{2}``). sympy sees a whitelisted, length- and exponent-capped rewrite of the text, never
the raw text, because ``parse_expr`` calls ``eval``.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_TEXT_COMMANDS = ("\\text", "\\textbf", "\\textit", "\\mathrm", "\\mathbf", "\\mbox", "\\operatorname")
_REPLACE = (
    ("\u2212", "-"), ("\u2013", "-"), ("\u00a0", " "), ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"),
    ("\\displaystyle", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\:", ""), ("\\ ", " "),
    ("\\qquad", " "), ("\\quad", " "), ("~", " "), ("{,}", ","), ("\\%", "%"), ("\\$", "$"),
    ("\u00b0", ""), ("$", ""), ("%", ""),
)
_LONG_UNITS = (
    r"cm|mm|km|meters?|centimeters?|kilometers?|inch|inches|in|ft|feet|foot|yards?|yd|miles?|mi"
    r"|grams?|kg|mg|lbs?|pounds?|oz|ounces?|sec|seconds?|min|minutes?|hrs?|hours?|days?|weeks?"
    r"|months?|years?|dollars?|cents?|units?|degrees?|sq|square|cubic|mph|percent|liters?|ml"
)
_UNITS = re.compile(rf"^(.*?[\d}}])(?:(?:\s*(?:{_LONG_UNITS})\b|\s+[mgsh]\b)(?:\^\{{?\d\}}?)?)+$")
_WORDS_AFTER_NUMBER = re.compile(r"^([+-]?[\d.,/]+)(?:\s+[a-zA-Z]{2,})+$")
_ASSIGNMENT = re.compile(r"^[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*([^=]+)$")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?")
_LEFT_RIGHT = re.compile(r"\\(?:left|right|big|Big|bigl|bigr|Bigl|Bigr)(?![a-zA-Z])")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_CHOICE = re.compile(r"^\(([A-Za-z])\)$")
_DEC = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d{1,3})?"
_ANSWER_IS = re.compile(r"(?:answer is|final answer:)[:\s]*(.+?)[ \t]*(?:\.[ \t]*)?$", re.IGNORECASE | re.MULTILINE)
_HASHES = re.compile(r"####[ \t]*(.+?)[ \t]*$", re.MULTILINE)
# Where a statement of a final answer starts: "the answer is", "final answer:", and "Answer:"
# opening a line or a sentence.
_MARKER = re.compile(r"(?:answer is|final answer\s*:|(?:^|(?<=[.!?]\s))[ \t*#]*answer[ \t*]*:)[:\s*]*",
                     re.IGNORECASE)
_BOX = re.compile(r"(?<!\\)\\(?:boxed|fbox)(?![a-zA-Z])")
_OR = re.compile(r"\s+or\s+|^\s*either\s+", re.IGNORECASE)
_THINK_END = "</think>"


# ---------------------------------------------------------------------------- braces


def _group(s: str, i: int) -> tuple[str, int] | None:
    """The argument starting at ``s[i]``: a balanced ``{...}`` (content, index after), or one
    character (``\\frac34``), or a whole command (``\\frac\\pi2``); None if unbalanced."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        if s[i] == "\\":
            m = re.match(r"\\[a-zA-Z]+", s[i:])
            if m:
                return m.group(0), i + m.end()
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j], j + 1
    return None


def _box_at(text: str, start: int) -> tuple[str, int] | None:
    """The box whose command starts at ``start``: (content, index after), or None."""
    i = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] != "{":
        m = re.match(r"[^\s$]+", text[i:])
        return (m.group(0), i + m.end()) if m else None
    return _group(text, i) if i < len(text) else None


def boxes(text: str) -> list[str]:
    """The contents of every top-level ``\\boxed{...}`` or ``\\fbox{...}`` (``\\boxed 5`` too),
    in order. ``\\\\boxed`` is not a box: in LaTeX that is a line break and the word "boxed" (it
    is also how a box reads inside a JSON-escaped string, such as a dataset row)."""
    found, i = [], 0
    while (m := _BOX.search(text, i)) is not None:
        box = _box_at(text, m.start())
        if box is None:
            i = m.end()
            continue
        found.append(box[0])
        i = box[1]
    return found


def last_boxed(text: str) -> str | None:
    """The content of the last top-level box (see :func:`boxes`), or None."""
    found = boxes(text)
    return found[-1] if found else None


def _rewrite_commands(s: str, rewrite) -> str:
    r"""Apply ``rewrite(command, s, i) -> (replacement, end) | None`` at every ``\command``."""
    out, i = [], 0
    while i < len(s):
        m = re.match(r"\\[a-zA-Z]+", s[i:]) if s[i] == "\\" else None
        done = rewrite(m.group(0), s, i + m.end()) if m else None
        if done is None:
            out.append(m.group(0) if m else s[i])
            i += m.end() if m else 1
        else:
            out.append(done[0])
            i = done[1]
    return "".join(out)


def _canonical(command: str, s: str, i: int) -> tuple[str, int] | None:
    """``\\frac34`` -> ``\\frac{3}{4}``, ``\\sqrt2`` -> ``\\sqrt{2}``, ``\\text{cm}`` -> ``cm``."""
    if command in _TEXT_COMMANDS:
        arg = _group(s, i)
        return (_normalize_latex(arg[0]), arg[1]) if arg else None
    if command == "\\frac":
        a = _group(s, i)
        b = _group(s, a[1]) if a else None
        return (f"\\frac{{{_normalize_latex(a[0])}}}{{{_normalize_latex(b[0])}}}", b[1]) if a and b else None
    if command == "\\sqrt":
        index = ""
        m = re.match(r"\s*\[([^\]]*)\]", s[i:])
        if m:
            index, i = f"[{m.group(1)}]", i + m.end()
        arg = _group(s, i)
        return (f"\\sqrt{index}{{{_normalize_latex(arg[0])}}}", arg[1]) if arg else None
    return None


def _normalize_latex(s: str) -> str:
    return _rewrite_commands(s, _canonical)


# ---------------------------------------------------------------------------- extraction, normalisation


def extract_answer(text: str | None) -> str | None:
    """The final answer in a reply (see the module docstring), or None."""
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    for pattern in (_ANSWER_IS, _HASHES):
        found = pattern.findall(text)
        if found:
            return found[-1]
    return None


def final_answers(text: str | None, alternatives: bool = True) -> list[str]:
    r"""Every final answer ``text`` states, each once, in order: what a grader holds to the rule
    that **a reply stating several different final answers scores 0** (docs/benchmarks.md, "What
    a grader promises"): the grader checks them all, and never picks one.

    Read after the last ``</think>`` (the reasoning before it states no final answer): the
    content of every top-level box, every "The answer is X" / "Final answer: X", every line
    "Answer: X" and every "#### X" whose X holds no box (one that does, "the answer is
    $\boxed{5}$. I hope it is correct", is that box). With ``alternatives``, an X outside a box that offers alternatives
    ("either 3 or 4", "3 or 4") counts as each of them; inside a box math-verify reads them as
    a set. Answers equal after :func:`normalize` count once. [] when the reply states none.
    """
    return [answer for answer, _boxed in stated_answers(text, alternatives)]


def stated_answers(text: str | None, alternatives: bool = True) -> list[tuple[str, bool]]:
    """:func:`final_answers`, each with whether it was boxed."""
    if not text:
        return []
    text = text.rsplit(_THINK_END, 1)[-1]
    found = [(box, True) for box in boxes(text)]
    for stated in [*_statements(text), *_HASHES.findall(text)]:
        if _BOX.search(stated):
            continue
        parts = [p for p in _OR.split(stated) if p.strip()] if alternatives else [stated]
        found += [(p, False) for p in parts]
    distinct: dict[str, tuple[str, bool]] = {}
    for answer, boxed in found:
        distinct.setdefault(normalize(answer) or answer.strip(), (answer.strip(), boxed))
    return list(distinct.values())


def _statements(text: str) -> list[str]:
    """The X of each "the answer is X" / "Final answer: X" / "Answer: X": up to the end of its
    line, or, where another statement follows on the line ("The answer is 3. The answer is
    4."), up to the end of its own sentence; a closing period dropped."""
    found = []
    for line in text.splitlines():
        marks = list(_MARKER.finditer(line))
        for k, mark in enumerate(marks):
            stated = line[mark.end():marks[k + 1].start() if k + 1 < len(marks) else len(line)]
            if k + 1 < len(marks):
                cut = max(stated.rfind(". "), stated.rfind("; "))
                stated = stated[:cut] if cut >= 0 else stated
            stated = re.sub(r"[ \t]*(?:\.[ \t]*)?$", "", stated)
            if stated.strip():
                found.append(stated)
    return found


def plain(answer: str) -> bool:
    """Whether a stated answer can be an answer at all: its braces balance and it holds no ``"``.
    What a JSON dump of a row leaves after "#### 18" or "Answer:" (``18"}``, ``34", "style"``) is
    not one; an answer read from such an echo scores 0 however it reads as math."""
    depth = 0
    for c in answer:
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0 and '"' not in answer


def normalize(answer: str) -> str:
    """A canonical, space-free form of one answer (see the module docstring)."""
    s = answer.strip()
    box = _box_at(s, 0) if s.startswith(_BOX_COMMANDS) else None
    s = box[0] if box and box[1] == len(s) else s
    s = _LEFT_RIGHT.sub("", _DEGREES.sub("", s))
    for old, new in _REPLACE:
        s = s.replace(old, new)
    s = _normalize_latex(s).strip().rstrip(".").strip()
    m = _ASSIGNMENT.match(s)
    s = m.group(1).strip() if m else s
    for pattern in (_UNITS, _WORDS_AFTER_NUMBER):
        m = pattern.match(s)
        s = m.group(1).strip() if m else s
    s = re.sub(r"\s+", "", s)
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    m = _CHOICE.match(s)
    return m.group(1) if m else s


def to_number(s: str) -> Fraction | None:
    """An exact rational for a normalized integer, decimal, ``a/b`` or ``\\frac{a}{b}``."""
    if len(s) > 60:
        return None
    try:
        if re.fullmatch(_DEC, s):
            return Fraction(s)
        m = re.fullmatch(rf"({_DEC})/({_DEC})", s)
        if m and Fraction(m.group(2)) != 0:
            return Fraction(m.group(1)) / Fraction(m.group(2))
        m = re.fullmatch(rf"([+-]?)\\frac\{{({_DEC})\}}\{{({_DEC})\}}", s)
        if m and Fraction(m.group(3)) != 0:
            value = Fraction(m.group(2)) / Fraction(m.group(3))
            return -value if m.group(1) == "-" else value
    except (ValueError, ZeroDivisionError):
        return None
    return None


def is_equiv(pred: str | None, ref: str | None) -> bool:
    """Whether two answers are the same (see the module docstring)."""
    if pred is None or ref is None:
        return False
    a, b = normalize(str(pred)), normalize(str(ref))
    if not a or not b:
        return False
    if a == b:
        return True
    x, y = to_number(a), to_number(b)
    if x is not None and y is not None:
        return x == y
    return _sympy_equal(a, b)


def grade(text: str | None, reference: str | None) -> bool:
    """Whether ``text`` states a final answer and every final answer it states
    (:func:`final_answers`) equals ``reference``."""
    answers = final_answers(text)
    return bool(answers) and all(plain(a) and is_equiv(a, reference) for a in answers)


def numeric_close(pred: str | None, ref: str | None, rel: float = 1e-2) -> bool:
    """Numbers within ``rel`` (relative) of each other; a percentage also matches its fraction
    (``14.1%`` vs ``0.141``). For answers computed from rounded figures (FinQA)."""
    if pred is None or ref is None:
        return False
    x, y = to_number(normalize(pred)), to_number(normalize(ref))
    if x is None or y is None:
        return False
    candidates = [x, x * 100, x / 100] if "%" in pred + ref else [x]
    return any(abs(c - y) <= rel * max(abs(y), Fraction(1, 100)) for c in candidates)


# ---------------------------------------------------------------------------- sympy (optional)

_FUNCTIONS = {"sqrt", "pi", "sin", "cos", "tan", "log", "exp", "oo"}
_SYMPY_NAMES = ("Integer", "Float", "Rational", "Symbol", *sorted(_FUNCTIONS))
_LATEX_WORDS = (("\\cdot", "*"), ("\\times", "*"), ("\\pi", " pi "), ("\\infty", " oo "),
                ("\\ln", " log "), ("\\log", " log "), ("\\sin", " sin "), ("\\cos", " cos "),
                ("\\tan", " tan "), ("\\exp", " exp "))


def _to_python(command: str, s: str, i: int) -> tuple[str, int] | None:
    if command == "\\frac":
        a = _group(s, i)
        b = _group(s, a[1]) if a else None
        return (f"(({_python_expr(a[0])})/({_python_expr(b[0])}))", b[1]) if a and b else None
    if command == "\\sqrt":
        m = re.match(r"\[([^\]]*)\]", s[i:])
        arg = _group(s, i + (m.end() if m else 0))
        if not arg:
            return None
        inner = _python_expr(arg[0])
        return (f"(({inner})**(1/({_python_expr(m.group(1))})))" if m else f"sqrt({inner})", arg[1])
    return None


def _python_expr(s: str) -> str:
    for old, new in _LATEX_WORDS:
        s = s.replace(old, new)
    return _rewrite_commands(s, _to_python)


def _safe_python(s: str) -> str | None:
    """A sympy-parsable rewrite of a normalized answer, or None when it is not plainly math."""
    if len(s) > 80 or s.count("^") > 2:
        return None
    s = _python_expr(s).replace("{", "(").replace("}", ")").replace("^", "**")
    if re.search(r"[^0-9a-zA-Z+\-*/(). ]", s) or re.search(r"\*\*\s*\(?\s*\d{4,}", s):
        return None
    # Letters other than known functions become single-letter symbols: "xy" -> "x y".
    return re.sub(r"[a-zA-Z]+", lambda m: m.group(0) if m.group(0) in _FUNCTIONS else " ".join(m.group(0)), s)


def _sympy_equal(a: str, b: str) -> bool:
    try:
        import sympy
        from sympy.parsing.sympy_parser import (
            convert_xor,
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )
    except ImportError:
        return False
    x, y = _safe_python(a), _safe_python(b)
    if x is None or y is None:
        return False
    names = {c: sympy.Symbol(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    glob: dict = {"__builtins__": {}, **{n: getattr(sympy, n) for n in _SYMPY_NAMES}}
    transformations = (*standard_transformations, implicit_multiplication_application, convert_xor)
    try:
        ex, ey = (parse_expr(t, local_dict=dict(names), global_dict=glob, transformations=transformations)
                  for t in (x, y))
        diff = ex - ey
        if not diff.free_symbols:
            scale = max(1.0, abs(complex(ey.evalf())))
            return abs(complex(diff.evalf())) < 1e-9 * scale
        return bool(sympy.simplify(diff) == 0)
    except Exception:  # any parse or evaluation failure means "not shown equal"
        return False
