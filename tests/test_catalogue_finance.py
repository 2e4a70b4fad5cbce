"""The finance benchmarks' graders and prompts on their fixture rows (tests/data/<task>/): right
answers in the forms the data uses, near misses, malformed replies, and the row reshaping
(TAT-QA one task per question, ConvFinQA's earlier answers, FinanceBench's numeric rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracerl import tasks
from tracerl.tasks.catalogue.finance_answers import (
    final_answer,
    html_rows,
    parse_number,
    render_html_tables,
)

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"



def _tasks(name: str, role: str = "test") -> dict:
    return {t.id: t for t in tasks.get(name).source.tasks(role, 50, path=DATA)}


def _grades(name: str, task, replies: list[str]) -> list[bool]:
    spec = tasks.get(name)
    return [spec.is_correct(task, reply) for reply in replies]


# ---------------------------------------------------------------------------- shared reading


def test_numbers_are_read_with_their_sign_currency_and_scale():
    assert parse_number("-$2,383 thousand") == (-2383.0, "thousand")
    assert parse_number("(16)") == (-16.0, "") and parse_number("$ (5,527)") == (-5527.0, "")
    assert parse_number("21.3%") == (21.3, "percent") and parse_number("\u22120.5") == (-0.5, "")
    assert parse_number(-2383) == (-2383.0, "") and parse_number(True) is None
    for text in ("1,2", "12 and 13", "about 5", "2019, 2018", "--5", "(5", "", None):
        assert parse_number(text) is None, text


def test_the_final_answer_loses_its_latex():
    assert final_answer("so \\boxed{-2.87\\%}") == "-2.87%"
    assert final_answer("\\boxed{\\$1{,}577 \\text{ million}}") == "$1,577  million"
    assert final_answer("The answer is $75$.") == "75"
    assert final_answer("\\boxed{}") is None and final_answer("no answer here") is None


def test_html_tables_become_pipe_rows_with_spanned_headers_repeated():
    html = ("<table><tr><td></td><td colspan=\"2\">2007</td></tr>"
            "<tr><td>Debt</td><td>$1 &amp; 2</td><td>3</td></tr></table>")
    assert html_rows(html) == [["", "2007", "2007"], ["Debt", "$1 & 2", "3"]]
    assert render_html_tables(f"before {html} after") == "before\n | 2007 | 2007\nDebt | $1 & 2 | 3\nafter"


# ---------------------------------------------------------------------------- TAT-QA


def test_tatqa_makes_one_task_per_question_keeping_the_context():
    bench = tasks.get("tatqa").source
    rows = bench.hub_rows("validation", DATA)
    assert len(rows) == 18 and len({bench.row_id(r) for r in rows}) == 18
    assert all(r["qa"] in r["questions"] and r["table"]["table"] for r in rows)
    assert len(bench.hub_rows("train", DATA)) == 8


def test_tatqa_prompt_shows_the_table_as_pipes_then_the_text():
    task = _tasks("tatqa")["tatqa/de3e8b87-a5cd-42e9-9fd1-ea0e1381412e"]
    user = tasks.get("tatqa").messages(task)[-1]["content"]
    assert "Finished goods | $9,447 | $10,995\nWork-in-process | 14,954 | 12,129" in user
    assert user.index("NOTE 4") > user.index("Inventories, net") and user.endswith(
        "Question: What was the change in the amount of Raw Materials between 2018 and 2019?")


def test_tatqa_numbers_need_their_scale():
    task = _tasks("tatqa")["tatqa/de3e8b87-a5cd-42e9-9fd1-ea0e1381412e"]  # -2383, thousand
    right = ["\\boxed{-2,383 thousand}", "The answer is -2383 thousand.", "\\boxed{-\\$2.383 million}",
             "\\boxed{(2,383) thousand}"]
    wrong = ["\\boxed{-2383}", "\\boxed{2,383 thousand}", "\\boxed{-2,380 thousand}", "\\boxed{-2.38 million}",
             "\\boxed{-2383 thousand and more}"]
    assert _grades("tatqa", task, right) == [True] * 4
    assert _grades("tatqa", task, wrong) == [False] * 5


def test_tatqa_percentages_take_a_percent_sign_or_the_fraction():
    task = _tasks("tatqa")["tatqa/398246d7-5500-4560-8a8f-220a782b05e5"]  # -2.87, percent
    assert _grades("tatqa", task, ["\\boxed{-2.87\\%}", "\\boxed{-0.0287}", "\\boxed{-2.8746%}"]) == [True] * 3
    assert _grades("tatqa", task, ["\\boxed{-2.87}", "\\boxed{-2.9%}", "\\boxed{2.87%}"]) == [False] * 3


def test_tatqa_counts_and_number_spans():
    count = _tasks("tatqa")["tatqa/567c418e-8e2c-489b-bba4-5b7985ee1590"]  # "1" (an int once loaded)
    assert count.answer == 1
    assert _grades("tatqa", count, ["\\boxed{1}", "\\boxed{2}", "\\boxed{one}"]) == [True, False, False]
    span = _tasks("tatqa")["tatqa/1b8427b0-516c-4fea-b142-3e419a447f89"]  # ["9,447"], thousand
    assert _grades("tatqa", span, ["\\boxed{9,447 thousand}", "\\boxed{\\$9.447 million}"]) == [True, True]
    assert _grades("tatqa", span, ["\\boxed{9,447}", "\\boxed{10,995 thousand}"]) == [False, False]
    own = _tasks("tatqa")["tatqa/c8600876-476c-4d6c-ab0e-d14bc6d76dff"]  # ["$75 million"], no scale
    assert _grades("tatqa", own, ["\\boxed{\\$75 million}", "\\boxed{75,000,000}", "\\boxed{75}"]) == [True, True, False]


def test_tatqa_text_and_multi_span_answers():
    apple = _tasks("tatqa")["tatqa/3109048c-86f4-4be4-85b4-39e43d24a502"]
    assert _grades("tatqa", apple, ["\\boxed{apple}", "The answer is Apple.", "\\boxed{Apple Inc.}"]) == [True, True, False]
    years = _tasks("tatqa")["tatqa/8d1b7f0f-8b57-4909-8436-2192011bf93e"]  # ["2019", "2018"]
    assert _grades("tatqa", years, ["\\boxed{2018; 2019}", "The answer is 2019 and 2018", "\\boxed{2019, 2018}"]) \
        == [True] * 3
    assert _grades("tatqa", years, ["\\boxed{2019}", "\\boxed{2019; 2018; 2017}", "\\boxed{2019; 2019}"]) \
        == [False] * 3
    parts = _tasks("tatqa", "train")["tatqa/6f1c0a2b-2222-4d3e-8f40-bbbbbbbbbbb1"]
    assert parts.answer == ["Land", "Buildings", "Machinery and equipment"]
    assert _grades("tatqa", parts, ["\\boxed{Land; Buildings; Machinery and equipment}",
                                    "\\boxed{Machinery and equipment, land, buildings}",
                                    "\\boxed{Land; Buildings}", "\\boxed{Land; Buildings; Machinery}"]) \
        == [True, True, False, False]


def test_tatqa_several_numbers_share_a_closing_scale():
    bench = tasks.get("tatqa").source
    row = bench.hub_rows("validation", DATA)[0]
    qa = {**row["qa"], "uid": "both", "answer": ["9,447", "10,995"], "answer_type": "multi-span"}  # thousand
    task = bench.to_task({**row, "qa": qa}, "test")
    assert tasks.get("tatqa").is_correct(task, bench.solution(task))
    assert _grades("tatqa", task, ["\\boxed{10,995 thousand; 9,447 thousand}", "\\boxed{9,447 and 10,995 thousand}"]) \
        == [True, True]
    assert _grades("tatqa", task, ["\\boxed{9,447; 10,995}", "\\boxed{9,447 thousand}"]) == [False, False]


# ---------------------------------------------------------------------------- ConvFinQA


def test_convfinqa_fills_the_earlier_answers_and_renders_the_table():
    found = _tasks("convfinqa")
    last = found["convfinqa/convfinqa3"]
    assert last.data["prior_answers"] == ["5829.0", "5735.0", "94.0"] and found["convfinqa/convfinqa0"].data[
        "prior_answers"] == []
    user = tasks.get("convfinqa").messages(last)[-1]["content"]
    assert "q2: what was, then, the change over the year? 94.0" in user and "{answer" not in user
    assert "<table" not in user and "\n2 | 2015 net revenue | $ 5735\n" in user
    assert user.startswith("Context: acme corporation") and user.endswith(
        "Question: and how much does this change represent in relation to the 2015 net revenue?")
    assert "interconnected" not in user  # FinBen's instruction gives way to the system prompt


def test_convfinqa_train_rows_keep_their_gold_history():
    task = _tasks("convfinqa", "train")["convfinqa/convfinqa2"]
    user = tasks.get("convfinqa").messages(task)[-1]["content"]
    assert "q1: and what was it in that same period in 2001? 18.85" in user


def test_convfinqa_reads_percentages_as_fractions():
    task = _tasks("convfinqa")["convfinqa/convfinqa3"]  # 0.01639 (94 / 5735)
    right = ["\\boxed{0.01639}", "\\boxed{1.64\\%}", "\\boxed{1.639%}", "\\boxed{0.0164}", "\\boxed{1.64}"]
    wrong = ["\\boxed{1.6%}", "\\boxed{2%}", "\\boxed{1.7%}", "\\boxed{0.0170}", "\\boxed{-1.64%}"]
    assert _grades("convfinqa", task, right) == [True] * 5
    assert _grades("convfinqa", task, wrong) == [False] * 5


def test_convfinqa_whole_numbers_match_without_the_float_suffix():
    task = _tasks("convfinqa")["convfinqa/convfinqa0"]  # "5829.0"
    assert _grades("convfinqa", task, ["\\boxed{5829}", "\\boxed{\\$5,829 million}", "The answer is 5829.0"]) \
        == [True] * 3
    assert _grades("convfinqa", task, ["\\boxed{58.29}", "\\boxed{5735}", "\\boxed{5829 or 5735}"]) == [False] * 3


# ---------------------------------------------------------------------------- MultiHiertt


def test_multihiertt_inlines_each_table_at_its_marker():
    task = _tasks("multihiertt", "train")["multihiertt/0b7c2e9a41d84f6b9e3a5c1d2f4e6a80"]
    user = tasks.get("multihiertt").messages(task)[-1]["content"]
    assert "## Table" not in user and "<td>" not in user
    assert "Table 0:\n | December 31 | \n(Dollars in millions) | 2013 | 2012\n" in user
    assert user.index("Table 0:") < user.index("Nonperforming loans declined") < user.index("Table 1:")


def test_multihiertt_numbers_within_a_tenth_of_a_percent():
    task = _tasks("multihiertt", "train")["multihiertt/0b7c2e9a41d84f6b9e3a5c1d2f4e6a80"]  # -18.35866, "(in %)"
    assert _grades("multihiertt", task, ["\\boxed{-18.35866}", "\\boxed{-18.36\\%}", "\\boxed{-0.1836}"]) == [True] * 3
    assert _grades("multihiertt", task, ["\\boxed{-18.4}", "\\boxed{18.36}", "\\boxed{-18.3}"]) == [False] * 3
    ratio = _tasks("multihiertt")["multihiertt/b4d0f3a25c6e4f8a9b0c1d2e3f4a5b6c"]  # 0.12003
    assert _grades("multihiertt", ratio, ["\\boxed{0.12}", "\\boxed{12.0%}", "\\boxed{0.1205}"]) == [True, True, False]


def test_multihiertt_spans_by_exact_match():
    task = _tasks("multihiertt")["multihiertt/c5e1a4b36d7f4a9b0c1d2e3f4a5b6c7d"]  # "Atlanta"
    assert _grades("multihiertt", task, ["\\boxed{Atlanta}", "The answer is atlanta."]) == [True, True]
    assert _grades("multihiertt", task, ["\\boxed{Dallas}", "\\boxed{Atlanta, Georgia}"]) == [False, False]


# ---------------------------------------------------------------------------- FinanceBench


def test_financebench_keeps_only_the_rows_with_a_numeric_answer():
    found = _tasks("financebench")
    assert sorted(found) == ["financebench/financebench_id_02987", "financebench/financebench_id_03029",
                             "financebench/financebench_id_07966"]
    with pytest.raises(tasks.ConfigError, match="evaluation set"):
        tasks.get("financebench").source.tasks("train", 1, path=DATA)


def test_financebench_prompt_is_the_papers_oracle_prompt():
    task = _tasks("financebench")["financebench/financebench_id_03029"]
    user = tasks.get("financebench").messages(task)[-1]["content"]
    assert user.startswith("Answer this question: What is the FY2018 capital expenditure amount")
    assert "[START OF FILING]" in user and user.endswith("[END OF FILING]") and "Purchases of property" in user


def test_financebench_numbers_within_a_percent_or_at_the_reference_precision():
    capex = _tasks("financebench")["financebench/financebench_id_03029"]  # "$1577.00"
    assert _grades("financebench", capex, ["\\boxed{\\$1,577}", "\\boxed{1577.00}", "\\boxed{1,570}"]) == [True] * 3
    assert _grades("financebench", capex, ["\\boxed{1,500}", "\\boxed{-1577}", "\\boxed{15.77}"]) == [False] * 3
    pct = _tasks("financebench")["financebench/financebench_id_07966"]  # "1.9%"
    assert _grades("financebench", pct, ["\\boxed{1.9\\%}", "\\boxed{1.9}", "\\boxed{0.019}", "\\boxed{1.94%}"]) \
        == [True] * 4
    assert _grades("financebench", pct, ["\\boxed{2.0%}", "\\boxed{1.8%}"]) == [False, False]
