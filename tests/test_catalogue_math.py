r"""The math catalogue's graders on the answer forms each dataset uses: right answers in the
forms replies take, near misses, malformed replies; the loaders' special cases (DAPO's repeated
rows, Omni-MATH's proof rows, DeepScaleR's copies of test problems); Countdown's solver.

Rows come from tests/data/<task>/ (the datasets' real layout), loaded offline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracerl import tasks
from tracerl.core.errors import ConfigError
from tracerl.core.types import Task
from tracerl.tasks.catalogue.math import (
    countdown_solve,
    countdown_value,
    number_text,
    scientific_latex,
)

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"
AIME_2022_I_1 = "Quadratic polynomials $P(x)$ and $Q(x)$ have leading coefficients $2$"
NEW = ["aime24", "aime25", "amc", "minerva", "olympiadbench", "deepscaler", "geo3k", "svamp", "gsm-hard",
       "dapo-math", "omni-math", "asdiv"]
GARBAGE = [None, "", "\\boxed{}", "Answer:", "The answer is", "#### ", "\\boxed{\\frac{}{}}", "Answer: \\boxed{"]



def _tasks(name: str, split: str = "test") -> list[Task]:
    return tasks.get(name).tasks(split, 100, path=DATA)[: len(tasks.get(name).source.rows(split, DATA))]


def _by_answer(name: str, split: str = "test") -> dict:
    return {t.answer: t for t in _tasks(name, split)}


def _grades(name: str, task: Task, right: list[str], wrong: list[str]) -> None:
    spec = tasks.get(name)
    for reply in right:
        assert spec.is_correct(task, reply) and spec.reward(task, reply) == 1.0, (task.id, reply)
    for reply in wrong:
        assert not spec.is_correct(task, reply) and spec.reward(task, reply) == 0.0, (task.id, reply)


@pytest.mark.parametrize("name", NEW)
def test_garbage_replies_score_zero_and_eval_sets_have_no_train_role(name):
    spec = tasks.get(name)
    role = "test" if "test" in spec.source.splits else "train"
    for task in _tasks(name, role):
        for reply in GARBAGE:
            assert not spec.is_correct(task, reply), (task.id, reply)
    if set(spec.source.splits) == {"test"}:
        with pytest.raises(ConfigError, match="has no 'train' split"):
            spec.tasks("train", 1, path=DATA)


def test_aime24_and_aime25_integer_answers():
    aime24 = _by_answer("aime24")
    assert set(aime24) == {"204", "540", "104"}
    messages = tasks.get("aime24").messages(aime24["204"])
    assert len(messages) == 1 and messages[0]["content"].startswith("Solve the following math problem efficiently")
    assert messages[0]["content"].endswith("including the $t$ minutes spent in the coffee shop.")
    _grades("aime24", aime24["204"], ["Therefore, the final answer is: $\\boxed{204}$. I hope it is correct",
                                      "\\boxed{204}"], ["\\boxed{205}", "\\boxed{20.4}", "The answer is 2040."])
    aime25 = {t.id: t for t in _tasks("aime25")}
    first = aime25["aime25/1"]  # answer is an int64 in MathArena's parquet
    assert first.answer == "70" and first.data["answer"] == 70
    _grades("aime25", first, ["\\boxed{70}", "\\boxed{070}"], ["\\boxed{7}", "\\boxed{71}"])


def test_amc_float_answers_compare_as_numbers():
    amc = _by_answer("amc")
    assert set(amc) == {"27", "4", "18"} and amc["27"].data["answer"] == 27.0
    _grades("amc", amc["27"], ["\\boxed{27}", "\\boxed{27.0}", "They meet 27 miles from A: $\\boxed{27}$ miles"],
            ["\\boxed{27.5}", "\\boxed{18}", "\\boxed{270}"])


def test_minerva_scientific_notation_and_expressions():
    minerva = _by_answer("minerva")
    assert tasks.get("minerva").messages(minerva["1.6"])[0]["content"].endswith(
        "Please reason step by step, and put your final answer within \\boxed{}.")
    _grades("minerva", minerva["4.5e33"],
            ["\\boxed{4.5 \\times 10^{33}}", "\\boxed{4.5e33}", "The answer is 4.5e33",
             "\\boxed{4.5\\times10^{33}\\ \\mathrm{erg/s}}"],
            ["\\boxed{4.6 \\times 10^{33}}", "\\boxed{4.5e32}", "\\boxed{4.5}", "\\boxed{45}"])
    _grades("minerva", minerva["1.6"], ["\\boxed{1.6}", "\\boxed{1.6 \\text{ cm}}"], ["\\boxed{16}", "\\boxed{1.5}"])
    _grades("minerva", minerva["\\frac{m v^{2}}{R}"], ["\\boxed{\\frac{mv^2}{R}}", "\\boxed{m v^2 / R}"],
            ["\\boxed{\\frac{mv}{R}}", "\\boxed{\\frac{m v^{2}}{2R}}"])
    assert scientific_latex("L = 4.5e33 and 1E-3, not x2e5") == "L = 4.5\\times10^{33} and 1\\times10^{-3}, not x2e5"


def test_olympiadbench_final_answer_lists_and_the_official_prompt():
    rows = {t.id: t for t in _tasks("olympiadbench")}
    multi, single, expression = rows["olympiadbench/9002"], rows["olympiadbench/1606"], rows["olympiadbench/9003"]
    assert multi.data["final_answer"] == ["$2$", "$3$"] and multi.answer == "2, 3"
    _grades("olympiadbench", multi, ["So the final answer is \\boxed{2, 3}.", "So the final answer is \\boxed{3,2}."],
            ["\\boxed{2}", "\\boxed{2, 3, 4}", "\\boxed{2, 4}"])
    _grades("olympiadbench", single, ["So the final answer is $\\boxed{2}$."], ["\\boxed{3}", "\\boxed{20}"])
    _grades("olympiadbench", expression, ["\\boxed{s \\sqrt{2}}", "\\boxed{s\\sqrt2}"],
            ["\\boxed{2s}", "\\boxed{s}", "\\boxed{s \\sqrt{3}}"])
    prompt = tasks.get("olympiadbench").messages(multi)[-1]["content"]
    assert prompt.startswith("The following is an open-ended problem from an International Math competition. "
                             "The problem has multiple answers, each of them should be a numerical value.")
    assert "\\boxed{multiple answers connected with commas}" in prompt and prompt.endswith(multi.data["question"])
    assert "The answer of The problem should be an expression." in tasks.get("olympiadbench").messages(expression)[0][
        "content"]


def test_omni_math_free_form_answers_and_proof_rows():
    omni = _by_answer("omni-math")
    _grades("omni-math", omni["(1, 1, 1, 3)"], ["\\boxed{(1,1,1,3)}", "\\boxed{(1, 1, 1, 3)}"],
            ["\\boxed{(1,1,3,1)}", "\\boxed{(1,1,1)}"])
    minmax = omni["4122 \\text{ (minimum)}, 6049 \\text{ (maximum)}"]
    _grades("omni-math", minmax, ["\\boxed{4122, 6049}", "\\boxed{4122 \\text{ (minimum)}, 6049 \\text{ (maximum)}}"],
            ["\\boxed{4122}", "\\boxed{4122, 6050}"])
    _grades("omni-math", omni["n - 1"], ["\\boxed{n-1}", "The maximum is $\\boxed{n - 1}$."], ["\\boxed{n}", "\\boxed{n+1}"])
    _grades("omni-math", omni["2, 3"], ["\\boxed{2, 3}"], ["\\boxed{2}"])
    proof = omni[None]  # "prove AE + AP = PD": the "answer" is the claim, restating it proves nothing
    assert proof.data["answer"] == "AE + AP = PD"
    assert tasks.get("omni-math").source.solution(proof) is None
    _grades("omni-math", proof, [], ["\\boxed{AE + AP = PD}", "\\boxed{AE+AP=PD}"])


def test_deepscaler_drops_its_copy_of_an_aime_problem():
    source = tasks.get("deepscaler").source
    raw = source.rows("train", DATA, dedup=False)
    assert any(r["problem"].startswith(AIME_2022_I_1) for r in raw)  # whitespace differs from aime's row 0
    aime0 = next(r for r in tasks.get("aime").source.rows("test", DATA) if r["id"] == 0)
    assert aime0["problem"].startswith(AIME_2022_I_1) and aime0["problem"] not in {r["problem"] for r in raw}
    kept = tasks.get("deepscaler").tasks("train", 100, path=DATA)
    assert kept and not any(t.data["problem"].startswith(AIME_2022_I_1) for t in kept)
    assert not any(t.answer == "n - 1" for t in kept)  # the Omni-MATH copy goes too
    assert {t.answer for t in kept} == {"35", "\\frac{3}{28}"}


def test_deepscaler_grades_bare_answers_and_uses_its_prompt():
    by_answer = {t.answer: t for t in tasks.get("deepscaler").tasks("train", 4, path=DATA)}
    content = tasks.get("deepscaler").messages(by_answer["35"])[-1]["content"]
    assert content.endswith("$. Let's think step by step and output the final answer within \\boxed{}.")
    _grades("deepscaler", by_answer["35"], ["<think>...</think> \\boxed{035}", "\\boxed{35}"], ["\\boxed{53}"])
    _grades("deepscaler", by_answer["\\frac{3}{28}"], ["\\boxed{\\dfrac{3}{28}}", "\\boxed{3/28}"],
            ["\\boxed{\\frac{3}{27}}", "\\boxed{0.1}"])


def test_dapo_collapses_repeated_rows_and_reads_the_answer_line():
    source = tasks.get("dapo-math").source
    raw = source.rows("train", DATA, dedup=False)
    assert [r["extra_info"]["index"][:8] for r in raw] == ["9a9b6eb4", "b426d104", "6ff0b17f"]  # 4th repeats 1st
    assert [source.reference(r) for r in raw] == ["34", "113", "-3"]
    text = source.problem_text(raw[0])
    assert text.startswith("In triangle $ABC$") and text.endswith("find $a + b + c$.")
    by_answer = {t.answer: t for t in tasks.get("dapo-math").tasks("train", 3, path=DATA)}
    first = by_answer["34"]
    assert tasks.get("dapo-math").messages(first) == [{"role": "user", "content": first.data["prompt"][0]["content"]}]
    _grades("dapo-math", first, ["So a+b+c is 34.\nAnswer: 34", "Answer: $34$", "work\n\\boxed{34}"],
            ["Answer: 35", "Answer: 34\nOn reflection,\nAnswer: 43", "Answer: 3\n\\boxed{34}"])
    _grades("dapo-math", by_answer["-3"], ["Answer: -3"], ["Answer: 3"])


def test_geo3k_is_text_only_with_the_diagram_kept():
    spec = tasks.get("geo3k")
    rows = {t.id: t for t in _tasks("geo3k", "train")}
    task = rows["geo3k/2"]
    assert task.data["images"] and task.data["problem"] == "<image>Find x."
    content = spec.messages(task)[-1]["content"]
    assert content.startswith("Find x. You FIRST think") and "<image>" not in content
    assert spec.source.problem_text(task.data) == ("Find x. Choices: 5 \\sqrt { 11 }; 2 \\sqrt { 221 }; "
                                                   "4 \\sqrt { 55 }; 2 \\sqrt { 595 }")
    assert "diagram" in spec.source.description
    _grades("geo3k", task, ["<think>Pythagoras</think> \\boxed{2\\sqrt{221}}", "\\boxed{2 \\sqrt { 221 }}"],
            ["\\boxed{4\\sqrt{55}}", "\\boxed{2\\sqrt{211}}", "\\boxed{B}"])
    test = _by_answer("geo3k")
    _grades("geo3k", test["12 \\pi"], ["\\boxed{12\\pi}"], ["\\boxed{6\\pi}", "\\boxed{12}"])
    _grades("geo3k", test["374.1"], ["\\boxed{374.1}"], ["\\boxed{374}", "\\boxed{305.5}"])


def test_svamp_gsm_hard_and_asdiv_numbers():
    svamp = {t.id: t for t in _tasks("svamp", "train")}
    dvds = svamp["svamp/chal-1"]
    assert dvds.answer == "51" and tasks.get("svamp").messages(dvds)[-1]["content"] == dvds.data["question_concat"]
    _grades("svamp", dvds, ["\\boxed{51}", "The answer is 51.0", "You pay $51. The answer is 51."],
            ["\\boxed{50}", "\\boxed{101}"])
    hard = _by_answer("gsm-hard")
    _grades("gsm-hard", hard["-9867630"], ["The answer is -9,867,630.", "\\boxed{-9867630}"],
            ["\\boxed{9867630}", "\\boxed{-9867631}", "\\boxed{18}"])
    noisy = tasks.get("gsm-hard").source.to_task({"input": "q", "code": "", "target": 3244047.0999999996}, "test")
    assert noisy.answer == "3244047.1"
    _grades("gsm-hard", noisy, ["\\boxed{3244047.1}", "#### 3,244,047.1"], ["\\boxed{3244047}"])
    asdiv = _by_answer("asdiv")
    assert set(asdiv) == {"9", "15", "16", "2.5", "1/2"}  # "9 (apples)": the unit is dropped
    _grades("asdiv", asdiv["9"], ["\\boxed{9}", "The answer is 9 apples."], ["\\boxed{8}", "\\boxed{90}"])
    _grades("asdiv", asdiv["1/2"], ["\\boxed{\\frac{1}{2}}", "\\boxed{0.5}"], ["\\boxed{1/4}"])
    _grades("asdiv", asdiv["2.5"], ["\\boxed{2.5}"], ["\\boxed{2}", "\\boxed{25}"])
    assert tasks.get("asdiv").source.problem_text(asdiv["9"].data) == (
        "Seven red apples and two green apples are in the basket. How many apples are in the basket?")
    assert number_text(51.0) == "51" and number_text(-2.5) == "-2.5" and number_text(1 / 3) == "0.333333333333"


def test_asdiv_loads_the_parquet_conversion_not_the_script():
    hub = tasks.get("asdiv").source.hub
    assert hub.load_args("asdiv", "validation") == (("EleutherAI/asdiv", "asdiv"),
                                                    {"split": "validation", "revision": "refs/pr/1"})


def test_countdown_solver_finds_an_expression_for_every_solvable_row():
    spec = tasks.get("countdown-hub")
    rows = spec.source.rows("train", DATA) + spec.source.rows("test", DATA)
    assert len(rows) == 8
    for row in rows:
        task = spec.source.to_task(row, "train")
        reply = spec.source.solution(task)
        assert reply is not None and spec.is_correct(task, reply), (row, reply)
        value, used = countdown_value(reply.removeprefix("The answer is ").rstrip("."))
        assert value == row["target"] and sorted(used) == sorted(row["nums"])
    assert countdown_solve([1, 1, 1], 100) is None
    assert countdown_value(countdown_solve([3, 3, 8, 8], 24) or "")[0] == 24  # needs 8 / (3 - 8 / 3)
    unsolvable = spec.source.to_task({"target": 1000, "nums": [1, 2, 3]}, "train")
    assert spec.source.solution(unsolvable) is None
