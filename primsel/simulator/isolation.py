"""Confinement applied to a program process before it runs anything of a task.

The *program process* (the program under test) calls :func:`confine` right after it is forked
and before the program text reaches it. It gives the process its own session and process group,
moves it into a throwaway working directory, closes every descriptor but the ones it needs,
points fds 0/1/2 at ``/dev/null`` and captures ``sys.stdout`` / ``sys.stderr`` in a capped
buffer, sets resource limits (address space, CPU seconds, file size 0, few descriptors, no core
files, :data:`NPROC` processes and threads, :data:`SIGPENDING` queued signals), drops every privilege (:func:`drop_privileges`: no
capability in any set, an unprivileged user when it runs as root, no supplementary groups,
``no_new_privs``), makes it die
with its parent and non-dumpable, restricts itself with Landlock
(:mod:`primsel.simulator.landlock`), loads the seccomp allow-list
(:mod:`primsel.simulator.seccomp`) and adds an audit hook refusing the same operations at the
Python level (a convenience only: the layers beneath hold without it). :func:`share_paths` lets
the unprivileged user reach a Python installation beneath a directory closed to others, and
:func:`hide_processes` covers ``/proc`` with a proc instance that shows it no other process,
both in a private mount namespace of the spawner.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import math
import os
import re
import resource
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from primsel import processes
from primsel.processes import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    die_with_parent,
    prctl,
)

if TYPE_CHECKING:
    from primsel.simulator.seccomp import Template

#: Descriptor limit inside a confined process (imports open files read-only, one at a time).
NOFILE = 64
#: Processes and threads a program process may have (RLIMIT_NPROC). As root it is set before the
#: change to the unprivileged user, so it bounds that user's processes and threads on the host,
#: all program processes of all workers together; an ordinary user's process in a user
#: namespace of its own gets it there (only that namespace's processes count); elsewhere it is
#: added to what the user runs when the process starts (:func:`drop_privileges`).
NPROC = 256
#: Signals a program process may have queued and not yet handled (RLIMIT_SIGPENDING). The
#: kernel counts them per user, and in a user namespace of its own (:func:`drop_privileges`)
#: this limit applies to the process's own count while the user's count on the host, which every
#: program process shares, is bounded by the limit the namespace was made with (the host's):
#: so no program takes more than this much of it, and as long as the program processes running
#: at once hold less than the host's limit together (about 1,500 of them for a limit of 96,000),
#: none is refused a signal because of another. Without such a namespace it is added to what
#: the user has queued when the process starts.
SIGPENDING = 64
#: User and group a program process runs as when the sandbox runs as root (nobody, nogroup).
UNPRIVILEGED_USER = (65534, 65534)
#: ``_LINUX_CAPABILITY_VERSION_3`` (``linux/capability.h``): two 32-bit words per set.
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capabilities(libc: ctypes.CDLL, clear: bool) -> tuple[int, int, int]:
    """The calling thread's (effective, permitted, inheritable) sets, after emptying them if ``clear``."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if clear and libc.capset(ctypes.byref(header), data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset failed: {os.strerror(error)}")
    if libc.capget(ctypes.byref(header), data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capget failed: {os.strerror(error)}")
    return tuple(data[0].__getattribute__(n) | data[1].__getattribute__(n) << 32
                 for n in ("effective", "permitted", "inheritable"))  # fmt: skip


def _drop_bounding_set(libc: ctypes.CDLL) -> bool:
    """Remove every capability from the bounding set; False if not permitted (no CAP_SETPCAP)."""
    call, zero = libc.prctl, ctypes.c_ulong(0)
    for cap in range(64):  # EINVAL past the kernel's last capability
        if call(PR_CAPBSET_DROP, ctypes.c_ulong(cap), zero, zero, zero) == 0:
            continue
        error = ctypes.get_errno()
        if error == errno.EINVAL:
            return True
        if error == errno.EPERM:
            return False
        raise OSError(error, f"prctl(PR_CAPBSET_DROP, {cap}) failed: {os.strerror(error)}")
    return True


def _own_user_namespace(libc: ctypes.CDLL, proc: int | None = None) -> bool:
    """Enter a new user namespace in which the caller's uid and gid map to themselves only.

    Returns False (nothing changed) where user namespaces are not allowed. The maps only keep
    the ids the process sees; its ids on the host, which file permissions use, never change.
    ``proc`` is a descriptor of a proc file system (:func:`private_proc`), None for ``/proc``.
    """
    uid, gid = os.getuid(), os.getgid()
    # A change of ids (as root, just before) made the process not dumpable, which gives its
    # proc files to root: dumpable again, so that it may write its own maps (confine() makes
    # it not dumpable again before the program runs).
    prctl(PR_SET_DUMPABLE, 1)
    # The highest limit of pending signals allowed while the namespace is made: it becomes the
    # bound of the user's count on the host, which every program process shares (the
    # process's own limit, :data:`SIGPENDING`, is set once the namespace is made).
    hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (hard, hard))
    if libc.unshare(_CLONE_NEWUSER) != 0:
        return False
    for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"), ("gid_map", f"{gid} {gid} 1")):
        fd = _open_proc(f"self/{name}", os.O_WRONLY, proc)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    if (os.getuid(), os.getgid()) != (uid, gid):
        raise OSError(errno.EPERM, "the ids could not be mapped in the new user namespace")
    return True


