"""Tool calls as real models write them (tracerl.gateway.protocol.parse_tool_calls).

tests/data/qwen_coder_replies.jsonl holds 60 replies sampled (temperature 0.8) from
Qwen2.5-Coder-0.5B-Instruct (``tracerl model setup qwen2.5-coder-0.5b``) with a calculator tool
offered: 40 to arithmetic word problems, 20 to questions that need no tool. Each line's ``calls``
was checked by hand against the rule: ``<tool_call>`` blocks, or the whole reply (inside at most
one fence) one JSON object with a string name and object arguments; everything else is text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracerl.gateway.protocol import parse_tool_calls

REPLIES = [json.loads(line) for line in (Path(__file__).parent / "data" / "qwen_coder_replies.jsonl").open()]


def test_the_recorded_replies_cover_calls_invented_tools_and_text():
    calls = [r for r in REPLIES if r["calls"]]
    assert len(REPLIES) >= 50 and 10 <= len(calls) <= len(REPLIES) - 20
    assert any(name != "calculator" for r in calls for name, _ in r["calls"])  # invented tool names
    assert any("```" in r["reply"] and not r["calls"] for r in REPLIES)  # fenced JSON inside prose
    assert any(r["reply"].lstrip().startswith("{") and not r["calls"] for r in REPLIES)  # broken JSON


@pytest.mark.parametrize("index", range(len(REPLIES)))
def test_each_recorded_reply_parses_as_labelled(index):
    r = REPLIES[index]
    content, calls = parse_tool_calls(r["reply"])
    assert [[c["function"]["name"], json.loads(c["function"]["arguments"])] for c in calls] == r["calls"], r["reply"]
    assert content == (None if r["calls"] else r["reply"])  # a call's reply has no text left; text is kept whole
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in calls)


@pytest.mark.parametrize(("text", "expected"), [
    ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "2*3"}}\n</tool_call>',
     [["calculator", {"expression": "2*3"}]]),
    ('Let me compute. <tool_call>{"name": "c", "arguments": {}}</tool_call><tool_call>{"name": "d"}</tool_call>',
     [["c", {}], ["d", {}]]),  # tags: arguments may be left out
    ('```\n{"name": "calculator", "parameters": {"expression": "1+1"}}\n```', [["calculator", {"expression": "1+1"}]]),
    ('{"name": "calculator", "arguments": "{\\"expression\\": \\"5-2\\"}"}', [["calculator", {"expression": "5-2"}]]),
    ('{"name": "calculator"}', []),  # bare JSON without arguments is an answer, not a call
    ('{"name": "", "arguments": {}}', []),
    ('{"name": "calculator", "arguments": [1, 2]}', []),
    ('[{"name": "calculator", "arguments": {}}]', []),
    ('```json\n{"name": "calculator", "arguments": {}}\n```\nDone.', []),  # text after the fence
])
def test_the_rule_on_written_cases(text, expected):
    _, calls = parse_tool_calls(text)
    assert [[c["function"]["name"], json.loads(c["function"]["arguments"])] for c in calls] == expected


def test_calls_to_tools_not_offered_are_counted_per_step():
    from tracerl.core.types import Episode, Message, Step, ToolCall, Trajectory
    from tracerl.trainers.metrics import episode_metrics

    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {}}}]
    steps = [Step(id="a", tools=tools, output_message=Message(role="assistant", tool_calls=[
                 ToolCall(name="calculator"), ToolCall(name="total_pens")])),
             Step(id="b", tools=tools, output_message=Message(role="assistant", tool_calls=[
                 ToolCall(name="calculateEggs")])),
             Step(id="c", tools=tools, output_message=Message(role="assistant", content="The answer is 4."))]
    metrics = episode_metrics([Episode(id="e", trajectories=[Trajectory(steps=steps)])])
    assert metrics["rollout/unoffered_tool_calls"] == 2 and metrics["rollout/tool_use"] == 1.0
