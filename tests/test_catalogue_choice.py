"""The multiple-choice catalogue (tracerl/tasks/catalogue/choice.py): the letter grader, each set's
options and correct letter on its fixture rows, the seeded shuffles, and the dedup text."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from tracerl.core.types import Task
from tracerl.tasks.catalogue import choice
from tracerl.tasks.catalogue.choice import LETTERS, final_letter
from tracerl.tasks.dedup import Index, Problem, normalize

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"
BENCHES = {cls.name: cls() for cls in choice.BENCHMARKS}
SHUFFLED = ("gpqa-diamond", "sciq", "truthfulqa")



def _tasks(name: str) -> list[Task]:
    bench = BENCHES[name]
    return [t for role in sorted(bench.splits) for t in bench.tasks(role, 50, path=DATA)]


def _rows(name: str, split: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name / f"{split}.jsonl").read_text().splitlines()]


def _task(name: str, row: dict) -> Task:
    return BENCHES[name].to_task(row, "test")


# ----------------------------------------------------------------------------- the grader


@pytest.mark.parametrize("reply", [
    "The answer is (C).", "so the answer is C", "Answer: C", "ANSWER: (C)", "\\boxed{C}",
    "The final answer is $\\boxed{\\text{C}}$.", "**Answer:** $\\boxed{C}$", "Hence **C**",
    "Therefore **(C)**.", "**The answer is (C).**", "The correct answer is option C.",
    "<think>The answer is (A)... no, wait.</think> The answer is (C).",  # reasoning is not an answer
    "The answer is (C), I believe.", "The answer is (C).\n\nI hope this helps.",
    "Answer: C\nBecause oxygen is needed.", "The answer is (C) (C)",
])
def test_final_letter_reads_the_forms_models_write(reply):
    assert final_letter(reply) == "C"


@pytest.mark.parametrize("reply", [
    None, "", "C", "I think (C)", "The answer is", "\\boxed{}", "Answer: CD", "The answer is Alanine",
    "the answer is a mitochondrion", "the answer is (c)",
    "The answer is (A) or (B).", "Answer: A, C", "Answer: A or C", "The answer is A/B",
    "\\boxed{A} or \\boxed{C}", "**A** or **C**", "The answer is (C). (D) is also defensible.",
    "The answer is (C) and not (A)",
    # several different answers, however they are spaced: 0, whichever comes last
    "The answer is (A)... no, wait. The answer is (C).",
    "The answer is A. The answer is B. The answer is C. The answer is D.",
    "Answer: A\n\nAnswer: C", "\\boxed{A}\n\nLet me check again.\n\n\\boxed{C}",
])
def test_final_letter_refuses_no_answer_and_two_letters(reply):
    assert final_letter(reply) is None


@pytest.mark.parametrize(("reply", "letter"), [
    ("Answer:" + " " * 50_000, None), ("**" + " " * 50_000 + "A", None), ("\\boxed{ " + " " * 50_000, None),
    ("** (" + " " * 50_000, None), ("Answer: C or" + " " * 50_000, "C"), ("Answer: " + "$" * 50_000 + "C", "C"),
])
def test_final_letter_stays_linear_on_long_runs(reply, letter):
    started = time.monotonic()
    assert final_letter(reply) == letter
    assert time.monotonic() - started < 2.0  # overlapping \\s* patterns took minutes here


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_each_set_scores_its_letter_in_every_form_and_nothing_else(name):
    bench = BENCHES[name]
    tasks = _tasks(name)
    assert len(tasks) >= 3
    for task in tasks:
        options, gold = bench.presented(task.data)
        right = task.answer
        assert right == LETTERS[gold] and len(options) >= 2
        for reply in (f"The answer is ({right}).", f"Answer: {right}", f"\\boxed{{{right}}}",
                      f"Let me think.\n\n**{right}**", bench.solution(task)):
            assert bench.reward(task, reply) == 1.0, (task.id, reply)
        for wrong in LETTERS[:len(options)].replace(right, ""):
            assert not bench.is_correct(task, f"The answer is ({wrong})."), (task.id, wrong)
            assert not bench.is_correct(task, f"The answer is ({right}) or ({wrong})."), (task.id, wrong)
            assert not bench.is_correct(task, f"The answer is ({right}). Wait, the answer is ({wrong}).")
            assert not bench.is_correct(task, f"The answer is ({wrong}). Wait, the answer is ({right}).")
            assert bench.is_correct(task, f"<think>({wrong})? No.</think>The answer is ({right}).")
        outside = LETTERS[len(options)]
        assert not bench.is_correct(task, f"The answer is ({right}). No: the answer is ({outside}).")
        assert not bench.is_correct(task, options[gold])  # the option's text is not a letter answer


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_the_prompt_letters_the_options_one_per_line(name):
    bench = BENCHES[name]
    for task in _tasks(name):
        system, user = bench.messages(task)
        assert system["role"] == "system" and "The answer is (X)." in system["content"]
        options, _gold = bench.presented(task.data)
        lines = [line for line in user["content"].splitlines() if line.startswith("(")]
        assert lines == [f"({LETTERS[i]}) {text}" for i, text in enumerate(options)], task.id
        assert bench.question(task.data) in user["content"]


# ----------------------------------------------------------------------------- each set's layout


def test_arc_digit_labels_and_three_to_five_options():
    tasks = {t.id.split("/")[1]: t for t in _tasks("arc-challenge")}
    regents = tasks["NYSEDREGENTS_2013_8_21"]  # labels "1".."4", answerKey "2"
    assert regents.answer == "B" and "(B) precipitation" in BENCHES["arc-challenge"].messages(regents)[1]["content"]
    assert tasks["Mercury_7000002"].answer == "B" and "(E) Ice cracks." in \
        BENCHES["arc-challenge"].messages(tasks["Mercury_7000002"])[1]["content"]
    three = tasks["Mercury_7000003"]
    assert BENCHES["arc-challenge"].is_correct(three, "The answer is (B).")
    assert not BENCHES["arc-challenge"].is_correct(three, "The answer is (D).")


def test_openbookqa_strips_the_answer_key_and_an_unanswered_row_scores_nothing():
    row = dict(_rows("openbookqa", "test")[1], answerKey=" B ")
    assert BENCHES["openbookqa"].reference(row) == "B"
    unanswered = dict(_rows("commonsenseqa", "validation")[0], answerKey="")  # the hub's test split
    task = _task("commonsenseqa", unanswered)
    assert task.answer is None and BENCHES["commonsenseqa"].solution(task) is None
    assert not any(BENCHES["commonsenseqa"].is_correct(task, f"The answer is ({x}).") for x in "ABCDE")


def test_commonsenseqa_maps_the_key_to_its_letter():
    rows = _rows("commonsenseqa", "validation")
    assert [BENCHES["commonsenseqa"].reference(r) for r in rows] == [r["answerKey"] for r in rows]


def test_mmlu_letter_from_the_class_label_and_subject_lead():
    bench = BENCHES["mmlu"]
    test = _rows("mmlu", "test")
    assert [bench.reference(r) for r in test] == ["B", "C", "D", "B"]
    assert bench.lead(test[0]) == "The following is a multiple choice question about abstract algebra."
    assert bench.lead(_rows("mmlu", "auxiliary_train")[0]) == ""  # aux rows have subject ""


def test_mmlu_pro_letters_follow_the_option_count_and_drop_na_padding():
    bench = BENCHES["mmlu-pro"]
    nine = _task("mmlu-pro", _rows("mmlu-pro", "test")[0])  # question_id 70: nine options, answer I
    assert nine.answer == "I" and bench.is_correct(nine, "The answer is (I).")
    assert not bench.is_correct(nine, "The answer is (J).")
    padded = dict(_rows("mmlu-pro", "test")[3])  # five options, answer C
    padded["options"] = ["N/A", *padded["options"], "N/A"]
    padded["answer_index"] = 3
    padded["answer"] = "D"
    task = _task("mmlu-pro", padded)
    assert bench.presented(task.data)[0] == _rows("mmlu-pro", "test")[3]["options"]
    assert task.answer == "C" and "N/A" not in bench.messages(task)[1]["content"]


def test_hellaswag_context_is_cleaned_and_label_is_an_index_string():
    bench = BENCHES["hellaswag"]
    rows = _rows("hellaswag", "train")
    assert bench.question(rows[0]).startswith("Removing ice from car: Then, the man writes")
    assert bench.question(rows[0]).endswith("smiles. Then")  # ctx_b capitalised, as lm-eval does
    wikihow = bench.messages(_task("hellaswag", rows[2]))[1]["content"]
    assert "[" not in wikihow and "How to repot a houseplant" in wikihow
    assert [bench.reference(r) for r in _rows("hellaswag", "validation")] == \
        [LETTERS[int(r["label"])] for r in _rows("hellaswag", "validation")]


def test_winogrande_option1_is_a_and_option2_is_b():
    bench = BENCHES["winogrande"]
    rows = _rows("winogrande", "validation")
    assert [bench.reference(r) for r in rows] == ["A", "B", "B"]
    assert "(A) Sarah\n(B) Maria" in bench.messages(_task("winogrande", rows[0]))[1]["content"]


def test_sciq_shows_its_support_before_the_question():
    bench = BENCHES["sciq"]
    with_support, without = _rows("sciq", "test")[0], _rows("sciq", "test")[1]
    text = bench.messages(_task("sciq", with_support))[1]["content"]
    assert text.index("Oxidants and Reductants") < text.index("are called what?")
    assert bench.messages(_task("sciq", without))[1]["content"].startswith("What force pulls")


# ----------------------------------------------------------------------------- shuffles


def _correct_text(name: str, row: dict) -> str:
    if name == "sciq":
        return row["correct_answer"]
    if name == "truthfulqa":
        return row["mc1_targets"]["choices"][0]
    return row["Correct Answer"].strip()


@pytest.mark.parametrize("name", SHUFFLED)
def test_leaky_orders_are_shuffled_per_row_and_stable(name):
    bench, again = BENCHES[name], type(BENCHES[name])()
    split = bench.splits["test"]
    rows = _rows(name, split) + (_rows(name, "train") if name == "sciq" else [])
    leaked = []
    for row in rows:
        options, gold = bench.presented(row)
        assert sorted(options) == sorted(bench.options(row))
        assert options[gold] == _correct_text(name, row)
        assert again.presented(json.loads(json.dumps(row))) == (options, gold)  # another instance, a copy
        leaked.append(gold == bench.gold(row))
    assert not all(leaked), f"{name}: the correct option stayed where the dataset puts it on every row"
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    assert {bench.row_id(r): bench.presented(r) for r in shuffled} == \
        {bench.row_id(r): bench.presented(r) for r in rows}


def test_gpqa_strips_the_trailing_newline_of_an_answer():
    row = _rows("gpqa-diamond", "train")[1]
    assert row["Incorrect Answer 3"].endswith("\n")
    assert "0.9" in BENCHES["gpqa-diamond"].presented(row)[0]


# ----------------------------------------------------------------------------- dedup


def test_an_arc_test_question_in_mmlu_auxiliary_train_layout_normalises_equal():
    """auxiliary_train holds ARC rows as {question, subject "", choices, answer}: were an ARC-Challenge
    *test* question among them, the dedup must see the same text in both layouts."""
    arc, mmlu = BENCHES["arc-challenge"], BENCHES["mmlu"]
    for row in _rows("arc-challenge", "test"):
        as_aux = {"question": row["question"], "subject": "", "choices": row["choices"]["text"],
                  "answer": arc.gold(row)}
        text = normalize(mmlu.problem_text(as_aux))
        assert text == normalize(arc.problem_text(row))
        assert all(opt.lower().rstrip(".") in text for opt in row["choices"]["text"])  # options are part of it
        found = Index([Problem("arc-challenge", row["id"], normalize(arc.problem_text(row)))]).find(text)
        assert [p.row_id for p in found] == [row["id"]]
    other = {"question": row["question"], "subject": "", "choices": ["w", "x", "y", "z"], "answer": 0}
    assert normalize(mmlu.problem_text(other)) != normalize(arc.problem_text(row))
