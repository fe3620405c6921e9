"""Sandbox worker process: runs tasks for :class:`primsel.simulator.sandbox.Sandbox`.

Started as ``python -P -m primsel.simulator.worker SCRATCH`` (a clean interpreter, never a fork
of the caller). It imports the prompt-facing library, installs the reference import paths
(``aspera.apps_implementation.<module>`` ...) as aliases of our modules and forks its *spawner*
(:func:`primsel.simulator.program.serve_spawner`) before it imports the setup and check tools
or reads any request: program processes are forked from that clean copy. Then it serves
requests: one JSON line in on stdin, one JSON line out on stdout. It dies with the process that
started it (``PR_SET_PDEATHSIG``) and removes its scratch directory on every way out.

For every task it has the spawner fork one *program process* per (SIP, EP) pair
(:mod:`primsel.simulator.program`) and runs the *judge* itself (:mod:`primsel.simulator.judge`):
the setup and evaluation programs run here, and each call of ``executable`` goes over a pair of
pipes to the program process. No program code ever runs in the worker, and the program
processes have no descriptor leading to the caller: they cannot speak for the verdict. When the
task is decided the spawner SIGKILLs and reaps its program processes.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import importlib
import importlib.machinery
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import types
from typing import Any

#: Seconds the spawner may take to answer before the worker gives up on it.
SPAWNER_TIMEOUT = 30.0
#: Address space the judge may add to what the worker holds once started, in MiB (RLIMIT_AS):
#: a program's answer (at most 16 MiB of JSON, a million values) decodes in far less.
JUDGE_MEMORY_MB = 2048


class ScratchError(RuntimeError):
    """The worker's scratch directory cannot hold a program's working directory (restart)."""


def install_aliases(groups: tuple[str, ...]) -> None:
    """Make the reference implementation's module paths import our modules (this process only).

    ``groups`` chooses which: ``"apps"`` (and the execution-context module), ``"setup_tools"``,
    ``"check_tools"``. Modules not yet imported are imported.
    """
    from primsel.simulator.layout import APPS, CHECK_TOOLS, SETUP_TOOLS

    aliases = {}
    if "apps" in groups:
        aliases.update({f"aspera.apps_implementation.{m}": f"primsel.simulator.apps.{m}" for m in APPS})
        aliases["aspera.simulation.execution_context"] = "primsel.simulator.state"
    if "setup_tools" in groups:
        for m in SETUP_TOOLS:
            aliases[f"aspera.runtime_state_generation_tools_implementation.{m}"] = f"primsel.simulator.setup_tools.{m}"
    if "check_tools" in groups:
        for m in CHECK_TOOLS:
            aliases[f"aspera.execution_evaluation_tools_implementation.{m}"] = f"primsel.simulator.check_tools.{m}"
        aliases["aspera.execution_evaluation_tools.time_utils"] = "primsel.simulator.check_tools.time_utils"
    for alias, target in aliases.items():
        module = sys.modules.get(target)
        if module is None:
            try:
                module = importlib.import_module(target)
            except Exception:
                continue
        sys.modules[alias] = module
        parent_name, _, child = alias.rpartition(".")
        setattr(_package(parent_name), child, module)


def _package(name: str) -> types.ModuleType:
    """An empty package module registered under ``name`` (and its parents)."""
    existing = sys.modules.get(name)
    if existing is not None:
        return existing
    package = types.ModuleType(name)
    package.__path__ = []
    package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    sys.modules[name] = package
    parent_name, _, child = name.rpartition(".")
    if parent_name:
        setattr(_package(parent_name), child, package)
    return package


class SpawnerError(RuntimeError):
    """The spawner died or stopped answering (the worker cannot make program processes)."""


class Spawner:
    """The worker's handle on its spawner: a fork made before any task reached the worker.

    Messages go over a ``SOCK_SEQPACKET`` socket pair (one message, with its descriptors, per
    send). Requests are answered in order; :meth:`spawn` and :meth:`end` only send, and the
    answers are read when needed (:meth:`pids`, :meth:`statuses`), so the spawner forks while
    the worker goes on.

    Parameters
    ----------
    readable : what Landlock leaves readable to program processes (None: no Landlock).
    user : ``(uid, gid)`` program processes run as when the worker runs as root.
    runtime : what program processes must be able to reach (as ``user``), Landlock or not.
    scratch : the worker's scratch directory (where the spawner stages its mounts).
    """

    def __init__(
        self,
        readable: list[str] | None,
        user: tuple[int, int] | None = None,
        runtime: list[str] | None = None,
        scratch: str | None = None,
    ) -> None:
        from primsel.simulator import program

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            program.serve_spawner(theirs, readable, user, runtime, scratch)
        theirs.close()
        self.pid = pid
        self.socket = ours
        self.pending: collections.deque[str] = collections.deque()  # kinds of unread answers

    def _send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        try:
            socket.send_fds(self.socket, [json.dumps(message).encode()], fds or [])
        except OSError as exc:
            raise SpawnerError(f"the spawner cannot be reached: {exc}") from None
        self.pending.append(message["op"])

    def _answer(self) -> tuple[str, dict[str, Any]]:
        deadline = time.monotonic() + SPAWNER_TIMEOUT
        try:
            remaining = deadline - time.monotonic()
            if not select.select([self.socket], [], [], remaining)[0]:
                raise SpawnerError("the spawner stopped answering")
            data = self.socket.recv(1 << 20)
        except OSError as exc:
            raise SpawnerError(f"the spawner cannot be reached: {exc}") from None
        if not data:
            raise SpawnerError("the spawner died")
        return self.pending.popleft(), json.loads(data)

    def spawn(self, to_program: int, from_program: int, limits: dict[str, Any]) -> None:
        """Ask for a program process reading ``to_program`` and writing ``from_program``.

        The caller may close its copies of both descriptors as soon as this returns: the message
        carries copies of its own to the spawner (``SCM_RIGHTS``).
        """
        self._send({"op": "spawn", **limits}, [to_program, from_program])

    def end(self, pids: list[int]) -> None:
        """Ask the spawner to SIGKILL and reap program processes (answer read by :meth:`statuses`)."""
        if pids:
            self._send({"op": "end", "pids": pids})

    def pids(self, count: int) -> list[int]:
        """The pids of the last ``count`` spawn requests (earlier unread answers are dropped)."""
        while len(self.pending) > count:
            self._answer()
        return [int(self._answer()[1]["pid"]) for _ in range(count)]

    def statuses(self) -> dict[int, tuple[int | None, float]]:
        """``{pid: (wait status, CPU seconds)}`` from the answer to the last :meth:`end`.

        Earlier answers are dropped; a process that could not be reaped has status None.
        """
        answer: dict[str, Any] = {}
        while self.pending:
            kind, answer = self._answer()
        cpu = answer.get("cpu", {})
        return {int(pid): (status, float(cpu.get(pid, 0.0))) for pid, status in answer.get("status", {}).items()}


# ----------------------------------------------------------------------------------------------
# One task

#: The worker's pid and its scratch directory (for the SIGTERM handler, which cleans up by
#: itself instead of unwinding through whatever code it interrupts).
_worker: dict[str, Any] = {"pid": None, "scratch": None}


def _result(status: str, message: str | None = None, error_type: str | None = None) -> dict[str, Any]:
    """A verdict made by the worker itself (no call trace): a fault outside the program."""
    return {"status": status, "error_type": error_type, "message": message, "line": None, "raised_by": "task",
            "called_primitives": [], "trace": [], "stdout_truncated": False}  # fmt: skip


def run_request(
    library: Any, spawner: Spawner, request: dict[str, Any], scratch: str | None = None
) -> dict[str, Any]:
    """Run one task: program processes from the spawner, the judge here; clean up.

    Parameters
    ----------
    library : the judge's library (:class:`primsel.simulator.judge.JudgeLibrary`).
    spawner : where program processes come from.
    request : ``task`` (dict), ``program``, ``entry``, ``timeout`` (s, the program's limit over
        the whole task), ``judge_timeout`` (s, the judge's own limit), ``memory_mb``,
        ``stdout_cap``, ``seccomp``, ``landlock``, ``audit_hook`` (optional, default true).
    scratch : directory in which the program processes' throwaway working directories are made.

    Returns
    -------
    The verdict dict (``status``, ``error_type``, ``message``, ``line``, ``called_primitives``,
    ``trace``, ``stdout_truncated``, ``seconds``).

    Raises
    ------
    SpawnerError : the spawner is gone (the worker must stop).
    """
    from primsel.simulator import judge

    start = time.monotonic()
    pairs = len(request["task"]["setup_programs"])
    limits = {key: request[key] for key in ("memory_mb", "timeout", "stdout_cap", "seccomp", "landlock")}
    limits["audit_hook"] = request.get("audit_hook", True) is not False
    workdirs: list[str] = []
    fds: list[int] = []
    channels: list[tuple[int, int]] = []
    spawned = 0
    try:
        for _ in range(pairs):
            to_read, to_write = os.pipe()
            from_read, from_write = os.pipe()
            fds.extend((to_read, to_write, from_read, from_write))
            channels.append((to_write, from_read))
            try:
                workdirs.append(tempfile.mkdtemp(prefix="primsel-program-", dir=scratch))
            except OSError as exc:
                raise ScratchError(f"no working directory for the program could be made in {scratch}: {exc}") from exc
            spawner.spawn(to_read, from_write, {**limits, "workdir": workdirs[-1]})
            spawned += 1
            # The message holds its own copies of the program's ends: ours go now, and the
            # judge starts on the setup program while the spawner forks (its pids are read at
            # the end, to clean up).
            for fd in (to_read, from_write):
                os.close(fd)
                fds.remove(fd)
        verdict = judge.judge(library, request, channels)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            spawner.end(spawner.pids(spawned) if spawned else [])
        finally:
            for workdir in workdirs:
                shutil.rmtree(workdir, ignore_errors=True)
    if verdict["error_type"] == "ProcessDied":
        # SIGKILL is the spawner's own clean-up; any other end is how the program's process died.
        statuses = [(s, cpu) for s, cpu in spawner.statuses().values() if s is not None]
        ended = [(s, cpu) for s, cpu in statuses if not (os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL)]
        # SIGXCPU is a timeout only when the CPU time really reached the limit (a program can
        # send itself SIGXCPU at once). The first process of a pid namespace ignores SIGXCPU;
        # the kernel SIGKILLs it at the hard limit, a second later, which reads the same.
        killed = [(s, cpu) for s, cpu in statuses
                  if os.WIFSIGNALED(s) and os.WTERMSIG(s) in (signal.SIGXCPU, signal.SIGKILL)]
        if any(cpu >= float(request["timeout"]) for _, cpu in killed):
            verdict.update(status="timeout", error_type=None, message="CPU time limit exceeded")
        elif ended:
            verdict["message"] = f"the program's process {_how(ended[0][0])}"
    verdict["seconds"] = time.monotonic() - start
    return verdict


def _limit_memory(megabytes: int) -> None:
    """Limit this process's address space to what it has now plus ``megabytes`` MiB (RLIMIT_AS)."""
    import resource

    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/statm", encoding="ascii") as handle:
            current = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        wanted = current + megabytes * (1 << 20)
        if hard != resource.RLIM_INFINITY:
            wanted = min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)} before answering"


