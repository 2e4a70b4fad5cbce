"""A PostgreSQL span store that cannot be reached, as users meet it: `tracerl diagnose` on a run
folder (which records the store without its password) says in one line how to give the
password, and a gateway's `/health` turns 503 "degraded" while its store is down, so that a load
balancer stops sending it calls. A real server is started for the module (tests/pg.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pg
import pytest

from tracerl.cli.main import main
from tracerl.core.store import PostgresStore
from tracerl.gateway import GatewayServer
from tracerl.testing import ScriptedEngine

postgres_server = pg.postgres_server


@pytest.fixture
def url(postgres_server):
    yield pg.fresh_url(postgres_server)
    if not (postgres_server.data / "postmaster.pid").exists():  # a test that stopped it and failed
        postgres_server.start()


def test_diagnose_on_a_postgres_run_without_the_password_says_how_to_give_it(url, tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    for name in ("TRACERL_STORE", "PGPASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))  # not the user's ~/.pgpass
    agent = tmp_path / "broken_agent.py"
    agent.write_text("def boom(task, config):\n    raise RuntimeError('the tool server is down')\n")
    out = tmp_path / "runs" / "pg"
    # a run that started and failed at step 1: four episodes, each an agent exception, in the store
    assert main(["train", "arithmetic", "--agent", f"{agent}:boom", "--store", url, "--output", str(out),
                 "--steps", "1", "--batch-size", "2", "--group-size", "2", "--eval-size", "0",
                 "--set", "max_failed_steps=1", "--set", "tensorboard=false", "--quiet"]) == 1
    recorded = url.replace(f":{pg.PASSWORD}@", "@")
    capsys.readouterr()

    assert main(["diagnose", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    line = err.strip()
    assert line.startswith(f"tracerl: error: cannot open span store {recorded}: "), line
    assert "no password supplied" in line and pg.PASSWORD not in line
    assert f"{out / 'config.json'} records the store without its password: set TRACERL_STORE" in line
    assert "PGPASSWORD or ~/.pgpass" in line

    monkeypatch.setenv("TRACERL_STORE", url)  # what the line says to do
    assert main(["diagnose", str(out)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # rich folds lines to the terminal's width
    assert "4 training episodes" in said and "agent exception" in said
    assert f"(tracerl traces show ID --db {recorded})" in said and "RUN/traces.db" not in said


def test_health_is_503_degraded_while_the_store_is_down_and_ok_again_after(postgres_server, url):
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_model_path()), lambda prompt: "42", model_name="m")
    with PostgresStore(url, reconnect_s=0.3) as store, GatewayServer(engine, store) as gw:
        ours = store.store_id()
        up = httpx.get(f"{gw.url}/health", timeout=30)
        assert up.status_code == 200
        assert up.json() == {"status": "ok", "model": "m", "weight_version": engine.weight_version,
                             "store_id": ours, "accepts_weights": False, "store": {"ok": True, "id": ours}}

        postgres_server.stop("fast")
        down = httpx.get(f"{gw.url}/health", timeout=30)
        assert down.status_code == 503
        doc = down.json()
        assert doc["status"] == "degraded" and doc["store_id"] == ours  # the id last seen: replicas still match
        assert doc["store"]["ok"] is False and doc["store"]["id"] == ours
        error = doc["store"]["error"]
        assert "postgresql://tracerl:***@127.0.0.1" in error and pg.PASSWORD not in error and "\n" not in error

        postgres_server.start()
        again = httpx.get(f"{gw.url}/health", timeout=30)
        assert again.status_code == 200 and again.json()["store"] == {"ok": True, "id": ours}


def test_a_replica_whose_store_is_down_is_refused_with_the_reason(postgres_server, url, monkeypatch):
    from transformers import AutoTokenizer

    from tracerl.core.errors import ConfigError
    from tracerl.models import tiny_model_path
    from tracerl.trainers.replicas import Replicas

    engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_model_path()), lambda prompt: "42", model_name="m")
    with PostgresStore(url, reconnect_s=0.3) as store, PostgresStore(url, reconnect_s=0.3) as trainers, \
            GatewayServer(engine, store, accept_weights=True) as gw:
        replicas = Replicas([gw.url], api_key=None, store=trainers, model="m")
        replicas.check()  # up: passes
        ours = trainers.store_id()
        postgres_server.stop("fast")
        # the trainer still reaches the store (say, over another network path); this gateway does not
        monkeypatch.setattr(trainers, "store_id", lambda: ours)
        try:
            with pytest.raises(ConfigError, match=r"cannot reach its span store \(.*127\.0\.0\.1") as err:
                replicas.check()
        finally:
            postgres_server.start()
        assert str(err.value).startswith(f"--gateway {gw.url} cannot reach its span store")


def test_health_of_a_gateway_on_a_sqlite_store_names_the_store(tmp_path: Path):
    from transformers import AutoTokenizer

    from tracerl.core.store import open_store
    from tracerl.models import tiny_model_path

    engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_model_path()), lambda prompt: "42", model_name="m")
    with open_store(tmp_path / "traces.db") as store, GatewayServer(engine, store) as gw:
        doc = httpx.get(f"{gw.url}/health", timeout=30).json()
        assert doc["status"] == "ok" and doc["store"] == {"ok": True, "id": store.store_id()} == {
            "ok": True, "id": doc["store_id"]}
