"""The default agents of the real benchmarks against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracerl
from tracerl import tasks
from tracerl.tasks.bench_agents import chat_agent, frozenlake_agent
from tracerl.testing import ScriptedServer

DATA = Path(__file__).parent / "data"


def _settings(server):
    return tracerl.RolloutSettings(gateway_url=server.url, model="scripted", api_key="x")


def test_chat_agent_solves_a_math_benchmark_task(tracing):
    task = next(t for t in tasks.get("gsm8k").tasks("test", 3, path=DATA) if t.answer == "1500")
    with ScriptedServer(lambda messages, tools: "250 * 6 = 1500. The answer is \\boxed{1500}.",
                        tracer_provider=tracing.provider) as server:
        episode = chat_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 1.0 and episode.is_correct is True
    assert server.requests and server.requests[0]["body"]["messages"][0]["content"].startswith("Solve the problem")


def test_chat_agent_uses_the_hotpotqa_search_tool(tracing):
    task = next(t for t in tasks.get("hotpotqa").tasks("test", 3, path=DATA) if t.answer == "1998")

    def script(messages, tools):
        if messages[-1]["role"] == "tool":
            found = "1998" in messages[-1]["content"]
            return f"The answer is {'1998' if found else 'unknown'}."
        assert tools and tools[0]["function"]["name"] == "search"
        return {"content": None, "tool_calls": [{"name": "search", "arguments": {"query": "Nightfall opera performed"}}]}

    with ScriptedServer(script, tracer_provider=tracing.provider) as server:
        episode = chat_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 1.0
    tool_message = [m for m in server.requests[-1]["body"]["messages"] if m["role"] == "tool"][0]
    assert "Nightfall" in json.loads(tool_message["content"])[0]


def test_frozenlake_agent_plays_until_the_goal(tracing):
    task = tasks.get("frozenlake").tasks("test", 1, seed=0)[0]
    moves = iter(task.answer)
    with ScriptedServer(lambda messages, tools: f"Move: {next(moves)}", tracer_provider=tracing.provider) as server:
        episode = frozenlake_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 1.0 and episode.is_correct is True
    assert len(server.requests) == len(task.answer)
    assert "You moved" in server.requests[-1]["body"]["messages"][-1]["content"]


def test_frozenlake_agent_stops_after_max_turns_without_reward(tracing):
    task = tasks.get("frozenlake").tasks("test", 1, seed=0)[0]
    with ScriptedServer(lambda messages, tools: "I am not sure.", tracer_provider=tracing.provider) as server:
        episode = frozenlake_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 0.0 and len(server.requests) == tasks.get("frozenlake").max_turns


@pytest.mark.parametrize(("name", "shown"), [("arithmetic", "calculator"), ("calculator", "calculator"),
                                             ("countdown", "none"), ("multiturn", "none")])
def test_tasks_show_names_the_tools_the_default_agent_offers(name, shown, capsys, tracing):
    from tracerl.cli.main import main
    from tracerl.tasks.agents import math_agent

    assert main(["tasks", "show", name, "--no-sample"]) == 0
    assert f"  tools    {shown}\n" in capsys.readouterr().out
    offered: list[list[str]] = []

    def script(messages, tools):
        offered.append([t["function"]["name"] for t in tools or ()])
        return "The answer is 0."

    task = tasks.get(name).tasks("test", 1, seed=0)[0]
    with ScriptedServer(script, tracer_provider=tracing.provider) as server:
        math_agent(task, _settings(server), tracing=tracing)
    assert offered and all(names == ([] if shown == "none" else [shown]) for names in offered)