def _open_proc(name: str, flags: int, proc: int | None) -> int:
    """Open ``/proc/<name>``, through the proc descriptor ``proc`` when there is one."""
    if proc is None:
        return os.open(f"/proc/{name}", flags)
    return os.open(name, flags, dir_fd=proc)


def drop_privileges(user: tuple[int, int] | None = UNPRIVILEGED_USER, proc: int | None = None) -> dict[str, Any]:
    """Leave the calling (single-threaded, freshly forked) process without any privilege.

    In this order: every capability is removed from the bounding set (``PR_CAPBSET_DROP``; a
    process of an ordinary user, without ``CAP_SETPCAP``, first enters a user namespace of its
    own that maps only its own ids, where it may; where user namespaces are not allowed its
    bounding set stays, with nothing in its other sets), the ambient set is cleared; a process
    running as root then drops its supplementary groups (``setgroups([])``), takes ``user``'s
    gid and uid as real, effective and saved ids (``setresgid``, ``setresuid``) and, as that
    user, enters a user namespace of its own mapping only those ids (so RLIMIT_NPROC counts
    its own threads there, not every program process of the user: no slots shared between
    tasks), whose fresh bounding set it empties again; the effective, permitted and inheritable
    sets are emptied (``capset``) and ``no_new_privs`` is set, so no ``execve`` (denied anyway)
    could give anything back. Then it checks the result.

    Parameters
    ----------
    user : ``(uid, gid)`` to become when running as root, both in ``[1, 2**32 - 2]``; None
        keeps the ids (capabilities are still dropped). Ignored for an ordinary user, who
        cannot change ids (the process stays that user, without capabilities).
    proc : a descriptor of a proc file system to write the namespace's id maps through
        (:func:`private_proc`, where ``/proc`` is covered); None: ``/proc``.

    Every path also sets RLIMIT_NPROC (:data:`NPROC`): in a user namespace of its own (root or
    not) to :data:`NPROC` there, where only its own threads count; as root without one (user
    namespaces not allowed) to :data:`NPROC` for the unprivileged user on the whole host; for
    an ordinary user without one, to the user's processes and threads now plus :data:`NPROC`
    (capped by the hard limit). And RLIMIT_SIGPENDING (:data:`SIGPENDING`): in a user namespace
    of its own to :data:`SIGPENDING`, the namespace made with the highest limit allowed (the
    bound of what all program processes queue together); without one, to what the user has
    queued now plus :data:`SIGPENDING`.

    Returns
    -------
    dict: ``uid``, ``gid`` (real ids now), ``bounding_cleared`` (bool), ``nproc`` and
    ``sigpending`` (the limits set), ``own_user_namespace`` (bool).

    Raises
    ------
    ValueError : ``user`` holds 0 or an id out of range.
    OSError : a step failed, or a capability or root id is left; the caller must not run
        untrusted code.
    """
    if user is not None:
        _check_user(user)
    libc = processes.libc()
    bounding_cleared = _drop_bounding_set(libc)
    if not bounding_cleared and _capabilities(libc, clear=False)[0]:
        raise OSError(errno.EPERM, "the process has capabilities but cannot drop its bounding set")
    own_namespace = False
    if not bounding_cleared and os.geteuid() != 0 and _own_user_namespace(libc, proc):
        # An ordinary user: in a user namespace of its own the process holds CAP_SETPCAP (and
        # a full bounding set) there, and can empty its bounding set.
        own_namespace = True
        bounding_cleared = _drop_bounding_set(libc)
        if not bounding_cleared:
            raise OSError(errno.EPERM, "the bounding set could not be emptied in a new user namespace")
    with contextlib.suppress(OSError):  # EINVAL before Linux 4.3, which has no ambient set
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if os.geteuid() == 0 or os.getuid() == 0:
        if user is None:
            raise OSError(errno.EPERM, "a process running as root needs an unprivileged user to become")
        own_namespace = _become_user(libc, user, proc)
        # in its own namespace only its own threads count; without one (user namespaces not
        # allowed) the limit counts the unprivileged user's processes and threads on the host
        nproc = NPROC
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    else:
        nproc = _limit_user_processes(own_namespace)
    sigpending = _limit_pending_signals(own_namespace, proc)
    left = _capabilities(libc, clear=True)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if any(left) or 0 in os.getresuid() or 0 in os.getresgid() or os.getgroups():
        raise OSError(errno.EPERM, "privileges are left after dropping them")
    return {"uid": os.getuid(), "gid": os.getgid(), "bounding_cleared": bounding_cleared, "nproc": nproc,
            "sigpending": sigpending, "own_user_namespace": own_namespace}


