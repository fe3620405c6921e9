"""The program process: where the program under test runs, apart from whatever judges it.

A sandbox worker forks, right after it has imported the prompt-facing library and before it
reads any request, a *spawner* (:func:`serve_spawner`). The spawner never receives anything of
a task: only the two pipe descriptors of a new program process and its limits. For every
(SIP, EP) pair of a task it forks one program process (:func:`run_program_process`), so every
program starts as a copy of that clean parent, with nothing of an earlier task (nor of this
one: no setup or evaluation program, no check tool, no expected value, no verdict channel) in
its memory.

The program process confines itself (:func:`primsel.simulator.isolation.confine`), sends
``{"ready": true}`` (or, if it could not be confined, ``{"sandbox_error": TEXT}`` and exits)
before it reads anything, then serves the judge over its two pipes, one frame
(:mod:`primsel.simulator.codec`) per message. The judge takes a set-up failure only as that
first frame: one sent later comes from the program's code (``error`` / ``ForgedFrame``).

``{"op": "load", "program": TEXT, "entry": NAME, "apps": [...]}``
    compile the program and run its module-level code in a fresh module ``query_executable``
    whose globals are the star-exports of the task's apps (with a scratch world); answer
    ``{"ok": true}`` or ``{"exception": ...}``.
``{"op": "call", "state": ..., "random": ..., "args": [...], "kwargs": {...}}``
    install the world state and the ``random`` state the judge sent, call the entry point,
    answer ``{"state", "random", "trace", "path", "stdout_truncated"}`` plus one of ``"return"``
    (the encoded value), ``"exception"`` (``{"type", "module", "message", "args", "line"}``) or
    ``"unsupported"`` (why the value or the state cannot cross).

While the program runs, the process may send ``{"note": "stdout_truncated"}`` once, when its
output first passes the cap. Nothing the program process says is trusted: the judge decodes it with the codec's checks and
rebuilds only data. The call ``trace`` lists every call of a library function, and every
instantiation of a library class (enums aside), made directly by program code: ``[primitive
id, program line, summary of the arguments]``; the summary is :func:`summarise` of the
positional and keyword arguments, as they were when the call started. The ``path`` lists the
program lines executed during the call, in order (``sys.settrace`` line events of program code),
with a ``0`` where each traced library call was made (at most :data:`PATH_CAP` entries).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import functools
import gc
import os
import random
import signal
import socket
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from primsel.simulator import codec as codec_module
from primsel.processes import die_with_parent
from primsel.simulator import isolation
from primsel.simulator.layout import APPS

#: File name given to the compiled program; tracebacks and the trace use its line numbers.
PROGRAM_FILE = "<program>"
#: Longest exception message or argument summary sent, in characters.
MESSAGE_CAP = 2000
#: Longest exception type name sent, in characters.
NAME_CAP = 100
#: Most calls kept in the trace (later calls are counted but not listed).
TRACE_CAP = 2000
#: Most entries kept in a call's path of executed lines (later lines are not listed).
PATH_CAP = 20_000
#: Longest argument summary in a trace entry, in characters.
ARGS_CAP = 1000
#: :func:`summarise`: longest string shown, items shown per container, levels of nesting shown.
SUMMARY_STRING, SUMMARY_ITEMS, SUMMARY_DEPTH = 80, 8, 4
#: Seconds the spawner waits for a killed program process to be reaped.
REAP_TIMEOUT = 5.0
#: The program process's first frame once it is confined (before it reads the program); a
#: set-up failure sends ``{"sandbox_error": TEXT}`` instead. Only the first frame may be either.
READY = codec_module.dumps({"ready": True})


def load_apps() -> dict[str, types.ModuleType]:
    """Import the prompt-facing library modules; ``{short name: module}`` (missing ones skipped)."""
    import importlib

    modules = {}
    for name in APPS:
        with contextlib.suppress(Exception):  # a broken module shows up as a missing name
            modules[name] = importlib.import_module(f"primsel.simulator.apps.{name}")
    return modules


def star_exports(module: types.ModuleType) -> dict[str, Any]:
    """What ``from module import *`` binds: ``__all__`` if defined, else the public names."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return {name: getattr(module, name) for name in names}


