"""A seccomp system-call filter for the process that runs an untrusted program (Linux only).

The filter is built with libseccomp (``libseccomp.so.2``) through ``ctypes``. Everything is
allowed except the calls listed below, which fail with ``EPERM`` (``ENOSYS`` for ``clone3``
and ``openat2``, so that the C library falls back to the filterable ``clone`` / ``openat``):

* networking: ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``, ``accept4``;
* new programs and processes: ``execve``, ``execveat``, ``fork``, ``vfork``, and ``clone`` unless
  it creates a thread (``CLONE_THREAD`` set);
* signals and access to other processes: ``kill``, ``tkill``, ``tgkill`` aimed at another
  process, ``ptrace``, ``process_vm_readv`` / ``writev``, ``pidfd_*``;
* writing to the file system: ``open`` / ``openat`` with any of ``O_WRONLY``, ``O_RDWR``,
  ``O_CREAT``, ``O_TRUNC``, ``O_APPEND``; ``creat``, ``unlink*``, ``rename*``, ``mkdir*``,
  ``rmdir``, ``chmod`` / ``chown`` families, ``link*``, ``symlink*``, ``truncate``,
  ``ftruncate``, ``mknod*``, extended attributes, time stamps, the ``mount`` family;
* raising resource limits (``setrlimit``, ``prlimit64`` with a new limit), and a few kernel
  interfaces a program never needs (``bpf``, ``io_uring_setup``, ``unshare``, ``setns``,
  ``userfaultfd``, ``perf_event_open``, keyrings, modules, ``reboot``, clock setting,
  ``ioctl(TIOCSTI)``).

Reading files stays allowed (imports need it). The filter is inherited by threads created after
it is loaded and cannot be removed by the filtered process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Sequence

# libseccomp's actions and comparison operators (seccomp.h).
_ACT_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


_CLONE_THREAD = 0x00010000
_TIOCSTI = 0x5412
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)

#: System calls that always fail with EPERM.
DENIED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "execve", "execveat", "fork", "vfork",
    "kill", "tkill", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "mkdir", "mkdirat", "rmdir", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate",
    "mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "utime", "utimes", "utimensat", "futimesat",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fspick", "mount_setattr", "name_to_handle_at", "open_by_handle_at",
    "setrlimit", "bpf", "io_uring_setup", "unshare", "setns", "userfaultfd", "perf_event_open",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "sethostname",
    "setdomainname", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "quotactl", "fanotify_init",
)  # fmt: skip
#: System calls that fail with ENOSYS (their arguments cannot be filtered; libc falls back).
UNSUPPORTED = ("clone3", "openat2")


class _ArgCmp(ctypes.Structure):
    """``struct scmp_arg_cmp``: compare system-call argument ``arg`` with ``datum_a``/``datum_b``."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


_lib: ctypes.CDLL | None = None
_load_error: str | None = None


def _library() -> ctypes.CDLL | None:
    """libseccomp loaded through ctypes, or None (the reason is kept for :func:`status`)."""
    global _lib, _load_error
    if _lib is not None or _load_error is not None:
        return _lib
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        _load_error = f"libseccomp not loadable ({exc})"
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.restype = None
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    _lib = lib
    return lib


def status() -> tuple[bool, str]:
    """Whether a filter can be installed here, with a short reason.

    Checks that libseccomp loads and that the kernel reports seccomp support in
    ``/proc/self/status``; it does not install anything.
    """
    if _library() is None:
        return False, _load_error or "libseccomp not loadable"
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            supported = any(line.startswith("Seccomp:") for line in handle)
    except OSError:
        supported = False
    if not supported:
        return False, "the kernel does not report seccomp support"
    return True, "libseccomp filter (EPERM on network, process, signal and file-write system calls)"


def install() -> None:
    """Load the filter into the calling process (irreversible; inherited by its threads).

    Raises
    ------
    OSError : libseccomp is missing, or building or loading the filter failed.
    """
    lib = _library()
    if lib is None:
        raise OSError(errno.ENOSYS, _load_error or "libseccomp not loadable")
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        deny = _act_errno(errno.EPERM)
        for name in DENIED:
            _rule(lib, ctx, deny, name, ())
        for name in UNSUPPORTED:
            _rule(lib, ctx, _act_errno(errno.ENOSYS), name, ())
        # clone without CLONE_THREAD creates a process; threads stay possible.
        _rule(lib, ctx, deny, "clone", [(0, _CMP_MASKED_EQ, _CLONE_THREAD, 0)])
        for flag in _WRITE_FLAGS:
            _rule(lib, ctx, deny, "open", [(1, _CMP_MASKED_EQ, flag, flag)])
            _rule(lib, ctx, deny, "openat", [(2, _CMP_MASKED_EQ, flag, flag)])
        _rule(lib, ctx, deny, "tgkill", [(0, _CMP_NE, os.getpid(), 0)])
        _rule(lib, ctx, deny, "prlimit64", [(2, _CMP_NE, 0, 0)])
        _rule(lib, ctx, deny, "ioctl", [(1, _CMP_MASKED_EQ, 0xFFFFFFFF, _TIOCSTI)])
        result = lib.seccomp_load(ctx)
        if result < 0:
            raise OSError(-result, f"seccomp_load failed: {os.strerror(-result)}")
    finally:
        lib.seccomp_release(ctx)


def _rule(
    lib: ctypes.CDLL, ctx: int, action: int, name: str, args: Sequence[tuple[int, int, int, int]]
) -> None:
    """Add one rule; system calls this architecture does not have are skipped."""
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return
    array = (_ArgCmp * max(len(args), 1))(*[_ArgCmp(*a) for a in args])
    result = lib.seccomp_rule_add_array(ctx, action, number, len(args), array)
    if result < 0:
        raise OSError(-result, f"seccomp rule for {name} rejected: {os.strerror(-result)}")
