"""What all adapters share: the W3C headers sent to the gateway and the GenAI message JSON."""

from __future__ import annotations

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tracerl.adapters import _common
from tracerl.core import semconv as sc
from tracerl.core.types import Message, ToolCall


def _sent_headers(ctx: context.Context) -> dict[str, str]:
    """The headers an httpx request made in ``ctx`` carries while propagation is on."""
    import httpx

    seen: dict[str, str] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.update({k: v for k, v in request.headers.items() if k in ("traceparent", "tracestate", "baggage")})
        return httpx.Response(200, json={})

    _common.enable_http_propagation("test")
    token = context.attach(ctx)
    try:
        with httpx.Client(transport=httpx.MockTransport(answer)) as client:
            client.get("http://127.0.0.1:9/v1/models")
    finally:
        context.detach(token)
        _common.disable_http_propagation("test")
    return seen


def test_http_calls_carry_the_current_span_and_the_session_baggage():
    span = TracerProvider().get_tracer("t").start_span("chat m")
    ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "sess-1", trace.set_span_in_context(span))
    sent = _sent_headers(ctx)
    span_context = span.get_span_context()
    assert sent["traceparent"] == f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
    assert sent["baggage"] == f"{sc.BAGGAGE_SESSION_KEY}=sess-1"
    assert _sent_headers(context.Context()) == {}  # outside a session and span: nothing added


def test_http_propagation_is_removed_when_the_last_adapter_goes():
    import httpx

    before = httpx.Client.send
    _common.enable_http_propagation("a")
    _common.enable_http_propagation("b")
    _common.disable_http_propagation("a")
    assert httpx.Client.send is not before  # "b" still needs it
    _common.disable_http_propagation("b")
    assert httpx.Client.send is before


def test_a_user_propagator_decides_what_is_sent():
    """A propagator the app configured (here tracecontext alone, so no baggage header) is
    honoured as it is."""
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator()]))
    try:
        span = TracerProvider().get_tracer("t").start_span("chat m")
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "s", trace.set_span_in_context(span))
        assert set(_sent_headers(ctx)) == {"traceparent"}
    finally:
        propagate.set_global_textmap(before)


def test_openai_messages_json_is_the_genai_json_of_the_same_messages():
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2+3"}'}}
    items = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2+3?"},
                                     {"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "content": None, "tool_calls": [call, {"id": 7, "function": {"name": "f", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
        {"role": "assistant", "content": [{"type": "image_url"}]},  # no text at all
        {"content": "no role"},
        "not a message",
    ]
    expected = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="What is 2+3?"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="calculator", arguments='{"expression": "2+3"}'),
                                              ToolCall(id="7", name="f", arguments="not json")]),
        Message(role="tool", tool_call_id="c1", content="5"),
        Message(role="assistant"),
        Message(role="user", content="no role"),
    ]
    assert _common.openai_messages_json(items, dicts_only=True) == sc.genai_message_json(expected)


def test_langchain_messages_json_is_the_genai_json_of_the_same_messages():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from tracerl.adapters.langchain import messages_json

    items = [
        SystemMessage("Be brief."),
        HumanMessage([{"type": "text", "text": "What is "}, "2+3?", {"type": "image_url", "image_url": {"url": "x"}}],
                     name="bob"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "calculator", "args": {"expression": "2+3", "n": [1.5]}},
                                  {"id": None, "name": "noargs", "args": {}}]),
        ToolMessage("5", tool_call_id="c1"),
        AIMessage([{"type": "image_url"}]),  # no text at all
    ]
    expected = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="What is 2+3?", name="bob"),
        Message(role="assistant", content="", tool_calls=[
            ToolCall(id="c1", name="calculator", arguments='{"expression": "2+3", "n": [1.5]}'),
            ToolCall(id=None, name="noargs", arguments="{}")]),
        Message(role="tool", tool_call_id="c1", content="5"),
        Message(role="assistant"),
    ]
    assert messages_json(items) == sc.genai_message_json(expected)


def test_openai_messages_json_reads_pydantic_messages():
    from openai.types.chat import ChatCompletionMessage

    reply = ChatCompletionMessage.model_validate({"role": "assistant", "content": "5", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]})
    expected = Message(role="assistant", content="5", tool_calls=[ToolCall(id="c1", name="calculator", arguments="{}")])
    assert _common.openai_messages_json([reply]) == sc.genai_message_json([expected])
    assert _common.openai_messages_json([reply], dicts_only=True) == "[]"


