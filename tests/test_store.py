"""The span store: dedup, episode queries, export/import, the SDK exporter, many processes, runs.

Every test taking ``store`` or ``target`` runs on both backends: a SQLite file and a real
PostgreSQL server started for this module (tests/pg.py; skipped only where none is installed)."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
from pathlib import Path
from typing import Any

import pg
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracerl.core.errors import SpanDecodeError, StoreError
from tracerl.core.spans import SpanRecord, span_record
from tracerl.core.store import SessionSummary, SpanStore, StoreExporter, open_store

T1, T2, T3 = "a1" * 16, "b2" * 16, "c3" * 16


def rec(trace: str, n: int, start: int, *, session: str | None = None, parent: int | None = None,
        llm: bool = False, **attrs: Any) -> SpanRecord:
    if session:
        attrs["tracerl.session.id"] = session
    if llm:
        attrs["tracerl.span.type"] = "llm"
    return SpanRecord(
        trace_id=trace, span_id=format(n, "016x"), parent_span_id=format(parent, "016x") if parent else None,
        name=f"span-{n}", start_ns=start, end_ns=start + 10, attributes=attrs,
    )


def names(records: list[SpanRecord]) -> list[str]:
    return [r.name for r in records]


postgres_server = pg.postgres_server


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: Any, tmp_path: Path) -> str:
    """An empty store's path or URL."""
    if request.param == "sqlite":
        return str(tmp_path / "traces.db")
    return pg.fresh_url(request.getfixturevalue("postgres_server"))


@pytest.fixture
def store(target: str) -> Any:
    with open_store(target) as s:
        yield s


# --- writing ------------------------------------------------------------------------------


def test_duplicates_are_ignored_counted_and_never_overwrite(store: SpanStore) -> None:
    first = [rec(T1, 1, 100, note="first"), rec(T1, 2, 200), rec(T1, 3, 300)]
    assert store.add(first) == 3
    again = [rec(T1, 1, 100, note="second delivery"), rec(T1, 2, 200), rec(T1, 4, 400)]
    assert store.add(again) == 1
    assert store.duplicates == 2
    assert store.count() == 4
    assert store.spans(trace_id=T1)[0].attributes["note"] == "first"
    assert store.add([]) == 0


def test_megabyte_attribute_values_round_trip(store: SpanStore, tmp_path: Path) -> None:
    text = "x" * 1_000_000 + "ü"
    ids = list(range(250_000))
    store.add([rec(T1, 1, 1, session="big", blob=text, ids=ids)])
    [back] = store.spans(session_id="big")
    assert back.attributes["blob"] == text
    assert back.attributes["ids"] == ids
    store.export_parquet(tmp_path / "big.parquet")
    with SpanStore(":memory:") as other:
        other.import_parquet(tmp_path / "big.parquet")
        assert other.spans()[0].attributes["blob"] == text


# --- reading ------------------------------------------------------------------------------


def _episode_traces(store: SpanStore) -> None:
    """T1: episode e1 with an untagged tool span and another session's span; T2: session-less."""
    store.add([rec(T1, 5, 150, parent=1)])  # untagged, arrives before its trace is tagged
    store.add([rec(T1, 1, 100, session="e1"), rec(T1, 2, 120, session="e1", parent=1, llm=True)])
    store.add([rec(T1, 3, 130, session="e2", parent=1, llm=True), rec(T1, 4, 140, session="e1", parent=1)])
    store.add([rec(T2, 10, 500), rec(T2, 11, 510, parent=10, llm=True)])
    store.add([rec(T3, 20, 50, session="e1")])  # e1 spans a second trace too


def test_session_query_takes_untagged_spans_of_its_traces_but_not_other_sessions(store: SpanStore) -> None:
    _episode_traces(store)
    assert names(store.spans(session_id="e1")) == ["span-20", "span-1", "span-2", "span-4", "span-5"]
    assert names(store.spans(session_id="e2")) == ["span-3"]
    assert names(store.spans(session_id=f"trace:{T2}")) == ["span-10", "span-11"]
    assert store.spans(session_id="nobody") == []


def test_trace_and_time_window_queries(store: SpanStore) -> None:
    _episode_traces(store)
    assert names(store.spans(trace_id=T1)) == ["span-1", "span-2", "span-3", "span-4", "span-5"]
    # since inclusive, until exclusive, on the start time; ordered by start time
    assert names(store.spans(since_ns=120, until_ns=150)) == ["span-2", "span-3", "span-4"]
    assert names(store.spans(trace_id=T1, since_ns=130, limit=2)) == ["span-3", "span-4"]
    assert names(store.spans(session_id="e1", until_ns=120)) == ["span-20", "span-1"]


