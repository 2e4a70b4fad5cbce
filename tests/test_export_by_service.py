"""Export by app (issue 40): two LangGraph apps write one span store through one gateway, and
`tracerl traces export --service` / `--trajectory` give back exactly one app's episodes, each
whole, the gateway's token spans joined.

The user's case, on a SQLite file and on PostgreSQL: a real gateway on 127.0.0.1 serving the
bundled tiny model writes the store; app A (OTEL_SERVICE_NAME=units-app) writes the same store
directly, app B (instrument(service_name="quiz-app")) writes a store of its own and ships its
spans to the gateway's /v1/traces over OTLP. Each app runs in its own process, as apps do.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pg
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tracerl.cli.main import main
from tracerl.core.convert import episodes_from_sessions, split_sessions
from tracerl.core.errors import ConfigError
from tracerl.core.otel import setup_tracing
from tracerl.core.spans import read_jsonl
from tracerl.core.store import open_store
from tracerl.gateway import GatewayServer

postgres_server = pg.postgres_server
EPISODES = 3

APP = '''
"""An app of the two: a LangGraph graph of one node asking the gateway, one session a question."""
import sys

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

import tracerl
from tracerl.core.otel import tracing_state

gateway, node, count, service, otlp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] or None, sys.argv[5] or None
tracerl.instrument("langgraph", service_name=service, otlp_endpoint=otlp)
settings = tracerl.RolloutSettings(gateway_url=gateway, otlp_endpoint=otlp, max_tokens=4, temperature=0.0)
for i in range(count):
    with tracerl.session(f"{node}-{i}", settings=settings) as session:
        llm = ChatOpenAI(base_url=session.base_url, api_key="x", model="tracerl-tiny", max_tokens=4, temperature=0)
        graph = StateGraph(MessagesState)
        graph.add_node(node, lambda state: {"messages": [llm.invoke(state["messages"])]})
        graph.add_edge(START, node)
        graph.add_edge(node, END)
        graph.compile().invoke({"messages": [("user", f"What is {i} + 2?")]})
assert tracing_state().flush()
'''


def _app(script: Path, gateway: str, node: str, *, env: dict[str, str], service: str = "",
         otlp: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script), gateway, node, str(EPISODES), service, otlp],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """The store app A and the gateway write by default (the environment that makes it so):
    $TRACERL_HOME/traces.db, or a PostgreSQL database named by $TRACERL_STORE."""
    home = tmp_path_factory.mktemp("a-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "TRACERL_STORE"}
    env["TRACERL_HOME"] = str(home)
    if request.param == "sqlite":
        return str(home / "traces.db"), env
    url = pg.fresh_url(request.getfixturevalue("postgres_server"))
    return url, {**env, "TRACERL_STORE": url}


@pytest.fixture(scope="module")
def target(world: tuple[str, dict[str, str]]) -> str:
    return world[0]


@pytest.fixture(scope="module")
def two_apps(world: tuple[str, dict[str, str]], tiny_engine: Any,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Apps A and B ran their episodes through one gateway; their episode ids, by service."""
    target, env = world
    folder = tmp_path_factory.mktemp("apps")
    script = folder / "app.py"
    script.write_text(APP)
    with open_store(target) as store, GatewayServer(tiny_engine, store) as gw:
        apps = [
            _app(script, gw.url, "converter", env={**env, "OTEL_SERVICE_NAME": "units-app"}),
            # B's own store is elsewhere: the gateway's store sees its spans over OTLP only
            _app(script, gw.url, "quiz", service="quiz-app", otlp=gw.url,
                 env={k: v for k, v in env.items() if k != "TRACERL_STORE"} | {
                     "TRACERL_HOME": str(folder / "b-home"), "OTEL_SERVICE_NAME": "not-this-one"}),
        ]
        for app in apps:
            out, _ = app.communicate(timeout=240)
            assert app.returncode == 0, out
    return {"units-app": [f"converter-{i}" for i in range(EPISODES)], "quiz-app": [f"quiz-{i}" for i in range(EPISODES)]}


