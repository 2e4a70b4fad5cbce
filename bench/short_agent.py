"""bench/vs_trl.py's agent for ``--case short``: the question as one user turn, one call on the
process's shared OpenAI client (``RolloutContext.openai_client``), no tools, graded by the first
integer of the reply (``first_integer_correct``, the rule TRL's side copies)."""

from __future__ import annotations

import re
from typing import Any

import tracerl

FIRST_INTEGER = re.compile(r"-?\d+")


def first_integer_correct(text: str | None, answer: int) -> bool:
    found = FIRST_INTEGER.search(text or "")
    return found is not None and int(found[0]) == answer


def short_messages(question: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}]


@tracerl.rollout
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict[str, Any]:
    reply = config.openai_client().chat.completions.create(
        model=config.model, messages=short_messages(task.data["question"]), **config.sampling)
    correct = first_integer_correct(reply.choices[0].message.content, int(task.answer))
    return {"reward": float(correct), "is_correct": correct}


@tracerl.rollout
async def solve_async(task: tracerl.Task, config: tracerl.RolloutContext) -> dict[str, Any]:
    """The same on the shared async client: every episode on one event loop, no thread each."""
    reply = await config.async_openai_client().chat.completions.create(
        model=config.model, messages=short_messages(task.data["question"]), **config.sampling)
    correct = first_integer_correct(reply.choices[0].message.content, int(task.answer))
    return {"reward": float(correct), "is_correct": correct}
