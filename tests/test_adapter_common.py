"""What all adapters share: the W3C headers sent to the gateway and the GenAI message JSON."""

from __future__ import annotations

import json

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tracerl.adapters import _common
from tracerl.core import semconv as sc
from tracerl.core.types import Message, ToolCall


def _headers_in(ctx: context.Context) -> tuple[dict[str, str], dict[str, str]]:
    """(what the OTel API's propagate.inject writes, what our fast path writes) in ``ctx``."""
    token = context.attach(ctx)
    try:
        theirs: dict[str, str] = {}
        propagate.inject(theirs)
        ours: dict[str, str] = {}
        _common._inject(ours)
    finally:
        context.detach(token)
    return theirs, ours


@pytest.mark.parametrize("case", ["nothing", "span", "baggage", "both", "tracestate", "unsampled", "odd baggage"])
def test_fast_injection_writes_the_headers_the_propagator_writes(case):
    span = TracerProvider().get_tracer("t").start_span("chat m")
    ctx = context.Context()
    if case in ("span", "both"):
        ctx = trace.set_span_in_context(span, ctx)
    if case in ("tracestate", "unsampled"):
        flags = TraceFlags(0 if case == "unsampled" else TraceFlags.SAMPLED)
        remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=flags,
                             trace_state=TraceState([("vendor", "v1"), ("other", "x")]))
        ctx = trace.set_span_in_context(NonRecordingSpan(remote), ctx)
    if case in ("baggage", "both", "tracestate"):
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "sess-1", ctx)
    if case == "odd baggage":
        ctx = baggage.set_baggage("user id", "a b/c=d,é", baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "s 2", ctx))
    theirs, ours = _headers_in(ctx)
    assert ours == theirs
    assert bool(ours) == (case != "nothing")


def test_a_session_s_baggage_header_follows_its_changes():
    ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "one")
    assert _headers_in(ctx)[1] == {"baggage": f"{sc.BAGGAGE_SESSION_KEY}=one"}
    ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "two", ctx)  # a new mapping: encoded anew
    assert _headers_in(ctx)[1] == {"baggage": f"{sc.BAGGAGE_SESSION_KEY}=two"}


def test_a_user_propagator_decides_what_is_sent():
    """Only the default W3C pair takes the fast path; a propagator the app configured
    (here tracecontext alone, so no baggage header) is honoured as it is."""
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator()]))
    try:
        span = TracerProvider().get_tracer("t").start_span("chat m")
        ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "s", trace.set_span_in_context(span))
        theirs, ours = _headers_in(ctx)
        assert ours == theirs and set(ours) == {"traceparent"}
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


def test_openai_messages_json_from_its_cache_is_what_it_writes_anew():
    """Messages are kept by what their JSON is made of: rebuilt dicts hit the cache, and a
    change to any part the JSON shows (role, text, tool-call id, a tool call's id, name or
    arguments) is written anew."""
    from tracerl.core import _json

    def uncached(items):
        return _json.dumps([_common._openai_doc(m) for m in items])

    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2+3"}'}}
    items = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"},
             {"role": "assistant", "content": None, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "c1", "content": "5"},
             {"role": "assistant", "content": None, "tool_calls": [{"id": 7, "function": {"name": "f"}}]},  # not str
             {"role": "user", "content": [{"type": "text", "text": "parts"}]}]  # not str: written each time
    first = _common.openai_messages_json(items, dicts_only=True)
    assert first == uncached(items)
    assert _common._fragment_key(items[2]) in _common._fragments._cache  # kept
    assert _common._fragment_key(items[4]) is None and _common._fragment_key(items[5]) is None
    rebuilt = [dict(m) for m in items]
    assert _common.openai_messages_json(rebuilt, dicts_only=True) == first

    def changed(i, path, value):
        out = [json.loads(json.dumps(m)) for m in items]
        target = out[i]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return out

    for variant in (changed(0, ["content"], "Be verbose."), changed(1, ["role"], "system"),
                     changed(3, ["tool_call_id"], "c2"), changed(2, ["tool_calls", 0, "id"], "c9"),
                     changed(2, ["tool_calls", 0, "function", "name"], "adder"),
                     changed(2, ["tool_calls", 0, "function", "arguments"], '{"expression": "9"}')):
        got = _common.openai_messages_json(variant, dicts_only=True)
        assert got == uncached(variant) and got != first


def test_the_message_cache_is_bounded_in_messages_and_characters():
    cache = _common._Fragments(size=3)
    for i in range(10):
        assert cache.json({"role": "user", "content": str(i)}) == _json_dumps_doc({"role": "user", "content": str(i)})
        assert len(cache._cache) <= 3
    cache = _common._Fragments(chars=100_000)
    for i in range(20):
        m = {"role": "user", "content": f"{i} " + "x" * 20_000}
        assert cache.json(m) == _json_dumps_doc(m)
        assert sum(len(f) + len(k[1]) for k, f in cache._cache.items()) <= 150_000


def _json_dumps_doc(m):
    from tracerl.core import _json

    return _json.dumps(_common._openai_doc(m))


def test_langchain_messages_json_is_the_genai_json_of_the_same_messages():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from tracerl.adapters.langchain import genai_json

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
    assert "[" + ",".join(genai_json(m) for m in items) + "]" == sc.genai_message_json(expected)


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
    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import SpanStore

    provider = TracerProvider()
    tracing = setup_tracing(SpanStore(tmp_path / "s.db"), tracer_provider=provider)
    try:
        span = _common.tracer(tracing, "test").start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
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
