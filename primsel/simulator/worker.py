"""Sandbox worker process: runs tasks for :class:`primsel.simulator.sandbox.Sandbox`.

Started as ``python -P -m primsel.simulator.worker SCRATCH`` (a clean interpreter, never a fork
of the caller). It imports the assistant library once, installs the reference import paths
(``aspera.apps_implementation.<module>`` ...) as aliases of our modules, then serves requests:
one JSON line in on stdin, one JSON line out on stdout. It dies with the process that started it
(``PR_SET_PDEATHSIG``) and removes its scratch directory on every way out.

For every request it forks a child that runs the whole task and reports over a pipe, so every
task starts from the same pristine interpreter state. Before any program code runs the child:
starts its own session and process group, moves into a throwaway working directory, closes
every other descriptor, points fds 0/1/2 at ``/dev/null`` and captures ``sys.stdout`` /
``sys.stderr`` in a capped buffer, sets resource limits (address space, CPU seconds, file size
0, few descriptors, no core files), asks to be killed when the worker dies, restricts itself
with Landlock (:mod:`primsel.simulator.landlock`: read-only access to the Python installation
and the imported packages, no TCP, no signals out), loads a seccomp filter
(:mod:`primsel.simulator.seccomp`) and adds an audit hook that refuses the same operations at
the Python level. The worker enforces the wall-clock limit by waiting on the pipe with a
timeout; as soon as the verdict is in or the time is up it SIGKILLs the child's process group.

Child -> worker lines: ``P <primitive id>`` (first call of a library function by the program),
``T`` (output was truncated), ``R <token> <json>`` (the verdict, last line). The token is a
random string the worker writes into a second pipe after the fork; the child reads it only
once the task has finished, so it is not in the child's memory while the program runs, and a
verdict line without it is rejected as ``SandboxViolation``.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import errno
import functools
import gc
import importlib
import importlib.machinery
import io
import json
import math
import os
import resource
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

from primsel.types import STATUSES

#: Library modules: apps (star-imported by every program), setup tools, check tools.
APPS = ("exceptions", "time_utils", "room_booking", "company_directory", "work_calendar")
SETUP_TOOLS = ("company_directory", "room_booking", "work_calendar")
CHECK_TOOLS = ("exceptions", "time_utils", "work_calendar")
#: File names given to the compiled texts; the program's decides the reported ``line``.
PROGRAM_FILE = "<program>"
#: Longest exception message reported, in characters.
MESSAGE_CAP = 2000
#: Most bytes a child may send to the worker before it is treated as misbehaving.
CHANNEL_CAP = 1 << 20
#: Descriptor limit inside the child (imports open files read-only, one at a time).
CHILD_NOFILE = 64
#: Seconds the worker waits for a SIGKILLed child to be reaped before moving on.
REAP_TIMEOUT = 5.0
_PR_SET_PDEATHSIG = 1


class _Library:
    """The imported library: star-export dicts per app module and the tool modules."""

    def __init__(self) -> None:
        self.missing: dict[str, str] = {}
        self.apps: dict[str, types.ModuleType] = {}
        self.setup: dict[str, types.ModuleType] = {}
        self.check: dict[str, types.ModuleType] = {}
        for group, names, target in (
            ("apps", APPS, self.apps),
            ("setup_tools", SETUP_TOOLS, self.setup),
            ("check_tools", CHECK_TOOLS, self.check),
        ):
            for name in names:
                dotted = f"primsel.simulator.{group}.{name}"
                try:
                    target[name] = importlib.import_module(dotted)
                except Exception as exc:  # a broken library module must not kill the worker
                    self.missing[dotted] = f"{type(exc).__name__}: {exc}"
        self.exports = {name: _star_exports(module) for name, module in self.apps.items()}
        self.traced_exports = {name: _trace_functions(ex) for name, ex in self.exports.items()}
        solution_error = getattr(self.check.get("exceptions"), "SolutionError", None)
        self.fail_types: tuple[type[BaseException], ...] = (AssertionError,) + (
            (solution_error,) if isinstance(solution_error, type) else ()
        )
        requires = getattr(self.apps.get("exceptions"), "RequiresUserInput", None)
        self.requires_input: tuple[type[BaseException], ...] = (requires,) if isinstance(requires, type) else ()

    def namespace(self, apps: list[str], traced: bool) -> dict[str, Any]:
        """A fresh namespace with the star-exports of ``apps`` in order (later names win)."""
        namespace: dict[str, Any] = {}
        for app in apps:
            if app not in self.exports:
                module = f"primsel.simulator.apps.{app}"
                raise ModuleNotFoundError(self.missing.get(module, f"no library module named {app!r}"))
            namespace.update((self.traced_exports if traced else self.exports)[app])
        return namespace

    def tool(self, spec: str, modules: dict[str, types.ModuleType], kind: str) -> tuple[str, Any]:
        """Resolve a ``module::name`` tool reference of a task's scenario."""
        module_name, _, name = spec.partition("::")
        module = modules.get(module_name)
        if module is None or not hasattr(module, name):
            raise ImportError(f"cannot import {kind} {name!r} from {module_name!r}")
        return name, getattr(module, name)


