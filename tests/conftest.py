"""Shared fixtures. Tests never reach a host other than 127.0.0.1."""

from __future__ import annotations

import os

# Before any framework import: no cost-map fetch, no trace upload, no hub.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENAI_API_KEY", "test")

import pytest  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@pytest.fixture(autouse=True)
def _tracerl_home(tmp_path, monkeypatch):
    """Each test gets its own default span store location."""
    monkeypatch.setenv("TRACERL_HOME", str(tmp_path / "tracerl-home"))


@pytest.fixture
def memory_provider():
    """A private TracerProvider recording into memory: (provider, exporter)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture(scope="session")
def tiny_engine():
    """The bundled tiny model behind a TorchEngine, shared by the session (loads in ~1 s)."""
    from tracerl.engines.torch_engine import TorchEngine

    engine = TorchEngine(batch_window_ms=10)
    yield engine
    engine.shutdown()


@pytest.fixture
def tracing(tmp_path):
    """tracerl's processors on a private TracerProvider, writing to a fresh SQLite store."""
    from tracerl.core.otel import setup_tracing
    from tracerl.core.store import SpanStore

    provider = TracerProvider()
    state = setup_tracing(SpanStore(tmp_path / "spans.db"), tracer_provider=provider)
    yield state
    provider.shutdown()

