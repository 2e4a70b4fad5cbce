"""The boundary around sandboxed code: bubblewrap namespaces and a pids cgroup.

:func:`wrap` turns ``argv`` into one that runs it under ``bwrap`` (Debian's ``bubblewrap``):

* new user, PID, mount, network, IPC, UTS and cgroup namespaces (``--unshare-all``), no
  further user namespaces inside (``--disable-userns``), uid and gid 65534 inside;
* a read-only view of the system (``--ro-bind / /``), with ``/root``, ``/home``, ``/tmp`` and
  ``/run`` replaced by empty tmpfs folders: the caller's home is not there, except the
  interpreter's own prefix when it lives in it (pyenv under ``/root``), bound read-only;
* one writable folder, the run's work folder, at ``/tmp/work``;
* ``--die-with-parent`` and a PID namespace: when the runner kills bwrap, every process
  of the run goes with it, ``setsid`` or not.

Process counts and memory: ``RLIMIT_NPROC`` does not bind root, even in a user namespace
(measured: 60 of 60 processes started under a limit of 30), and ``RLIMIT_AS`` caps each process,
not their sum, so the runner puts the run in cgroups of its own where the cgroup file system is
writable (cgroup v1's ``pids`` and ``memory`` hierarchies, or v2 with those controllers):
``pids.max`` caps the processes and the memory limit caps them all together (a process past it
is killed by the kernel, and the run's reason says "memory limit exceeded"). Elsewhere
RLIMIT_NPROC, which does bind an unprivileged user, limits processes (for root without a
writable cgroup nothing does: the run's processes still all die with it), and RLIMIT_AS, set
inside, limits each process's memory.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["WORK", "available", "joined", "limits_cgroup", "memory_exceeded", "runs", "wrap"]

WORK = "/tmp/work"  # where the work folder is inside the sandbox
_HIDDEN = ("/root", "/home", "/tmp", "/run")


def runs(tool: str, *args: str) -> bool:
    """Whether ``tool args... true`` starts and exits 0 here (a namespace tool's probe)."""
    path = shutil.which(tool)
    if path is None:
        return False
    try:
        done = subprocess.run([path, *args, "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def available() -> bool:
    """Whether bwrap can start a process here with every namespace (probed once)."""
    return runs("bwrap", *_flags("/"))


def _prefixes() -> list[str]:
    """The interpreter's folders that a hidden folder would hide (a venv, a pyenv in /root)."""
    found = []
    for p in {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}:
        if any(p == h or p.startswith(h + "/") for h in _HIDDEN) and Path(p).exists():
            found.append(p)
    return sorted(found)


def _flags(work: str, readonly: Mapping[str, str] | None = None) -> list[str]:
    flags = ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534", "--die-with-parent",
             "--new-session", "--ro-bind", "/", "/"]
    for hidden in _HIDDEN:
        if Path(hidden).exists():
            flags += ["--tmpfs", hidden]
    for prefix in _prefixes():
        flags += ["--ro-bind", prefix, prefix]
    flags += ["--bind", work, WORK]
    for outside, inside in (readonly or {}).items():  # e.g. a terminal task's own folder, for its tests
        flags += ["--ro-bind", outside, inside]
    for hidden in _HIDDEN:  # read-only once their mount points exist: writes elsewhere fail (EROFS)
        if Path(hidden).exists():
            flags += ["--remount-ro", hidden]
    return [*flags, "--chdir", WORK, "--proc", "/proc", "--dev", "/dev"]


def wrap(argv: list[str], work: str | os.PathLike[str], env: dict[str, str],
         readonly: Mapping[str, str] | None = None) -> list[str]:
    """``argv`` run inside the sandbox with ``work`` as its one writable folder and only ``env``;
    ``readonly`` maps more host folders to where they appear inside, read-only."""
    flags = _flags(str(work), readonly) + ["--clearenv"]
    for key, value in env.items():
        flags += ["--setenv", key, value]
    return [shutil.which("bwrap") or "bwrap", *flags, "--", *argv]


def _pids_root() -> Path | None:
    """Where a pids cgroup can be made: cgroup v1's pids hierarchy, or v2's root with pids on."""
    return _roots().get("pids")


@functools.cache
def _roots() -> dict[str, Path]:
    """The writable cgroup roots per controller (``pids``, ``memory``): cgroup v1's hierarchy of
    each, or v2's root where it delegates the controller (one group then holds both)."""
    found: dict[str, Path] = {}
    for controller in ("pids", "memory"):
        v1 = Path("/sys/fs/cgroup") / controller
        if (v1 / "cgroup.procs").exists():
            if os.access(v1, os.W_OK):
                found[controller] = v1
            continue
        v2 = Path("/sys/fs/cgroup")
        control = v2 / "cgroup.subtree_control"
        if control.exists() and controller in control.read_text().split() and os.access(v2, os.W_OK):
            found[controller] = v2
    return found


def joined(argv: list[str], groups: list[Path] | Path | None) -> list[str]:
    """``argv`` started inside ``groups`` (its children inherit them): a shell joins, then execs."""
    if not groups:
        return argv
    paths = [groups] if isinstance(groups, Path) else groups
    join = " && ".join(f'echo $$ > "${i}/cgroup.procs"' for i in range(1, len(paths) + 1))
    return ["/bin/sh", "-c", f'{join} && shift {len(paths)} && exec "$@"', "sh", *map(str, paths), *argv]


@contextlib.contextmanager
def limits_cgroup(processes: int, memory_bytes: int = 0) -> Iterator[list[Path]]:
    """Fresh cgroups holding at most ``processes`` processes and ``memory_bytes`` of memory
    (together, all processes of the run; 0: no limit of that kind). [] where none can be made.
    What is still in them at the end is killed and the groups removed."""
    roots = _roots()
    name = f"tracerl-sandbox-{uuid.uuid4().hex[:12]}"
    wanted = {"pids": processes, "memory": memory_bytes}
    groups: list[Path] = []
    for controller, limit in wanted.items():
        root = roots.get(controller)
        if not limit or root is None:
            continue
        group = root / name
        try:
            if not group.exists():
                group.mkdir()
                groups.append(group)
            _write_limit(group, controller, limit)
        except OSError:
            continue
    try:
        yield groups
    finally:
        for group in groups:
            _empty(group)


def _write_limit(group: Path, controller: str, limit: int) -> None:
    if controller == "pids":
        (group / "pids.max").write_text(str(limit))
    elif (group / "memory.max").exists():  # v2
        (group / "memory.max").write_text(str(limit))
        with contextlib.suppress(OSError):
            (group / "memory.swap.max").write_text("0")
    else:  # v1: memory, and memory plus swap where swap is accounted
        (group / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):
            (group / "memory.memsw.limit_in_bytes").write_text(str(limit))


def memory_exceeded(groups: list[Path]) -> bool:
    """Whether the kernel killed a process of ``groups`` for going past the memory limit."""
    for group in groups:
        for name in ("memory.events", "memory.oom_control"):  # v2, v1
            with contextlib.suppress(OSError):
                for line in (group / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip() not in ("", "0"):
                        return True
    return False


def _empty(group: Path) -> None:
    for _ in range(100):
        with contextlib.suppress(OSError):
            pids = [int(x) for x in (group / "cgroup.procs").read_text().split()]
            if not pids:
                group.rmdir()
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
