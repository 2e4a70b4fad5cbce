"""The code sandbox as a boundary (bubblewrap namespaces and a pids cgroup): each test is an
escape attempt that must fail, the run's result saying why. Attempts go through ctypes where
Python-level blocks would otherwise stop them first: the namespaces must hold on their own."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tracerl.tasks import isolation
from tracerl.tasks.sandbox import Limits, run_python

pytestmark = pytest.mark.skipif(not isolation.available(), reason="bubblewrap cannot run here (apt install bubblewrap)")

LIBC = "import ctypes, ctypes.util\nlibc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"


def run(code: str, **limits) -> object:
    result = run_python(code, Limits(timeout_s=limits.pop("timeout_s", 10), **limits))
    assert result.isolation == "bwrap"
    return result


def test_ordinary_code_passes_and_sees_only_its_work_folder():
    r = run("import os\nassert os.getcwd() == '/tmp/work' and os.getuid() == 65534\nprint(sorted(os.listdir('/tmp')))")
    assert r.ok, r.stderr
    # /tmp is empty but for the work folder and the mount points of an interpreter that lives
    # under /tmp (a CI clone's .venv)
    allowed = {"work"} | {p.split("/")[2] for p in isolation._prefixes() if p.startswith("/tmp/")}
    assert set(eval(r.stdout.strip())) <= allowed  # noqa: S307 - our own print of a list of names


def test_a_file_in_the_callers_home_cannot_be_read():
    secret = Path.home() / f".tracerl-escape-{uuid.uuid4().hex}"
    secret.write_text("secret")
    try:
        r = run(f"print(open({str(secret)!r}).read())")
    finally:
        secret.unlink()
    assert not r.ok and "secret" not in r.stdout
    assert "FileNotFoundError" in r.reason


@pytest.mark.parametrize("target", ["/etc/tracerl-escape", "{repo}/tracerl-escape", "/var/tmp/tracerl-escape",
                                    "/tmp/tracerl-escape", "/root/tracerl-escape", "{python}/tracerl-escape"])
def test_nothing_is_written_outside_the_work_folder(target):
    path = target.format(repo=Path(__file__).resolve().parent.parent, python=sys.prefix)
    r = run(LIBC + f"fd = libc.open({path!r}.encode(), 0o101, 0o644)\n"  # O_WRONLY | O_CREAT
            "assert fd >= 0, f'open failed: errno {ctypes.get_errno()}'")
    assert not r.ok and "open failed: errno 30" in r.reason  # EROFS: the system is read-only
    assert not Path(path).exists()


def test_the_gateways_port_cannot_be_reached():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []
    server.settimeout(5)
    waiter = threading.Thread(target=lambda: accepted.append(_accept(server)))
    waiter.start()
    code = LIBC + f"""
import struct
fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM: past the Python-level block
addr = struct.pack('!HH4s8x', 2, {port}, bytes([127, 0, 0, 1]))
addr = struct.pack('H', 2) + addr[2:]
rc = libc.connect(fd, addr, len(addr))
assert rc == 0, f'connect failed: errno {{ctypes.get_errno()}}'
"""
    r = run(code)
    waiter.join()
    server.close()
    assert not r.ok and "connect failed" in r.reason
    assert accepted == [None]  # nothing connected


def _accept(server: socket.socket) -> object:
    try:
        return server.accept()
    except TimeoutError:
        return None


@pytest.mark.skipif(isolation._pids_root() is None and os.geteuid() == 0,
                    reason="no writable pids cgroup here, and RLIMIT_NPROC does not bind root")
def test_a_fork_bomb_stops_at_the_process_limit():
    code = LIBC + """
n = 0
while n < 500:
    pid = libc.fork()
    if pid == 0:
        import time; time.sleep(30); libc._exit(0)
    if pid < 0:
        break
    n += 1
assert n >= 500, f'fork refused after {n} processes'
"""
    r = run(code, processes=16)
    assert not r.ok and "fork refused after" in r.reason
    assert int(r.reason.split("after ")[1].split()[0]) < 16


def test_memory_past_the_limit_is_refused():
    r = run("x = bytearray(600 * 2**20)", memory_mb=256)
    assert not r.ok and "memory limit exceeded" in r.reason


@pytest.mark.skipif("memory" not in isolation._roots(), reason="no writable memory cgroup here")
def test_memory_summed_over_processes_is_capped_by_the_memory_cgroup():
    # each child stays under the address-space limit (RLIMIT_AS is per process); four together do not
    code = LIBC + """
import time
for _ in range(4):
    if libc.fork() == 0:
        x = bytearray(150 * 2**20)
        for i in range(0, len(x), 4096):
            x[i] = 1
        time.sleep(5)
        libc._exit(0)
time.sleep(6)
"""
    r = run(code, memory_mb=256, timeout_s=15)
    assert not r.ok and r.reason == "memory limit exceeded (256 MB)"


def test_a_process_that_starts_its_own_session_does_not_outlive_the_run():
    marker = f"esc{uuid.uuid4().hex[:10]}"
    code = LIBC + f"""
if libc.fork() == 0:
    libc.setsid()
    if libc.fork() == 0:
        libc.prctl(15, {marker!r}.encode(), 0, 0, 0)  # PR_SET_NAME: findable from outside
        import time; time.sleep(60)
    libc._exit(0)
import time; time.sleep(1)
"""
    r = run(code, timeout_s=5)
    assert r.ok, r.reason
    time.sleep(0.5)
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(p) == marker]
    assert alive == []


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


def test_unshare_and_mount_through_ctypes_are_refused():
    code = LIBC + """
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS = 0x10000000, 0x40000000, 0x00020000
said = []
for flags in (CLONE_NEWUSER, CLONE_NEWUSER | CLONE_NEWNET, CLONE_NEWNS):
    said.append((libc.unshare(flags), ctypes.get_errno()))
said.append((libc.mount(b'none', b'/tmp/work', b'tmpfs', 0, None), ctypes.get_errno()))
print(said)
assert all(rc == 0 for rc, _ in said), f'refused: {said}'
"""
    r = run(code)
    assert not r.ok and "refused:" in r.reason
    said = eval(r.stdout.strip())  # noqa: S307 - our own print of a list of int pairs
    assert all(rc == -1 for rc, _ in said), said


def test_no_cgroup_is_left_behind(monkeypatch):
    made: list[Path] = []
    real = isolation.limits_cgroup

    @contextlib.contextmanager
    def recording(*args, **kwargs):
        with real(*args, **kwargs) as groups:
            made.extend(groups)
            yield groups

    monkeypatch.setattr(isolation, "limits_cgroup", recording)
    assert run("print(1)").ok
    if isolation._roots():
        assert made, "the run made no cgroup where one can be made"
    assert made == [] or not any(g.exists() for g in made)