def _check_user(user: tuple[int, int]) -> None:
    """Raise ValueError unless ``user`` is ``(uid, gid)`` with both in ``[1, 2**32 - 2]``."""
    if len(user) != 2 or not all(type(v) is int and 0 < v < 2**32 - 1 for v in user):
        raise ValueError(f"user must be (uid, gid), both in [1, 2**32 - 2], got {user!r}")


def _become_user(libc: Any, user: tuple[int, int], proc: int | None) -> bool:
    """A process running as root becomes ``user``: no supplementary groups, ``user``'s gid and uid
    as real, effective and saved ids, then a user namespace of its own mapping only those ids
    (its fresh bounding set emptied). Returns whether that namespace was entered.

    Raises
    ------
    OSError : a step failed.
    """
    uid, gid = user
    # The highest limit allowed while the namespace is made: a user namespace takes its
    # creator's limit as the bound of the user's count on the host, a count every program
    # process of the user shares (one program's threads must not make another's fail); the
    # namespace's own limit, on this process's threads alone, is set by the caller.
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    own_namespace = _own_user_namespace(libc, proc)
    if own_namespace and not _drop_bounding_set(libc):
        raise OSError(errno.EPERM, "the bounding set could not be emptied in a new user namespace")
    return own_namespace


def _limit_user_processes(own_namespace: bool) -> int:
    """Set RLIMIT_NPROC for an ordinary user and return it: in its own user namespace only that
    namespace's processes count, so :data:`NPROC`; elsewhere every process of the user does, so
    the bound comes on top of those (capped by the hard limit)."""
    nproc = NPROC if own_namespace else _user_tasks(os.getuid()) + NPROC
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard != resource.RLIM_INFINITY:
        nproc = min(nproc, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return nproc


def _limit_pending_signals(own_namespace: bool, proc: int | None) -> int:
    """Set RLIMIT_SIGPENDING (:data:`SIGPENDING`) and return it: in a user namespace of its own
    the limit applies to this process's own count; elsewhere to the user's count, so it comes on
    top of what the user has queued now (capped by the hard limit)."""
    limit = SIGPENDING if own_namespace else _queued_signals(proc) + SIGPENDING
    hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (limit, limit))
    return limit


