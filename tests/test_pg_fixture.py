"""tests/pg.py starts a real PostgreSQL with password auth, and restarts keep committed rows."""

from __future__ import annotations

import pg
import pytest

psycopg = pytest.importorskip("psycopg")
# Bound to module names, pytest finds the fixtures here (and ruff sees no unused import).
postgres_server, postgres_url = pg.postgres_server, pg.postgres_url


def test_connect_write_read(postgres_url):
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT body FROM t ORDER BY id").fetchall() == [("one",), ("two",)]


def test_wrong_password_is_refused(postgres_url):
    bad = postgres_url.replace(":tracerl-test-pw@", ":wrong@")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(bad, connect_timeout=5)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_restart_keeps_committed_rows(postgres_server, mode):
    url = postgres_server.url
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1)")
        before = conn.execute("SELECT count(*) FROM kept").fetchone()[0]
    postgres_server.stop(mode)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)
    assert postgres_server.start() == url  # same folder, same port
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone()[0] == before
