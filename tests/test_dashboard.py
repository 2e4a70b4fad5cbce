"""The dashboard's server on a real short run, the runs commands, the report, and bad input:
one-line errors, a server that keeps serving, a run folder left exactly as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tracerl.cli.main import main
from tracerl.runs.server import Runs, create_app


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def client(short_run):
    return TestClient(create_app(Runs([short_run])))


def test_runs_and_metrics_are_the_run_folders(client, short_run):
    (info,) = client.get("/api/runs").json()
    assert (info["name"], info["status"], info["steps"], info["steps_done"]) == ("run", "finished", 3, 3)
    lines = (short_run / "metrics.jsonl").read_text().splitlines()
    assert client.get("/api/runs/run/metrics").json() == [json.loads(line) for line in lines]
    assert client.get("/api/runs/run/metrics?start=2").json() == [json.loads(line) for line in lines[2:]]


def test_episodes_filter_and_open_with_masks_advantages_and_spans(client):
    every = client.get("/api/runs/run/episodes?limit=1000").json()
    assert every["total"] == 48 + 16
    errors = client.get("/api/runs/run/episodes?termination=error").json()
    assert errors["total"] and all(r["termination"] == "error" for r in errors["rows"])
    assert all(r["diagnosis"]["code"] == "agent_error" for r in errors["rows"])
    step2 = client.get("/api/runs/run/episodes?kind=train&step=2").json()
    assert step2["total"] == 16 and {r["step"] for r in step2["rows"]} == {2}
    ok = next(r for r in every["rows"] if r["kind"] == "train" and r["termination"] == "success" and r["llm_calls"] == 1)
    ep = client.get(f"/api/runs/run/episodes/{ok['id']}").json()
    (traj,) = ep["trajectories"]
    seq = traj["sequences"][0]
    assert len(seq["tokens"]) == len(seq["token_ids"]) == len(seq["mask"]) and "".join(seq["tokens"])
    assert sum(seq["mask"]) == ok["response_tokens"]  # one call: exactly the sampled tokens are masked in
    if traj["trained"]:  # a group with reward variance: the trainer's advantages, on model tokens
        assert all(a is not None for a, m in zip(seq["advantages"], seq["mask"]) if m)
    assert any(s["gateway"] for s in ep["spans"]) and traj["conversation"][-1]["role"] == "assistant"
    assert client.get("/api/runs/run/episodes/nope").status_code == 404


def test_the_trainers_logprobs_next_to_the_samplers(client):
    """Step 1's rollouts were sampled by version 0, the base model: recomputed in float32 they
    are the sampler's own, token for token; a version whose checkpoint is pruned says so."""
    rows = client.get("/api/runs/run/episodes?kind=train&step=1&termination=success").json()["rows"]
    ep = client.get(f"/api/runs/run/episodes/{rows[0]['id']}").json()
    got = client.get(f"/api/runs/run/episodes/{rows[0]['id']}/trainer").json()
    assert got["version"] == 0
    seq, mine = ep["trajectories"][0]["sequences"][0], got["trajectories"][0][0]
    gaps = [abs(a - b) for a, b, m in zip(seq["logprobs"], mine, seq["mask"]) if m]
    assert gaps and max(gaps) < 1e-3
    later = client.get("/api/runs/run/episodes?kind=train&step=2&termination=success").json()["rows"][0]["id"]
    assert "no checkpoint of weight version 1" in client.get(f"/api/runs/run/episodes/{later}/trainer").json()["error"]


def test_groups_side_by_side_and_diagnosis(client):
    groups = client.get("/api/runs/run/groups?step=1").json()
    assert len(groups) == 4 and all(g["n"] == 4 for g in groups)  # failed rollouts count, as reward 0
    assert sum(g["failed"] for g in groups) == len([r for r in client.get("/api/runs/run/episodes?step=1&kind=train&"
                                                                            "termination=error").json()["rows"]])
    assert all(g["flat"] or g["reward_min"] != g["reward_max"] for g in groups)
    side = client.get("/api/runs/run/groups/1/0").json()
    assert len(side) == 4 and [s["reward"] or 0 for s in side] == sorted((s["reward"] or 0 for s in side), reverse=True)
    d = client.get("/api/runs/run/diagnosis").json()
    assert {c["code"] for c in d["causes"]} >= {"agent_error", "tool_error", "format"}
    assert d["unrewarded"] == sum(c["episodes"] for c in d["causes"])


