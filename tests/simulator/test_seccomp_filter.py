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
    import array, ctypes, errno, fcntl, json, os, sys
    from primsel.simulator import seccomp

    target, path = int(sys.argv[1]), sys.argv[2]
    numbers = {name: seccomp.syscall_number(name) for name in (
        "rt_sigqueueinfo", "rt_tgsigqueueinfo", "tgkill", "tkill", "kill", "shmget", "msgget",
        "semget", "mq_open", "personality", "prctl", "setsid")}
    fd = os.open(path, os.O_RDONLY)
    seccomp.install()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def raw(name, *args):
        ctypes.set_errno(0)
        args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
        result = libc.syscall(ctypes.c_long(numbers[name]), *args)
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
        "setpriority": call(os.setpriority, os.PRIO_PROCESS, target, os.getpriority(os.PRIO_PROCESS, target)),
        "sched_setaffinity": call(os.sched_setaffinity, target, os.sched_getaffinity(target)),
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
    }
    print(json.dumps(outcomes))
    """
)


def test_filter_denies_host_changes_signals_ipc_and_prctl(tmp_path, sleeper):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(probe), str(sleeper), str(probe)], capture_output=True, text=True, check=True
    )
    outcomes = json.loads(out.stdout)
    allowed = {"ioctl TCGETS (isatty)", "set_inheritable", "kill self", "tgkill self", "fcntl F_GETFL"}
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
