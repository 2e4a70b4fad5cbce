"""examples/tool_agent: the real-model recipe's data, reward and its two apps (LangGraph and the
OpenAI Agents SDK), run against a scripted server that answers as Qwen2.5-Coder-0.5B does: a
bare JSON tool call, then, once asked, the answer. The recipe itself is measured, not tested
(docs/real-model.md); tests/test_real_model.py runs the real teacher when it is set up."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import tracerl
from tracerl.testing import ScriptedServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tool_agent"


def _load(name: str):
    sys.path.insert(0, str(EXAMPLE))
    try:
        spec = importlib.util.spec_from_file_location(f"tool_agent_{name}", EXAMPLE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))


def test_the_data_is_disjoint_by_arithmetic_and_as_the_make_data_script_writes_it():
    rows = {name: [json.loads(line) for line in (EXAMPLE / f"{name}.jsonl").read_text().splitlines()]
            for name in ("train", "test")}
    assert len(rows["train"]) >= 2000 and len(rows["test"]) >= 200
    make = _load("make_data")
    assert make.rows() == (rows["train"], rows["test"])  # the files are the script's, byte for byte in content

    def arithmetic(row: dict) -> tuple[int, ...]:
        return tuple(map(int, re.findall(r"\d+", row["question"])))

    assert not {arithmetic(r) for r in rows["train"]} & {arithmetic(r) for r in rows["test"]}
    for row in rows["test"]:
        a, b, *c = arithmetic(row)
        assert 100 <= max(a, b) <= 999 and row["answer"] in ({a * b} if not c else {a * b + c[0], a * b - c[0]})


def test_the_reward_wants_the_answer_sentence_and_says_whether_it_found_one():
    grade = _load("reward").grade
    task = tracerl.Task(id="t", answer=35481)
    assert grade(task, {"answer": "The answer is 35481."}) == {"reward": 1.0, "is_correct": True, "answer_found": 1.0}
    assert grade(task, {"answer": "the answer is 35,481"})["is_correct"]
    assert grade(task, {"answer": "The answer is 35482."}) == {"reward": 0.0, "is_correct": False, "answer_found": 1.0}
    assert grade(task, {"answer": "43*827-80 = 35481"})["answer_found"] == 0.0


def _teacher(messages, tools):
    """Qwen2.5-Coder-0.5B's two turns: bare JSON for the calculator, then the answer when asked."""
    if messages[-1]["role"] == "user" and "calculator has answered" in (messages[-1]["content"] or ""):
        result = next(m["content"] for m in reversed(messages) if m["role"] == "tool")
        return f"The answer is {result}."
    a, b, c = (list(map(int, re.findall(r"\d+", messages[-1]["content"]))) + [0])[:3]
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": f"{a}*{b}+{c}"}}]}


@pytest.mark.parametrize("app", ["agent", "agent_openai_agents"])
def test_each_app_calls_the_tool_then_answers_when_asked(app, tracing):
    solve = _load(app).solve
    task = tracerl.Task(id="t", data={"question": "A farm packs 431 eggs into each crate and fills 29 crates. "
                                                  "It also has 12 loose eggs. How many eggs are there in all?"},
                        answer=431 * 29 + 12)
    with ScriptedServer(_teacher, tracer_provider=tracing.provider) as server:
        ep = solve(task, tracerl.RolloutSettings(gateway_url=server.url, temperature=0.0), tracing=tracing,
                   reward=_load("reward").grade)
        if asyncio.iscoroutine(ep):  # the Agents SDK app is async
            ep = asyncio.run(ep)
    assert ep.termination_reason.value == "success" and ep.is_correct is True, (ep.error, ep.artifacts)
    first, second = ep.steps
    assert first.output_message.tool_calls[0].name == "calculator"
    roles = [m.role for m in second.input_messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]  # the same conversation from both frameworks
    assert second.input_messages[3].content == "12511"
