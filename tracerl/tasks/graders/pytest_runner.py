"""KodCode's pytest files, run on the tests' side of a graded run (standard library only).

:mod:`.code` sends this module's source after :mod:`.wire`'s and :mod:`.code_harness`'s as the
tests' program of a KodCode reply, ending in one ``run_pytest(spec)``. ``solution`` is the
reply's process seen through proxies (:func:`_solution_module`); the small runner here collects
and runs the file's tests (functions, ``Test*`` classes, unittest cases, parametrize, module
fixtures, tmp_path/capsys/monkeypatch) rather than pytest itself.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import json
import os
import sys
import tempfile
import types
import unittest
from typing import Any

with contextlib.suppress(ImportError):  # in the sandbox, their source comes first in the same program
    from .code_harness import Reply, _connect, _fail, _passed
    from .wire import decode


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


class _Solution(types.ModuleType):
    """``solution`` as the tests see it: proxies of the reply's functions and copies of its
    plain module-level values; assigning one of those (``monkeypatch``) assigns it over there too."""

    def __setattr__(self, name: str, value: Any) -> None:
        reply = self.__dict__.get("_reply")
        if reply is not None and not name.startswith("__"):
            reply.set(name, value)
        super().__setattr__(name, value)


def _solution_module(reply: Reply) -> types.ModuleType:
    module = _Solution("solution")
    for name in reply.functions:
        types.ModuleType.__setattr__(module, name, reply.function(name))
    for name, tree in reply.values.items():
        with contextlib.suppress(Exception):
            types.ModuleType.__setattr__(module, name, decode(tree))
    public = [n for n in vars(module) if not n.startswith("_") and not hasattr(builtins, n)]
    types.ModuleType.__setattr__(module, "__all__", public)
    types.ModuleType.__setattr__(module, "_reply", reply)
    return module


def run_pytest(spec_json: str) -> None:
    """KodCode: import ``spec["test"]`` (a pytest file doing ``from solution import ...``,
    ``solution`` the reply's process seen through :func:`_solution_module`) and run its tests
    with the small runner above (pytest itself need not be importable; a test file that
    imports it needs it)."""
    spec = json.loads(spec_json)
    reply = _connect()
    sys.modules["solution"] = _solution_module(reply)
    module = types.ModuleType("test_solution")
    module.__file__ = os.path.join(os.getcwd(), "test_solution.py")
    sys.modules["test_solution"] = module
    try:
        exec(compile(spec["test"], module.__file__, "exec"), module.__dict__)
    except BaseException as exc:
        _fail(0, 1, reply.broken or f"the tests do not import: {type(exc).__name__}: {exc}")
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
            _fail(index, len(items), reply.broken or f"{name}: {type(exc).__name__}: {exc}")
    _passed(reply, len(items))
