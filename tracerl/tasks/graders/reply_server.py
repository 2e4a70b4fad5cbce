"""The reply's side of a graded run (standard library only): define the reply's code, then answer calls.

:mod:`.code` sends this module's source, after :mod:`.wire`'s, as the program of the
reply's sandbox, ending in one ``serve(spec)``. Its stdin and stdout are
the only line to the tests' process (:func:`.code_harness.run_check` and the others), which
holds the tests and alone decides whether they passed. Every message it sends is plain data
(:mod:`.wire`), decoded over there with that process's own types: nothing it says, exits
with, writes or prints can pass a test, only the values its functions return.

    -> {"ready": {"functions": [...], "modules": {alias: module}, "values": {name: tree}}}   or {"error": "..."}
    <- {"call": name, "args": [...], "kwargs": {...}, "solution": bool}
    -> {"value": tree, "out": printed, "mutated": {index: tree}}
       or {"raised": [type, message]}, {"timeout": true}, {"refused": why} (a result that is not plain data)
    <- {"stdin": text}                       (a script: run it once on this input)
    -> {"value": printed text}
    <- {"set": name, "value": tree}          (assign a module-level name: monkeypatch)
    -> {"value": null}

A call's printed output comes back as text (a test with ``capsys`` reads it); arguments the
call changed in place come back too, so a test that checks an in-place sort sees it.
"""

from __future__ import annotations

import _posixsubprocess
import _signal
import _socket
import builtins
import contextlib
import io
import json
import os
import sys
import types
from typing import Any

with contextlib.suppress(ImportError):  # in the sandbox, wire's source comes first in the same program
    from .wire import Channel, NotPlain, decode, encode

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
    _signal.setitimer(_signal.ITIMER_REAL, max(seconds, 0.0))


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


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
    import threading

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


def _callable(namespace: dict[str, Any], name: str) -> Any:
    """LeetCode's ``Solution().name``, else a module-level ``name`` (run in the reply's process)."""
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, name):
        return getattr(solution(), name)
    return namespace.get(name)


BLOCKED = "the tracerl sandbox blocks this"