def _star_exports(module: types.ModuleType) -> dict[str, Any]:
    """What ``from module import *`` binds: ``__all__`` if defined, else the public names."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return {name: getattr(module, name) for name in names}


# Child-local record of library functions the program called (first-call order), and the
# descriptor of the pipe to the worker. Programs can reach both; neither decides a verdict.
_called: dict[str, None] = {}
_channel: int | None = None


def _send(line: str) -> None:
    """Write one trace line to the worker; a closed channel is ignored."""
    if _channel is not None:
        with contextlib.suppress(OSError):
            os.write(_channel, (line + "\n").encode())


def _trace_functions(exports: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``exports`` with library functions wrapped to record their first call."""
    traced = dict(exports)
    for name, value in exports.items():
        module = getattr(value, "__module__", "") or ""
        if isinstance(value, types.FunctionType) and module.startswith("primsel.simulator.apps."):
            traced[name] = _recording(value, f"{module.rsplit('.', 1)[1]}.{value.__name__}")
    return traced


def _recording(function: Callable[..., Any], primitive_id: str) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if primitive_id not in _called:
            _called[primitive_id] = None
            _send(f"P {primitive_id}")
        return function(*args, **kwargs)

    return wrapper


def install_aliases() -> None:
    """Make the reference implementation's module paths import our modules (this process only)."""
    aliases = {f"aspera.apps_implementation.{m}": f"primsel.simulator.apps.{m}" for m in APPS}
    for m in SETUP_TOOLS:
        aliases[f"aspera.runtime_state_generation_tools_implementation.{m}"] = f"primsel.simulator.setup_tools.{m}"
    for m in CHECK_TOOLS:
        aliases[f"aspera.execution_evaluation_tools_implementation.{m}"] = f"primsel.simulator.check_tools.{m}"
    aliases["aspera.execution_evaluation_tools.time_utils"] = "primsel.simulator.check_tools.time_utils"
    aliases["aspera.simulation.execution_context"] = "primsel.simulator.state"
    for alias, target in aliases.items():
        module = sys.modules.get(target)
        if module is None:
            try:
                module = importlib.import_module(target)
            except Exception:
                continue
        sys.modules[alias] = module
        parent_name, _, child = alias.rpartition(".")
        parent = _package(parent_name)
        setattr(parent, child, module)


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


# ----------------------------------------------------------------------------------------------
# Running one task (inside the child)


def _result(status: str, message: str | None = None, error_type: str | None = None) -> dict[str, Any]:
    """A verdict made by the sandbox itself (not from an exception of the task)."""
    return {"status": status, "error_type": error_type, "message": message, "line": None}