def _exported(path: Path) -> dict[str, Any]:
    """The episodes rebuilt from an export file, by id."""
    with open(path, encoding="utf-8") as fh:
        sessions = split_sessions(list(read_jsonl(fh)))
    return {ep.id: ep for ep in episodes_from_sessions(sessions)}


@pytest.mark.slow
def test_export_by_service_gives_one_apps_episodes_with_the_gateways_tokens(two_apps, target, tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["traces", "list", "--db", target]) == 0
    rows = {line.split("│")[-2].strip(): line for line in capsys.readouterr().out.splitlines() if "│" in line}
    for service, ids in two_apps.items():
        assert all(f"│ {service} " in rows[sid] for sid in ids), rows
    for service, ids in two_apps.items():
        out = tmp_path / f"{service}.jsonl"
        assert main(["traces", "export", str(out), "--db", target, "--service", service]) == 0
        episodes = _exported(out)
        assert sorted(episodes) == ids  # exactly this app's episodes, each once
        for ep in episodes.values():
            (step,) = ep.steps
            assert step.has_tokens and step.prompt_ids and step.response_ids  # the gateway's span came along
            assert "framework_span_id" in step.metadata  # joined to the app's own LLM span
            (trajectory,) = ep.trajectories
            assert trajectory.name == ids[0].split("-")[0]
        with open(out, encoding="utf-8") as fh:
            services = Counter(r.service for r in read_jsonl(fh))
        assert services[service] > 0 and services["tracerl-gateway"] == EPISODES
        assert set(services) == {service, "tracerl-gateway"}
    capsys.readouterr()
    out = tmp_path / "converter.jsonl"
    assert main(["traces", "export", str(out), "--db", target, "--trajectory", "converter"]) == 0
    assert sorted(_exported(out)) == two_apps["units-app"]
    # Parquet too, and an import keeps each span's service
    parquet, other = tmp_path / "quiz.parquet", tmp_path / "other.db"
    assert main(["traces", "export", str(parquet), "--db", target, "--service", "quiz-app"]) == 0
    assert main(["traces", "import", str(parquet), "--db", str(other)]) == 0
    with open_store(other) as store:
        assert sorted(s.session_id for s in store.sessions(service="quiz-app")) == two_apps["quiz-app"]
        assert [s.service for s in store.services()] == ["quiz-app", "tracerl-gateway"]


@pytest.mark.slow
def test_an_unknown_service_or_trajectory_is_one_line_naming_what_there_is(two_apps, target, tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert main(["traces", "export", str(out), "--db", target, "--service", "unit-app"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no spans of service 'unit-app'" in err
    assert f"quiz-app ({EPISODES} episodes), tracerl-gateway ({2 * EPISODES} episodes), units-app" in err
    assert main(["traces", "export", str(out), "--db", target, "--service", "quiz-app",
                 "--trajectory", "converter"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "trajectory named 'converter'" in err and f"quiz ({EPISODES} episodes)" in err
    assert not out.exists()


def test_service_name_cannot_rename_a_provider_that_exists_and_says_so_once(tmp_path, caplog):
    provider = TracerProvider(resource=Resource.create({"service.name": "mine"}))
    with caplog.at_level(logging.WARNING, logger="tracerl.core.otel"):
        tracing = setup_tracing(str(tmp_path / "t.db"), tracer_provider=provider, service_name="mine")
        assert not caplog.records
        for _ in range(2):
            setup_tracing(str(tmp_path / "t.db"), tracer_provider=provider, service_name="other")
    (warning,) = caplog.records
    assert "service_name='other' is not applied" in warning.getMessage() and "'mine'" in warning.getMessage()
    with tracing.tracer().start_as_current_span("work"):
        pass
    assert tracing.flush()
    assert [s.service for s in tracing.default_store().services()] == ["mine"]
    with pytest.raises(ConfigError, match="non-empty string"):
        setup_tracing(tracer_provider=provider, service_name=" ")
    provider.shutdown()
