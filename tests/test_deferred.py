"""Deferred spans (tracerl.core.deferred): the adapters' spans reach the SDK's processors and
the store when they end, in batches, exactly as live SDK spans would have."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanKind, Status, StatusCode

from tracerl.core import deferred
from tracerl.core import semconv as sc
from tracerl.core.deferred import DeferredSpan, DeferredTracer, SpanWorker
from tracerl.core.otel import setup_tracing
from tracerl.core.store import SpanStore


class CountingIds(IdGenerator):
    """The same ids in every provider: records made different ways compare equal."""

    def __init__(self) -> None:
        self.n = 0

    def generate_span_id(self) -> int:
        self.n += 1
        return self.n

    def generate_trace_id(self) -> int:
        self.n += 1
        return 0xABC000 + self.n


def _tracing(tmp_path, name, *, extra=None, **provider_kw):
    provider = TracerProvider(id_generator=CountingIds(), **provider_kw)
    if extra is not None:  # a user's processor, there before ours
        provider.add_span_processor(extra)
    return setup_tracing(SpanStore(tmp_path / f"{name}.db"), tracer_provider=provider)


def _scenario(tracer):
    """What the adapters do to spans, with fixed times: a session, a parent and two children,
    results set late, a renamed span, an error status, lists."""
    ctx = baggage.set_baggage(sc.BAGGAGE_SESSION_KEY, "ep-1", context.Context())
    root = tracer.start_span("invoke_agent solver", context=ctx, attributes={"gen_ai.agent.name": "solver"},
                             start_time=1_000)
    in_root = trace.set_span_in_context(root, ctx)
    chat = tracer.start_span("chat unknown", context=in_root, kind=SpanKind.CLIENT, start_time=2_000,
                             attributes={"gen_ai.operation.name": "chat", "gen_ai.request.temperature": 0.5})
    chat.set_attribute("gen_ai.response.finish_reasons", ["stop"])
    chat.set_attributes({"gen_ai.output.messages": '[{"role":"assistant"}]', "gen_ai.usage.output_tokens": 7})
    chat.update_name("chat tiny")
    chat.end(end_time=3_000)
    tool = tracer.start_span("execute_tool calc", context=in_root, start_time=3_500)
    tool.set_status(Status(StatusCode.ERROR, "ZeroDivisionError: division by zero"))
    tool.set_status(StatusCode.OK)  # after ERROR: OK wins, and is final
    tool.set_status(StatusCode.ERROR, "ignored")
    tool.end(end_time=3_900)
    root.end(end_time=4_000)


def _records(tracing):
    tracing.flush()
    store = next(iter(tracing.stores.values()))
    return sorted((r.to_dict() for r in store.spans()), key=lambda d: d["span_id"])


def test_deferred_spans_are_stored_exactly_as_live_sdk_spans(tmp_path):
    live = _tracing(tmp_path, "live")
    _scenario(live.provider.get_tracer("tracerl.test"))
    direct = _tracing(tmp_path, "direct")  # our processors alone: records built without the SDK
    _scenario(DeferredTracer(direct, "tracerl.test"))
    user = InMemorySpanExporter()
    replayed = _tracing(tmp_path, "replayed", extra=SimpleSpanProcessor(user))  # a user's processor: the SDK path
    assert replayed.direct_stores() is None and direct.direct_stores() is not None
    _scenario(DeferredTracer(replayed, "tracerl.test"))

    expected = _records(live)
    assert [r["name"] for r in expected] == ["invoke_agent solver", "chat tiny", "execute_tool calc"]
    assert expected[1]["attributes"][sc.SESSION_ID] == "ep-1"
    assert expected[1]["attributes"]["gen_ai.usage.output_tokens"] == 7
    assert expected[2]["status_code"] == "OK"
    assert _records(direct) == expected
    assert _records(replayed) == expected
    assert len(user.get_finished_spans()) == 3  # the user's processor got them too


def test_the_span_context_is_decided_at_the_call_and_kept_on_replay(tmp_path):
    user = InMemorySpanExporter()
    tracing = _tracing(tmp_path, "ids", extra=SimpleSpanProcessor(user))
    tracer = DeferredTracer(tracing, "tracerl.test")
    parent = tracer.start_span("parent")
    assert isinstance(parent, DeferredSpan) and parent.get_span_context().trace_flags.sampled
    child = tracer.start_span("child", context=trace.set_span_in_context(parent))
    assert child.get_span_context().trace_id == parent.get_span_context().trace_id
    child.end()
    parent.end()
    assert user.get_finished_spans() == ()  # nothing reached processors yet
    tracing.flush()
    got = {s.name: s for s in user.get_finished_spans()}
    assert got["parent"].get_span_context() == parent.get_span_context()
    assert got["child"].get_span_context() == child.get_span_context()
    assert got["child"].parent.span_id == parent.get_span_context().span_id


def test_the_providers_sampler_decides(tmp_path):
    never = _tracing(tmp_path, "never", sampler=TraceIdRatioBased(0.0))
    span = DeferredTracer(never, "t").start_span("chat m")
    assert isinstance(span, NonRecordingSpan) and not span.get_span_context().trace_flags.sampled
    default = _tracing(tmp_path, "default")
    unsampled_parent = NonRecordingSpan(trace.SpanContext(1, 2, is_remote=True))  # flags: not sampled
    child = DeferredTracer(default, "t").start_span("chat m", context=trace.set_span_in_context(unsampled_parent))
    assert not child.is_recording()
    off = _tracing(tmp_path, "off", sampler=ParentBased(ALWAYS_OFF))
    assert not DeferredTracer(off, "t").start_span("root").is_recording()


def test_processors_see_the_start_context_on_start(tmp_path):
    seen = []

    class Reader(SpanProcessor):
        def on_start(self, span, parent_context=None):
            seen.append((baggage.get_baggage("k", parent_context), baggage.get_baggage("k"),
                         dict(span.attributes)))

    tracing = _tracing(tmp_path, "ctx", extra=Reader())
    token = context.attach(baggage.set_baggage("k", "v"))
    try:
        span = DeferredTracer(tracing, "t").start_span("s", attributes={"a": 1})
    finally:
        context.detach(token)
    span.set_attribute("b", 2)
    span.end()
    tracing.flush()
    assert seen == [("v", "v", {"a": 1})]  # the start attributes only, as a live span's on_start


def test_a_flush_reaches_batch_processors_registered_before_ours(tmp_path):
    theirs = InMemorySpanExporter()
    tracing = _tracing(tmp_path, "early", extra=BatchSpanProcessor(theirs, schedule_delay_millis=60_000))
    span = DeferredTracer(tracing, "t").start_span("s")
    span.end()
    assert tracing.provider.force_flush()  # the user's own flush, not ours
    assert [s.name for s in theirs.get_finished_spans()] == ["s"]


def test_the_worker_replays_without_a_flush(tmp_path):
    tracing = _tracing(tmp_path, "worker")
    worker = SpanWorker(interval_s=0.05)
    DeferredTracer(tracing, "t", worker=worker).start_span("s").end()
    store = next(iter(tracing.stores.values()))
    deadline = time.monotonic() + 10
    while not store.count() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r.name for r in store.spans()] == ["s"] and worker.pending() == 0


def test_a_failing_processor_costs_only_its_span(tmp_path, caplog):
    class Broken(SpanProcessor):
        def on_end(self, span):
            if span.name == "bad":
                raise RuntimeError("boom")

    user = InMemorySpanExporter()
    tracing = _tracing(tmp_path, "broken", extra=Broken())
    tracing.provider.add_span_processor(SimpleSpanProcessor(user))
    worker = SpanWorker(interval_s=60)
    tracer = DeferredTracer(tracing, "t", worker=worker)
    tracer.start_span("first", attributes={"kept": 1}).end()
    tracer.start_span("bad").end()
    tracer.start_span("good").end()
    assert worker.drain() == 3
    assert worker.failures == 1
    names = {s.name: s for s in user.get_finished_spans()}
    assert set(names) == {"first", "good"} and dict(names["first"].attributes) == {"kept": 1}


def test_events_exceptions_and_odd_values_go_through_the_sdk(tmp_path):
    def scenario(tracer):
        span = tracer.start_span("chat m", start_time=10)
        try:
            raise ValueError("bad answer")
        except ValueError as exc:
            span.record_exception(exc, timestamp=11)
        span.add_event("retry", {"n": 1}, timestamp=12)
        span.set_attribute("odd", None)  # whatever the SDK makes of it, live or deferred
        span.set_attribute("mixed", [1, "a"])
        span.end(end_time=13)

    live = _tracing(tmp_path, "live")
    scenario(live.provider.get_tracer("t"))
    ours = _tracing(tmp_path, "ours")
    scenario(DeferredTracer(ours, "t"))
    (record,) = _records(ours)
    assert [e["name"] for e in record["events"]] == ["exception", "retry"]
    assert record["events"][0]["attributes"]["exception.type"] == "ValueError"
    assert [record] == _records(live)


def test_non_finite_numbers_are_stored_as_written(tmp_path):
    """A NaN or infinite log-probability is data: stored exactly, live or deferred (records
    built without the SDK are written unsearched, so these must take the SDK's path)."""
    def scenario(tracer):
        tracer.start_span("scalar", start_time=10, attributes={"score": float("nan"), "t": 0.7}).end(end_time=11)
        span = tracer.start_span("list", start_time=20)
        span.set_attribute("logprobs", [-0.5, float("-inf")])
        span.end(end_time=21)
        tracer.start_span("overflow", start_time=30, attributes={"big": [1e308, 1e308]}).end(end_time=31)

    live = _tracing(tmp_path, "live")
    scenario(live.provider.get_tracer("t"))
    ours = _tracing(tmp_path, "ours")
    scenario(DeferredTracer(ours, "t"))
    expected, got = _records(live), _records(ours)
    by_name = {r["name"]: r["attributes"] for r in got}
    assert by_name["scalar"]["score"] != by_name["scalar"]["score"] and by_name["scalar"]["t"] == 0.7  # NaN
    assert by_name["list"]["logprobs"] == [-0.5, float("-inf")]
    assert by_name["overflow"]["big"] == [1e308, 1e308]
    assert repr(got) == repr(expected)  # (NaN != NaN: compared as text)


def test_nothing_ended_is_lost_at_exit(tmp_path):
    db = tmp_path / "exit.db"
    script = textwrap.dedent(f"""
        from tracerl.core.deferred import DeferredTracer
        from tracerl.core.otel import setup_tracing
        from tracerl.core.store import SpanStore
        from opentelemetry.sdk.trace import TracerProvider
        tracing = setup_tracing(SpanStore({str(db)!r}), tracer_provider=TracerProvider())
        DeferredTracer(tracing, "t").start_span("last words").end()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert [r.name for r in SpanStore(db).spans()] == ["last words"]


def test_start_as_current_span_and_a_drain_with_nothing_pending(tmp_path):
    tracing = _tracing(tmp_path, "cm")
    tracer = DeferredTracer(tracing, "t")
    with pytest.raises(KeyError), tracer.start_as_current_span("work") as span:
        assert trace.get_current_span() is span
        raise KeyError("x")
    (record,) = _records(tracing)
    assert record["status_code"] == "ERROR" and record["events"][0]["name"] == "exception"
    assert deferred.drain() == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_leaves_the_parents_pending_spans_to_the_parent(tmp_path):
    tracing = _tracing(tmp_path, "fork")
    worker = SpanWorker(interval_s=60)
    DeferredTracer(tracing, "t", worker=worker).start_span("the parent's").end()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the parent's to replay (it would store them twice)
        os._exit(0 if worker.pending() == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert worker.drain() == 1


def test_live_spans_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACERL_LIVE_SPANS", "1")
    started = []

    class Watcher(SpanProcessor):
        def on_start(self, span, parent_context=None):
            started.append(span.name)

    tracing = _tracing(tmp_path, "live-env", extra=Watcher())
    tracer = tracing.tracer("tracerl.test")
    assert not isinstance(tracer, DeferredTracer)
    span = tracer.start_span("chat m")
    assert started == ["chat m"]  # seen at once, not at the next flush
    span.end()
    assert [r["name"] for r in _records(tracing)] == ["chat m"]
    monkeypatch.delenv("TRACERL_LIVE_SPANS")
    assert isinstance(_tracing(tmp_path, "default-env").tracer("tracerl.test"), DeferredTracer)
