"""The math agent as a LangChain tool-calling loop (no graph).

    python examples/math_agent_langchain.py --tasks 8
"""

from __future__ import annotations

from common import MAX_CALLS, TOOLS, calculator_result, problem, run
from langchain_core.messages import ToolMessage

import tracerl

tracerl.instrument("langchain")  # the one tracerl line


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    llm = config.chat_openai()  # ChatOpenAI on this episode's session URL, one connection pool for all
    model = llm.bind_tools(TOOLS).with_config(metadata={"tracerl_agent": "solver"})
    messages: list = problem(task).messages(task)  # OpenAI-style dicts; LangChain messages are appended
    answer = ""
    for _ in range(MAX_CALLS):
        reply = model.invoke(messages)
        messages.append(reply)
        answer = reply.content
        if not reply.tool_calls:
            break
        messages += [ToolMessage(calculator_result(c["args"]), tool_call_id=c["id"]) for c in reply.tool_calls]
    spec = problem(task)
    return spec.rewards(task, answer)  # reward, is_correct, answer_found


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
