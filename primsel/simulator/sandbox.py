"""Run untrusted programs against tasks: the verdict is decided where the program never runs.

A :class:`Sandbox` keeps a pool of long-lived worker processes (``python -P -m
primsel.simulator.worker``, started with :mod:`subprocess` in a clean interpreter, never a fork
of the caller; they die with it). Each worker is a *judge* (:mod:`primsel.simulator.judge`): it
runs the task's setup and evaluation programs itself, and the program under test runs in a
separate *program process* per (SIP, EP) pair (:mod:`primsel.simulator.program`), forked from a
spawner that never held anything of a task, confined (its own session, resource limits, no
privileges, Landlock, a seccomp allow-list, an audit hook: :mod:`primsel.simulator.isolation`)
before the program text reaches it. World state, return values and exceptions cross as checked, typed data
(:mod:`primsel.simulator.codec`). So every program starts from a pristine process, nothing it
does (rebinding a primitive, hooking the interpreter, deleting events) reaches the judge or the
next task, and :func:`sandbox_info` tells what is active on this machine. Program text is
size-capped and parsed at most once in the caller.

Verdicts follow docs/architecture.md ("Statuses"): ``pass``, ``fail`` (``SolutionError`` or
``AssertionError`` escaped the EP), ``requires_user_input``, ``error`` (any other exception,
with its class name and the program line it was raised at; ``UnsupportedReturn`` for a value
that cannot cross, ``EvaluatorError`` for a fault of the judge), ``timeout`` (the program's time
over all the task's pairs exceeded the limit; its process is killed) and ``no_program``.
"""

from __future__ import annotations

import ast
import collections
import concurrent.futures
import contextlib
import json
import math
import os
import queue
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from primsel.checks import MAX_TIMEOUT
from primsel.types import ExecutionResult, Task

#: Seconds a worker may take to start (import the library) before it is declared broken.
STARTUP_TIMEOUT = 60.0
#: Seconds the judge's own work (setup and evaluation programs) may take per task.
JUDGE_TIMEOUT = 60.0
#: Seconds a worker may take beyond the task's time limits to answer before it is restarted.
ANSWER_GRACE = 10.0
#: Environment variables passed on to workers (everything else, e.g. API keys, is dropped).
_ENV_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "SYSTEMROOT")
#: At most this many workers per CPU; more only adds processes competing for the same cores.
MAX_WORKERS_PER_CPU = 4
#: Default cap on a program's size, in bytes of UTF-8.
PROGRAM_CAP = 256 * 1024
#: Scratch directories are named ``primsel-worker-<pid of the sandbox's process>-<random>``.
_SCRATCH_PREFIX = "primsel-worker-"
_SCRATCH_NAME = re.compile(r"primsel-worker-(\d+)-")


def sandbox_info(seccomp: bool = True, landlock: bool = True, user: tuple[int, int] = (65534, 65534)) -> dict[str, Any]:
    """What isolation a :class:`Sandbox` applies on this machine.

    Parameters
    ----------
    seccomp : whether the sandbox would be asked to use the seccomp filter.
    landlock : whether the sandbox would be asked to use Landlock.
    user : ``(uid, gid)`` program processes would run as when the sandbox runs as root.

    Returns
    -------
    dict with ``isolation`` (a sentence), ``seccomp`` (bool: the filter will be loaded),
    ``seccomp_detail`` (what it denies, or why it is off), ``landlock`` and ``landlock_detail``
    (the same for Landlock), ``audit_hook`` (True), ``privileges`` (who program processes run as), ``rlimits`` (names of the resource limits
    set in each task's process), ``process_list_hidden`` (bool: program processes find no
    process in ``/proc``; root with ``CAP_SYS_ADMIN`` only), ``process_list_detail``
    (how, or why not), ``pid_namespace`` (bool: each program process is the first process of a
    pid namespace of its own; root with ``CAP_SYS_ADMIN`` only), ``pid_namespace_detail`` and
    ``platform``.
    """
    from primsel.simulator import isolation
    from primsel.simulator import landlock as landlock_module
    from primsel.simulator import seccomp as seccomp_module

    hidden, hidden_detail = isolation.process_list_status()
    namespaced, namespace_detail = isolation.pid_namespace_status()
    layers = {}
    for name, wanted, module in (("seccomp", seccomp, seccomp_module), ("landlock", landlock, landlock_module)):
        if not sys.platform.startswith("linux"):
            layers[name] = (False, f"{name} needs Linux (this is {sys.platform})")
        elif not wanted:
            layers[name] = (False, "disabled by the caller")
        else:
            layers[name] = module.status()
    return {
        "isolation": "each task runs as a judge process (setup and evaluation programs) and one program "
        "process per pair, each in its own session, forked from long-lived worker interpreters",
        "seccomp": layers["seccomp"][0],
        "seccomp_detail": layers["seccomp"][1],
        "landlock": layers["landlock"][0],
        "landlock_detail": layers["landlock"][1],
        "audit_hook": True,
        "privileges": (f"program processes run as uid {user[0]}, gid {user[1]}, no supplementary groups"
                       if os.geteuid() == 0 else f"program processes run as this user (uid {os.getuid()})")
        + ", with no capabilities (bounding, permitted, effective, inheritable and ambient sets empty) "
        "and no_new_privs",
        "rlimits": ["RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE=0", "RLIMIT_NOFILE", "RLIMIT_CORE=0",
                    f"RLIMIT_NPROC={isolation.NPROC}"],
        "process_list_hidden": hidden,
        "process_list_detail": hidden_detail,
        "pid_namespace": namespaced,
        "pid_namespace_detail": namespace_detail,
        "platform": sys.platform,
    }


