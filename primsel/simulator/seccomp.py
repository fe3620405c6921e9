"""A seccomp system-call filter for the process that runs an untrusted program (Linux only).

The filter is built with libseccomp (``libseccomp.so.2``) through ``ctypes``. It is an
**allow-list**: every system call not named below fails with ``EPERM``, including every number
the list (or libseccomp) does not know, so a kernel newer than this list stays closed
(``fchmodat2``, ``setxattrat``, ``file_setattr``, ``listmount`` ...). System calls of another
architecture's table (x32, i386) kill the process (libseccomp's bad-architecture action).

Allowed, because CPython, its threads, the C library and the prompt-facing library need them:

* reading what is already open or may be read: ``read``, ``readv``, ``pread64``, ``preadv``,
  ``preadv2`` only without flags (``RWF_NOWAIT`` would tell which pages of a file are cached,
  as ``mincore`` would), ``lseek``, the ``stat`` family, ``getdents64``, ``readlink*``,
  ``access`` / ``faccessat*``, ``getcwd``; ``open`` / ``openat`` only without ``O_WRONLY``,
  ``O_RDWR``, ``O_CREAT``, ``O_TRUNC``, ``O_APPEND``, ``O_TMPFILE`` and ``O_DIRECT`` (which
  reads past the page cache, straight from the host's disk) (Landlock decides which paths);
* writing to descriptors it holds (``write``, ``writev``: its pipe to the judge and
  ``/dev/null``; nothing it opens can be written), ``close``, ``dup*``, ``select`` / ``poll``
  families, ``fcntl`` only for ``F_DUPFD``, ``F_GETFD``, ``F_SETFD``, ``F_GETFL``,
  ``F_SETFL`` (without ``O_DIRECT``), ``F_DUPFD_CLOEXEC``, ``ioctl`` only for ``TCGETS`` (what
  ``isatty`` asks; the others fail with ``ENOTTY``, which CPython treats as "not supported");
* its own memory: ``mmap``, ``munmap``, ``mprotect``, ``mremap``, ``brk``, ``madvise``;
* threads: ``clone`` only with ``CLONE_THREAD`` set and no namespace flag (``clone3`` fails
  with ``ENOSYS`` so that the C library falls back to ``clone``), ``futex`` only with
  ``FUTEX_PRIVATE_FLAG`` (a shared futex on a page of a file that other program processes map
  too, a library's, would be a channel between them), ``set_robust_list``, ``rseq``,
  ``set_tid_address``, ``sched_yield``, ``exit``, ``exit_group``;
* signals to itself only: ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``,
  ``rt_tgsigqueueinfo`` when the first argument is its own pid; its own handlers and masks
  (``rt_sigaction``, ``rt_sigprocmask``, ``rt_sigreturn``, ``sigaltstack``,
  ``rt_sigpending``, ``rt_sigsuspend``, ``rt_sigtimedwait``, ``pause``), its own timers
  (``alarm``, ``setitimer``, ``getitimer``);
* about itself only: ``getpid``, ``gettid``, ``getppid``, ``getpgrp``, the ``get*id`` and
  ``getgroups`` calls, ``getpgid`` / ``getsid`` / ``sched_getaffinity`` for pid 0 or its own,
  ``prlimit64`` for pid 0 or its own and only to read (no new limit), ``getrlimit``,
  ``getrusage``, ``times``, ``getcpu``;
* time and randomness: ``clock_gettime``, ``clock_getres``, ``gettimeofday``, ``time``,
  ``nanosleep``, ``clock_nanosleep``, ``getrandom``; ``uname``.

So, among others, these fail: sockets, ``exec``, processes, other processes' signals,
priorities, ids, limits and memory; ``prctl``, ``unshare``, ``setns``, ``mount``; every
change to the file system (modes, owners, extended attributes, file attributes, links, time
stamps), reading extended attributes, ``inotify`` / ``fanotify``, ``posix_fadvise``,
``readahead``, ``mincore``, file locks, ``statfs``, ``listmount`` / ``statmount``, IPC,
``bpf``, ``io_uring``, ``userfaultfd``, ``perf_event_open``, keyrings, ``capget`` /
``capset``, and ``ptrace``. The filter is inherited by threads created after it is loaded and
cannot be removed by the filtered process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
from collections.abc import Sequence

# libseccomp's actions, comparison operators and filter attributes (seccomp.h).
_ACT_ALLOW = 0x7FFF0000
_CMP_NE = 1
_CMP_EQ = 4
_CMP_MASKED_EQ = 7
_FLTATR_CTL_OPTIMIZE = 8


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


_CLONE_THREAD = 0x00010000
#: CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
#: CLONE_NEWNET, CLONE_NEWTIME: never allowed with clone.
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
_TCGETS = 0x5401  # the same on x86_64 and aarch64
#: O_DIRECT: reads that bypass the page cache (reading the host's disk at will).
_O_DIRECT = getattr(os, "O_DIRECT", 0o40000)
#: Open flags refused: those that write or create (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND,
#: __O_TMPFILE) and O_DIRECT.
_WRITE_FLAGS = (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
                | (getattr(os, "O_TMPFILE", 0) & ~os.O_DIRECTORY) | _O_DIRECT)
#: fcntl commands allowed: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC (and F_SETFL,
#: without O_DIRECT).
FCNTL_ALLOWED = (0, 1, 2, 3, 1030)
_F_SETFL = 4
#: FUTEX_PRIVATE_FLAG (linux/futex.h): the futex is keyed by this process's address space.
_FUTEX_PRIVATE_FLAG = 128
#: System calls whose first argument must be the process's own pid.
_OWN_PID_ONLY = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
#: System calls whose first argument must be 0 (the caller) or the process's own pid.
_SELF_ONLY = ("getpgid", "getsid", "sched_getaffinity")

#: System calls allowed whatever their arguments (names this architecture lacks are skipped).
ALLOWED = (
    "read", "readv", "pread64", "preadv", "lseek", "fstat", "newfstatat", "stat",
    "lstat", "statx", "getdents64", "getdents", "readlink", "readlinkat", "access", "faccessat",
    "faccessat2", "getcwd", "write", "writev", "close", "dup", "dup2", "dup3",
    "select", "pselect6", "poll", "ppoll",
    "mmap", "munmap", "mprotect", "mremap", "brk", "madvise",
    "set_robust_list", "rseq", "set_tid_address", "sched_yield", "exit", "exit_group",
    "restart_syscall",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending",
    "rt_sigsuspend", "rt_sigtimedwait", "pause", "alarm", "setitimer", "getitimer",
    "getpid", "gettid", "getppid", "getpgrp", "getuid", "geteuid", "getgid", "getegid",
    "getresuid", "getresgid", "getgroups", "getrlimit", "getrusage", "times", "getcpu",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep",
    "getrandom", "uname",
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
    lib.seccomp_attr_set.restype = ctypes.c_int
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
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
    return True, "libseccomp allow-list (every other system call, known or not, fails with EPERM)"


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
    ctx = lib.seccomp_init(_act_errno(errno.EPERM))
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        lib.seccomp_attr_set(ctx, _FLTATR_CTL_OPTIMIZE, 2)  # a binary tree (libseccomp >= 2.5)
        _add_rules(lib, ctx, own_pid)
        return _export(lib, ctx)
    finally:
        lib.seccomp_release(ctx)


def _add_rules(lib: ctypes.CDLL, ctx: int, own_pid: int) -> None:
    """Add the rules of the module docstring to the filter ``ctx``, with ``own_pid`` as the pid
    a process may name."""
    allow = _ACT_ALLOW
    for name in ALLOWED:
        _rule(lib, ctx, allow, name, ())
    for name in UNSUPPORTED:
        _rule(lib, ctx, _act_errno(errno.ENOSYS), name, ())
    _rule(lib, ctx, allow, "open", [(1, _CMP_MASKED_EQ, _WRITE_FLAGS, 0)])
    _rule(lib, ctx, allow, "openat", [(2, _CMP_MASKED_EQ, _WRITE_FLAGS, 0)])
    # clone creates a thread (CLONE_THREAD) in no new namespace; never a process.
    _rule(lib, ctx, allow, "clone", [(0, _CMP_MASKED_EQ, _CLONE_THREAD | _CLONE_NAMESPACES, _CLONE_THREAD)])
    for name in _OWN_PID_ONLY:  # a 64-bit comparison: any other value, however encoded, is denied
        _rule(lib, ctx, allow, name, [(0, _CMP_EQ, own_pid, 0)])
    for name in _SELF_ONLY:
        for pid in (0, own_pid):
            _rule(lib, ctx, allow, name, [(0, _CMP_EQ, pid, 0)])
    for pid in (0, own_pid):  # read a limit of its own, never set one
        _rule(lib, ctx, allow, "prlimit64", [(0, _CMP_EQ, pid, 0), (2, _CMP_EQ, 0, 0)])
    for command in FCNTL_ALLOWED:  # the kernel reads the command as 32 bits
        _rule(lib, ctx, allow, "fcntl", [(1, _CMP_MASKED_EQ, 0xFFFFFFFF, command)])
    _rule(lib, ctx, allow, "fcntl", [(1, _CMP_MASKED_EQ, 0xFFFFFFFF, _F_SETFL), (2, _CMP_MASKED_EQ, _O_DIRECT, 0)])
    _rule(lib, ctx, allow, "preadv2", [(5, _CMP_EQ, 0, 0)])  # no RWF_NOWAIT, no flag at all
    # private futexes only (the kernel reads the operation as 32 bits)
    _rule(lib, ctx, allow, "futex", [(1, _CMP_MASKED_EQ, _FUTEX_PRIVATE_FLAG, _FUTEX_PRIVATE_FLAG)])
    _rule(lib, ctx, allow, "ioctl", [(1, _CMP_EQ, _TCGETS, 0)])  # exact: the two rules never overlap
    _rule(lib, ctx, _act_errno(errno.ENOTTY), "ioctl", [(1, _CMP_NE, _TCGETS, 0)])


def _export(lib: ctypes.CDLL, ctx: int) -> bytes:
    """The BPF program of the filter ``ctx``, read from the pipe libseccomp writes it to.

    Raises
    ------
    OSError : libseccomp could not export the filter.
    """
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
