"""An app's own function as the agent: ``--agent app.py:run`` where ``run(question)`` is what the
app calls in production, not a ``(task, config)`` rollout function.

Its inputs come from the task by name (the rule :func:`~.rollouts.load_agent` documents); what it
returns is what the reward grades, as a rollout function's return. Its LLM calls land in the
episode without a ``config``: while it runs, ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` (and
their ``*_API_KEY``) name the run's gateway, and every httpx/aiohttp request carries the W3C
``baggage`` with the episode id, which the gateway routes by (the same hook the framework
adapters turn on with ``propagate=True``).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tracerl.core.errors import ConfigError
from tracerl.core.propagation import disable_http_propagation, enable_http_propagation
from tracerl.core.rollout import RolloutContext
from tracerl.core.types import Task

# the task's text when the function takes one input named after no column, first found first
QUESTION_COLUMNS = ("question", "prompt", "input")
_NAMED = {"task", "config"}  # parameters given the Task and the RolloutContext, whatever the app
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def takes_task_first(fn: Callable[..., Any]) -> bool:
    """``fn(task, config, ...)``: a rollout function, called as one (its first parameter named
    ``task`` or annotated as a Task, and a second positional one for the config)."""
    params = [p for p in _parameters(fn) if p.kind in _POSITIONAL]
    if len(params) < 2:
        return False
    first = params[0]
    annotation = first.annotation if isinstance(first.annotation, str) else getattr(first.annotation, "__name__", "")
    return first.name == "task" or annotation.rsplit(".", 1)[-1] == "Task"


def app_function(fn: Callable[..., Any], spec: str) -> Callable[..., Any]:
    """``fn`` as a ``(task, config)`` function (async when ``fn`` is) that calls it with its
    inputs mapped from the task; ``.check_task(task)`` raises the mismatch as one ConfigError."""
    app = _App(fn, spec)
    if inspect.iscoroutinefunction(fn):
        async def acall(task: Task, config: RolloutContext) -> Any:
            args, kwargs = app.inputs(task, config)
            with reaching_gateway(config):
                return await fn(*args, **kwargs)

        call: Any = acall
    else:
        def scall(task: Task, config: RolloutContext) -> Any:
            args, kwargs = app.inputs(task, config)
            with reaching_gateway(config):
                return fn(*args, **kwargs)

        call = scall
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        with contextlib.suppress(AttributeError):
            setattr(call, name, getattr(fn, name))
    call.check_task = app.check
    call.app_function = fn
    return call


class _App:
    def __init__(self, fn: Callable[..., Any], spec: str):
        self.fn, self.spec = fn, spec
        self.params = _parameters(fn)
        # the one input of a function like run(question): what it gets when no column has its name
        inputs = [p for p in self.params if p.name not in _NAMED]
        self.only = inputs[0].name if len(inputs) == 1 and inputs[0].default is inspect.Parameter.empty else None

    def _value(self, name: str, task: Task, config: RolloutContext | None) -> tuple[bool, Any]:
        if name == "task":
            return True, task
        if name == "config":
            return True, config
        if name in task.data:
            return True, task.data[name]
        if name == self.only:
            found = next((c for c in QUESTION_COLUMNS if isinstance(task.data.get(c), str)), None)
            if found is not None:
                return True, task.data[found]
        return False, None

    def inputs(self, task: Task, config: RolloutContext | None) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) of one call on ``task``: positional-only parameters by position, the
        rest by keyword; one with a default that the task lacks keeps its default."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in self.params:
            found, value = self._value(p.name, task, config)
            if not found and p.default is inspect.Parameter.empty:
                raise ConfigError(self._mismatch(p.name, task))
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(value if found else p.default)
            elif found:
                kwargs[p.name] = value
        return args, kwargs

    def check(self, task: Task) -> None:
        """Raise the ConfigError a call on ``task`` would (at preflight, before any rollout)."""
        self.inputs(task, None)

    def _mismatch(self, name: str, task: Task) -> str:
        shown = f"{getattr(self.fn, '__name__', 'fn')}({', '.join(p.name for p in self.params)})"
        columns = sorted(task.data)
        if name == self.only:
            return (f"--agent {self.spec}: {shown} takes one input, the task's question, and task {task.id} has no "
                    f"text column named {name!r} or {' / '.join(QUESTION_COLUMNS)}; its columns are {columns}: map "
                    f"one with --set data.columns.{name}=COLUMN")
        return (f"--agent {self.spec}: {shown} needs {name!r}, which task {task.id} does not have; its columns are "
                f"{columns}: map one with --set data.columns.{name}=COLUMN, give {name!r} a default, or write "
                "a rollout function fn(task, config)")


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: called as a rollout function
        return []
    return [p for p in signature.parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


# -- the app's LLM client --------------------------------------------------------------------

ENV_KEYS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
_lock = threading.Lock()
_running = 0  # app calls in flight in this process
_root: str | None = None  # the gateway their environment names
_saved: dict[str, str | None] = {}


def gateway_root(base_url: str) -> str:
    """The gateway's root URL from a session's base URL (``{root}/sessions/{id}[/seed/{s}]/v1``)."""
    if "/sessions/" in base_url:
        return base_url.split("/sessions/", 1)[0]
    return base_url.rstrip("/").removesuffix("/v1")


@contextlib.contextmanager
def reaching_gateway(config: RolloutContext) -> Iterator[None]:
    """While an app function runs: its SDK clients built from the environment reach the run's
    gateway, and its HTTP calls carry the episode in W3C baggage. The environment is the
    process's, so it names one gateway; it is put back when the last app call ends."""
    global _running, _root

    root = gateway_root(config.base_url)
    with _lock:
        if _running and root != _root:
            raise ConfigError(f"an app function (no config parameter) reaches the gateway through OPENAI_BASE_URL, "
                              f"one per process, which names {_root}, not {root}: with several gateways, write a "
                              "rollout function fn(task, config) that uses config.openai_client()")
        if not _running:
            _saved.clear()
            _saved.update({key: os.environ.get(key) for key in ENV_KEYS})
            os.environ.update({"OPENAI_BASE_URL": f"{root}/v1", "OPENAI_API_KEY": config.api_key,
                               "ANTHROPIC_BASE_URL": root, "ANTHROPIC_API_KEY": config.api_key})
            enable_http_propagation("app-function")
            _root = root
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if not _running:
                for key, value in _saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
                disable_http_propagation("app-function")
                _root = None
