"""The code sandbox as a boundary (bubblewrap namespaces and a pids cgroup): each test is an
escape attempt that must fail, the run's result saying why. Attempts go through ctypes where
Python-level blocks would otherwise stop them first: the namespaces must hold on their own."""

from __future__ import annotations

import contextlib
import os
import site
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tracerl.tasks import isolation, seccomp
from tracerl.tasks.sandbox import Limits, run_python, run_shell

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
    # EROFS where the folder is in the sandbox (read-only), ENOENT where it is not there at all
    assert not r.ok and ("open failed: errno 30" in r.reason or "open failed: errno 2" in r.reason)
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


# The allow-list file system, the unprivileged host uid, the disk limit and the seccomp filter.

REPO = Path(__file__).resolve().parent.parent
ROOT = os.geteuid() == 0  # the sandbox then runs as host uid 65534, so owner permissions apply
needs_root = pytest.mark.skipif(not ROOT, reason="the caller is not root: the sandbox runs as the caller's own uid")
needs_filter = pytest.mark.skipif(seccomp.bpf() is None, reason="no seccomp filter here (pyseccomp, libseccomp2)")


def test_shadow_the_repository_a_dot_env_opt_and_var_are_not_there():
    secret = REPO / f".env.tracerl-escape-{uuid.uuid4().hex[:8]}"
    secret.write_text("OPENAI_API_KEY=sk-secret\n")
    targets = ["/etc/shadow", "/etc/gshadow", str(secret), str(REPO / ".git" / "config"), str(REPO / "pyproject.toml"),
               "/opt", "/var/lib", "/srv", "/etc/ssl/private"]
    try:
        r = run(f"import os\nprint([p for p in {targets!r} if os.path.lexists(p)])")
    finally:
        secret.unlink()
    assert r.ok, r.stderr
    assert r.stdout.strip() == "[]"


@needs_root
def test_a_root_only_file_in_a_bound_folder_cannot_be_read(tmp_path):
    secret = Path(sys.prefix) / f"tracerl-escape-{uuid.uuid4().hex[:8]}"
    secret.write_text("secret")
    secret.chmod(0o600)
    try:
        r = run(f"print(open({str(secret)!r}).read())")
        shell = run_shell(f"cat {secret}", tmp_path, Limits(timeout_s=10))
    finally:
        secret.unlink()
    assert not r.ok and "PermissionError" in r.reason and "secret" not in r.stdout
    assert not shell.ok and "Permission denied" in shell.stdout


def _closed(path: str) -> bool:
    """Whether a folder above ``path`` is one that others cannot enter (pyenv under /root 0700)."""
    parts = Path(path).parts
    return any(not os.stat(Path(*parts[:i])).st_mode & 0o001 for i in range(2, len(parts)))


def test_the_interpreter_under_a_closed_folder_runs(tmp_path, monkeypatch):
    # this machine's own layout, where it is one (pyenv under /root, mode 0700)
    if ROOT and _closed(sys.base_prefix):
        assert run("import sys\nprint(sys.base_prefix)").stdout.strip() == sys.base_prefix
    # and that layout made here: a venv inside a 0700 folder of the caller's
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    venv = closed / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--symlinks", str(venv)], check=True, timeout=120)
    (venv / "tracerl_probe.txt").write_text("inside the venv")
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(site, "getsitepackages", lambda: [])
    r = run(f"import sys\nprint(sys.prefix)\nprint(open({str(venv / 'tracerl_probe.txt')!r}).read())")
    assert r.ok, r.stderr
    assert r.stdout.split("\n")[:2] == [str(venv), "inside the venv"]


SOCKET_PROBE = """
import ctypes, ctypes.util, socket, struct, sys
libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
said = []
for path in sys.argv[1:]:
    fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM, through ctypes
    if fd < 0:
        said.append(('socket', ctypes.get_errno()))
        continue
    addr = struct.pack('H', 1) + path.encode() + b'\\0'
    rc = libc.connect(fd, addr, len(addr))
    said.append(('connect', rc, ctypes.get_errno()))
print(said)
"""


