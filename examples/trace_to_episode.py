"""End to end, trace -> episode: a LangGraph math agent's spans become training episodes.

What runs:
* a LangGraph agent (real LangGraph + ChatOpenAI) with a calculator tool, solving 4 tasks,
  each inside ``@tracerl.rollout`` (one episode = one session);
* one line, ``tracerl.instrument("langgraph")``, records the framework's spans (graph, nodes,
  LLM calls, tools) and carries W3C traceparent + baggage on the HTTP calls;
* the model is tracerl.testing.ScriptedServer: an OpenAI-compatible server that answers
  from a script and records the token-level span the tracerl gateway records (the real
  gateway and the bundled tiny model replace it once they land);
* spans go to a SQLite span store; the converter joins each framework span with the
  server's token span and prints the episodes.

    python examples/trace_to_episode.py [--db runs/demo-traces.db]
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Annotated, TypedDict

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from rich.console import Console  # noqa: E402

import tracerl  # noqa: E402
from tracerl.cli.render import episode_tree  # noqa: E402
from tracerl.testing import ScriptedServer, calculator_script  # noqa: E402

TASKS = [
    tracerl.Task(id=f"add-{a}-{b}", data={"question": f"What is {a}+{b}?"}, answer=a + b)
    for a, b in [(2, 3), (17, 25), (100, 1), (-4, 9)]
]


@tool
def calculator(expression: str) -> str:
    """Evaluate an integer expression a+b, a-b or a*b."""
    a, op, b = re.fullmatch(r"\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*", expression).groups()
    return str({"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op])


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_graph(llm: ChatOpenAI):
    model = llm.bind_tools([calculator])

    def agent(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: State) -> dict:
        calls = state["messages"][-1].tool_calls
        return {"messages": [ToolMessage(calculator.invoke(c["args"]), tool_call_id=c["id"]) for c in calls]}

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "agent")
    return graph.compile()


@tracerl.rollout(timeout_s=60)
def solve(task: tracerl.Task, config: tracerl.RolloutContext) -> dict:
    llm = config.chat_openai(temperature=0)
    result = build_graph(llm).invoke({"messages": [HumanMessage(task.data["question"])]})
    answer = re.findall(r"-?\d+", result["messages"][-1].content or "")
    correct = bool(answer) and int(answer[-1]) == task.answer
    return {"reward": float(correct), "is_correct": correct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="runs/demo-traces.db", help="span store file")
    args = parser.parse_args()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)

    tracerl.instrument("langgraph", store=args.db)  # the one line an app adds
    tracing = tracerl.setup_tracing(args.db)  # the same (idempotent): where spans go
    console = Console()
    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url, model="scripted", store=args.db)
        episodes = [solve(task, settings) for task in TASKS]

    for ep in episodes:
        console.print(episode_tree(ep))
    steps = [s for ep in episodes for s in ep.steps]
    joined = sum("framework_span_id" in s.metadata and "gateway_span_id" in s.metadata for s in steps)
    model_tokens = sum(sum(seq.mask) for ep in episodes for t in ep.trajectories for seq in t.sequences)
    accuracy = sum(bool(ep.is_correct) for ep in episodes) / len(episodes)
    console.print(
        f"\n[bold]{len(episodes)} episodes[/], {len(steps)} LLM calls, {joined} framework spans joined to "
        f"their token spans, {model_tokens} model tokens with mask 1, accuracy {accuracy:.0%}"
    )
    console.print(f"Inspect them: tracerl traces list --db {args.db}")


if __name__ == "__main__":
    main()