class SandboxError(RuntimeError):
    """A worker process could not be started (the message says why)."""


class _Worker:
    """One worker process and its line protocol (used by one thread at a time)."""

    def __init__(self, env: dict[str, str], user: tuple[int, int] = (65534, 65534)) -> None:
        self.env = env
        self.user = user
        self.process: subprocess.Popen[bytes] | None = None
        self.buffer = b""
        self.hello: dict[str, Any] = {}
        self.scratch: str | None = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        self.stop()
        # The tasks' working directories go here; removed when the worker stops, by the worker
        # itself on its way out, or (if both died) by the next Sandbox (the name holds our pid).
        self.scratch = tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-")
        self.process = subprocess.Popen(
            # -P: the caller's working directory is not put on the worker's sys.path.
            [sys.executable, "-P", "-m", "primsel.simulator.worker", self.scratch, "%d:%d" % self.user],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.env,
            close_fds=True,
        )
        self.buffer = b""
        line = self._read_line(time.monotonic() + STARTUP_TIMEOUT)
        if line is None:
            self.stop()
            raise SandboxError("the sandbox worker did not start (python -m primsel.simulator.worker)")
        self.hello = json.loads(line)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            with contextlib.suppress(OSError):
                process.stdout.close()
        scratch, self.scratch = self.scratch, None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.kill()
        self.stop()

    def request(self, payload: dict[str, Any], deadline_s: float) -> dict[str, Any] | None:
        """Send one request and wait for its answer; None if the worker died or hung (it is stopped)."""
        for attempt in range(2):
            if not self.alive():
                self.start()
            try:
                self.process.stdin.write(json.dumps(payload).encode() + b"\n")
                self.process.stdin.flush()
                break
            except (BrokenPipeError, OSError):
                self.kill()
                if attempt:
                    return None
        line = self._read_line(time.monotonic() + deadline_s)
        try:
            reply = json.loads(line) if line is not None else None
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            return None
        return reply

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def remove_stale_scratch(directory: str | None = None) -> list[str]:
    """Remove scratch directories left by sandboxes whose process is gone (e.g. SIGKILLed).

    Parameters
    ----------
    directory : where to look (default: the system's temporary directory).

    Returns
    -------
    The paths removed. Only directories named ``primsel-worker-<pid>-...``, owned by this user,
    whose ``<pid>`` is not a running process, are touched (symbolic links never are).
    """
    directory = directory or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            match = _SCRATCH_NAME.match(entry.name)
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != os.getuid() or _alive(int(match.group(1))):
                    continue
                shutil.rmtree(entry.path)
                removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or a number we cannot check): leave it
    return True


def _stop_all(workers: list[_Worker], executor: list[concurrent.futures.ThreadPoolExecutor]) -> None:
    for worker in workers:
        worker.stop()
    for pool in executor:
        pool.shutdown(wait=False, cancel_futures=True)


