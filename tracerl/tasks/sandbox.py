"""Run untrusted code (a model's program plus its tests, a terminal task's commands) with limits.

    result = run_python(program, Limits(timeout_s=5))
    result.ok, result.reason          # True, "passed" | False, "timeout after 5.0 s"
    run_shell("grep -c ERROR log.txt > count.txt", work_folder)   # bash, in a folder that persists

What it does, per run:

* a **fresh temporary folder** is the working directory, ``HOME`` and ``TMPDIR``; it is deleted
  afterwards. The environment is scrubbed to ``PATH``/``HOME``/``TMPDIR``/``LANG``, and Python
  runs isolated (``-I``: no ``PYTHON*`` variables, no user site, no cwd on ``sys.path``).
* **never in the caller's process**: a new session (process group) that is killed (SIGKILL)
  at the wall-clock timeout and again after every run, so its stray children go too.
* **rlimits** set in the child before the code runs: address space (``RLIMIT_AS``, memory),
  CPU seconds (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``, which also caps stdout/stderr:
  they go to files, so a flood cannot fill the caller's memory), no core files.
* **no network**: where ``unshare -rn`` works (Linux user namespaces, no root needed) the child
  runs in a new, empty network namespace: no interface but a down loopback, so nothing, not
  even a subprocess or raw syscall, reaches any host, the caller's gateway included. In
  every case the child's Python also refuses to create sockets or processes (``socket``,
  ``os.fork``/``system``/``exec*``/``spawn*``, ``subprocess``), so an attempt fails with a clear
  reason even without the namespace.
* **"passed" needs the program to run to its end**: the child writes a per-run nonce to a
  file only after the last line ran, so ``exit(0)`` or ``os._exit(0)`` before the tests do
  not pass.

**Where bubblewrap runs** (Debian's ``bubblewrap``; :mod:`.isolation`), all of this happens
inside a boundary: new user, PID, mount, network, IPC and UTS namespaces, a read-only system
with the caller's home hidden, the run's folder the one place it can write, pids and memory
cgroups (or RLIMIT_NPROC) capping its processes and their memory together, and every process of the run killed with it, ``setsid``
or not. The Python-level blocks stay, for their clear reasons; the namespaces hold without
them (tests/test_sandbox_boundary.py makes the escape attempts through ``ctypes``).
``SandboxResult.isolation`` says ``"bwrap"``.

**Where it does not**, the runner above is not a security boundary against code written to
escape it, and says so once per process: without the network namespace the Python-level
blocks can be bypassed (``ctypes``, a pre-imported module, introspecting the runner's frame
for the nonce); the child can read whatever the caller's user can and write wherever that
user may (only file *sizes* are capped); ``RLIMIT_NPROC`` is ignored for root; a child that
calls ``setsid`` escapes the group kill. Install bubblewrap, or use a container or VM.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import isolation

_NETWORK_BLOCKED = "network access is disabled in the tracerl sandbox"
_PROCESS_BLOCKED = "starting processes is disabled in the tracerl sandbox"
_TAIL = 4000  # characters of stdout/stderr kept in the result

# Runs in the child before the program: limits first, then the Python-level blocks. Kept in
# a function so the nonce is a local, not a global the program can read from __main__.
_BOOT = r'''
import os, resource, socket, subprocess, sys

def _main():
    memory, cpu, fsize, nproc = (int(v) for v in sys.argv[1:5])
    nonce = sys.stdin.readline().strip()
    sys.stdin = open(os.devnull)
    for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_NPROC, nproc or resource.RLIM_INFINITY)):
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        try:
            resource.setrlimit(which, (value, hard))
        except (ValueError, OSError):
            pass

    def no_network(*args, **kwargs):
        raise PermissionError(NETWORK_BLOCKED)

    def no_process(*args, **kwargs):
        raise PermissionError(PROCESS_BLOCKED)

    socket.socket.__init__ = no_network
    for name in ("create_connection", "socketpair", "fromfd", "getaddrinfo", "gethostbyname",
                 "create_server"):
        setattr(socket, name, no_network)
    for name in ("fork", "forkpty", "system", "popen", "execv", "execve", "execvp", "execvpe",
                 "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnl", "spawnle",
                 "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, no_process)
    subprocess.Popen.__init__ = no_process
    with open("main.py", encoding="utf-8") as f:
        code = compile(f.read(), "main.py", "exec")
    exec(code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
    sys.stdout.flush()
    with open(".done", "w") as f:
        f.write(nonce)

_main()
'''


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 1_000_000  # also the largest file the program may write
    netns: bool | None = None  # None: use a network namespace where unshare allows it
    processes: int = 32  # processes the run may have at once (a pids cgroup, else RLIMIT_NPROC)
    boundary: bool | None = None  # None: run under bubblewrap where it works (see .isolation)


@dataclass(frozen=True)
class SandboxResult:
    """How a run ended. ``reason`` is "passed" or one line saying why not."""

    ok: bool
    reason: str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolation: str  # "bwrap" (namespaces, see .isolation), "netns" (network namespace) or "python" (blocks only)


@functools.cache
def netns_available() -> bool:
    """Whether ``unshare -rn`` can start a process here (probed once)."""
    return isolation.runs("unshare", "-rn")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _read(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - _TAIL * 4))
        data = f.read()
    return data.decode("utf-8", "replace")[-_TAIL:]


def _reason(returncode: int, stdout_path: Path, stderr: str, limits: Limits, done: bool) -> tuple[bool, str]:
    oversize = max(stdout_path.stat().st_size, stdout_path.with_name("stderr").stat().st_size)
    if returncode == -signal.SIGXFSZ or oversize >= limits.output_bytes:
        return False, f"output limit exceeded ({limits.output_bytes} bytes)"
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return False, f"killed by signal {-returncode} (CPU or memory limit)"
    if "MemoryError" in stderr:
        return False, f"memory limit exceeded ({limits.memory_mb} MB)"
    if _NETWORK_BLOCKED in stderr:
        return False, "network access blocked"
    if _PROCESS_BLOCKED in stderr:
        return False, "starting a process blocked"
    if returncode != 0:
        last = [line for line in stderr.splitlines() if line.strip()]
        return False, f"error: {last[-1][:200] if last else f'exit status {returncode}'}"
    if not done:
        return False, "exited before the end of the program (the tests did not all run)"
    return True, "passed"


@functools.cache
def _say_not_a_boundary() -> None:
    logging.getLogger(__name__).warning(
        "the code sandbox runs without bubblewrap here, so it is not a security boundary against code "
        "written to escape it (apt install bubblewrap; see tracerl/tasks/sandbox.py); said once")


def _limits_preexec(limits: Limits, nproc: int) -> Any:
    """Set in the child before it execs (a shell's run, which has no boot script to set them)."""
    def preexec() -> None:
        cpu = int(limits.timeout_s) + 1
        for which, value in ((resource.RLIMIT_AS, limits.memory_mb * 2**20), (resource.RLIMIT_CPU, cpu),
                             (resource.RLIMIT_FSIZE, limits.output_bytes), (resource.RLIMIT_CORE, 0),
                             (resource.RLIMIT_NPROC, nproc or resource.RLIM_INFINITY)):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
    return preexec


@dataclass
class _Run:
    """One child run: how it ended and what it wrote."""

    returncode: int | None  # None: killed at the timeout
    seconds: float
    memory_killed: bool


def _run(argv: list[str], folder: Path, work: str, env: dict[str, str], limits: Limits, boundary: bool,
         use_netns: bool, *, stdin: bytes | None = None, merge: bool = False, setup: Any = None,
         readonly: dict[str, str] | None = None) -> _Run:
    """Run ``argv`` (``{nproc}`` replaced) in ``work`` under the boundary, the network namespace
    or neither; stdout (and stderr, or both when ``merge``) go to files in ``folder``."""
    start = time.monotonic()
    with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err, \
            isolation.limits_cgroup(limits.processes if boundary else 0,
                                    limits.memory_mb * 2**20 if boundary else 0) as groups:
        # RLIMIT_NPROC counts every process of the user, so only where no pids cgroup counts them
        counted = any((g / "pids.max").exists() for g in groups)
        nproc = 0 if counted else limits.processes if boundary else 0
        argv = [a.replace("{nproc}", str(nproc)) for a in argv]
        if boundary:
            argv = isolation.joined(isolation.wrap(argv, work, env, readonly), groups)
        elif use_netns:
            argv = [shutil.which("unshare") or "unshare", "-rn", *argv]
        preexec = setup(nproc) if setup is not None else None
        proc = subprocess.Popen(argv, cwd=work if not boundary else folder, env=env,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT if merge else err,
                                start_new_session=True, preexec_fn=preexec)
        timed_out = False
        try:
            proc.communicate(input=stdin, timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            proc.wait()
        killed = isolation.memory_exceeded(groups)
    return _Run(None if timed_out else proc.returncode, time.monotonic() - start, killed)


def _boundary(limits: Limits) -> tuple[bool, bool]:
    boundary = isolation.available() if limits.boundary is None else limits.boundary
    if not boundary and limits.boundary is None:
        _say_not_a_boundary()
    return boundary, not boundary and (netns_available() if limits.netns is None else limits.netns)


def run_python(source: str, limits: Limits | None = None) -> SandboxResult:
    """Run ``source`` as ``__main__`` in a sandboxed child (see the module docstring)."""
    limits = limits or Limits()
    boundary, use_netns = _boundary(limits)
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="tracerl-sandbox-") as tmp:
        folder = Path(tmp)
        (folder / "main.py").write_text(source, encoding="utf-8")
        boot = _BOOT.replace("NETWORK_BLOCKED", repr(_NETWORK_BLOCKED)).replace("PROCESS_BLOCKED", repr(_PROCESS_BLOCKED))
        (folder / "boot.py").write_text(boot, encoding="utf-8")
        cpu = int(limits.timeout_s) + 1
        inside = isolation.WORK if boundary else tmp
        env = {"PATH": os.defpath, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8"}
        argv = [sys.executable, "-I", "-B", "boot.py", str(limits.memory_mb * 2**20), str(cpu),
                str(limits.output_bytes), "{nproc}"]
        run = _run(argv, folder, tmp, env, limits, boundary, use_netns, stdin=(nonce + "\n").encode())
        stdout, stderr = _read(folder / "stdout"), _read(folder / "stderr")
        done = (folder / ".done").is_file() and (folder / ".done").read_text() == nonce
        if run.returncode is None:
            ok, reason = False, f"timeout after {limits.timeout_s:.1f} s"
        elif run.memory_killed:
            ok, reason = False, f"memory limit exceeded ({limits.memory_mb} MB)"
        else:
            ok, reason = _reason(run.returncode, folder / "stdout", stderr, limits, done)
    return SandboxResult(ok, reason, run.returncode, stdout, stderr, run.seconds,
                         "bwrap" if boundary else "netns" if use_netns else "python")


SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def run_shell(script: str, work: str | os.PathLike[str], limits: Limits | None = None, *,
              readonly: dict[str, str] | None = None, env: dict[str, str] | None = None) -> SandboxResult:
    """Run ``script`` with ``bash`` in the existing folder ``work``, which keeps what it writes
    (a terminal task's files persist from one command to the next). Under the boundary ``work``
    is ``/tmp/work`` inside and ``readonly`` maps more host folders in, read-only (a task's own
    folder, for its setup and tests); stdout and stderr are one stream, as on a terminal, in
    ``stdout``. ``ok`` is exit status 0; ``reason`` says why not."""
    limits = limits or Limits()
    boundary, use_netns = _boundary(limits)
    work = str(Path(work).resolve())
    inside = isolation.WORK if boundary else work
    environ = {"PATH": SHELL_PATH, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8", "TERM": "dumb",
               **(env or {})}
    if not boundary and readonly:
        raise ValueError("readonly folders need the boundary (bubblewrap): a plain run sees them where they are")
    with tempfile.TemporaryDirectory(prefix="tracerl-shell-") as tmp:
        folder = Path(tmp)
        run = _run(["/bin/bash", "-c", script], folder, work, environ, limits, boundary, use_netns, merge=True,
                   setup=lambda nproc: _limits_preexec(limits, nproc), readonly=readonly)
        output = _read(folder / "stdout")
        size = (folder / "stdout").stat().st_size
    if run.returncode is None:
        ok, reason = False, f"timeout after {limits.timeout_s:.1f} s"
    elif run.memory_killed:
        ok, reason = False, f"memory limit exceeded ({limits.memory_mb} MB)"
    elif run.returncode == -signal.SIGXFSZ or size >= limits.output_bytes:
        ok, reason = False, f"output limit exceeded ({limits.output_bytes} bytes)"
    elif run.returncode != 0:
        ok, reason = False, f"exit status {run.returncode}"
    else:
        ok, reason = True, "exit status 0"
    return SandboxResult(ok, reason, run.returncode, output, "", run.seconds,
                         "bwrap" if boundary else "netns" if use_netns else "shell")
