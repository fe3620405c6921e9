"""Attacks on the sandbox written from issue 21 alone, by a reviewer who did not write the defence.

Each test is one attack: a whole program text (its first top-level function is the entry point)
that does not solve its task, run through :class:`primsel.simulator.sandbox.Sandbox` on
built-in tasks, with the audit hook and without it (the layers beneath must hold alone). Every
attack asserts the properties the issue asks for:

* no forged pass: the program never gets ``pass``;
* no host effect: the host targets (files and directories made by the fixture, some of them
  world-writable, with extended attributes) keep their mode, owner, size, times, extended
  attributes, inode flags (``FS_IOC_GETFLAGS``) and directory listing; nothing is created in
  ``/tmp`` or ``/dev/shm``; a host process is neither signalled nor stopped;
* no caller crash and no stall charged to the task: the verdict is not ``EvaluatorError``,
  ``WorkerDied``, ``WorkerStartFailed``, ``ScratchError`` or ``SandboxError``, the feedback
  never says "a fault outside your program", the row comes back within the limits, and the
  task's reference program passes afterwards in the same sandbox (one worker);
* probes end with ``ValueError("CLEAN")`` when the kernel refused everything they tried, and
  with ``ValueError("LEAK ...")`` naming what got through.

Attacks that still get through are marked ``xfail(strict=True)`` with what got through.

The system call numbers are those of x86_64 (the file is skipped on other architectures).

Running as a normal user: the file must pass both as root and as an ordinary user. As root::

    PYTHONPATH=$PWD python -m pytest -q tests/simulator/test_attacks_review.py

As an ordinary user (uid 1000 here; the checkout and the interpreter must be readable by it,
and HOME and TMPDIR writable)::

    mkdir -p /tmp/u1000 && chown 1000:1000 /tmp/u1000
    setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/tmp/u1000 TMPDIR=/tmp/u1000 \\
        PYTHONPATH=$PWD python -m pytest -q -p no:cacheprovider tests/simulator/test_attacks_review.py

Assertions that only make sense as root (the program process must not run as uid 0, a root-owned
target) are skipped with a reason as an ordinary user.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import re
import socket
import struct
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.eval.attribution import attribute
from primsel.eval.feedback import LEVELS, error_text, feedback_text
from primsel.simulator.library import build_library
from primsel.simulator.sandbox import Sandbox
from primsel.types import ExecutionResult, Program

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64" or not os.path.exists("/proc/self/status"),
                                reason="the attacks use x86_64 Linux system call numbers")

ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not ROOT, reason="only meaningful when the sandbox runs as root")

#: The program's time limit and the judge's own limit in these sandboxes.
LIMITS = {"timeout": 3.0, "judge_timeout": 6.0}
#: Most seconds a row may take: both limits and the caller's grace.
BOUND = LIMITS["timeout"] + LIMITS["judge_timeout"] + 10.0
#: A return-value task and a task with two (SIP, EP) pairs.
FEW = ("builtin-05", "builtin-11")
#: Error types that blame something outside the program (a stall or crash charged to the task).
OUTSIDE = frozenset({"EvaluatorError", "WorkerDied", "WorkerStartFailed", "ScratchError", "SandboxError"})
#: Characters no text from the program may bring into a verdict or feedback: C0/C1 controls but
#: tab and newline, bidi controls and marks, lone surrogates.
BAD_CHARS = {chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7F, 0xA0)]} | {
    "\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}
FS_IOC_GETFLAGS = 0x80086601
FORGED_NAME = "primsel-review-pwned"
LIBRARY = build_library()


def _program(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _with(program: str, *parts: str) -> str:
    return "\n\n".join((_program(program), *(_program(p) for p in parts)))


# --- functions the attack programs share (defined after the entry point) ------------------------

# Raw system calls through ctypes; ``got`` collects every call the kernel did not refuse.
_SYS = '''
    def _sys():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        got = []

        def sc(name, nr, *args):
            conv = [ctypes.c_long(a) if type(a) is int else a for a in args]
            result = libc.syscall(ctypes.c_long(nr), *conv)
            if result >= 0:
                got.append((name, result))
            return result

        return ctypes, libc, sc, got


    def _report(got):
        raise ValueError("LEAK " + repr(got)[:1500] if got else "CLEAN")
'''

# Answers as the program process sends them, forged: written to every descriptor, then exit.
_FORGED = '''
    def _answer(**fields):
        import random
        from primsel.simulator import codec, program
        from primsel.simulator.state import TABLES, get_current_context
        coder = codec.Codec(program.load_apps())
        tables = get_current_context().tables
        answer = {"state": coder.encode({name: tables[name] for name in TABLES}),
                  "random": coder.encode(random.getstate()), "trace": [], "path": [], "calls": 0,
                  "stdout_truncated": False}
        answer.update(fields)
        body = codec.dumps(answer)
        return len(body).to_bytes(4, "big") + body


    def _send(frame):
        import os
        for fd in range(3, 64):
            try:
                os.write(fd, frame)
            except OSError:
                pass
        os._exit(0)
'''


# --- host targets ---------------------------------------------------------------------------


def _flags(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return struct.unpack("l", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8))[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def _state_of(path: str) -> tuple:
    info = os.lstat(path)
    try:
        xattrs = sorted((name, os.getxattr(path, name, follow_symlinks=False))
                        for name in os.listxattr(path, follow_symlinks=False))
    except OSError as exc:
        xattrs = [("error", exc.errno)]
    listing = sorted(os.listdir(path)) if os.path.isdir(path) else None
    return (info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_nlink, info.st_mtime_ns,
            info.st_ctime_ns, xattrs, _flags(path), listing)


class Host:
    """Files and directories of the host the attacks aim at, and a snapshot to compare with.

    ``closed`` lies under pytest's temporary directory; ``open`` is a world-writable directory
    in the system's temporary directory (mode 0777, files 0666), so that only the sandbox, not
    the file modes, stands between the program and the targets.
    """

    def __init__(self, base: Path) -> None:
        self.dirs = [str(base / "closed"), tempfile.mkdtemp(prefix="primsel-review-open-")]
        os.makedirs(self.dirs[0], exist_ok=True)
        os.chmod(self.dirs[1], 0o777)
        self.files = []
        for directory, mode in zip(self.dirs, (0o644, 0o666)):
            path = os.path.join(directory, "victim")
            with open(path, "w") as handle:
                handle.write("host data\n")
            os.chmod(path, mode)
            os.setxattr(path, "user.primsel", b"original-secret-value")
            sub = os.path.join(directory, "victim.d")
            os.mkdir(sub)
            os.chmod(sub, 0o777 if mode == 0o666 else 0o755)
            self.files.append(path)
        self.targets = self.files + self.dirs + [os.path.join(d, "victim.d") for d in self.dirs]
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple]:
        state = {path: _state_of(path) for path in self.targets}
        for shared in (tempfile.gettempdir(), "/tmp", "/dev/shm"):
            with contextlib.suppress(OSError):
                state[shared + "/*"] = tuple(sorted(n for n in os.listdir(shared) if FORGED_NAME in n))
        return state

    def assert_unchanged(self) -> None:
        after = self.snapshot()
        assert {k: v for k, v in after.items() if self.before.get(k) != v} == {}

    def close(self) -> None:
        import shutil
        shutil.rmtree(self.dirs[1], ignore_errors=True)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    targets = Host(tmp_path_factory.mktemp("host"))
    yield targets
    targets.close()


@pytest.fixture(scope="module", params=[True, False], ids=["audit_hook", "no_audit_hook"])
def hooked(request) -> bool:
    return request.param


@pytest.fixture(scope="module")
def box(hooked):
    with Sandbox(workers=1, audit_hook=hooked, **LIMITS) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_builtin_tasks()}


def _fill(program: str, host: Host, **more: object) -> str:
    values = {"TARGETS": host.targets, "FILES": host.files, "DIRS": host.dirs, "FORGED": FORGED_NAME, **more}
    for key, value in values.items():
        program = program.replace(f"__{key}__", repr(value))
    return program


def _attack(box: Sandbox, tasks: dict, program: str, host: Host | None = None, ids=FEW,
            probe: bool = False, hooked: bool = True) -> list[ExecutionResult]:
    """Run ``program`` on ``ids``, check the common properties, then a reference program."""
    started = time.monotonic()
    results = list(box.execute_many((tasks[i], program, None) for i in ids))
    took = time.monotonic() - started
    summary = [(r.task_id, r.status, r.error_type, (r.message or "")[:300]) for r in results]
    assert [s for s in summary if s[1] == "pass"] == []
    assert [s for s in summary if s[2] in OUTSIDE] == []
    assert [(r.task_id, r.seconds) for r in results if r.seconds > BOUND] == []
    assert took < BOUND * len(ids)
    for result in results:
        code = Program(task_id=result.task_id, code=program)
        for level in LEVELS:
            assert "outside your program" not in feedback_text(level, code, result, LIMITS["timeout"])
    if probe:
        leaks = [s for s in summary if "LEAK" in s[3]]
        assert leaks == []
        if not hooked:  # without the hook the program reached the kernel: it must have said so
            assert [s for s in summary if s[3] != "CLEAN"] == []
    if host is not None:
        host.assert_unchanged()
    reference = tasks[ids[0]]
    after = box.execute(reference, reference.program)
    assert (after.status, after.error_type) == ("pass", None), after
    return results


def test_00_the_layers_under_attack_are_active(box):
    """Without seccomp and Landlock the attacks below would prove little."""
    info = box.info()
    assert info["seccomp"] and info["landlock"], info


# --- 1-8: changing host files with raw system calls --------------------------------------------


def test_01_fchmodat2_setuid_bit_on_host_files(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os
            for target in __TARGETS__:
                for flags in (0, 0x100):  # AT_SYMLINK_NOFOLLOW
                    sc("fchmodat2", 452, -100, target.encode(), 0o4777, flags)
                try:  # an O_PATH descriptor is not checked by Landlock; AT_EMPTY_PATH then names it
                    fd = os.open(target, os.O_PATH)
                    sc("fchmodat2 O_PATH", 452, fd, b"", 0o4777, 0x1000)
                    sc("fchmod O_PATH", 91, fd, 0o4777)
                except OSError:
                    pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_02_classic_chmod_and_chown_family(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            for target in __TARGETS__:
                t = target.encode()
                sc("chmod", 90, t, 0o6777)
                sc("fchmodat", 268, -100, t, 0o6777)
                sc("chown", 92, t, 65534, 65534)
                sc("lchown", 94, t, 0, 0)
                sc("fchownat", 260, -100, t, 65534, 65534, 0)
                sc("fchownat", 260, -100, t, 0xFFFFFFFF, 0, 0x100)
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_03_setxattrat_writes_a_file_capability(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            # security.capability: VFS_CAP_REVISION_2 | EFFECTIVE, permitted = CAP_SETUID
            capability = struct.pack("<5I", 0x02000001, 1 << 7, 0, 0, 0)
            for name, value in ((b"security.capability", capability), (b"user.primsel", b"pwned"),
                                (b"trusted.pwned", b"x"), (b"user.pwned", b"x")):
                buffer = ctypes.create_string_buffer(value, len(value))
                args = struct.pack("<QII", ctypes.addressof(buffer), len(value), 0)
                for target in __TARGETS__:
                    sc("setxattrat", 463, -100, target.encode(), 0, name, args, 16)
                    try:
                        fd = os.open(target, os.O_PATH)
                        sc("setxattrat O_PATH", 463, fd, b"", 0x1000, name, args, 16)
                    except OSError:
                        pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_04_removexattrat_and_remove_xattr(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os
            for target in __TARGETS__:
                sc("removexattrat", 466, -100, target.encode(), 0, b"user.primsel")
                sc("removexattr", 197, target.encode(), b"user.primsel")
                sc("lremovexattr", 198, target.encode(), b"user.primsel")
                try:
                    os.removexattr(target, "user.primsel")
                    got.append("os.removexattr")
                except OSError:
                    pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_05_file_setattr_and_ioctl_make_files_immutable(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            immutable = struct.pack("<QIIII", 0x8 | 0x10, 0, 0, 0, 0)  # FS_XFLAG_IMMUTABLE | APPEND
            flags = ctypes.create_string_buffer(struct.pack("<q", 0x10 | 0x20), 8)  # FS_IMMUTABLE_FL | APPEND_FL
            for target in __TARGETS__:
                sc("file_setattr", 469, -100, target.encode(), immutable, 24, 0)
                try:
                    fd = os.open(target, os.O_PATH)
                    sc("file_setattr O_PATH", 469, fd, b"", immutable, 24, 0x1000)
                    sc("ioctl O_PATH", 16, fd, 0x40086602, flags)
                except OSError:
                    pass
                try:
                    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
                    sc("ioctl FS_IOC_SETFLAGS", 16, fd, 0x40086602, flags)
                    sc("ioctl FS_IOC_FSSETXATTR", 16, fd, 0x401C5820, immutable)
                except OSError:
                    pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_06_times_links_renames_and_truncation(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            for target in __TARGETS__:
                t = target.encode()
                sc("utimensat", 280, -100, t, None, 0)
                sc("utimes", 235, t, None)
                sc("truncate", 76, t, 0)
                sc("renameat2 exchange", 316, -100, t, -100, (target + ".d").encode(), 2)
                sc("rename", 82, t, (target + "." + __FORGED__).encode())
                sc("link", 86, t, (target + "." + __FORGED__).encode())
                sc("symlink", 88, t, (target + "." + __FORGED__ + ".l").encode())
                sc("mkdirat", 258, -100, (target + "." + __FORGED__ + ".dir").encode(), 0o777)
                sc("mknodat", 259, -100, (target + "." + __FORGED__ + ".fifo").encode(), 0o10666, 0)
                sc("unlinkat", 263, -100, t, 0)
                sc("unlinkat dir", 263, -100, (target + ".d").encode(), 0x200)
            for directory in __DIRS__ + ["/tmp", "/dev/shm"]:
                sc("creat", 85, (directory + "/" + __FORGED__).encode(), 0o666)
                sc("symlinkat", 266, b"/etc/shadow", -100, (directory + "/" + __FORGED__ + ".l").encode())
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_07_opening_for_write_by_every_route(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            O_WRONLY, O_RDWR, O_CREAT, O_APPEND, O_TMPFILE = 1, 2, 0o100, 0o2000, 0o20200000
            names = __FILES__ + [d + "/" + __FORGED__ for d in __DIRS__ + ["/tmp", "/dev/shm"]]
            names += ["/proc/self/oom_score_adj", "/proc/self/attr/current", "/proc/self/comm",
                      "/proc/sys/kernel/hostname", "/proc/self/setgroups"]
            for name in names:
                n = name.encode()
                for flags in (O_WRONLY, O_RDWR, O_WRONLY | O_CREAT, O_RDWR | O_APPEND | O_CREAT):
                    sc("open", 2, n, flags, 0o666)
                    sc("openat", 257, -100, n, flags, 0o666)
                    how = struct.pack("<QQQ", flags, 0o666, 0)
                    sc("openat2", 437, -100, n, how, 24)
                    sc("openat high bits", 257, -100, n, flags | (1 << 32), 0o666)
            for directory in __DIRS__ + ["/tmp", "/dev/shm"]:
                sc("O_TMPFILE", 257, -100, directory.encode(), O_TMPFILE | O_RDWR, 0o666)
            for name in names:
                for mode in ("w", "a", "r+", "x"):
                    try:
                        open(name, mode).close()
                        got.append((name, mode))
                    except OSError:
                        pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_08_mounting_over_the_host(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            for directory in __DIRS__ + ["/tmp"]:
                d = directory.encode()
                sc("mount tmpfs", 165, b"none", d, b"tmpfs", 0, None)
                sc("mount remount ro", 165, None, d, None, 0x21, None)
                sc("umount2", 166, d, 2)
                sc("open_tree", 428, -100, d, 1 | 0x80000)
                sc("mount_setattr", 442, -100, d, 0, b"\\0" * 32, 32)
            fs = sc("fsopen", 430, b"tmpfs", 0)
            sc("fspick", 433, -100, b"/tmp", 0)
            sc("move_mount", 429, -100, b"/tmp", -100, __DIRS__[1].encode(), 0)
            sc("pivot_root", 155, b"/tmp", b"/tmp")
            sc("chroot", 161, b"/tmp")
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


# --- 9-12: other processes ------------------------------------------------------------------


def _alive_and_running(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as handle:
        state = handle.read().rsplit(") ", 1)[1][0]
    return os.waitpid(pid, os.WNOHANG) == (0, 0) and state in "SR"


def test_09_signals_to_a_host_process_by_every_route(box, tasks, host, hooked, sleeper):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os
            victims = [__PID__, -__PID__, os.getppid()]
            for pid in victims:
                for sig in (19, 9):  # SIGSTOP, SIGKILL
                    sc("kill", 62, pid, sig)
                    sc("tkill", 200, abs(pid), sig)
                    sc("tgkill", 234, abs(pid), abs(pid), sig)
                    sc("tgkill own tgid", 234, os.getpid(), abs(pid), sig)
                    info = ctypes.create_string_buffer(128)
                    sc("rt_sigqueueinfo", 129, abs(pid), sig, info)
                    sc("rt_tgsigqueueinfo", 297, abs(pid), abs(pid), sig, info)
                    fd = sc("pidfd_open", 434, abs(pid), 0)
                    if fd >= 0:
                        sc("pidfd_send_signal", 424, fd, sig, None, 0)
                # the own pid in the high half of a 64-bit argument, the victim in the low half
                sc("kill high bits", 62, (os.getpid() << 32) | abs(pid), 19)
            _report(got)
    ''', _SYS), host, PID=sleeper)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)
    assert _alive_and_running(sleeper)


def test_10_reading_and_writing_another_process_memory(box, tasks, host, hooked, sleeper):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            buffer = ctypes.create_string_buffer(64)
            local = struct.pack("<QQ", ctypes.addressof(buffer), 64)
            remote = struct.pack("<QQ", 0x400000, 64)
            for pid in (__PID__, os.getppid(), 1):
                sc("process_vm_readv", 310, pid, local, 1, remote, 1, 0)
                sc("process_vm_writev", 311, pid, local, 1, remote, 1, 0)
                sc("ptrace attach", 101, 16, pid, 0, 0)
                sc("ptrace seize", 101, 0x4206, pid, 0, 0)
                sc("kcmp", 312, os.getpid(), pid, 0, 0, 0)
                sc("process_madvise", 440, -1, local, 1, 4, 0)
                sc("pidfd_getfd", 438, -1, 0, 0)
                for name in ("mem", "environ", "maps", "cmdline", "status"):
                    try:
                        with open("/proc/%d/%s" % (pid, name), "rb") as handle:
                            got.append(("read /proc/%d/%s" % (pid, name), len(handle.read(64))))
                    except OSError:
                        pass
            _report(got)
    ''', _SYS), host, PID=sleeper)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)
    assert _alive_and_running(sleeper)


def test_11_host_process_list_stays_hidden(box, tasks, hooked, sleeper):
    """The issue counts the host process list as a leak (getsid/getpgid/getpriority before).

    Only a sandbox running as root with CAP_SYS_ADMIN can cover /proc (docs/sandbox.md, what is
    guaranteed and what is not): elsewhere the test is skipped with the reason.
    """
    info = box.info()
    if not info["process_list_hidden"]:
        pytest.skip("the host process list stays visible here: " + info["process_list_detail"])
    program = _fill(_with('''
        def f():
            import os
            pid = __PID__
            got = []
            for path in ("/proc/%d" % pid, "/proc/%d/cmdline" % pid, "/proc/%d/exe" % pid):
                try:
                    info = os.stat(path)
                    got.append(("stat " + path, info.st_uid))
                except OSError:
                    pass
                try:
                    got.append(("readlink " + path, os.readlink(path)))
                except OSError:
                    pass
            try:
                ctypes, libc, sc, more = _sys()
            except Exception:
                _report(got)
            sc("getsid", 124, pid)
            sc("getpgid", 121, pid)
            sc("getpriority", 140, 0, pid)
            sc("sched_getscheduler", 145, pid)
            sc("ioprio_get", 252, 1, pid)
            sc("sched_getaffinity", 204, pid, 128, ctypes.create_string_buffer(128))
            sc("kill 0", 62, pid, 0)
            sc("pidfd_open", 434, pid, 0)
            _report(got + more)
    ''', _SYS), _HostStub(), PID=sleeper)
    _attack(box, tasks, program, probe=True, hooked=hooked)


class _HostStub:
    """For probes that need no host targets."""

    targets: list[str] = []
    files: list[str] = []
    dirs: list[str] = []


def test_12_info_from_host_files_xattrs_and_attributes(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            buffer = ctypes.create_string_buffer(256)
            for target in __TARGETS__:
                t = target.encode()
                for name, nr in (("getxattr", 191), ("lgetxattr", 192)):
                    if libc.syscall(ctypes.c_long(nr), t, b"user.primsel", buffer, ctypes.c_long(256)) > 0:
                        got.append((name, buffer.raw[:30]))
                if libc.syscall(ctypes.c_long(194), t, buffer, ctypes.c_long(256)) > 0:
                    got.append(("listxattr", buffer.raw[:30]))
                args = struct.pack("<QII", ctypes.addressof(buffer), 256, 0)
                sc("getxattrat", 464, -100, t, 0, b"user.primsel", args, 16)
                sc("listxattrat", 465, -100, t, 0, buffer, 256)
                sc("file_getattr", 468, -100, t, buffer, 24, 0)
                for read in (lambda: os.getxattr(target, "user.primsel"), lambda: os.listxattr(target),
                             lambda: open(target).read(), lambda: os.listdir(target)):
                    try:
                        got.append(("python", read()))
                    except OSError:
                        pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


# --- 13-16: privileges, namespaces, kernel facilities -------------------------------------------


def test_13_becoming_root_again(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            sc("setuid", 105, 0)
            sc("setgid", 106, 0)
            sc("setresuid", 117, 0, 0, 0)
            sc("setreuid", 113, 0, 0)
            sc("setgroups", 116, 1, struct.pack("<I", 0))
            header = struct.pack("<Ii", 0x20080522, 0)
            full = struct.pack("<6I", *([0xFFFFFFFF] * 6))
            sc("capset", 126, header, full)
            sc("prctl ambient raise", 157, 47, 2, 21, 0, 0)
            sc("prctl no_new_privs off", 157, 38, 0, 0, 0, 0)
            sc("prctl set_dumpable", 157, 4, 1, 0, 0, 0)
            sc("prctl set_mm", 157, 35, 8, 0, 0, 0)
            state = (os.getresuid(), os.getresgid(), os.getgroups())
            if 0 in state[0] or 0 in state[1] or 0 in state[2]:
                got.append(("root ids", state))
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_13b_the_program_process_is_not_root(box, tasks, hooked):
    program = _program('''
        def f():
            import os
            raise ValueError("ids %r %r %r" % (os.getresuid(), os.getresgid(), os.getgroups()))
    ''')
    results = _attack(box, tasks, program, ids=FEW[:1])
    assert results[0].message.startswith("ids (")
    ids = [int(n) for n in re.findall(r"\d+", results[0].message)]
    assert len(ids) >= 6 and 0 not in ids


@root_only
def test_13c_as_root_the_program_process_is_nobody_without_groups(box, tasks, hooked):
    program = _program('''
        def f():
            import os
            raise ValueError("ids %r %r %r" % (os.getresuid(), os.getresgid(), os.getgroups()))
    ''')
    results = _attack(box, tasks, program, ids=FEW[:1])
    assert results[0].message == "ids (65534, 65534, 65534) (65534, 65534, 65534) []"


def test_14_new_namespaces_processes_and_forks(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import os, struct
            me = os.getpid()
            for flags in (0x10000000, 0x20000, 0x40000000, 0x20000000, 0x08000000, 0x04000000, 0x80):
                sc("unshare", 272, flags)
            for flags in (17, 0x10000000 | 17, 0x00010000 | 0x00000800 | 0x00000100 | 0x10000000):
                r = sc("clone", 56, flags, 0, 0, 0, 0)
                if r == 0:
                    os._exit(0)
            args = struct.pack("<11Q", 0x10000000 | 0x20000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
            r = sc("clone3", 435, args, 88)
            if r == 0:
                os._exit(0)
            r = sc("fork", 57)
            if r == 0:
                os._exit(0)
            sc("setns", 308, 0, 0)
            sc("execve", 59, b"/bin/sh", None, None)
            sc("execveat", 322, -100, b"/bin/true", None, None, 0)
            for run in (lambda: os.fork(), lambda: os.posix_spawn("/bin/true", ["true"], {})):
                try:
                    r = run()
                    if r == 0 and os.getpid() != me:
                        os._exit(0)
                    got.append(("python", r))
                except Exception:
                    pass
            try:  # system() answers 127 when it cannot start the shell; the host check sees the file
                if os.system("touch /tmp/" + __FORGED__) == 0:
                    got.append("system")
            except Exception:
                pass
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_15_kernel_facilities(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import struct
            attr = ctypes.create_string_buffer(struct.pack("<II", 1, 128) + b"\\0" * 120, 128)  # software event
            sc("perf_event_open", 298, attr, 0, -1, -1, 0)
            sc("bpf prog load", 321, 5, ctypes.create_string_buffer(128), 128)
            sc("bpf map create", 321, 0, ctypes.create_string_buffer(struct.pack("<IIII", 1, 4, 4, 1), 72), 72)
            sc("io_uring_setup", 425, 8, ctypes.create_string_buffer(120))
            sc("userfaultfd", 323, 0)
            sc("add_key", 248, b"user", b"primsel", b"x", 1, -3)
            sc("keyctl join", 250, 1, b"primsel")
            sc("request_key", 249, b"user", b"primsel", None, -3)
            sc("personality", 135, 0x0040000)
            sc("memfd_create", 319, b"x", 0)
            sc("memfd_secret", 447, 0)
            sc("fanotify_init", 300, 0, 0)
            sc("inotify_init1", 294, 0)
            sc("eventfd2", 290, 0, 0)
            sc("signalfd4", 289, -1, ctypes.create_string_buffer(8), 8, 0)
            sc("timerfd_create", 283, 1, 0)
            sc("epoll_create1", 291, 0)
            sc("pipe2", 293, ctypes.create_string_buffer(8), 0)
            sc("msgget", 68, 0, 0o1666)
            sc("shmget", 29, 0, 4096, 0o1666)
            sc("semget", 64, 0, 1, 0o1666)
            sc("mq_open", 240, b"primsel", 0o100 | 2, 0o666, None)
            sc("mlockall", 151, 3)
            sc("swapon", 167, b"/tmp/primsel-review-swap", 0)
            sc("syslog", 103, 3, ctypes.create_string_buffer(64), 64)
            sc("acct", 163, None)
            sc("setpriority", 141, 0, 0, -20)
            sc("sched_setscheduler", 144, 0, 1, struct.pack("<i", 50))
            sc("ioprio_set", 251, 1, 0, (1 << 13) | 0)
            sc("set_mempolicy", 238, 0, None, 0)
            sc("setrlimit", 160, 7, struct.pack("<QQ", 1 << 20, 1 << 20))
            sc("prlimit64 raise", 302, 0, 9, struct.pack("<QQ", 2 ** 62, 2 ** 62), None)
            sc("statfs", 137, b"/tmp", ctypes.create_string_buffer(120))
            sc("flock", 73, 0, 2)
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_16_mounts_page_cache_and_watches(box, tasks, host, hooked):
    program = _fill(_with('''
        def f():
            ctypes, libc, sc, got = _sys()
            import mmap, os, struct, json
            request = struct.pack("<IIQQQ", 32, 0, 0, 0, 0)
            sc("listmount", 458, request, ctypes.create_string_buffer(4096), 512, 0)
            sc("statmount", 457, request, ctypes.create_string_buffer(4096), 4096, 0)
            for path in ("/proc/self/mountinfo", "/proc/self/mounts", "/etc/mtab"):
                try:
                    got.append((path, open(path).read(40)))
                except OSError:
                    pass
            fd = os.open(json.__file__, os.O_RDONLY)  # a file the program may read, shared with the host
            sc("fadvise64 DONTNEED", 221, fd, 0, 0, 4)
            sc("readahead", 187, fd, 0, 4096)
            sc("cachestat", 451, fd, struct.pack("<QQ", 0, 4096), ctypes.create_string_buffer(40), 0)
            mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
            vec = ctypes.create_string_buffer(64)
            address = ctypes.addressof(ctypes.c_char.from_buffer_copy(b"x"))
            sc("mincore", 27, address & ~4095, 4096, vec)
            wd = sc("inotify_init1", 294, 0)
            if wd >= 0:
                sc("inotify_add_watch", 254, wd, b"/tmp", 0xFFF)
            _report(got)
    ''', _SYS), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


# --- 17-19: network, abstract unix sockets, resources ------------------------------------------


def test_17_network_and_abstract_unix_sockets(box, tasks, host, hooked):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        tcp.setblocking(False)
        unix.bind("\0" + FORGED_NAME)
        unix.listen(8)
        unix.setblocking(False)
        program = _fill(_with('''
            def f():
                ctypes, libc, sc, got = _sys()
                import struct
                port = __PORT__
                inet = struct.pack(">HH4s8x", 2, port, bytes([127, 0, 0, 1]))
                inet = struct.pack("<H", 2) + inet[2:]
                abstract = struct.pack("<H", 1) + b"\\0" + __FORGED__.encode()
                for family, kind, address in ((2, 1, inet), (2, 2, inet), (1, 1, abstract), (1, 2, abstract),
                                              (16, 3, None), (17, 3, None), (10, 1, None), (40, 1, None)):
                    fd = sc("socket", 41, family, kind, 0)
                    if fd >= 0 and address is not None:
                        sc("connect", 42, fd, address, len(address))
                        sc("sendto", 44, fd, b"x", 1, 0, address, len(address))
                sc("socketpair", 53, 1, 1, 0, ctypes.create_string_buffer(8))
                try:
                    import socket
                    socket.create_connection(("127.0.0.1", port), timeout=0.5)
                    got.append("python connect")
                except Exception:
                    pass
                _report(got)
        ''', _SYS), host, PORT=tcp.getsockname()[1])
        _attack(box, tasks, program, host, probe=True, hooked=hooked)
        for listener in (tcp, unix):
            with pytest.raises(BlockingIOError):
                listener.accept()


def test_18_memory_bomb(box, tasks, host, hooked):
    program = _program('''
        def f():
            import mmap
            kept = []
            for make in (lambda: bytearray(3 << 30), lambda: mmap.mmap(-1, 8 << 30),
                         lambda: mmap.mmap(-1, 8 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)):
                try:
                    kept.append(make())
                except (MemoryError, OSError):
                    pass
            block = []
            while True:
                block.append(bytearray(64 << 20))
    ''')
    results = _attack(box, tasks, program, host)
    assert {(r.status, r.error_type) for r in results} <= {("error", "MemoryError"), ("timeout", None)}


def test_19_thread_bomb_is_bounded(box, tasks, host, hooked):
    program = _program('''
        def f():
            import threading
            threading.stack_size(65536)
            gate = threading.Event()
            started = 0
            try:
                for _ in range(600):
                    threading.Thread(target=gate.wait, daemon=True).start()
                    started += 1
            except Exception:
                pass
            gate.set()
            raise ValueError("threads %d" % started)
    ''')
    with Sandbox(workers=1, audit_hook=hooked, timeout=30, judge_timeout=30) as roomy:
        results = _attack(roomy, tasks, program, host, ids=FEW[:1])
    assert results[0].message.startswith("threads")
    started = int(results[0].message.split()[-1]) if (results[0].message or "").startswith("threads") else 0
    assert started < 600


# --- 20-21: the audit hook and the scratch directory -------------------------------------------


def test_20_audit_hook_disarmed_through_caught_tracebacks(box, tasks, host, hooked):
    program = _fill(_program('''
        def f():
            import sys, os
            found = []
            for attempt in (lambda: os.system("true"), lambda: __import__("ctypes").CDLL(None),
                            lambda: os.setxattr(__FILES__[1], "user.primsel", b"pwned")):
                try:
                    attempt()
                except Exception as exc:
                    tb = exc.__traceback__
                    while tb is not None:
                        frame = tb.tb_frame
                        while frame is not None:
                            for scope in (frame.f_locals, frame.f_globals):
                                for value in list(scope.values()):
                                    if isinstance(value, (set, frozenset, tuple, list, dict)):
                                        try:
                                            if "os.system" in value or any(
                                                    isinstance(v, frozenset) and "os.system" in v for v in value):
                                                found.append(type(value).__name__)
                                                if hasattr(value, "clear"):
                                                    value.clear()
                                        except TypeError:
                                            pass
                            defaults = getattr(getattr(frame, "f_func", None), "__defaults__", None)
                            if defaults:
                                found.append("defaults")
                            frame = frame.f_back
                        tb = tb.tb_next
            done = []
            for attempt in (lambda: os.system("touch /tmp/" + __FORGED__) or None,
                            lambda: os.setxattr(__FILES__[1], "user.primsel", b"pwned"),
                            lambda: os.chmod(__FILES__[1], 0o4777),
                            lambda: os.getxattr(__FILES__[1], "user.primsel")):
                try:
                    value = attempt()
                    if value is None or type(value) is bytes:
                        done.append(value)
                except Exception:
                    pass
            raise ValueError("LEAK %r %r" % (found, done) if found or done else "CLEAN")
    '''), host)
    _attack(box, tasks, program, host, probe=True, hooked=hooked)


def test_21_scratch_and_tmpdir_made_immutable_then_the_judge_hangs(box, tasks, host, hooked):
    """The caller must keep running, and the next tasks on the worker run normally."""
    program = _with('''
        def f():
            import os, tempfile, struct
            try:
                ctypes, libc, sc, got = _sys()
                flags = ctypes.create_string_buffer(struct.pack("<q", 0x10 | 0x20), 8)
                xflags = struct.pack("<QIIII", 0x8 | 0x10, 0, 0, 0, 0)
                for path in {".", "..", os.getcwd(), tempfile.gettempdir(), os.environ.get("TMPDIR", "."),
                             os.path.dirname(os.getcwd())}:
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                        sc("FS_IOC_SETFLAGS", 16, fd, 0x40086602, flags)
                    except OSError:
                        pass
                    sc("file_setattr", 469, -100, path.encode(), xflags, 24, 0)
                    sc("chmod", 90, path.encode(), 0)
            except Exception:
                pass
            while True:
                pass
    ''', _SYS)
    results = _attack(box, tasks, program, host)
    assert [r.status for r in results] == ["timeout"] * len(FEW)
    again = [box.execute(tasks[i], tasks[i].program) for i in ("builtin-01", "builtin-11", "builtin-06")]
    assert [(r.status, r.error_type) for r in again] == [("pass", None)] * 3


# --- 22-26: the judge doing the program's work --------------------------------------------------


def _flood_checked(results: list[ExecutionResult]) -> None:
    for r in results:
        assert r.error_type not in OUTSIDE
        assert r.status in ("error", "timeout", "fail")


def test_22_hash_flooding_set_of_ints(box, tasks, host, hooked):
    program = _with('''
        def f():
            _send(_answer(**{"return": {"s": [7 + i * (2 ** 61 - 1) for i in range(120000)]}}))
    ''', _FORGED)
    _flood_checked(_attack(box, tasks, program, host))


def test_23_hash_flooding_dict_keys_of_tuples_and_nested_frozensets(box, tasks, host, hooked):
    program = _with('''
        def f():
            keys = [{"t": [7 + i * (2 ** 61 - 1), "x"]} for i in range(60000)]
            inner = {"fs": [{"t": [3 + i * (2 ** 61 - 1)]} for i in range(60000)]}
            value = {"d": [[key, inner if i == 0 else i] for i, key in enumerate(keys)]}
            _send(_answer(**{"return": value}))
    ''', _FORGED)
    _flood_checked(_attack(box, tasks, program, host))


def test_24_hash_flooding_inside_the_world_state(box, tasks, host, hooked):
    program = _with('''
        def f():
            import json
            from primsel.simulator import codec
            frame = _answer(**{"return": None})
            document = json.loads(frame[4:])
            rows = document["state"]["d"][0][1]
            rows.append({"d": [["flood", {"s": [7 + i * (2 ** 61 - 1) for i in range(100000)]}]]})
            body = codec.dumps(document)
            _send(len(body).to_bytes(4, "big") + body)
    ''', _FORGED)
    _flood_checked(_attack(box, tasks, program, host))


def test_25_repetition_rules_that_make_the_evaluation_program_expand_forever(box, tasks, host, hooked):
    """builtin-02's evaluation program expands the repetitions of the events the program created."""
    program = _program('''
        def f():
            import datetime
            from primsel.simulator.apps.work_calendar import _event_to_row
            from primsel.simulator.state import get_current_context
            me = get_current_user()
            team = list(find_team_of(me))
            start = datetime.datetime(2024, 7, 1, 9, 30)
            table = get_current_context().table("USER_CALENDAR")
            for number, rule in enumerate((
                    RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=10 ** 9),
                    RepetitionSpec(frequency=EventFrequency.DAILY, bysetpos=[1] * 300000, max_repetitions=10 ** 6),
                    RepetitionSpec(frequency=EventFrequency.DAILY, recurs_until=datetime.date(9999, 12, 31)))):
                event = Event(subject="standup %d" % number, attendees=[me] + team, starts_at=start,
                              ends_at=start + datetime.timedelta(minutes=15), event_id="flood-%d" % number,
                              repeats=rule)
                table.append(_event_to_row(event))
    ''')
    results = _attack(box, tasks, program, host, ids=("builtin-02", "builtin-04"))
    _flood_checked(results)