def test_a_unix_socket_in_every_bound_folder_cannot_be_reached(tmp_path):
    listening, paths = [], []
    folders = [*isolation.bound_folders(), "/var/tmp", "/tmp"]
    try:
        for folder in folders:
            path = Path(folder) / f"tracerl-{uuid.uuid4().hex[:8]}.sock"
            server = socket.socket(socket.AF_UNIX)
            try:
                server.bind(str(path))
            except OSError:  # a folder the caller cannot write to
                server.close()
                continue
            path.chmod(0o777)  # anyone may connect: the boundary must hold without owner permissions
            server.listen(1)
            server.setblocking(False)
            listening.append(server)
            paths.append(str(path))
        assert any(p.startswith(tuple(isolation.bound_folders())) for p in paths), "no bound folder to test"
        (tmp_path / "probe.py").write_text(SOCKET_PROBE)  # tmp_path: a work folder under a 0700 one
        r = run_shell(f"{sys.executable} -I probe.py {' '.join(paths)}", tmp_path, Limits(timeout_s=10))
        accepted = []
        for server in listening:
            with contextlib.suppress(BlockingIOError):
                accepted.append(server.accept())
    finally:
        for server in listening:
            server.close()
        for p in paths:
            Path(p).unlink(missing_ok=True)
    assert r.ok, r.stdout
    said = eval(r.stdout.strip().splitlines()[-1])  # noqa: S307 - our own print of a list of tuples
    assert len(said) == len(paths) and all(s[0] == "socket" or s[1] == -1 for s in said), said
    assert accepted == []


def test_filling_the_disk_stops_at_the_disk_limit():
    code = """
chunk = b'x' * (512 * 1024)  # under RLIMIT_FSIZE (the output cap): many files, not one
for i in range(2000):
    with open(f'f{i}', 'wb') as f:
        f.write(chunk)
print('wrote 1000 MB')
"""
    r = run(code, timeout_s=30)
    assert not r.ok and r.reason == isolation.DISK_REASON, (r.reason, r.stderr[-300:])
    assert "wrote" not in r.stdout


@needs_root
def test_many_files_stop_at_the_file_limit():
    r = run(f"for i in range({isolation.FILES + 5000}):\n    open(f'f{{i}}', 'w').close()\nprint('all made')",
            timeout_s=30)
    assert not r.ok and r.reason == isolation.DISK_REASON, (r.reason, r.stderr[-300:])


@needs_filter
def test_ptrace_process_vm_readv_bpf_keyctl_and_mount_are_refused_at_once():
    # each call's errno right after it: run them one at a time
    lines = []
    for name, call in (("ptrace", "libc.ptrace(16, 1, 0, 0)"), ("process_vm_readv", "libc.syscall(310, 1, iov, 1, iov, 1, 0)"),
                       ("bpf", "libc.syscall(321, 0, None, 0)"), ("keyctl", "libc.syscall(250, 0, -3, 0)"),
                       ("mount", "libc.mount(b'none', b'/tmp/work', b'tmpfs', 0, None)"),
                       ("perf_event_open", "libc.syscall(298, None, 0, -1, -1, 0)"), ("userfaultfd", "libc.syscall(323, 0)")):
        lines.append(f"rc = {call}\nsaid[{name!r}] = (rc, ctypes.get_errno())")
    code = LIBC + "libc.syscall.restype = ctypes.c_long\nbuf = ctypes.create_string_buffer(64)\n" \
        "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)\nsaid = {}\n" + "\n".join(lines) + "\nprint(said)"
    r = run(code, timeout_s=20)
    assert r.ok, r.stderr
    assert r.seconds < 10
    said = eval(r.stdout.strip())  # noqa: S307 - our own print of a dict of int pairs
    assert said == {name: (-1, 1) for name in said} and len(said) == 7, said  # -1, EPERM
