"""A training run's spans go to its run folder's store, and nowhere else: exporting an app's
traces later exports that app's spans only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracerl.core.store import SpanStore

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_training_an_instrumented_agent_leaves_the_default_store_alone(tmp_path):
    home = tmp_path / "home"
    run = tmp_path / "run"
    env = {**os.environ, "TRACERL_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--agent",
         str(ROOT / "examples" / "math_agent_langgraph.py") + ":solve", "--steps", "1", "--batch-size", "2",
         "--group-size", "2", "--eval-size", "0", "--output", str(run), "--quiet",
         "--set", "rollout.max_tokens=16"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with SpanStore(run / "traces.db") as store:
        scopes = [s.scope for s in store.spans()]
    assert scopes.count("tracerl.langchain") >= 4  # the adapter's spans: 4 episodes, 1+ LLM call each
    assert scopes.count("tracerl.gateway") >= 4
    default = home / "traces.db"
    if default.exists():  # the adapter opened it for spans outside any session: none were made
        with SpanStore(default) as store:
            assert store.count() == 0


def test_a_session_that_names_a_store_writes_there_only(tmp_path):
    """Spans of a session with its own store go to it alone, by session id and by trace; spans
    outside any session still go to the provider's shared store."""
    from opentelemetry.sdk.trace import TracerProvider

    import tracerl
    from tracerl.core.otel import setup_tracing

    provider = TracerProvider()
    tracing = setup_tracing(SpanStore(tmp_path / "shared.db"), tracer_provider=provider)
    own = str(tmp_path / "own.db")
    try:
        with tracerl.session(settings=tracerl.RolloutSettings(store=own), tracing=tracing) as s:
            tracing.tracer("app").start_span("inside").end()
        tracing.tracer("app").start_span("outside").end()
        episode = s.episode()
        tracing.flush()
        assert sorted(r.name for r in tracing.store(own).spans()) == ["inside", "tracerl.episode"]
        assert [r.name for r in tracing.store(str(tmp_path / "shared.db")).spans()] == ["outside"]
        assert episode.id == s.episode_id
    finally:
        provider.shutdown()