class Sandbox:
    """Runs programs against tasks in isolated processes, in parallel over a pool of workers.

    Use as a context manager (or call :meth:`close`). Thread-safe: several threads may call
    :meth:`execute` at once; at most ``workers`` tasks run at a time. Workers start on first use.

    Parameters
    ----------
    workers : number of worker processes (default: the number of CPUs); more than
        :data:`MAX_WORKERS_PER_CPU` per CPU are capped to that (``self.workers`` says how many).
    timeout : wall-clock limit of the program per task in seconds, covering all its (SIP, EP)
        pairs (the time the judge waits for the program process); finite, > 0 and <=
        :data:`primsel.checks.MAX_TIMEOUT` (one day).
    memory_mb : address space a task may add on top of the worker's, in MiB (RLIMIT_AS).
    stdout_cap : characters of the program's stdout/stderr kept; beyond that the output is
        dropped and the result says ``stdout_truncated``.
    program_cap : largest program accepted, in bytes of UTF-8; a larger one gets ``error`` /
        ``ProgramTooLarge`` without being parsed.
    seccomp : load the seccomp filter in each task's process (when the machine supports it).
    landlock : restrict each task's process with Landlock (when the kernel supports it).
    judge_timeout : wall-clock limit per task of the judge's own work (the setup and evaluation
        programs outside program calls), in seconds; past it the task is ``error`` /
        ``EvaluatorError``.
    program_user : ``(uid, gid)`` the program processes run as when the sandbox runs as root
        (default nobody/nogroup, 65534/65534); both in ``[1, 2**32 - 2]``. An ordinary user's
        sandbox runs them as that user. Either way they have no capabilities.
    audit_hook : add the Python audit hook in each program process (a convenience layer that
        turns blocked operations into a ``PermissionError`` at the program's line); switched off
        only to show that the layers beneath hold without it.

    Raises
    ------
    ValueError : a parameter out of range.
    """

    def __init__(
        self,
        workers: int | None = None,
        timeout: float = 10.0,
        memory_mb: int = 1024,
        stdout_cap: int = 65536,
        *,
        program_cap: int = PROGRAM_CAP,
        seccomp: bool = True,
        landlock: bool = True,
        judge_timeout: float = JUDGE_TIMEOUT,
        program_user: tuple[int, int] = (65534, 65534),
        audit_hook: bool = True,
    ) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
            raise ValueError(f"timeout must be a finite number of seconds in (0, {MAX_TIMEOUT:g}], got {timeout}")
        if not (math.isfinite(judge_timeout) and 0 < judge_timeout <= MAX_TIMEOUT):
            raise ValueError(f"judge_timeout must be a finite number of seconds in (0, {MAX_TIMEOUT:g}], got {judge_timeout}")
        if memory_mb < 16:
            raise ValueError(f"memory_mb must be >= 16, got {memory_mb}")
        if stdout_cap < 0:
            raise ValueError(f"stdout_cap must be >= 0, got {stdout_cap}")
        if program_cap < 1:
            raise ValueError(f"program_cap must be >= 1, got {program_cap}")
        if not (
            isinstance(program_user, tuple) and len(program_user) == 2
            and all(type(v) is int and 0 < v < 2**32 - 1 for v in program_user)
        ):  # fmt: skip
            raise ValueError(f"program_user must be (uid, gid), both in [1, 2**32 - 2] (not root), got {program_user!r}")
        cpus = os.cpu_count() or 1
        self.workers = min(workers or cpus, MAX_WORKERS_PER_CPU * cpus)
        self.timeout = float(timeout)
        self.judge_timeout = float(judge_timeout)
        self.memory_mb = int(memory_mb)
        self.stdout_cap = int(stdout_cap)
        self.program_cap = int(program_cap)
        self.seccomp = seccomp
        self.landlock = landlock
        self.program_user = program_user
        self.audit_hook = bool(audit_hook)
        self._lock = threading.Lock()
        self._all: list[_Worker] = []
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._executor: list[concurrent.futures.ThreadPoolExecutor] = []
        self._closed = False
        self._finalizer = weakref.finalize(self, _stop_all, self._all, self._executor)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        self._shutdown(kill=exc_type is not None)  # on an exception (e.g. Ctrl-C) do not wait

    def info(self) -> dict[str, Any]:
        """:func:`sandbox_info` for this sandbox's settings."""
        info = sandbox_info(self.seccomp, self.landlock, self.program_user)
        info["audit_hook"] = self.audit_hook
        return info

    def execute(self, task: Task, program: str | None, entry_point: str | None = None) -> ExecutionResult:
        """Run ``program`` against ``task`` and return the verdict.

        Parameters
        ----------
        task : the task (its scenario's apps and tools, SIPs and EPs are used).
        program : Python source; its entry point is ``entry_point`` if defined at top level,
            else its first top-level function (:func:`primsel.types.entry_point`).
        entry_point : preferred function name, or None.

        Returns
        -------
        :class:`ExecutionResult`. Empty text or no top-level function gives ``no_program``, a
        syntax error ``error``/``SyntaxError``, an ``async def`` entry point
        ``error``/``AsyncEntryPoint`` (at its line) and a program over ``program_cap`` bytes
        ``error``/``ProgramTooLarge``, all without starting a process.

        A worker that cannot be (re)started, dies or stops answering gives this task ``error``
        (``WorkerStartFailed``, ``WorkerDied``) and is started again for the next task.

        Raises
        ------
        RuntimeError : the sandbox is closed.
        """
        prepared = self._prepare(task, program, entry_point)
        if isinstance(prepared, ExecutionResult):
            return prepared
        return self._submit(task, prepared).result()

    def execute_many(
        self, jobs: Iterable[tuple[Task, str | None, str | None]]
    ) -> Iterator[ExecutionResult]:
        """Run ``(task, program, entry_point)`` jobs in parallel over the workers.

        Yields one :class:`ExecutionResult` per job, in input order. Jobs are read lazily
        (at most twice the number of workers run ahead of the consumer).
        """
        window: collections.deque[ExecutionResult | concurrent.futures.Future[ExecutionResult]]
        window = collections.deque()
        try:
            for task, program, preferred in jobs:
                prepared = self._prepare(task, program, preferred)
                window.append(prepared if isinstance(prepared, ExecutionResult) else self._submit(task, prepared))
                while len(window) > 2 * self.workers or (window and isinstance(window[0], ExecutionResult)):
                    yield _value(window.popleft())
            while window:
                yield _value(window.popleft())
        finally:
            for item in window:
                if isinstance(item, concurrent.futures.Future):
                    item.cancel()

    def close(self) -> None:
        """Let running tasks finish, drop queued ones, stop the workers (idempotent)."""
        self._shutdown(kill=False)

    def _shutdown(self, kill: bool) -> None:
        with self._lock:
            self._closed = True
        if kill:
            for worker in list(self._all):
                worker.kill()
        for pool in self._executor:
            pool.shutdown(wait=True, cancel_futures=True)
        self._finalizer()

    # -- internals -----------------------------------------------------------------------------

    def _prepare(
        self, task: Task, program: str | None, preferred: str | None
    ) -> ExecutionResult | dict[str, Any]:
        """A verdict reached without running anything, or the request for a worker.

        The program text is parsed here at most once, and only if it is within ``program_cap``.
        """
        if program is not None:
            size = len(program) if len(program) > self.program_cap or program.isascii() else _utf8_size(program)
            if size > self.program_cap:
                message = f"the program is larger than the sandbox's cap of {self.program_cap} bytes"
                return ExecutionResult(task.id, "error", "ProgramTooLarge", message, raised_by="program")
        if program is None or not program.strip():
            return ExecutionResult(task.id, "no_program", message="empty program", raised_by="program")
        try:
            tree = ast.parse(program)
        except SyntaxError as exc:
            return ExecutionResult(task.id, "error", "SyntaxError", exc.msg, exc.lineno, raised_by="program")
        except (ValueError, RecursionError, MemoryError) as exc:  # e.g. a lone surrogate
            return ExecutionResult(task.id, "error", type(exc).__name__, str(exc), raised_by="program")
        # The rule of primsel.types.entry_point, applied to the tree parsed above (a name defined
        # twice keeps its first position and its last definition, as Python binds it).
        functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if not functions:
            return ExecutionResult(task.id, "no_program", message="the program defines no top-level function",
                                   raised_by="program")
        entry = preferred if preferred in functions else next(iter(functions))
        node = functions[entry]
        if isinstance(node, ast.AsyncFunctionDef):
            message = (f"the entry point {entry!r} is a coroutine function (async def): calling it returns a "
                       "coroutine that is never awaited")
            return ExecutionResult(task.id, "error", "AsyncEntryPoint", message, node.lineno, raised_by="program")
        scenario = task.scenario
        return {
            "task": {
                "id": task.id,
                "query": task.query,
                "apps": list(task.apps),
                "setup_programs": list(task.setup_programs),
                "evaluation_programs": list(task.evaluation_programs),
                "simulation_tools": list(scenario.get("simulation_tools", ())),
                "evaluation_tools": list(scenario.get("evaluation_tools", ())),
                "reference": task.program,
            },
            "program": program,
            "entry": entry,
            "timeout": self.timeout,
            "judge_timeout": self.judge_timeout,
            "memory_mb": self.memory_mb,
            "stdout_cap": self.stdout_cap,
            "seccomp": self.seccomp,
            "landlock": self.landlock,
            "audit_hook": self.audit_hook,
        }

    def _submit(self, task: Task, request: dict[str, Any]) -> concurrent.futures.Future[ExecutionResult]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox is closed")
            if not self._executor:
                remove_stale_scratch()
                self._executor.append(
                    concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="primsel-sandbox")
                )
                for _ in range(self.workers):
                    worker = _Worker(_worker_env(), self.program_user)
                    self._all.append(worker)
                    self._idle.put(worker)
            return self._executor[0].submit(self._run, task.id, request)

    def _run(self, task_id: str, request: dict[str, Any]) -> ExecutionResult:
        """Run one request on an idle worker; never raises (a failure is this task's ``error``)."""
        worker = self._idle.get()
        start = time.monotonic()  # the wall time of this task, restarts included
        try:
            reply = worker.request(request, self.timeout + self.judge_timeout + ANSWER_GRACE)
            if reply is not None and reply.get("restart") is True:
                worker.stop()  # it is exiting: the next task starts a new one
        except (OSError, SandboxError, ValueError, subprocess.SubprocessError) as exc:
            # the worker could not be (re)started: no temporary directory, no process, no
            # greeting; this task says so and the next one tries again
            with contextlib.suppress(Exception):
                worker.kill()
            return ExecutionResult(task_id, "error", "WorkerStartFailed",
                                   f"the sandbox worker could not be started: {type(exc).__name__}: {exc}",
                                   seconds=time.monotonic() - start, raised_by="task")  # fmt: skip
        finally:
            self._idle.put(worker)
        if reply is None:
            return ExecutionResult(
                task_id,
                "error",
                "WorkerDied",
                "the sandbox worker died or stopped answering; it was restarted",
                seconds=time.monotonic() - start,
                raised_by="task",  # a fault of the sandbox, not of the program
            )
        try:
            return _result(task_id, reply, time.monotonic() - start)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return ExecutionResult(task_id, "error", "SandboxError", f"the sandbox worker sent a malformed reply: {exc}",
                                   seconds=time.monotonic() - start, raised_by="task")  # fmt: skip


