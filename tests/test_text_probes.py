"""The text probes (tracerl.tasks.graders.probes.TEXT_PROBES) against every text-domain benchmark
of the catalogue, on its fixture rows: each applicable probe scores 0, while the row's reference
solution scores 1 (so a probe cannot pass by breaking the grader). Another row's right answer is
tested in tests/test_catalogue.py (test_another_rows_right_answer_is_wrong_here)."""

from __future__ import annotations

import json

import pytest
from test_catalogue import BENCHMARKS, DATA, _roles

from tracerl import tasks
from tracerl.tasks.graders.probes import TEXT_PROBES

TEXT_DOMAINS = {d for probe in TEXT_PROBES for d in probe.domains}
TEXT_NAMES = sorted(n for n, b in BENCHMARKS.items() if b.domain in TEXT_DOMAINS)


def test_every_text_domain_of_the_catalogue_has_probes():
    domains = {b.domain for b in BENCHMARKS.values()} - {"code"}
    assert domains <= TEXT_DOMAINS, sorted(domains - TEXT_DOMAINS)
    assert len({p.name for p in TEXT_PROBES}) == len(TEXT_PROBES)


@pytest.mark.parametrize("name", TEXT_NAMES)
def test_every_probe_scores_zero_and_the_reference_one(name):
    bench, spec = BENCHMARKS[name], tasks.get(name)
    tried: set[str] = set()
    for role, _split in _roles(bench):
        for task in bench.tasks(role, 50, path=DATA):
            solution = bench.solution(task)
            if solution is not None:
                assert spec.reward(task, solution) == 1.0, (task.id, solution)
            for probe in TEXT_PROBES:
                reply = probe.reply(bench, task) if bench.domain in probe.domains else None
                if reply is None:
                    continue
                assert spec.reward(task, reply) == 0.0, (probe.name, task.id, reply[:300])
                tried.add(probe.name)
    if bench.domain == "instruction-following":
        assert tried == {"empty"}
    else:  # the hedges need a reference solution; every set here has one on some row
        assert {"echo-row", "empty"} <= tried and any(n.startswith(("enumerate", "calls")) for n in tried), tried


@pytest.mark.parametrize("name", ["hendrycks_math", "gsm8k", "dapo-math"])
def test_the_row_echoed_holds_its_answer_and_still_scores_zero(name):
    # the row's JSON holds the solution ("#### 72", "\\boxed{5}", "ground_truth"): a grader that
    # finds the answer anywhere, or reads a JSON-escaped box as a box, would score it 1
    bench, spec = BENCHMARKS[name], tasks.get(name)
    for task in bench.tasks(_roles(bench)[0][0], 50, path=DATA):
        row = json.dumps(task.data)
        assert str(task.answer) in row.replace("\\\\", "\\")  # JSON doubles each backslash
        assert spec.reward(task, row) == 0.0 and spec.reward(task, json.dumps(task.data, indent=2)) == 0.0


def test_the_reply_states_the_right_answer_once_in_two_forms_and_scores_one():
    # the rule is about different answers: one answer stated twice is one answer
    gsm8k, mmlu, hotpot = (BENCHMARKS[n] for n in ("gsm8k", "mmlu", "hotpotqa"))
    task = gsm8k.tasks("test", 1, path=DATA)[0]
    assert gsm8k.reward(task, f"The answer is {task.answer}.\n\\boxed{{{task.answer}}}") == 1.0
    assert gsm8k.reward(task, f"<think>maybe \\boxed{{{int(task.answer) + 1}}}</think> \\boxed{{{task.answer}}}") == 1.0
    task = mmlu.tasks("test", 1, path=DATA)[0]
    assert mmlu.reward(task, f"Answer: {task.answer}\n\nThe answer is ({task.answer}).") == 1.0
    task = hotpot.tasks("test", 1, path=DATA)[0]
    answer = task.answer if isinstance(task.answer, str) else task.answer[0]
    assert hotpot.reward(task, f"<answer>{answer}</answer> The answer is {answer}.") == 1.0
    assert hotpot.reward(task, f"<answer>{answer}</answer> <answer>not {answer}</answer>") == 0.0
