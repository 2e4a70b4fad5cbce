"""tracerl.instrument("litellm"): completion / acompletion / streaming become episode steps."""

from __future__ import annotations

import asyncio
import json

import pytest

import tracerl
from tracerl.core import semconv as sc
from tracerl.gateway import GatewayServer
from tracerl.testing import ScriptedServer, calculator_script

litellm = pytest.importorskip("litellm")


@pytest.fixture
def instrumented(tracing):
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    yield
    tracerl.uninstrument("litellm")


async def _wait_for(store, session, n):
    for _ in range(300):  # LiteLLM logs after the call returns, on a worker
        if sum(1 for s in store.spans(session_id=session) if s.scope == "tracerl.litellm") >= n:
            return
        await asyncio.sleep(0.01)


async def test_sync_async_and_streaming_calls_join_gateway_tokens(tracing, instrumented):
    store = next(iter(tracing.stores.values()))
    with ScriptedServer(calculator_script, tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url)
        with tracerl.session(task={"id": "t"}, settings=settings, tracing=tracing) as s:
            # sync: a plain URL, the session travels in W3C baggage (httpx is instrumented)
            await asyncio.to_thread(litellm.completion, model="openai/scripted", api_base=server.url + "/v1",
                                    api_key="x", messages=[{"role": "user", "content": "1+2"}])
            # async: a plain URL as well (the session rides in baggage through LiteLLM's
            # aiohttp transport), and streamed through the session URL
            await litellm.acompletion(model="openai/scripted", api_base=server.url + "/v1", api_key="x",
                                      messages=[{"role": "user", "content": "3+4"}])
            kw = {"model": "openai/scripted", "api_base": s.base_url, "api_key": "x"}
            stream = await litellm.acompletion(messages=[{"role": "user", "content": "5+6"}], stream=True, **kw)
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
            assert text == "The answer is 11."
        await _wait_for(store, s.episode_id, 3)
    ep = s.episode()
    assert [st.sequence for st in ep.steps] == [0, 1, 2]
    assert all(st.has_tokens and "framework_span_id" in st.metadata for st in ep.steps)
    assert [st.output_message.content for st in ep.steps] == ["The answer is 3.", "The answer is 7.",
                                                              "The answer is 11."]


@pytest.mark.parametrize("provider", ["openai", "aiohttp_openai"])
async def test_async_calls_to_a_plain_gateway_url_join_the_session(tracing, instrumented, tiny_engine, provider):
    """acompletion through LiteLLM's aiohttp paths (the httpx transport of ``openai/``, the bare
    aiohttp session of ``aiohttp_openai/``) to the gateway's plain /v1: the W3C baggage alone
    puts the gateway's token span in the session."""
    store = next(iter(tracing.stores.values()))
    with GatewayServer(tiny_engine, store) as gw:
        settings = tracerl.RolloutSettings(gateway_url=gw.url, store=store.path)  # the gateway's store
        with tracerl.session(task={"id": "t"}, settings=settings, tracing=tracing) as s:
            replies = [await litellm.acompletion(model=f"{provider}/tracerl-tiny", api_base=gw.url + "/v1",
                                                 api_key="x", max_tokens=12, temperature=0.0,
                                                 messages=[{"role": "user", "content": f"What is {a} + 2?"}])
                       for a in (3, 40)]
        await _wait_for(store, s.episode_id, 2)
    gateway_spans = [r for r in store.spans(session_id=s.episode_id) if r.attributes.get(sc.SOURCE) == "gateway"]
    assert len(gateway_spans) == 2  # none landed outside the session
    ep = s.episode()
    assert [st.sequence for st in ep.steps] == [0, 1]
    assert all(st.has_tokens and "framework_span_id" in st.metadata for st in ep.steps)
    assert [st.output_message.content for st in ep.steps] == [r.choices[0].message.content for r in replies]
    decoded = [tiny_engine.tokenizer.decode(st.response_ids, skip_special_tokens=True) for st in ep.steps]
    assert decoded == [r.choices[0].message.content for r in replies]


def test_responses_api_calls_are_steps_joined_to_the_gateway_tokens(tracing, instrumented, tiny_engine):
    """litellm.responses() through the gateway's /v1/responses: the logger records the
    Responses items as messages, and its span joins the gateway's by response id."""
    store = next(iter(tracing.stores.values()))
    with GatewayServer(tiny_engine, store) as gw:
        with tracerl.session(task={"id": "t"}, tracing=tracing) as s:
            reply = litellm.responses(model="openai/tracerl-tiny", api_base=gw.url + "/v1", api_key="x",
                                      input="What is 3 + 2?", max_output_tokens=12, temperature=0.0)
        asyncio.run(_wait_for(store, s.episode_id, 1))
    ep = s.episode()
    (step,) = ep.steps
    assert step.has_tokens and "framework_span_id" in step.metadata
    assert ep.metrics["convert/joined_by_response_id"] == 1
    text = reply.output[0].content[0].text
    assert step.output_message.content == text
    assert tiny_engine.tokenizer.decode(step.response_ids, skip_special_tokens=True) == text
    ours = [r for r in store.spans(session_id=s.episode_id) if r.scope == "tracerl.litellm"]
    assert json.loads(ours[0].attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == text


def test_uninstrument_removes_the_logger_everywhere(tracing):
    lists = ("callbacks", "input_callback", "success_callback", "failure_callback",
             "_async_success_callback", "_async_failure_callback")
    before = {name: list(getattr(litellm, name)) for name in lists}
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    assert sum(type(c).__name__ == "TracerlLiteLLMLogger" for c in litellm.callbacks) == 1
    tracerl.uninstrument("litellm")
    assert {name: list(getattr(litellm, name)) for name in lists} == before
    import aiohttp
    import httpx

    assert not hasattr(httpx.AsyncClient.send, "_tracerl_original")
    assert not hasattr(aiohttp.ClientSession._request, "_tracerl_original")
