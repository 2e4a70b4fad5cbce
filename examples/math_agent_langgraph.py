"""The math agent as a LangGraph graph: a "solver" node calling the model, a "tools" node.

    python examples/math_agent_langgraph.py --tasks 8
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from common import MAX_CALLS, TOOLS, calculator_result, problem, run
from langchain_core.messages import AnyMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import tracerl

tracerl.instrument("langgraph")  # the one tracerl line


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build(llm: ChatOpenAI):
    model = llm.bind_tools(TOOLS)

    def solver(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: State) -> dict:
        calls = state["messages"][-1].tool_calls
        return {"messages": [ToolMessage(calculator_result(c["args"]), tool_call_id=c["id"]) for c in calls]}

    def route(state: State) -> str:
        calls = sum(1 for m in state["messages"] if m.type == "ai")
        return "tools" if state["messages"][-1].tool_calls and calls < MAX_CALLS else END

    graph = StateGraph(State)
    graph.add_node("solver", solver)
    graph.add_node("tools", tools)
    graph.add_edge(START, "solver")
    graph.add_conditional_edges("solver", route)
    graph.add_edge("tools", "solver")
    return graph.compile()


@tracerl.rollout(timeout_s=120)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    llm = config.chat_openai()  # ChatOpenAI on this episode's session URL, one connection pool for all
    result = build(llm).invoke({"messages": problem(task).messages(task)})  # OpenAI-style dicts work as they are
    answer = result["messages"][-1].content
    spec = problem(task)
    return spec.rewards(task, answer)  # reward, is_correct, answer_found


if __name__ == "__main__":
    run(solve, __doc__.splitlines()[0])