def _verdict(library: _Library, exc: BaseException | None) -> dict[str, Any]:
    """The verdict for the exception that ended the task (None: every pair passed).

    Self-contained on purpose: :func:`_child` takes it before the program runs and it calls no
    other function of this module, so a program that rebinds this module's globals (reachable
    as ``sys.modules["__main__"]``) cannot change the status it gives. Messages are capped at
    :data:`MESSAGE_CAP` characters, with lone surrogates (not valid UTF-8) replaced by ``?``.
    """
    if exc is None:
        return {"status": "pass", "error_type": None, "message": None, "line": None}
    if isinstance(exc, library.fail_types):
        status = "fail"
    elif library.requires_input and isinstance(exc, library.requires_input):
        status = "requires_user_input"
    else:
        status = "error"
    error_type = type.__dict__["__name__"].__get__(type(exc))  # a metaclass cannot override it
    try:
        message = str.__str__(str(exc))  # a plain str, even if __str__ returned a subclass
    except BaseException:  # an exception whose __str__ fails still reports its class
        message = f"<{error_type} object whose str() failed>"
    line = None
    try:
        if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILE:
            line, message = exc.lineno, str.__str__(str(exc.msg))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == PROGRAM_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
    except BaseException:
        pass  # a program-made object posing as an exception or a traceback: no line
    if type(line) is not int:
        line = None
    if len(message) > MESSAGE_CAP:
        message = message[:MESSAGE_CAP] + "..."
    if not message.isascii():
        message = message.encode("utf-8", "replace").decode("utf-8")
    return {"status": status, "error_type": error_type, "message": message, "line": line}


