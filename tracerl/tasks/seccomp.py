"""The sandbox's system-call filter: the kernel interfaces sandboxed code has no use for, refused.

:func:`bpf` builds it once with libseccomp (through ``pyseccomp``, a ctypes binding to Debian's
``libseccomp2``) and returns the compiled BPF program that :mod:`.isolation` hands to
``bwrap --seccomp FD``. Every refused call fails at once with ``EPERM`` (``clone3`` with
``ENOSYS``, so the C library falls back to ``clone``, whose flags the filter can read): a
``ptrace(PTRACE_ATTACH, 1)`` that used to stop the sandbox's init until the timeout now returns
-1. Calls from another architecture's table (``int 0x80``, x32) kill the process (libseccomp's
default for a foreign architecture).

Refused: debugging and reading other processes (``ptrace``, ``process_vm_readv``/``writev``,
``process_madvise``, ``pidfd_getfd``, ``kcmp``), kernel programs and tracing (``bpf``,
``perf_event_open``), ``userfaultfd`` (a classic exploit primitive), the kernel keyring
(``keyctl``, ``add_key``, ``request_key``), mounts of every kind and new namespaces (``mount``,
``umount2``, ``pivot_root``, ``chroot``, the new mount API, ``unshare``, ``setns``, ``clone``
with a namespace flag), kernel modules and ``kexec``, ``io_uring`` (its operations bypass this
filter), ``open_by_handle_at``, ``fanotify_init``, terminal input injection (``TIOCSTI``) and
unix-domain sockets (``socket(AF_UNIX, ...)``; ``socketpair`` still works), so a host
program's socket in a bound folder cannot be connected to.
"""

from __future__ import annotations

import errno
import functools
import logging
import tempfile

__all__ = ["REFUSED", "bpf"]

REFUSED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "unshare", "setns",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at", "fanotify_init",
    "acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "iopl", "ioperm", "lookup_dcookie",
    "uselib", "vhangup",
)
_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_AF_UNIX = 1
_TERMINAL_IOCTLS = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX: typing into the caller's terminal


@functools.cache
def bpf() -> bytes | None:
    """The filter as a BPF program for ``bwrap --seccomp``; None (said once) where libseccomp or
    ``pyseccomp`` is missing, and the sandbox then runs without a filter."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: the binding is there, libseccomp.so.2 is not
        logging.getLogger(__name__).warning(
            "the code sandbox runs without its seccomp filter (%s): ptrace, bpf, keyctl, mount and unix "
            "sockets are not refused; pip install 'tracerl[tasks]' and apt install libseccomp2", exc)
        return None
    refuse = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in REFUSED:
        try:
            f.add_rule(refuse, name)
        except (RuntimeError, ValueError, OSError):  # not a call on this architecture
            continue
    for flag in _NAMESPACES:
        f.add_rule(refuse, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags sit behind a pointer the filter cannot read
    f.add_rule(refuse, "socket", sc.Arg(0, sc.EQ, _AF_UNIX))
    for request in _TERMINAL_IOCTLS:
        f.add_rule(refuse, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    with tempfile.TemporaryFile() as out:  # libseccomp writes to the file descriptor itself
        f.export_bpf(out)
        out.seek(0)
        return out.read()