def test_browsing_leaves_the_run_folder_as_it_was(short_run, tmp_path):
    run = tmp_path / "copy"
    shutil.copytree(short_run, run)
    before = _files(run)
    c = TestClient(create_app(Runs([run])))
    for path in ("/api/runs", "/api/runs/copy/metrics", "/api/runs/copy/episodes", "/api/runs/copy/diagnosis",
                 "/api/runs/copy/groups?step=1", "/api/runs/copy/groups/1/0"):
        assert c.get(path).status_code == 200, path
    first = c.get("/api/runs/copy/episodes").json()["rows"][0]["id"]
    assert c.get(f"/api/runs/copy/episodes/{first}").status_code == 200
    assert _files(run) == before


def test_a_run_with_no_metrics_yet_and_a_corrupt_store_still_serve(short_run, tmp_path):
    young = tmp_path / "young"
    young.mkdir()
    shutil.copy(short_run / "config.json", young / "config.json")
    broken = tmp_path / "broken"
    shutil.copytree(short_run, broken)
    (broken / "traces.db").write_bytes(b"this is not a database" * 100)
    c = TestClient(create_app(Runs([young, broken])))
    assert c.get("/api/runs/young/metrics").json() == []
    assert c.get("/api/runs/young/episodes").json() == {"total": 0, "rows": []}
    bad = c.get("/api/runs/broken/episodes")
    assert bad.status_code == 422 and "cannot read span store" in bad.json()["error"]
    assert len(c.get("/api/runs/broken/metrics").json()) > 0  # the curves do not need the store
    assert c.get("/api/runs/nope/metrics").status_code == 404


def test_an_api_key_guards_the_data(short_run):
    c = TestClient(create_app(Runs([short_run]), api_key="k"))
    assert c.get("/api/runs").status_code == 401
    assert c.get("/api/runs", headers={"Authorization": "Bearer k"}).status_code == 200
    assert c.get("/").status_code == 200  # the page itself, which then sends the key


@pytest.mark.parametrize("argv", [["dashboard", "{tmp}"], ["dashboard", "--runs", "{tmp}/none"], ["runs", "compare",
                                                                                                 "{tmp}", "{tmp}"]])
def test_folders_that_are_not_runs_are_one_line(argv, tmp_path, capsys):
    assert main([a.format(tmp=tmp_path) for a in argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tracerl: error:"), err


def test_dashboard_on_a_busy_port_is_one_line(short_run, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", str(short_run), "--port", str(port)]) == 1
    err = capsys.readouterr().err.strip()
    assert "the port is in use" in err and len(err.splitlines()) == 1
    assert main(["dashboard", str(short_run), "--host", "0.0.0.0"]) == 1
    assert "without an API key" in capsys.readouterr().err


def test_runs_list_and_compare(short_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    other = tmp_path / "runs" / "other"
    shutil.copytree(short_run, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "seed": 7}))
    (other / "run.json").write_text(json.dumps({"status": "running", "pid": 2**22 + 12345, "host": socket.gethostname()}))
    shutil.copytree(short_run, tmp_path / "runs" / "done")
    assert main(["runs", "list", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "interrupted" in out  # a "running" run whose process is gone
    assert main(["runs", "compare", str(short_run), str(other)]) == 0
    out = capsys.readouterr().out
    assert "seed" in out and "accuracy after" in out


def test_report_is_one_file_with_the_runs_data(short_run, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", str(short_run), "--html", str(out)]) == 0
    page = out.read_text()
    assert "window.TRACERL_REPORT" in page and "uPlot" in page
    assert 'src="' not in page and 'href="static' not in page  # nothing to fetch: it opens offline
    data = json.loads(page.split("window.TRACERL_REPORT = ", 1)[1].split(";</script>", 1)[0].replace("<\\/", "</"))
    assert len(data["metrics"]["run"]) == len((short_run / "metrics.jsonl").read_text().splitlines())
    assert data["details"]["run"] and data["diagnosis"]["run"]["causes"]