def test_sessions_summarise_each_episode_newest_first(store: SpanStore) -> None:
    _episode_traces(store)
    assert store.sessions() == [
        SessionSummary(f"trace:{T2}", spans=2, llm_calls=1, start_ns=500, end_ns=520),
        SessionSummary("e2", spans=1, llm_calls=1, start_ns=130, end_ns=140),
        SessionSummary("e1", spans=5, llm_calls=1, start_ns=50, end_ns=160),
    ]
    assert [s.session_id for s in store.sessions(since_ns=100)] == [f"trace:{T2}", "e2"]
    assert [s.session_id for s in store.sessions(until_ns=500, limit=1)] == ["e2"]


# --- export / import ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_import_round_trip_is_exact(store: SpanStore, tmp_path: Path, fmt: str) -> None:
    _episode_traces(store)
    store.add([rec(T2, 12, 520, parent=10, score=0.25, ok=True, tags=["a", "ü"], nested={"k": [1, None]},
                   text="line\nbreak \"quoted\"")])
    path = tmp_path / f"spans.{fmt}"
    export, load = (store.export_jsonl, "import_jsonl") if fmt == "jsonl" else (store.export_parquet, "import_parquet")
    assert export(path) == store.count() == 9
    with SpanStore(tmp_path / "copy.db") as copy:
        assert getattr(copy, load)(path) == 9
        assert [r.to_dict() for r in copy.spans()] == [r.to_dict() for r in store.spans()]
        assert copy.sessions() == store.sessions()
        assert getattr(copy, load)(path) == 0  # importing twice adds nothing
    assert export(tmp_path / f"e2.{fmt}", session_id="e2") == 1


