"""The math agent as a plain LiteLLM tool-calling loop.

    python examples/math_agent_litellm.py --tasks 8
"""

from __future__ import annotations

import litellm
from common import MAX_CALLS, TOOLS, calculator_result, problem, run

import tracerl

tracerl.instrument("litellm")  # the one tracerl line


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    messages = problem(task).messages(task)
    answer = ""
    for _ in range(MAX_CALLS):
        reply = litellm.completion(  # this episode's model and sampling, on one connection pool
            **config.litellm_kwargs(), messages=messages, tools=TOOLS, metadata={"tracerl_agent": "solver"},
        ).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        answer = reply.content or ""
        if not reply.tool_calls:
            break
        for tc in reply.tool_calls:
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": calculator_result(tc.function.arguments)})
    spec = problem(task)
    return spec.rewards(task, answer)  # reward, is_correct, answer_found


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
