"""The math agent on Anthropic's Messages API: the ``anthropic`` SDK's tool loop, unchanged
but for its base URL (the gateway serves ``/v1/messages``; no adapter: its spans are enough).

    python examples/math_agent_anthropic.py --tasks 8
    tracerl train arithmetic --agent examples/math_agent_anthropic.py:solve --steps 2
"""

from __future__ import annotations

from common import MAX_CALLS, TOOLS, calculator_result, instructions, problem, run

import tracerl

# The calculator in Anthropic's tool form (Chat Completions' "parameters" is its "input_schema")
CALCULATOR = {"name": TOOLS[0]["function"]["name"], "description": TOOLS[0]["function"]["description"],
              "input_schema": TOOLS[0]["function"]["parameters"]}


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    client = config.anthropic_client()  # anthropic.Anthropic(base_url=config.anthropic_base_url, ...)
    system, messages = instructions(problem(task).messages(task))
    answer = ""
    for _ in range(MAX_CALLS):
        reply = client.messages.create(**config.anthropic_kwargs(), system=system or "", messages=messages,
                                       tools=[CALCULATOR])
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        answer = "".join(b.text for b in reply.content if b.type == "text")
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": calculator_result(b.input)} for b in calls]})
    return problem(task).rewards(task, answer)  # reward, is_correct, answer_found


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