def summarise(value: Any, depth: int = SUMMARY_DEPTH) -> str:
    """A short, deterministic text of a value, for call traces and return values.

    Library records (pydantic models, dataclasses, named tuples) show as ``Name(field=value,
    ...)`` with the fields that differ from their defaults, enums as ``Class.Member``, strings
    cut to :data:`SUMMARY_STRING` characters, containers to :data:`SUMMARY_ITEMS` items (sets
    sorted, so the text does not depend on hash order), anything nested deeper than ``depth``
    as ``...``, and other objects by their type name only (never a memory address).

    Parameters
    ----------
    value : any value.
    depth : levels of nesting still shown.

    Returns
    -------
    str. Never raises: a value whose fields cannot be read shows as ``<TypeName>``.
    """
    try:
        return _summary(value, depth)
    except Exception:
        return f"<{type(value).__name__}>"


def _summary(value: Any, depth: int) -> str:
    """:func:`summarise`'s text, raising what reading ``value`` raises."""
    kind = type(value)
    if value is None or kind in (bool, int, float, complex):
        return repr(value)
    if isinstance(value, str):
        text = str.__str__(value)
        return repr(text) if len(text) <= SUMMARY_STRING else repr(text[:SUMMARY_STRING]) + "..."
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value[:SUMMARY_STRING])) + ("..." if len(value) > SUMMARY_STRING else "")
    if isinstance(value, enum.Enum):
        return f"{kind.__name__}.{value.name}"
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta, datetime.tzinfo)):
        return repr(value)
    if depth <= 0:
        return "..."
    return _nested_summary(value, depth)


def _nested_summary(value: Any, depth: int) -> str:
    """:func:`_summary` of a value made of parts (a record, container or exception), shown
    ``depth - 1`` levels deep; any other value by its type name."""
    kind = type(value)
    fields = _record_fields(value)
    if fields is not None:
        shown = [f"{name}={_summary(item, depth - 1)}" for name, item in fields]
        return f"{kind.__name__}({', '.join(shown)})"
    if isinstance(value, (list, tuple, set, frozenset)):
        return _collection_summary(value, depth)
    if isinstance(value, dict):
        return _dict_summary(value, depth)
    if isinstance(value, BaseException):
        return f"{kind.__name__}({', '.join(_summary(a, depth - 1) for a in value.args[:SUMMARY_ITEMS])})"
    return f"<{kind.__name__}>"


def _collection_summary(value: list | tuple | set | frozenset, depth: int) -> str:
    """:func:`_summary` of a list, tuple, set or frozenset (or a subclass): its first
    :data:`SUMMARY_ITEMS` items (a set's sorted by their text) and how many more there are."""
    if isinstance(value, (set, frozenset)):  # sorted: the same text whatever the hash order
        items = sorted(_summary(item, depth - 1) for item in value) if len(value) <= 1000 else []
    else:
        items = [_summary(item, depth - 1) for item in value[:SUMMARY_ITEMS]]
    more = [f"...+{len(value) - SUMMARY_ITEMS}"] if len(value) > SUMMARY_ITEMS else []
    inner = ", ".join(items[:SUMMARY_ITEMS] + more)
    if isinstance(value, list):
        return f"[{inner}]"
    if isinstance(value, tuple):
        return f"({inner}{',' if len(value) == 1 else ''})"
    return f"{{{inner}}}" if value else f"{type(value).__name__}()"


def _dict_summary(value: dict, depth: int) -> str:
    """:func:`_summary` of a dict (or a subclass): its first :data:`SUMMARY_ITEMS` pairs and how
    many more there are."""
    pairs = [f"{_summary(k, depth - 1)}: {_summary(v, depth - 1)}"
             for k, v in list(value.items())[:SUMMARY_ITEMS]]  # fmt: skip
    more = [f"...+{len(value) - SUMMARY_ITEMS}"] if len(value) > SUMMARY_ITEMS else []
    return "{" + ", ".join(pairs + more) + "}"


