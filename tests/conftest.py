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
    """Each test gets its own default span store location (and no shared store from the shell), and
    reads no benchmark data of the shell's (TRACERL_DATA_DIR) nor the hub."""
    monkeypatch.setenv("TRACERL_HOME", str(tmp_path / "tracerl-home"))
    monkeypatch.delenv("TRACERL_STORE", raising=False)
    monkeypatch.delenv("TRACERL_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


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



@pytest.fixture(scope="session")
def short_run(tmp_path_factory):
    """A real three-step run of the bundled model whose rollouts end in every common way (see
    rollout_agents.diagnose_agent): the folder the dashboard, diagnose and report tests read."""
    from pathlib import Path

    from tracerl.trainers.config import TrainConfig
    from tracerl.trainers.loop import train
    from tracerl.trainers.rollouts import load_agent

    out = tmp_path_factory.mktemp("short-run") / "run"
    cfg = TrainConfig.model_validate({
        "output": out, "steps": 3, "batch_size": 4, "group_size": 4, "eval_size": 8, "eval_every": 0,
        "progress": False, "tensorboard": False, "reward": "regex",
        "reward_options": {"pattern": r"answer is (-?\d+)"}, "rollout": {"max_tokens": 12, "timeout_s": 60},
    })
    # the global tracer provider, as a real run has it: the agent's own spans (its failing tool)
    # are recorded with the gateway's
    train(cfg, agent=load_agent(f"{Path(__file__).parent / 'rollout_agents.py'}:diagnose_agent"))
    return out


@pytest.fixture(scope="session")
def terminal_run(tmp_path_factory):
    """Two training steps of the built-in terminal task on the bundled model, as a user runs them
    (`tracerl train terminal`): the folder whose shell commands the traces and dashboard show."""
    from tracerl.cli.main import main

    out = tmp_path_factory.mktemp("terminal-run") / "run"
    assert main(["train", "terminal", "--steps", "2", "--batch-size", "2", "--group-size", "2", "--eval-size", "1",
                 "--set", "eval_every=0", "--set", "tensorboard=false", "--set", "rollout.max_tokens=24",
                 "--output", str(out), "--quiet"]) == 0
    return out


@pytest.fixture
def store(tmp_path):
    """A fresh span store, as a gateway writes one (modules of the store's own tests define their own)."""
    from tracerl.core.store import SpanStore

    with SpanStore(tmp_path / "gw.db") as s:
        yield s
