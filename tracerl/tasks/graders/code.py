"""Code rewards: pull the program out of a reply, put the benchmark's tests with it, run it sandboxed.

The reward of a reply is 1.0 when the program plus tests runs to its end with exit status 0
in :func:`tracerl.tasks.sandbox.run_python`, else 0.0; the result's ``reason`` says why.
Assert-style sets (HumanEval, MBPP and their EvalPlus versions) append the tests to the code.
Stdin/stdout and call-based sets (LiveCodeBench, APPS, CodeContests, DeepCoder) and pytest
files (KodCode) run through the runners of :mod:`.code_harness`, whose source travels with
the reply's code: at most :data:`MAX_CASES` cases, :data:`CASE_SECONDS` each.
"""

from __future__ import annotations

import base64
import functools
import inspect
import io
import json
import pickle
import re
import zlib
from dataclasses import dataclass, replace
from typing import Any

from ..sandbox import Limits, SandboxResult, run_python

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str | None) -> str:
    """The last fenced code block of a reply, or the whole reply when it has no fence."""
    if not text:
        return ""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def humaneval_program(data: dict[str, Any], code: str) -> str:
    """HumanEval: the prompt (imports, signature, docstring), the reply, ``test`` and the check.

    A reply that defines the entry point is a whole function and redefines the prompt's stub
    (a function whose body is only a docstring is valid Python); one that does not is the
    body that completes the prompt.
    """
    defines = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(data['entry_point'])}\s*\(", code, re.MULTILINE)
    body = f"{data['prompt']}\n{code}" if defines else f"{data['prompt']}{code}"
    return f"{body}\n\n{data['test']}\n\ncheck({data['entry_point']})\n"


def mbpp_program(data: dict[str, Any], code: str) -> str:
    """MBPP: ``test_setup_code``, the reply, then every assert of ``test_list``."""
    setup = data.get("test_setup_code") or ""
    return "\n".join([setup, code, "", *data["test_list"], ""])


def mbppplus_program(data: dict[str, Any], code: str) -> str:
    """MBPP+ (evalplus): ``test_imports``, the reply, then ``test``, a script that calls the
    function on the base and plus inputs and compares with the recorded results."""
    return "\n".join([*(data.get("test_imports") or []), code, "", data["test"], ""])


def run_tests(program: str, limits: Limits | None = None) -> SandboxResult:
    """Run ``program`` (code plus its tests) in the sandbox."""
    return run_python(program, limits or Limits(timeout_s=10.0, memory_mb=1024))


# -- stdin/stdout and call-based problems (LiveCodeBench, APPS, CodeContests, DeepCoder) ----------

MAX_CASES = 20  # test cases run per problem; rLLM runs 15, the longest inputs
CASE_SECONDS = 6.0  # per test case: LiveCodeBench's --timeout 6, which rLLM keeps
MAX_SECONDS = 60.0  # per program, whatever the number of cases


@dataclass(frozen=True)
class IOTests:
    """A problem's tests in one shape: ``mode`` "stdin" (cases ``{"input", "output"}``, text)
    or "call" (cases ``{"args", "expected"}``, JSON values, calling ``fn_name``); ``unwrap``
    accepts APPS's outputs stored inside a one-element list."""

    mode: str
    cases: tuple[dict[str, Any], ...]
    fn_name: str | None = None
    unwrap: bool = False

    def capped(self, cap: int = MAX_CASES) -> IOTests:
        """At most ``cap`` cases: the longest inputs (the stress tests, as rLLM picks), in
        their original order."""
        if len(self.cases) <= cap:
            return self
        size = [len(json.dumps(c.get("input", c.get("args")))) for c in self.cases]
        keep = sorted(sorted(range(len(self.cases)), key=lambda i: -size[i])[:cap])
        return replace(self, cases=tuple(self.cases[i] for i in keep))

    def seconds(self) -> float:
        """The program's time limit: LiveCodeBench's per-case limit times the cases, capped."""
        return min(CASE_SECONDS * len(self.cases) + 5.0, MAX_SECONDS)


def _text(value: Any) -> str:
    # TACO and a few APPS rows store a test's input or output as a list of lines
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def stdin_tests(inputs: list[Any], outputs: list[Any]) -> IOTests:
    """Stdin/stdout tests from parallel lists of inputs and expected outputs."""
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    return IOTests("stdin", tuple({"input": _text(i), "output": _text(o)} for i, o in zip(inputs, outputs)))


def apps_tests(input_output: dict[str, Any]) -> IOTests:
    """APPS/TACO ``input_output``: ``{"inputs", "outputs"}``, plus ``fn_name`` when the
    problem is call-based (inputs are argument lists, outputs usually wrapped in a list)."""
    inputs, outputs = input_output["inputs"], input_output["outputs"]
    if not input_output.get("fn_name"):
        return stdin_tests(inputs, outputs)
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    cases = tuple({"args": i, "expected": o} for i, o in zip(inputs, outputs))
    return IOTests("call", cases, str(input_output["fn_name"]), unwrap=True)


def lcb_tests(cases: list[dict[str, Any]], fn_name: str | None) -> IOTests:
    """LiveCodeBench test cases (``{"input", "output", "testtype"}``): "stdin" text, or
    "functional" with one JSON argument per input line and a JSON output."""
    if any(c.get("testtype") == "functional" for c in cases):
        if not fn_name:
            raise ValueError("functional tests without a func_name")
        calls = tuple({"args": [json.loads(line) for line in c["input"].split("\n")],
                       "expected": json.loads(c["output"])} for c in cases)
        return IOTests("call", calls, fn_name)
    return stdin_tests([c["input"] for c in cases], [c["output"] for c in cases])


class _NoGlobals(pickle.Unpickler):
    """Unpickles plain data only: hub data must not name a function to call."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the payload names {module}.{name}")


def decode_lcb_cases(blob: str) -> list[dict[str, Any]]:
    """LiveCodeBench's private tests: JSON, or base64(zlib(pickle(JSON string))) (lcb_runner's
    ``json.loads(pickle.loads(zlib.decompress(base64.b64decode(s))))``), unpickled with no globals."""
    try:
        cases = json.loads(blob)
    except json.JSONDecodeError:
        payload = _NoGlobals(io.BytesIO(zlib.decompress(base64.b64decode(blob.encode())))).load()
        if not isinstance(payload, (str, bytes)):
            raise ValueError(f"the private tests unpickle to {type(payload).__name__}, not a JSON string") from None
        cases = json.loads(payload)
    if not isinstance(cases, list):
        raise ValueError(f"the tests are a {type(cases).__name__}, not a list")
    return cases


@functools.cache
def _harness() -> str:
    from . import code_harness

    return inspect.getsource(code_harness)


def io_program(code: str, tests: IOTests) -> str:
    """The program that runs ``code`` on every case of ``tests`` (:func:`.code_harness.run_io`)."""
    spec = {"code": code, "mode": tests.mode, "cases": list(tests.cases), "fn_name": tests.fn_name,
            "unwrap": tests.unwrap, "timeout": CASE_SECONDS}
    return f"{_harness()}\n\nrun_io({json.dumps(spec)!r})\n"


def pytest_program(code: str, test: str) -> str:
    """The program that imports ``code`` as ``solution`` and runs the pytest file ``test``
    (:func:`.code_harness.run_pytest`)."""
    return f"{_harness()}\n\nrun_pytest({json.dumps({'code': code, 'test': test})!r})\n"


def table_program(tests: IOTests) -> str:
    """A reply that answers each case of ``tests`` from a table of the recorded outputs: for
    sets that publish no solutions it exercises the decoding, the harness and the comparison
    (what ``solution()`` and ``tracerl tasks check`` need), not the problem."""
    if tests.mode == "stdin":
        table = {c["input"].strip(): c["output"] for c in tests.cases}
        return (f"import json, sys\nTABLE = json.loads({json.dumps(table)!r})\n"
                f"sys.stdout.write(TABLE[sys.stdin.read().strip()])\n")
    table = {json.dumps(c["args"] if isinstance(c["args"], list) else [c["args"]]): c["expected"]
             for c in tests.cases}
    return (f"import json\nTABLE = json.loads({json.dumps(table)!r})\n\n"
            f"def {tests.fn_name}(*args):\n    return TABLE[json.dumps(list(args))]\n\n"
            f"class Solution:\n    def {tests.fn_name}(self, *args):\n        return TABLE[json.dumps(list(args))]\n")