def _record_fields(value: Any) -> list[tuple[str, Any]] | None:
    """``[(field, value)]`` of a record that differ from the field's default; None if not a record."""
    kind = type(value)
    model_fields = getattr(kind, "model_fields", None)  # pydantic v2
    if isinstance(model_fields, dict) and hasattr(value, "__pydantic_fields_set__"):
        out = []
        for name, info in model_fields.items():
            item = getattr(value, name)
            default = getattr(info, "default", dataclasses.MISSING)
            if not (type(default) is type(item) and default == item):
                out.append((name, item))
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = []
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if not (type(field.default) is type(item) and field.default == item):
                out.append((field.name, item))
        return out
    if isinstance(value, tuple) and hasattr(kind, "_fields"):
        return list(zip(kind._fields, value))
    return None


def readable_paths(scratch: str | None = None) -> list[str]:
    """What Landlock leaves readable to a program process.

    The runtime's paths (:func:`primsel.simulator.landlock.runtime_paths`) without the primsel
    package, wherever it is installed (beside the other packages in site-packages, or a source
    checkout), plus its ``simulator`` subpackage and the worker's ``scratch`` directory (where
    the program processes' empty working directories are): so the built-in tasks' files (whose
    evaluation programs hold expected values) cannot be read.
    """
    from primsel.simulator import landlock

    package = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    extra = [os.path.join(package, "simulator")] + ([os.path.realpath(scratch)] if scratch else [])
    return landlock.without(landlock.runtime_paths(), [package]) + extra


# -- the spawner ---------------------------------------------------------------------------------


#: Stack size of the threads a program starts (``threading.stack_size``), in bytes: with the
#: C library's arenas capped, :data:`primsel.simulator.isolation.NPROC` threads fit in the
#: address-space limit (the C library's default, 8 MiB each, let about 100 start, and one
#: malloc arena of 64 MiB per thread about 15).
THREAD_STACK = 2 << 20
#: ``M_ARENA_MAX`` (``malloc.h``), and the number of malloc arenas program processes may use.
_M_ARENA_MAX, ARENAS = -8, 2


class _SpawnerState:
    """What the spawner holds for its whole life: set up once, the same for every program.

    Nothing of a task is ever stored here (nor anywhere the spawner keeps between requests):
    a program process is forked while the spawner handles that process's own spawn request,
    so its copy of the spawner's frames shows that request and nothing earlier.
    """

    def __init__(self, own: int, apps: dict[str, types.ModuleType], codec: codec_module.Codec,
                 user: tuple[int, int]) -> None:
        self.own = own
        self.apps = apps
        self.codec = codec
        # the library wrapped to record program calls, once for every program process
        self.recorder = _Recorder()
        self.exports = traced_exports(apps, self.recorder)
        self.user = user
        self.broken: list[tuple[str, str]] = []  # (layer, why): a program asking for it refuses to run
        self.ruleset: int | None = None
        self.template: Any = None
        self.proc: int | None = None  # a proc file system no path leads to, for the setup
        self.pid_namespace: int | None = None  # the spawner's own pid namespace


