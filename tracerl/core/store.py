"""The span store: where every span lands, and what the converter, the CLI and the dashboard read.

Two backends run the same SQL: a SQLite file in WAL mode, the embedded default
(:mod:`.store_sqlite`), and a PostgreSQL database that many gateways and trainers write at once
(:mod:`.store_postgres`). :func:`open_store` picks one from a path or a ``postgresql://`` URL.
``BatchSpanProcessor(StoreExporter(store))`` is the whole hook-up for in-process spans; the
gateway writes its token-level spans and OTLP-received spans to the same store. Each batch is
one transaction, so a batch is stored whole or not at all, and a span already stored is never
overwritten (a duplicate delivery is ignored and counted).

Episodes are keyed by session id; a span without one belongs to the session of any other
span in its trace (so third-party spans and orphans follow their trace), and a trace with no
session at all is its own episode, keyed ``trace:<trace_id>``.

A shared store holds many runs. An episode belongs to the run named by ``tracerl.run.id`` on
any of its spans (the session stamps it on every span it starts; the gateway's spans follow
their session), and :meth:`SpanStore.for_run` gives a view whose every query sees that run's
episodes only.

Each span keeps the OpenTelemetry ``service.name`` of its resource (the app that wrote it, or
``tracerl-gateway`` for the gateway's token spans) in the ``service`` column: ``service=`` in
:meth:`SpanStore.spans` and :meth:`SpanStore.sessions` selects the episodes with any span of that
service, whole, so the gateway's spans stay with the app's sessions.
"""

from __future__ import annotations

import collections
import copy
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _json
from .errors import MissingDependencyError, SpanDecodeError, StoreError
from .spans import SpanRecord, dumps_jsonl, read_jsonl, session_of, span_record
from .store_postgres import SCHEMES as POSTGRES_SCHEMES
from .store_postgres import PostgresBackend, mask, without_password
from .store_sqlite import SqliteBackend

log = logging.getLogger(__name__)

TRACE_SESSION_PREFIX = "trace:"
STORE_ENV = "TRACERL_STORE"  # the span store every command uses when given none


def tracerl_home() -> Path:
    """``$TRACERL_HOME``, defaulting to ``~/.tracerl``: the store, the config, set-up models."""
    return Path(os.environ.get("TRACERL_HOME") or os.path.join(os.path.expanduser("~"), ".tracerl"))


def default_store_path() -> Path:
    """``$TRACERL_HOME/traces.db``."""
    return tracerl_home() / RUN_STORE


RUN_STORE = "traces.db"  # a run folder's span store
# a URL's scheme (two letters at least: ``C:/`` is a drive); a Path keeps one slash of ``://``
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def default_store_target() -> str:
    """``$TRACERL_STORE`` (a path or a URL), else :func:`default_store_path`."""
    return os.environ.get(STORE_ENV) or str(default_store_path())


def is_url(target: str | os.PathLike[str]) -> bool:
    return _URL.match(str(target)) is not None


def open_store(target: str | os.PathLike[str] | None = None, *, read_only: bool = False,
               run_id: str | None = None) -> SpanStore:
    """The span store ``target`` names: a SQLite file's path or a ``postgresql://`` URL (None:
    :func:`default_store_target`). ``run_id``: a view of that run's episodes only."""
    target = str(target) if target is not None else default_store_target()
    check_store_target(target)
    store = PostgresStore(target, read_only=read_only) if is_url(target) else SpanStore(target, read_only=read_only)
    return store.for_run(run_id) if run_id else store


def run_store(folder: str | os.PathLike[str], *, read_only: bool = False, store: str | None = None,
              run_id: str | None = None) -> SpanStore:
    """A run's span store: ``store`` (a path or URL shared by many runs) seen through the run's
    id, else the run folder's own ``FOLDER/traces.db``."""
    if store is not None:
        return open_store(reopen_target(store), read_only=read_only, run_id=run_id)
    return open_store(Path(folder) / RUN_STORE, read_only=read_only)


def recorded(target: str | None) -> str | None:
    """How a run folder records its store: a URL without its password."""
    return without_password(target) if target is not None and is_url(target) else target


