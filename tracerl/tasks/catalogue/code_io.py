"""Code benchmarks graded on test cases: LiveCodeBench, APPS, CodeContests and DeepCoder.

A problem is either **stdin/stdout** (the program reads the case's input and prints the
answer) or **call-based** (a function, or LeetCode's ``Solution().method``, is called with
the case's arguments). Each set stores its cases its own way; :mod:`tracerl.tasks.graders.code`
reads them into one shape (:class:`~tracerl.tasks.graders.code.IOTests`). The reply's
sandboxed process runs the reply once per case in a fresh namespace, ``sys.stdin`` reading the
input, and sends back what it printed; the tests' process (:func:`~tracerl.tasks.graders.
code_harness.run_io`) compares as LiveCodeBench compares (stripped lines, tokens, numbers as
Decimals). The reward is 1.0 only when every case passes (LiveCodeBench's and rLLM's rule).

Where this deviates from the official harnesses, and why:

* at most :data:`~tracerl.tasks.graders.code.MAX_CASES` (20) cases per problem, those with
  the longest inputs (rLLM runs 15 the same way): some problems have hundreds, and a reward
  is computed for every reply of a training run;
* 6 s per case (LiveCodeBench's ``--timeout 6``, rLLM's for all these sets) rather than each
  problem's own limit, and 60 s per program;
* CodeContests problems that read or write named files (``input_file``) or accept several
  right answers (special checkers) are graded on exact output, so a right reply can score 0.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from typing import Any, ClassVar

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders.code import (
    IOTests,
    Split,
    apps_tests,
    decode_lcb_cases,
    io_program,
    lcb_tests,
    stdin_tests,
    table_program,
)
from ..loaders import Hub, load_rows
from ..sandbox import Limits
from .code import CodeBenchmark

log = logging.getLogger(__name__)

# LiveCodeBench's prompts (lcb_runner/prompts/code_generation.py), which rLLM reuses for every set here
LCB_SYSTEM = ("You are an expert Python programmer. You will be given a question (problem specification) and will "
              "generate a correct Python program that matches the specification and passes all tests.")
LCB_STARTER = ("### Format: You will use the following starter code to write the solution to the problem and enclose "
               "your code within delimiters.\n```python\n{starter}\n```\n\n")
LCB_STDIN = ("### Format: Read the inputs from stdin solve the problem and write the answer to stdout (do not directly "
             "test on the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python "
             "program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.\n"
             "```python\n# YOUR CODE HERE\n```\n\n")
LCB_ANSWER = "### Answer: (use the provided format with backticks)\n\n"
IO_GRADER = "the reply's program runs on the problem's test cases (up to 20) in the sandbox; 1 when all outputs match"


def lcb_format(starter: str | None) -> str:
    """LiveCodeBench's "### Format" block: the starter code, or read stdin and print."""
    return LCB_STARTER.format(starter=starter) if starter and starter.strip() else LCB_STDIN


def rllm_prompt(problem: str, starter: str | None) -> list[dict[str, Any]]:
    """rLLM's one-message prompt for its code sets (``fetch_live_code_bench_system_prompt``)."""
    return [{"role": "user", "content": f"{LCB_SYSTEM}\n\n{problem}\n\n{lcb_format(starter)}{LCB_ANSWER}"}]


