"""The SQLite backend of the span store: one file in WAL mode, the embedded default.

Several processes may write one file at once: WAL lets readers run beside one writer, writers
wait on SQLite's lock (``busy_timeout``) and each batch is one transaction. The SQL itself is
the store's (:mod:`.store`), written so that SQLite and PostgreSQL both run it; this module
only connects, runs it, and retries what SQLite reports as busy.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from .errors import StoreError
from .spans import service_of

T = TypeVar("T")

def schema(int64: str) -> str:
    """The tables and indexes, with ``int64`` the backend's 64-bit integer type (SQLite's
    INTEGER is 64-bit; PostgreSQL's is 32-bit, its BIGINT 64)."""
    return f"""
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    session_id TEXT,
    name TEXT NOT NULL,
    start_ns {int64} NOT NULL,
    end_ns {int64} NOT NULL,
    is_llm INTEGER NOT NULL DEFAULT 0,
    inserted_ns {int64} NOT NULL,
    record TEXT NOT NULL,
    service TEXT,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_session ON spans(session_id);
CREATE INDEX IF NOT EXISTS spans_start ON spans(start_ns);
CREATE TABLE IF NOT EXISTS trace_sessions (
    trace_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trace_sessions_session ON trace_sessions(session_id);
CREATE TABLE IF NOT EXISTS session_runs (
    session_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_runs_run ON session_runs(run_id);
CREATE TABLE IF NOT EXISTS store_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


SCHEMA = schema("INTEGER")

# Columns ``spans`` gained after its first release (name -> type): a store made before gets each
# when next opened for writing (SQLite: ALTER TABLE ... ADD COLUMN where missing; PostgreSQL: ADD
# COLUMN IF NOT EXISTS), and its spans already stored get their value from their record.
ADDED_COLUMNS: dict[str, str] = {"service": "TEXT"}
# indexes on added columns: made once the columns exist
ADDED_INDEXES = "CREATE INDEX IF NOT EXISTS spans_service ON spans(service)"
_PAGE = 2000


def backfill_service(query: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]],
                     update: Callable[[str, list[tuple[Any, ...]]], None]) -> int:
    """Fill the ``service`` column of spans stored before it existed, from each record's
    resource, a page at a time (in the caller's transaction); returns how many were filled.
    ``query`` and ``update`` run SQL in ``?`` placeholders, ``update`` once per row given."""
    filled, after = 0, ("", "")
    while True:
        rows = query("SELECT trace_id, span_id, record FROM spans WHERE (trace_id, span_id) > (?, ?)"
                     " ORDER BY trace_id, span_id LIMIT ?", (*after, _PAGE))
        if not rows:
            return filled
        named = []
        for trace_id, span_id, record in rows:
            service = service_of(json.loads(record).get("resource") or {})
            if service is not None:
                named.append((service.replace("\x00", "\ufffd"), trace_id, span_id))
        if named:
            update("UPDATE spans SET service = ? WHERE trace_id = ? AND span_id = ?", named)
            filled += len(named)
        after = (rows[-1][0], rows[-1][1])


def _open_read_only(path: str, busy_timeout_s: float) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise StoreError(f"no span store at {path}")
    uri = f"file:{quote(str(Path(path).resolve()))}"
    try:
        # mode=ro reads a live WAL database (its -shm exists while a writer has it open);
        # immutable=1 reads a closed one without creating a -shm beside it
        mode = "mode=ro" if Path(path + "-shm").exists() else "immutable=1"
        db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=busy_timeout_s, check_same_thread=False)
        has_spans = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'spans'").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read span store {path}: {exc} (is it a tracerl traces.db?)") from exc
    if has_spans is None:
        # a file another process has just created and not yet given its tables, or not ours
        db.close()
        raise StoreError(f"{path} has no spans table: it is not a tracerl traces.db, "
                         "or the process creating it has not written its tables yet")
    return db


class SqliteBackend:
    """One connection to one file (or ``:memory:``); the store serialises calls with its lock."""

    Error = sqlite3.Error

    def __init__(self, path: str, *, busy_timeout_s: float = 60.0, read_only: bool = False):
        self.where, self.read_only = path, read_only
        if read_only:
            self._db = _open_read_only(path, busy_timeout_s)
            return
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db: sqlite3.Connection | None = None
        try:
            db = self._db = sqlite3.connect(path, timeout=busy_timeout_s, check_same_thread=False,
                                            isolation_level=None)
            db.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            if path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._retry(lambda: db.executescript(SCHEMA))
            self._retry(lambda: self._migrate(db))
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            raise StoreError(
                f"cannot open span store {path!r}: {exc}. Check the path is a writable file "
                "(set TRACERL_HOME or pass --db to use another)"
            ) from exc

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """Add what a store made by an older tracerl lacks, in one transaction (two processes
        opening it at once: the second finds the columns there)."""

        def missing() -> list[str]:
            have = {row[1] for row in db.execute("PRAGMA table_info(spans)")}
            return [name for name in ADDED_COLUMNS if name not in have]

        if missing():  # an older store: the write lock, then look again
            db.execute("BEGIN IMMEDIATE")
            try:
                added = missing()
                for name in added:
                    db.execute(f"ALTER TABLE spans ADD COLUMN {name} {ADDED_COLUMNS[name]}")
                if "service" in added:
                    def update(sql: str, rows: list[tuple[Any, ...]]) -> None:
                        db.executemany(sql, rows)

                    backfill_service(lambda sql, args: db.execute(sql, args).fetchall(), update)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        db.execute(ADDED_INDEXES)

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def _retry(fn: Callable[[], T], attempts: int = 20) -> T:
        # busy_timeout covers most contention; a WAL checkpoint race can still surface
        # SQLITE_BUSY immediately, so retry a few times with backoff.
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(min(0.5, 0.01 * 2**i))
        raise AssertionError("unreachable")

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._retry(lambda: self._db.execute(sql, args).fetchall())

    def write(self, steps: Sequence[tuple[str, Any, bool]]) -> list[int]:
        """Run ``(sql, args, many)`` steps in one transaction; each step's row count."""

        def run() -> list[int]:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock
                counts = []
                for sql, args, many in steps:
                    (cur.executemany if many else cur.execute)(sql, args)
                    counts.append(cur.rowcount)
                cur.execute("COMMIT")
                return counts
            except BaseException:
                if self._db.in_transaction:
                    cur.execute("ROLLBACK")
                raise

        return self._retry(run)

    def integrity(self) -> str:
        return str(self.query("PRAGMA integrity_check")[0][0])