@pytest.mark.asper
def test_25b_repetition_rules_the_evaluation_program_expands_are_the_program_s_time(box, tasks, host, hooked,
                                                                                      asper_path):
    """Asper-Bench task 1's evaluation program expands the repeat rule the program left on the meeting."""
    from primsel.datasets import load_tasks

    archive = {t.id: t for t in load_tasks(asper_path) if t.id == "1"}
    template = _program('''
        def f():
            from primsel.simulator.apps.work_calendar import _spec_to_record
            from primsel.simulator.state import get_current_context
            ids = {e.employee_id for e in find_employee("Jianpeng")}
            for row in get_current_context().table("USER_CALENDAR"):
                if set(row["attendees"] or []) & ids:
                    row["repeats"] = _spec_to_record(RULE)
    ''')
    for rule in ("RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=10 ** 9)",
                 "RepetitionSpec(frequency=EventFrequency.DAILY, bysetpos=[1] * 300000, max_repetitions=10 ** 6)"):
        program = template.replace("RULE", rule)
        started = time.monotonic()
        result = box.execute(archive["1"], program)
        assert time.monotonic() - started < BOUND
        assert result.status != "pass" and result.error_type not in OUTSIDE, result
        verdict = (result.status, result.error_type, result.raised_by)
        if "bysetpos" in rule or verdict[0] == "timeout":
            # the expansion is the program's doing: when it outlasts the judge's limit it is
            # charged to the program, never to the task; on a loaded machine decoding the rule
            # the program left can already pass the program's own limit (its clock)
            assert verdict in {("timeout", "CheckTimeout", "program"), ("timeout", None, "sandbox")}, result
        else:
            # a daily rule stops at year 9999 (about 2.9 million occurrences, a few seconds):
            # on an idle machine the judge expands it within its limit and the check fails
            assert verdict == ("fail", "SolutionError", "task"), result
        code = Program(task_id="1", code=program)
        assert "outside your program" not in feedback_text("error", code, result, LIMITS["timeout"])
    host.assert_unchanged()
    after = box.execute(tasks["builtin-05"], tasks["builtin-05"].program)
    assert after.status == "pass"


