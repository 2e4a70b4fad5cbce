"""The code benchmarks' graders on right, near-miss and malformed replies, run in the sandbox
on the fixture rows (tests/data/<task>/): HumanEval+, MBPP+, LiveCodeBench, APPS,
CodeContests, DeepCoder and KodCode, and the harness they share (tracerl/tasks/graders/)."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from decimal import Decimal
from pathlib import Path

import pytest

from tracerl.core.types import Task
from tracerl.tasks.catalogue import benchmarks
from tracerl.tasks.graders import code as code_grader
from tracerl.tasks.graders.code_harness import same_output

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"
BENCH = {b.name: b for b in benchmarks() if b.domain == "code"}



def _tasks(name: str, key: str, role: str = "test") -> dict[str, Task]:
    return {str(t.data[key]): t for t in BENCH[name].tasks(role, 50, path=DATA)}


def _py(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```"


def _score(name: str, task: Task, code: str) -> float:
    return BENCH[name].reward(task, _py(code))


# -- HumanEval+ and MBPP+ ----------------------------------------------------------------------

def test_humaneval_plus_runs_the_plus_inputs_with_float_tolerance():
    tasks = _tasks("humaneval-plus", "task_id")
    truncate, add = tasks["HumanEval/2"], tasks["HumanEval/53"]
    assert _score("humaneval-plus", truncate, "def truncate_number(number: float) -> float:\n    return number % 1.0") == 1.0
    assert _score("humaneval-plus", truncate, "    return number - int(number)\n") == 1.0  # a body completing the prompt
    assert _score("humaneval-plus", truncate, "def truncate_number(number):\n    return round(number % 1.0, 2)") == 0.0
    # right on small numbers, wrong on the plus set's 10**20
    assert _score("humaneval-plus", add, "def add(x, y):\n    return x + y if abs(y) < 10**9 else 0") == 0.0
    assert _score("humaneval-plus", add, "def add(x, y):\n    return x + y") == 1.0
    prompt = BENCH["humaneval-plus"].messages(add)[-1]["content"]
    assert prompt.startswith("Please provide a self-contained Python script") and "def add(x: int, y: int)" in prompt


def test_mbpp_plus_catches_what_the_base_asserts_miss():
    tasks = _tasks("mbpp-plus", "task_id")
    prime = tasks["3"]
    sloppy = "def is_not_prime(n):\n    for i in range(2, int(n**0.5) + 1):\n        if n % i == 0:\n            return True\n    return False"
    base = code_grader.run_tests(code_grader.mbpp_program({"test_list": prime.data["test_list"]}, sloppy))
    assert base.ok  # MBPP's own three asserts pass ...
    assert _score("mbpp-plus", prime, sloppy) == 0.0  # ... MBPP+ also asks about 1
    assert _score("mbpp-plus", prime, prime.data["code"]) == 1.0
    shared = tasks["2"]  # a set-equality oracle: the order of the shared elements is free
    assert _score("mbpp-plus", shared, "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))") == 1.0
    assert _score("mbpp-plus", shared, "def similar_elements(a, b):\n    return tuple(set(a) | set(b))") == 0.0
    content = BENCH["mbpp-plus"].messages(shared)[-1]["content"]
    assert shared.data["test_list"][0] in content and shared.data["prompt"] in content


# -- LiveCodeBench ----------------------------------------------------------------------------

def test_livecodebench_decodes_private_tests_both_ways():
    tasks = _tasks("livecodebench", "question_id")
    bench = BENCH["livecodebench"]
    pickled, plain = tasks["abc990_a"], tasks["9990A"]
    assert len(bench.tests(pickled).cases) > len(json.loads(pickled.data["public_test_cases"]))
    assert len(bench.tests(plain).cases) == 2
    functional = bench.tests(tasks["9990"])
    assert functional.mode == "call" and functional.fn_name == "minimumOperations"
    assert functional.cases[0] == {"args": [[1, 2, 3, 4]], "expected": 3}


def test_livecodebench_refuses_a_pickle_that_names_a_global(caplog):
    task = next(iter(_tasks("livecodebench", "question_id").values()))
    blob = base64.b64encode(zlib.compress(pickle.dumps(Decimal("1")))).decode()
    with pytest.raises(pickle.UnpicklingError):
        code_grader.decode_lcb_cases(blob)
    poisoned = Task(id="livecodebench/poisoned", data={**task.data, "private_test_cases": blob}, answer=None,
                    dataset="livecodebench", split="test")
    assert BENCH["livecodebench"].tests(poisoned) is None
    assert BENCH["livecodebench"].reward(poisoned, _py("print(6)")) == 0.0
    assert "cannot be read" in caplog.text


@pytest.mark.parametrize("code", [
    "n = int(input())\nprint(sum(x for x in map(int, input().split()) if x % 2 == 0))",
    "import sys\nd = sys.stdin.buffer.read().split()\nprint(sum(int(x) for x in d[1:] if int(x) % 2 == 0))",
    "a = open(0).read().split()\nprint(sum(int(x) for x in a[1:] if int(x) % 2 == 0), end='  \\n\\n')\nexit()",
    "def main():\n    input()\n    print(sum(x for x in map(int, input().split()) if x % 2 == 0))\n\n"
    "if __name__ == '__main__':\n    main()",
    "import threading\ndef main():\n    input()\n    print(sum(x for x in map(int, input().split()) if not x % 2))\n"
    "threading.Thread(target=main).start()",
])
def test_livecodebench_stdin_accepts_the_usual_ways_to_read_and_print(code):
    task = _tasks("livecodebench", "question_id")["abc990_a"]
    assert _score("livecodebench", task, code) == 1.0


def test_livecodebench_wrong_slow_and_crashing_programs_score_zero(monkeypatch):
    task = _tasks("livecodebench", "question_id")["abc990_a"]
    assert _score("livecodebench", task, "input()\nprint(sum(map(int, input().split())))") == 0.0
    assert _score("livecodebench", task, "print(1 / 0)") == 0.0
    assert _score("livecodebench", task, "print(6)") == 0.0  # the sample's answer only
    monkeypatch.setattr(code_grader, "CASE_SECONDS", 1.0)
    result = BENCH["livecodebench"].grade(task, _py("while True:\n    pass"))
    assert not result.ok and "timeout after 1.0 s" in result.reason


def test_livecodebench_functional_calls_solution_and_refuses_an_always_equal_object():
    task = _tasks("livecodebench", "question_id")["9990"]
    right = "class Solution:\n    def minimumOperations(self, nums: List[int]) -> int:\n        return sum(1 for x in nums if x % 3)"
    assert _score("livecodebench", task, right) == 1.0
    assert _score("livecodebench", task, right.replace("x % 3", "x % 3 == 1")) == 0.0
    cheat = ("class Solution:\n    def minimumOperations(self, nums):\n        class Any:\n"
             "            def __eq__(self, other):\n                return True\n        return Any()")
    assert _score("livecodebench", task, cheat) == 0.0
    messages = BENCH["livecodebench"].messages(task)
    assert messages[0]["role"] == "system" and "class Solution:" in messages[1]["content"]
    assert "### Answer: (use the provided format with backticks)" in messages[1]["content"]


# -- APPS, CodeContests --------------------------------------------------------------------------

def test_apps_stdin_and_call_based_problems():
    train = _tasks("apps", "problem_id", "train")
    stdin, call = train["0"], train["1"]
    assert _score("apps", stdin, "print(len(set(input())))") == 1.0
    assert _score("apps", stdin, "print(len(input()))") == 0.0
    assert _score("apps", call, "def sum_digits(n):\n    return sum(map(int, str(n)))") == 1.0
    assert _score("apps", call, "def sum_digits(n):\n    return [sum(map(int, str(n)))]") == 1.0  # APPS's wrapped form
    assert _score("apps", call, "def sum_digits(n):\n    return n % 9") == 0.0
    assert "def sum_digits(n):" in BENCH["apps"].messages(call)[-1]["content"]


def test_apps_rows_without_solutions_or_tests():
    test = _tasks("apps", "problem_id")
    assert BENCH["apps"].solution(test["2"]) is None  # solutions "[]"
    assert _score("apps", test["2"], "n = int(input())\np = list(map(int, input().split()))\n"
                  "print(sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n)))") == 1.0
    no_tests = Task(id="apps/none", data={**test["0"].data, "input_output": ""}, answer=None, dataset="apps",
                    split="test")
    assert BENCH["apps"].reward(no_tests, BENCH["apps"].solution(test["0"])) == 0.0


def test_codecontests_uses_python3_references_and_its_incorrect_solutions_fail():
    train = _tasks("codecontests", "name", "train")
    assert train["REVSTR"].answer == "print(input().strip()[::-1])\n"  # language 3, not the Python 2 one
    assert len(BENCH["codecontests"].tests(train["9990_A. Double It"]).cases) == 4  # public, private, generated
    wrong = 0
    for task in train.values():
        for language, code in zip(*task.data["incorrect_solutions"].values()):
            assert language == 3
            assert _score("codecontests", task, code) == 0.0
            wrong += 1
    assert wrong == 2


def test_io_tests_keep_the_longest_cases_and_cap_the_time():
    cases = tuple({"input": "x" * n, "output": ""} for n in range(30))
    capped = code_grader.IOTests("stdin", cases).capped()
    assert [len(c["input"]) for c in capped.cases] == list(range(10, 30))
    assert capped.seconds() == code_grader.MAX_SECONDS
    assert code_grader.IOTests("stdin", cases[:2]).seconds() == 2 * code_grader.CASE_SECONDS + 5


def test_output_comparison_reads_lines_tokens_and_numbers():
    assert same_output("1 2\n3\n", "1  2\n3")
    assert same_output("0.50\n", "0.5")
    assert same_output("YES\r\n", "YES\n")
    assert not same_output("1 2 3", "1 2\n3")
    assert not same_output("yes", "YES")
    assert not same_output("0.5000001", "0.5")


# -- DeepCoder, KodCode -------------------------------------------------------------------------

def test_deepcoder_reads_each_configs_test_shape():
    train = {t.data["problem"][:30]: t for t in BENCH["deepcoder"].tasks("train", 3, path=DATA)}
    stdin = next(t for k, t in train.items() if k.startswith("Solve the following"))
    taco = next(t for k, t in train.items() if k.startswith("Write a function count_vowels"))
    lcb = next(t for k, t in train.items() if k.startswith("You are given a 0-indexed"))
    assert _score("deepcoder", stdin, "a, b = map(int, input().split())\nprint(a + b)") == 1.0
    assert _score("deepcoder", stdin, "a, b = map(int, input().split())\nprint(a * b + 1)") == 0.0  # right on the first case only
    assert _score("deepcoder", taco, "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s)") == 1.0
    assert _score("deepcoder", taco, "def count_vowels(s):\n    return sum(c in 'aeiouy' for c in s)") == 0.0
    fixed = "class Solution:\n    def countFixedPoints(self, nums):\n        return sum(i == x for i, x in enumerate(nums))"
    assert _score("deepcoder", lcb, fixed) == 1.0
    assert _score("deepcoder", lcb, fixed.replace("i == x", "i != x")) == 0.0
    assert "class Solution:" in BENCH["deepcoder"].messages(lcb)[-1]["content"]


def test_kodcode_runs_the_pytest_file_against_solution_py():
    train = _tasks("kodcode", "question_id", "train")
    two_sum = train["Leetcode_9990_I"]
    assert _score("kodcode", two_sum, two_sum.data["solution"]) == 1.0
    reversed_pair = two_sum.data["solution"].replace("[seen[target - x], i]", "[i, seen[target - x]]")
    assert _score("kodcode", two_sum, reversed_pair) == 0.0
    assert _score("kodcode", two_sum, "def twosum(nums, target):\n    return []") == 0.0  # no two_sum to import
    counts = train["Package_9992_I"]  # @pytest.mark.parametrize over blank texts
    assert _score("kodcode", counts, "from collections import Counter\ndef word_counts(text):\n"
                  "    return dict(Counter(text.lower().split(' ')))") == 0.0
    content = BENCH["kodcode"].messages(two_sum)[-1]["content"]
    assert "def two_sum(nums, target):" in content and content.startswith("Please solve the programming task")


def test_kodcode_runner_handles_classes_fixtures_and_raises():
    task = _tasks("kodcode", "question_id")["Algorithm_10009_I"]
    assert _score("kodcode", task, task.data["solution"]) == 1.0
    lenient = task.data["solution"].replace("raise ValueError", "return")
    assert _score("kodcode", task, lenient) == 0.0  # test_digits_rejected wants a ValueError
    off_by_one = task.data["solution"].replace("{j - i}", "{j - i + (j - i > 9)}")
    assert _score("kodcode", task, off_by_one) == 0.0  # only the fixture's run of 12 sees it


def test_sets_without_solutions_are_graded_by_a_program_answering_from_their_tests():
    for name in ("livecodebench", "deepcoder"):
        assert BENCH[name].reference_solutions is False
        for task in BENCH[name].tasks("test", 3, path=DATA):
            assert task.answer is None and BENCH[name].solution(task) is None  # none published: none made up
            reply = BENCH[name].table_solution(task)  # checks the harness and comparison, not the problem
            assert reply is not None and "TABLE" in reply and BENCH[name].reward(task, reply) == 1.0


PYTEST_FILE = '''
import unittest
import pytest
from solution import shout

@pytest.fixture
def word():
    yield "hi"

@pytest.mark.parametrize("text,loud", [("a", "A!"), pytest.param("b", "B!", id="b")])
@pytest.mark.parametrize("times", [1, 2])
def test_parametrized(text, loud, times):
    assert shout(text) * times == loud * times

def test_fixtures(word, tmp_path, capsys, monkeypatch):
    (tmp_path / "w.txt").write_text(shout(word))
    print(shout(word))
    assert capsys.readouterr().out == "HI!\\n"
    monkeypatch.setattr("solution.SUFFIX", "?")
    assert shout(word) == "HI?"

@pytest.mark.skipif(True, reason="never runs")
def test_skipped():
    raise AssertionError

@pytest.mark.xfail
def test_expected_to_fail():
    assert shout("x") == "x"

class TestCase(unittest.TestCase):
    def test_empty(self):
        self.assertEqual(shout(""), "!")
'''


@pytest.mark.parametrize(("code", "ok"), [
    ("SUFFIX = '!'\ndef shout(s):\n    return s.upper() + SUFFIX", True),
    ("SUFFIX = '!'\ndef shout(s):\n    return s.upper() + '!'", False),  # the monkeypatched suffix is ignored
    ("SUFFIX = '!'\ndef shout(s):\n    return s.upper() + SUFFIX if s else ''", False),  # the unittest case
    ("SUFFIX = '!'\ndef shout(s):\n    return s.upper() + SUFFIX if s != 'b' else 'b!'", False),  # pytest.param
])
def test_pytest_runner_covers_parametrize_fixtures_marks_and_unittest(code, ok):
    result = code_grader.run_tests(code_grader.pytest_program(code, PYTEST_FILE))
    assert result.ok is ok, result.reason


@pytest.mark.parametrize("row_change", [{"entry_point": None}, {"entry_point": "drop"}])
def test_a_humaneval_row_without_entry_point_is_one_line_naming_the_file_and_the_column(tmp_path, capsys, row_change):
    import json

    from tracerl.cli.main import main

    rows = [json.loads(line) for line in (DATA / "humaneval" / "test.jsonl").read_text().splitlines()]
    broken = {**rows[1], **row_change}
    if broken["entry_point"] == "drop":
        del broken["entry_point"]
    (tmp_path / "humaneval").mkdir()
    file = tmp_path / "humaneval" / "test.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in [rows[0], broken]))
    assert main(["tasks", "check", "humaneval", "--path", str(tmp_path)]) == 1
    said = capsys.readouterr().err.strip().splitlines()[-1]  # after datasets' progress bar
    assert said == (f"tracerl: error: humaneval: {file}: column 'entry_point' is null or missing in row 2 (of 2); "
                    "the loader needs it in every row: fill it or drop the row")
