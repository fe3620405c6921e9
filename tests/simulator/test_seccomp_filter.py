"""The seccomp filter on its own, in a throwaway interpreter (host-side targets are harmless).

Every probe runs in a fresh ``python`` that loads the filter and then tries a system call. The
targets are a ``sleep`` process started by the test, a file in ``tmp_path`` or the probe itself,
and the arguments change nothing even when a call is (wrongly) allowed: signal 0 only checks
that a process exists, IPC look-ups name keys that do not exist and create nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from primsel.simulator import seccomp

pytestmark = pytest.mark.skipif(not seccomp.status()[0], reason="seccomp is not available here")

PROBE = textwrap.dedent(
    """\
    import array, ctypes, errno, fcntl, json, os, resource, sys
    from primsel.simulator import seccomp

    target, path = int(sys.argv[1]), sys.argv[2]
    numbers = {name: seccomp.syscall_number(name) for name in (
        "rt_sigqueueinfo", "rt_tgsigqueueinfo", "tgkill", "tkill", "kill", "shmget", "msgget",
        "semget", "mq_open", "personality", "prctl", "setsid", "getpgid", "getsid", "getpriority",
        "inotify_init1", "fadvise64", "getxattr", "listxattr", "flock", "readahead", "mincore",
        "statfs", "capget", "unshare")}
    fd = os.open(path, os.O_RDONLY)
    seccomp.install()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def raw(name, *args):
        ctypes.set_errno(0)
        args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        result = libc.syscall(ctypes.c_long(numbers[name]), *args)
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    def raw_number(number, *args):
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    def call(function, *args):
        try:
            function(*args)
            return "ok"
        except OSError as exc:
            return errno.errorcode[exc.errno]

    me = os.getpid()
    outcomes = {
        # FS_IOC_SETFLAGS with the flags a new file has (0): allowed, it would change nothing.
        "ioctl FS_IOC_SETFLAGS": call(fcntl.ioctl, fd, 0x40086602, array.array("i", [0])),
        "ioctl TCGETS (isatty)": "ok" if os.isatty(fd) is False else "bad",
        "set_inheritable": call(os.set_inheritable, fd, True),
        "setpriority": call(os.setpriority, os.PRIO_PROCESS, target, 0),
        "sched_setaffinity": call(os.sched_setaffinity, target, {0}),
        "sched_setscheduler": call(os.sched_setscheduler, target, os.SCHED_OTHER, os.sched_param(0)),
        "sched_setparam": call(os.sched_setparam, target, os.sched_param(0)),
        "setpgid": call(os.setpgid, 0, 0),
        "setsid": raw("setsid"),
        "prctl PR_SET_PDEATHSIG": raw("prctl", 1, 0, 0, 0, 0),
        "fcntl F_SETOWN": call(fcntl.fcntl, fd, fcntl.F_SETOWN, target),
        "kill other": raw("kill", target, 0),
        "kill own group": raw("kill", 0, 0),
        "tkill other": raw("tkill", target, 0),
        "tgkill other": raw("tgkill", target, target, 0),
        "rt_sigqueueinfo other": raw("rt_sigqueueinfo", target, 0, 0),
        "rt_tgsigqueueinfo other": raw("rt_tgsigqueueinfo", target, target, 0, 0),
        "kill self": raw("kill", me, 0),
        "tgkill self": raw("tgkill", me, me, 0),
        "shmget": raw("shmget", 0x7072696D, 4096, 0),
        "msgget": raw("msgget", 0x7072696D, 0),
        "semget": raw("semget", 0x7072696D, 1, 0),
        "mq_open": raw("mq_open", ctypes.c_char_p(b"primsel-none"), os.O_RDONLY, 0, 0),
        "personality query": raw("personality", 0xFFFFFFFF),
        "fcntl F_GETFL": call(fcntl.fcntl, fd, fcntl.F_GETFL),
        "fcntl F_SETLK (read lock)": call(fcntl.lockf, fd, fcntl.LOCK_SH | fcntl.LOCK_NB),
        "getpgid other": raw("getpgid", target),
        "getsid other": raw("getsid", target),
        "getpriority other": raw("getpriority", 0, target),
        "getpgid self": raw("getpgid", 0),
        "getsid self": raw("getsid", me),
        "sched_getaffinity self": call(os.sched_getaffinity, 0),
        "sched_getaffinity other": call(os.sched_getaffinity, target),
        "inotify_init1": raw("inotify_init1", 0),
        "fadvise64 DONTNEED": raw("fadvise64", fd, 0, 0, 4),
        "readahead": raw("readahead", fd, 0, 4096),
        "mincore": raw("mincore", 0, 4096, 0),
        "getxattr": raw("getxattr", ctypes.c_char_p(path.encode()), ctypes.c_char_p(b"user.x"), 0, 0),
        "listxattr": raw("listxattr", ctypes.c_char_p(path.encode()), 0, 0),
        "flock": raw("flock", fd, 1 | 4),
        "statfs": raw("statfs", ctypes.c_char_p(path.encode()), ctypes.create_string_buffer(256)),
        "capget": raw("capget", 0, 0),
        "unshare user namespace": raw("unshare", 0x10000000),
        "open for writing": call(os.open, path, os.O_WRONLY),
        "open O_TMPFILE": call(os.open, os.path.dirname(path), os.O_TMPFILE | os.O_RDWR),
        "prlimit set own": call(resource.prlimit, 0, resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)),
        "prlimit read own": call(resource.prlimit, 0, resource.RLIMIT_NOFILE),
        "prlimit read other": call(resource.prlimit, target, resource.RLIMIT_NOFILE),
        # numbers newer than the list: fchmodat2, setxattrat, removexattrat, file_setattr,
        # listmount, statmount, and numbers no kernel has yet (no argument makes them harmless
        # when wrongly allowed: the first is an invalid directory descriptor)
        **{f"syscall {n}": raw_number(n, -1, 0, 0, 0) for n in (452, 463, 466, 469, 457, 458, 470, 511, 1000)},
    }
    print(json.dumps(outcomes))
    """
)


def test_filter_allows_only_its_list(tmp_path, sleeper):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(probe), str(sleeper), str(probe)], capture_output=True, text=True, check=True
    )
    outcomes = json.loads(out.stdout)
    allowed = {"ioctl TCGETS (isatty)", "set_inheritable", "kill self", "tgkill self", "fcntl F_GETFL",
               "getpgid self", "getsid self", "sched_getaffinity self", "prlimit read own"}
    assert {name for name, outcome in outcomes.items() if outcome == "ok"} == allowed
    assert outcomes["ioctl FS_IOC_SETFLAGS"] == "ENOTTY"
    assert {outcome for name, outcome in outcomes.items() if name not in allowed} == {"ENOTTY", "EPERM"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.py"]


def test_filter_keeps_threads_working(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(
        "import threading\nfrom primsel.simulator import seccomp\nseccomp.install()\n"
        "results = []\nthreads = [threading.Thread(target=results.append, args=(i,)) for i in range(4)]\n"
        "[t.start() for t in threads]\n[t.join() for t in threads]\nprint(sorted(results))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0, 1, 2, 3]"