def serve_spawner(
    control: socket.socket,
    readable: list[str] | None,
    user: tuple[int, int] | None = None,
    runtime: list[str] | None = None,
    scratch: str | None = None,
) -> None:
    """Serve spawn requests from the worker on ``control`` until it closes (never returns).

    Messages (one JSON document per ``SOCK_SEQPACKET`` message): ``spawn`` with two descriptors attached (the program's input and
    output pipes) and the limits ``workdir``, ``memory_mb``, ``timeout``, ``stdout_cap``,
    ``seccomp``, ``landlock``, ``audit_hook``: forks a program process and answers ``{"pid": N}``. ``end`` with
    ``pids``: SIGKILLs those processes' groups, reaps them and answers their wait statuses and
    CPU seconds (``{"status": {pid: status or null}, "cpu": {pid: seconds}}``).

    Program processes run as ``user`` (default :data:`primsel.simulator.isolation.UNPRIVILEGED_USER`)
    when the spawner runs as root; the spawner first makes ``runtime`` (default ``readable``)
    reachable for that user in its own mount namespace
    (:func:`primsel.simulator.isolation.share_paths`, staging its mounts in ``scratch``), keeps
    a proc file system no path leads to for their setup
    (:func:`primsel.simulator.isolation.private_proc`), remounts every mount ``noatime``
    (:func:`primsel.simulator.isolation.no_access_times`), covers ``/proc`` with an empty file
    system (:func:`primsel.simulator.isolation.hide_processes`) and makes each program process
    the first of a pid namespace of its own
    (:func:`primsel.simulator.isolation.own_pid_namespace_for_children`), each where it may.
    Whoever runs it, the environment and the caller's ``PYTHONPATH`` entries are scrubbed
    (:func:`primsel.simulator.isolation.scrub_environment`) and threads get small stacks and
    few malloc arenas (:data:`THREAD_STACK`, :data:`ARENAS`) before any program is forked.
    """
    import threading

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        die_with_parent(os.getppid())
    apps = load_apps()
    user = tuple(user) if user else isolation.UNPRIVILEGED_USER
    state = _SpawnerState(os.getpid(), apps, codec_module.Codec(apps), user)
    if os.geteuid() == 0:
        _isolate_as_root(state, runtime or readable or [], scratch)
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    isolation.scrub_environment(keep_paths=[package])
    threading.stack_size(THREAD_STACK)
    with contextlib.suppress(AttributeError, OSError):
        isolation.processes.libc().mallopt(_M_ARENA_MAX, ARENAS)
    try:
        state.template = isolation.seccomp_template()
    except OSError as exc:
        state.broken.append(("seccomp", f"the seccomp filter could not be built: {exc}"))
    if readable is not None:
        from primsel.simulator import landlock

        try:
            state.ruleset = landlock.ruleset(readable)
        except OSError as exc:
            state.broken.append(("landlock", f"the Landlock ruleset could not be built: {exc}"))
    gc.collect()
    gc.freeze()  # keeps the program processes' copy-on-write pages shared
    while True:
        _serve_one(control, state)


def _isolate_as_root(state: _SpawnerState, runtime: list[str], scratch: str | None) -> None:
    """The spawner's mount and pid namespace set-up as root (see :func:`serve_spawner`).

    A step that cannot be taken (no ``CAP_SYS_ADMIN``) is left out, as
    :func:`primsel.simulator.sandbox.sandbox_info` reports; only a runtime the unprivileged
    user cannot reach makes program processes refuse to run.
    """
    import tempfile

    try:
        isolation.share_paths(runtime, state.user, scratch)
    except OSError as exc:
        state.broken.append(("user", f"the Python runtime cannot be made readable for uid {state.user[0]}: {exc}"))
    with contextlib.suppress(OSError):
        state.proc = isolation.private_proc(scratch or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        isolation.no_access_times(state.proc)
    if state.proc is None:
        return  # program processes need their proc files: /proc stays, and so do the host's pids
    with contextlib.suppress(OSError):
        isolation.hide_processes()
    with contextlib.suppress(OSError):
        namespace = os.open("self/ns/pid", os.O_RDONLY | os.O_CLOEXEC, dir_fd=state.proc)
        try:
            isolation.own_pid_namespace_for_children(namespace)
            state.pid_namespace = namespace
        except OSError:
            os.close(namespace)


def _serve_one(control: socket.socket, state: _SpawnerState) -> None:
    """Read one request, answer it. Its frame, and what it held, is gone before the next one."""
    import json

    try:
        data, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
    except OSError:
        os._exit(0)
    if not data:
        os._exit(0)
    request = json.loads(data)
    if request["op"] == "spawn" and len(fds) == 2:
        answer = _spawn(control, state, request, fds)
    elif request["op"] == "end":
        answer = _end_all([int(p) for p in request["pids"]])
    else:
        answer = {"error": "malformed request"}
    for fd in fds:
        os.close(fd)
    try:
        control.send(json.dumps(answer).encode())
    except OSError:  # the worker is gone
        os._exit(0)


def _spawn(control: socket.socket, state: _SpawnerState, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """Fork one program process (in a pid namespace of its own where the spawner can make one)."""
    in_namespace = False
    if state.pid_namespace is not None:
        try:
            isolation.own_pid_namespace_for_children(state.pid_namespace)
            in_namespace = True
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        control.close()
        for layer, reason in state.broken:
            if request.get(layer, True):
                _refuse(fds[1], reason)
        # the first process of a pid namespace has no parent it can see: its parent pid reads 0
        parent = 0 if in_namespace else state.own
        run_program_process(fds[0], fds[1], {**request, "user": state.user}, state.ruleset, state.exports,
                            state.recorder, state.codec, parent, state.template, state.proc)
    return {"pid": pid}


def _end_all(pids: list[int]) -> dict[str, Any]:
    """SIGKILL program processes, reap them: ``{"status": {pid: status or None}, "cpu": {pid: seconds}}``."""
    for pid in pids:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)
    ended = {str(pid): _end(pid) for pid in pids}
    return {"status": {p: e[0] for p, e in ended.items()}, "cpu": {p: e[1] for p, e in ended.items()}}


def _end(pid: int) -> tuple[int | None, float]:
    """SIGKILL a program process and its group, reap it.

    Returns ``(wait status or None if not reaped, CPU seconds it used, user and system)``.
    Waits on a pid descriptor where there is one (no polling), else polls.
    """
    import select

    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError, AttributeError):
        handle = os.pidfd_open(pid)
        try:
            select.select([handle], [], [], REAP_TIMEOUT)
        finally:
            os.close(handle)
    deadline = time.monotonic() + REAP_TIMEOUT
    pause = 0.0005
    while True:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return None, 0.0
        if done:
            return status, usage.ru_utime + usage.ru_stime
        if time.monotonic() >= deadline:
            return None, 0.0
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