def test_26_judge_time_on_a_huge_world_state_is_the_program_s(box, tasks, host, hooked):
    program = _program('''
        def f():
            from primsel.simulator.state import get_current_context
            table = get_current_context().table("USER_CALENDAR")
            row = dict(table[0]) if table else {}
            for i in range(20000):
                copy = dict(row)
                copy["event_id"] = "copy-%d" % i
                table.append(copy)
    ''')
    _flood_checked(_attack(box, tasks, program, host, ids=("builtin-04", "builtin-05")))


# --- 27-31: what the verdict and the feedback say -----------------------------------------------


def _texts(result: ExecutionResult, program: str) -> list[str]:
    texts = [result.error_type or "", result.message or ""]
    texts += [str(part) for outcome in result.outcomes for part in outcome]
    texts += [str(part) for entry in result.trace for part in entry]
    code = Program(task_id=result.task_id, code=program)
    texts += [feedback_text(level, code, result, LIMITS["timeout"]) for level in LEVELS]
    texts += [error_text(code, result, level) for level in LEVELS]
    return texts


def test_27_control_bidi_and_surrogates_never_reach_feedback(box, tasks, host, hooked):
    program = _program('''
        def f():
            raise ValueError("\\x1b[2J\\x1b]0;owned\\x07 ok\\x00\\u202eevil\\u2066\\ud800\\x9b31m")
    ''')
    results = _attack(box, tasks, program, host)
    for result in results:
        bad = [(text[:80], sorted(BAD_CHARS & set(text))) for text in _texts(result, program) if BAD_CHARS & set(text)]
        assert bad == []


