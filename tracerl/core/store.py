"""The span store: SQLite in WAL mode, the embedded default sink for every span.

``BatchSpanProcessor(StoreExporter(store))`` is the whole hook-up for in-process spans; the
gateway writes its token-level spans and OTLP-received spans to the same store. Several
processes may write one file at once: WAL lets readers run beside one writer, writers wait
on SQLite's lock (``busy_timeout``) and each batch is one transaction, so a batch is stored
whole or not at all. A span already stored is never overwritten (a duplicate delivery is
ignored and counted).

Episodes are keyed by session id; a span without one belongs to the session of any other
span in its trace (so third-party spans and orphans follow their trace), and a trace with no
session at all is its own episode, keyed ``trace:<trace_id>``.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _json
from .errors import MissingDependencyError, SpanDecodeError, StoreError
from .spans import SpanRecord, dumps_jsonl, read_jsonl, session_of, span_record

log = logging.getLogger(__name__)

TRACE_SESSION_PREFIX = "trace:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    session_id TEXT,
    name TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    is_llm INTEGER NOT NULL DEFAULT 0,
    inserted_ns INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_session ON spans(session_id);
CREATE INDEX IF NOT EXISTS spans_start ON spans(start_ns);
CREATE TABLE IF NOT EXISTS trace_sessions (
    trace_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trace_sessions_session ON trace_sessions(session_id);
"""


def tracerl_home() -> Path:
    """``$TRACERL_HOME``, defaulting to ``~/.tracerl``: the store, the config, set-up models."""
    return Path(os.environ.get("TRACERL_HOME") or os.path.join(os.path.expanduser("~"), ".tracerl"))


def default_store_path() -> Path:
    """``$TRACERL_HOME/traces.db``."""
    return tracerl_home() / RUN_STORE


RUN_STORE = "traces.db"  # a run folder's span store
# a URL's scheme (two letters at least: ``C:/`` is a drive); a Path keeps one slash of ``://``
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def open_store(target: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> SpanStore:
    """The span store ``target`` names: a SQLite file's path (None: :func:`default_store_path`).
    Every part of tracerl opens its store here, so that another backend is one branch."""
    return SpanStore(target, read_only=read_only)


def run_store(folder: str | os.PathLike[str], *, read_only: bool = False) -> SpanStore:
    """A run folder's span store, ``FOLDER/traces.db``."""
    return open_store(Path(folder) / RUN_STORE, read_only=read_only)


def check_store_target(target: str) -> None:
    """Refuse a URL: the store is a SQLite file, and ``postgresql://host/db`` taken as a path
    would quietly make a folder named ``postgresql:`` with a new, empty store in it."""
    found = _URL.match(target)
    if found is not None:
        raise StoreError(f"span store {target!r}: a {found[1]!r} URL is not a store tracerl can open; "
                         "the span store is a SQLite file: pass its path")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    spans: int
    llm_calls: int
    start_ns: int
    end_ns: int


# The episode a span belongs to: its session, else its trace's session, else its trace alone
# (``s`` the spans table, ``ts`` trace_sessions LEFT JOINed on the trace id).
_EPISODE = "COALESCE(s.session_id, ts.session_id, 'trace:' || s.trace_id)"
_JOIN = "FROM spans s LEFT JOIN trace_sessions ts ON ts.trace_id = s.trace_id"


def _open_read_only(path: str, busy_timeout_s: float) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise StoreError(f"no span store at {path}")
    from urllib.parse import quote

    uri = f"file:{quote(str(Path(path).resolve()))}"
    try:
        # mode=ro reads a live WAL database (its -shm exists while a writer has it open);
        # immutable=1 reads a closed one without creating a -shm beside it
        mode = "mode=ro" if Path(path + "-shm").exists() else "immutable=1"
        db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=busy_timeout_s, check_same_thread=False)
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read span store {path}: {exc} (is it a tracerl traces.db?)") from exc
    return db


