"""One PostgreSQL span store for many writers: a restart, a server that is down, two gateways
under load, a gateway's 503 that OTLP exporters retry. A real server is started for the
module (tests/pg.py); the store's own suite runs on both backends in tests/test_store.py."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import httpx
import pg
import pytest
from openai import AsyncOpenAI

from tracerl.core.errors import StoreError
from tracerl.core.rollout import RolloutSettings, Session
from tracerl.core.spans import SpanRecord
from tracerl.core.store import PostgresStore, open_store
from tracerl.gateway import GatewayServer
from tracerl.testing import ScriptedEngine

postgres_server = pg.postgres_server
SESSIONS, TURNS = 256, 4


def spans(n: int, first: int = 1, session: str = "s") -> list[SpanRecord]:
    return [SpanRecord(trace_id="ab" * 16, span_id=format(i, "016x"), parent_span_id=None, name=f"span-{i}",
                       start_ns=i, end_ns=i + 1, attributes={"tracerl.session.id": session})
            for i in range(first, first + n)]


@pytest.fixture
def url(postgres_server):
    yield pg.fresh_url(postgres_server)
    if not (postgres_server.data / "postmaster.pid").exists():  # a test that stopped it and failed
        postgres_server.start()


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


def test_a_restart_while_writing_waits_for_the_server_and_loses_nothing(postgres_server, url):
    with PostgresStore(url, reconnect_s=30) as store:
        assert store.add(spans(10)) == 10
        postgres_server.stop("fast")
        restart = threading.Timer(1.0, postgres_server.start)
        restart.start()
        try:
            assert store.add(spans(10, first=11)) == 10  # waited for the server to come back
        finally:
            restart.join()
        assert store.count() == 20 and store.check() == "ok"


def test_a_server_that_stays_down_is_one_line_and_what_was_stored_survives(postgres_server, url):
    with PostgresStore(url, reconnect_s=0.5) as store:
        store.add(spans(5))
        postgres_server.stop("immediate")  # a crash, not a shutdown
        with pytest.raises(StoreError) as err:
            store.add(spans(5, first=6))
        message = str(err.value)
        assert "\n" not in message and pg.PASSWORD not in message and "postgresql://tracerl:***@127.0.0.1" in message
        postgres_server.start()
        assert store.add(spans(5, first=6)) == 5  # the same store object reconnects
        assert store.count() == 10


def test_a_refused_password_and_a_read_only_view_are_one_line(url):
    with pytest.raises(StoreError, match=r"password authentication failed") as err:
        open_store(url.replace(f":{pg.PASSWORD}@", ":wrong@"))
    assert "wrong" not in str(err.value) and "\n" not in str(err.value)
    open_store(url).close()  # creates the tables
    with open_store(url, read_only=True) as view, pytest.raises(StoreError, match="read-only"):
        view.add(spans(1))


def test_a_session_stamps_its_run_on_every_span_in_a_shared_store(url):
    from opentelemetry import trace

    settings = RolloutSettings(store=url, run_id="run-a")
    with Session("ep-1", settings=settings) as session, trace.get_tracer("app").start_as_current_span("my step"):
        pass
    episode = session.episode()
    assert episode.id == "ep-1"
    with open_store(url) as store:
        records = store.for_run("run-a").spans(session_id="ep-1")
        assert {r.name for r in records} == {"tracerl.episode", "my step"}
        assert {r.attributes["tracerl.run.id"] for r in records} == {"run-a"}
        assert store.for_run("run-b").count() == 0


def test_the_gateway_answers_503_while_the_store_is_down_and_an_otlp_retry_lands(postgres_server, url, tokenizer):
    """Nothing is acknowledged that was not stored: the client gets a 503 (the OpenAI SDK and
    OTLP exporters retry it), and an OTLP export that spans the outage arrives whole."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    engine = ScriptedEngine(tokenizer, lambda prompt: "42", model_name="m")
    with PostgresStore(url, reconnect_s=0.3) as store, GatewayServer(engine, store) as gw:
        postgres_server.stop("fast")
        body = {"model": "m", "messages": [{"role": "user", "content": "6 x 7?"}]}
        reply = httpx.post(gw.session_url("down") + "/chat/completions", json=body, timeout=30)
        assert reply.status_code == 503 and reply.headers["retry-after"] == "1"
        assert reply.json()["error"]["code"] == "store_unavailable"

        provider = TracerProvider()
        with provider.get_tracer("app").start_as_current_span("late", attributes={"tracerl.session.id": "otlp"}) as s:
            pass
        finished = [s]  # type: ignore[list-item]
        restart = threading.Timer(1.5, postgres_server.start)
        restart.start()
        try:  # the exporter backs off 1 s, 2 s, ... on a 503 until its timeout
            assert OTLPSpanExporter(endpoint=f"{gw.url}/v1/traces", timeout=30).export(finished) is SpanExportResult.SUCCESS
        finally:
            restart.join()
        assert [r.name for r in store.spans(session_id="otlp")] == ["late"]
        assert store.spans(session_id="down") == []


@pytest.mark.slow
async def test_256_sessions_of_4_calls_through_two_gateways_lose_no_span(url, tokenizer):
    """Two gateways, each with its own connection to one database, take half the sessions each;
    every reply a client got has its span, each session's calls are numbered 0..3."""
    engines = [ScriptedEngine(tokenizer, lambda prompt: "The answer is 42.", model_name="m") for _ in range(2)]
    stores = [open_store(url) for _ in range(2)]
    with GatewayServer(engines[0], stores[0]) as a, GatewayServer(engines[1], stores[1]) as b:
        http = httpx.AsyncClient(limits=httpx.Limits(max_connections=SESSIONS), timeout=120)
        client = AsyncOpenAI(base_url=a.url + "/v1", api_key="x", max_retries=0, http_client=http)

        async def session(i: int) -> list[str]:
            agent = client.with_options(base_url=(a, b)[i % 2].session_url(f"load-{i}"))
            messages = [{"role": "user", "content": f"What is {i} + 1?"}]
            ids = []
            for turn in range(TURNS):
                reply = await agent.chat.completions.create(model="m", messages=messages, max_tokens=8)
                ids.append(reply.id)
                messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                             {"role": "user", "content": f"And {turn}?"}]
            return ids

        results = await asyncio.gather(*(session(i) for i in range(SESSIONS)), return_exceptions=True)
        await client.close()
    for s in stores:
        s.close()
    assert [r for r in results if isinstance(r, BaseException)] == []
    with open_store(url, read_only=True) as store:
        by_session = store.spans_by_session()
        assert len(by_session) == SESSIONS and store.count() == SESSIONS * TURNS
        replied = {rid for ids in results for rid in ids}  # type: ignore[union-attr]
        stored = {r.attributes["gen_ai.response.id"] for rs in by_session.values() for r in rs}
        assert stored == replied
        for records in by_session.values():
            assert sorted(r.attributes["tracerl.llm.sequence"] for r in records) == list(range(TURNS))
        assert Counter(len(rs) for rs in by_session.values()) == {TURNS: SESSIONS}