def test_28_exception_class_names_cannot_inject_lines(box, tasks, host, hooked):
    program = _program('''
        def f():
            E = type("E\\nDiagnosis: none. Correct program returns 3", (Exception,), {})
            E.__module__ = "x\\nCompared with a correct program"
            raise E("\\nDiagnosis: wrong_return")
    ''')
    results = _attack(box, tasks, program, host)
    for result in results:
        assert result.error_type is not None and "\n" not in result.error_type
        for text in _texts(result, program):
            assert "Diagnosis: none" not in text and "Correct program returns" not in text
        code = Program(task_id=result.task_id, code=program)
        assert not any(line.startswith("Diagnosis") for line in feedback_text("error", code, result).splitlines())


def test_29_forged_call_trace_learns_nothing_of_the_reference(box, tasks, host, hooked):
    task = tasks["builtin-05"]
    reference = box.execute(task, task.program)
    assert reference.status == "pass" and reference.trace
    guessed = [list(entry) for entry in reference.trace]
    program = _with(f'''
        def f():
            _send(_answer(**{{"return": [], "trace": {guessed!r}, "calls": {len(guessed)}}}))
    ''', _FORGED)
    result = _attack(box, tasks, program, host, ids=("builtin-05",))[0]
    code = Program(task_id=task.id, code=program)
    diagnosis = attribute(task, None, code, result, LIBRARY, reference)
    text = feedback_text("trace", code, result, LIMITS["timeout"])
    assert "correct program" not in text.lower()
    assert "agree" not in text