def _first_function(source: str, what: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    raise ValueError(f"the task's {what} defines no top-level function")


def run_task(library: _Library, request: dict[str, Any]) -> BaseException | None:
    """Run every (SIP, EP) pair of the task against the program; the first exception decides.

    Follows the reference protocol (spec section 11.6): per pair a fresh program module
    namespace holding the app star-exports, a fresh SIP/EP namespace holding the star-exports,
    the scenario's tools and ``Any``/``Callable``, then a fresh :class:`ExecutionContext`
    (which reseeds ``random`` with 0) made current while ``EP(query="", executable=...,
    setup_function=...)`` runs.

    Returns the exception that ended the task (None if every pair passed); :func:`_verdict`
    turns it into a verdict.
    """
    from typing import Any as AnyType
    from typing import Callable as CallableType

    from primsel.simulator.state import ExecutionContext, new_context

    task = request["task"]
    try:
        program = compile(request["program"], PROGRAM_FILE, "exec")
    except (SyntaxError, ValueError) as exc:
        return exc
    for index, (setup_text, check_text) in enumerate(zip(task["setup_programs"], task["evaluation_programs"])):
        try:
            with new_context():  # scratch world for module-level code; the pair gets its own below
                module = types.ModuleType("query_executable")
                module.__dict__.update(library.namespace(task["apps"], traced=True))
                sys.modules["query_executable"] = module
                exec(program, module.__dict__)
                entry = module.__dict__.get(request["entry"])
                if not callable(entry):
                    raise NameError(f"the program defines no function {request['entry']!r}")
                harness: dict[str, Any] = {"__name__": "__console__"}
                harness.update(library.namespace(task["apps"], traced=False))
                for spec in task["simulation_tools"]:
                    name, value = library.tool(spec, library.setup, "setup tool")
                    harness[name] = value
                harness["Any"] = AnyType
                harness["Callable"] = CallableType
                for spec in task["evaluation_tools"]:
                    name, value = library.tool(spec, library.check, "evaluation tool")
                    harness[name] = value
                exec(compile(setup_text, f"<setup program {index + 1}>", "exec"), harness)
                exec(compile(check_text, f"<evaluation program {index + 1}>", "exec"), harness)
                setup = harness[_first_function(setup_text, "setup program")]
                check = harness[_first_function(check_text, "evaluation program")]
            context = ExecutionContext()
            context.query = task["query"]
            with new_context(context):
                check(query="", executable=entry, setup_function=setup)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt from programs are errors too
            return exc
    return None


# ----------------------------------------------------------------------------------------------
# The child's isolation


class _CappedOutput(io.TextIOBase):
    """A text stream keeping at most ``cap`` characters; past that it only counts (flat memory).

    ``buffer`` is a binary view sharing the same cap (bytes count as characters).
    """

    def __init__(self, cap: int) -> None:
        super().__init__()
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
        room = self.cap - self.kept
        if room > 0:
            piece = data[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        if len(data) > room and not self.truncated:
            self.truncated = True
            _send("T")
        return len(data)


class _CappedBinary(io.RawIOBase):
    """``sys.stdout.buffer`` in the child: bytes go to the same capped store as the text."""

    def __init__(self, text: _CappedOutput) -> None:
        super().__init__()
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self.text.keep(bytes(memoryview(data)))


def _audit_hook() -> Callable[[str, tuple[Any, ...]], None]:
    """An audit hook refusing process, network, file-write, native-code and introspection events.

    A second layer behind Landlock and seccomp (a program can get around it with ``ctypes``,
    which the worker has loaded). Its tables and every name it uses are held in this closure,
    not in module globals or builtins, so a program cannot switch it off by rebinding them.
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


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(*(ctypes.c_ulong(v) for v in (option, value, 0, 0, 0))) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _isolate(
    channel: int, token_fd: int, workdir: str, request: dict[str, Any], readable: list[str] | None, worker_pid: int
) -> _CappedOutput:
    """Confine the child before any program code runs (see the module docstring).

    ``readable`` is what Landlock leaves readable (None: Landlock is not applied). A layer that
    is asked for and available but fails raises OSError: the task is not run unconfined.
    """
    global _channel
    _channel = channel
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the worker's handler is not the child's
    os.setsid()  # own session and process group: the worker kills the group; no terminal
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the worker
    if os.getppid() != worker_pid:  # the worker died before the death signal was armed
        os._exit(70)
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    keep = sorted({0, 1, 2, channel, token_fd})
    for low, high in zip(keep, keep[1:] + [65536]):
        os.closerange(low + 1, high)
    output = _CappedOutput(int(request["stdout_cap"]))
    sys.stdout = output
    sys.stderr = output
    sys.stdin = io.StringIO("")
    with open("/proc/self/statm", encoding="ascii") as handle:
        address_space = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _limit(resource.RLIMIT_AS, address_space + int(request["memory_mb"]) * (1 << 20))
    cpu = math.ceil(float(request["timeout"])) + 1
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_NOFILE, CHILD_NOFILE)
    _limit(resource.RLIMIT_CORE, 0)
    if readable is not None and request.get("landlock", True):
        from primsel.simulator import landlock

        landlock.restrict([*readable, workdir])
    if request.get("seccomp", True):
        from primsel.simulator import seccomp

        try:
            seccomp.install(os.getpid())
        except OSError as exc:
            if exc.errno != errno.ENOSYS:  # ENOSYS: libseccomp missing (sandbox_info says so)
                raise
    sys.addaudithook(_audit_hook())
    return output


def _child(
    library: _Library,
    request: dict[str, Any],
    channel: int,
    token_fd: int,
    workdir: str,
    readable: list[str] | None,
    worker_pid: int,
) -> None:
    """Body of the forked child: isolate, run, report, exit (never returns)."""
    # Taken before the program runs: rebinding these names afterwards does not reach them.
    verdict_of, dumps, read, write, exit_now = _verdict, json.dumps, os.read, os.write, os._exit
    code = 0
    try:
        try:
            output = _isolate(channel, token_fd, workdir, request, readable, worker_pid)
        except OSError as exc:
            verdict = _result("error", f"the sandbox could not be set up: {exc}", "SandboxError")
            verdict.update(called_primitives=[], stdout_truncated=False)
        else:
            verdict = verdict_of(library, run_task(library, request))
            verdict["called_primitives"] = list(_called)
            verdict["stdout_truncated"] = output.truncated
        token = read(token_fd, 64).decode("ascii", "replace")
        write(channel, f"R {token} {dumps(verdict)}\n".encode())
    except BaseException:
        code = 70
    finally:
        exit_now(code)


# ----------------------------------------------------------------------------------------------
# The worker side

#: Children SIGKILLed but not yet reaped (retried at the next request).
_unreaped: set[int] = set()
#: The worker's pid, its scratch directory and the child running a task now (for the SIGTERM
#: handler, which cleans up by itself instead of unwinding through whatever code it interrupts).
_worker: dict[str, Any] = {"pid": None, "scratch": None, "child": None}


def run_request(
    library: _Library, request: dict[str, Any], scratch: str | None = None, readable: list[str] | None = None
) -> dict[str, Any]:
    """Fork a child for one task, wait for its verdict within the time limit, clean up.

    Parameters
    ----------
    library : the imported library.
    request : ``task`` (dict), ``program``, ``entry``, ``timeout`` (s), ``memory_mb``,
        ``stdout_cap``, ``seccomp``, ``landlock``.
    scratch : directory in which the task's throwaway working directory is made (default: the
        system's temporary directory).
    readable : paths Landlock leaves readable (:func:`primsel.simulator.landlock.runtime_paths`);
        None applies no Landlock restriction.

    Returns
    -------
    The verdict dict (``status``, ``error_type``, ``message``, ``line``, ``called_primitives``,
    ``stdout_truncated``, ``seconds``).
    """
    _reap_leftovers()
    timeout = float(request["timeout"])
    workdir = tempfile.mkdtemp(prefix="primsel-task-", dir=scratch)
    read_end, write_end = os.pipe()
    token_read, token_write = os.pipe()
    start = time.monotonic()
    worker_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        _worker["pid"] = None  # the SIGTERM handler's clean-up belongs to the worker only
        os.close(read_end)
        os.close(token_write)
        _child(library, request, write_end, token_read, workdir, readable, worker_pid)
    _worker["child"] = pid
    os.close(write_end)
    os.close(token_read)
    token = secrets.token_hex(16)  # made after the fork: the child's memory never held it
    with contextlib.suppress(OSError):
        os.write(token_write, token.encode())
    os.close(token_write)
    verdict: dict[str, Any] | None = None
    called: list[str] = []
    truncated = False
    buffer = b""
    received = 0
    timed_out = False
    overflow = False
    status = None
    try:
        while verdict is None:
            remaining = start + timeout - time.monotonic()
            if remaining <= 0 or not select.select([read_end], [], [], remaining)[0]:
                timed_out = True
                break
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            received += len(chunk)
            if received > CHANNEL_CAP:
                overflow = True
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                kind, _, payload = raw.decode("utf-8", "replace").partition(" ")
                if kind == "P" and payload not in called:
                    called.append(payload)
                elif kind == "T":
                    truncated = True
                elif kind == "R":
                    verdict = _checked(payload, token)
                    break
    finally:
        seconds = time.monotonic() - start
        os.close(read_end)
        _kill_group(pid)  # the verdict is in or the time is up: nothing of the task outlives it
        status = _reap(pid, REAP_TIMEOUT)
        _worker["child"] = None
        shutil.rmtree(workdir, ignore_errors=True)
    if verdict is None:
        verdict = _lost_verdict(status, timed_out, overflow, timeout)
        verdict["called_primitives"] = called
        verdict["stdout_truncated"] = truncated
    verdict["seconds"] = seconds
    return verdict


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (it made its own) and the child itself."""
    for kill in (os.killpg, os.kill):  # by pid too: the child may not have called setsid yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _reap(pid: int, within: float) -> int | None:
    """Wait status of the (killed) child, waiting at most ``within`` seconds; None if not reaped."""
    deadline = time.monotonic() + within
    pause = 0.0005
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, None
        if done:
            _unreaped.discard(pid)
            return status
        if time.monotonic() >= deadline:
            _unreaped.add(pid)
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _reap_leftovers() -> None:
    for pid in list(_unreaped):
        _reap(pid, 0)


def _checked(payload: str, token: str) -> dict[str, Any]:
    """The child's verdict if it carries the task's token and has the expected shape.

    Anything else (no or wrong token, not JSON, too deeply nested, wrong types) is an
    ``error`` / ``SandboxViolation``.
    """
    sent_token, _, text = payload.partition(" ")
    if sent_token != token:
        return _violation("the program's process sent a verdict without the task's token (forged)")
    try:
        verdict = json.loads(text)
    except (ValueError, RecursionError):
        verdict = None
    optional_str = (str, type(None))
    valid = (
        type(verdict) is dict
        and verdict.get("status") in STATUSES
        and all(type(verdict.get(k)) in optional_str for k in ("error_type", "message"))
        and type(verdict.get("line")) in (int, type(None))  # bool is an int subclass: refused
        and type(verdict.get("called_primitives")) is list
        and all(type(p) is str for p in verdict["called_primitives"])
        and type(verdict.get("stdout_truncated")) is bool
    )
    return verdict if valid else _violation("the program's process sent a malformed verdict")


def _violation(message: str) -> dict[str, Any]:
    return {**_result("error", message, "SandboxViolation"), "called_primitives": [], "stdout_truncated": False}


def _lost_verdict(status: int | None, timed_out: bool, overflow: bool, timeout: float) -> dict[str, Any]:
    """Verdict when the child gave none: killed at the time limit, crashed, or misbehaved."""
    if timed_out:
        return _result("timeout", f"time limit of {timeout:g} s exceeded")
    if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return _result("timeout", "CPU time limit exceeded")
    if overflow:
        return _violation("the program flooded the sandbox's result channel")
    if status is None:
        how = "did not exit when killed"
    elif os.WIFSIGNALED(status):
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)} before reporting a verdict"
    return _result("error", f"the process running the program {how}", "ProcessDied")


