"""Process helpers shared by the layers that start child processes (Linux ``prctl``).

The sandbox (:mod:`primsel.simulator`) and the local model server
(:mod:`primsel.llm.local`) both make their children die with the process that started
them, so that killing primsel never leaves a program or a model server running.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal

#: ``PR_SET_PDEATHSIG`` (``linux/prctl.h``): the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: ``PR_SET_DUMPABLE`` (``linux/prctl.h``): 0 forbids ptrace and ``/proc/<pid>/mem`` by others.
PR_SET_DUMPABLE = 4
#: ``PR_CAPBSET_DROP`` (``linux/prctl.h``): remove a capability from the bounding set.
PR_CAPBSET_DROP = 24
#: ``PR_SET_NO_NEW_PRIVS`` (``linux/prctl.h``): no ``execve`` can grant privileges again.
PR_SET_NO_NEW_PRIVS = 38
#: ``PR_CAP_AMBIENT`` and its ``PR_CAP_AMBIENT_CLEAR_ALL`` operation (``linux/prctl.h``).
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library (``use_errno``), loaded once per process and inherited by forks: loading it
    takes a few hundred microseconds, which a sandbox fork per program should not pay."""
    return ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int, value2: int = 0) -> None:
    """``prctl(option, value, value2, 0, 0)`` through libc (Linux).

    Raises
    ------
    OSError : the call failed (errno of the call).
    """
    if libc().prctl(*(ctypes.c_ulong(v) for v in (option, value, value2, 0, 0))) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl({option}) failed: {os.strerror(error)}")


def die_with_parent(parent_pid: int) -> None:
    """Ask to be SIGKILLed when the parent dies; exit at once (status 70) if it already has.

    Call it in the child right after the fork (e.g. as ``subprocess.Popen``'s ``preexec_fn``),
    with the parent's pid taken before the fork.

    Raises
    ------
    OSError : ``prctl`` failed.
    """
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(70)