def reopen_target(target: str) -> str:
    """The store a run folder recorded, to open again: ``$TRACERL_STORE`` when that names the
    same database (with the password the folder left out), else the recorded URL or path."""
    env = os.environ.get(STORE_ENV)
    return env if env and is_url(target) and without_password(env) == without_password(target) else target


def shared_store(requested: str | None, earlier: str | None = None) -> str | None:
    """The store shared by runs that a run writes, checked (None: its folder's own): the one
    asked for, else the one it wrote before it was resumed, else ``$TRACERL_STORE``."""
    store = requested or (reopen_target(earlier) if earlier else None) or os.environ.get(STORE_ENV) or None
    if store is not None:
        check_store_target(store)  # a URL of an unknown kind is one line, before a model loads
    return store


def check_store_target(target: str) -> None:
    """Refuse a URL of a kind tracerl cannot open, before anything else starts: taken as a
    path, ``mysql://host/db`` would quietly make a folder named ``mysql:`` with a new, empty
    store in it."""
    found = _URL.match(target)
    if found is not None and found[1].lower() not in POSTGRES_SCHEMES:
        raise StoreError(f"span store {mask(target)!r}: a {found[1]!r} URL is not a store tracerl can open; "
                         "pass a SQLite file's path or a postgresql://user:password@host:port/database URL")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    spans: int
    llm_calls: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class ServiceSummary:
    service: str | None  # None: spans whose resource names no service
    episodes: int
    spans: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    episodes: int
    spans: int
    start_ns: int
    end_ns: int


# The episode a span belongs to: its session, else its trace's session, else its trace alone
# (``s`` the spans table, ``ts`` trace_sessions LEFT JOINed on the trace id).
_EPISODE = "COALESCE(s.session_id, ts.session_id, 'trace:' || s.trace_id)"
_JOIN = "FROM spans s LEFT JOIN trace_sessions ts ON ts.trace_id = s.trace_id"


class Backend(Protocol):
    """What a backend gives the store: the SQL is the store's, in ``?`` placeholders."""

    where: str  # the store named in messages (a password masked)
    read_only: bool
    Error: Any  # the backend's base exception class

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def write(self, steps: Sequence[tuple[str, Any, bool]]) -> list[int]: ...

    def integrity(self) -> str: ...

    def close(self) -> None: ...


# A run's episodes: those a span of the run named (``session_runs``, filled as spans arrive).
_IN_RUN = f"{_EPISODE} IN (SELECT session_id FROM session_runs WHERE run_id = ?)"
# An app's episodes: those with any span of its service (the subquery's s and ts are its own).
_OF_SERVICE = f"{_EPISODE} IN (SELECT {_EPISODE} {_JOIN} WHERE s.service = ?)"
_INSERT_SPANS = ("INSERT INTO spans (trace_id, span_id, parent_span_id, session_id, name, start_ns, end_ns,"
                 " is_llm, inserted_ns, record, service) VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING")
_INSERT_LINKS = "INSERT INTO trace_sessions (trace_id, session_id) VALUES (?, ?) ON CONFLICT DO NOTHING"
_INSERT_RUNS = "INSERT INTO session_runs (session_id, run_id) VALUES (?, ?) ON CONFLICT DO NOTHING"


def _text(value: str | None) -> str | None:
    # PostgreSQL's text holds no NUL; the record column keeps the exact value (JSON escapes it)
    return value.replace("\x00", "\ufffd") if value is not None and "\x00" in value else value