def _queued_signals(proc: int | None) -> int:
    """Signals queued now for the calling process's real user (the first number of ``SigQ`` in
    its ``status``: what RLIMIT_SIGPENDING counts); 0 when that cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fd = _open_proc("self/status", os.O_RDONLY, proc)
        try:
            text = os.read(fd, 1 << 16).decode("ascii", "replace")
        finally:
            os.close(fd)
        for line in text.splitlines():
            if line.startswith("SigQ:"):
                return int(line.split()[1].split("/")[0])
    return 0


def _user_tasks(uid: int) -> int:
    """Processes and threads of real user ``uid`` now (as ``/proc`` shows them; what RLIMIT_NPROC counts)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
            with open(f"/proc/{name}/status", "rb") as handle:
                fields = dict(line.split(b":", 1) for line in handle if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                count += int(fields[b"Threads"])
    return count


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
    which is loaded); the sandbox's guarantees hold without it. Its tables and every name it
    uses are a default argument, deleted from its frame before it raises: a program that
    catches the ``PermissionError`` finds in the traceback only the event, its arguments and
    the message, not the tables (the function object itself is held by the interpreter only).
    """
    blocked = frozenset(
        {
            "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
            "os.forkpty", "pty.spawn", "os.kill", "os.killpg",
            "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
            "socket.gethostbyname", "socket.sendto", "sqlite3.connect",
            "os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.chflags",
            "os.link", "os.symlink", "os.truncate", "os.utime", "os.setxattr", "os.removexattr",
            "os.getxattr", "os.listxattr", "os.posix_fadvise",
            "shutil.rmtree", "shutil.move", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
            "shutil.chown", "fcntl.ioctl", "fcntl.fcntl", "fcntl.flock", "fcntl.lockf",
            "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.string_at",
            "ctypes.wstring_at", "ctypes.call_function", "resource.setrlimit", "resource.prlimit",
            "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
        }
    )  # fmt: skip
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    tables = (blocked, write_flags, frozenset("wax+"), PermissionError, str, int, type)

    def hook(event: str, args: tuple[Any, ...], _tables: tuple[Any, ...] = tables) -> None:
        blocked, write_flags, write_modes, denied, str_, int_, type_ = _tables
        refusal = None
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writes = type_(flags) is int_ and flags & write_flags
            if type_(mode) is str_ and not write_modes.isdisjoint(mode):
                writes = True
            if writes:
                refusal = "the sandbox does not allow opening " + (repr(path) if type_(path) is str_ else "a file") + " for writing"
        elif event in blocked:
            refusal = "the sandbox does not allow " + event
        if refusal is None:
            return
        error = denied(refusal)
        del _tables, blocked, write_flags, write_modes, denied, str_, int_, type_
        raise error

    return hook


_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_NOATIME = 0x1, 0x2, 0x4, 0x8, 0x20, 0x400
_MS_BIND, _MS_MOVE, _MS_REC, _MS_PRIVATE = 0x1000, 0x2000, 0x4000, 0x40000
_MNT_DETACH = 2


def _searchable(path: str, user: tuple[int, int]) -> bool:
    """Whether ``user`` (no supplementary groups) may look up names in directory ``path``."""
    info = os.stat(path)
    uid, gid = user
    if info.st_uid == uid:
        return bool(info.st_mode & 0o100)
    if info.st_gid == gid:
        return bool(info.st_mode & 0o010)
    return bool(info.st_mode & 0o001)


def blocking_directories(paths: Iterable[str], user: tuple[int, int]) -> dict[str, set[str]]:
    """Directories on the way to ``paths`` that ``user`` cannot search, with the names needed in each.

    Parameters
    ----------
    paths : absolute, resolved paths (e.g. a Python installation in the home directory of root).
    user : ``(uid, gid)``.

    Returns
    -------
    ``{directory: {name of the next component, ...}}`` for every strict ancestor of a path
    that ``user`` may not search (mode bits only), e.g. ``{"/root": {".pyenv"}}``.
    """
    blocking: dict[str, set[str]] = {}
    for path in paths:
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            with contextlib.suppress(OSError):
                if not _searchable(ancestor, user):
                    blocking.setdefault(ancestor, set()).add(parts[depth])
    return blocking


def _mount(libc: ctypes.CDLL, source: str | None, target: str, kind: str | None, flags: int, data: str | None) -> None:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    if libc.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount of {target} failed: {os.strerror(error)}")


def share_paths(paths: Iterable[str], user: tuple[int, int], stage: str | None = None) -> list[str]:
    """Let ``user`` reach ``paths`` through directories it may not search, in a new mount namespace.

    For a process running as root whose runtime lies beneath a directory closed to others
    (e.g. Python installed under ``/root``, mode 0700): the calling process moves to a private
    mount namespace (inherited by its children, invisible to every other process) in which
    each such directory is covered by an empty, root-owned ``tmpfs`` of mode 0755 holding
    bind mounts of only the entries on the way to ``paths``. Everything else in it is hidden.
    Nothing changes on the host. Does nothing (and returns ``[]``) when nothing is in the way.

    Parameters
    ----------
    paths : absolute, resolved paths ``user`` must reach.
    user : ``(uid, gid)`` the children will run as.
    stage : directory for the short-lived mount points used on the way, e.g. the worker's
        scratch directory, so nothing outlives the worker (when it lies beneath a directory to
        cover: the system's temporary directory).

    Returns
    -------
    The directories covered, outermost first.

    Raises
    ------
    OSError : the namespace or a mount could not be made (e.g. no ``CAP_SYS_ADMIN``).
    """
    blocking = blocking_directories(paths, user)
    if not blocking:
        return []
    libc = private_mount_namespace()
    covered = sorted(blocking, key=lambda d: (d.count("/"), d))
    # the staging place must stay reachable once the directories are covered
    candidates = [c for c in (stage, tempfile.gettempdir(), "/tmp") if c and os.path.isdir(c)]
    stage_dir = next((c for c in candidates if not any(_beneath(c, d) for d in covered)), None)
    if stage_dir is None:
        raise OSError(errno.ENOENT, "no directory to stage mounts in outside the ones to cover")
    for directory in covered:
        stage = tempfile.mkdtemp(prefix="primsel-stage-", dir=stage_dir)
        try:
            _mount(libc, "tmpfs", stage, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0700,size=64k")
            entries = sorted(blocking[directory])
            kinds = {}
            for name in entries:
                source = os.path.join(directory, name)
                kinds[name] = os.path.isdir(source)
                _placeholder(os.path.join(stage, name), kinds[name])
                _mount(libc, source, os.path.join(stage, name), None, _MS_BIND | _MS_REC, None)
            _mount(libc, "tmpfs", directory, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k")
            for name in entries:
                _placeholder(os.path.join(directory, name), kinds[name])
                _mount(libc, os.path.join(stage, name), os.path.join(directory, name), None, _MS_MOVE, None)
        finally:
            libc.umount2(stage.encode(), _MNT_DETACH)
            with contextlib.suppress(OSError):
                os.rmdir(stage)
    return covered


_private_namespace: dict[str, Any] = {"pid": None}


def private_mount_namespace() -> ctypes.CDLL:
    """Move the calling process to a private mount namespace (once per process); returns libc.

    Its children inherit it; no mount made in it propagates to the host, nor any of the host's
    into it.

    Raises
    ------
    OSError : ``unshare(CLONE_NEWNS)`` or the remount failed (e.g. no ``CAP_SYS_ADMIN``).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if _private_namespace["pid"] == os.getpid():
        return libc
    if libc.unshare(_CLONE_NEWNS) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare(CLONE_NEWNS) failed: {os.strerror(error)}")
    _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE, None)  # nothing propagates to the host
    _private_namespace["pid"] = os.getpid()
    return libc


