"""`tracerl traces ...` end to end on a real store file."""

from __future__ import annotations

import json

import pytest
from spanfactory import gateway_span, reward_span

from tracerl.cli.main import main
from tracerl.core.store import SpanStore


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "t.db"
    with SpanStore(path) as store:
        history = [{"role": "user", "content": "What is 2+3?"}]
        store.add([
            gateway_span(history, "5", seq=0, start=1_000, session="ep-cli"),
            reward_span(1.0, 2_000, session="ep-cli"),
        ])
    return path


def test_list_and_show(db, capsys):
    assert main(["traces", "list", "--db", str(db)]) == 0
    assert "ep-cli" in capsys.readouterr().out
    assert main(["traces", "show", "ep-cli", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "episode ep-cli" in out and "reward=1" in out and "chat tiny #0" in out


def test_export_then_import_into_another_store(db, tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert main(["traces", "export", str(out), "--db", str(db), "--episode", "ep-cli"]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["attributes"]["tracerl.session.id"] == "ep-cli"
    other = tmp_path / "other.db"
    assert main(["traces", "import", str(out), "--db", str(other)]) == 0
    assert main(["traces", "import", str(out), "--db", str(other)]) == 0
    assert "0 new spans" in capsys.readouterr().out.splitlines()[-1]
    with SpanStore(other) as store:
        assert store.count() == 2


def test_errors_are_one_readable_line(db, tmp_path, capsys):
    assert main(["traces", "show", "missing", "--db", str(db)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no spans for episode 'missing'" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"trace_id": "zz"}\n')
    assert main(["traces", "import", str(bad), "--db", str(db)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tracerl: error: line 1:") and "\n" not in err
    with SpanStore(db) as store:
        assert store.count() == 2  # nothing already stored was lost
    assert main(["traces", "list", "--db", str(tmp_path / "nope.db")]) == 1
    assert "no span store" in capsys.readouterr().err
