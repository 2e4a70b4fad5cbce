"""Two training runs and a gateway of their own write one PostgreSQL store at once; the runs show
up apart in `tracerl runs list --store`, `tracerl diagnose` and the dashboard, and no password is
written to a run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pg
import pytest
from fastapi.testclient import TestClient
from openai import OpenAI

from tracerl.cli.main import main
from tracerl.core.store import open_store
from tracerl.gateway import GatewayServer
from tracerl.runs.server import Runs, create_app
from tracerl.testing import ScriptedEngine

postgres_server = pg.postgres_server
AGENTS = f"{Path(__file__).parent / 'rollout_agents.py'}:parity_agent"
STEPS, BATCH, GROUP, EVAL = 2, 2, 2, 2
EPISODES = STEPS * BATCH * GROUP + 2 * EVAL  # the evaluations before and after included
APP_SESSIONS, CALLS = 32, 4


def _train(out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tracerl", "train", "arithmetic", "--agent", AGENTS, "--output", str(out),
            "--steps", str(STEPS), "--eval-size", str(EVAL), "--batch-size", str(BATCH), "--group-size", str(GROUP),
            "--set", "eval_every=0", "--set", "tensorboard=false", "--set", "rollout.max_tokens=16", "--threads", "1",
            "--quiet"]
    with open(out.parent / f"{out.name}.log", "wb") as log:  # a file, not a pipe: a full pipe would block the run
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_two_runs_and_a_gateway_write_one_store_and_show_up_apart(postgres_server, tmp_path, monkeypatch, capsys):
    url = pg.fresh_url(postgres_server)
    monkeypatch.setenv("TRACERL_STORE", url)  # the runs take the store from the environment, password included
    runs = [tmp_path / "a", tmp_path / "b"]
    procs = [_train(out, dict(os.environ)) for out in runs]
    try:
        from transformers import AutoTokenizer

        from tracerl.models import tiny_model_path

        engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_model_path()), lambda prompt: "42", model_name="m")
        with open_store(url) as store, GatewayServer(engine, store) as gw:  # an app's gateway, meanwhile
            for i in range(APP_SESSIONS):
                client = OpenAI(base_url=gw.session_url(f"app-{i}"), api_key="x", max_retries=0)
                for _ in range(CALLS):
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "6 x 7?"}])
        codes = [p.wait(300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert codes == [0, 0], [(out.parent / f"{out.name}.log").read_text()[-2000:] for out in runs]

    configs = [json.loads((out / "config.json").read_text()) for out in runs]
    assert all(c["store"] == url.replace(f":{pg.PASSWORD}@", "@") for c in configs)  # no password on disk
    ids = [c["run_id"] for c in configs]
    assert ids[0] != ids[1] and not (runs[0] / "traces.db").exists()

    capsys.readouterr()
    assert main(["runs", "list", "--store", url]) == 0
    listed = capsys.readouterr().out
    for run_id in ids:
        assert any(run_id in line and f" {EPISODES} " in line for line in listed.splitlines()), listed
    with open_store(url, read_only=True) as store:
        assert len(store.sessions()) == 2 * EPISODES + APP_SESSIONS
        assert sum(s.llm_calls for s in store.sessions() if s.session_id.startswith("app-")) == APP_SESSIONS * CALLS

    for out in runs:
        assert main(["diagnose", str(out)]) == 0
        said = " ".join(capsys.readouterr().out.split())  # rich folds lines to the terminal's width
        assert f"{STEPS * BATCH * GROUP} training episodes" in said and f"{2 * EVAL} evaluation episodes" in said

    client = TestClient(create_app(Runs(runs)))
    seen = []
    for out in runs:
        page = client.get(f"/api/runs/{out.name}/episodes?limit=1000").json()
        assert page["total"] == EPISODES
        seen.append({row["id"] for row in page["rows"]})
    assert not seen[0] & seen[1]
