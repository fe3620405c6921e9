"""Sandbox worker process: runs tasks for :class:`primsel.simulator.sandbox.Sandbox`.

Started as ``python -m primsel.simulator.worker`` (a clean interpreter, never a fork of the
caller). It imports the assistant library once, installs the reference import paths
(``aspera.apps_implementation.<module>`` ...) as aliases of our modules, then serves requests:
one JSON line in on stdin, one JSON line out on stdout.

For every request it forks a child that runs the whole task and reports over a pipe, so every
task starts from the same pristine interpreter state. Before any program code runs the child:
moves into a throwaway working directory, closes every other descriptor, points fds 0/1/2 at
``/dev/null`` and captures ``sys.stdout`` / ``sys.stderr`` in a capped buffer, sets resource
limits (address space, CPU seconds, file size 0, few descriptors, no core files), asks to be
killed when the worker dies, loads a seccomp filter (:mod:`primsel.simulator.seccomp`) and adds
an audit hook that refuses the same operations at the Python level. The worker enforces the
wall-clock limit by waiting on the pipe with a timeout and SIGKILLing the child.

Child -> worker lines: ``P <primitive id>`` (first call of a library function by the program),
``T`` (output was truncated), ``R <json>`` (the verdict, last line).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import functools
import gc
import importlib
import importlib.machinery
import io
import json
import math
import os
import resource
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

_AUDIT_BLOCKED = frozenset(
    {
        "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
        "os.forkpty", "pty.spawn", "os.kill", "os.killpg",
        "socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo",
        "socket.gethostbyname", "socket.sendto", "sqlite3.connect",
        "os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.chmod", "os.chown", "os.link",
        "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile",
        "shutil.copymode", "shutil.copystat", "shutil.chown",
        "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.string_at",
        "ctypes.wstring_at", "ctypes.call_function", "resource.setrlimit", "resource.prlimit",
    }
)  # fmt: skip
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


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


# Child-local record of library functions the program called (first-call order).
_called: dict[str, None] = {}
_channel: int | None = None


def _send(line: str) -> None:
    """Write one line to the worker; a closed channel is ignored (the verdict then goes missing)."""
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


def _result(status: str, exc: BaseException | None = None, message: str | None = None) -> dict[str, Any]:
    line = None
    error_type = None
    if exc is not None:
        error_type = type(exc).__name__
        message = str(exc)
        if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILE:
            line = exc.lineno
            message = exc.msg
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == PROGRAM_FILE:
                line = tb.tb_lineno
            tb = tb.tb_next
    if message is not None and len(message) > MESSAGE_CAP:
        message = message[:MESSAGE_CAP] + "..."
    return {"status": status, "error_type": error_type, "message": message, "line": line}


def _classify(library: _Library, exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, library.fail_types):
        return _result("fail", exc)
    if library.requires_input and isinstance(exc, library.requires_input):
        return _result("requires_user_input", exc)
    return _result("error", exc)


def _first_function(source: str, what: str) -> str:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    raise ValueError(f"the task's {what} defines no top-level function")


def run_task(library: _Library, request: dict[str, Any]) -> dict[str, Any]:
    """Run every (SIP, EP) pair of the task against the program; the first non-pass decides.

    Follows the reference protocol (spec section 11.6): per pair a fresh program module
    namespace holding the app star-exports, a fresh SIP/EP namespace holding the star-exports,
    the scenario's tools and ``Any``/``Callable``, then a fresh :class:`ExecutionContext`
    (which reseeds ``random`` with 0) made current while ``EP(query="", executable=...,
    setup_function=...)`` runs.
    """
    from typing import Any as AnyType
    from typing import Callable as CallableType

    from primsel.simulator.state import ExecutionContext, new_context

    task = request["task"]
    try:
        program = compile(request["program"], PROGRAM_FILE, "exec")
    except (SyntaxError, ValueError) as exc:
        return _result("error", exc)
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
            return _classify(library, exc)
    return _result("pass")


# ----------------------------------------------------------------------------------------------
# The child's isolation


class _CappedOutput(io.TextIOBase):
    """A text stream keeping at most ``cap`` characters; past that it only counts (flat memory)."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.parts: list[str] = []
        self.kept = 0
        self.truncated = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.cap - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        if len(text) > room and not self.truncated:
            self.truncated = True
            _send("T")
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Refuse process, network, file-write and native-code operations (second layer to seccomp)."""
    if event == "open":
        mode, flags = args[1], args[2]
        writes = bool(flags & _WRITE_FLAGS) if isinstance(flags, int) else False
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            writes = True
        if writes:
            raise PermissionError(f"the sandbox does not allow opening {args[0]!r} for writing")
    elif event in _AUDIT_BLOCKED:
        raise PermissionError(f"the sandbox does not allow {event}")


def _limit(which: int, value: int) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (value, value))


def _isolate(channel: int, workdir: str, request: dict[str, Any]) -> _CappedOutput:
    """Confine the child before any program code runs (see the module docstring)."""
    global _channel
    _channel = channel
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the worker
    os.chdir(workdir)
    os.environ["TMPDIR"] = workdir
    tempfile.tempdir = workdir
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    keep = sorted({0, 1, 2, channel})
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
    if request.get("seccomp", True):
        from primsel.simulator import seccomp

        with contextlib.suppress(OSError):
            seccomp.install()
    sys.addaudithook(_audit)
    return output


def _child(library: _Library, request: dict[str, Any], channel: int, workdir: str) -> None:
    """Body of the forked child: isolate, run, report, exit (never returns)."""
    code = 0
    try:
        output = _isolate(channel, workdir, request)
        verdict = run_task(library, request)
        verdict["called_primitives"] = list(_called)
        verdict["stdout_truncated"] = output.truncated
        _send("R " + json.dumps(verdict))
    except BaseException:
        code = 70
    finally:
        os._exit(code)


# ----------------------------------------------------------------------------------------------
# The worker side


def run_request(library: _Library, request: dict[str, Any], scratch: str | None = None) -> dict[str, Any]:
    """Fork a child for one task, wait for its verdict within the time limit, clean up.

    Parameters
    ----------
    library : the imported library.
    request : ``task`` (dict), ``program``, ``entry``, ``timeout`` (s), ``memory_mb``,
        ``stdout_cap``, ``seccomp``.
    scratch : directory in which the task's throwaway working directory is made (default: the
        system's temporary directory).

    Returns
    -------
    The verdict dict (``status``, ``error_type``, ``message``, ``line``, ``called_primitives``,
    ``stdout_truncated``, ``seconds``).
    """
    timeout = float(request["timeout"])
    workdir = tempfile.mkdtemp(prefix="primsel-task-", dir=scratch)
    read_end, write_end = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(library, request, write_end, workdir)
    os.close(write_end)
    verdict: dict[str, Any] | None = None
    called: list[str] = []
    truncated = False
    buffer = b""
    received = 0
    timed_out = False
    overflow = False
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
                    verdict = _checked(payload)
                    break
    finally:
        os.close(read_end)
        if verdict is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        seconds = time.monotonic() - start
        shutil.rmtree(workdir, ignore_errors=True)
    if verdict is None:
        verdict = _lost_verdict(status, timed_out, overflow, timeout)
        verdict["called_primitives"] = called
        verdict["stdout_truncated"] = truncated
    verdict["seconds"] = seconds
    return verdict


def _checked(payload: str) -> dict[str, Any]:
    """The child's verdict if it has the expected shape, else a ``SandboxViolation`` error."""
    try:
        verdict = json.loads(payload)
        valid = (
            isinstance(verdict, dict)
            and verdict.get("status") in STATUSES
            and all(isinstance(verdict.get(k), (str, type(None))) for k in ("error_type", "message"))
            and isinstance(verdict.get("line"), (int, type(None)))
            and isinstance(verdict.get("called_primitives"), list)
            and all(isinstance(p, str) for p in verdict["called_primitives"])
            and isinstance(verdict.get("stdout_truncated"), bool)
        )
    except ValueError:
        valid = False
    if valid:
        return verdict
    bad = _result("error", message="the program's process sent a malformed verdict")
    return {**bad, "error_type": "SandboxViolation", "called_primitives": [], "stdout_truncated": False}