def _result(task_id: str, reply: dict[str, Any], seconds: float) -> ExecutionResult:
    """The :class:`ExecutionResult` of a worker's reply; ``seconds``: the wall time it took."""
    return ExecutionResult(
        task_id=task_id,
        status=reply["status"],
        error_type=reply.get("error_type"),
        message=reply.get("message"),
        line=reply.get("line"),
        called_primitives=tuple(reply.get("called_primitives", ())),
        stdout_truncated=bool(reply.get("stdout_truncated", False)),
        seconds=seconds,
        program_seconds=float(reply.get("program_seconds", 0.0)),
        trace=tuple((entry[0], entry[1], entry[2]) for entry in reply.get("trace", ())),
        outcomes=tuple((entry[0], entry[1], entry[2]) for entry in reply.get("outcomes", ())),
        paths=tuple(tuple(path) for path in reply.get("paths", ())),
        raised_by=reply.get("raised_by"),
        collateral=int(reply.get("collateral", 0)),
    )


def _value(item: ExecutionResult | concurrent.futures.Future[ExecutionResult]) -> ExecutionResult:
    return item if isinstance(item, ExecutionResult) else item.result()


def _utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate counts as the 3 bytes it would take)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _worker_env() -> dict[str, str]:
    """A minimal environment for workers: no secrets, fixed hash seed, primsel importable."""
    env = {key: os.environ[key] for key in _ENV_KEPT if key in os.environ}
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["PYTHONHASHSEED"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    return env