class IOBenchmark(CodeBenchmark):
    """A set graded on test cases; subclasses read a row's cases in :meth:`read_tests`."""

    grader = IO_GRADER
    _memo_size: ClassVar[int] = 64

    def __init__(self) -> None:
        self._memo: OrderedDict[str, IOTests | None] = OrderedDict()

    def read_tests(self, row: dict[str, Any]) -> IOTests:
        raise NotImplementedError

    def tests(self, task: Task) -> IOTests | None:
        """The task's cases (capped), or None when its row has none that can be read. Kept
        for the last few tasks: decoding LiveCodeBench's private tests takes a while."""
        if task.id in self._memo:
            return self._memo[task.id]
        try:
            tests: IOTests | None = self.read_tests(task.data).capped()
        except Exception as exc:  # a malformed row scores every reply 0; it never stops a run
            log.warning("%s: the tests of %s cannot be read (%s: %s)", self.name, task.id, type(exc).__name__, exc)
            tests = None
        if tests is not None and not tests.cases:
            tests = None
        self._memo[task.id] = tests
        if len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)
        return tests

    def program(self, task: Task, code: str) -> Split | None:
        tests = self.tests(task)
        return io_program(code, tests) if tests is not None else None

    def limits(self, task: Task) -> Limits:
        tests = self.tests(task)
        return Limits(timeout_s=(tests.seconds() if tests else 10.0) + 5.0, memory_mb=2048)

    def table_solution(self, task: Task) -> str | None:
        """For sets that publish no solutions: a program answering from the recorded outputs
        (:func:`~tracerl.tasks.graders.code.table_program`), which checks the grader, not the problem."""
        tests = self.tests(task)
        return f"```python\n{table_program(tests)}```" if tests is not None else None


class LiveCodeBench(IOBenchmark):
    """LiveCodeBench code generation, release_v5, the window DeepCoder and DeepSeek report:
    contests from 2024-08-01 to 2025-02-01 (279 problems; earlier ones are in DeepCoder's
    train set). Public and private tests; private ones are base64(zlib(pickle)) (decoded
    with no pickle globals allowed) or JSON. The repository still holds a loading script,
    so its JSON-lines files are read directly. LiveCodeBench publishes no solutions, so
    :meth:`solution` is None (:meth:`table_solution` is the tests' check of the grader)."""

    name = "livecodebench"
    hub = Hub("livecodebench/code_generation_lite", ("release_v5",),
              files={"test": tuple(f"test{n}.jsonl" for n in ("", 2, 3, 4, 5))})
    splits: ClassVar[dict[str, str]] = {"test": "test"}
    id_key = "question_id"
    question_key = "question_content"
    window: ClassVar[tuple[str, str]] = ("2024-08-01", "2025-02-01")  # contest_date, [start, end)
    description = "LiveCodeBench release_v5, 2024-08..2025-01 (livecodebench/code_generation_lite); eval only"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        start, end = self.window
        return [r for r in super().hub_rows(hub_split, path) if start <= str(r["contest_date"])[:10] < end]

    def reference(self, row: dict[str, Any]) -> None:
        return None

    def read_tests(self, row: dict[str, Any]) -> IOTests:
        cases = json.loads(row["public_test_cases"]) + decode_lcb_cases(row["private_test_cases"])
        metadata = json.loads(row.get("metadata") or "{}")
        return lcb_tests(cases, metadata.get("func_name"))

    def messages(self, task: Task) -> list[dict[str, Any]]:
        ask = f"### Question:\n{task.data['question_content']}\n\n{lcb_format(task.data['starter_code'])}{LCB_ANSWER}"
        return [{"role": "system", "content": LCB_SYSTEM}, {"role": "user", "content": ask}]

    reference_solutions = False  # the set publishes none: solution() is None (see table_solution)


class APPS(IOBenchmark):
    """APPS: 5000 train and 5000 test problems, stdin/stdout or call-based (``fn_name`` in
    ``input_output``). Solved when every case passes (APPS's "strict accuracy"). The
    repository still holds a loading script, so its JSON-lines files are read directly.
    ``problem_id`` restarts at 0 in each split, so the row id adds a digest of the question."""

    name = "apps"
    hub = Hub("codeparrot/apps", ("all",), files={"train": ("train.jsonl",), "test": ("test.jsonl",)})
    question_key = "question"
    description = "10K Python problems from Codeforces, Kattis, Codewars... (codeparrot/apps); sandboxed tests"

    def row_id(self, row: dict[str, Any]) -> str:
        return f"{row['problem_id']}-{hashlib.sha256(row['question'].encode()).hexdigest()[:8]}"

    def reference(self, row: dict[str, Any]) -> str | None:
        try:
            solutions = json.loads(row["solutions"] or "[]")
        except json.JSONDecodeError:
            return None
        return solutions[0] if solutions else None

    def read_tests(self, row: dict[str, Any]) -> IOTests:
        return apps_tests(json.loads(row["input_output"]))

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return rllm_prompt(task.data["question"], task.data["starter_code"])


