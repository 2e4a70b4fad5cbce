"""The recipe's app: a LangGraph ReAct agent with a calculator tool, on any model's gateway.

    tracerl eval --model qwen2.5-coder-0.5b --data examples/tool_agent/test.jsonl \\
        --agent examples/tool_agent/agent.py:solve --reward examples/tool_agent/reward.py:grade

It knows nothing of rewards or of which model serves it: it returns the final reply, and
reward.py grades it outside the app. The same app, written for the OpenAI Agents SDK, is
agent_openai_agents.py.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from shared import AFTER_TOOL, MODEL_CALLS, SYSTEM, calculator

import tracerl

tracerl.instrument("langgraph")  # the one adapter line

# Each model call and each tool round is a graph step; past the last model call
# create_react_agent answers for the model.
STEPS = 2 * MODEL_CALLS
TOOLS = [tool(calculator)]


def ask_for_the_answer(state: dict) -> dict:
    """Before a model call that follows a tool's result (not its error), a user turn asking for
    the answer; kept in the conversation, so every turn extends the one before."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage) and not str(last.content).startswith(("error", "Error")):
        return {"messages": [HumanMessage(AFTER_TOOL)]}
    return {}


@tracerl.rollout(timeout_s=600)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> str:
    agent = create_react_agent(config.chat_openai(), TOOLS, prompt=SYSTEM, pre_model_hook=ask_for_the_answer)
    result = agent.invoke({"messages": [("user", task.data["question"])]}, {"recursion_limit": STEPS + MODEL_CALLS})
    return result["messages"][-1].content  # the final reply; reward.py grades it
