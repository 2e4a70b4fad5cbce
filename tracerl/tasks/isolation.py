"""The boundary around sandboxed code: bubblewrap namespaces, an allow-list file system, a
seccomp filter, an unprivileged host uid and cgroups.

:func:`wrap` turns ``argv`` into one that runs it under ``bwrap`` (Debian's ``bubblewrap``):

* new user, PID, mount, network, IPC, UTS and cgroup namespaces (``--unshare-all``), no
  further user namespaces inside (``--disable-userns``), uid and gid 65534 inside;
* **an allow-list file system**, never ``/`` whole: the system's programs and libraries
  (``/usr`` and the ``/bin``, ``/lib*`` links or folders), a minimal ``/etc`` (:data:`ETC`: users,
  groups, the loader's cache, time zone, certificates; no ``shadow``, no keys), the interpreter's
  folders (``sys.prefix``, ``sys.base_prefix``, site-packages), a fresh ``/dev`` and ``/proc``,
  an empty read-only ``/tmp``, and the work folder at ``/tmp/work``: the repository, ``/opt``,
  ``/var``, ``/srv``, the caller's home and every other folder are not there at all;
* **an unprivileged host uid**: where the caller is root, a small launcher (:data:`_LAUNCH`)
  opens the interpreter's folders and the work folder as root, hands them to bwrap as open
  descriptors (``--ro-bind-fd``), then drops to host uid/gid 65534 and execs bwrap, which
  builds its namespaces as that user. So an interpreter under a folder that uid cannot enter
  (pyenv under ``/root``, mode 0700) still runs, at its own path, and a root-only file bound
  into the sandbox (a 0600 file in the interpreter's prefix) stays unreadable: owner
  permissions apply. The work folder is handed to uid 65534 (``chown -R``, links not followed);
* **a disk limit** for a scratch run (``wrap(disk=...)``, :func:`.sandbox.run_python`): the work
  folder is a fresh tmpfs of ``disk`` bytes and :data:`FILES` inodes with the host folder's
  top-level files copied in; what the run writes there is gone after it, and a write past
  either limit fails with ENOSPC ("disk limit exceeded"). Where the caller is not root the
  tmpfs is bwrap's (``--size``), and bubblewrap has no inode option: the number of files is
  then capped only by the size (each takes at least a page). A persistent work folder
  (:func:`.sandbox.run_shell`, a terminal episode) is the host folder itself, not size-capped;
* **a seccomp filter** (:mod:`.seccomp`, ``--seccomp``): ptrace, process_vm_*, bpf,
  perf_event_open, userfaultfd, the keyring, mounts, namespaces, modules, io_uring and unix
  sockets refused with EPERM;
* ``--die-with-parent`` and a PID namespace: when the runner kills bwrap, every process
  of the run goes with it, ``setsid`` or not.

Process counts and memory: ``RLIMIT_NPROC`` does not bind root, even in a user namespace
(measured: 60 of 60 processes started under a limit of 30), and ``RLIMIT_AS`` caps each process,
not their sum, so the runner puts the run in cgroups of its own where the cgroup file system is
writable (cgroup v1's ``pids`` and ``memory`` hierarchies, or v2 with those controllers):
``pids.max`` caps the processes and the memory limit caps them all together (a process past it
is killed by the kernel, and the run's reason says "memory limit exceeded"). Elsewhere
RLIMIT_NPROC, which binds an unprivileged user (uid 65534 here, shared by the runs going on at
once), limits processes, and RLIMIT_AS, set inside, limits each process's memory.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from . import seccomp

__all__ = ["DISK_BYTES", "DISK_REASON", "ETC", "FILES", "UID", "WORK", "available", "bound_folders", "joined",
           "limits_cgroup", "memory_exceeded", "runs", "wrap"]

WORK = "/tmp/work"  # where the work folder is inside the sandbox
UID = 65534  # the sandbox's uid and gid inside, and on the host where the caller is root
DISK_BYTES = 256 * 2**20  # a scratch work folder's size (run_python)
FILES = 10_000  # and its inodes (files and folders), where the caller is root
DISK_REASON = f"disk limit exceeded ({DISK_BYTES // 2**20} MB or {FILES} files)"
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# what programs read from /etc: users and groups (no shadow), the loader, time, certificates, tables
ETC = ("passwd", "group", "nsswitch.conf", "host.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
       "localtime", "timezone", "alternatives", "mime.types", "protocols", "services", "os-release",
       "debian_version", "ssl/certs", "ssl/openssl.cnf")

# Run as the caller with a JSON spec, then exec bwrap. Where it is to drop to the sandbox uid
# (the caller is root), it first enters a mount namespace of its own, private, where it makes each
# folder to bind reachable by that uid (a folder under a closed one, pyenv under /root 0700: a
# tmpfs over the closed folder, the folder bound back from a descriptor opened before), hands
# the work folder to that uid and, for a scratch run, mounts a tmpfs of the run's size and inodes
# over it with its files copied in; the host's own view changes in nothing. Not root: bwrap's
# own tmpfs (--size) for a scratch run, its files copied in by bwrap (--file).
_LAUNCH = r'''
import ctypes, json, os, stat, sys
spec = json.loads(sys.argv[1])
uid, disk, files, binds = spec["uid"], spec["disk"], spec["files"], spec["binds"]
args = list(spec["head"])
libc = ctypes.CDLL(None, use_errno=True)
NOSUID, NODEV, BIND, REC, PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000

def call(rc, what):
    if rc:
        raise OSError(ctypes.get_errno(), what)

def keep(fd):
    os.set_inheritable(fd, True)
    return str(fd)

def top_files(folder):
    found = []
    for name in sorted(os.listdir(folder)):
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            found.append((name, fd))
        else:
            os.close(fd)
    return found

def closed(path):
    parts = path.split("/")
    for i in range(2, len(parts)):
        if not os.stat("/".join(parts[:i])).st_mode & 0o001:
            return "/".join(parts[:i])
    return None

def own(folder):
    os.chown(folder, uid, uid, follow_symlinks=False)
    for _, dirs, names, dirfd in os.fwalk(folder, follow_symlinks=False):
        for name in dirs + names:
            os.chown(name, uid, uid, dir_fd=dirfd, follow_symlinks=False)

def scratch(folder):
    copied = [(name, os.read(fd, 1 << 30)) for name, fd in top_files(folder)]
    options = f"size={disk},nr_inodes={files},mode=0700,uid={uid},gid={uid}".encode()
    call(libc.mount(b"tracerl-work", folder.encode(), b"tmpfs", NOSUID | NODEV, options), "a tmpfs work folder")
    for name, data in copied:
        with open(os.path.join(folder, name), "xb") as f:
            f.write(data)
        os.chown(os.path.join(folder, name), uid, uid)

if uid is not None:
    call(libc.unshare(0x00020000), "a mount namespace")
    call(libc.mount(b"none", b"/", None, REC | PRIVATE, None), "a private mount namespace")
    fds = {source: os.open(source, os.O_PATH) for _, source, _ in binds}
    tops = {source: closed(source) for _, source, _ in binds}
    for top in sorted({t for t in tops.values() if t is not None}):
        call(libc.mount(b"tracerl-hide", top.encode(), b"tmpfs", NOSUID | NODEV, b"mode=0755"), "a cover")
    for _, source, _ in binds:
        if tops[source] is not None:
            os.makedirs(source, exist_ok=True)
            call(libc.mount(f"/proc/self/fd/{fds[source]}".encode(), source.encode(), None, BIND | REC, None), "a bind")
for mode, source, dest in binds:
    if mode == "scratch" and uid is None:
        args += ["--size", str(disk), "--tmpfs", dest]
        args += [a for name, fd in top_files(source) for a in ("--file", keep(fd), dest + "/" + name)]
        continue
    if mode == "scratch":
        scratch(source)
    elif mode == "rw" and uid is not None:
        own(source)
    args += ["--ro-bind" if mode == "ro" else "--bind", source, dest]
if spec["seccomp"]:
    fd = os.memfd_create("tracerl-seccomp", 0)
    os.write(fd, bytes.fromhex(spec["seccomp"]))
    os.lseek(fd, 0, os.SEEK_SET)
    args += ["--seccomp", keep(fd)]
args += spec["tail"]
os.chdir("/")
if uid is not None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
os.execv(args[0], args)
'''


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


def available() -> bool:
    """Whether bwrap can start a process here with every namespace (probed once)."""
    return _mode()[0]


@functools.cache
def _mode() -> tuple[bool, int | None]:
    """(bwrap works, the host uid to drop to): UID where the caller is root and bwrap starts as
    that user (unprivileged user namespaces), else None (said once where root keeps root)."""
    if shutil.which("bwrap") is None:
        return False, None
    drop = UID if os.geteuid() == 0 else None
    if _probe(drop):
        return True, drop
    if drop is not None and _probe(None):
        logging.getLogger(__name__).warning(
            "bubblewrap cannot start as an unprivileged user here (user namespaces are off for them), so the "
            "code sandbox runs as host root inside its namespaces and a root-only file bound into it is "
            "readable; enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1); said once")
        return True, None
    return False, None


def _probe(uid: int | None) -> bool:
    with tempfile.TemporaryDirectory(prefix="tracerl-probe-") as folder:
        try:
            done = subprocess.run(_argv(["/bin/true"], folder, {}, None, uid, 0), capture_output=True,
                                  timeout=10, check=False, cwd=folder)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


def _prefixes() -> list[str]:
    """The interpreter's folders to bind (a venv, a pyenv in /root, site-packages), outermost
    only, leaving out what the system folders already show."""
    found = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    with contextlib.suppress(AttributeError):  # site.getsitepackages is missing in some virtualenvs
        found |= set(site.getsitepackages())
    found = {str(Path(p).resolve()) for p in found if Path(p).is_dir()}
    system = [str(Path(d).resolve()) for d in _SYSTEM if Path(d).exists()]
    return sorted(p for p in found if not any(p == q or p.startswith(q.rstrip("/") + "/")
                                              for q in [*system, *(f for f in found if f != p)]))


def bound_folders() -> list[str]:
    """The host folders the sandbox shows, read-only (besides single files of /etc and the work
    folder): the system's and the interpreter's."""
    found = {str(Path(d).resolve()) for d in _SYSTEM if Path(d).exists()} | set(_prefixes())
    return sorted(p for p in found if not any(p.startswith(q + "/") for q in found))


def _system() -> list[str]:
    flags = []
    for folder in _SYSTEM:
        path = Path(folder)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            flags += ["--symlink", os.readlink(path), folder]
        elif path.is_dir():
            flags += ["--ro-bind", folder, folder]
    for name in ETC:
        if (Path("/etc") / name).exists():
            flags += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return flags


def _argv(argv: list[str], work: str, env: Mapping[str, str], readonly: Mapping[str, str] | None,
          uid: int | None, disk: int) -> list[str]:
    head = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
            "--uid", str(UID), "--gid", str(UID), "--die-with-parent", "--new-session", *_system(),
            "--proc", "/proc", "--dev", "/dev", "--size", str(DISK_BYTES), "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    binds = [["ro", p, p] for p in _prefixes()]
    binds.append(["scratch" if disk else "rw", work, WORK])
    # more host folders where they appear inside, e.g. a terminal task's own folder, for its tests
    binds += [["ro", outside, inside] for outside, inside in (readonly or {}).items()]
    tail = ["--remount-ro", "/", "--remount-ro", "/tmp", "--chdir", WORK, "--clearenv"]
    for key, value in env.items():
        tail += ["--setenv", key, value]
    program = seccomp.bpf()
    spec = {"uid": uid, "disk": disk, "files": FILES, "head": head, "binds": binds, "tail": [*tail, "--", *argv],
            "seccomp": program.hex() if program else None}
    return [sys.executable, "-I", "-S", "-c", _LAUNCH, json.dumps(spec)]


def wrap(argv: list[str], work: str | os.PathLike[str], env: dict[str, str],
         readonly: Mapping[str, str] | None = None, disk: int = 0) -> list[str]:
    """``argv`` run inside the sandbox with ``work`` as its one writable folder and only ``env``;
    ``readonly`` maps more host folders to where they appear inside, read-only. ``disk`` > 0:
    the work folder is a fresh tmpfs of that many bytes (and :data:`FILES` inodes where the
    caller is root) holding a copy of ``work``'s top-level files, and nothing written comes back."""
    return _argv(argv, str(work), env, readonly, _mode()[1], disk)


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