def test_30_sigxcpu_sent_to_itself_is_not_a_timeout(box, tasks, host, hooked):
    program = _program('''
        def f():
            import os, signal, time
            time.sleep(0.01)
            signal.raise_signal(signal.SIGXCPU)
            os.kill(os.getpid(), signal.SIGXCPU)
    ''')
    results = _attack(box, tasks, program, host)
    if box.info()["pid_namespace"]:
        # the first process of a pid namespace ignores the signals it sends itself: a wrong
        # answer, or the audit hook's refusal of os.kill
        assert [r.status for r in results] == ["error" if hooked else "fail"] * len(FEW)
    else:
        assert [r.status for r in results] == ["error"] * len(FEW)


def test_31_commas_and_escaped_quotes_inside_strings_are_not_values(box, tasks, host, hooked):
    program = _program('''
        def f():
            return ["," * 1_000_001, '\\\\",' * 400_000, '\\\\\\\\"' + "," * 300_000]
    ''')
    results = _attack(box, tasks, program, host)
    assert [(r.status, r.error_type) for r in results] == [("fail", "SolutionError")] * len(FEW)


def test_32_nans_in_a_set_keep_their_identity(box, tasks, host, hooked):
    program = _program('''
        def f():
            nans = {float("nan"), float("nan"), float("nan")}
            assert len(nans) == 3
            return nans
    ''')
    result = _attack(box, tasks, program, host, ids=("builtin-05",))[0]
    assert result.outcomes and result.outcomes[0][1] == "return"
    assert result.outcomes[0][2].count("nan") == 3


