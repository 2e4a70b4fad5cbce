"""The tests' side of a graded run (standard library only): the tests run here, the reply's code never does.

:mod:`tracerl.tasks.graders.code` runs two sandboxed programs for each reply
(:func:`tracerl.tasks.sandbox.run_python_pair`). The reply's one (:mod:`.reply_server`)
defines the reply's code and answers calls; this one holds the tests, calls the reply's
functions through :class:`Reply` proxies (arguments and results cross as plain data,
:mod:`.wire`, decoded here with this process's own types) and compares here. Its stdin and
stdout are the line to the reply's process, nothing else is shared, and this program alone
says "passed" (:data:`VERDICT`, last on stderr, exit status 0): no exit status, file, nonce or
output of the reply's process can. Forms:

* :func:`run_check`: HumanEval's ``check(candidate)`` (after the prompt's own helpers), MBPP's
  asserts and MBPP+'s script, calling the reply's functions by name;
* :func:`run_io`: stdin/stdout cases (the reply's process runs its program on the input and
  sends back what it printed, as LiveCodeBench's ``testing_util`` does in-process; compared
  here) and call-based cases (``fn_name``, or LeetCode's ``Solution().fn_name``);
* :func:`run_pytest`: KodCode's pytest files, ``solution`` a module of proxies (assigning one
  of its plain attributes, as ``monkeypatch.setattr("solution.X", v)`` does, is forwarded).

A failure of the reply's process (it ended, timed out, sent what is not plain data) fails
the run even where a test catches the error. Every failure ends the program with one line on
stderr and exit status 1 (the reason then reads "error: test 3 of 20: wrong answer ...").
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import json
import os
import re
import sys
from typing import Any

with contextlib.suppress(ImportError):  # in the sandbox, wire's source comes first in the same program
    from .wire import Channel, decode, encode

VERDICT = "tracerl-verdict: passed"  # the last line on stderr of a run whose tests all passed

def _stop(why: str) -> None:
    """End the tests' program: failed, for the reason ``why`` (one line)."""
    sys.stdout = sys.__stdout__
    print(why.replace("\n", " ")[:300], file=sys.__stderr__)
    sys.exit(1)


def _fail(index: int, total: int, why: str) -> None:
    _stop(f"test {index + 1} of {total}: {why}")


def _decimals(line: str) -> list[Any] | None:
    from decimal import Decimal, InvalidOperation

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


def same_value(got: Any, want: Any, unwrap: bool) -> bool:
    """A call's result (decoded here, so of this process's types) against the recorded one:
    LiveCodeBench's ``==`` with tuples read as lists; ``unwrap`` adds APPS's forms (outputs
    stored inside a one-element list)."""
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


_NO_IMPORT = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "webbrowser", "pydoc"}


class ReplyError(BaseException):
    """The reply's process failed: it ended, timed out or sent what is not plain data. A
    BaseException, so a test's ``except Exception`` or ``pytest.raises(Exception)`` does not
    take it for the error it expects; the run fails whatever the test does with it."""


def _raised(raised: Any) -> BaseException:
    """The exception a call raised over there, as a built-in exception of this process."""
    if not (isinstance(raised, list) and len(raised) == 2 and all(type(x) is str for x in raised)):
        return ReplyError("the reply's process sent what is not a message")
    name, message = raised
    kind = getattr(builtins, name, None) if name.isidentifier() else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        with contextlib.suppress(Exception):
            return kind(message)
    return RuntimeError(f"{name}: {message}")


