"""The built-in terminal agent: a plain HTTP chat loop whose replies run in the task's work folder.

Each reply is a command: a ``shell`` tool call (``{"command": ...}``), or else the reply's text,
the contents of its ```bash blocks when it has some (a chatty model's prose around them is not
run). The output comes back as the tool result or as the next user turn, ``$ command`` above
it. A reply of ``exit`` (or nothing) ends the episode, as does ``max_turns`` replies; then the
task's test.sh decides the reward. Every command is an ``execute_tool shell`` span with the
command and its output, and setup and test runs are ``tracerl.terminal.setup``/``.test`` spans,
so ``tracerl traces show`` and the dashboard show what the agent typed and what it saw.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tracerl.core.record import tool_span
from tracerl.core.rollout import RolloutContext
from tracerl.core.rollout_fn import rollout
from tracerl.core.types import Task

from ..agents import chat_client, chat_turn
from .environment import Workspace, shown

SHELL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Run a bash command (or a short script) in the work folder; returns its output and exit status.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}
_FENCE = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_DONE = {"", "exit", "done", "exit 0", "logout"}


def command_in(text: str | None) -> str | None:
    """The command a text reply types: its ```bash blocks, else the text itself; None to finish."""
    text = (text or "").strip()
    blocks = _FENCE.findall(text)
    command = "\n".join(b.strip() for b in blocks) if blocks else text
    command = "\n".join(line[2:] if line.startswith("$ ") else line for line in command.splitlines()).strip()
    return None if command.lower() in _DONE else command


def _run(work: Workspace, command: str, call_id: str | None = None) -> str:
    with tool_span("shell", {"command": command}, call_id=call_id) as span:
        result = work.run(command)
        text = shown(result)
        timed_out = result.returncode is None or not result.reason.startswith("exit status")
        span.result(text, error=result.reason if timed_out else None,
                    **{"tracerl.shell.exit_code": -1 if result.returncode is None else result.returncode,
                       "tracerl.shell.isolation": result.isolation})
    return text


def _tool_calls(work: Workspace, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = None
        if fn.get("name") != "shell" or not isinstance(args, dict) or not isinstance(args.get("command"), str):
            result = f"error: call the shell tool with {{\"command\": \"...\"}}, not {fn.get('name')}({fn.get('arguments')})"
        else:
            result = _run(work, args["command"], call.get("id"))
        out.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
    return out


def _stage(name: str, work: Workspace, result: Any) -> None:
    """A span for the environment's own scripts (setup, tests) with their outputs, timed as they ran."""
    import time

    from opentelemetry.trace import Status, StatusCode

    from tracerl.core.record import session_tracer

    attrs = {"tracerl.span.type": "terminal", "tracerl.terminal.task": work.task.name,
             "tracerl.shell.exit_code": -1 if result.returncode is None else result.returncode,
             "tracerl.shell.reason": result.reason, "tracerl.shell.output": result.stdout[-4000:]}
    end = time.time_ns()
    span = session_tracer("terminal_agent").start_span(f"tracerl.terminal.{name}", attributes=attrs,
                                                start_time=end - int(result.seconds * 1e9))
    if result.returncode is None:  # killed at its timeout: the verdict was never given, say so
        span.set_status(Status(StatusCode.ERROR, f"{name}.sh {result.reason}"))
    span.end(end_time=end)


def _untested(work: Workspace, verdict: Any) -> None:
    """A test.sh killed at its timeout scores 0; the episode says why (termination ``timeout``)."""
    from tracerl.core.rollout import _current  # the open session of this rollout
    from tracerl.core.types import TerminationReason

    sess = _current.get()
    if verdict.returncode is None and sess is not None:
        sess.end(TerminationReason.TIMEOUT, f"test.sh of {work.task.name} ran past its test_timeout_s "
                 f"({verdict.reason}); scored 0")


@rollout
def terminal_agent(task: Task, config: RolloutContext) -> dict[str, Any]:
    """Work one terminal task at the shell; the reward is its test script's verdict."""
    from tracerl.tasks import get

    source = get(task.dataset or "terminal").source
    spec = source.find(task)
    messages = source.messages(task)
    with Workspace(spec) as work, chat_client(config) as http:
        if work.setup_result is not None:
            _stage("setup", work, work.setup_result)
        for turn in range(spec.max_turns):
            message = chat_turn(http, config, messages, [SHELL_TOOL], turn)
            if message.get("tool_calls"):
                messages += _tool_calls(work, message["tool_calls"])
                continue
            command = command_in(message.get("content"))
            if command is None:
                break
            messages.append({"role": "user", "content": f"$ {command}\n{_run(work, command)}"})
        verdict = work.test()
        _stage("test", work, verdict)
        _untested(work, verdict)
    return {"reward": 1.0 if verdict.ok else 0.0, "is_correct": verdict.ok}