class CodeContests(IOBenchmark):
    """DeepMind CodeContests: stdin/stdout problems with public, private and generated tests
    (all of them, capped, as AlphaCode grades). The reference is the first Python 3 solution
    (language 3; language 1 is Python 2)."""

    name = "codecontests"
    hub = Hub("deepmind/code_contests")
    id_key = "name"
    question_key = "description"
    description = "competitive programming problems (deepmind/code_contests); sandboxed tests"

    def reference(self, row: dict[str, Any]) -> str | None:
        solutions = row.get("solutions") or {}
        for language, code in zip(solutions.get("language") or [], solutions.get("solution") or []):
            if language == 3:  # PYTHON3
                return str(code)
        return None

    def read_tests(self, row: dict[str, Any]) -> IOTests:
        inputs: list[str] = []
        outputs: list[str] = []
        for kind in ("public_tests", "private_tests", "generated_tests"):
            tests = row.get(kind) or {}
            inputs += tests.get("input") or []
            outputs += tests.get("output") or []
        return stdin_tests(inputs, outputs)

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return rllm_prompt(task.data["description"], None)


class DeepCoder(IOBenchmark):
    """DeepCoder-Preview-Dataset, rLLM's code RL set. Train = primeintellect + taco + lcbv5
    train, test = codeforces + lcbv5 test (each config loads only the splits it has). ``tests``
    is JSON shaped per config: TACO's ``{"inputs", "outputs", "fn_name"}``, LiveCodeBench's
    cases with ``testtype``, PrimeIntellect's ``{"type": "stdin_stdout", ...}`` (``fn_name``
    for call-based ones) or plain ``{"input", "output"}``; the shape says which. The dataset
    carries no solutions here: :meth:`solution` answers from the recorded outputs."""

    name = "deepcoder"
    hub = Hub("agentica-org/DeepCoder-Preview-Dataset", ("primeintellect", "taco", "lcbv5", "codeforces"))
    configs_of: ClassVar[dict[str, tuple[str, ...]]] = {"train": ("primeintellect", "taco", "lcbv5"),
                                                        "test": ("codeforces", "lcbv5")}
    question_key = "problem"
    description = "24K verified problems for code RL (agentica-org/DeepCoder-Preview-Dataset); sandboxed tests"

    def hub_rows(self, hub_split: str, path: Any = None) -> list[dict[str, Any]]:
        from dataclasses import replace

        return load_rows(self.name, replace(self.hub, configs=self.configs_of[hub_split]), hub_split, path)

    def row_id(self, row: dict[str, Any]) -> str:
        # no id column; the statement plus the start of the tests tells rows apart
        key = f"{row['problem']}\0{row['starter_code']}\0{str(row['tests'])[:4096]}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def reference(self, row: dict[str, Any]) -> None:
        return None

    def read_tests(self, row: dict[str, Any]) -> IOTests:
        tests = json.loads(row["tests"])
        if isinstance(tests, dict):  # taco
            return apps_tests(tests)
        if not tests:
            raise ValueError("no test cases")
        first = tests[0]
        if "testtype" in first:  # lcbv5 (and codeforces when it carries one)
            metadata = row.get("metadata") or {}
            if isinstance(metadata, str):  # the card's types were not read; a JSON string would do too
                metadata = json.loads(metadata or "{}")
            return lcb_tests(tests, metadata.get("func_name"))
        if first.get("fn_name") or first.get("type") == "function_call":  # primeintellect, call-based
            cases = [{"args": _json_value(t["input"]), "expected": _json_value(t["output"])} for t in tests]
            return IOTests("call", tuple(cases), str(first.get("fn_name")), unwrap=True)
        return stdin_tests([t["input"] for t in tests], [t["output"] for t in tests])

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return rllm_prompt(task.data["problem"], task.data["starter_code"])

    reference_solutions = False  # the set publishes none: solution() is None (see table_solution)


def _json_value(value: Any) -> Any:
    """A call's arguments or result, stored as JSON text or as the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


BENCHMARKS: tuple[type[Benchmark], ...] = (LiveCodeBench, APPS, CodeContests, DeepCoder)
