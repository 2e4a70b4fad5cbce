"""docs/benchmarks.md lists exactly the registry's tasks, as `tracerl tasks list --markdown` does."""

from __future__ import annotations

from pathlib import Path

from tracerl import tasks
from tracerl.cli.tasks import markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def test_the_catalogue_page_is_the_registry():
    text = DOC.read_text(encoding="utf-8")
    shown = text.split("<!-- catalogue:start -->\n", 1)[1].split("<!-- catalogue:end -->", 1)[0]
    assert shown == markdown([tasks.get(n) for n in tasks.names()]), \
        "docs/benchmarks.md is out of date: run .venv/bin/python scripts/benchmarks_doc.py"


def test_tasks_list_filters_by_domain_and_refuses_an_unknown_one(capsys):
    from tracerl.cli.main import main

    assert main(["tasks", "list", "--domain", "math", "--markdown"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows and all(" | math | " in row for row in rows)
    assert {row.split(" | ")[0][2:] for row in rows} == {n for n in tasks.names() if tasks.get(n).domain == "math"}
    assert main(["tasks", "list", "--domain", "astrology"]) == 1
    assert "no task has domain 'astrology'; the domains are:" in capsys.readouterr().err


def test_tasks_show_without_the_data_says_why_there_is_no_sample(capsys, monkeypatch, tmp_path):
    from tracerl.cli.main import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("TRACERL_DATA_DIR", raising=False)
    assert main(["tasks", "show", "gsm8k"]) == 0
    out = capsys.readouterr().out
    assert "openai/gsm8k (main)" in out and "test = hub split 'test' (1,319 rows)" in out
    sample = next(line for line in out.splitlines() if line.strip().startswith("sample"))
    assert "'openai/gsm8k' (main) split 'test' is not reachable: HF_HUB_OFFLINE is set" in sample
    assert main(["tasks", "show", "wordle", "--no-sample"]) == 0
    out = capsys.readouterr().out
    assert "domain   games" in out and "sample" not in out
