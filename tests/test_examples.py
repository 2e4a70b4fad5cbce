"""The examples run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_trace_to_episode_example(tmp_path):
    db = tmp_path / "demo.db"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trace_to_episode.py"), "--db", str(db)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "4 episodes, 8 LLM calls, 8 framework spans joined to their token spans" in out
    assert "accuracy 100%" in out
    from tracerl.core.store import SpanStore

    with SpanStore(db) as store:
        assert len([s for s in store.sessions() if s.llm_calls]) == 4