class Reply:
    """The reply's process, seen from the tests: calls go out as plain data, results come
    back decoded with this process's types; :attr:`broken` once the process failed."""

    def __init__(self, call_timeout: float | None = None) -> None:
        self.channel = Channel(os.dup(0), os.dup(1))
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # what the tests print goes nowhere, never into the line
        sys.stdin, sys.stdout = open(os.devnull), open(os.devnull, "w")  # noqa: SIM115
        self.call_timeout = call_timeout
        self.broken = ""
        ready = self._receive(None)
        if "ready" not in ready:
            self.broken = f"error defining the solution: {str(ready.get('error'))[:200]}"
            raise ReplyError(self.broken)
        names = ready["ready"] if isinstance(ready["ready"], dict) else {}
        self.functions = [n for n in names.get("functions", []) if type(n) is str and n.isidentifier()]
        modules = names.get("modules", {})
        self.modules = {k: v for k, v in modules.items() if type(v) is str and k.isidentifier()} \
            if isinstance(modules, dict) else {}
        values = names.get("values", {})
        self.values = values if isinstance(values, dict) else {}

    def _fail(self, why: str) -> ReplyError:
        self.broken = self.broken or why
        return ReplyError(why)

    def _receive(self, timeout: float | None) -> dict[str, Any]:
        if self.broken:
            raise ReplyError(self.broken)
        try:
            return self.channel.receive(timeout)
        except TimeoutError:
            raise self._fail(f"timeout after {timeout} s") from None
        except EOFError:
            raise self._fail("the reply's process ended") from None
        except ValueError as exc:
            raise self._fail(f"the reply's process sent what is not a message ({exc})"[:200]) from None

    def _ask(self, message: dict[str, Any]) -> Any:
        if self.broken:
            raise ReplyError(self.broken)
        try:
            self.channel.send({**message, "timeout": self.call_timeout})
        except OSError:
            raise self._fail("the reply's process ended") from None
        answer = self._receive(self.call_timeout + 2.0 if self.call_timeout else None)
        if "timeout" in answer:
            raise self._fail(f"timeout after {self.call_timeout} s")
        if "refused" in answer:
            raise self._fail(f"the reply's result is not plain data ({str(answer['refused'])[:150]})")
        if "raised" in answer:
            raise _raised(answer["raised"])
        try:
            value = decode(answer["value"])
        except (KeyError, ValueError, TypeError, RecursionError):
            raise self._fail("the reply's process sent what is not plain data") from None
        return value, answer

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], solution: bool = False) -> Any:
        """``name(*args, **kwargs)`` in the reply's process; arguments it changed in place are changed here too."""
        value, answer = self._ask({"call": name, "args": encode(list(args)), "kwargs": encode(dict(kwargs)),
                                   "solution": solution})
        if type(answer.get("out")) is str and answer["out"]:
            sys.stdout.write(answer["out"])
        mutated = answer.get("mutated")
        for index, tree in (mutated.items() if isinstance(mutated, dict) else ()):
            arg, new = args[int(index)], decode(tree)
            if type(arg) is list and type(new) is list:
                arg[:] = new
            elif type(arg) in (dict, set) and type(new) is type(arg):
                arg.clear()
                arg.update(new)
        return value

    def function(self, name: str, solution: bool = False) -> Any:
        """A proxy of the reply's ``name``: a function of this process."""
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, args, kwargs, solution)

        call.__name__ = call.__qualname__ = name
        return call

    def script(self, stdin: str) -> str:
        """What the reply's program prints reading ``stdin``."""
        value, _ = self._ask({"stdin": stdin})
        if type(value) is not str:
            raise self._fail("the reply's process sent what is not text")
        return value

    def set(self, name: str, value: Any) -> None:
        """Assign the reply's module-level ``name`` (``monkeypatch.setattr("solution.X", v)``)."""
        self._ask({"set": name, "value": encode(value)})

    def bind(self, namespace: dict[str, Any], tests: str) -> None:
        """The reply's functions (as proxies) and the standard modules it imported that the
        ``tests`` name (imported here: MBPP's asserts say ``math.isclose`` and count on the
        reply's ``import math``) under their names, except names of built-ins: a reply's
        ``len`` is not the tests' ``len``."""
        for alias, module in self.modules.items():
            top = module.partition(".")[0]
            if (not hasattr(builtins, alias) and top in sys.stdlib_module_names and top not in _NO_IMPORT
                    and re.search(rf"\b{re.escape(alias)}\b", tests)):
                with contextlib.suppress(Exception):
                    namespace[alias] = importlib.import_module(module)
        for name in self.functions:
            if not hasattr(builtins, name):
                namespace[name] = self.function(name)


def _connect(call_timeout: float | None = None) -> Reply:
    try:
        return Reply(call_timeout)
    except ReplyError as exc:
        _stop(str(exc))
        raise


def _passed(reply: Reply, total: int) -> None:
    """Every test passed: say so, unless the reply's process failed on the way (a test caught it)."""
    if reply.broken:
        _stop(reply.broken)
    print(VERDICT, file=sys.__stderr__, flush=True)


def _where(exc: BaseException, filename: str) -> str:
    """``exc`` with the tests' line it came from."""
    line = 0
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{what} (line {line} of the tests)" if line else what


def run_check(spec_json: str) -> None:
    """HumanEval's, MBPP's and MBPP+'s tests: run ``spec["before"]`` (the prompt's helpers the
    tests use), bind ``spec["bind"]`` (names, or "all" the reply's functions) to proxies, then
    run ``spec["test"]``; any error or failed assert fails."""
    spec = json.loads(spec_json)
    reply = _connect()
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(spec.get("before") or "", "prompt.py", "exec"), namespace)
    except BaseException as exc:
        _stop(f"the tests' own setup fails: {type(exc).__name__}: {exc}")
    if spec["bind"] == "all":
        reply.bind(namespace, spec["test"])
    else:
        namespace.update({name: reply.function(name) for name in spec["bind"]})
    try:
        exec(compile(spec["test"], "tests.py", "exec"), namespace)
    except BaseException as exc:
        _stop(reply.broken or _where(exc, "tests.py"))
    _passed(reply, 1)


def run_io(spec_json: str) -> None:
    """Every case of ``spec["cases"]``: ``mode`` "stdin" (cases of ``input``/``output`` text)
    or "call" (cases of ``args``/``expected``, calling ``fn_name``); ``timeout`` seconds each.
    Stops at the first failure, as LiveCodeBench does."""
    spec = json.loads(spec_json)
    reply = _connect(spec["timeout"])
    cases, total = spec["cases"], len(spec["cases"])
    for index, case in enumerate(cases):
        try:
            if spec["mode"] == "stdin":
                got = reply.script(case["input"])
                right = same_output(got, case["output"])
            else:
                args = case["args"] if isinstance(case["args"], list) else [case["args"]]
                got = reply.call(spec["fn_name"], tuple(args), {}, solution=True)
                right = same_value(got, case["expected"], spec.get("unwrap", False))
        except BaseException as exc:
            _fail(index, total, reply.broken or f"{type(exc).__name__}: {exc}")
        if not right:
            want = case.get("output", case.get("expected"))
            _fail(index, total, f"wrong answer: got {str(got).strip()[:60]!r}, expected {str(want).strip()[:60]!r}")
    _passed(reply, total)
