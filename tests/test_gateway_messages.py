"""Anthropic's Messages API at the gateway, driven by the real ``anthropic`` client and
LangChain's ``ChatAnthropic``: the same prompt tokens and span as the Chat Completions call of
the same conversation, tool round trips, the event stream, errors in Anthropic's shape."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest
from openai import OpenAI

from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore
from tracerl.gateway import GatewayServer
from tracerl.testing import ScriptedEngine

MODEL = "tracerl-tiny"
QUESTION = "What is 12 + 30?"
CALCULATOR = {"name": "calculator", "description": "Evaluate an arithmetic expression.",
              "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}},
                               "required": ["expression"]}}
AS_CHAT_TOOL = {"type": "function", "function": {"name": CALCULATOR["name"], "description": CALCULATOR["description"],
                                                 "parameters": CALCULATOR["input_schema"]}}


def _script(prompt: str) -> str:
    if "tool_response" in prompt or "<|im_start|>tool" in prompt:
        return "The answer is 42. STOP here"
    if "calculator" in prompt:
        return '<tool_call>{"name": "calculator", "arguments": {"expression": "12+30"}}</tool_call>'
    return "Forty-two."


@pytest.fixture
def scripted(tiny_engine, store):
    with GatewayServer(ScriptedEngine(tiny_engine.tokenizer, _script, model_name=MODEL), store) as gw:
        yield gw


def _spans(store, session):
    spans = [s for s in store.spans(session_id=session) if s.attributes.get("tracerl.source") == "gateway"]
    return sorted(spans, key=lambda s: s.attributes["tracerl.llm.sequence"])


def _client(gw, session):
    return anthropic.Anthropic(base_url=gw.session_url(session).removesuffix("/v1"), api_key="x")


def test_a_message_is_the_chat_answer_with_the_same_tokens_recorded(tiny_engine, store):
    with GatewayServer(tiny_engine, store) as gw:
        chat = OpenAI(base_url=gw.session_url("chat"), api_key="x").chat.completions.create(
            model=MODEL, max_tokens=16, temperature=0,
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}])
        client = _client(gw, "msg")
        msg = client.messages.create(model=MODEL, max_tokens=16, extra_body={"temperature": 0}, messages=[
            {"role": "user", "content": QUESTION}],
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}])
        counted = client.messages.count_tokens(model=MODEL, system="Be brief.",
                                               messages=[{"role": "user", "content": QUESTION}])
        with client.messages.stream(model=MODEL, max_tokens=16, extra_body={"temperature": 0}, system="Be brief.",
                                    messages=[{"role": "user", "content": QUESTION}]) as stream:
            deltas = [e.delta.text for e in stream if e.type == "content_block_delta"]
            streamed = stream.get_final_message()
    assert msg.content[0].text == chat.choices[0].message.content
    assert msg.stop_reason == ("max_tokens" if chat.choices[0].finish_reason == "length" else "end_turn")
    (chat_span,), (span, streamed_span) = _spans(store, "chat"), _spans(store, "msg")
    for key in ("tracerl.llm.prompt_token_ids", "tracerl.llm.response_token_ids", "gen_ai.input.messages"):
        assert span.attributes[key] == chat_span.attributes[key] == streamed_span.attributes[key]
    assert msg.usage.input_tokens == counted.input_tokens == len(span.attributes["tracerl.llm.prompt_token_ids"])
    assert msg.usage.output_tokens == len(span.attributes["tracerl.llm.response_token_ids"])
    assert len(deltas) > 1 and "".join(deltas) == streamed.content[0].text == msg.content[0].text
    assert streamed.stop_reason == msg.stop_reason and streamed.usage.output_tokens == msg.usage.output_tokens


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_round_trip_is_one_episode_shaped_as_through_chat_completions(scripted, store, stream):
    client = _client(scripted, "anthropic")

    def ask(messages, **extra):
        kwargs = dict(model=MODEL, max_tokens=64, tools=[CALCULATOR], messages=messages, **extra)
        if not stream:
            return client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as events:
            types = [e.type for e in events]
            assert types[0] == "message_start" and "message_stop" in types
            return events.get_final_message()

    first = ask([{"role": "user", "content": QUESTION}])
    (call,) = first.content
    assert first.stop_reason == "tool_use" and call.type == "tool_use"
    assert call.name == "calculator" and call.input == {"expression": "12+30"}
    history = [{"role": "user", "content": QUESTION},
               {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "42"}]}]
    second = ask(history, stop_sequences=["STOP"])
    assert second.content[0].text == "The answer is 42. "
    assert second.stop_reason == "stop_sequence" and second.stop_sequence == "STOP"

    chat = OpenAI(base_url=scripted.session_url("chat"), api_key="x")
    reply = chat.chat.completions.create(model=MODEL, max_tokens=64, tools=[AS_CHAT_TOOL],
                                         messages=[{"role": "user", "content": QUESTION}])
    tc = reply.choices[0].message.tool_calls[0]
    chat.chat.completions.create(model=MODEL, max_tokens=64, tools=[AS_CHAT_TOOL], stop=["STOP"], messages=[
        {"role": "user", "content": QUESTION}, reply.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": tc.id, "content": "42"}])
    ours, theirs = (episode_from_spans(_spans(store, s)) for s in ("anthropic", "chat"))
    assert len(ours.trajectories) == len(theirs.trajectories) == 1  # the tool turn continues the sequence
    a, b = ours.trajectories[0].steps, theirs.trajectories[0].steps
    assert [s.prompt_ids for s in a] == [s.prompt_ids for s in b]
    assert [s.response_ids for s in a] == [s.response_ids for s in b]
    assert [s.output_message.tool_calls[0].name if s.output_message.tool_calls else None for s in a] == \
        ["calculator", None]


def test_langchain_chat_anthropic_calls_the_tool_through_the_gateway(scripted, store):
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage, ToolMessage

    llm = ChatAnthropic(model=MODEL, base_url=scripted.session_url("lc").removesuffix("/v1"), api_key="x",
                        max_tokens=64).bind_tools([CALCULATOR])
    first = llm.invoke([HumanMessage(QUESTION)])
    (call,) = first.tool_calls
    assert call["name"] == "calculator" and call["args"] == {"expression": "12+30"}
    second = llm.invoke([HumanMessage(QUESTION), first, ToolMessage("42", tool_call_id=call["id"])])
    assert second.text.startswith("The answer is 42.")
    assert len(episode_from_spans(_spans(store, "lc")).trajectories) == 1


def test_the_rollout_context_builds_anthropic_clients_for_its_session(scripted, store):
    from tracerl.core.rollout import RolloutContext
    from tracerl.core.types import Task

    ctx = RolloutContext(episode_id="ep-1", task=Task(id="t", data={}), base_url=scripted.session_url("ep-1"),
                         model=MODEL, api_key="x", sampling={"max_tokens": 32, "temperature": 0.5})
    assert ctx.anthropic_base_url == scripted.url + "/sessions/ep-1"
    ctx.anthropic_client().messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert ctx.chat_anthropic().invoke("hi").content == "Forty-two."
    assert len(_spans(store, "ep-1")) == 2


def test_the_sdk_key_header_is_accepted_like_a_bearer_key(tiny_engine, tmp_path):
    with SpanStore(tmp_path / "k.db") as store, GatewayServer(tiny_engine, store, api_key="s3cret") as gw:
        good = anthropic.Anthropic(base_url=gw.url, api_key="s3cret")
        assert good.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "hi"}]).id
        with pytest.raises(anthropic.AuthenticationError, match="x-api-key"):
            anthropic.Anthropic(base_url=gw.url, api_key="wrong").messages.create(
                model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "hi"}])


def test_what_the_messages_route_does_not_serve_is_an_anthropic_shaped_400(scripted, store):
    client = anthropic.Anthropic(base_url=scripted.url, api_key="x")
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        client.messages.create(model=MODEL, max_tokens=64, messages=hi,
                               thinking={"type": "enabled", "budget_tokens": 32})
    with pytest.raises(anthropic.BadRequestError, match="server tools"):
        client.messages.create(model=MODEL, max_tokens=64, messages=hi,
                               tools=[{"type": "web_search_20250305", "name": "web_search"}])
    with pytest.raises(anthropic.BadRequestError, match="tool_choice"):
        client.messages.create(model=MODEL, max_tokens=64, messages=hi, tools=[CALCULATOR],
                               tool_choice={"type": "any"})
    with pytest.raises(anthropic.NotFoundError, match="not served here"):
        client.messages.create(model="not-this-model", max_tokens=64, messages=hi)
    url = scripted.url + "/v1/messages"
    for body in ({"model": MODEL, "messages": hi}, {"model": MODEL, "max_tokens": 8, "messages": []},
                 {"model": MODEL, "max_tokens": 8, "messages": [{"role": "system", "content": "x"}]},
                 {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": [
                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]},
                 {"model": MODEL, "max_tokens": 0, "messages": hi}, [1]):
        response = httpx.post(url, json=body)
        doc = response.json()
        assert response.status_code == 400 and doc["type"] == "error", response.text
        assert doc["error"]["type"] == "invalid_request_error" and doc["error"]["message"]
    assert httpx.post(url, content=b"{").json()["error"]["type"] == "invalid_request_error"
    assert store.count() == 0
    assert json.loads(httpx.post(scripted.url + "/v1/chat/completions", json={}).text)["error"]["param"]
