"""Time-ordered ids (tracerl.core.ids): trace and episode ids begin with the time, so the
store's indexes take new spans at their end, while staying unique, random where W3C and the
SDK's samplers look, and the user's own id generator is respected."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import TraceFlags

from tracerl.core.ids import TimeOrderedIdGenerator, new_episode_id, time_ordered_trace_id
from tracerl.core.otel import setup_tracing
from tracerl.core.rollout import Session
from tracerl.core.store import SpanStore
from tracerl.gateway.recording import new_ids


def _ms(trace_id: int) -> int:
    return trace_id >> 80


def test_trace_ids_lead_with_the_millisecond_and_keep_80_random_bits():
    now_ms = time.time_ns() // 1_000_000
    ids = [time_ordered_trace_id() for _ in range(2000)]
    assert len(set(ids)) == 2000 and all(0 < t < 2**128 for t in ids)
    assert all(abs(_ms(t) - now_ms) < 5_000 for t in ids)
    # the low 56 bits (W3C level 2's random part) differ even within one millisecond
    assert len({t & (2**56 - 1) for t in ids}) == 2000
    time.sleep(0.003)
    assert time_ordered_trace_id() > max(ids)


def test_episode_ids_are_uuid7_in_creation_order():
    first = new_episode_id()
    time.sleep(0.003)
    second = new_episode_id()
    assert len(first) == 32 and uuid.UUID(first).version == 7 and uuid.UUID(first).variant == uuid.RFC_4122
    assert first < second  # hex strings sort as the times do
    assert len({new_episode_id() for _ in range(2000)}) == 2000
    assert uuid.UUID(Session().episode_id).version == 7
    assert Session("mine").episode_id == "mine"


def test_the_gateways_own_traces_are_time_ordered():
    trace_id, span_id = new_ids()
    assert len(trace_id) == 32 and len(span_id) == 16
    assert abs(_ms(int(trace_id, 16)) - time.time_ns() // 1_000_000) < 5_000


def test_time_ordered_ids_keep_the_w3c_random_flag(tmp_path):
    tracing = setup_tracing(SpanStore(tmp_path / "a.db"),
                            tracer_provider=TracerProvider(id_generator=TimeOrderedIdGenerator()))
    tracer = tracing.tracer("tracerl.test")
    first = tracer.start_span("first").get_span_context()
    time.sleep(0.003)
    second = tracer.start_span("second").get_span_context()
    assert second.trace_id > first.trace_id
    assert abs(_ms(first.trace_id) - time.time_ns() // 1_000_000) < 5_000
    random_flag = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)  # W3C level 2: newer SDKs only
    assert int(first.trace_flags) == TraceFlags.SAMPLED | random_flag


class FixedIds(IdGenerator):
    def generate_span_id(self) -> int:
        return 0x5

    def generate_trace_id(self) -> int:
        return 0xABC


def test_a_providers_own_id_generator_is_respected(tmp_path):
    tracing = setup_tracing(SpanStore(tmp_path / "b.db"), tracer_provider=TracerProvider(id_generator=FixedIds()))
    span = tracing.tracer("tracerl.test").start_span("x")
    assert (span.get_span_context().trace_id, span.get_span_context().span_id) == (0xABC, 0x5)


def _global_provider_ids(tmp_path, env: dict[str, str]) -> tuple[str, int]:
    code = textwrap.dedent(f"""
        from opentelemetry import trace
        from tracerl.core.otel import setup_tracing
        tracing = setup_tracing({str(tmp_path / "c.db")!r})
        span = trace.get_tracer("someone.else").start_span("x")
        print(type(tracing.provider.id_generator).__name__, span.get_span_context().trace_id >> 80)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, **env})
    name, ms = out.stdout.split()
    return name, int(ms)


def test_an_id_generator_named_in_the_environment_is_respected(tmp_path):
    name, ms = _global_provider_ids(tmp_path, {"OTEL_PYTHON_ID_GENERATOR": "random"})
    assert name == "RandomIdGenerator"
    assert abs(ms - time.time_ns() // 1_000_000) > 10**9  # uniformly random: not the time


def test_the_provider_tracerl_creates_orders_every_tracers_ids(tmp_path):
    """With no global provider, tracerl's own gives third-party tracers (OpenInference's, say)
    time-ordered trace ids too: their spans go to the same store."""
    name, ms = _global_provider_ids(tmp_path, {})
    assert name == "TimeOrderedIdGenerator"
    assert abs(ms - time.time_ns() // 1_000_000) < 60_000
