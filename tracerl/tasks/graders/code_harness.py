"""The test runners that run *inside* the sandbox, next to a reply's code (standard library only).

:mod:`tracerl.tasks.graders.code` sends this module's source whole, followed by one call
(``run_io(spec)`` or ``run_pytest(spec)``), as the program :func:`tracerl.tasks.sandbox.run_python`
runs. The sandbox uses the child's stdin for its own nonce, so a stdin/stdout problem cannot
be fed through the real stdin: :func:`run_io` executes the reply once per test case in a fresh
namespace, with ``sys.stdin`` (and ``open(0)``) reading the case's input and ``sys.stdout``
captured, the way LiveCodeBench's ``testing_util`` (forked from APPS's) does in-process.

Every failure ends the program with one line on stderr and exit status 1 (the sandbox's
``reason`` then reads "error: test 3 of 20: wrong answer ..."); passing every case ends it
normally. As in the established harnesses, the reply runs in the runner's process: the sandbox
guards the machine, not the score against a program written to fool its own tests (values
of a class the reply defines are refused as call results, which stops the common
"equal to everything" object).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import json
import os
import signal
import sys
import tempfile
import threading
import types
import unittest
from decimal import Decimal, InvalidOperation
from typing import Any

# LiveCodeBench's import_string (lcb_runner/evaluation/testing_util.py), run before every
# reply: starter code says ``List[int]`` without importing typing, solutions use ``deque``...
PRELUDE = "\n".join([
    *(f"from {m} import *" for m in ("string", "re", "datetime", "collections", "heapq", "bisect", "copy",
                                     "math", "random", "statistics", "itertools", "functools", "operator",
                                     "io", "sys", "json", "builtins", "typing")),
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics",
    "import itertools, functools, operator, io, sys, json",
    "sys.setrecursionlimit(50000)",
])


class CaseTimeout(BaseException):
    """A case ran past its time. A BaseException, so a reply's ``except Exception`` keeps it."""


class _Kept(io.BytesIO):
    """Captured output that survives the reply closing ``sys.stdout``."""

    def close(self) -> None:
        pass


def _alarm(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.0))


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def _fail(index: int, total: int, why: str) -> None:
    sys.stdout = sys.__stdout__
    print(f"test {index + 1} of {total}: {why}"[:300], file=sys.__stderr__)
    sys.exit(1)


def _namespace(stdin: io.TextIOWrapper) -> dict[str, Any]:
    """A fresh ``__main__`` namespace with LiveCodeBench's imports and ``open(0)`` as stdin."""
    real_open = builtins.open

    def opened(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if file in (0, "/dev/stdin"):  # open(0).read(): the AtCoder idiom
            return stdin.buffer if "b" in mode else stdin
        return real_open(file, mode, *args, **kwargs)

    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    exec(PRELUDE, namespace)
    namespace["open"] = opened
    return namespace


def _join_threads(deadline: float) -> None:
    """Wait for threads the reply started (``Thread(target=main).start()`` for a deeper stack)."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(deadline, 0.01))


def run_stdin_case(code: Any, data: str, seconds: float) -> str:
    """Run compiled ``code`` as a script reading ``data``; what it printed."""
    stdin = io.TextIOWrapper(io.BytesIO(data.encode()), encoding="utf-8")
    raw = _Kept()
    stdout = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = stdin, stdout
    try:
        _alarm(seconds)
        with contextlib.suppress(SystemExit):  # exit() after the answer ends the case, as in LiveCodeBench
            exec(code, _namespace(stdin))
        _join_threads(seconds)
    finally:
        _alarm(0)
        with contextlib.suppress(ValueError):  # the reply closed it
            stdout.flush()
        sys.stdin, sys.stdout = saved
    return raw.getvalue().decode("utf-8", "replace")


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def same_output(got: str, want: str) -> bool:
    """LiveCodeBench's stdout check: the same lines once each is stripped; within a line the
    same tokens, or the same numbers read as Decimals (``1.0`` = ``1``), whitespace ignored."""
    lines = [line.strip() for line in got.strip().split("\n")]
    expected = [line.strip() for line in want.strip().split("\n")]
    if len(lines) != len(expected):
        return False
    for line, wanted in zip(lines, expected):
        if line == wanted or line.split() == wanted.split():
            continue
        numbers = _decimals(line)
        if numbers is None or numbers != _decimals(wanted):
            return False
    return True


def _plain(value: Any) -> bool:
    """Whether ``value`` is built of types the reply did not define."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value).__module__ == "builtins" and all(_plain(v) for v in value)
    if isinstance(value, dict):
        return type(value).__module__ == "builtins" and all(_plain(k) and _plain(v) for k, v in value.items())
    return type(value).__module__ in ("builtins", "numpy", "decimal", "fractions")


def same_value(got: Any, want: Any, unwrap: bool) -> bool:
    """A call's result against the recorded one: LiveCodeBench's ``==`` with tuples read as
    lists; ``unwrap`` adds APPS's forms (outputs stored inside a one-element list)."""
    if not _plain(got):
        return False
    if isinstance(got, tuple):
        got = list(got)
    if got == want:
        return True
    if unwrap and isinstance(want, list) and want:
        if got == want[0]:
            return True
        if isinstance(got, list) and got and isinstance(got[0], tuple):
            return [list(x) for x in got] == want[0]
    return False


def _callable(namespace: dict[str, Any], name: str) -> Any:
    """LeetCode's ``Solution().name``, else a module-level ``name``."""
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, name):
        return getattr(solution(), name)
    return namespace.get(name)