# -- the program process -----------------------------------------------------------------------


def run_program_process(
    fd_in: int,
    fd_out: int,
    limits: dict[str, Any],
    ruleset: int | None,
    exports: dict[str, dict[str, Any]],
    recorder: _Recorder,
    codec: codec_module.Codec,
    parent: int,
    template: Any,
    proc: int | None = None,
) -> None:
    """Body of a program process: confine, then serve the judge (never returns).

    ``exports`` and ``recorder`` are the library as program code sees it and where its calls
    are recorded (:func:`traced_exports`), ``ruleset`` is the Landlock ruleset descriptor (None
    where Landlock is unavailable), ``template`` the compiled seccomp filter (None where
    libseccomp is missing), ``parent`` the parent's pid as this process sees it (0 in a pid
    namespace of its own) and ``proc`` a proc descriptor for the setup
    (:func:`primsel.simulator.isolation.private_proc`; None: ``/proc``).
    """
    code = 0
    try:
        die_with_parent(parent)
        output = isolation.confine(
            keep=(fd_in, fd_out),
            workdir=limits["workdir"],
            memory_mb=limits["memory_mb"],
            cpu_seconds=limits["timeout"],
            stdout_cap=limits["stdout_cap"],
            landlock_ruleset=ruleset if limits.get("landlock", True) else None,
            seccomp=template if limits.get("seccomp", True) else None,
            user=limits.get("user", isolation.UNPRIVILEGED_USER),
            hook=limits.get("audit_hook", True),
            proc=proc,
        )
    except BaseException as exc:
        _refuse(fd_out, f"the sandbox could not be set up: {_text(exc)}")
    try:
        server = _Server(fd_in, fd_out, exports, recorder, codec, output)
        # Confined, and nothing read yet: the only frame the judge takes as the sandbox's own.
        # From here on the program's code may run, and whatever comes is the program's.
        codec_module.write_frame(fd_out, READY)
        server.serve()
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _refuse(fd_out: int, message: str) -> None:
    """Tell the judge this process could not be confined, then exit (never returns)."""
    with contextlib.suppress(BaseException):
        codec_module.write_frame(fd_out, codec_module.dumps({"sandbox_error": message}))
    os._exit(71)