def _lost_verdict(status: int, timed_out: bool, overflow: bool, timeout: float) -> dict[str, Any]:
    """Verdict when the child gave none: killed at the time limit, crashed, or misbehaved."""
    if timed_out:
        return _result("timeout", message=f"time limit of {timeout:g} s exceeded")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return _result("timeout", message="CPU time limit exceeded")
    if overflow:
        verdict = _result("error", message="the program flooded the sandbox's result channel")
        return {**verdict, "error_type": "SandboxViolation"}
    if os.WIFSIGNALED(status):
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)} before reporting a verdict"
    return {**_result("error", message=f"the process running the program {how}"), "error_type": "ProcessDied"}


def main(argv: list[str] | None = None) -> int:
    """Serve requests from stdin until it closes; ``argv[0]``, if given, is the scratch directory."""
    argv = sys.argv[1:] if argv is None else argv
    scratch = argv[0] if argv else None
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # stray prints must not corrupt the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles Ctrl-C and closes our stdin
    library = _Library()
    install_aliases()
    from primsel.simulator import seccomp

    available, detail = seccomp.status()
    hello = {
        "ready": True,
        "pid": os.getpid(),
        "seccomp": available,
        "seccomp_detail": detail,
        "missing": library.missing,
    }
    replies.write(json.dumps(hello).encode() + b"\n")
    replies.flush()
    gc.collect()
    gc.freeze()  # keeps the children's copy-on-write pages shared
    for line in requests:
        try:
            request = json.loads(line)
            reply = run_request(library, request, scratch)
        except Exception as exc:  # a bad request must not kill the worker
            reply = {**_result("error", message=f"sandbox worker failure: {exc}"), "error_type": "SandboxError"}
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