def _run_calls(code: Any, spec: dict[str, Any]) -> None:
    cases, seconds, total = spec["cases"], spec["timeout"], len(spec["cases"])
    sink = io.TextIOWrapper(_Kept(), encoding="utf-8")
    sys.stdout = sink  # what the reply prints while being called is not its answer
    stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    try:
        _alarm(seconds)
        namespace = _namespace(stdin)
        exec(code, namespace)
        _alarm(0)
    except CaseTimeout:
        _fail(0, total, "timed out defining the solution")
    except BaseException as exc:
        _fail(0, total, f"error defining the solution: {type(exc).__name__}: {exc}")
    function = _callable(namespace, spec["fn_name"])
    if not callable(function):
        _fail(0, total, f"no function {spec['fn_name']!r} (nor Solution().{spec['fn_name']})")
    for index, case in enumerate(cases):
        args = case["args"] if isinstance(case["args"], list) else [case["args"]]
        try:
            _alarm(seconds)
            got = function(*args)
            _alarm(0)
        except CaseTimeout:
            _fail(index, total, f"timeout after {seconds} s")
        except BaseException as exc:
            _fail(index, total, f"{type(exc).__name__}: {exc}")
        finally:
            _alarm(0)
        if not same_value(got, case["expected"], spec.get("unwrap", False)):
            _fail(index, total, f"wrong answer: got {got!r:.80}, expected {case['expected']!r:.80}")
    sys.stdout = sys.__stdout__