def _exit_on_signal(signum: int, frame: Any) -> None:
    """SIGTERM (the caller died): kill the running task, remove the scratch directory, exit.

    Done here rather than by raising SystemExit, which could land inside a ``finally`` block
    and skip the rest of its clean-up.
    """
    if _worker["pid"] == os.getpid():
        if _worker["child"] is not None:
            _kill_group(_worker["child"])
        if _worker["scratch"]:
            shutil.rmtree(_worker["scratch"], ignore_errors=True)
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Serve requests from stdin until it closes; ``argv[0]``, if given, is the scratch directory.

    The scratch directory is removed on every way out: stdin closed, the caller gone while a
    reply is written (broken pipe), or SIGTERM (sent by the kernel when the caller dies).
    """
    argv = sys.argv[1:] if argv is None else argv
    scratch = argv[0] if argv else None
    _worker.update(pid=os.getpid(), scratch=scratch)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles Ctrl-C and closes our stdin
    try:
        with contextlib.suppress(OSError):
            _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # die with the caller (stdin EOF also ends us)
        return _serve(scratch)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _serve(scratch: str | None) -> int:
    from primsel.simulator import landlock, seccomp

    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # stray prints must not corrupt the protocol
    library = _Library()
    install_aliases()
    seccomp_available, seccomp_detail = seccomp.status()
    landlock_available, landlock_detail = landlock.status()
    readable = landlock.runtime_paths() if landlock_available else None
    hello = {
        "ready": True,
        "pid": os.getpid(),
        "seccomp": seccomp_available,
        "seccomp_detail": seccomp_detail,
        "landlock": landlock_available,
        "landlock_detail": landlock_detail,
        "missing": library.missing,
    }
    try:
        replies.write(json.dumps(hello).encode() + b"\n")
        replies.flush()
        gc.collect()
        gc.freeze()  # keeps the children's copy-on-write pages shared
        for line in requests:
            try:
                request = json.loads(line)
                reply = run_request(library, request, scratch, readable)
            except Exception as exc:  # a bad request must not kill the worker
                reply = _result("error", f"sandbox worker failure: {exc}", "SandboxError")
            replies.write(json.dumps(reply).encode() + b"\n")
            replies.flush()
    except BrokenPipeError:  # the caller is gone
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
