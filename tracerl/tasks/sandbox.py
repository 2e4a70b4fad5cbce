"""Run untrusted code (a model's program plus its tests, a terminal task's commands) with limits.

    result = run_python(program, Limits(timeout_s=5))
    result.ok, result.reason          # True, "passed" | False, "timeout after 5.0 s"
    run_shell("grep -c ERROR log.txt > count.txt", work_folder)   # bash, in a folder that persists

What it does, per run:

* a **fresh temporary folder** is the working directory, ``HOME`` and ``TMPDIR``; it is deleted
  afterwards, whatever the code left in it (FIFOs and symlinks are unlinked, never opened or
  followed; folders it locked are opened up again; a mount in it is detached before anything
  under it is deleted). The environment is scrubbed to ``PATH``/``HOME``/``TMPDIR``/``LANG``,
  and Python runs isolated (``-I``: no ``PYTHON*`` variables, no user site, no cwd on ``sys.path``).
* **never in the caller's process**: a new session (process group) that is killed (SIGKILL)
  at the wall-clock timeout and again after every run, so its stray children go too.
* **rlimits** set in the child before the code runs: address space (``RLIMIT_AS``, memory),
  CPU seconds (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``, the largest file it may write),
  no core files.
* **the host reads nothing back from the work folder**: stdout and stderr are pipes the runner
  creates and reads, non-blocking, until they close, the deadline, or the output cap
  (``Limits.output_bytes`` on either stream: the run is killed there, "output limit exceeded"),
  keeping the last 4000 characters. A symlink to a host file, a FIFO or ``/dev/zero`` that the
  code leaves where an output or a marker might be is never opened.
* **no network**: where ``unshare -rn`` works (Linux user namespaces, no root needed) the child
  runs in a new, empty network namespace: no interface but a down loopback, so nothing, not
  even a subprocess or raw syscall, reaches any host, the caller's gateway included. In
  every case the child's Python also refuses to create sockets or processes (``socket``,
  ``os.fork``/``system``/``exec*``/``spawn*``, ``subprocess``), so an attempt fails with a clear
  reason even without the namespace.
* **"passed" needs the program to run to its end**: the child writes a per-run nonce to a
  third pipe of the runner's only after the last line ran, so a program that stops early
  (``exit(0)``, ``os._exit(0)``, a closed stdout) does not pass by accident. This is no guard
  against a program *written* to fake its end, with bubblewrap or without: the nonce and the
  pipe are in the child's own process (``sys._getframe(1).f_locals["nonce"]`` reads it), so a
  grader that must hold against such a program computes its verdict where the program cannot
  reach it, not from this run's ``ok``.

**Where bubblewrap runs** (Debian's ``bubblewrap``; :mod:`.isolation`), all of this happens
inside a boundary: new user, PID, mount, network, IPC and UTS namespaces, a read-only system
with the caller's home hidden, the run's folder the one place it can write, pids and memory
cgroups (or RLIMIT_NPROC) capping its processes and their memory together, and every process of the run killed with it, ``setsid``
or not. The Python-level blocks stay, for their clear reasons; the namespaces hold without
them (tests/test_sandbox_boundary.py makes the escape attempts through ``ctypes``).
``SandboxResult.isolation`` says ``"bwrap"``.

**Where it does not**, the runner above is not a security boundary against code written to
escape it, and says so once per process: without the network namespace the Python-level
blocks can be bypassed (``ctypes``, a pre-imported module); the child can read whatever the
caller's user can and write wherever that user may (only file *sizes* are capped; with no
namespace at all, a root caller's child can mount over the host); ``RLIMIT_NPROC`` is
ignored for root; a child that calls ``setsid`` escapes the group kill. Install bubblewrap, or use a container or VM.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import resource
import secrets
import selectors
import shutil
import signal
import stat
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
_MARKER_BYTES = 64  # read back of run_python's end-of-program marker (its nonce is 32)
_GRACE_S = 0.5  # how long the pipes may stay open after the child exits (a stray that holds them)

# Runs in the child before the program: limits first, then the Python-level blocks. Kept in
# a function so the nonce is a local, not a global the program can read from __main__.
_BOOT = r'''
import os, resource, socket, subprocess, sys

def _main():
    memory, cpu, fsize, nproc, marker = (int(v) for v in sys.argv[1:6])
    nonce = sys.stdin.readline().strip()
    sys.stdin = open(os.devnull)
    os.set_inheritable(marker, False)
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
    os.write(marker, nonce.encode())

_main()
'''


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    timeout_s: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 1_000_000  # per stream (stdout, stderr); also the largest file the program may write
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


def _reason(returncode: int, oversize: bool, stderr: str, limits: Limits, done: bool) -> tuple[bool, str]:
    if returncode == -signal.SIGXFSZ or oversize:
        return False, f"output limit exceeded ({limits.output_bytes} bytes)"
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return False, f"killed by signal {-returncode} (CPU or memory limit)"
    if "MemoryError" in stderr:
        return False, f"memory limit exceeded ({limits.memory_mb} MB)"
    if "No space left on device" in stderr:  # ENOSPC: the work folder's tmpfs is full (.isolation)
        return False, isolation.DISK_REASON
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


class _Stream:
    """One pipe from the child as the host keeps it: the bytes that came and the last of them."""

    def __init__(self, cap: int, output: bool, keep: int = _TAIL * 4) -> None:
        self.cap, self.output, self.keep = cap, output, keep
        self.size = 0
        self.tail = bytearray()

    def add(self, data: bytes) -> None:
        self.size += len(data)
        self.tail += data
        del self.tail[:-self.keep]

    def text(self) -> str:
        return self.tail.decode("utf-8", "replace")[-_TAIL:]


@dataclass
class _Run:
    """One child run: how it ended and what it wrote to the runner's pipes."""

    returncode: int | None  # None: killed at the timeout
    seconds: float
    memory_killed: bool
    stdout: str  # the last _TAIL characters of each
    stderr: str
    oversize: bool  # stdout or stderr reached limits.output_bytes (the run was killed there)
    marker: bytes  # what came on the marker pipe (run_python's nonce once the program ran to its end)


