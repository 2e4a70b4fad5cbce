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

Process counts: ``RLIMIT_NPROC`` does not bind root, even in a user namespace (measured:
60 of 60 processes started under a limit of 30), so the runner puts the run in a pids cgroup
of its own (``pids.max``) where the cgroup file system is writable (cgroup v1's
``/sys/fs/cgroup/pids``, or v2 with the pids controller); elsewhere RLIMIT_NPROC, which does
bind an unprivileged user, is what limits them (and, for root without a writable cgroup,
nothing does: the run's processes still all die with it). Memory is RLIMIT_AS, set inside.
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
from collections.abc import Iterator
from pathlib import Path

__all__ = ["WORK", "available", "joined", "pids_cgroup", "runs", "wrap"]

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


def _flags(work: str) -> list[str]:
    flags = ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534", "--die-with-parent",
             "--new-session", "--ro-bind", "/", "/"]
    for hidden in _HIDDEN:
        if Path(hidden).exists():
            flags += ["--tmpfs", hidden]
    for prefix in _prefixes():
        flags += ["--ro-bind", prefix, prefix]
    flags += ["--bind", work, WORK]
    for hidden in _HIDDEN:  # read-only once their mount points exist: writes elsewhere fail (EROFS)
        if Path(hidden).exists():
            flags += ["--remount-ro", hidden]
    return [*flags, "--chdir", WORK, "--proc", "/proc", "--dev", "/dev"]


def wrap(argv: list[str], work: str | os.PathLike[str], env: dict[str, str]) -> list[str]:
    """``argv`` run inside the sandbox with ``work`` as its one writable folder and only ``env``."""
    flags = _flags(str(work)) + ["--clearenv"]
    for key, value in env.items():
        flags += ["--setenv", key, value]
    return [shutil.which("bwrap") or "bwrap", *flags, "--", *argv]


def _pids_root() -> Path | None:
    """Where a pids cgroup can be made: cgroup v1's pids hierarchy, or v2's root with pids on."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists():
        return v1 if os.access(v1, os.W_OK) else None
    v2 = Path("/sys/fs/cgroup")
    control = v2 / "cgroup.subtree_control"
    if control.exists() and "pids" in control.read_text().split() and os.access(v2, os.W_OK):
        return v2
    return None


def joined(argv: list[str], group: Path | None) -> list[str]:
    """``argv`` started inside ``group`` (its children inherit it): a shell joins, then execs."""
    if group is None:
        return argv
    return ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *argv]


@contextlib.contextmanager
def pids_cgroup(limit: int) -> Iterator[Path | None]:
    """A fresh pids cgroup holding at most ``limit`` processes (None where none can be made, or
    ``limit`` is 0); what is still in it at the end is killed and the cgroup removed."""
    root = _pids_root() if limit else None
    group = None
    if root is not None:
        group = root / f"tracerl-sandbox-{uuid.uuid4().hex[:12]}"
        try:
            group.mkdir()
            (group / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
            group = None
    try:
        yield group
    finally:
        if group is not None:
            _empty(group)


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
