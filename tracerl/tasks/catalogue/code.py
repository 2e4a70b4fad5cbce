"""Code benchmarks with function-level tests: HumanEval, MBPP, their EvalPlus versions
(HumanEval+, MBPP+) and KodCode. The stdin/stdout and call-based sets (LiveCodeBench, APPS,
CodeContests, DeepCoder) are in :mod:`.code_io`.

Every grader runs the reply's code (the last fenced block, else the whole reply) in one
sandboxed process and the dataset's own tests in another, which calls the reply's functions
through proxies and alone decides (:mod:`tracerl.tasks.graders.code`; ARCHITECTURE "The
verdict lives outside the reply"). The reward is 1.0 if every test passes, else 0.0;
:meth:`CodeBenchmark.grade` also gives the sandbox's reason ("timeout after 10.0 s", ...).
A reply with no code scores 0 without running.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, ClassVar

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders.code import (
    Split,
    extract_code,
    humaneval_program,
    mbpp_program,
    mbppplus_program,
    pytest_program,
    run_tests,
)
from ..loaders import Hub
from ..sandbox import Limits, SandboxResult

CODE_PROMPT = "Write Python code. Reply with the complete code in one ```python code block."
# evalplus codegen's instruction for chat models (evalplus/provider/utility.py)
EVALPLUS_PROMPT = "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
# KodCode-AI/code-r1's prompts for KodCode (examples/data_preprocess/kodcode.py)
KODCODE_SYSTEM = ("You are a helpful programming assistant. The user will ask you a question and you as the assistant "
                  "solve it. The assistant first thinks how to solve the task through reasoning and then provides the "
                  "user with the final answer. The reasoning process and answer are enclosed within <think>...</think> "
                  "and <answer>...</answer> tags, respectively.")
LIMITS = Limits(timeout_s=10.0, memory_mb=1024)
# EvalPlus's tests are long lists of inputs (MBs for some tasks); evalplus allows a task up to 60 s
EVALPLUS_LIMITS = Limits(timeout_s=30.0, memory_mb=2048)
_CACHE_SIZE = 512
_results: OrderedDict[str, SandboxResult] = OrderedDict()


def run_cached(program: Split, limits: Limits) -> SandboxResult:
    """Run ``program`` once: reward() and is_correct() of one reply would run it twice. Keyed
    by a digest, so the cache does not hold the programs (some carry MBs of tests)."""
    key = hashlib.sha256(f"{limits!r}\0{program.reply}\0{program.tests}".encode()).hexdigest()
    if key in _results:
        _results.move_to_end(key)
        return _results[key]
    result = _results[key] = run_tests(program, limits)
    if len(_results) > _CACHE_SIZE:
        _results.popitem(last=False)
    return result


def failed(reason: str) -> SandboxResult:
    """A result for a reply that was not run."""
    return SandboxResult(False, reason, None, "", "", 0.0, "none")


class CodeBenchmark(Benchmark):
    domain = "code"
    grader = "the reply's code runs the dataset's tests in the sandbox; 1 when all pass"
    tool_names = ()

    def program(self, task: Task, code: str) -> Split | None:
        """The reply's ``code`` and the task's tests as a graded run's two sides; None when the
        task has no usable tests."""
        raise NotImplementedError

    def limits(self, task: Task) -> Limits:
        return LIMITS

    def grade(self, task: Task, text: str | None) -> SandboxResult:
        """Run the reply's code with the task's tests; ``.ok`` and ``.reason`` say how it went."""
        code = extract_code(text)
        if not code.strip():
            return failed("no code in the reply")
        program = self.program(task, code)
        if program is None:
            return failed("the task has no tests that can be run")
        return run_cached(program, self.limits(task))

    def is_correct(self, task: Task, text: str | None) -> bool:
        return bool(text) and self.grade(task, text).ok

    def solution(self, task: Task) -> str | None:
        return f"```python\n{task.answer}\n```" if task.answer else None


class HumanEval(CodeBenchmark):
    name = "humaneval"
    hub = Hub("openai/openai_humaneval")
    splits: ClassVar[dict[str, str]] = {"test": "test"}
    id_key = "task_id"
    question_key = "prompt"
    description = "164 Python functions from docstrings (openai/openai_humaneval); sandboxed tests; eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return row["canonical_solution"]

    def solution(self, task: Task) -> str | None:
        return f"```python\n{task.data['prompt']}{task.answer}\n```"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        ask = f"Complete this function:\n```python\n{task.data['prompt']}```"
        return [{"role": "system", "content": CODE_PROMPT}, {"role": "user", "content": ask}]

    def program(self, task: Task, code: str) -> Split | None:
        return humaneval_program(task.data, code)


class HumanEvalPlus(HumanEval):
    """HumanEval+ (EvalPlus): HumanEval's 164 problems, fixed reference solutions and a
    generated ``check(candidate)`` over the base and the plus inputs (exact match, numpy
    ``allclose`` for floats). Run as HumanEval runs: prompt, reply, test, ``check(entry_point)``,
    with 30 s for the whole program (evalplus gives each test max(4 s, 4x the reference's
    time) up to 60 s a task; one limit per program is what the sandbox has)."""

    name = "humaneval-plus"
    hub = Hub("evalplus/humanevalplus", kwargs={"revision": "d32357cf319e50e9c8d8dab5ea876c72b0fd321b"})
    grader = "the reply's function runs HumanEval+'s base and plus inputs in the sandbox; 1 when all match"
    description = "HumanEval with 80x more tests (evalplus/humanevalplus); sandboxed; eval only"

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"{EVALPLUS_PROMPT}\n```\n{task.data['prompt'].strip()}\n```"}]

    def limits(self, task: Task) -> Limits:
        return EVALPLUS_LIMITS


class MBPP(CodeBenchmark):
    name = "mbpp"
    hub = Hub("google-research-datasets/mbpp", ("full",))
    id_key = "task_id"
    question_key = "text"
    description = "974 basic Python problems (google-research-datasets/mbpp full); sandboxed asserts"

    def reference(self, row: dict[str, Any]) -> str:
        return row["code"]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        tests = "\n".join(task.data["test_list"])
        ask = f"{task.data['text']}\nYour code should pass these tests:\n{tests}"
        return [{"role": "system", "content": CODE_PROMPT}, {"role": "user", "content": ask}]

    def program(self, task: Task, code: str) -> Split | None:
        return mbpp_program(task.data, code)


class MBPPPlus(CodeBenchmark):
    """MBPP+ (EvalPlus): 378 sanitized MBPP problems with ``test``, a script calling the
    function by name on the base and plus inputs. The program is ``test_imports``, the reply
    and ``test`` (evalplus tools/mbpp/to_original_fmt.py). MBPP+ is drawn from every split of
    sanitized MBPP, train included: do not train on ``mbpp`` and evaluate on this."""

    name = "mbpp-plus"
    hub = Hub("evalplus/mbppplus")
    splits: ClassVar[dict[str, str]] = {"test": "test"}
    id_key = "task_id"
    question_key = "prompt"
    grader = "the reply's function runs MBPP+'s base and plus inputs in the sandbox; 1 when all match"
    description = "378 MBPP problems with 35x more tests (evalplus/mbppplus); sandboxed; eval only"

    def reference(self, row: dict[str, Any]) -> str:
        return row["code"]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        # evalplus's prompt for MBPP+ (tools/mbpp/init_plus.py): the text and the first assert
        problem = f'"""\n{task.data["prompt"]}\n{task.data["test_list"][0]}\n"""\n'
        return [{"role": "user", "content": f"{EVALPLUS_PROMPT}\n```\n{problem.strip()}\n```"}]

    def program(self, task: Task, code: str) -> Split | None:
        return mbppplus_program(task.data, code)

    def limits(self, task: Task) -> Limits:
        return EVALPLUS_LIMITS


class KodCode(CodeBenchmark):
    """KodCode-Light-RL-10K, the RL subset KodCode's own recipe (KodCode-AI/code-r1) trains on.
    ``test`` is a pytest file doing ``from solution import ...``: the reply becomes
    module ``solution`` in the reply's process and a small runner in the tests' process
    (:func:`~tracerl.tasks.graders.pytest_runner.run_pytest`) runs the file's tests
    (functions, ``Test*`` classes, unittest cases, parametrize, module fixtures,
    tmp_path/capsys/monkeypatch) against proxies of it rather than pytest itself; 5 s per test function as rLLM gives, up to 60 s. One hub split: 80/20 by row hash
    (code-r1 holds out 512 rows the same way)."""

    name = "kodcode"
    hub = Hub("KodCode/KodCode-Light-RL-10K")
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "train"}
    id_key = "question_id"
    question_key = "question"
    grader = "the reply becomes solution.py; KodCode's pytest tests run against it in the sandbox; 1 when all pass"
    description = "10K synthetic Python tasks with pytest tests (KodCode/KodCode-Light-RL-10K); sandboxed"

    def reference(self, row: dict[str, Any]) -> str:
        return row["solution"]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        ask = f"Please solve the programming task below in Python. \n\n{task.data['question']}"
        info = task.data.get("test_info") or []
        if info and info[0].get("function_declaration"):
            ask += f"\n\nNote that the function declaration is {info[0]['function_declaration']}."
        ask += " Your code should be wrapped in a markdown code block."
        return [{"role": "system", "content": KODCODE_SYSTEM}, {"role": "user", "content": ask}]

    def program(self, task: Task, code: str) -> Split | None:
        return pytest_program(code, task.data["test"])

    def limits(self, task: Task) -> Limits:
        tests = max(1, task.data["test"].count("def test"))
        return Limits(timeout_s=min(5.0 * tests + 5.0, 60.0), memory_mb=1024)


BENCHMARKS: tuple[type[Benchmark], ...] = (HumanEval, HumanEvalPlus, MBPP, MBPPPlus, KodCode)