def test_import_with_one_bad_line_stores_nothing_and_names_the_line(store: SpanStore, tmp_path: Path) -> None:
    _episode_traces(store)
    path = tmp_path / "spans.jsonl"
    store.export_jsonl(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"span_id":"', '"span_id":"zz', 1)
    path.write_text("".join(lines))
    with SpanStore(tmp_path / "other.db") as other:
        with pytest.raises(SpanDecodeError, match="line 4: invalid span record"):
            other.import_jsonl(path)
        assert other.count() == 0


def test_import_parquet_of_another_file_says_what_it_expects(store: SpanStore, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(SpanDecodeError, match="is not a span export"):
        store.import_parquet(tmp_path / "other.parquet")


# --- the OpenTelemetry exporter -----------------------------------------------------------


def test_store_exporter_under_batch_span_processor(store: SpanStore) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(BatchSpanProcessor(StoreExporter(store), max_export_batch_size=16,
                                                   schedule_delay_millis=50))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.store")
    for i in range(40):
        with (
            tracer.start_as_current_span("episode", attributes={"tracerl.session.id": f"s{i % 4}"}),
            tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", "i": i}),
        ):
            pass
    assert provider.force_flush(10_000)
    expected = sorted((span_record(s).to_dict() for s in memory.get_finished_spans()),
                      key=lambda d: (d["start_ns"], d["span_id"]))
    assert [r.to_dict() for r in store.spans()] == expected
    assert {s.session_id: (s.spans, s.llm_calls) for s in store.sessions()} == {f"s{i}": (20, 10) for i in range(4)}
    provider.shutdown()


def test_store_exporter_reports_failure_instead_of_raising(tmp_path: Path) -> None:
    path = tmp_path / "traces.db"
    store = SpanStore(path)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    spans = memory.get_finished_spans()
    # Another process makes the file refuse writes (as a full disk or read-only mount would).
    with sqlite3.connect(path) as other:
        other.execute("CREATE TRIGGER refuse BEFORE INSERT ON spans BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(StoreError, match="writing 1 spans to .* failed: disk full"):
        store.add(span_record(s) for s in spans)
    exporter = StoreExporter(store)
    assert exporter.export(spans) is SpanExportResult.FAILURE
    with sqlite3.connect(path) as other:
        other.execute("DROP TRIGGER refuse")
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    store.close()
    assert exporter.export(spans) is SpanExportResult.FAILURE  # a closed store, too
    provider.shutdown()


def test_unwritable_path_is_a_store_error_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="cannot open span store .*TRACERL_HOME"):
        SpanStore(tmp_path / "dir.db")


def test_a_sqlite_file_without_our_tables_is_refused_read_only(tmp_path: Path) -> None:
    # the moment between a writer creating traces.db and creating its tables, or a stray file
    path = tmp_path / "other.db"
    sqlite3.connect(path).close()
    with pytest.raises(StoreError, match="has no spans table"):
        SpanStore(path, read_only=True)


# --- many processes --------------------------------------------------------------------------

WRITERS, BATCHES, BATCH = 4, 50, 20


def _writer(path: str, w: int, go: Any) -> None:
    go.wait()
    store = open_store(path)  # opened at the same moment by every writer: a new file, new tables
    for b in range(BATCHES):
        trace = format(w * 1000 + b + 1, "032x")
        batch = [rec(trace, w * 100_000 + b * 100 + i + 1, time.time_ns(), session=f"w{w}-b{b}")
                 for i in range(BATCH)]
        assert store.add(batch) == BATCH
    store.close()


def _reader(path: str, go: Any, done: Any, out: Any) -> None:
    go.wait()
    while True:  # until a writer has made the file (or the tables)
        try:
            store = open_store(path, read_only=True)
            break
        except StoreError:
            time.sleep(0.005)
    reads, last, torn = 0, 0, []
    while True:
        finished = done.is_set()
        n = store.count()
        assert n >= last, f"count went back from {last} to {n}"
        last = n
        for s in store.sessions(limit=3):
            got = len(store.spans(session_id=s.session_id))
            if got != BATCH:  # a batch is one transaction: never seen half-written
                torn.append((s.session_id, got))
        reads += 1
        if finished:
            break
    store.close()
    out.put((reads, last, torn))


def test_four_processes_write_one_store_while_another_reads(target: str) -> None:
    path = target
    ctx = multiprocessing.get_context("spawn")
    go, done, out = ctx.Event(), ctx.Event(), ctx.Queue()
    writers = [ctx.Process(target=_writer, args=(path, w, go)) for w in range(WRITERS)]
    reader = ctx.Process(target=_reader, args=(path, go, done, out))
    for p in [*writers, reader]:
        p.start()
    go.set()
    for p in writers:
        p.join(60)
    done.set()
    reads, last_seen, torn = out.get(timeout=60)
    reader.join(10)
    assert [p.exitcode for p in writers] == [0] * WRITERS
    assert reader.exitcode == 0
    assert torn == []
    assert reads > 1 and last_seen == WRITERS * BATCHES * BATCH
    with open_store(path) as store:
        assert store.count() == WRITERS * BATCHES * BATCH
        assert store.check() == "ok"
        assert len(store.sessions()) == WRITERS * BATCHES
        assert store.duplicates == 0


@pytest.mark.parametrize("value", [
    [-0.5, float("-inf"), -1.25],  # a log-probability of -inf is data
    [1, 2, float("nan")],  # a float hiding in an int list
    [[0.5, float("inf")]],
    {"nested": [0.0, float("-inf")]},
])
def test_non_finite_numbers_survive_the_store(store, value):
    store.add([rec(T1, 1, 100, session="s", logprobs=value, ids=list(range(5000)), text="é")])
    (back,) = store.spans(session_id="s")
    assert repr(back.attributes["logprobs"]) == repr(value)
    assert back.attributes["ids"] == list(range(5000)) and back.attributes["text"] == "é"


def test_open_store_refuses_an_unknown_url_and_opens_a_path(tmp_path, monkeypatch):
    from tracerl.core.errors import StoreError
    from tracerl.core.store import open_store, run_store

    monkeypatch.chdir(tmp_path)
    for url in ("mysql://user:secret@host:5432/db", Path("mysql://h/db"), "sqlite:///x.db"):
        with pytest.raises(StoreError, match="URL is not a store tracerl can open") as err:
            open_store(url)
        assert "secret" not in str(err.value) and "postgresql://user:password@host" in str(err.value)
    # a PostgreSQL URL is a store: with no server there, one line naming it (password masked)
    with pytest.raises(StoreError, match=r"cannot open span store postgresql://u:\*\*\*@127.0.0.1:1/db") as err:
        open_store("postgresql://u:secret@127.0.0.1:1/db")
    assert "secret" not in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
    with open_store(tmp_path / "a" / "t.db") as store:  # a path, even one with a colon in it, is a file
        assert store.path == str(tmp_path / "a" / "t.db")
    with open_store("C:/x.db") as store, run_store(tmp_path / "run") as run:
        assert store.path == "C:/x.db" and Path(run.path) == tmp_path / "run" / "traces.db"


# --- runs in one store ------------------------------------------------------------------------


def test_a_run_view_sees_its_episodes_only_and_gateway_spans_follow_their_session(store: SpanStore) -> None:
    """Two runs share the store. The session stamps the run id on its spans; the gateway's span
    carries only the session (it need not know the run) and still belongs to it."""
    run = "tracerl.run.id"
    store.add([
        rec(T1, 1, 100, session="a-ep", **{run: "run-a"}), rec(T1, 2, 110, parent=1),  # untagged: follows its trace
        rec(T2, 3, 120, session="a-ep", llm=True),  # the gateway's, in a trace of its own
        rec(T3, 4, 200, session="b-ep", **{run: "run-b"}), rec(T3, 5, 210, session="b-ep", llm=True),
        rec("d4" * 16, 6, 300, session="no-run"),  # an app's spans, in no run
    ])
    a, b = store.for_run("run-a"), store.for_run("run-b")
    assert [s.session_id for s in a.sessions()] == ["a-ep"] and a.sessions()[0].llm_calls == 1
    assert names(a.spans()) == ["span-1", "span-2", "span-3"] and a.count() == 3
    assert sorted(b.spans_by_session()) == ["b-ep"] and b.count() == 2
    assert b.spans(session_id="a-ep") == []  # another run's episode is not seen through this view
    assert [(r.run_id, r.episodes, r.spans) for r in store.runs()] == [("run-b", 1, 2), ("run-a", 1, 3)]
    assert store.count() == 6  # the whole store is unchanged
    assert a.prune(dry_run=True) == (1, 3)
    assert a.prune() == (1, 3)
    assert store.count() == 3 and [r.run_id for r in store.runs()] == ["run-b"]
    assert sorted(s.session_id for s in store.sessions()) == ["b-ep", "no-run"]


def test_the_first_run_to_name_a_session_keeps_it(store: SpanStore) -> None:
    store.add([rec(T1, 1, 100, session="ep", **{"tracerl.run.id": "first"})])
    store.add([rec(T1, 2, 110, session="ep", **{"tracerl.run.id": "second"})])
    assert [r.run_id for r in store.runs()] == ["first"] and store.for_run("second").count() == 0


def _steady_writer(path: str, acked: Any) -> None:
    store = open_store(path)
    for b in range(100_000):
        trace = format(b + 1, "032x")
        store.add([rec(trace, i + 1, b * 100 + i, session=f"k{b}") for i in range(BATCH)])
        acked.put(b)  # after the commit returned: what a gateway would now answer


def test_kill_9_of_a_writer_loses_nothing_it_committed(target: str) -> None:
    import os
    import signal

    ctx = multiprocessing.get_context("spawn")
    acked = ctx.Queue()
    writer = ctx.Process(target=_steady_writer, args=(target, acked))
    writer.start()
    seen = [acked.get(timeout=60) for _ in range(30)]
    os.kill(writer.pid, signal.SIGKILL)  # mid-batch, most likely
    writer.join(10)
    while True:
        try:
            seen.append(acked.get(timeout=0.5))
        except Exception:  # noqa: BLE001 - queue.Empty: drained
            break
    with open_store(target) as store:
        assert store.check() == "ok"
        sizes = {s.session_id: s.spans for s in store.sessions()}
        assert all(f"k{b}" in sizes for b in seen)  # every acknowledged batch is there
        assert set(sizes.values()) == {BATCH}  # and no batch is there in part


# --- apps in one store (service.name) ---------------------------------------------------------


def _of(service: str | None, record: SpanRecord) -> SpanRecord:
    if service is not None:
        record.resource = {"service.name": service, "telemetry.sdk.language": "python"}
    return record


def _two_apps(store: SpanStore) -> None:
    """App A's two episodes (one with an untagged span of an instrumentor that knows no session,
    one a session-less trace), app B's one; the gateway's token spans in A's and B's sessions."""
    gw = "tracerl-gateway"
    store.add([
        _of("app-a", rec(T1, 1, 100, session="a-1")), _of(None, rec(T1, 2, 110, parent=1)),
        _of(gw, rec(T1, 3, 120, session="a-1", parent=1, llm=True)),
        _of("app-a", rec(T2, 4, 200)), _of(gw, rec(T2, 5, 210, parent=4, llm=True)),
        _of("app-b", rec(T3, 6, 300, session="b-1")), _of(gw, rec(T3, 7, 310, session="b-1", parent=6, llm=True)),
    ])


def test_an_apps_episodes_are_selected_whole_with_the_gateways_spans(store: SpanStore, tmp_path: Path) -> None:
    _two_apps(store)
    assert names(store.spans(service="app-a")) == ["span-1", "span-2", "span-3", "span-4", "span-5"]
    assert [s.session_id for s in store.sessions(service="app-a")] == [f"trace:{T2}", "a-1"]
    assert [(s.session_id, s.spans, s.llm_calls) for s in store.sessions(service="app-b")] == [("b-1", 2, 1)]
    assert names(store.spans(service="app-a", session_id="a-1")) == ["span-1", "span-2", "span-3"]
    assert store.spans(service="app-b", session_id="a-1") == [] and store.spans(service="nobody") == []
    assert [(s.service, s.episodes, s.spans) for s in store.services()] == [
        ("app-a", 2, 2), ("app-b", 1, 1), ("tracerl-gateway", 3, 3), (None, 1, 1)]
    # the export carries each span's resource: an import into another store has the same services
    out = tmp_path / "a.jsonl"
    assert store.export_jsonl(out, service="app-a") == 5
    with open_store(tmp_path / "other.db") as other:
        assert other.import_jsonl(out) == 5
        assert [(s.service, s.episodes) for s in other.services()] == [("app-a", 2), ("tracerl-gateway", 2), (None, 1)]
        assert names(other.spans(service="app-a")) == names(store.spans(service="app-a"))


# The tables as tracerl made them before spans had a service column (int64: INTEGER | BIGINT).
_OLD_SCHEMA = """
CREATE TABLE spans (trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_span_id TEXT, session_id TEXT,
    name TEXT NOT NULL, start_ns {int64} NOT NULL, end_ns {int64} NOT NULL, is_llm INTEGER NOT NULL DEFAULT 0,
    inserted_ns {int64} NOT NULL, record TEXT NOT NULL, PRIMARY KEY (trace_id, span_id));
CREATE INDEX spans_session ON spans(session_id);
CREATE INDEX spans_start ON spans(start_ns);
CREATE TABLE trace_sessions (trace_id TEXT PRIMARY KEY, session_id TEXT NOT NULL);
CREATE INDEX trace_sessions_session ON trace_sessions(session_id);
CREATE TABLE session_runs (session_id TEXT PRIMARY KEY, run_id TEXT NOT NULL);
CREATE INDEX session_runs_run ON session_runs(run_id);
CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _old_store(target: str, records: list[SpanRecord]) -> None:
    """A store as the previous schema made it, holding ``records`` as its writer stored them."""
    rows = [(r.trace_id, r.span_id, r.parent_span_id, r.session_id, r.name, r.start_ns, r.end_ns,
             int(r.attributes.get("tracerl.span.type") == "llm"), 1, json.dumps(r.to_dict())) for r in records]
    insert = "INSERT INTO spans VALUES (?,?,?,?,?,?,?,?,?,?)"
    links = sorted({(r.trace_id, r.session_id) for r in records if r.session_id})
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS spans, trace_sessions, session_runs, store_meta")
            conn.execute(_OLD_SCHEMA.format(int64="BIGINT"))
            with conn.cursor() as cur:
                cur.executemany(insert.replace("?", "%s"), rows)
                cur.executemany("INSERT INTO trace_sessions VALUES (%s, %s)", links)
        return
    with sqlite3.connect(target) as db:
        db.executescript(_OLD_SCHEMA.format(int64="INTEGER"))
        db.executemany(insert, rows)
        db.executemany("INSERT INTO trace_sessions VALUES (?, ?)", links)
    db.close()


def _columns(target: str) -> list[str]:
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target) as conn:
            return [row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'spans'"
                " AND table_schema = current_schema() ORDER BY ordinal_position")]
    with sqlite3.connect(target) as db:
        names = [row[1] for row in db.execute("PRAGMA table_info(spans)")]
    db.close()
    return names


def test_a_store_made_before_the_service_column_is_migrated_on_open_and_keeps_its_spans(target: str) -> None:
    old = [_of("app-a", rec(T1, 1, 100, session="a-1", note="ü")), _of("tracerl-gateway", rec(
        T1, 2, 110, session="a-1", parent=1, llm=True)), _of(None, rec(T2, 3, 200, session="b-1"))]
    _old_store(target, old)
    assert "service" not in _columns(target)
    with open_store(target) as store:  # opened for writing: migrated
        assert _columns(target)[-1] == "service"
        assert [r.to_dict() for r in store.spans()] == [r.to_dict() for r in old]  # every span, exactly
        # the spans stored before the column learnt their service from their record
        assert [(s.service, s.episodes) for s in store.services()] == [("app-a", 1), ("tracerl-gateway", 1), (None, 1)]
        assert names(store.spans(service="app-a")) == ["span-1", "span-2"]
        assert store.add([_of("app-b", rec(T3, 4, 300, session="c-1"))]) == 1
        assert store.check() == "ok"
    with open_store(target) as again:  # a second open finds nothing to do
        assert again.count() == 4 and [s.session_id for s in again.sessions(service="app-b")] == ["c-1"]
    assert _columns(target).count("service") == 1