def private_proc(stage: str) -> int:
    """A descriptor of a new proc file system that no path leads to (for the process's setup).

    Mounted on a temporary directory beneath ``stage``, opened, then detached and the directory
    removed: only the descriptor reaches it. Program processes read their own ``statm`` and
    write their user namespace's id maps through it before the program runs, and close it.

    Raises
    ------
    OSError : no mount (e.g. no ``CAP_SYS_ADMIN``).
    """
    libc = private_mount_namespace()
    target = tempfile.mkdtemp(prefix="primsel-proc-", dir=stage)
    try:
        _mount(libc, "proc", target, "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None)
        try:
            return os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        finally:
            libc.umount2(target.encode(), _MNT_DETACH)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(target)


def no_access_times(proc: int | None = None) -> list[str]:
    """Remount every mount of the calling process's private mount namespace ``noatime``.

    So reading a file from a program process changes no access time on the host (with
    ``relatime``, a first read after a change would): no host effect, and no channel between
    runs through access times. Each mount keeps its other flags; the host's mounts are untouched
    (:func:`private_mount_namespace` first).

    Parameters
    ----------
    proc : a proc descriptor (:func:`private_proc`) to read ``self/mountinfo`` through; None: ``/proc``.

    Returns
    -------
    The mount points that could not be remounted (empty when all were).

    Raises
    ------
    OSError : no private mount namespace, or the mount table cannot be read.
    """
    libc = private_mount_namespace()
    table = _open_proc("self/mountinfo", os.O_RDONLY, proc)
    with os.fdopen(table, "r", encoding="utf-8", errors="surrogateescape") as handle:
        lines = handle.read().splitlines()
    per_mount = {"ro": _MS_RDONLY, "nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC}
    failed = []
    for line in lines:
        fields = line.split()
        target = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        flags = _MS_REMOUNT | _MS_BIND | _MS_NOATIME
        for option in fields[5].split(","):
            flags |= per_mount.get(option, 0)
        try:
            _mount(libc, None, target, None, flags, None)
        except OSError:
            failed.append(target)
    return failed


def own_pid_namespace_for_children(spawner_namespace: int) -> None:
    """Make the calling process's next child the first process (pid 1) of a new pid namespace.

    ``spawner_namespace`` is a descriptor of the caller's own pid namespace (``self/ns/pid``):
    the caller first goes back to it for its children (the namespace made for the previous
    child is used up), then makes a new one. So every program process has pids of its own: it
    learns nothing from the host's pid counter, which every process on the host advances.

    Raises
    ------
    OSError : ``setns`` or ``unshare`` failed (e.g. no ``CAP_SYS_ADMIN``).
    """
    libc = processes.libc()
    if libc.setns(spawner_namespace, _CLONE_NEWPID) != 0 or libc.unshare(_CLONE_NEWPID) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"a new pid namespace could not be made: {os.strerror(error)}")


#: Environment variables a program process keeps (docs/sandbox.md); ``TMPDIR`` is set per process.
PROGRAM_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def scrub_environment(keep_paths: Iterable[str] = ()) -> list[str]:
    """Remove from the calling process what the caller's environment brought and programs must
    not see: every environment variable but :data:`PROGRAM_ENVIRONMENT` (from ``os.environ``,
    ``posix.environ``, the C library's ``environ`` and, overwritten with zeros, the strings
    themselves where the process was started) and the caller's ``PYTHONPATH`` entries from
    ``sys.path`` and ``sys.path_importer_cache`` (but ``keep_paths``).

    For the spawner, once, before it forks any program process (they inherit the result).

    Returns
    -------
    The names of the variables removed.
    """
    import posix

    keep = {os.path.realpath(path) for path in keep_paths}
    callers = {os.path.realpath(path) for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path}
    dropped_paths = callers - keep
    sys.path[:] = [path for path in sys.path if os.path.realpath(path or ".") not in dropped_paths]
    for path in list(sys.path_importer_cache):
        if os.path.realpath(path or ".") in dropped_paths:
            del sys.path_importer_cache[path]
    names = sorted(name for name in os.environ if name not in PROGRAM_ENVIRONMENT)
    strings = _environment_strings({name.encode() for name in names})
    for name in names:
        del os.environ[name]  # unsetenv: the C library's environ no longer points at it
        posix.environ.pop(name.encode(), None)
    for address, size in strings:
        ctypes.memset(address, 0, size)
    return names


def _environment_strings(names: set[bytes]) -> list[tuple[int, int]]:
    """``(address, length)`` of the C library's ``NAME=value`` strings for these ``names``."""
    libc = processes.libc()
    environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
    found = []
    index = 0
    while environ[index] is not None:
        text = environ[index]
        if text.partition(b"=")[0] in names:
            found.append((ctypes.cast(environ, ctypes.POINTER(ctypes.c_void_p))[index], len(text)))
        index += 1
    return found


def hide_processes() -> str:
    """Cover ``/proc`` with an empty, read-only file system (nothing of any process shows).

    For a process running as root that forks program processes: in a private mount namespace
    (:func:`private_mount_namespace`), an empty ``tmpfs`` (root's, mode 0555, read-only,
    ``nosuid``, ``nodev``, ``noexec``) is mounted on ``/proc``. A program process then finds no
    process there, not even itself (no ``/proc/self``: its pid on the host, a count every
    process advances, shows nowhere), by listing, ``stat``, ``readlink`` or open. What a
    process needs of its own proc files before the program runs it reads through a
    descriptor of a proc file system no path leads to (:func:`private_proc`). Nothing changes
    on the host.

    Returns
    -------
    What ``/proc`` now is, in words.

    Raises
    ------
    OSError : no namespace or no mount (e.g. no ``CAP_SYS_ADMIN``); ``/proc`` is then unchanged.
    """
    libc = private_mount_namespace()
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME
    _mount(libc, "tmpfs", "/proc", "tmpfs", flags, "mode=0555,size=4k")
    return "an empty read-only file system"


def process_list_status() -> tuple[bool, str]:
    """Whether a sandbox started now can hide the host's processes from program processes, and how or why not.

    Tried in a short-lived child (a new mount namespace, a proc and a tmpfs mount, as the
    spawner does: :func:`private_proc`, :func:`hide_processes`); the answer is cached.
    """
    return _namespace_probe()["process_list"]


def pid_namespace_status() -> tuple[bool, str]:
    """Whether a sandbox started now gives each program process a pid namespace of its own, and
    why not (tried with the same child as :func:`process_list_status`; cached)."""
    return _namespace_probe()["pid_namespace"]


_PROBE = """\
import os, sys, tempfile
sys.path.insert(0, {package!r})
from primsel.simulator import isolation
proc = isolation.private_proc(tempfile.gettempdir())
print(isolation.hide_processes())
namespace = os.open("self/ns/pid", os.O_RDONLY, dir_fd=proc)
try:
    isolation.own_pid_namespace_for_children(namespace)
    print("ok")
except OSError as exc:
    print(exc)
"""
_probe_answer: dict[str, Any] = {}


def _namespace_probe() -> dict[str, tuple[bool, str]]:
    if not _probe_answer:
        _probe_answer.update(_run_namespace_probe())
    return _probe_answer


def _run_namespace_probe() -> dict[str, tuple[bool, str]]:
    import subprocess

    if not sys.platform.startswith("linux"):
        reason = f"needs Linux (this is {sys.platform})"
        return {"process_list": (False, reason), "pid_namespace": (False, reason)}
    if os.geteuid() != 0:
        return {"process_list": (False, "the sandbox does not run as root: program processes run as this user and "
                                        "see its processes and, by stat, the host's process ids in /proc"),
                "pid_namespace": (False, "the sandbox does not run as root: program processes share the host's pid "
                                         "namespace (and its pid counter)")}
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": package}
    try:
        done = subprocess.run([sys.executable, "-I", "-c", _PROBE.format(package=package)],
                              capture_output=True, text=True, timeout=30, env=env, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"the probe could not run: {exc}"
        return {"process_list": (False, reason), "pid_namespace": (False, reason)}
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2:
        reason = (done.stderr.strip().splitlines() or ["unknown"])[-1]
        reason = f"/proc cannot be covered (no CAP_SYS_ADMIN?): {reason}"
        return {"process_list": (False, reason), "pid_namespace": (False, reason)}
    covered = (True, f"program processes find nothing in /proc ({lines[0]} covers it)")
    if lines[1] == "ok":
        return {"process_list": covered, "pid_namespace": (True, "each program process is the first process of "
                                                                 "a pid namespace of its own")}
    return {"process_list": covered, "pid_namespace": (False, f"no pid namespace can be made: {lines[1]}")}


def _beneath(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or lies beneath it (both absolute and resolved)."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _placeholder(path: str, directory: bool) -> None:
    """An empty directory (mode 0755) or file (0644) to mount on."""
    if directory:
        os.mkdir(path, 0o755)
        os.chmod(path, 0o755)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.chmod(path, 0o644)


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def confine(
    keep: Iterable[int],
    workdir: str,
    memory_mb: int,
    cpu_seconds: float,
    stdout_cap: int,
    landlock_ruleset: int | None,
    seccomp: Template | None,
    user: tuple[int, int] | None = UNPRIVILEGED_USER,
    hook: bool = True,
    proc: int | None = None,
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
    user : ``(uid, gid)`` the process becomes when it runs as root (:func:`drop_privileges`).
    hook : add the audit hook (:func:`audit_hook`); off only to test that the layers beneath
        hold without it.
    proc : a descriptor of a proc file system (:func:`private_proc`) to read and write the
        process's own files through, where ``/proc`` is covered; None: ``/proc``. Closed here.

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
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    setup = [fd for fd in (landlock_ruleset, proc) if fd is not None]
    kept = sorted({0, 1, 2, *keep, *setup})
    for low, high in zip(kept, kept[1:] + [65536]):
        os.closerange(low + 1, high)
    output = CappedOutput(int(stdout_cap))
    sys.stdout = output
    sys.stderr = output
    sys.stdin = io.StringIO("")
    statm = _open_proc("self/statm", os.O_RDONLY, proc)
    try:
        address_space = int(os.read(statm, 200).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(statm)
    _limit(resource.RLIMIT_AS, address_space + int(memory_mb) * (1 << 20))
    cpu = math.ceil(float(cpu_seconds)) + 1
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NOFILE, NOFILE)
    _limit(resource.RLIMIT_CORE, 0)
    parent = os.getppid()
    drop_privileges(user, proc)
    if proc is not None:
        os.close(proc)
    # A change of ids clears the parent-death signal: set it again. Not dumpable from here on:
    # no /proc/<pid>/mem or ptrace by other processes of the user.
    die_with_parent(parent)
    with contextlib.suppress(OSError):
        prctl(PR_SET_DUMPABLE, 0)
    if landlock_ruleset is not None:
        from primsel.simulator import landlock

        landlock.enforce(landlock_ruleset)
        os.close(landlock_ruleset)
    if seccomp is not None:
        seccomp.load(os.getpid())
    if hook:
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