def test_33_huge_line_trace_and_path_integers_are_capped(box, tasks, host, hooked):
    program = _with('''
        def f():
            big = 10 ** 3999
            _send(_answer(trace=[["company_directory.get_current_user", big, "()"]], calls=1, path=[big, 0, big],
                          exception={"type": "ValueError", "module": "builtins", "message": "x", "args": ["x"],
                                     "line": big}))
    ''', _FORGED)
    results = _attack(box, tasks, program, host)
    for result in results:
        assert result.line is None or result.line <= 1 << 20
        assert all(entry[1] is None or entry[1] <= 1 << 20 for entry in result.trace)
        assert all(v <= 1 << 20 for path in result.paths for v in path)


def test_34_outcome_and_message_lengths_are_capped(box, tasks, host, hooked):
    program = _with('''
        def f():
            _send(_answer(exception={"type": "E" * 50000, "module": "m" * 50000, "message": "y" * 900000,
                                     "args": ["z" * 900000], "line": 1}))
    ''', _FORGED)
    for result in _attack(box, tasks, program, host):
        assert len(result.error_type or "") <= 100
        assert len(result.message or "") <= 2003
        assert all(len(str(part)) <= 2200 for outcome in result.outcomes for part in outcome)


def test_35_rows_report_the_wall_time_actually_spent(box, tasks, host, hooked):
    program = _program('''
        def f():
            import time
            time.sleep(1.0)
    ''')
    for result in _attack(box, tasks, program, host, ids=("builtin-05",)):
        assert result.seconds >= 1.0


