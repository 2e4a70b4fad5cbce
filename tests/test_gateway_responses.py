"""POST /v1/responses: the Responses API (the OpenAI Agents SDK's default) served as a chat call."""

from __future__ import annotations

import json

import httpx
import pytest
from openai import BadRequestError, OpenAI

from tracerl.core.store import SpanStore
from tracerl.gateway import GatewayServer
from tracerl.testing import ScriptedEngine

QUESTION = "What is 12 + 30?"
CALCULATOR = {"type": "function", "name": "calculator", "description": "Evaluate an arithmetic expression.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}}


@pytest.fixture
def store(tmp_path):
    with SpanStore(tmp_path / "gw.db") as s:
        yield s


@pytest.fixture
def gateway(tiny_engine, store):
    with GatewayServer(tiny_engine, store) as gw:
        yield gw


def _spans(store, session):
    spans = [r for r in store.spans(session_id=session) if r.attributes.get("tracerl.source") == "gateway"]
    return sorted(spans, key=lambda s: s.attributes["tracerl.llm.sequence"])


def test_a_response_is_the_chat_answer_with_the_same_tokens_recorded(gateway, store):
    client = OpenAI(base_url=gateway.session_url("s-1"), api_key="x")
    chat = client.chat.completions.create(model="tracerl-tiny", max_tokens=16, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
    resp = client.responses.create(model="tracerl-tiny", instructions="Be brief.", input=QUESTION,
                                   max_output_tokens=16, temperature=0)
    assert resp.output_text == chat.choices[0].message.content
    assert resp.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    chat_span, resp_span = _spans(store, "s-1")
    for key in ("tracerl.llm.prompt_token_ids", "tracerl.llm.response_token_ids", "gen_ai.input.messages"):
        assert resp_span.attributes[key] == chat_span.attributes[key]
    assert resp_span.attributes["gen_ai.response.id"] == resp.id
    assert resp.usage.output_tokens == len(resp_span.attributes["tracerl.llm.response_token_ids"])

    events = list(client.responses.create(model="tracerl-tiny", instructions="Be brief.", input=QUESTION,
                                          max_output_tokens=16, temperature=0, stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == resp.output_text
    assert events[-1].response.output_text == resp.output_text
    assert len(_spans(store, "s-1")) == 3


def test_function_calls_go_out_as_items_and_come_back_as_tool_messages(tiny_engine, tmp_path):
    def script(prompt: str) -> str:
        if "<|im_start|>tool" in prompt or "tool_response" in prompt:
            return "The answer is 42."
        return '<tool_call>{"name": "calculator", "arguments": {"expression": "12+30"}}</tool_call>'

    with SpanStore(tmp_path / "gw.db") as store, \
            GatewayServer(ScriptedEngine(tiny_engine.tokenizer, script, model_name="tracerl-tiny"), store) as gw:
        client = OpenAI(base_url=gw.session_url("s-2"), api_key="x")
        first = client.responses.create(model="tracerl-tiny", input=QUESTION, tools=[CALCULATOR])
        (call,) = first.output
        assert call.type == "function_call" and call.name == "calculator"
        assert json.loads(call.arguments) == {"expression": "12+30"}
        history = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True),
                   {"type": "function_call_output", "call_id": call.call_id, "output": "42"}]
        second = client.responses.create(model="tracerl-tiny", input=history, tools=[CALCULATOR])
        assert second.output_text == "The answer is 42."
        spans = _spans(store, "s-2")
    offered = json.loads(spans[0].attributes["gen_ai.tool.definitions"])
    assert [t["function"]["name"] for t in offered] == ["calculator"]
    last_input = json.loads(spans[1].attributes["gen_ai.input.messages"])[-1]
    assert last_input["role"] == "tool" and last_input["parts"][0]["response"] == "42"


def test_what_is_not_served_is_a_clear_400(gateway, store):
    client = OpenAI(base_url=gateway.url + "/v1", api_key="x")
    with pytest.raises(BadRequestError, match="whole conversation"):
        client.responses.create(model="tracerl-tiny", input="hi", previous_response_id="resp_1")
    with pytest.raises(BadRequestError, match="only function tools"):
        client.responses.create(model="tracerl-tiny", input="hi", tools=[{"type": "web_search"}])
    url = gateway.url + "/v1/responses"
    for body in ({"model": "tracerl-tiny", "input": 5}, {"model": "tracerl-tiny"}, [1, 2],
                 {"model": "tracerl-tiny", "input": "hi", "max_output_tokens": 0}):
        response = httpx.post(url, json=body)
        assert response.status_code == 400 and "message" in response.json()["error"], response.text
    assert store.count() == 0
