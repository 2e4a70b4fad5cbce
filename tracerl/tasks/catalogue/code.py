"""Code benchmarks: HumanEval and MBPP, graded by running the reply against the tests in the
sandbox (:mod:`tracerl.tasks.sandbox`). The reward is 1.0 if every test passes, else 0.0;
:meth:`CodeBenchmark.grade` also gives the sandbox's reason ("timeout after 10.0 s", ...).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders.code import extract_code, humaneval_program, mbpp_program
from ..loaders import Hub
from ..sandbox import Limits, SandboxResult, run_python

CODE_PROMPT = "Write Python code. Reply with the complete code in one ```python code block."
LIMITS = Limits(timeout_s=10.0, memory_mb=1024)


@functools.lru_cache(maxsize=512)
def _run(program: str) -> SandboxResult:
    # reward() and is_correct() of one reply would otherwise run the same program twice.
    return run_python(program, LIMITS)


class CodeBenchmark(Benchmark):
    domain = "code"
    grader = "the reply's code runs the dataset's tests in the sandbox; 1 when all pass"
    tool_names = ()

    def program(self, task: Task, code: str) -> str:
        raise NotImplementedError

    def grade(self, task: Task, text: str | None) -> SandboxResult:
        """Run the reply's code with the task's tests; ``.ok`` and ``.reason`` say how it went."""
        return _run(self.program(task, extract_code(text)))

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

    def program(self, task: Task, code: str) -> str:
        return humaneval_program(task.data, code)


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

    def program(self, task: Task, code: str) -> str:
        return mbpp_program(task.data, code)


BENCHMARKS: tuple[type[Benchmark], ...] = (HumanEval, MBPP)