def _blocks() -> None:
    """The sandbox's Python-level blocks on sockets and processes, for their clear reasons (the
    namespaces hold without them). Set on the C modules underneath, before ``socket`` or
    ``subprocess`` is imported (importing those here would cost a tenth of the run's start):
    ``socket.socket`` is then built on the blocked class, and ``subprocess`` starts nothing."""
    def blocked(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(BLOCKED)

    class NoSocket(_socket.socket):
        __slots__ = ()  # socket.socket adds its own (__weakref__ among them)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise PermissionError(BLOCKED)

    _socket.socket = NoSocket  # type: ignore[misc]
    for name in ("socketpair", "getaddrinfo", "dup"):
        if hasattr(_socket, name):
            setattr(_socket, name, blocked)
    _posixsubprocess.fork_exec = blocked
    for name in ("fork", "forkpty", "system", "popen", "execv", "execve", "execvp", "execvpe", "spawnv",
                 "spawnve", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, blocked)


def _channel() -> Channel:
    """The line to the tests, on descriptors of its own; the reply's stdin is empty and what it
    prints goes to stderr, never into the line."""
    channel = Channel(os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the reply's stdin for the whole run
    return channel


def _plain_tree(value: Any) -> Any:
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):  # np.int64, np.ndarray: their plain form
        value = value.tolist()
    return encode(value)


def _define(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the reply's code as a module named ``spec["name"]``; its namespace."""
    code = compile(spec["code"], "solution.py", "exec")
    if spec.get("prelude"):
        namespace = _namespace(sys.stdin)  # type: ignore[arg-type]
        namespace["__name__"] = spec["name"]
    else:
        namespace = {"__name__": spec["name"], "__builtins__": __builtins__}
    module = types.ModuleType(spec["name"])
    module.__dict__.update(namespace)
    if spec["name"] != "__main__":
        sys.modules[spec["name"]] = module
    exec(code, module.__dict__)
    return module.__dict__


def _names(namespace: dict[str, Any]) -> dict[str, Any]:
    functions = sorted(k for k, v in namespace.items()
                       if not k.startswith("__") and callable(v) and not isinstance(v, types.ModuleType))
    modules = {k: v.__name__ for k, v in namespace.items()
               if not k.startswith("__") and isinstance(v, types.ModuleType) and isinstance(getattr(v, "__name__", None), str)}
    values = {}
    for k, v in namespace.items():
        if not k.startswith("__") and not callable(v) and not isinstance(v, types.ModuleType):
            with contextlib.suppress(NotPlain, RecursionError):
                values[k] = _plain_tree(v)
    return {"functions": functions, "modules": modules, "values": values}


def _call(namespace: dict[str, Any], message: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    name = message["call"]
    if name not in found:
        found[name] = _callable(namespace, name) if message.get("solution") else namespace.get(name)
    function = found[name]
    if not callable(function):
        return {"raised": ["NameError", f"the reply defines no function {name!r}"]}
    sent = message["args"]["l"] if isinstance(message["args"], dict) else []
    args, kwargs = decode(message["args"]), decode(message["kwargs"])
    printed = io.StringIO()
    sys.stdout = printed
    try:
        _alarm(message.get("timeout") or 0)
        value = function(*args, **kwargs)
    except CaseTimeout:
        return {"timeout": True}
    except BaseException as exc:
        return {"raised": [type(exc).__name__, str(exc)[:500]]}
    finally:
        _alarm(0)
        sys.stdout = sys.__stdout__
    try:
        answer: dict[str, Any] = {"value": _plain_tree(value), "out": printed.getvalue()[:1_000_000]}
        mutated = {}
        for index, arg in enumerate(args):
            if type(arg) in (list, dict, set) and index < len(sent) and (now := _plain_tree(arg)) != sent[index]:
                mutated[str(index)] = now
        if mutated:
            answer["mutated"] = mutated
        return answer
    except (NotPlain, RecursionError) as exc:
        return {"refused": str(exc)[:300]}


def serve(spec_json: str) -> None:
    """Define ``spec["code"]`` (``kind`` "module"), or keep it to run as a script per input
    (``kind`` "script"), then answer the tests' messages until they close the line."""
    spec = json.loads(spec_json)
    if not hasattr(builtins, "exit"):  # started without site, which defines them: scripts end with exit()
        setattr(builtins, "exit", sys.exit)  # noqa: B010 - mypy knows site's Quitter, not this
        setattr(builtins, "quit", sys.exit)  # noqa: B010
    channel = _channel()
    _blocks()
    _signal.signal(_signal.SIGALRM, _on_alarm)
    sys.setrecursionlimit(50000)
    namespace: dict[str, Any] = {}
    try:
        if spec["kind"] == "script":
            script = compile(spec["code"], "solution.py", "exec")
        else:
            namespace = _define(spec)
        ready: dict[str, Any] = {"ready": _names(namespace)}
    except BaseException as exc:
        ready = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    channel.send(ready)
    found: dict[str, Any] = {}
    while True:
        try:
            message = channel.receive()
        except EOFError:
            return
        answer: dict[str, Any]
        if "stdin" in message:
            try:
                answer = {"value": run_stdin_case(script, message["stdin"], message.get("timeout") or 0)}
            except CaseTimeout:
                answer = {"timeout": True}
            except BaseException as exc:
                answer = {"raised": [type(exc).__name__, str(exc)[:500]]}
        elif "set" in message:  # monkeypatch.setattr("solution.X", v) in the tests
            namespace[message["set"]] = decode(message["value"])
            answer = {"value": None}
        else:
            answer = _call(namespace, message, found)
        channel.send(answer)
