"""Each benchmark's reward on right and wrong replies, the search tool, FrozenLake, the registry."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracerl import tasks
from tracerl.tasks.catalogue.math import countdown_value
from tracerl.tasks.catalogue.qa import f1, normalize_answer
from tracerl.tasks.games.frozenlake import parse_moves, play, shortest_path
from tracerl.tasks.search import BM25

DATA = Path(__file__).parent / "data"
SYNTHETIC = ["arithmetic", "calculator", "countdown", "multiturn"]
REAL = ["aime", "countdown-hub", "finqa", "gsm8k", "hendrycks_math", "hotpotqa", "humaneval", "math500", "mbpp"]


def _load(name: str, split: str = "test"):
    return {t.id: t for t in tasks.get(name).tasks(split, 10, path=DATA)}


def test_the_registry_lists_every_task_with_an_importable_default_agent():
    from tracerl.tasks.catalogue import benchmarks

    catalogue = [b.name for b in benchmarks()]
    assert tasks.names() == sorted([*SYNTHETIC, *catalogue, "frozenlake", "sokoban", "wordle", "terminal"])
    assert set(REAL) <= set(catalogue)
    for name in tasks.names():
        spec = tasks.get(name)
        module, fn = spec.default_agent.split(":")
        assert callable(getattr(importlib.import_module(module), fn)), name
        assert spec.description and spec.name == name
    with pytest.raises(tasks.ConfigError, match=r"unknown task 'nope' \(tracerl tasks list shows all \d+\)"):
        tasks.get("nope")
    with pytest.raises(tasks.ConfigError, match="did you mean gsm8k"):
        tasks.get("gsm8")


def test_synthetic_tasks_keep_their_api():
    spec = tasks.get("arithmetic")
    task = spec.tasks("train", 3, seed=0)[0]
    assert spec.reward(task, f"The answer is {task.answer}.") == 1.0
    assert spec.is_correct(task, "The answer is nonsense.") is False
    assert spec.messages(task)[-1]["content"] == task.data["question"]
    multiturn = tasks.get("multiturn")
    assert multiturn.max_turns == 3 and multiturn.tools(multiturn.tasks("train", 1)[0]) is None
    assert [t["function"]["name"] for t in spec.tools(task)] == ["calculator"]  # declared, as tasks show says


def test_tasks_list_cli_shows_every_task():
    from tracerl.cli.main import app

    result = CliRunner().invoke(app, ["tasks", "list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for name in tasks.names():
        assert name in result.output


def test_math_benchmarks_grade_replies():
    gsm = next(t for t in _load("gsm8k").values() if t.answer == "1500")
    spec = tasks.get("gsm8k")
    assert spec.reward(gsm, "He saves 1,500 dollars.\n#### 1,500") == 1.0
    assert spec.reward(gsm, "The answer is \\boxed{\\$1{,}500}.") == 1.0
    assert spec.reward(gsm, "The answer is 1400.") == 0.0 and spec.reward(gsm, None) == 0.0
    m500 = _load("math500")["math500/test/prealgebra/9001.json"]
    assert tasks.get("math500").is_correct(m500, "So we get $\\boxed{0.75}$.")
    hend = {t.answer: t for t in _load("hendrycks_math").values()}
    assert tasks.get("hendrycks_math").is_correct(hend["\\frac{5}{6}"], "\\boxed{\\dfrac56}")
    assert tasks.get("hendrycks_math").is_correct(hend["\\left( -2, 2 \\right)"], "\\boxed{(-2,2)}")
    aime = _load("aime")["aime/9001"]
    assert tasks.get("aime").is_correct(aime, "\\boxed{024}") and not tasks.get("aime").is_correct(aime, "\\boxed{42}")


def test_finqa_accepts_rounded_numbers_and_percentages():
    spec, rows = tasks.get("finqa"), _load("finqa")
    pct = rows["finqa/ACME/2019/page_12.pdf-1"]
    assert "revenue | $ 125 | $ 100" in spec.messages(pct)[-1]["content"]
    assert spec.is_correct(pct, "\\boxed{25\\%}") and spec.is_correct(pct, "\\boxed{0.25}")
    assert spec.is_correct(rows["finqa/ACME/2019/page_14.pdf-3"], "The answer is 0.6400.")
    assert not spec.is_correct(pct, "\\boxed{20%}")


def test_countdown_hub_needs_every_number_exactly_once():
    spec = tasks.get("countdown-hub")
    task = next(t for t in spec.tasks("train", 7, path=DATA) if t.data["target"] == 24)
    assert task.data["nums"] == [4, 6, 1]
    assert spec.reward(task, "The answer is 4 * 6 * 1.") == 1.0
    assert spec.reward(task, "The answer is (4 * 6) / 1 = 24") == 1.0
    assert spec.reward(task, "The answer is 4 * 6.") == 0.0  # 1 unused
    assert spec.reward(task, "The answer is 4 * 6 * 1 * 1.") == 0.0  # 1 twice
    assert countdown_value("__import__('os')") is None and countdown_value("2 ** 10") is None
    assert countdown_value("7 / 0") is None and countdown_value("8 / (3 - 1)")[0] == 4


def test_code_benchmarks_run_replies_against_the_tests():
    he = _load("humaneval")["humaneval/HumanEval/9001"]
    spec = tasks.get("humaneval")
    whole = "Here you go:\n```python\ndef total(numbers):\n    return sum(numbers)\n```"
    assert spec.reward(he, whole) == 1.0 and spec.is_correct(he, whole)
    assert spec.reward(he, "```python\n    return sum(numbers)\n```") == 1.0  # a body completes the prompt
    wrong = spec.source.grade(he, "```python\ndef total(numbers):\n    return 0\n```")
    assert not wrong.ok and wrong.reason.startswith("error: AssertionError")
    mb = _load("mbpp")["mbpp/9002"]
    assert "assert count_vowels('hello') == 2" in tasks.get("mbpp").messages(mb)[-1]["content"]
    assert tasks.get("mbpp").reward(mb, f"```python\n{mb.answer}\n```") == 1.0
    assert tasks.get("mbpp").reward(mb, "```python\ndef count_vowels(s):\n    return 2\n```") == 0.0


def test_hotpotqa_search_tool_and_exact_match():
    spec = tasks.get("hotpotqa")
    task = next(t for t in _load("hotpotqa").values() if t.answer == "Mount Tarn")
    assert spec.tools(task)[0]["function"]["name"] == "search"
    hits = json.loads(spec.call_tool(task, "search", {"query": "Which river feeds Lake Verden?"}))
    assert len(hits) == 2 and hits[0].startswith("Lake Verden:")  # only passages that match
    assert spec.call_tool(task, "search", {"query": "zzz"}) == "no passage matches"
    assert spec.call_tool(task, "browse", {}).startswith("error")
    assert spec.reward(task, "It rises on the mountain. The answer is mount tarn.") == 1.0
    assert spec.reward(task, "The answer is the Grey Range.") == 0.0
    assert normalize_answer("The  Mount-Tarn!") == "mounttarn" and f1("Mount Tarn peak", "Mount Tarn") == 0.8


def test_bm25_ranks_the_matching_passage_first():
    index = BM25(["the cat sat on the mat", "dogs chase cats", "quantum field theory"])
    assert index.search("quantum theory", k=2)[0][1] == 2
    assert index.search("cat mat")[0][1] == 0 and index.search("unrelated words") == []


def test_frozenlake_is_deterministic_solvable_and_split_disjoint():
    spec = tasks.get("frozenlake")
    train, again = spec.tasks("train", 20, seed=3), spec.tasks("train", 20, seed=3)
    assert [t.data for t in train] == [t.data for t in again]
    test = spec.tasks("test", 20, seed=3)
    assert not {"/".join(t.data["grid"]) for t in train} & {"/".join(t.data["grid"]) for t in test}
    for task in train:
        solution = " ".join(f"Move: {m}" for m in task.answer)
        assert shortest_path(task.data["grid"]) == task.answer
        assert spec.reward(task, solution) == 1.0


def test_frozenlake_replays_moves_from_the_text():
    grid = ["SFFF", "FHFH", "FFFH", "HFFG"]
    task = tasks.get("frozenlake").tasks("train", 1)[0].model_copy(update={"data": {"grid": grid, "size": 4}})
    game = tasks.get("frozenlake").source
    assert parse_moves("I think Move: Right.\nthen **Move:** down") == ["right", "down"]
    assert play(grid, ["right", "down"]) == ("hole", (1, 1), 2)
    assert play(grid, ["up", "left"]) == ("playing", (0, 0), 2)  # walls keep you in place
    win = "Move: down\nMove: down\nMove: right\nMove: right\nMove: down\nMove: right"
    assert game.reward(task, win) == 1.0 and game.reward(task, win + "\nMove: up") == 1.0
    assert game.reward(task, "Move: right\nMove: down") == 0.0 and game.reward(task, "no moves") == 0.0
    observation, done = game.observe(task, "Move: down")
    assert not done and "You moved down." in observation and "P F H F" not in observation
    assert game.observe(task, win) == ("You reached the goal!", True)
    assert game.observe(task, "Move: right Move: down")[1] is True
