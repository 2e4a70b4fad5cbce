"""The built-in agent of the synthetic tasks: a plain HTTP chat loop, no framework, no adapter.

It reaches the gateway through the session URL alone (``config.base_url``), which is all the
gateway needs to record the episode: it is also the reference for "an agent without any
adapter". It offers the tools the task declares (``tools(task)``: the calculator on arithmetic
and calculator); the model may call them (each result goes back as a ``tool`` message) before it
answers. Tasks with feedback (multiturn) get the task's feedback as a new user turn until the
answer is right or the turns run out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tracerl.core.clients import http_timeout, tls_context
from tracerl.core.rollout import RolloutContext
from tracerl.core.rollout_fn import rollout
from tracerl.core.types import Task

from .synthetic import TASKS, calculator

MAX_TOOL_CALLS = 2


def _tool_result(call: dict[str, Any]) -> str:
    try:
        args = json.loads(call["function"].get("arguments") or "{}")
        return calculator(str(args.get("expression", "")))
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        return f"error: {exc}"


def _body(config: RolloutContext, messages: list[dict[str, Any]], tools: list[dict] | None, n_call: int) -> dict:
    body: dict[str, Any] = {"model": config.model, "messages": messages, **config.sampling}
    if "seed" in body:  # a distinct, reproducible seed per call of the episode
        body["seed"] = int(body["seed"]) + n_call
    if tools:
        body["tools"] = tools
    return body


def chat_client(config: RolloutContext) -> Any:
    """An HTTP client for the episode's session URL."""
    import httpx

    # On the process's one TLS context: httpx builds a new one per client, and loading the CA
    # bundle costs ~17 ms of CPU, most of an episode's client-side CPU (tracerl.core.clients).
    # Reads wait as long as the episode may run: a busy engine is slow, not broken (issue 42).
    return httpx.Client(base_url=config.base_url, headers={"Authorization": f"Bearer {config.api_key}"},
                        timeout=http_timeout(config.timeout_s), verify=tls_context())


def chat_turn(http: Any, config: RolloutContext, messages: list[dict[str, Any]], tools: list[dict] | None,
              n_call: int) -> dict[str, Any]:
    """One chat completion; the reply is appended to ``messages`` and returned."""
    reply = http.post("/chat/completions", json=_body(config, messages, tools, n_call))
    reply.raise_for_status()
    message = reply.json()["choices"][0]["message"]
    messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
    return message


def chat_loop(
    task: Task, config: RolloutContext, spec: Any, tools: list[dict] | None,
    tool_results: Callable[[list[dict[str, Any]]], list[dict[str, Any]]], max_tool_calls: int,
) -> dict[str, Any]:
    """Chat until the answer stands: tool calls (at most ``max_tool_calls``) are answered with
    ``tool_results``, ``spec.feedback`` becomes a new user turn. Returns reward and correctness."""
    messages = spec.messages(task)
    text, turns, calls = None, 0, 0
    with chat_client(config) as http:
        while True:
            message = chat_turn(http, config, messages, tools, calls)
            calls += 1
            if message.get("tool_calls") and calls <= max_tool_calls:
                messages += tool_results(message["tool_calls"])
                continue
            turns += 1
            text = message.get("content")
            feedback = spec.feedback(task, text, turns)
            if feedback is None:
                break
            messages.append({"role": "user", "content": feedback})
    rewards = getattr(spec, "rewards", None)  # a task spec of the user's may predate rewards()
    if rewards is None:
        return {"reward": spec.reward(task, text, turns), "is_correct": spec.is_correct(task, text)}
    return rewards(task, text, turns)


@rollout
def math_agent(task: Task, config: RolloutContext) -> dict[str, Any]:
    """Solve one synthetic task; returns the reward and whether the last answer is right."""
    spec = TASKS[task.dataset or "arithmetic"]
    tools = spec.tools(task)

    def results(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": c.get("id"), "content": _tool_result(c)} for c in calls]

    return chat_loop(task, config, spec, tools, results, MAX_TOOL_CALLS)


@rollout
def question_agent(task: Task, config: RolloutContext) -> str:
    """The default agent of the user's own data: the row's ``question`` as one user turn, the
    model's reply returned for the reward function to grade (``--reward``)."""
    from .data import question_messages

    messages = question_messages(task)
    with chat_client(config) as http:
        return str(chat_turn(http, config, messages, None, 0).get("content") or "")