class SpanStore:
    """A store of spans: a SQLite file here, a PostgreSQL database in :class:`PostgresStore`.
    Thread-safe; safe to share between processes by path or URL.

    ``SpanStore()`` opens :func:`default_store_path`; ``SpanStore(":memory:")`` is private
    to the process (tests, benchmarks). Open a path or a URL with :func:`open_store`.
    """

    _backend: Backend

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 60.0,
                 read_only: bool = False):
        """``read_only``: open an existing file without writing to it or beside it (the
        dashboard's way: a run folder is never modified by looking at it)."""
        self.path = str(path) if path is not None else str(default_store_path())
        if is_url(self.path):
            raise StoreError(f"SpanStore opens a SQLite file, not {self.where!r}: use open_store() for a URL")
        self._start(SqliteBackend(self.path, busy_timeout_s=busy_timeout_s, read_only=read_only))

    def _start(self, backend: Backend) -> None:
        self._backend, self.read_only = backend, backend.read_only
        self._lock = threading.RLock()
        self.duplicates = 0
        self.run_id: str | None = None

    def for_run(self, run_id: str) -> SpanStore:
        """A view of this store that reads only run ``run_id``'s episodes (the same connection:
        close one or the other, once)."""
        view = copy.copy(self)
        view.run_id = run_id
        return view

    @property
    def where(self) -> str:
        """The store as messages name it: its path, or its URL with the password masked."""
        backend = getattr(self, "_backend", None)
        return backend.where if backend is not None else mask(self.path)

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        scope = f", run_id={self.run_id!r}" if self.run_id else ""
        return f"{type(self).__name__}({self.where!r}{scope})"

    def store_id(self) -> str | None:
        """This store's identity, made once by its first writer and the same for every process
        that opens it by whatever path or URL: how a trainer checks that gateways it does not
        own write its store. None for a read-only view of a store that never had one."""
        query = "SELECT value FROM store_meta WHERE key = 'id'"
        try:
            rows = self._query(query)
        except StoreError:
            if self.read_only:  # a file written before the table existed
                return None
            raise
        if rows or self.read_only:
            return str(rows[0][0]) if rows else None
        with self._lock:  # two first writers race: one id wins, both read it back
            try:
                self._backend.write([("INSERT INTO store_meta (key, value) VALUES ('id', ?) ON CONFLICT DO NOTHING",
                                      (uuid.uuid4().hex,), False)])
            except self._backend.Error as exc:
                raise StoreError(f"writing {self.where!r} failed: {exc}") from exc
        return str(self._query(query)[0][0])

    # -- writing ----------------------------------------------------------------------

    def add(self, records: Iterable[SpanRecord]) -> int:
        """Store spans in one transaction; return how many were new (duplicates are ignored)."""
        if self.read_only:
            raise StoreError(f"{self.where} was opened read-only")
        from .semconv import RUN_ID, is_llm_span

        now = time.time_ns()
        rows = []
        links: dict[str, str] = {}
        runs: dict[str, str] = {}
        for r in records:
            sid = session_of(r.attributes)
            if sid:
                links.setdefault(r.trace_id, sid)
            run = r.attributes.get(RUN_ID)
            if run:
                runs.setdefault(sid or links.get(r.trace_id) or TRACE_SESSION_PREFIX + r.trace_id, str(run))
            rows.append((r.trace_id, r.span_id, r.parent_span_id, _text(sid), _text(r.name), r.start_ns, r.end_ns,
                         int(is_llm_span(r.attributes)), now, _json.dumps_exact(r.to_dict()),
                         _text(r.service)))
        if not rows:
            return 0
        steps = [(_INSERT_SPANS, rows, True), (_INSERT_LINKS, list(links.items()), True)]
        if runs:
            steps.append((_INSERT_RUNS, list(runs.items()), True))
        with self._lock:
            try:
                inserted = self._backend.write(steps)[0]
            except (self._backend.Error, OverflowError) as exc:  # OverflowError: an int beyond int64
                raise StoreError(f"writing {len(rows)} spans to {self.where!r} failed: {exc}") from exc
            self.duplicates += len(rows) - inserted  # under the lock: += is not atomic
        return inserted

    # -- reading ----------------------------------------------------------------------

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._backend.query(sql, args)
            except self._backend.Error as exc:
                raise StoreError(f"reading {self.where!r} failed: {exc}") from exc

    def _scoped(self, where: list[str], args: list[Any], service: str | None = None) -> str:
        """``FROM ...`` for a query with these conditions, this view's run added to them (and the
        episodes of ``service``, when given)."""
        if service is not None:
            where.append(_OF_SERVICE)
            args.append(service)
        if self.run_id is not None:
            where.append(_IN_RUN)
            args.append(self.run_id)
        return _JOIN + (" WHERE " + " AND ".join(where) if where else "")

    @staticmethod
    def _records(rows: Iterable[tuple[Any, ...]]) -> list[SpanRecord]:
        return [SpanRecord.from_dict(json.loads(row[0])) for row in rows]

    def spans(
        self,
        *,
        session_id: str | None = None,
        trace_id: str | None = None,
        since_ns: int | None = None,
        until_ns: int | None = None,
        limit: int | None = None,
        service: str | None = None,
    ) -> list[SpanRecord]:
        """Spans matching every filter given, ordered by start time.

        ``session_id`` selects the whole episode: spans tagged with it plus every span of
        the traces those spans belong to. ``trace:<id>`` selects one session-less trace.
        ``service``: every span of the episodes that have a span of this ``service.name``.
        """
        where: list[str] = []
        args: list[Any] = []
        if session_id is not None:
            if session_id.startswith(TRACE_SESSION_PREFIX):
                where.append("s.trace_id = ?")
                args.append(session_id[len(TRACE_SESSION_PREFIX):])
            else:
                # Untagged spans follow their trace; spans tagged with another session
                # in the same trace (many episodes under one caller span) stay out.
                where.append(
                    "(s.session_id = ? OR (s.session_id IS NULL AND s.trace_id IN"
                    " (SELECT trace_id FROM trace_sessions WHERE session_id = ?)))"
                )
                args += [session_id, session_id]
        if trace_id is not None:
            where.append("s.trace_id = ?")
            args.append(trace_id)
        if since_ns is not None:
            where.append("s.start_ns >= ?")
            args.append(since_ns)
        if until_ns is not None:
            where.append("s.start_ns < ?")
            args.append(until_ns)
        sql = f"SELECT s.record {self._scoped(where, args, service)} ORDER BY s.start_ns, s.span_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._records(self._query(sql, args))

    def sessions(
        self, *, since_ns: int | None = None, until_ns: int | None = None, limit: int | None = None,
        service: str | None = None,
    ) -> list[SessionSummary]:
        """One summary per episode (session, or session-less trace), newest first; ``service``:
        the episodes with a span of that ``service.name`` only."""
        args: list[Any] = []
        sql = (f"SELECT {_EPISODE} AS sid, COUNT(*), SUM(s.is_llm), MIN(s.start_ns), MAX(s.end_ns) "
               f"{self._scoped([], args, service)} GROUP BY sid")
        having = []
        if since_ns is not None:
            having.append("MIN(s.start_ns) >= ?")
            args.append(since_ns)
        if until_ns is not None:
            having.append("MIN(s.start_ns) < ?")
            args.append(until_ns)
        if having:
            sql += " HAVING " + " AND ".join(having)
        sql += " ORDER BY MIN(s.start_ns) DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [SessionSummary(*row) for row in self._query(sql, args)]

    def services(self) -> list[ServiceSummary]:
        """The services whose spans this store (this view's run, in a view) holds, by name: how
        many episodes have a span of each, and how many spans each wrote."""
        args: list[Any] = []
        rows = self._query(f"SELECT s.service, COUNT(DISTINCT {_EPISODE}), COUNT(*) {self._scoped([], args)}"
                           " GROUP BY s.service", args)
        return sorted((ServiceSummary(*row) for row in rows), key=lambda r: (r.service is None, r.service or ""))

    def runs(self) -> list[RunSummary]:
        """The runs this store holds episodes of, newest first (a shared store's many)."""
        rows = self._query(
            f"SELECT r.run_id, COUNT(DISTINCT {_EPISODE}), COUNT(*), MIN(s.start_ns), MAX(s.end_ns) {_JOIN}"
            f" JOIN session_runs r ON r.session_id = {_EPISODE} GROUP BY r.run_id ORDER BY MIN(s.start_ns) DESC")
        return [RunSummary(*row) for row in rows]

    def prune(self, *, before_ns: int | None = None, dry_run: bool = False) -> tuple[int, int]:
        """Delete whole episodes whose last span ended before ``before_ns`` (every episode when
        None; this view's run's only, in a view), in one transaction; returns (episodes, spans)
        deleted, or that would be."""
        if self.read_only and not dry_run:
            raise StoreError(f"{self.where} was opened read-only")
        args: list[Any] = []
        chosen = f"SELECT {_EPISODE} AS sid {self._scoped([], args)} GROUP BY sid"
        if before_ns is not None:
            chosen += " HAVING MAX(s.end_ns) < ?"
            args.append(before_ns)
        doomed = f"SELECT s.trace_id, s.span_id {_JOIN} WHERE {_EPISODE} IN ({chosen})"
        episodes = int(self._query(f"SELECT COUNT(*) FROM ({chosen}) AS c", args)[0][0])
        spans = int(self._query(f"SELECT COUNT(*) FROM ({doomed}) AS d", args)[0][0])
        if dry_run or not spans:
            return episodes, spans
        steps = [
            (f"DELETE FROM spans WHERE (trace_id, span_id) IN ({doomed})", args, False),
            ("DELETE FROM trace_sessions WHERE trace_id NOT IN (SELECT trace_id FROM spans)", (), False),
            (f"DELETE FROM session_runs WHERE session_id NOT IN (SELECT {_EPISODE} {_JOIN})", (), False),
        ]
        with self._lock:
            try:
                self._backend.write(steps)
            except self._backend.Error as exc:
                raise StoreError(f"pruning {self.where!r} failed, nothing was deleted: {exc}") from exc
        return episodes, spans

    def spans_by_session(self) -> dict[str, list[SpanRecord]]:
        """Every span, by episode as :meth:`sessions` names them, in start order: one pass over
        the table (a run holds thousands of episodes; a query each would be slower)."""
        out: dict[str, list[SpanRecord]] = {}
        args: list[Any] = []
        sql = f"SELECT {_EPISODE}, s.record {self._scoped([], args)} ORDER BY s.start_ns, s.span_id"
        for sid, record in self._query(sql, args):
            out.setdefault(sid, []).append(SpanRecord.from_dict(json.loads(record)))
        return out

    def count(self) -> int:
        """How many spans (of this view's run, in a view)."""
        args: list[Any] = []
        return int(self._query(f"SELECT COUNT(*) {self._scoped([], args)}", args)[0][0])

    def check(self) -> str:
        """The backend's own integrity check: 'ok' when the store is sound."""
        with self._lock:
            return self._backend.integrity()

    # -- export / import --------------------------------------------------------------

    def iter_records(self, **filters: Any) -> Iterator[SpanRecord]:
        yield from self.spans(**filters)

    def export_jsonl(self, out: str | os.PathLike[str] | IO[str], **filters: Any) -> int:
        """Write matching spans as JSON lines; return how many."""
        records = self.spans(**filters)
        if isinstance(out, (str, os.PathLike)):
            with open(out, "w", encoding="utf-8") as fh:
                fh.writelines(dumps_jsonl(records))
        else:
            out.writelines(dumps_jsonl(records))
        return len(records)

    def import_jsonl(self, src: str | os.PathLike[str] | IO[str], batch: int = 5000) -> int:
        """Add spans from JSON lines. The file is validated whole before anything is stored."""
        if isinstance(src, (str, os.PathLike)):
            with open(src, encoding="utf-8") as fh:
                return self._import_lines(fh, batch)
        return self._import_lines(src, batch)

    def _import_lines(self, lines: Iterable[str], batch: int = 5000) -> int:
        records = list(read_jsonl(lines))  # all of it checked before the first write
        return sum(self.add(records[i : i + batch]) for i in range(0, len(records), batch))

    def export_parquet(self, path: str | os.PathLike[str], **filters: Any) -> int:
        return write_parquet(self.spans(**filters), path)

    def import_parquet(self, path: str | os.PathLike[str]) -> int:
        """Add spans from a file written by :meth:`export_parquet`, validated whole first."""
        pa, pq = _pyarrow()
        try:
            column = pq.read_table(str(path), columns=["record"]).column("record").to_pylist()
        except (pa.ArrowException, KeyError) as exc:
            raise SpanDecodeError(
                f"{str(path)!r} is not a span export: {exc}. Import Parquet written by "
                "`tracerl traces export --format parquet`"
            ) from exc
        # A null cell reads as JSON null, which read_jsonl reports with its row number.
        return self._import_lines("null" if r is None else r for r in column)


