"""`tracerl traces ...` end to end on a real store file."""

from __future__ import annotations

import io
import json
import time

import pytest
from spanfactory import framework_llm_span, gateway_span, reward_span

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


def _table_row(out: str, episode: str) -> list[str]:
    line = next(line for line in out.splitlines() if episode in line)
    return [cell.strip() for cell in line.strip("│ ").split("│")]


def test_list_counts_an_instrumented_call_once_and_shows_reward_and_ending(tmp_path, capsys, monkeypatch):
    """A LangChain call recorded twice (the framework's span, the gateway's below it) is one call."""
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "two.db"
    outer = framework_llm_span("5", 1_000, trace="a" * 32)
    inner = gateway_span([{"role": "user", "content": "What is 2+3?"}], "5", seq=0, start=1_100, session="ep-two",
                         parent=outer.span_id, trace="a" * 32)
    with SpanStore(path) as store:
        store.add([outer, inner, reward_span(0.0, 2_000, session="ep-two", trace="a" * 32)])
    assert main(["traces", "list", "--db", str(path)]) == 0
    calls, reward, ending, *_rest, spans, episode = _table_row(capsys.readouterr().out, "ep-two")
    assert (calls, reward, ending, spans, episode) == ("1", "0", "success", "3", "ep-two")


def test_show_tokens_prints_the_sequence_with_its_mask(short_run, capsys):
    from tracerl.core.convert import episode_from_spans

    with SpanStore(short_run / "traces.db", read_only=True) as store:
        episode = next(s.session_id for s in store.sessions() if "-s0-" in s.session_id)
        ep = episode_from_spans(store.spans(session_id=episode), episode_id=episode)
    seq = ep.trajectories[0].sequences[0]
    assert main(["traces", "show", episode, "--db", str(short_run / "traces.db"), "--tokens", "--no-spans"]) == 0
    out = capsys.readouterr().out
    assert f"sequence 0: {len(seq)} tokens, {sum(seq.mask)} masked in" in out
    assert ep.task is not None and ep.task.data["question"] in out  # decoded with the run's tokenizer


def test_prune_says_how_many_first_and_deletes_only_with_yes(tmp_path, capsys, monkeypatch):
    path = tmp_path / "p.db"
    with SpanStore(path) as store:  # an old episode (1970) and one from now
        store.add([gateway_span([{"role": "user", "content": "q"}], "a", seq=0, start=1_000, session="old"),
                   gateway_span([{"role": "user", "content": "q"}], "b", seq=0, start=time.time_ns(), session="new")])
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["traces", "prune", "--before", "7d", "--db", str(path)]) == 1
    out = capsys.readouterr().out
    assert "pruning 1 episodes (1 spans)" in out and "nothing deleted" in out
    assert main(["traces", "prune", "--before", "7d", "--db", str(path), "--yes"]) == 0
    assert "deleted 1 episodes (1 spans)" in capsys.readouterr().out
    with SpanStore(path) as store:
        assert [s.session_id for s in store.sessions()] == ["new"]
    assert main(["traces", "prune", "--before", "7d", "--db", str(path)]) == 0
    assert "nothing to prune" in capsys.readouterr().out


def test_prune_a_run_folder_and_refuse_an_unsaid_target(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with SpanStore(run / "traces.db") as store:
        store.add([gateway_span([{"role": "user", "content": "q"}], "a", seq=0, start=1_000, session="e1")])
    assert main(["traces", "prune", "--run", str(run), "--yes"]) == 0
    assert "deleted 1 episodes" in capsys.readouterr().out
    assert main(["traces", "prune"]) == 1
    assert "say what to prune" in capsys.readouterr().err
