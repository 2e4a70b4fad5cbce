"""Every catalogue benchmark, on rows in its dataset's real layout: the declared schema, the
loader (through ``datasets``), and the grader on right, wrong and malformed replies.

The fixture rows live in tests/data/<task>/<hub split>.jsonl. Each file must have exactly the
columns the dataset's card declares (tracerl/tasks/catalogue/schemas/), each castable to its
declared type: the rows are not the implementer's guess tested against itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracerl import tasks
from tracerl.tasks.benchmarks import DOMAINS
from tracerl.tasks.catalogue import benchmarks
from tracerl.tasks.catalogue.schema import load_files, schema_path
from tracerl.tasks.loaders import local_files

datasets = pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"
BENCHMARKS = {b.name: b for b in benchmarks()}
NAMES = sorted(BENCHMARKS)
# Replies no grader may score: nothing, blank, a refusal, prose with no answer.
MALFORMED = [None, "", "   \n", "I don't know.", "The answer is", "```python\n```", "\\boxed{}"]



def _roles(bench) -> list[tuple[str, str]]:
    return sorted(bench.splits.items())


def test_the_catalogue_has_at_least_fifty_distinct_datasets():
    distinct = {b.hub.id for b in BENCHMARKS.values()}
    assert len(distinct) >= 50, sorted(distinct)
    assert len(distinct) == len(list(Path(schema_path("a/b").parent).glob("*.yaml")))  # no stray schema


@pytest.mark.parametrize("name", NAMES)
def test_each_benchmark_declares_its_dataset(name):
    bench = BENCHMARKS[name]
    declared = bench.declared()
    assert declared.dataset == bench.hub.id and declared.revision and declared.card.startswith("https://")
    assert bench.domain in DOMAINS and bench.grader and bench.description
    sizes = declared.split_sizes(bench.hub.configs)
    for role, split in _roles(bench):
        assert sizes.get(split, 0) > 0, f"{name}: hub split {split!r} ({role}) is not declared: {sizes}"
    for config in bench.hub.configs:
        assert declared.features(config)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_rows_have_exactly_the_declared_columns_and_load_through_datasets(name):
    bench = BENCHMARKS[name]
    features = bench.declared().features(bench.hub.configs[0])
    for role, split in _roles(bench):
        files = local_files(name, split, DATA)
        assert files, f"{name}: no fixture for hub split {split!r} ({role}) under {DATA / name}"
        for file in files:
            raw = datasets.load_dataset("json", data_files=[str(file)], split="train")
            assert sorted(raw.column_names) == sorted(features), f"{file}: columns differ from the card's"
            assert len(load_files([file], features, str(file))) == raw.num_rows >= 3
        loaded = bench.tasks(role, 50, path=DATA)
        assert loaded and len({t.id for t in loaded}) == len(loaded)
        assert all(t.dataset == name and t.split == role for t in loaded)


@pytest.mark.parametrize("name", NAMES)
def test_reference_solutions_score_one_and_malformed_replies_zero(name):
    bench = BENCHMARKS[name]
    spec = tasks.get(name)
    solved = 0
    for role, _split in _roles(bench):
        for task in bench.tasks(role, 50, path=DATA):
            messages = spec.messages(task)
            assert messages[-1]["role"] == "user" and messages[-1]["content"], task.id
            reply = bench.solution(task)
            if reply is not None:
                assert spec.reward(task, reply) == 1.0 and spec.is_correct(task, reply), (task.id, reply)
                solved += 1
            for bad in MALFORMED:
                assert spec.reward(task, bad) == 0.0 and not spec.is_correct(task, bad), (task.id, bad)
    if bench.reference_solutions:
        assert solved, f"{name}: no row has a reference solution to grade"
    else:  # the set publishes none (LiveCodeBench): its grader is checked in its domain's tests
        assert solved == 0


@pytest.mark.parametrize("name", NAMES)
def test_tasks_show_names_the_source_splits_grader_and_a_prompt(name, capsys):
    from tracerl.cli.main import main

    assert main(["tasks", "show", name, "--path", str(DATA)]) == 0
    out = capsys.readouterr().out
    bench = BENCHMARKS[name]
    assert bench.hub.id in out and "grader" in out and "rows)" in out
    assert "sample   the" in out and "[user]" in out


@pytest.mark.parametrize("name", [n for n in NAMES if BENCHMARKS[n].domain != "instruction-following"])
def test_another_rows_right_answer_is_wrong_here(name):
    # a generic wrong answer that looks right: the reference solution of a row with another
    # reference (instruction following is left out: one reply can meet two rows' constraints)
    bench, spec = BENCHMARKS[name], tasks.get(name)
    checked = 0
    for role, _split in _roles(bench):
        found = [t for t in bench.tasks(role, 50, path=DATA) if bench.solution(t) is not None]
        for task in found:
            for other in found:
                if other.answer in (None, "") or str(other.answer) == str(task.answer):
                    continue
                assert spec.reward(task, bench.solution(other)) == 0.0, (task.id, other.id)
                checked += 1
                break
    assert checked or not bench.reference_solutions or len({str(t.answer) for t in bench.tasks(
        _roles(bench)[0][0], 50, path=DATA)}) < 2, f"{name}: no pair of rows with different references"