class PostgresStore(SpanStore):
    """The span store in a PostgreSQL database (``postgresql://user:password@host:port/db``),
    which many gateways and trainers write at once; see :mod:`.store_postgres`."""

    def __init__(self, url: str, *, read_only: bool = False, connect_timeout_s: float = 10.0,
                 reconnect_s: float = 10.0):
        """``reconnect_s``: how long an operation waits for a server that went away."""
        self.path = url
        self._start(PostgresBackend(url, read_only=read_only, connect_timeout_s=connect_timeout_s,
                                    reconnect_s=reconnect_s))


def write_parquet(records: Sequence[SpanRecord], path: str | os.PathLike[str]) -> int:
    """Write spans as Parquet: a column per field the store indexes, and each whole record as
    JSON (what :meth:`SpanStore.import_parquet` reads back); returns how many."""
    pa, pq = _pyarrow()
    table = pa.table(
        {
            "trace_id": [r.trace_id for r in records],
            "span_id": [r.span_id for r in records],
            "parent_span_id": [r.parent_span_id for r in records],
            "session_id": [r.session_id for r in records],
            "service": [r.service for r in records],
            "name": [r.name for r in records],
            "start_ns": pa.array([r.start_ns for r in records], pa.int64()),
            "end_ns": pa.array([r.end_ns for r in records], pa.int64()),
            "record": [json.dumps(r.to_dict(), separators=(",", ":")) for r in records],
        }
    )
    pq.write_table(table, str(path))
    return len(records)


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet", "Parquet export/import") from exc
    return pa, pq


