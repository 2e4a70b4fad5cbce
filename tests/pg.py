"""A real, throwaway PostgreSQL server for tests (no docker, no system cluster, no network).

Why it is built this way:
- initdb refuses root, and CI runs tests as root: then every server binary runs as the
  `postgres` user (`runuser -u postgres --`) in a temporary folder chowned to it.
- xdist workers may start clusters at once: each gets its own folder (data, log, unix socket
  via `-k`) and a free port (bind 127.0.0.1:0, retried if taken); it listens on 127.0.0.1 only.
- Password auth (scram-sha-256, superuser `tracerl`): the URL path users take.
- Fast by default (`initdb --no-sync`, `fsync=off`); `durable=True` keeps fsync. `stop("immediate")`
  kills postgres, not the OS: committed rows survive it even with fsync off.

Import like the other helpers (tests/ is on sys.path): `import pg`, then bind the fixtures to
module names, `postgres_server, postgres_url = pg.postgres_server, pg.postgres_url`
(`from pg import postgres_url` works too, but ruff flags it F401/F811).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

USER, PASSWORD = "tracerl", "tracerl-test-pw"


def pg_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: $PG_BIN, else the newest /usr/lib/postgresql/*/bin."""
    env = os.environ.get("PG_BIN")
    found = [Path(env)] if env else sorted(
        map(Path, glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()])
    ok = [p for p in found if (p / "initdb").exists() and (p / "pg_ctl").exists()]
    return ok[-1] if ok else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One cluster in its own folder. `start()` runs initdb the first time, then pg_ctl start."""

    def __init__(self, dbname: str = "tracerl_test", durable: bool = False, bindir=None):
        self.bindir = Path(bindir or pg_binaries() or "")
        if not (self.bindir / "initdb").exists():
            raise RuntimeError("PostgreSQL binaries not found (set PG_BIN)")
        self.dbname, self.durable, self.port = dbname, durable, 0
        self.dir = Path(tempfile.mkdtemp(prefix="tracerl-pg-"))
        self.data, self.log = self.dir / "data", self.dir / "server.log"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{self.dbname}"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / tool), *args]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        res = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True)
        if check and res.returncode:
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{res.stdout}{res.stderr}")
        return res

    def start(self) -> str:
        """Start (initdb and CREATE DATABASE the first time); returns the URL.

        A restart keeps the port unless another process took it meanwhile (then a new one)."""
        first = not self.data.exists()
        if first:
            pwfile = self.dir / "pwfile"
            pwfile.write_text(PASSWORD + "\n")
            if self.as_root:
                shutil.chown(pwfile, "postgres")
            sync = [] if self.durable else ["--no-sync"]
            self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                      "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", *sync)
            pwfile.unlink()
        fast = "" if self.durable else " -c fsync=off -c full_page_writes=off"
        for attempt in range(5):
            self.port = self.port if (self.port and attempt == 0) else _free_port()
            opts = f"-h 127.0.0.1 -p {self.port} -k {self.dir}{fast}"
            res = self._run("pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data),
                            "-l", str(self.log), "-o", opts, check=False)
            if res.returncode == 0:
                break
        else:
            raise RuntimeError(f"pg_ctl start failed:\n{res.stderr}\n{self.log_text()}")
        if first:
            import psycopg

            with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{self.dbname}"')
        return self.url

    def stop(self, mode: str = "fast", check: bool = True) -> None:
        """Stop the server, keeping the folder: mode "fast", or "immediate" to simulate a crash."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-t", "30", "-m", mode, "-D", str(self.data),
                      check=check)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        """Stop (immediate if fast fails) and remove the folder."""
        try:
            self.stop("fast")
        except RuntimeError:
            self.stop("immediate", check=False)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_server():
    """A started PgServer for the test module; skips when PostgreSQL or psycopg is missing."""
    pytest.importorskip("psycopg", reason="psycopg is missing (pip install 'tracerl[postgres]')")
    if pg_binaries() is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql, or PG_BIN)")
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def postgres_url(postgres_server) -> str:
    """postgresql://tracerl:PASSWORD@127.0.0.1:PORT/tracerl_test of a fresh module server."""
    return postgres_server.url


def fresh_url(server: PgServer) -> str:
    """The server's test database without tracerl's tables: each test starts from an empty
    store (and the store's own CREATE TABLE runs every time)."""
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS spans, trace_sessions, session_runs")
    return server.url
