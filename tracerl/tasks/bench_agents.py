"""Default agents of the registry's real benchmarks: plain HTTP chat loops, no framework.

Like :mod:`tracerl.tasks.agents` they reach the gateway through ``config.base_url`` alone.
``chat_agent`` serves any registered task by name (``task.dataset``): it sends
``spec.messages(task)``, offers ``spec.tools(task)`` and answers tool calls with
``spec.call_tool`` (hotpotqa's search), and turns ``spec.feedback`` into new user turns.
``game_agent`` plays a game (:mod:`tracerl.tasks.games`): each reply's moves are applied and
what the player sees is the next user turn, until the game ends or ``max_turns`` replies.
"""

from __future__ import annotations

import json
from typing import Any

from tracerl.core.rollout import RolloutContext
from tracerl.core.rollout_fn import rollout
from tracerl.core.types import Task

from .agents import chat_client, chat_loop, chat_turn

MAX_TOOL_CALLS = 4


def _tool_results(spec: Any, task: Task, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        try:
            args = json.loads(call["function"].get("arguments") or "{}")
            result = spec.call_tool(task, call["function"]["name"], args if isinstance(args, dict) else {})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            result = f"error: {exc}"
        out.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
    return out


@rollout
def chat_agent(task: Task, config: RolloutContext) -> dict[str, Any]:
    """Solve one task of the registry; returns its reward and whether the answer is right."""
    from . import get

    spec = get(task.dataset or "")
    return chat_loop(task, config, spec, spec.tools(task),
                     lambda calls: _tool_results(spec, task, calls), MAX_TOOL_CALLS)


@rollout
def game_agent(task: Task, config: RolloutContext) -> dict[str, Any]:
    """Play one game (FrozenLake, Sokoban, Wordle): each reply is applied, what the player sees
    next is the next user turn; the reward replays all replies (see tasks.games)."""
    from . import get

    game = get(task.dataset or "frozenlake").source
    messages = game.messages(task)
    replies: list[str] = []
    with chat_client(config) as http:
        for turn in range(game.max_turns):
            replies.append(chat_turn(http, config, messages, None, turn).get("content") or "")
            observation, done = game.observe(task, "\n".join(replies))
            if done:
                break
            messages.append({"role": "user", "content": observation})
    transcript = "\n".join(replies)
    return {"reward": game.reward(task, transcript, len(replies)), "is_correct": game.is_correct(task, transcript)}


frozenlake_agent = game_agent  # the name FrozenLake's agent had first
