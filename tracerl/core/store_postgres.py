"""The PostgreSQL backend of the span store: one database for many gateways and trainers.

``open_store("postgresql://user:password@host:5432/db")`` (or ``--db``, ``TRACERL_STORE``). The
SQL is the store's own (:mod:`.store`), the same statements SQLite runs; here they are sent
through psycopg 3, with ``?`` written as psycopg's ``%s``.

What a shared server adds over a file, and how each case is handled:

* **Many writers.** Each batch is one transaction; a span already stored is skipped by
  ``ON CONFLICT DO NOTHING``, which also settles two writers racing on one span. Rows go in
  sorted by key, so two batches lock them in the same order; a deadlock or serialization
  failure PostgreSQL still reports is retried.
* **A server that goes away.** A broken connection is reopened and the operation retried for
  up to ``reconnect_s``; a batch whose COMMIT was lost in flight is simply sent again (its
  spans are then skipped as duplicates, so nothing is stored twice). After that the store
  raises :class:`StoreError`, which the gateway answers with a 503 so that OTLP exporters and
  clients retry: nothing is acknowledged that was not committed.
* **Set-up errors** (no server, a refused password, no database) are one line naming the
  server, with the password masked.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .errors import StoreError, require
from .store_sqlite import ADDED_COLUMNS, ADDED_INDEXES, backfill_service, schema

T = TypeVar("T")

SCHEMES = ("postgresql", "postgres")

SCHEMA = schema("BIGINT")
# CREATE TABLE IF NOT EXISTS is not safe against itself in two sessions at once (both may
# pass the check and one then fails on the catalog); a transaction-scoped lock orders them.
_SCHEMA_LOCK = 0x7472_6163_6572_6C  # "tracerl"


def mask(url: str) -> str:
    """``url`` with its password replaced by ``***``: for messages and logs."""
    return re.sub(r"^(\w+://[^:/@]*:)[^@]*@", r"\1***@", url)


def without_password(url: str) -> str:
    """``url`` with no password in it: what a run folder records, since config.json is no place
    for one (libpq then takes it from ``PGPASSWORD`` or ``~/.pgpass``, or see :func:`recorded`)."""
    return re.sub(r"^(\w+://[^:/@]*):[^@]*@", r"\1@", url)


def _psycopg() -> Any:
    return require("psycopg", "psycopg", "postgres", "a PostgreSQL span store")


class PostgresBackend:
    """One connection (autocommit, explicit transactions); the store serialises calls with
    its lock, and this class guards reconnecting with its own."""

    def __init__(self, url: str, *, read_only: bool = False, connect_timeout_s: float = 10.0,
                 reconnect_s: float = 10.0):
        self.psycopg = _psycopg()
        self.Error = self.psycopg.Error
        self.url, self.where, self.read_only = url, mask(url), read_only
        self.connect_timeout_s, self.reconnect_s = connect_timeout_s, reconnect_s
        self._lock = threading.Lock()
        self._conn = self._connect()
        if read_only:
            if not self.query("SELECT to_regclass('spans') IS NOT NULL")[0][0]:
                self.close()
                raise StoreError(f"no span store at {self.where} (the database has no spans table)")
        else:
            try:
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    self._conn.execute(SCHEMA)
                    self._migrate()
            except self.Error as exc:
                self.close()
                raise StoreError(f"cannot create the span tables in {self.where}: {_first_line(exc)}") from exc

    def _migrate(self) -> None:
        """Add what a store made by an older tracerl lacks (inside the schema's transaction and
        lock, so two writers opening it at once migrate it once)."""
        have = {row[0] for row in self._conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = 'spans'").fetchall()}
        added = [name for name in ADDED_COLUMNS if name not in have]
        for name in added:
            self._conn.execute(f"ALTER TABLE spans ADD COLUMN IF NOT EXISTS {name} {ADDED_COLUMNS[name]}")
        if "service" in added:
            def update(sql: str, rows: list[tuple[Any, ...]]) -> None:
                with self._conn.cursor() as cur:
                    cur.executemany(sql.replace("?", "%s"), rows)

            backfill_service(lambda sql, args: self._conn.execute(sql.replace("?", "%s"), args).fetchall(), update)
        self._conn.execute(ADDED_INDEXES)

    def _connect(self) -> Any:
        options = "-c default_transaction_read_only=on" if self.read_only else None
        try:
            return self.psycopg.connect(self.url, autocommit=True, options=options,
                                        connect_timeout=max(1, round(self.connect_timeout_s)))
        except self.psycopg.Error as exc:
            raise StoreError(f"cannot open span store {self.where}: {_first_line(exc)}") from exc

    def close(self) -> None:
        self._conn.close()

    def _run(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)``, reopening a broken connection and retrying for ``reconnect_s``,
        and retrying what PostgreSQL aborts to break a deadlock."""
        deadline = time.monotonic() + self.reconnect_s
        pause = 0.05
        while True:
            try:
                if self._conn.closed:
                    with self._lock:
                        self._conn = self._connect()
                return fn(self._conn)
            except (self.psycopg.OperationalError, StoreError,
                    self.psycopg.errors.DeadlockDetected, self.psycopg.errors.SerializationFailure) as exc:
                lost = isinstance(exc, StoreError) or self._conn.broken or self._conn.closed
                retryable = lost or isinstance(exc, (self.psycopg.errors.DeadlockDetected,
                                                     self.psycopg.errors.SerializationFailure))
                if not retryable or time.monotonic() > deadline:
                    if isinstance(exc, StoreError):
                        raise
                    raise StoreError(f"span store {self.where}: {_first_line(exc)}") from exc
                if lost and not self._conn.closed:
                    self._conn.close()
                time.sleep(pause)
                pause = min(1.0, pause * 2)

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        statement = sql.replace("?", "%s")
        return self._run(lambda conn: conn.execute(statement, args).fetchall())

    def write(self, steps: Sequence[tuple[str, Any, bool]]) -> list[int]:
        """Run ``(sql, args, many)`` steps in one transaction; each step's row count."""

        def run(conn: Any) -> list[int]:
            counts = []
            with conn.transaction(), conn.cursor() as cur:
                for sql, args, many in steps:
                    statement = sql.replace("?", "%s")
                    if many:
                        cur.executemany(statement, sorted(args))  # one lock order for every writer
                    else:
                        cur.execute(statement, args)
                    counts.append(max(cur.rowcount, 0))
            return counts

        return self._run(run)

    def integrity(self) -> str:
        self.query("SELECT COUNT(*) FROM spans")
        return "ok"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