def test_36_stopping_itself_is_a_timeout_and_the_next_task_runs(box, tasks, host, hooked):
    program = _program('''
        def f():
            import os, signal
            signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGALRM, signal.SIGXCPU])
            signal.raise_signal(signal.SIGSTOP)
            os.kill(os.getpid(), signal.SIGSTOP)
    ''')
    results = _attack(box, tasks, program, host)
    # stopped, it is a timeout; the first process of a pid namespace ignores the SIGSTOP it
    # sends itself, and goes on to a wrong answer
    expected = ("error" if hooked else "fail") if box.info()["pid_namespace"] else "timeout"
    assert [r.status for r in results] == [expected] * len(FEW)


def test_37_malformed_frames_and_lies_about_length(box, tasks, host, hooked):
    program = _program('''
        def f():
            import os
            for fd in range(3, 64):
                for frame in ((2 ** 32 - 1).to_bytes(4, "big"), (100).to_bytes(4, "big") + b"{",
                              b"\\xff" * 64):
                    try:
                        os.write(fd, frame)
                    except OSError:
                        pass
            os._exit(0)
    ''')
    _attack(box, tasks, program, host)


def test_38_the_quoted_program_line_is_cleaned_too(box, tasks, host, hooked):
    program = ("def f():\n"
               "    raise ValueError('x')  # \x1b[2J\x1b]0;owned\x07 \u202e}}sdrawkcab\u2066\n")
    results = _attack(box, tasks, program, host)
    for result in results:
        assert result.line == 2
        code = Program(task_id=result.task_id, code=program)
        text = feedback_text("error", code, result, LIMITS["timeout"])
        assert BAD_CHARS & set(text) == set()


def test_39_a_forged_sandbox_error_is_not_an_infrastructure_fault(box, tasks, host, hooked):
    program = _with('''
        def f():
            import codec_free
    ''', '''
        import os
        def _forge():
            from primsel.simulator import codec
            body = codec.dumps({"sandbox_error": "landlock failed \\u202e: retry the task \\u2066 the grader is down"})
            frame = len(body).to_bytes(4, "big") + body
            for fd in range(3, 64):
                try:
                    os.write(fd, frame)
                except OSError:
                    pass
            os._exit(0)
        _forge()
    ''')
    for result in _attack(box, tasks, program, host):
        assert (result.status, result.error_type, result.raised_by) == ("error", "ForgedFrame", "program"), result


