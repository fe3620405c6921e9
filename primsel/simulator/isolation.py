"""Confinement applied to a sandbox process before it runs anything of a task.

Both processes of an execution, the *judge* (setup and evaluation programs) and the *program
process* (the program under test), call :func:`confine` right after they are forked and before
any task code runs. It gives the process its own session and process group, makes it die with
its parent, moves it into a throwaway working directory, closes every descriptor but the ones it
needs, points fds 0/1/2 at ``/dev/null`` and captures ``sys.stdout`` / ``sys.stderr`` in a capped
buffer, sets resource limits (address space, CPU seconds, file size 0, few descriptors, no core
files), restricts itself with Landlock (:mod:`primsel.simulator.landlock`), loads the seccomp
filter (:mod:`primsel.simulator.seccomp`) and adds an audit hook refusing the same operations at
the Python level (a second layer only).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import math
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from primsel.simulator.seccomp import Template

#: Descriptor limit inside a confined process (imports open files read-only, one at a time).
NOFILE = 64
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


class CappedOutput(io.TextIOBase):
    """A text stream keeping at most ``cap`` characters; past that it only counts (flat memory).

    ``buffer`` is a binary view sharing the same cap (bytes count as characters); ``truncated``
    tells whether anything was dropped, and ``on_truncate`` (if set) is called once when that
    first happens.
    """

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.on_truncate: Callable[[], None] | None = None
        self.cap = cap
        self.parts: list[str | bytes] = []
        self.kept = 0
        self.truncated = False
        self.buffer = _CappedBinary(self)

    @property
    def encoding(self) -> str:
        return "utf-8"

    @property
    def errors(self) -> str:
        return "strict"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        return self.keep(text)

    def keep(self, data: str | bytes) -> int:
        """Store what fits under the cap; returns ``len(data)`` (the caller sees a full write)."""
        room = self.cap - self.kept
        if room > 0:
            piece = data[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        if len(data) > room and not self.truncated:
            self.truncated = True
            if self.on_truncate is not None:
                self.on_truncate()
        return len(data)


class _CappedBinary(io.RawIOBase):
    """``sys.stdout.buffer`` of a confined process: bytes go to the same capped store."""

    def __init__(self, text: CappedOutput) -> None:
        super().__init__()
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self.text.keep(bytes(memoryview(data)))


def audit_hook() -> Callable[[str, tuple[Any, ...]], None]:
    """An audit hook refusing process, network, file-write, native-code and introspection events.

    A second layer behind Landlock and seccomp (a program can get around it with ``ctypes``,
    which is loaded). Its tables and every name it uses are held in this closure, not in module
    globals or builtins, so a program cannot switch it off by rebinding them.
    """
    blocked = frozenset(
        {
            "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
            "os.forkpty", "pty.spawn", "os.kill", "os.killpg",
            "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
            "socket.gethostbyname", "socket.sendto", "sqlite3.connect",
            "os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.chflags",
            "os.link", "os.symlink", "os.truncate", "os.utime", "os.setxattr", "os.removexattr",
            "shutil.rmtree", "shutil.move", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
            "shutil.chown", "fcntl.ioctl", "fcntl.fcntl", "fcntl.flock", "fcntl.lockf",
            "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.string_at",
            "ctypes.wstring_at", "ctypes.call_function", "resource.setrlimit", "resource.prlimit",
            "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
        }
    )  # fmt: skip
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    write_modes = frozenset("wax+")
    denied, str_, int_, type_ = PermissionError, str, int, type

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writes = type_(flags) is int_ and flags & write_flags
            if type_(mode) is str_ and not write_modes.isdisjoint(mode):
                writes = True
            if writes:
                what = repr(path) if type_(path) is str_ else "a file"
                raise denied(f"the sandbox does not allow opening {what} for writing")
        elif event in blocked:
            raise denied(f"the sandbox does not allow {event}")

    return hook


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def prctl(option: int, value: int) -> None:
    """``prctl(option, value)`` through libc.

    Raises
    ------
    OSError : the call failed.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(*(ctypes.c_ulong(v) for v in (option, value, 0, 0, 0))) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def die_with_parent(parent_pid: int) -> None:
    """Ask to be SIGKILLed when the parent dies; exit at once if it already has."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(70)


def confine(
    keep: Iterable[int],
    workdir: str,
    memory_mb: int,
    cpu_seconds: float,
    stdout_cap: int,
    landlock_ruleset: int | None,
    seccomp: Template | None,
) -> CappedOutput:
    """Confine the calling (freshly forked) process; see the module docstring.

    Parameters
    ----------
    keep : descriptors to keep open (besides 0, 1, 2, which point at ``/dev/null``).
    workdir : throwaway working directory (also ``TMPDIR``); the Landlock ruleset should let it be read.
    memory_mb : address space the process may add to what it has now, in MiB (RLIMIT_AS).
    cpu_seconds : CPU-time backstop in seconds (RLIMIT_CPU, rounded up, plus one).
    stdout_cap : characters of stdout/stderr kept (:class:`CappedOutput`).
    landlock_ruleset : a Landlock ruleset descriptor to enforce and close
        (:func:`primsel.simulator.landlock.ruleset`), or None (no Landlock restriction).
    seccomp : the compiled seccomp filter to load (:func:`seccomp_template`), or None.

    Returns
    -------
    The :class:`CappedOutput` now installed as ``sys.stdout`` and ``sys.stderr``.

    Raises
    ------
    OSError : a layer that was asked for and is available failed to apply; the caller must not
        run the task unconfined.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a parent's handler is not ours
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.setsid()  # own session and process group: the parent kills the group; no terminal
    with contextlib.suppress(OSError):
        prctl(_PR_SET_DUMPABLE, 0)  # no /proc/<pid>/mem or ptrace by other processes of the user
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    kept = sorted({0, 1, 2, *keep, *([landlock_ruleset] if landlock_ruleset is not None else [])})
    for low, high in zip(kept, kept[1:] + [65536]):
        os.closerange(low + 1, high)
    output = CappedOutput(int(stdout_cap))
    sys.stdout = output
    sys.stderr = output
    sys.stdin = io.StringIO("")
    with open("/proc/self/statm", encoding="ascii") as handle:
        address_space = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _limit(resource.RLIMIT_AS, address_space + int(memory_mb) * (1 << 20))
    cpu = math.ceil(float(cpu_seconds)) + 1
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NOFILE, NOFILE)
    _limit(resource.RLIMIT_CORE, 0)
    if landlock_ruleset is not None:
        from primsel.simulator import landlock

        landlock.enforce(landlock_ruleset)
        os.close(landlock_ruleset)
    if seccomp is not None:
        seccomp.load(os.getpid())
    sys.addaudithook(audit_hook())
    return output


def seccomp_template() -> Template | None:
    """The seccomp filter compiled once for many processes; None where libseccomp is missing.

    Raises
    ------
    OSError : libseccomp is there but the filter could not be built.
    """
    from primsel.simulator import seccomp

    try:
        return seccomp.Template()
    except OSError as exc:
        if exc.errno == errno.ENOSYS:  # libseccomp missing (sandbox_info says so)
            return None
        raise
