"""A seccomp system-call filter for the process that runs an untrusted program (Linux only).

The filter is built with libseccomp (``libseccomp.so.2``) through ``ctypes``. Everything is
allowed except the calls listed below, which fail with ``EPERM`` (``ENOSYS`` for ``clone3``
and ``openat2``, so that the C library falls back to the filterable ``clone`` / ``openat``;
``ENOTTY`` for ``ioctl``):

* networking: ``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``, ``accept4``;
* new programs and processes: ``execve``, ``execveat``, ``fork``, ``vfork``, and ``clone`` unless
  it creates a thread (``CLONE_THREAD`` set);
* signals to any process but itself: ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``,
  ``rt_tgsigqueueinfo`` whose first argument is not the filtered process's pid, and
  ``pidfd_send_signal``; ``fcntl`` commands that route signals or leases to other processes
  (``F_SETOWN``, ``F_SETOWN_EX``, ``F_SETSIG``, ``F_SETLEASE``, ``F_NOTIFY``);
* other processes and the scheduler: ``ptrace``, ``process_vm_readv`` / ``writev``, ``pidfd_*``,
  ``kcmp``, ``setpriority``, ``sched_setaffinity`` / ``setscheduler`` / ``setparam`` /
  ``setattr``, ``ioprio_set``, ``migrate_pages``, ``move_pages``, ``setpgid``, ``setsid``,
  and ``prctl`` altogether (so ``PR_SET_PDEATHSIG`` cannot be cleared);
* ``ioctl`` except ``TCGETS`` (what ``isatty`` asks; CPython treats ``ENOTTY`` from the
  others as "not supported" and falls back to ``fcntl``);
* inter-process communication: System V shared memory, message queues and semaphores, POSIX
  message queues;
* writing to the file system: ``open`` / ``openat`` with any of ``O_WRONLY``, ``O_RDWR``,
  ``O_CREAT``, ``O_TRUNC``, ``O_APPEND``; ``creat``, ``unlink*``, ``rename*``, ``mkdir*``,
  ``rmdir``, ``chmod`` / ``chown`` families, ``link*``, ``symlink*``, ``truncate``,
  ``ftruncate``, ``mknod*``, extended attributes, time stamps, the ``mount`` family,
  ``chroot``, ``pivot_root``;
* raising resource limits (``setrlimit``, ``prlimit64`` with a new limit), and kernel
  interfaces a program never needs: ``bpf``, ``io_uring_*``, ``unshare``, ``setns``,
  ``userfaultfd``, ``perf_event_open``, ``personality``, keyrings, modules, ``kexec``,
  ``reboot``, swap, host and domain names, clocks, ``acct``, ``quotactl``, ``syslog``.

Reading files stays allowed (imports need it; :mod:`primsel.simulator.landlock` narrows what
can be read). The filter is inherited by threads created after it is loaded and cannot be
removed by the filtered process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
from collections.abc import Sequence

# libseccomp's actions and comparison operators (seccomp.h).
_ACT_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


_CLONE_THREAD = 0x00010000
_TCGETS = 0x5401  # the same on x86_64 and aarch64
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
#: fcntl commands denied: F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY.
_FCNTL_DENIED = (8, 10, 15, 1024, 1026)
#: System calls taking a pid first that are allowed only when it is the process's own pid.
_OWN_PID_ONLY = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

#: System calls that always fail with EPERM.
DENIED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "execve", "execveat", "fork", "vfork",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "kcmp",
    "setpriority", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr",
    "ioprio_set", "migrate_pages", "move_pages", "setpgid", "setsid", "prctl", "personality",
    "shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "mkdir", "mkdirat", "rmdir", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate",
    "mknod", "mknodat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "utime", "utimes", "utimensat", "futimesat",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "name_to_handle_at", "open_by_handle_at",
    "setrlimit", "bpf", "io_uring_setup", "io_uring_enter", "io_uring_register", "unshare",
    "setns", "userfaultfd", "perf_event_open", "keyctl", "add_key", "request_key",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "sethostname", "setdomainname", "acct", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "quotactl", "quotactl_fd", "fanotify_init",
    "syslog", "vhangup", "iopl", "ioperm", "uselib",
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


@functools.cache
def _library_name() -> str:
    """The name to load libseccomp by (looked up once, before any sandbox restriction)."""
    try:
        ctypes.CDLL("libseccomp.so.2")  # the usual soname: no need to search
        return "libseccomp.so.2"
    except OSError:
        return ctypes.util.find_library("seccomp") or "libseccomp.so.2"  # may run ldconfig


def _library() -> ctypes.CDLL:
    """libseccomp loaded through ctypes (the handle is not kept: none is left lying around).

    Raises
    ------
    OSError : libseccomp cannot be loaded.
    """
    name = _library_name()
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise OSError(errno.ENOSYS, f"libseccomp not loadable ({exc})") from exc
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
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.restype = None
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    return lib


def status() -> tuple[bool, str]:
    """Whether a filter can be installed here, with a short reason.

    Checks that libseccomp loads and that the kernel reports seccomp support in
    ``/proc/self/status``; it does not install anything.
    """
    try:
        _library()
    except OSError as exc:
        return False, exc.strerror or str(exc)
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            supported = any(line.startswith("Seccomp:") for line in handle)
    except OSError:
        supported = False
    if not supported:
        return False, "the kernel does not report seccomp support"
    return True, "libseccomp filter (EPERM on network, process, signal, IPC and file-write system calls)"


def syscall_number(name: str) -> int:
    """Number of system call ``name`` on this machine's architecture (negative if it has none).

    Raises
    ------
    OSError : libseccomp cannot be loaded.
    """
    return _library().seccomp_syscall_resolve_name(name.encode())


def install(own_pid: int | None = None) -> None:
    """Load the filter into the calling process (irreversible; inherited by its threads).

    Parameters
    ----------
    own_pid : the pid signals may still be sent to (default: the calling process's).

    Raises
    ------
    OSError : libseccomp is missing, or building or loading the filter failed.
    """
    Template().load(os.getpid() if own_pid is None else own_pid)


#: Placeholder pid the template is compiled with (above any pid Linux hands out, 2**22).
_PLACEHOLDERS = (0x3FFF_FFF1, 0x3FFF_FFE3)
#: ``struct sock_filter``: code (u16), jt (u8), jf (u8), k (u32), native byte order.
_INSTRUCTION = struct.Struct("=HBBI")
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Template:
    """The filter compiled once by libseccomp, loaded many times with a different own pid.

    Building the filter takes milliseconds; loading a compiled one takes microseconds. The
    template is compiled twice with two placeholder pids; the two BPF programs must differ
    exactly in the instructions whose constant is the placeholder (checked), which are the ones
    :meth:`load` sets to the real pid.

    Raises
    ------
    OSError : libseccomp is missing or rejected the filter, or the two compilations differ
        elsewhere than in the pid constants.
    """

    def __init__(self) -> None:
        first, second = (_compile(pid) for pid in _PLACEHOLDERS)
        if len(first) != len(second):
            raise OSError(errno.EINVAL, "the seccomp filter does not compile to a stable program")
        self._instructions = list(_INSTRUCTION.iter_unpack(first))
        self._pid_slots = []
        for index, (a, b) in enumerate(zip(self._instructions, _INSTRUCTION.iter_unpack(second))):
            if a == b:
                continue
            if a[:3] != b[:3] or (a[3], b[3]) != _PLACEHOLDERS:
                raise OSError(errno.EINVAL, "the seccomp filter does not compile to a stable program")
            self._pid_slots.append(index)
        if not self._pid_slots:
            raise OSError(errno.EINVAL, "the seccomp filter has no pid comparison to set")

    def program(self, own_pid: int) -> bytes:
        """The BPF program (``struct sock_filter`` array) with ``own_pid`` as the allowed pid."""
        instructions = list(self._instructions)
        for index in self._pid_slots:
            code, jt, jf, _ = instructions[index]
            instructions[index] = (code, jt, jf, own_pid)
        return b"".join(_INSTRUCTION.pack(*i) for i in instructions)

    def load(self, own_pid: int) -> None:
        """Load the filter into the calling process with ``own_pid`` allowed as a signal target.

        Raises
        ------
        OSError : the kernel refused it.
        """
        if not 0 < own_pid < _PLACEHOLDERS[1]:
            raise ValueError(f"not a pid: {own_pid}")
        code = self.program(own_pid)
        buffer = ctypes.create_string_buffer(code, len(code))
        fprog = _SockFprog(len(code) // _INSTRUCTION.size, ctypes.cast(buffer, ctypes.c_void_p))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"loading the seccomp filter failed: {os.strerror(error)}")


def _compile(own_pid: int) -> bytes:
    """The filter of the module docstring, compiled by libseccomp to BPF, for ``own_pid``."""
    lib = _library()
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
        for name in _OWN_PID_ONLY:  # a 64-bit comparison: any other value, however encoded, is denied
            _rule(lib, ctx, deny, name, [(0, _CMP_NE, own_pid, 0)])
        for command in _FCNTL_DENIED:  # the kernel reads the command as 32 bits
            _rule(lib, ctx, deny, "fcntl", [(1, _CMP_MASKED_EQ, 0xFFFFFFFF, command)])
        _rule(lib, ctx, _act_errno(errno.ENOTTY), "ioctl", [(1, _CMP_NE, _TCGETS, 0)])
        _rule(lib, ctx, deny, "prlimit64", [(2, _CMP_NE, 0, 0)])
        read_end, write_end = os.pipe()
        try:
            result = lib.seccomp_export_bpf(ctx, write_end)
            os.close(write_end)
            write_end = -1
            if result < 0:
                raise OSError(-result, f"seccomp_export_bpf failed: {os.strerror(-result)}")
            chunks = []
            while chunk := os.read(read_end, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        return b"".join(chunks)
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