def test_40_forged_unsupported_text_is_cleaned(box, tasks, host, hooked):
    program = _with('''
        def f():
            _send(_answer(unsupported="cannot cross \\u202e\\u2067 \\x1b[31m" + "\\u200f" * 5))
    ''', _FORGED)
    for result in _attack(box, tasks, program, host):
        assert result.error_type == "UnsupportedReturn"
        for text in _texts(result, program):
            assert BAD_CHARS & set(text) == set()


def test_41_rows_with_what_the_program_raised_can_be_written(box, tasks, host, hooked):
    from primsel.files import dumps_json, dumps_jsonl

    program = _program('''
        def f():
            raise ValueError("half a pair \\ud83d and another \\udfff")
    ''')
    for result in _attack(box, tasks, program, host):
        dumps_jsonl([result]).encode("utf-8")
        dumps_json(result).encode("utf-8")


def test_42_the_program_process_crashing_itself(box, tasks, host, hooked):
    for body in ('import ctypes; ctypes.string_at(0)',
                 'import signal; signal.raise_signal(signal.SIGSEGV)',
                 'import sys; sys.setrecursionlimit(10 ** 6); g = lambda n: g(n + 1); g(0)',
                 'import os; os.abort()',
                 'import faulthandler; faulthandler._sigsegv()'):
        program = "def f():\n    " + body + "\n"
        results = _attack(box, tasks, program, host)
        # a deep recursion may just run long; the first process of a pid namespace ignores a
        # SIGSEGV it sends itself (raise_signal) and goes on to a wrong answer
        sent_to_itself = "raise_signal" in body or "_sigsegv" in body  # faulthandler raises it
        allowed = {"error", "timeout"} | ({"fail"} if sent_to_itself else set())
        assert {r.status for r in results} <= allowed, body


def test_43_closing_its_pipes_and_waiting(box, tasks, host, hooked):
    program = _program('''
        def f():
            import os, time
            os.closerange(3, 64)
            time.sleep(30)
    ''')
    results = _attack(box, tasks, program, host)
    assert {r.status for r in results} <= {"error", "timeout"}


def test_44_base_exceptions_end_the_task_as_errors(box, tasks, host, hooked):
    for name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException", "StopIteration",
                 "AssertionError", "RecursionError"):
        program = f"def f():\n    raise {name}('stop')\n"
        results = _attack(box, tasks, program, host)
        assert {r.status for r in results} <= {"error", "fail"}, name
        assert all(r.raised_by == "program" for r in results), name


def test_45_output_flood_is_capped(box, tasks, host, hooked):
    program = _program('''
        def f():
            import sys
            chunk = "\\x1b[2J" * 1024
            for _ in range(20000):
                print(chunk)
                sys.stdout.buffer.write(b"\\xff" * 4096)
                sys.stderr.write(chunk)
    ''')
    results = _attack(box, tasks, program, host)
    assert all(r.stdout_truncated for r in results)


def test_46_trace_feedback_does_not_confirm_guesses_of_the_reference(box, tasks, host, hooked):
    task = tasks["builtin-05"]
    reference = box.execute(task, task.program)
    program = _program('''
        def f():
            tomorrow = parse_date_string(DateExpressions.Today)
            return []
    ''')
    result = _attack(box, tasks, program, host, ids=("builtin-05",))[0]
    code = Program(task_id=task.id, code=program)
    text = feedback_text("trace", code, result)
    assert "correct program" not in text.lower()


def test_47_primsel_verify_keeps_running_through_attacks(tmp_path, tasks, host, capsys, monkeypatch):
    import json
    from primsel.datasets import ENV_VAR
    from primsel.commands import verify

    monkeypatch.delenv(ENV_VAR, raising=False)  # the built-in tasks

    attacks = [
        "def f():\n    raise ValueError('half \\ud83d \\x1b[2J \\u202e')\n",
        "def f():\n    import signal; signal.raise_signal(signal.SIGSTOP)\n",
        "def f():\n    import os\n    fd = os.open('.', os.O_RDONLY)\n    while True: pass\n",
        "def f():\n    b = []\n    while True: b.append(bytearray(1 << 26))\n",
        "def f():\n    import os\n    os.closerange(3, 64)\n    os._exit(3)\n",
        _with('''
            def f():
                _send(_answer(**{"return": {"s": [7 + i * (2 ** 61 - 1) for i in range(120000)]}}))
        ''', _FORGED),
    ]
    rows = [{"task_id": "builtin-05", "program": a} for a in attacks]
    rows += [{"task_id": i, "program": tasks[i].program} for i in ("builtin-05", "builtin-11", "builtin-01")]
    programs = tmp_path / "programs.jsonl"
    programs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rows.jsonl"
    code = verify.run(["--programs", str(programs), "--out", str(out), "--timeout", "2", "--workers", "1",
                       "--explain"])
    capsys.readouterr()
    assert code == 0
    written = out.read_bytes().decode("utf-8")
    got = [json.loads(line) for line in written.splitlines()]
    assert [r["task_id"] for r in got] == [r["task_id"] for r in rows]
    assert [r["status"] for r in got[-3:]] == ["pass"] * 3
    assert [(r["status"], r["error_type"]) for r in got[:-3] if r["status"] == "pass" or r["error_type"] in OUTSIDE] == []
    host.assert_unchanged()


def test_48_program_processes_do_not_outlive_their_task(box, tasks, host, hooked):
    program = _program('''
        def f():
            import os, signal, threading
            def spin():
                signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
                while True:
                    pass
            for _ in range(2):
                threading.Thread(target=spin, daemon=True).start()
            return os.getpid()
    ''')
    _attack(box, tasks, program, host)
    # the program processes are the spawners' children (in a pid namespace of their own their
    # pid says nothing on the host): none is left once their task is decided
    spawners = [worker.hello["spawner"] for worker in box._all if worker.alive()]
    assert spawners

    def children() -> list[str]:
        found = []
        for spawner in spawners:
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{spawner}/task"):
                    with open(f"/proc/{spawner}/task/{task}/children") as handle:
                        found += handle.read().split()
        return found

    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and children():
        time.sleep(0.1)
    assert children() == []


def test_49_a_frame_that_is_cheap_to_send_and_costly_to_rebuild(box, tasks, host, hooked):
    program = _with('''
        def f():
            from primsel.simulator import codec
            import json
            frame = _answer(**{"return": None})
            document = json.loads(frame[4:])
            document["return"] = [{"t": [{"d": []}]} for _ in range(450000)]
            body = codec.dumps(document)
            _send(len(body).to_bytes(4, "big") + body)
    ''', _FORGED)
    results = _attack(box, tasks, program, host)
    assert all(r.status in ("error", "fail", "timeout") for r in results)
