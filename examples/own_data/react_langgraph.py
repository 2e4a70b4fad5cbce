"""A LangGraph ReAct agent with two tools, trained on your own data and reward (README.md).

    tracerl train --data examples/own_data/problems.jsonl --holdout 0.2 \\
        --agent examples/own_data/react_langgraph.py:solve --reward examples/own_data/reward.py:grade

The app knows nothing of rewards: it returns its final answer's text, and reward.py grades it.
"""

from __future__ import annotations

from arith_tools import calculator, lookup_constant
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

import tracerl

tracerl.instrument("langgraph")  # the one adapter line: the graph's model calls become spans

# The system prompt goes first, and for the bundled tiny model it is the exact one it was trained
# on; a real model gets your own instructions here (which tools to use, how to answer).
SYSTEM = "End your reply with: The answer is <answer>."
TOOLS = [tool(calculator), tool(lookup_constant)]
# Each model call and each tool round is a graph step. Six allow two tool rounds; a third model
# call that still wants a tool gets create_react_agent's apology as the answer, not an error.
STEPS = 6


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    llm = config.chat_openai()  # this episode's model and sampling, on the process's one connection pool
    agent = create_react_agent(llm, TOOLS, prompt=SYSTEM)
    result = agent.invoke({"messages": [("user", task.data["question"])]}, {"recursion_limit": STEPS})
    return result["messages"][-1].content  # the final answer; reward.py grades it