def _collect(proc: subprocess.Popen[bytes], streams: dict[int, _Stream], deadline: float) -> bool:
    """Read the child's pipes, never blocking, until all close or the deadline (after the child
    exits, a stray holding them open gets _GRACE_S). True when an output reached its cap; a
    marker past its cap is no longer read (it cannot match)."""
    exited: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            if exited is None and proc.poll() is not None:
                exited = time.monotonic()
            left = (deadline if exited is None else min(deadline, exited + _GRACE_S)) - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(min(left, 0.1)):  # wakes to notice the child's exit
                with contextlib.suppress(BlockingIOError):
                    data = os.read(key.fd, 65536)
                    stream = streams[key.fd]
                    stream.add(data)
                    if stream.size >= stream.cap and stream.output:
                        return True
                    if not data or stream.size >= stream.cap:
                        selector.unregister(key.fd)
    return False


def _run(argv: list[str], work: str, env: dict[str, str], limits: Limits, boundary: bool, use_netns: bool, *,
         stdin: bytes | None = None, merge: bool = False, setup: Any = None,
         readonly: dict[str, str] | None = None, marker: bool = False) -> _Run:
    """Run ``argv`` (``{nproc}`` and ``{marker}`` replaced) in ``work`` under the boundary, the
    network namespace or neither. stdout and stderr (one stream when ``merge``) come through
    pipes, and with ``marker`` a third pipe whose fd replaces ``{marker}``: nothing is read back
    from a path. ``stdin`` is a line (it fits the pipe's buffer, so writing it never blocks)."""
    start = time.monotonic()
    mark_r, mark_w = os.pipe() if marker else (-1, -1)
    with isolation.limits_cgroup(limits.processes if boundary else 0,
                                 limits.memory_mb * 2**20 if boundary else 0) as groups:
        # RLIMIT_NPROC counts every process of the user, so only where no pids cgroup counts them
        counted = any((g / "pids.max").exists() for g in groups)
        nproc = 0 if counted else limits.processes if boundary else 0
        argv = [a.replace("{nproc}", str(nproc)).replace("{marker}", str(mark_w)) for a in argv]
        if boundary:
            # run_python's folder (the one with a marker) is scratch: a size-capped tmpfs inside
            disk = isolation.DISK_BYTES if marker else 0
            argv = isolation.joined(isolation.wrap(argv, work, env, readonly, disk=disk), groups)
        elif use_netns:
            argv = [shutil.which("unshare") or "unshare", "-rn", *argv]
        preexec = setup(nproc) if setup is not None else None
        try:
            proc = subprocess.Popen(argv, cwd=work, env=env,
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                                    pass_fds=(mark_w,) if marker else (), start_new_session=True, preexec_fn=preexec)
        except BaseException:
            for fd in (mark_r, mark_w) if marker else ():
                os.close(fd)
            raise
        if marker:
            os.close(mark_w)
        out, err, mark = _Stream(limits.output_bytes, True), _Stream(limits.output_bytes, True), _Stream(_MARKER_BYTES, False)
        streams = {f.fileno(): s for f, s in ((proc.stdout, out), (proc.stderr, err)) if f is not None}
        if marker:
            streams[mark_r] = mark
        timed_out = oversize = False
        try:
            if proc.stdin is not None and stdin is not None:
                with contextlib.suppress(BrokenPipeError), proc.stdin:
                    proc.stdin.write(stdin)
            oversize = _collect(proc, streams, start + limits.timeout_s)
            if not oversize:
                proc.wait(timeout=max(0.0, start + limits.timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            proc.wait()
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
            if marker:
                os.close(mark_r)
        killed = isolation.memory_exceeded(groups)
    return _Run(None if timed_out else proc.returncode, time.monotonic() - start, killed, out.text(), err.text(),
                oversize, bytes(mark.tail) if mark.size <= _MARKER_BYTES else b"")


def _remove(folder: Path) -> None:
    """Delete a run's temporary folder whatever its code left there. Mounts under it are detached
    first (so nothing of what they show is deleted); rmtree unlinks FIFOs, sockets and symlinks
    without opening or following them; what it leaves (a folder the code locked, a tree deeper
    than Python's recursion limit) goes with ``chmod -R``/``rm -rf --one-file-system``."""
    def unlock(_function: Any, path: str, _error: Any) -> None:
        for p in (os.path.dirname(path), path):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(p).st_mode):
                    os.chmod(p, 0o700)

    for point in _mounts_under(folder):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["umount", "--lazy", "--", point], capture_output=True, timeout=30, check=False)
    if _mounts_under(folder):  # deleting would reach into what they show: leave it, loudly
        logging.getLogger(__name__).warning("the sandbox's temporary folder %s holds mounts; not deleted", folder)
        return
    with contextlib.suppress(OSError, RecursionError):
        shutil.rmtree(folder, onerror=unlock)
    for tool in (["chmod", "-R", "u+rwx"], ["rm", "-rf", "--one-file-system"]):
        if not os.path.lexists(folder):
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*tool, "--", str(folder)], capture_output=True, timeout=60, check=False)
    if os.path.lexists(folder):
        logging.getLogger(__name__).warning("could not delete the sandbox's temporary folder %s", folder)