def _exit_on_signal(signum: int, frame: Any) -> None:
    """SIGTERM (the caller died): remove the scratch directory and exit.

    Done here rather than by raising SystemExit, which could land inside a ``finally`` block
    and skip the rest of its clean-up. The spawner and the program processes die with us.
    """
    if _worker["pid"] == os.getpid():
        if _worker["scratch"]:
            shutil.rmtree(_worker["scratch"], ignore_errors=True)
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Serve requests from stdin until it closes.

    ``argv[0]``, if given, is the scratch directory, ``argv[1]`` the ``UID:GID`` program
    processes run as when the worker runs as root (default 65534:65534, nobody/nogroup).

    The scratch directory is removed on every way out: stdin closed, the caller gone while a
    reply is written (broken pipe), or SIGTERM (sent by the kernel when the caller dies).
    """
    from primsel.processes import PR_SET_PDEATHSIG, prctl

    argv = sys.argv[1:] if argv is None else argv
    scratch = argv[0] if argv else None
    user = tuple(int(v) for v in argv[1].split(":")) if len(argv) > 1 else None
    _worker.update(pid=os.getpid(), scratch=scratch)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles Ctrl-C and closes our stdin
    try:
        with contextlib.suppress(OSError):
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # die with the caller (stdin EOF also ends us)
        return _serve(scratch, user)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _serve(scratch: str | None, user: tuple[int, ...] | None = None) -> int:
    from primsel.simulator import landlock, program, seccomp

    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # stray prints must not corrupt the protocol
    # The spawner is forked now: the library and the program side are imported, the setup and
    # check tools are not, and no request has been read.
    apps = program.load_apps()
    install_aliases(("apps",))
    seccomp_available, seccomp_detail = seccomp.status()
    landlock_available, landlock_detail = landlock.status()
    runtime = program.readable_paths(scratch)
    spawner = Spawner(runtime if landlock_available else None, user, runtime, scratch)
    from primsel.simulator.judge import JudgeLibrary

    library = JudgeLibrary(apps)
    install_aliases(("setup_tools", "check_tools"))
    _limit_memory(JUDGE_MEMORY_MB)  # the spawner, forked before, keeps its own limits
    hello = {
        "ready": True,
        "pid": os.getpid(),
        "spawner": spawner.pid,
        "seccomp": seccomp_available,
        "seccomp_detail": seccomp_detail,
        "landlock": landlock_available,
        "landlock_detail": landlock_detail,
        "missing": library.missing,
    }
    try:
        replies.write(json.dumps(hello).encode() + b"\n")
        replies.flush()
        for line in requests:
            stop = False
            try:
                request = json.loads(line)
                reply = run_request(library, spawner, request, scratch)
            except SpawnerError as exc:  # no clean parent for program processes: restart
                reply = _result("error", f"sandbox worker failure: {exc}", "SandboxError")
                stop = True
            except ScratchError as exc:  # the caller restarts us with a new scratch directory
                reply = _result("error", str(exc), "ScratchError")
                stop = True
            except Exception as exc:  # a bad request must not kill the worker
                reply = _result("error", f"sandbox worker failure: {exc}", "SandboxError")
            if stop:
                reply["restart"] = True  # the caller stops this worker and starts a new one
            replies.write(json.dumps(reply).encode() + b"\n")
            replies.flush()
            if stop:
                return 1
    except BrokenPipeError:  # the caller is gone
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
