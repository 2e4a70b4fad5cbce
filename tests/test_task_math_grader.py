"""Math answer extraction and equivalence: the tricky cases, equal and not equal."""

from __future__ import annotations

import pytest

from tracerl.tasks.graders.math import (
    extract_answer,
    grade,
    is_equiv,
    last_boxed,
    normalize,
    numeric_close,
    to_number,
)

EQUAL = [
    ("\\boxed{\\frac{3}{4}}", "0.75"),
    ("3/4", "\\dfrac34"),
    ("\\frac{3}{4}", "0.75"),
    ("0.50", "1/2"),
    ("1,000", "1000"),
    ("1{,}000", "1000"),
    ("1,234,567.5", "1234567.5"),
    ("5 cm", "5"),
    ("5cm^{2}", "5"),
    ("18 apples", "18"),
    ("\\$5", "5"),
    ("$5", "5"),
    ("5\\%", "5"),
    ("5%", "5"),
    ("10^\\circ", "10"),
    ("\u22125", "-5"),
    ("-\\frac{1}{2}", "-0.5"),
    ("\\frac{-1}{2}", "-1/2"),
    ("\\left( 1, 2 \\right)", "(1,2)"),
    ("\\text{Monday}", "Monday"),
    ("\\text{(C)}", "C"),
    ("\\sqrt2", "\\sqrt{2}"),
    ("x = 5", "5"),
    ("5.", "5"),
    ("\\tfrac{1}{2}", "0.5"),
    ("\\boxed{\\dfrac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}"),
    ("2 \\, 000", "2000"),
]
SYMPY_EQUAL = [
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("2\\sqrt{3}", "\\sqrt{12}"),
    ("(x+1)^2", "x^2+2x+1"),
    ("2\\pi", "\\pi \\cdot 2"),
]
NOT_EQUAL = [
    ("0.33", "1/3"),
    ("5", "-5"),
    ("1.000", "1000"),
    ("\\sqrt{2}", "2"),
    ("x+1", "x-1"),
    ("(1,2)", "(2,1)"),
    ("12", "120"),
    ("3/4", "4/3"),
    ("\\frac{1}{2}", "\\frac{1}{3}"),
    ("5 cm", "6"),
    ("2x", "2"),
    ("2m", "2"),
    ("", "5"),
    (None, "5"),
    ("9^9^9^9", "1"),
    ("__import__('os')", "0"),
]


@pytest.mark.parametrize(("pred", "ref"), EQUAL)
def test_equal_answers(pred, ref):
    assert is_equiv(pred, ref)
    assert is_equiv(ref, pred)


@pytest.mark.parametrize(("pred", "ref"), SYMPY_EQUAL)
def test_equal_expressions_with_sympy(pred, ref):
    pytest.importorskip("sympy")
    assert is_equiv(pred, ref)


@pytest.mark.parametrize(("pred", "ref"), NOT_EQUAL)
def test_different_answers(pred, ref):
    assert not is_equiv(pred, ref)


@pytest.mark.parametrize(("text", "answer"), [
    ("so \\boxed{\\frac{1}{\\boxed{2}}} done", "\\frac{1}{\\boxed{2}}"),
    ("first \\boxed{1} then \\boxed{\\{2, 3\\}}", "\\{2, 3\\}"),
    ("The answer is $\\frac{1}{2}$.", "$\\frac{1}{2}$"),
    ("Work.\n#### 1,234", "1,234"),
    ("Final answer: 3.5.", "3.5"),
    ("The answer is 3.5", "3.5"),
    ("\\boxed 7 is it", "7"),
    ("\\fbox{4}", "4"),
    ("no answer here", None),
    ("", None),
    ("unbalanced \\boxed{1", None),
])
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


def test_boxed_wins_over_answer_is_and_grade_uses_both_steps():
    assert extract_answer("The answer is 3. Actually \\boxed{4}") == "4"
    assert grade("Thinking... The answer is \\boxed{\\dfrac34}.", "0.75")
    assert not grade("The answer is 0.7.", "0.75")
    assert last_boxed("none") is None


def test_normalize_and_to_number():
    assert normalize("\\left[ 2, 3 \\right)") == "[2,3)"
    assert to_number("\\frac{6}{8}") == to_number("0.75")
    assert to_number("1/0") is None and to_number("abc") is None


def test_numeric_close_for_rounded_figures():
    assert numeric_close("25.0%", "25%") and numeric_close("0.25", "25%")
    assert numeric_close("0.6401", "0.64")
    assert not numeric_close("0.7", "0.64") and not numeric_close(None, "1")