def _mounts_under(folder: Path) -> list[bytes]:
    """Mount points inside ``folder`` in the host's mount namespace, deepest first."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            fields = [line.split() for line in f]
    except OSError:
        return []
    # the kernel writes space, tab, newline and backslash in a path as octal escapes (\040)
    points = (re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), f[4]) for f in fields if len(f) > 4)
    inside = os.fsencode(folder) + b"/"
    return sorted((p for p in points if p.startswith(inside)), key=len, reverse=True)


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
    folder = Path(tempfile.mkdtemp(prefix="tracerl-sandbox-"))
    try:
        (folder / "main.py").write_text(source, encoding="utf-8")
        boot = _BOOT.replace("NETWORK_BLOCKED", repr(_NETWORK_BLOCKED)).replace("PROCESS_BLOCKED", repr(_PROCESS_BLOCKED))
        (folder / "boot.py").write_text(boot, encoding="utf-8")
        cpu = int(limits.timeout_s) + 1
        inside = isolation.WORK if boundary else str(folder)
        env = {"PATH": os.defpath, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8"}
        argv = [sys.executable, "-I", "-B", "boot.py", str(limits.memory_mb * 2**20), str(cpu),
                str(limits.output_bytes), "{nproc}", "{marker}"]
        run = _run(argv, str(folder), env, limits, boundary, use_netns, stdin=(nonce + "\n").encode(), marker=True)
    finally:
        _remove(folder)
    if run.returncode is None:
        ok, reason = False, f"timeout after {limits.timeout_s:.1f} s"
    elif run.memory_killed:
        ok, reason = False, f"memory limit exceeded ({limits.memory_mb} MB)"
    else:
        ok, reason = _reason(run.returncode, run.oversize, run.stderr, limits, run.marker == nonce.encode())
    return SandboxResult(ok, reason, run.returncode, run.stdout, run.stderr, run.seconds,
                         "bwrap" if boundary else "netns" if use_netns else "python")


SHELL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _own_folder(work: Path) -> str:
    """``work`` if it may be a run's work folder: under the boundary it is handed to the sandbox's
    uid, everything in it (a root caller's ``chown -R``), so a shared folder never is (``/tmp``, a
    home, a folder holding the interpreter or the current directory)."""
    shared = {Path("/"), Path.home().resolve(), *(p.resolve() for p in (Path("/tmp"), Path("/var/tmp")))}
    holds = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path.cwd().resolve()]
    if len(work.parts) <= 2 and work.parent == Path("/") or work in shared or any(
            work == p or work in p.parents for p in holds):
        raise ValueError(f"run_shell: {work} is a shared folder, not a run's own; the run would take it over "
                         "(its files handed to the sandbox's user): pass a folder made for the run (tempfile.mkdtemp)")
    return str(work)


def run_shell(script: str, work: str | os.PathLike[str], limits: Limits | None = None, *,
              readonly: dict[str, str] | None = None, env: dict[str, str] | None = None) -> SandboxResult:
    """Run ``script`` with ``bash`` in the existing folder ``work``, which keeps what it writes
    (a terminal task's files persist from one command to the next). Under the boundary ``work``
    is ``/tmp/work`` inside and ``readonly`` maps more host folders in, read-only (a task's own
    folder, for its setup and tests); stdout and stderr are one stream, as on a terminal, in
    ``stdout``. ``ok`` is exit status 0; ``reason`` says why not."""
    limits = limits or Limits()
    boundary, use_netns = _boundary(limits)
    work = _own_folder(Path(work).resolve())
    inside = isolation.WORK if boundary else work
    environ = {"PATH": SHELL_PATH, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8", "TERM": "dumb",
               **(env or {})}
    if not boundary and readonly:
        raise ValueError("readonly folders need the boundary (bubblewrap): a plain run sees them where they are")
    run = _run(["/bin/bash", "-c", script], work, environ, limits, boundary, use_netns, merge=True,
               setup=lambda nproc: _limits_preexec(limits, nproc), readonly=readonly)
    if run.returncode is None:
        ok, reason = False, f"timeout after {limits.timeout_s:.1f} s"
    elif run.memory_killed:
        ok, reason = False, f"memory limit exceeded ({limits.memory_mb} MB)"
    elif run.returncode == -signal.SIGXFSZ or run.oversize:
        ok, reason = False, f"output limit exceeded ({limits.output_bytes} bytes)"
    elif run.returncode != 0:
        ok, reason = False, f"exit status {run.returncode}"
    else:
        ok, reason = True, "exit status 0"
    return SandboxResult(ok, reason, run.returncode, run.stdout, "", run.seconds,
                         "bwrap" if boundary else "netns" if use_netns else "shell")


def run_python_pair(trusted: str, untrusted: str, limits: Limits | None = None, *,
                    site: bool = True) -> SandboxResult:
    """Run two Python programs, each in a sandbox of its own (its own work folder and
    namespaces, each with ``limits``; ``untrusted`` in cgroups of its own too), that share
    nothing but two pipes: each one's stdout is the other's stdin. ``untrusted``'s stderr goes
    nowhere, and it is killed when ``trusted`` ends. The result is ``trusted``'s: ok when it
    exits 0 within the timeout, ``stderr`` its last lines (a graded run:
    :mod:`tracerl.tasks.graders.code`). ``site=False`` starts both without ``site`` (``-S``)."""
    limits = limits or Limits()
    boundary, use_netns = _boundary(limits)
    start = time.monotonic()
    to_untrusted, to_trusted = os.pipe(), os.pipe()
    fds = [*to_untrusted, *to_trusted]
    procs: list[subprocess.Popen[bytes]] = []
    folders: list[Path] = []
    groups: list[list[Path]] = []
    stderr, returncode = b"", None
    with contextlib.ExitStack() as stack:
        try:
            for source, stdin, stdout in ((untrusted, to_untrusted[0], to_trusted[1]),
                                          (trusted, to_trusted[0], to_untrusted[1])):
                folders.append(folder := Path(tempfile.mkdtemp(prefix="tracerl-sandbox-")))
                (folder / "main.py").write_text(source, encoding="utf-8")
                caps = boundary and not procs  # the trusted side runs no code it must cap together
                groups.append(stack.enter_context(isolation.limits_cgroup(
                    limits.processes if caps else 0, limits.memory_mb * 2**20 if caps else 0)))
                counted = any((g / "pids.max").exists() for g in groups[-1])
                nproc = 0 if counted or not caps else limits.processes
                inside = isolation.WORK if boundary else str(folder)
                env = {"PATH": os.defpath, "HOME": inside, "TMPDIR": inside, "LANG": "C.UTF-8"}
                argv = [sys.executable, "-I", "-B", *([] if site else ["-S"]), "main.py"]
                if boundary:
                    argv = isolation.joined(isolation.wrap(argv, folder, env), groups[-1])
                elif use_netns:
                    argv = [shutil.which("unshare") or "unshare", "-rn", *argv]
                procs.append(subprocess.Popen(argv, cwd=folder, env=env, stdin=stdin, stdout=stdout,
                                              stderr=subprocess.PIPE if len(procs) else subprocess.DEVNULL,
                                              start_new_session=True, preexec_fn=_limits_preexec(limits, nproc)))
            while fds:  # theirs now: a side that ends is an end of file to the other
                os.close(fds.pop())
            _, stderr = procs[1].communicate(timeout=max(0.0, start + limits.timeout_s - time.monotonic()))
            returncode = procs[1].returncode
        except subprocess.TimeoutExpired:
            pass
        finally:
            while fds:
                os.close(fds.pop())
            if procs and procs[0].poll() is None:  # it ends at the end of its stdin: quicker than a kill
                with contextlib.suppress(OSError), selectors.DefaultSelector() as waiting:
                    pidfd = os.pidfd_open(procs[0].pid)
                    try:
                        waiting.register(pidfd, selectors.EVENT_READ)
                        waiting.select(0.5)
                    finally:
                        os.close(pidfd)
            for proc in procs:
                _kill_group(proc.pid)
                proc.wait()
                if proc.stderr is not None:
                    proc.stderr.close()
            memory = [isolation.memory_exceeded(g) for g in groups]
    for folder in folders:
        _remove(folder)
    text = stderr[-_TAIL * 4:].decode("utf-8", "replace")[-_TAIL:]
    last = [line for line in text.splitlines() if line.strip()]
    if returncode is None:
        ok, reason = False, f"timeout after {limits.timeout_s:.1f} s"
    elif any(memory):
        ok, reason = False, f"memory limit exceeded ({limits.memory_mb} MB)"
    elif returncode != 0:
        ok, reason = False, f"error: {last[-1][:200] if last else f'exit status {returncode}'}"
    else:
        ok, reason = True, "exit status 0"
    return SandboxResult(ok, reason, returncode, "", text, time.monotonic() - start,
                         "bwrap" if boundary else "netns" if use_netns else "python")