def test_responses_items_become_chat_messages():
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

    from tracerl.core.messages import responses_to_chat

    assert responses_to_chat("hi", "Be brief.") == [{"role": "system", "content": "Be brief."},
                                                    {"role": "user", "content": "hi"}]
    items = [
        {"role": "developer", "content": "Use tools."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "7+5"},
                                                         {"type": "input_image", "image_url": "x"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},  # no chat message
        ResponseOutputMessage.model_validate({"type": "message", "id": "msg_1", "role": "assistant",
                                              "status": "completed", "content": [
                                                  {"type": "output_text", "text": "Let me add.", "annotations": []}]}),
        ResponseFunctionToolCall.model_validate({"type": "function_call", "call_id": "c1", "name": "calc",
                                                 "arguments": '{"e": "7+5"}'}),
        {"type": "function_call", "call_id": "c2", "name": "calc", "arguments": ""},
        {"type": "function_call_output", "call_id": "c1", "output": "12"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "12"}]},
        {"type": "function_call", "call_id": "c3", "name": "calc", "arguments": "{}"},  # no assistant text before
    ]
    call = lambda i, args: {"id": i, "type": "function", "function": {"name": "calc", "arguments": args}}  # noqa: E731
    assert responses_to_chat(items) == [
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "7+5"},
        {"role": "assistant", "content": "Let me add.", "tool_calls": [call("c1", '{"e": "7+5"}'), call("c2", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "12"},
        {"role": "tool", "tool_call_id": "c2", "content": '[{"type":"input_text","text":"12"}]'},
        {"role": "assistant", "content": None, "tool_calls": [call("c3", "{}")]},
    ]


def test_instrument_keeps_writing_to_the_store_the_provider_has(tmp_path):
    """An adapter given a provider that tracerl already writes to adds no second store (the
    default one under TRACERL_HOME): every span, the gateway's included, stays in one file."""
    import os

    import tracerl
    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import SpanStore, default_store_path

    provider = TracerProvider()
    tracing = setup_tracing(SpanStore(tmp_path / "mine.db"), tracer_provider=provider)
    tracerl.instrument("langchain", tracer_provider=provider)
    try:
        assert list(tracing.stores) == [str(tmp_path / "mine.db")]
        assert not os.path.exists(default_store_path())
    finally:
        tracerl.uninstrument("langchain")
        provider.shutdown()
    fresh = TracerProvider()  # a provider with no store yet gets the default one
    try:
        assert list(setup_tracing(tracer_provider=fresh).stores) == [str(default_store_path())]
    finally:
        fresh.shutdown()


def test_a_failing_attribute_builder_costs_its_attributes_not_the_span(tmp_path, caplog):
    """An adapter's result attributes come from the framework's objects, which a new version
    may shape differently: a builder that raises is logged, and the span is still recorded
    with what it had; a span that does not record never runs the builder."""
    from opentelemetry.trace import NonRecordingSpan

    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import SpanStore

    provider = TracerProvider()
    tracing = setup_tracing(SpanStore(tmp_path / "s.db"), tracer_provider=provider)
    try:
        span = tracing.tracer("tracerl.test").start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
        _common.set_attributes(span, lambda: {"gen_ai.response.id": "r1", "bad": 1 / 0})
        _common.set_attributes(span, lambda: {"gen_ai.usage.output_tokens": 3})
        span.end()
        calls = []
        _common.set_attributes(NonRecordingSpan(span.get_span_context()), lambda: calls.append(1) or {})
        tracing.flush()
        [record] = next(iter(tracing.stores.values())).spans()
    finally:
        provider.shutdown()
    assert record.attributes == {"gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 3}
    assert "could not record the attributes of span 'chat m'" in caplog.text and calls == []


@pytest.mark.parametrize(("env", "option", "expected"), [
    (None, None, True),  # tracerl's default: the messages are the training data without a gateway
    ("NO_CONTENT", None, False), ("false", None, False), ("event_only", None, False),  # we write no events
    ("SPAN_ONLY", None, True), ("True", None, True), ("span_and_event", None, True),
    ("NO_CONTENT", True, True), (None, False, False),  # the argument wins
])
def test_content_capture_follows_the_argument_then_opentelemetry_s_switch(monkeypatch, env, option, expected):
    if env is None:
        monkeypatch.delenv(_common.CAPTURE_CONTENT_ENV, raising=False)
    else:
        monkeypatch.setenv(_common.CAPTURE_CONTENT_ENV, env)
    assert _common.capture_content(option) is expected


def test_an_unknown_content_capture_setting_is_a_clear_error(monkeypatch):
    import tracerl

    monkeypatch.setenv(_common.CAPTURE_CONTENT_ENV, "sometimes")
    with pytest.raises(tracerl.ConfigError, match="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='sometimes'"):
        tracerl.instrument("litellm")
    from tracerl.adapters import litellm as adapter

    assert not adapter.is_instrumented()


def test_the_private_name_propagation_wraps_exists_in_this_aiohttp():
    """Every aiohttp request goes through ClientSession._request (LiteLLM's aiohttp provider
    uses it); if a new aiohttp renames it, this fails before the headers silently stop."""
    import aiohttp

    assert callable(getattr(aiohttp.ClientSession, "_request", None))
    _common.enable_http_propagation("test")
    try:
        assert getattr(aiohttp.ClientSession._request, "_tracerl_original", None) is not None
    finally:
        _common.disable_http_propagation("test")
    assert getattr(aiohttp.ClientSession._request, "_tracerl_original", None) is None