class _Recorder:
    """What the library calls made by program code left in one program process: the ``trace``,
    the number of ``calls`` and the ``path`` of executed lines (see the module docstring).

    Made empty in the spawner, which never calls the library: every program process starts
    with it empty, and only its own calls fill it.
    """

    def __init__(self) -> None:
        self.trace: list[list[Any]] = []
        self.calls = 0
        self.path: list[int] = []

    def recording(self, function: Callable[..., Any], primitive_id: str, skip_first: bool = False) -> Callable[..., Any]:
        """``function`` recording its calls made from program code (``skip_first``: a
        constructor, whose first argument, the class or the new instance, is not shown)."""
        getframe = sys._getframe
        recorder = self

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = getframe(1)
            if caller.f_code.co_filename == PROGRAM_FILE:
                recorder.calls += 1
                if len(recorder.trace) < TRACE_CAP:
                    shown = ", ".join([summarise(a) for a in args[1 if skip_first else 0:]]
                                      + [f"{k}={summarise(v)}" for k, v in kwargs.items()])  # fmt: skip
                    recorder.trace.append([primitive_id, caller.f_lineno, shown[:ARGS_CAP]])
                    if len(recorder.path) < PATH_CAP:
                        recorder.path.append(0)
            return function(*args, **kwargs)

        return wrapper


def traced_exports(apps: dict[str, types.ModuleType], recorder: _Recorder) -> dict[str, dict[str, Any]]:
    """``{app: star-exports}``, the library functions wrapped to record calls from program code
    in ``recorder``, and every library class's constructor too (enums aside).

    The modules' own attributes and classes are changed as well, so calls through ``import
    work_calendar`` style access are recorded too: done once, in the spawner, whose copies of
    the modules only program processes use (it never calls the library), so that a program
    process does not redo it.
    """
    classes: set[type] = set()
    return {name: _traced(module, recorder, classes) for name, module in apps.items()}


def _traced(module: types.ModuleType, recorder: _Recorder, classes: set[type]) -> dict[str, Any]:
    """The module's star-exports, library functions wrapped (:func:`traced_exports`); a class
    in ``classes`` is already wrapped (one module may export another's)."""
    exports = star_exports(module)
    prefix = "primsel.simulator.apps."
    for name, value in list(exports.items()):
        owner = getattr(value, "__module__", "") or ""
        if not owner.startswith(prefix):
            continue
        primitive_id = f"{owner[len(prefix):]}.{value.__name__}"
        if isinstance(value, types.FunctionType):
            wrapped = recorder.recording(value, primitive_id)
            exports[name] = wrapped
            if getattr(module, name, None) is value:
                setattr(module, name, wrapped)
        elif isinstance(value, type) and not issubclass(value, enum.Enum) and value not in classes:
            # a class stays itself (isinstance, annotations, attributes); its constructor records
            classes.add(value)
            method = "__new__" if issubclass(value, tuple) else "__init__"
            setattr(value, method, recorder.recording(getattr(value, method), primitive_id, skip_first=True))
    return exports


