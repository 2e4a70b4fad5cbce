"""Code rewards: pull the program out of a reply, run it apart from the benchmark's tests, let the tests decide.

A graded run is two sandboxed programs (:class:`Split`, run by
:func:`tracerl.tasks.sandbox.run_python_pair`): the reply's code runs in one
(:mod:`.reply_server`), the tests and every comparison in the other (:mod:`.code_harness`),
which calls the reply's functions through proxies; only plain data crosses (:mod:`.wire`).
The reward is 1.0 when the tests' program says every test passed, else 0.0; the result's
``reason`` says why. Forms: HumanEval's ``check(candidate)`` and MBPP's asserts and their
EvalPlus versions (:func:`humaneval_program`, :func:`mbpp_program`, :func:`mbppplus_program`),
stdin/stdout and call-based sets (LiveCodeBench, APPS, CodeContests, DeepCoder;
:func:`io_program`: at most :data:`MAX_CASES` cases, :data:`CASE_SECONDS` each) and pytest
files (KodCode, :func:`pytest_program`).
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

from ..sandbox import Limits, SandboxResult, run_python_pair

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(text: str | None) -> str:
    """The last fenced code block of a reply, or the whole reply when it has no fence."""
    if not text:
        return ""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


@dataclass(frozen=True)
class Split:
    """A graded run as two programs: ``reply`` defines the reply's code and answers calls
    (:func:`.reply_server.serve`); ``tests`` holds the tests, never runs the reply's code and
    alone says whether they passed (:mod:`.code_harness`)."""

    reply: str
    tests: str


@functools.cache
def _source(*names: str) -> str:
    """The start of a program: these standard-library-only modules of this package, compiled
    here once and carried as bytecode (the sandbox runs this same interpreter), which saves
    each program compiling them. The programs start without ``site`` (a third of an
    interpreter's start, most of it .pth files), so they put the interpreter's package folders
    on ``sys.path`` themselves."""
    import importlib
    import marshal
    import sys

    parts = [inspect.getsource(importlib.import_module(f"{__package__}.{name}")) for name in names]
    body = "\n\n".join(p.replace("from __future__ import annotations\n", "") for p in parts)
    code = compile(f"from __future__ import annotations\n{body}", f"<tracerl {'+'.join(names)}>", "exec",
                   dont_inherit=True)
    packages = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return (f"import marshal as _marshal, sys as _sys\n_sys.path.extend({packages!r})\n"
            f"exec(_marshal.loads(bytes.fromhex({marshal.dumps(code).hex()!r})))")


def split_program(reply: dict[str, Any], runner: str, tests: dict[str, Any], *more: str) -> Split:
    """The two programs: :func:`.reply_server.serve` with ``reply``; ``runner`` (a function of
    :mod:`.code_harness` or of the modules ``more`` names) with ``tests``."""
    return Split(f"{_source('wire', 'reply_server')}\n\nserve({json.dumps(reply)!r})\n",
                 f"{_source('wire', 'code_harness', *more)}\n\n{runner}({json.dumps(tests)!r})\n")


def humaneval_program(data: dict[str, Any], code: str) -> Split:
    """HumanEval: the reply's side runs the prompt (imports, signature, docstring) and the
    reply; the tests' side runs the prompt (its helpers, which some tests call), ``test``
    and ``check(entry_point)`` with the entry point a proxy of the reply's.

    A reply that defines the entry point is a whole function and redefines the prompt's stub
    (a function whose body is only a docstring is valid Python); one that does not is the
    body that completes the prompt.
    """
    entry = data["entry_point"]
    defines = re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE)
    body = f"{data['prompt']}\n{code}" if defines else f"{data['prompt']}{code}"
    return split_program({"kind": "module", "name": "__main__", "code": body}, "run_check",
                         {"before": data["prompt"], "bind": [entry], "test": f"{data['test']}\n\ncheck({entry})\n"})


def mbpp_program(data: dict[str, Any], code: str) -> Split:
    """MBPP: ``test_setup_code`` and the reply on the reply's side; on the tests' side the
    reply's functions as proxies, then ``test_setup_code`` and every assert of ``test_list``."""
    setup = data.get("test_setup_code") or ""
    return split_program({"kind": "module", "name": "__main__", "code": f"{setup}\n{code}"}, "run_check",
                         {"before": "", "bind": "all", "test": "\n".join([setup, *data["test_list"], ""])})


def mbppplus_program(data: dict[str, Any], code: str) -> Split:
    """MBPP+ (evalplus): ``test_imports`` and the reply on the reply's side; on the tests'
    side ``test``, a script that calls the function on the base and plus inputs and compares
    with the recorded results."""
    imports = "\n".join(data.get("test_imports") or [])
    return split_program({"kind": "module", "name": "__main__", "code": f"{imports}\n{code}"}, "run_check",
                         {"before": "", "bind": "all", "test": f"{imports}\n{data['test']}\n"})


def run_tests(program: Split, limits: Limits | None = None) -> SandboxResult:
    """Run ``program``'s two sides; ok only when the tests' side says every test passed."""
    from .code_harness import VERDICT

    result = run_python_pair(program.tests, program.reply, limits or Limits(timeout_s=10.0, memory_mb=1024),
                             site=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if result.ok and not (lines and lines[-1] == VERDICT):
        return replace(result, ok=False, reason="the tests ended without a verdict")
    return replace(result, reason="passed") if result.ok else result


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


def io_program(code: str, tests: IOTests) -> Split:
    """The reply runs as a script per input ("stdin") or defines ``fn_name`` ("call"); the
    tests' side sends each case and compares (:func:`.code_harness.run_io`)."""
    stdin = tests.mode == "stdin"
    reply = {"kind": "script" if stdin else "module", "name": "__main__", "code": code, "prelude": True}
    return split_program(reply, "run_io", {"mode": tests.mode, "cases": list(tests.cases), "fn_name": tests.fn_name,
                                           "unwrap": tests.unwrap, "timeout": CASE_SECONDS})


def pytest_program(code: str, test: str) -> Split:
    """The reply defines module ``solution``; the tests' side runs the pytest file ``test``
    against proxies of it (:func:`.pytest_runner.run_pytest`)."""
    return split_program({"kind": "module", "name": "solution", "code": code}, "run_pytest", {"test": test},
                         "pytest_runner")


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