class SpanStore:
    """A SQLite file of spans. Thread-safe; safe to share between processes by path.

    ``SpanStore()`` opens :func:`default_store_path`; ``SpanStore(":memory:")`` is private
    to the process (tests, benchmarks).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout_s: float = 60.0,
                 read_only: bool = False):
        """``read_only``: open an existing file without writing to it or beside it (the
        dashboard's way: a run folder is never modified by looking at it)."""
        self.path = str(path) if path is not None else str(default_store_path())
        check_store_target(self.path)
        self._lock = threading.RLock()
        self.read_only = read_only
        self.duplicates = 0
        if read_only:
            self._db = _open_read_only(self.path, busy_timeout_s)
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.duplicates = 0
        db: sqlite3.Connection | None = None
        try:
            db = self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
            )
            db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._retry(lambda: db.executescript(_SCHEMA))
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            raise StoreError(
                f"cannot open span store {self.path!r}: {exc}. Check the path is a writable file "
                "(set TRACERL_HOME or pass --db to use another)"
            ) from exc

    # -- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SpanStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SpanStore({self.path!r})"

    def _retry(self, fn: Any, attempts: int = 20) -> Any:
        # busy_timeout covers most contention; a WAL checkpoint race can still surface
        # SQLITE_BUSY immediately, so retry a few times with backoff.
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(min(0.5, 0.01 * 2**i))
        return None

    # -- writing ----------------------------------------------------------------------

    def add(self, records: Iterable[SpanRecord]) -> int:
        """Store spans in one transaction; return how many were new (duplicates are ignored)."""
        if self.read_only:
            raise StoreError(f"{self.path} was opened read-only")
        from .semconv import is_llm_span

        now = time.time_ns()
        rows = []
        links: dict[str, str] = {}
        for r in records:
            sid = session_of(r.attributes)
            if sid:
                links.setdefault(r.trace_id, sid)
            rows.append((r.trace_id, r.span_id, r.parent_span_id, sid, r.name, r.start_ns, r.end_ns,
                         int(is_llm_span(r.attributes)), now, _json.dumps_exact(r.to_dict())))
        if not rows:
            return 0

        def write() -> int:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                before = self._db.total_changes
                cur.executemany(
                    "INSERT OR IGNORE INTO spans (trace_id, span_id, parent_span_id, session_id,"
                    " name, start_ns, end_ns, is_llm, inserted_ns, record)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
                inserted = self._db.total_changes - before
                cur.executemany(
                    "INSERT OR IGNORE INTO trace_sessions (trace_id, session_id) VALUES (?, ?)",
                    links.items(),
                )
                cur.execute("COMMIT")
                return inserted
            except BaseException:
                if self._db.in_transaction:
                    cur.execute("ROLLBACK")
                raise

        with self._lock:
            try:
                inserted = self._retry(write)
            except (sqlite3.Error, OverflowError) as exc:  # OverflowError: an int beyond int64
                raise StoreError(f"writing {len(rows)} spans to {self.path!r} failed: {exc}") from exc
            self.duplicates += len(rows) - inserted  # under the lock: += is not atomic
        return inserted

    # -- reading ----------------------------------------------------------------------

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._retry(lambda: self._db.execute(sql, args).fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"reading {self.path!r} failed: {exc}") from exc

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
    ) -> list[SpanRecord]:
        """Spans matching every filter given, ordered by start time.

        ``session_id`` selects the whole episode: spans tagged with it plus every span of
        the traces those spans belong to. ``trace:<id>`` selects one session-less trace.
        """
        where: list[str] = []
        args: list[Any] = []
        if session_id is not None:
            if session_id.startswith(TRACE_SESSION_PREFIX):
                where.append("trace_id = ?")
                args.append(session_id[len(TRACE_SESSION_PREFIX):])
            else:
                # Untagged spans follow their trace; spans tagged with another session
                # in the same trace (many episodes under one caller span) stay out.
                where.append(
                    "(session_id = ? OR (session_id IS NULL AND trace_id IN"
                    " (SELECT trace_id FROM trace_sessions WHERE session_id = ?)))"
                )
                args += [session_id, session_id]
        if trace_id is not None:
            where.append("trace_id = ?")
            args.append(trace_id)
        if since_ns is not None:
            where.append("start_ns >= ?")
            args.append(since_ns)
        if until_ns is not None:
            where.append("start_ns < ?")
            args.append(until_ns)
        sql = "SELECT record FROM spans"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY start_ns, span_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._records(self._query(sql, args))

    def sessions(
        self, *, since_ns: int | None = None, until_ns: int | None = None, limit: int | None = None
    ) -> list[SessionSummary]:
        """One summary per episode (session, or session-less trace), newest first."""
        sql = f"SELECT {_EPISODE} AS sid, COUNT(*), SUM(s.is_llm), MIN(s.start_ns), MAX(s.end_ns) {_JOIN} GROUP BY sid"
        having, args = [], []
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

    def prune(self, *, before_ns: int | None = None, dry_run: bool = False) -> tuple[int, int]:
        """Delete whole episodes whose last span ended before ``before_ns`` (every episode when
        None), in one transaction; returns (episodes, spans) deleted, or that would be."""
        if self.read_only and not dry_run:
            raise StoreError(f"{self.path} was opened read-only")
        chosen = f"SELECT {_EPISODE} AS sid {_JOIN} GROUP BY sid" + (
            " HAVING MAX(s.end_ns) < ?" if before_ns is not None else "")
        args = [before_ns] if before_ns is not None else []
        doomed = f"SELECT s.rowid {_JOIN} WHERE {_EPISODE} IN ({chosen})"
        episodes = int(self._query(f"SELECT COUNT(*) FROM ({chosen})", args)[0][0])
        spans = int(self._query(f"SELECT COUNT(*) FROM ({doomed})", args)[0][0])
        if dry_run or not spans:
            return episodes, spans

        def delete() -> None:
            with self._db:  # one transaction: all of it or nothing
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(f"DELETE FROM spans WHERE rowid IN ({doomed})", args)
                self._db.execute("DELETE FROM trace_sessions WHERE trace_id NOT IN (SELECT trace_id FROM spans)")

        with self._lock:
            try:
                self._retry(delete)
            except sqlite3.Error as exc:
                raise StoreError(f"pruning {self.path!r} failed, nothing was deleted: {exc}") from exc
        return episodes, spans

    def spans_by_session(self) -> dict[str, list[SpanRecord]]:
        """Every span, by episode as :meth:`sessions` names them, in start order: one pass over
        the table (a run holds thousands of episodes; a query each would be slower)."""
        out: dict[str, list[SpanRecord]] = {}
        for sid, record in self._query(f"SELECT {_EPISODE}, s.record {_JOIN} ORDER BY s.start_ns, s.span_id"):
            out.setdefault(sid, []).append(SpanRecord.from_dict(json.loads(record)))
        return out

    def count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM spans")[0][0])

    def check(self) -> str:
        """SQLite's own integrity check: 'ok' when the file is sound."""
        return str(self._query("PRAGMA integrity_check")[0][0])

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
        pa, pq = _pyarrow()
        records = self.spans(**filters)
        table = pa.table(
            {
                "trace_id": [r.trace_id for r in records],
                "span_id": [r.span_id for r in records],
                "parent_span_id": [r.parent_span_id for r in records],
                "session_id": [r.session_id for r in records],
                "name": [r.name for r in records],
                "start_ns": pa.array([r.start_ns for r in records], pa.int64()),
                "end_ns": pa.array([r.end_ns for r in records], pa.int64()),
                "record": [json.dumps(r.to_dict(), separators=(",", ":")) for r in records],
            }
        )
        pq.write_table(table, str(path))
        return len(records)

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


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError("pyarrow", "parquet", "Parquet export/import") from exc
    return pa, pq


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
        self._claims: collections.OrderedDict[str, SpanStore] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def store(self) -> SpanStore | None:
        """The first shared store."""
        return self.shared[0] if self.shared else None

    def claim(self, keys: Sequence[str], store: SpanStore) -> None:
        """Send the spans of these session ids / trace ids to ``store`` only."""
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
                owner = (self._claims.get(sid) if sid else None) or self._claims.get(record.trace_id)
                for store in [owner] if owner is not None else self.shared:
                    by_store.setdefault(id(store), (store, []))[1].append(record)
        result = SpanExportResult.SUCCESS
        for store, records in by_store.values():
            try:
                store.add(records)
            except Exception:  # the SDK's worker thread must survive a full disk
                log.exception("tracerl: could not write %d spans to %s", len(records), store.path)
                result = SpanExportResult.FAILURE
        return result

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