_UNCLAIMED: Any = object()


class StoreExporter(SpanExporter):
    """An OpenTelemetry ``SpanExporter`` writing to span stores.

    ``provider.add_span_processor(BatchSpanProcessor(StoreExporter(store)))`` writes every span
    to ``store``. A session that names a store of its own (a training run's folder) claims its
    spans with :meth:`claim`: those (by session id, or by trace) go to that store only. It
    never raises into the SDK: a failed write is logged and reported as FAILURE.
    """

    # Claims outlive their session a little (spans reported late, by a LiteLLM worker), so
    # they are forgotten oldest first rather than when the session ends.
    MAX_CLAIMS = 1 << 16

    def __init__(self, store: SpanStore | None = None):
        self.shared: list[SpanStore] = [store] if store is not None else []
        self._claims: collections.OrderedDict[str, SpanStore | None] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def store(self) -> SpanStore | None:
        """The first shared store."""
        return self.shared[0] if self.shared else None

    def claim(self, keys: Sequence[str], store: SpanStore | None) -> None:
        """Send the spans of these session ids / trace ids to ``store`` only (None: to no store,
        only the provider's other exporters, as a rollout worker's go over OTLP alone)."""
        with self._lock:
            for key in keys:
                self._claims[key] = store
                self._claims.move_to_end(key)
            while len(self._claims) > self.MAX_CLAIMS:
                self._claims.popitem(last=False)

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        by_store: dict[int, tuple[SpanStore, list[SpanRecord]]] = {}
        with self._lock:
            for span in spans:
                record = span_record(span)
                sid = record.session_id
                key = sid if sid and sid in self._claims else record.trace_id
                owner = self._claims.get(key, _UNCLAIMED)
                targets = self.shared if owner is _UNCLAIMED else [] if owner is None else [owner]
                for store in targets:
                    by_store.setdefault(id(store), (store, []))[1].append(record)
        result = SpanExportResult.SUCCESS
        for store, records in by_store.values():
            try:
                store.add(records)
            except Exception:  # the SDK's worker thread must survive a full disk
                log.exception("tracerl: could not write %d spans to %s", len(records), store.where)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
