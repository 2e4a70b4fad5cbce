"""Clients nobody here wrote, against the gateway serving the tiny model: each call's span
holds token ids that decode to the text the client received."""

from __future__ import annotations

import pytest

from tracerl.core.store import SpanStore
from tracerl.gateway import GatewayServer

QUESTION = "What is 7 + 5?"


@pytest.fixture
def gateway(tiny_engine, tmp_path):
    with SpanStore(tmp_path / "clients.db") as store, GatewayServer(tiny_engine, store) as gw:
        yield gw


def _only_span(gw, session):
    spans = [s for s in gw.store.spans(session_id=session) if s.attributes.get("tracerl.source") == "gateway"]
    assert len(spans) == 1
    return spans[0].attributes


def _decoded(engine, attrs):
    return engine.tokenizer.decode(attrs["tracerl.llm.response_token_ids"], skip_special_tokens=True)


def test_langchain_chat_openai(gateway, tiny_engine):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="tracerl-tiny", base_url=gateway.session_url("lc"), api_key="x", max_tokens=24)
    reply = llm.invoke(QUESTION)
    assert _decoded(tiny_engine, _only_span(gateway, "lc")) == reply.content


async def test_langchain_streaming(gateway, tiny_engine):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="tracerl-tiny", base_url=gateway.session_url("lcs"), api_key="x", max_tokens=24,
                     streaming=True)
    text = "".join([chunk.content async for chunk in llm.astream(QUESTION)])
    assert _decoded(tiny_engine, _only_span(gateway, "lcs")) == text


async def test_openai_agents_chat_completions_model(gateway, tiny_engine):
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=gateway.session_url("agents"), api_key="x")
    agent = Agent(name="solver", instructions="Answer briefly.",
                  model=OpenAIChatCompletionsModel(model="tracerl-tiny", openai_client=client),
                  model_settings=ModelSettings(max_tokens=24))
    result = await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
    attrs = _only_span(gateway, "agents")
    assert _decoded(tiny_engine, attrs) == result.final_output
    assert '"content":"Answer briefly."' in attrs["gen_ai.input.messages"]


def test_litellm_completion(gateway, tiny_engine):
    import litellm

    reply = litellm.completion(model="openai/tracerl-tiny", api_base=gateway.session_url("litellm"), api_key="x",
                               messages=[{"role": "user", "content": QUESTION}], max_tokens=24)
    assert _decoded(tiny_engine, _only_span(gateway, "litellm")) == reply.choices[0].message.content
