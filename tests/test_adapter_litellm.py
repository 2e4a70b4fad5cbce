"""tracerl.instrument("litellm"): completion / acompletion / streaming become episode steps."""

from __future__ import annotations

import asyncio

import pytest

import tracerl
from tracerl.testing import ScriptedServer, calculator_script

litellm = pytest.importorskip("litellm")



@pytest.fixture
def instrumented(tracing):
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    yield
    tracerl.uninstrument("litellm")


async def _wait_for(store, session, n):
    for _ in range(300):  # LiteLLM logs after the call returns, on a worker
        if sum(1 for s in store.spans(session_id=session) if s.name.startswith("chat openai")) >= n:
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
            # async: LiteLLM's aiohttp transport carries no baggage, so use the session URL
            kw = {"model": "openai/scripted", "api_base": s.base_url, "api_key": "x"}
            await litellm.acompletion(messages=[{"role": "user", "content": "3+4"}], **kw)
            stream = await litellm.acompletion(messages=[{"role": "user", "content": "5+6"}], stream=True, **kw)
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
            assert text == "The answer is 11."
        await _wait_for(store, s.episode_id, 3)
    ep = s.episode()
    assert [st.sequence for st in ep.steps] == [0, 1, 2]
    assert all(st.has_tokens and "framework_span_id" in st.metadata for st in ep.steps)
    assert [st.output_message.content for st in ep.steps] == ["The answer is 3.", "The answer is 7.",
                                                              "The answer is 11."]


def test_uninstrument_removes_the_logger_everywhere(tracing):
    lists = ("callbacks", "input_callback", "success_callback", "failure_callback",
             "_async_success_callback", "_async_failure_callback")
    before = {name: list(getattr(litellm, name)) for name in lists}
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    tracerl.instrument("litellm", tracer_provider=tracing.provider)
    assert sum(type(c).__name__ == "TracerlLiteLLMLogger" for c in litellm.callbacks) == 1
    tracerl.uninstrument("litellm")
    assert {name: list(getattr(litellm, name)) for name in lists} == before