class _Server:
    """The program process's side of the protocol (see the module docstring).

    ``exports`` and ``recorder`` are :func:`traced_exports` and its recorder, made in the spawner.
    """

    def __init__(
        self,
        fd_in: int,
        fd_out: int,
        exports: dict[str, dict[str, Any]],
        recorder: _Recorder,
        codec: codec_module.Codec,
        output: isolation.CappedOutput,
    ) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.codec = codec
        self.output = output
        self.recorder = recorder
        self.entry: Callable[..., Any] | None = None
        self.exports = exports
        note = codec_module.dumps({"note": "stdout_truncated"})
        output.on_truncate = lambda: codec_module.write_frame(fd_out, note)  # known even on a timeout

    def serve(self) -> None:
        while True:
            frame = codec_module.read_frame(self.fd_in)
            if frame is None:
                return
            message = codec_module.loads(frame)
            answer = self.load(message) if message.get("op") == "load" else self.call(message)
            codec_module.write_frame(self.fd_out, codec_module.dumps(answer))

    def load(self, message: dict[str, Any]) -> dict[str, Any]:
        from primsel.simulator.state import new_context

        try:
            code = compile(message["program"], PROGRAM_FILE, "exec")
            module = types.ModuleType("query_executable")
            for app in message["apps"]:
                if app not in self.exports:
                    raise ModuleNotFoundError(f"no library module named {app!r}")
                module.__dict__.update(self.exports[app])
            sys.modules["query_executable"] = module
            with new_context():  # module-level code gets a scratch world
                exec(code, module.__dict__)
            entry = module.__dict__.get(message["entry"])
            if not callable(entry):
                raise NameError(f"the program defines no function {message['entry']!r}")
            self.entry = entry
        except BaseException as exc:
            return {"exception": describe(exc)}
        return {"ok": True}

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        from primsel.simulator.state import TABLES, ExecutionContext, new_context

        codec = self.codec
        state = codec.decode(message["state"])
        context = ExecutionContext()
        for name in TABLES:
            context.tables[name] = state[name]
        random.setstate(codec.decode(message["random"]))
        args = codec.decode(message["args"])
        kwargs = codec.decode(message["kwargs"])
        recorder = self.recorder
        recorder.trace = []
        recorder.calls = 0
        recorder.path = path = []

        def lines(frame: types.FrameType, event: str, arg: Any) -> Any:
            if event == "line" and len(path) < PATH_CAP:
                path.append(frame.f_lineno)
            return lines

        def calls(frame: types.FrameType, event: str, arg: Any) -> Any:
            return lines if frame.f_code.co_filename == PROGRAM_FILE else None

        answer: dict[str, Any] = {}
        try:
            if self.entry is None:
                raise NameError("the program was not loaded")
            with new_context(context):
                sys.settrace(calls)
                try:
                    value = self.entry(*args, **kwargs)
                finally:
                    sys.settrace(None)
        except BaseException as exc:
            answer["exception"] = describe(exc)
        else:
            _put_return(answer, value, codec)
        try:
            answer["state"] = codec.encode(context.tables)
            answer["random"] = codec.encode(random.getstate())
        except BaseException as exc:
            answer.pop("return", None)
            answer["unsupported"] = f"the program left the world state holding a value that cannot be checked: {_text(exc)}"
            answer["state"] = answer["random"] = None
        answer["trace"] = recorder.trace
        answer["path"] = recorder.path
        answer["calls"] = recorder.calls
        answer["stdout_truncated"] = self.output.truncated
        return answer


def _put_return(answer: dict[str, Any], value: Any, codec: codec_module.Codec) -> None:
    """Put the entry point's return ``value``, encoded, in ``answer`` (``return``), or why it
    cannot cross (``unsupported``). A coroutine returned (never awaited) is closed."""
    try:
        answer["return"] = codec.encode(value)
    except BaseException as exc:  # CodecError, or a library object missing a field
        answer["unsupported"] = f"the program returned a value that cannot be checked: {_text(exc)}"
    finally:
        if isinstance(value, types.CoroutineType):
            with contextlib.suppress(BaseException):
                value.close()  # never awaited: say nothing about it on stderr


def _text(exc: BaseException) -> str:
    try:
        return str.__str__(str(exc))[:MESSAGE_CAP]
    except BaseException:
        return type(exc).__name__


def describe(exc: BaseException) -> dict[str, Any]:
    """What crosses for an exception: ``type``, ``module``, ``message``, ``args`` and ``line``.

    ``line`` is the last line of the program text in the traceback (None if it was not raised
    in or through the program). ``args`` is the encoded ``exc.args`` when they are plain
    strings and numbers, else None. Texts are capped; a ``__str__`` that fails is reported.
    """
    kind = type(exc)
    name = type.__dict__["__name__"].__get__(kind)  # what the class says, not a metaclass
    try:
        module = type.__dict__["__module__"].__get__(kind)
    except BaseException:
        module = None
    try:
        message = str.__str__(str(exc))
    except BaseException:
        message = f"<{name} object whose str() failed>"
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
        line = None
    args = None
    with contextlib.suppress(BaseException):
        plain = tuple(exc.args)
        if len(plain) <= 8 and all(type(a) in (str, int, bool, type(None)) for a in plain):
            args = [a[:MESSAGE_CAP] if type(a) is str else a for a in plain]
    return {
        "type": name[:NAME_CAP],
        "module": module[:NAME_CAP] if type(module) is str else None,
        "message": message[:MESSAGE_CAP],
        "args": args,
        "line": line if type(line) is int else None,
    }