def run_io(spec_json: str) -> None:
    """Run ``spec["code"]`` on every case: ``mode`` "stdin" (cases of ``input``/``output``
    text) or "call" (cases of ``args``/``expected``, calling ``fn_name``); ``timeout`` seconds
    each. Stops at the first failure, as LiveCodeBench does."""
    spec = json.loads(spec_json)
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        code = compile(spec["code"], "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        _fail(0, len(spec["cases"]), f"the code does not compile: {exc}")
    if spec["mode"] == "call":
        _run_calls(code, spec)
        return
    total = len(spec["cases"])
    for index, case in enumerate(spec["cases"]):
        try:
            got = run_stdin_case(code, case["input"], spec["timeout"])
        except CaseTimeout:
            _fail(index, total, f"timeout after {spec['timeout']} s")
        except BaseException as exc:
            _fail(index, total, f"{type(exc).__name__}: {exc}")
        if not same_output(got, case["output"]):
            _fail(index, total, f"wrong answer: got {got.strip()[:60]!r}, expected {case['output'].strip()[:60]!r}")


# -- pytest-style test files (KodCode) -----------------------------------------------------------

class _Captured(tuple):
    """``(out, err)`` that also reads as ``.out`` / ``.err``, like pytest's CaptureResult."""

    @property
    def out(self) -> str:
        return str(self[0])

    @property
    def err(self) -> str:
        return str(self[1])


class _Capsys:
    """pytest's ``capsys``: the test's stdout and stderr, read with ``readouterr()``."""

    def __init__(self) -> None:
        self.saved = sys.stdout, sys.stderr
        self.out, self.err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = self.out, self.err

    def readouterr(self) -> _Captured:
        captured = _Captured((self.out.getvalue(), self.err.getvalue()))
        for stream in (self.out, self.err):
            stream.seek(0)
            stream.truncate()
        return captured

    def close(self) -> None:
        sys.stdout, sys.stderr = self.saved


def _builtin_fixture(name: str, teardown: list[Any]) -> Any:
    """The pytest built-in fixtures KodCode tests use; KeyError for any other."""
    if name in ("tmp_path", "tmpdir"):
        from pathlib import Path

        return Path(tempfile.mkdtemp(dir=os.getcwd()))
    if name == "capsys":
        capture = _Capsys()
        teardown.append(capture.close)
        return capture
    if name == "monkeypatch":
        import pytest

        patcher = pytest.MonkeyPatch()
        teardown.append(patcher.undo)
        return patcher
    raise KeyError(f"fixture {name!r} is not supported")


def _fixture_function(obj: Any) -> Any:
    """The function behind ``@pytest.fixture`` (pytest 8.4+ wraps it in an object), or None."""
    if hasattr(obj, "_get_wrapped_function"):
        return obj._get_wrapped_function()
    if hasattr(obj, "_pytestfixturefunction"):
        wrapped = getattr(obj, "__pytest_wrapped__", None)
        return getattr(wrapped, "obj", obj)
    return None


def _fixture(name: str, module: dict[str, Any], teardown: list[Any]) -> Any:
    """Fixture ``name``: one the test module defines (generators included), else a built-in
    one; a fresh value for every test, whatever its declared scope."""
    function = _fixture_function(module.get(name))
    if function is None:
        return _builtin_fixture(name, teardown)
    kwargs = {p: _fixture(p, module, teardown) for p in inspect.signature(function).parameters}
    value = function(**kwargs)
    if inspect.isgenerator(value):
        teardown.append(lambda gen=value: next(gen, None))
        value = next(value)
    return value


def _marks(*owners: Any) -> list[Any]:
    found: list[Any] = []
    for owner in owners:
        marks = getattr(owner, "pytestmark", [])
        found += marks if isinstance(marks, list) else [marks]
    return found


def _parameter_sets(marks: list[Any]) -> list[dict[str, Any]]:
    """The argument sets ``@pytest.mark.parametrize`` marks ask for (stacked ones multiply)."""
    sets: list[dict[str, Any]] = [{}]
    for mark in (m for m in marks if getattr(m, "name", "") == "parametrize"):
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for value in values:
            if type(value).__name__ == "ParameterSet":  # pytest.param(...)
                row = list(value.values)
            else:
                row = [value] if len(names) == 1 else list(value)
            rows.append(dict(zip(names, row)))
        sets = [{**s, **r} for s in sets for r in rows]
    return sets


def _skipped(marks: list[Any]) -> bool:
    for mark in marks:
        name = getattr(mark, "name", "")
        if name == "skip" or name == "skipif" and mark.args and mark.args[0]:
            return True
    return False


def _run_test(function: Any, owner: Any, module: dict[str, Any]) -> None:
    """Run one collected test function (or method of ``owner``) for each of its parameter sets."""
    marks = _marks(function, owner)
    if _skipped(marks):
        return
    expect_failure = any(getattr(m, "name", "") == "xfail" for m in marks)
    for params in _parameter_sets(marks):
        teardown: list[Any] = []
        try:
            target = function
            if owner is not None:
                instance = owner()
                if hasattr(instance, "setup_method"):
                    instance.setup_method(function)
                target = getattr(instance, function.__name__)
            wanted = [p for p in inspect.signature(target).parameters if p not in params]
            kwargs = {**params, **{p: _fixture(p, module, teardown) for p in wanted}}
            try:
                target(**kwargs)
            except BaseException:
                if not expect_failure:
                    raise
        finally:
            for undo in reversed(teardown):
                undo()


def _collect(module: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """pytest's collection: ``test*`` functions, ``test*`` methods of ``Test*`` classes and
    unittest cases, in the order the file defines them."""
    items: list[tuple[str, Any, Any]] = []
    for name, obj in list(module.items()):
        if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
            items.append((name, obj, "unittest"))
        elif isinstance(obj, type) and name.startswith("Test"):
            items += [(f"{name}.{m}", getattr(obj, m), obj) for m in vars(obj) if m.startswith("test")
                      and callable(getattr(obj, m))]
        elif name.startswith("test") and inspect.isfunction(obj):
            items.append((name, obj, None))
    return items


def run_pytest(spec_json: str) -> None:
    """KodCode: write ``spec["code"]`` as ``solution.py``, import ``spec["test"]`` (a pytest
    file doing ``from solution import ...``) and run its tests with the small runner above
    (pytest itself need not be importable; a test file that imports it needs it)."""
    spec = json.loads(spec_json)
    with open("solution.py", "w", encoding="utf-8") as f:
        f.write(spec["code"])
    sys.path.insert(0, os.getcwd())
    module = types.ModuleType("test_solution")
    module.__file__ = os.path.join(os.getcwd(), "test_solution.py")
    sys.modules["test_solution"] = module
    try:
        exec(compile(spec["test"], module.__file__, "exec"), module.__dict__)
    except BaseException as exc:
        _fail(0, 1, f"the tests do not import: {type(exc).__name__}: {exc}")
    items = _collect(module.__dict__)
    if not items:
        _fail(0, 1, "the test file has no tests")
    for index, (name, obj, owner) in enumerate(items):
        try:
            if owner == "unittest":
                result = unittest.TextTestRunner(stream=io.StringIO()).run(
                    unittest.defaultTestLoader.loadTestsFromTestCase(obj))
                if not result.wasSuccessful():
                    raise AssertionError(f"{len(result.failures) + len(result.errors)} unittest failures")
            else:
                _run_test(obj, owner, module.__dict__)
        except BaseException as exc:
            _fail(index, len(items), f"{name}: {type(exc).__name__}: {exc}")
