"""The judge: runs a task's setup and evaluation programs and alone decides the verdict.

The judge runs in the sandbox worker, a process in which no program code ever runs. The
``executable`` it hands to each evaluation program (EP) is a :class:`ProgramHandle`: calling it
sends the current world state to the task's program process (:mod:`primsel.simulator.program`),
waits for the answer within the program's time limit, installs the world state that comes back
and returns the decoded return value, or raises the program's exception again (library
exceptions as the library's own classes, builtin ones as the builtin class, any other as
:class:`ProgramException`). Everything that comes back is checked by
:class:`primsel.simulator.codec.Codec` and rebuilt as data.

Time is charged by a :class:`Clock`: while a call is out to the program process, to the task's
time limit (``timeout``); the rest, the setup and evaluation programs themselves, to the judge's
own limit. Statuses follow docs/architecture.md ("Statuses"), with two error types of the judge's own:
``UnsupportedReturn`` (the program's return value, or the world state it left, holds a type
that cannot cross) and ``EvaluatorError`` (a fault of the judge or of the task's own programs,
e.g. a setup program that raises or a judge over its time limit: never ``pass``). A verdict of
the judge's own (timeout, a dead program process, an unsupported value) stands even if the EP
catches the exception that carries it.
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import enum
import fcntl
import importlib
import json
import os
import random
import re
import signal
import time
import types
from collections.abc import Iterator
from typing import Any

from primsel.simulator import codec as codec_module
from primsel.simulator import matching
from primsel.simulator.layout import APPS, CHECK_TOOLS, SETUP_TOOLS
from primsel.simulator.verdicts import (
    MAX_LINE,
    ExceptionClasses,
    JudgeVerdict,
    PairReport,
    cap_text,
    clean_name,
    clean_text,
    describe,
    evaluator_error,
    verdict,
)
from primsel.simulator.program import ARGS_CAP, NAME_CAP, PATH_CAP, READY, TRACE_CAP, star_exports, summarise

#: Builtin exception classes a program's exception may be raised again as.
_BUILTIN_EXCEPTIONS = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, Exception)
}


#: The frame a program process sends when its output first passes the cap.
_TRUNCATED_NOTE = codec_module.dumps({"note": "stdout_truncated"})
#: Error type of a frame only the sandbox may send (a set-up failure) that reached the judge
#: after the program's code could run: the program's doing.
FORGED_FRAME = "ForgedFrame"


class ProgramException(Exception):
    """An exception of the program whose class cannot be rebuilt in the judge (e.g. its own).

    ``program_type`` is the name of the program's class.
    """

    def __init__(self, program_type: str, message: str) -> None:
        super().__init__(message)
        self.program_type = program_type


class JudgeLibrary:
    """The library as the judge sees it: app star-exports, setup tools and check tools."""

    def __init__(self, apps: dict[str, types.ModuleType]) -> None:
        self.missing: dict[str, str] = {}
        self.apps = apps
        self.setup = self._import("setup_tools", SETUP_TOOLS)
        self.check = self._import("check_tools", CHECK_TOOLS)
        self.exports = {name: star_exports(module) for name, module in apps.items()}
        solution_error = getattr(self.check.get("exceptions"), "SolutionError", None)
        self.fail_types: tuple[type[BaseException], ...] = (AssertionError,) + (
            (solution_error,) if isinstance(solution_error, type) else ()
        )
        exceptions = apps.get("exceptions")
        self.library_exceptions = {
            name: value
            for name, value in (vars(exceptions).items() if exceptions else ())
            if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == exceptions.__name__
        }
        requires = self.library_exceptions.get("RequiresUserInput")
        self.requires_input: tuple[type[BaseException], ...] = (requires,) if requires else ()
        self.classes = ExceptionClasses(self.fail_types, self.requires_input)
        self.codec = codec_module.Codec(apps)
        #: Ids a program's call trace may name: ``<app>.<name>`` of every exported function and
        #: (non-enum) class of the apps, as the program process records them.
        prefix = "primsel.simulator.apps."
        self.primitive_ids = frozenset(
            f"{value.__module__[len(prefix):]}.{value.__name__}"
            for exports in self.exports.values()
            for value in exports.values()
            if (isinstance(value, types.FunctionType) or (isinstance(value, type) and not issubclass(value, enum.Enum)))
            and (getattr(value, "__module__", "") or "").startswith(prefix)
        )

    def _import(self, group: str, names: tuple[str, ...]) -> dict[str, types.ModuleType]:
        modules = {}
        for name in names:
            dotted = f"primsel.simulator.{group}.{name}"
            try:
                modules[name] = importlib.import_module(dotted)
            except Exception as exc:  # a broken module must not kill the worker
                self.missing[dotted] = f"{type(exc).__name__}: {exc}"
        for name in APPS:
            if name not in self.apps:
                self.missing[f"primsel.simulator.apps.{name}"] = "could not be imported"
        return modules

    def namespace(self, apps: list[str]) -> dict[str, Any]:
        """A fresh namespace with the star-exports of ``apps`` in order (later names win)."""
        namespace: dict[str, Any] = {}
        for app in apps:
            if app not in self.exports:
                raise ModuleNotFoundError(f"no library module named {app!r}")
            namespace.update(self.exports[app])
        return namespace

    def tool(self, spec: str, modules: dict[str, types.ModuleType], kind: str) -> tuple[str, Any]:
        """Resolve a ``module::name`` tool reference of a task's scenario."""
        module_name, _, name = spec.partition("::")
        module = modules.get(module_name)
        if module is None or not hasattr(module, name):
            raise ImportError(f"cannot import {kind} {name!r} from {module_name!r}")
        return name, getattr(module, name)


class _LoadFailed(BaseException):
    """Raised into an evaluation program by ``executable`` when the program could not be loaded."""


#: ``F_GETPIPE_SZ`` (``fcntl.h``): a pipe's capacity in bytes.
_F_GETPIPE_SZ = 1032


class _JudgeTimeout(BaseException):
    """The judge's own time limit passed (raised by the SIGALRM handler of :class:`Clock`)."""


#: Most steps one search of a text by RE2, or one fuzzy match (in RE2's steps), may take in the
#: judge (:data:`matching.search_guard`): about a third of a second of RE2's slowest matcher on
#: a loaded machine, a thousand times what a search of a room name among room names of a hundred
#: characters takes.
MAX_SEARCH_STEPS = 10_000_000


class Clock:
    """Charges wall time to the program (while a call is out) or to the judge, and limits both.

    Use as a context manager around the judge's work: it arms ``ITIMER_REAL`` with the judge's
    remaining time, so setup and evaluation code that runs too long is interrupted by a
    :class:`_JudgeTimeout`; :meth:`program_call` pauses that timer and gives the deadline of the
    program's remaining time. Main thread only (signals).

    Parameters
    ----------
    program_limit : seconds the program may run over the whole task.
    judge_limit : seconds the setup and evaluation programs may run over the whole task.
    """

    def __init__(self, program_limit: float, judge_limit: float) -> None:
        self.program_left = program_limit
        self.judge_left = judge_limit
        self.judge_limit = judge_limit
        self.expired = False
        self.reason = ""  # why the judge's time ended before its timer fired, if it did
        self._previous: Any = None

    def _alarm(self, signum: int, frame: Any) -> None:
        self.expired = True
        raise _JudgeTimeout()

    def __enter__(self) -> Clock:
        self._previous = signal.signal(signal.SIGALRM, self._alarm)
        signal.setitimer(signal.ITIMER_REAL, max(self.judge_left, 1e-6))
        matching.search_guard = self.bound_search
        return self

    def __exit__(self, *exc_info: object) -> None:
        matching.search_guard = None
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)

    def bound_search(self, steps: int, what: str = "a regular-expression search") -> None:
        """Refuse a search in C that may take more than :data:`MAX_SEARCH_STEPS` steps.

        Such a search would run in C, where the judge's timer cannot fire, for longer than the
        judge may wait: it ends the judge's time now, as the timer would have (the program's
        time, once the program was called: ``timeout`` / ``CheckTimeout``).

        Parameters
        ----------
        steps : the most steps the search may take (RE2's, or their equivalent in time).
        what : the search, for the message (e.g. ``"a fuzzy name match"``).

        Raises
        ------
        _JudgeTimeout : ``steps`` is past the bound.
        """
        if steps <= MAX_SEARCH_STEPS:
            return
        self.expired = True
        self.reason = (f"needed {what} of up to {steps:,} steps in C (past the judge's "
                       f"bound of {MAX_SEARCH_STEPS:,}), where the judge's timer cannot stop it")
        raise _JudgeTimeout()

    @contextlib.contextmanager
    def program_call(self) -> Iterator[float]:
        """Pause the judge's timer; yields the ``time.monotonic()`` deadline of the program."""
        self.judge_left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
        if self.judge_left <= 0:  # it fired just now
            self.expired = True
            raise _JudgeTimeout()
        start = time.monotonic()
        try:
            yield start + max(self.program_left, 0.0)
        finally:
            self.program_left -= time.monotonic() - start
            signal.setitimer(signal.ITIMER_REAL, max(self.judge_left, 1e-6))


class ProgramHandle:
    """The judge's end of one program process (one per (SIP, EP) pair).

    Parameters
    ----------
    library : the judge's library (its codec and exception classes are used).
    to_program, from_program : the pipe descriptors to and from the program process
        (made non-blocking here).
    clock : charges the calls' time to the program's limit.
    timeout : the program's time limit in seconds (for messages).
    frame_cap : largest answer accepted, in bytes.
    reference : the task's reference program, for the collateral audit (None: every row of the
        world that the program removed or changed counts).
    """

    def __init__(
        self,
        library: JudgeLibrary,
        to_program: int,
        from_program: int,
        clock: Clock,
        timeout: float,
        frame_cap: int = codec_module.FRAME_CAP,
        reference: Reference | None = None,
    ) -> None:
        self.library = library
        self.reference = reference
        self.collateral = 0
        self.to_program = to_program
        self.from_program = from_program
        for fd in (to_program, from_program):
            os.set_blocking(fd, False)
        self.clock = clock
        self.timeout = timeout
        self.frame_cap = frame_cap
        self.called = False
        self.trace: list[tuple[str, int | None, str]] = []
        self.outcomes: list[tuple[int, str, str]] = []
        self.paths: list[list[int]] = []
        self.calls = 0
        self.stdout_truncated = False
        self.origins: list[tuple[BaseException, str, int | None, str]] = []
        self.fatal: JudgeVerdict | None = None
        self.ready = False  # the program process said it is confined (its first frame)
        self._load: tuple[bytes, bool] | None = None  # the load request not answered yet
        self.load_failure: BaseException | None = None

    def report(self) -> PairReport:
        """What the judge learned from this program process, as plain data for the verdict."""
        return PairReport(self.trace, self.outcomes, self.paths, self.stdout_truncated, self.fatal, self.origins,
                          self.collateral)

    def _fail(self, status: str, error_type: str | None, message: str) -> JudgeVerdict:
        """A verdict that ends the task whatever the EP does with the exception (kept in ``fatal``)."""
        if self.fatal is None:
            self.fatal = JudgeVerdict(status, error_type, message)
        return self.fatal

    def _exchange(self, message: dict[str, Any] | bytes, sent: bool = False) -> dict[str, Any]:
        """Send one message (unless ``sent``: its frame is already in the pipe) and read the
        answer within the program's remaining time."""
        payload = message if type(message) is bytes else codec_module.dumps(message)
        with self.clock.program_call() as deadline:
            try:
                if not sent:
                    codec_module.write_frame(self.to_program, payload, deadline)
                frame = self._receive(deadline)
            except (OSError, codec_module.CodecError, MemoryError) as exc:
                raise self._transport_failure(exc) from None
            if frame is None:
                raise self._fail("error", "ProcessDied", "the program's process ended without answering")
            # Parsing what the program sent is the program's time, and bounded before it starts.
            if codec_module.too_many_values(frame):
                raise self._fail("error", "UnsupportedReturn",
                                 f"the program's answer holds more than {codec_module.MAX_NODES} values")
            try:
                answer = codec_module.loads(frame)
            except codec_module.CodecError:
                answer = None
            except MemoryError:
                raise self._fail("error", "UnsupportedReturn", "the program's answer does not fit in the judge's memory") from None
        self._charge()
        if type(answer) is not dict:
            raise self._fail("error", "SandboxViolation", "the program's process sent a malformed answer")
        if "sandbox_error" in answer or "ready" in answer:
            # After the handshake the program's code may have run: it wrote this frame.
            raise self._forged("the program sent a frame only the sandbox may send (a set-up failure report "
                               "or a readiness note) after its code had started")
        return answer

    def _receive(self, deadline: float) -> bytes | None:
        """The program process's next answer frame, read by ``deadline`` (None: the pipe was
        closed). Its first frame is checked as the sandbox's handshake, and notes that its
        output passed the cap are taken down on the way.

        Raises
        ------
        TimeoutError, OSError, codec.CodecError, MemoryError : as :func:`codec.read_frame`.
        JudgeVerdict : the handshake failed (:meth:`_handshake`).
        """
        while True:
            frame = codec_module.read_frame(self.from_program, self.frame_cap, deadline)
            if not self.ready and frame is not None:
                # The first frame comes before the process reads anything: only the
                # sandbox can have written it.
                self._handshake(frame)
                continue
            if frame != _TRUNCATED_NOTE:
                return frame
            self.stdout_truncated = True

    def _transport_failure(self, exc: BaseException) -> JudgeVerdict:
        """The verdict that ends the task when a message could not be sent or its answer read."""
        if isinstance(exc, TimeoutError):
            return self._fail("timeout", None, f"time limit of {self.timeout:g} s exceeded")
        if isinstance(exc, OSError):
            return self._fail("error", "ProcessDied", f"the program's process stopped answering ({exc})")
        if isinstance(exc, codec_module.FrameTooLarge):
            return self._fail("error", "UnsupportedReturn", f"the program's answer is too large: {exc}")
        if isinstance(exc, codec_module.CodecError):
            return self._fail("error", "ProcessDied", f"the program's process died mid-answer ({exc})")
        # MemoryError: the frame's buffer, the program's answer, not a fault of the task
        return self._fail("error", "UnsupportedReturn",
                          "the program's answer does not fit in the judge's memory")

    def _handshake(self, frame: bytes) -> None:
        """Check the program process's first frame: ready, or the sandbox's set-up failure."""
        if frame == READY:
            self.ready = True
            return
        try:
            answer = codec_module.loads(frame) if len(frame) <= 1 << 16 else None
        except codec_module.CodecError:
            answer = None
        if type(answer) is dict and set(answer) == {"sandbox_error"}:
            text = answer["sandbox_error"]
            raise self._fail("error", "SandboxError",
                             cap_text(clean_text(text)) if type(text) is str else "the sandbox could not be set up")
        raise self._fail("error", "SandboxViolation", "the program's process did not say it was confined")

    def _forged(self, message: str) -> JudgeVerdict:
        """The program's own verdict: a frame it forged (``raised_by`` ``program``)."""
        return self._program_says(FORGED_FRAME, message)

    def _program_says(self, error_type: str, message: str) -> JudgeVerdict:
        """A verdict that ends the task (as :meth:`_fail`) told as the program's (``raised_by``
        ``program``): its text came from the program's process, which the program's code may
        have written, so it is never told as the sandbox's own verdict. A verdict already
        reached stands, as the sandbox's or the program's it was."""
        new = self.fatal is None
        fatal = self._fail("error", error_type, message)
        if new:
            self.origins.append((fatal, error_type, None, message))
        return fatal

    def _unsupported(self, text: Any) -> JudgeVerdict:
        """``UnsupportedReturn`` with the program process's account of the value that cannot
        cross (``text``): the program's (:meth:`_program_says`), since the program may forge it."""
        if type(text) is str:
            return self._program_says("UnsupportedReturn", cap_text(clean_text(text)))
        return self._program_says("UnsupportedReturn", "the program's process said its answer holds a value "
                                                       "that cannot be checked")

    def _charge(self) -> None:
        """End the task as ``timeout`` if the program's time (judge work on its answer included) ran out."""
        if self.clock.program_left < 0:
            raise self._fail("timeout", None, f"time limit of {self.timeout:g} s exceeded (the judge's work on "
                                              "what the program sent counts as the program's time)")

    def load(self, program: str, entry: str, apps: list[str]) -> None:
        """Load the program in its process (its module-level code runs there).

        Raises
        ------
        The program's exception, raised again (see :meth:`raise_program_exception`).
        """
        self.start_load(program, entry, apps)
        self.finish_load()

    def start_load(self, program: str, entry: str, apps: list[str]) -> None:
        """Put the load request in the pipe now, when it fits, without waiting for the answer.

        The program process loads the program while the judge runs the setup program; the
        answer is read by :meth:`finish_load` (at the first call of ``executable`` at the
        latest). A request larger than the pipe holds is sent there instead.
        """
        payload = codec_module.dumps({"op": "load", "program": program, "entry": entry, "apps": apps})
        sent = False
        with contextlib.suppress(OSError):
            # an empty pipe takes a frame up to its capacity in one write: nothing waits
            if len(payload) + 64 <= fcntl.fcntl(self.to_program, _F_GETPIPE_SZ):
                codec_module.write_frame(self.to_program, payload)
                sent = True
        self._load = (payload, sent)

    def finish_load(self) -> None:
        """Read the answer to the load request (sending it first if :meth:`start_load` could not).

        Raises
        ------
        The program's exception, raised again (see :meth:`raise_program_exception`).
        """
        if self._load is None:
            return
        payload, sent = self._load
        self._load = None
        answer = self._exchange(payload, sent=sent)
        if "exception" in answer:
            self.raise_program_exception(answer["exception"])
        if answer.get("ok") is not True:
            raise self._fail("error", "SandboxViolation", "the program's process sent a malformed answer")

    def _loaded(self) -> None:
        """:meth:`finish_load` from inside the evaluation program: a failed load ends the task
        with the load's exception (kept in ``load_failure``), whatever the evaluation program
        catches, as when the program was loaded before the evaluation program ran."""
        if self.load_failure is None:
            try:
                self.finish_load()
            except BaseException as exc:
                self.load_failure = exc
        if self.load_failure is not None:
            raise _LoadFailed()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The ``executable`` an EP calls: run the entry point on the current world state."""
        from primsel.simulator.state import TABLES, get_current_context

        self._loaded()
        self.called = True
        context = get_current_context()
        sent_random = random.getstate()
        message = self._call_message({name: context.tables[name] for name in TABLES}, args, kwargs)
        answer = self._exchange(message)
        with self.clock.program_call():  # decoding what the program sent is the program's time
            state, random_state, trace, calls, path = self._decode_answer(answer)
            value, returned = self._decode_return(answer)
        self._charge()
        if type(answer.get("stdout_truncated")) is not bool or type(calls) is not int:
            raise self._fail("error", "SandboxViolation", "the program's process sent a malformed answer")
        self.stdout_truncated |= answer["stdout_truncated"]
        self.calls += max(calls, 0)
        kept = trace[: max(0, TRACE_CAP - len(self.trace))]
        self.trace.extend(kept)
        if state is not None:
            self.collateral += self._collateral(message["state"], answer["state"], sent_random)
            for name in TABLES:
                context.tables[name][:] = state[name]
        if random_state is not None:
            random.setstate(random_state)
        self._raise_unless_returned(answer, returned, len(kept), path)
        self.outcomes.append((len(kept), "return", cap_text(clean_text(summarise(value)))))
        self.paths.append(path)
        return value

    def _call_message(
        self, tables: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The ``call`` request: the world state ``tables``, the ``random`` state, ``args`` and
        ``kwargs``, encoded.

        Raises
        ------
        JudgeVerdict : ``EvaluatorError``, something of these cannot be encoded.
        """
        codec = self.library.codec
        try:
            return {
                "op": "call",
                "state": codec.encode(tables, "the world state"),
                "random": codec.encode(random.getstate()),
                "args": codec.encode(list(args), "the arguments"),
                "kwargs": codec.encode(dict(kwargs), "the arguments"),
            }
        except codec_module.CodecError as exc:
            raise self._fail("error", "EvaluatorError",
                             f"the judge cannot send the world state: {exc}") from None

    def _decode_answer(self, answer: dict[str, Any]) -> tuple[Any, ...]:
        """``(state, random_state, trace, calls, path)``: the world state, ``random`` state,
        call trace, call count (unchecked) and executed lines of the program's ``answer`` to a
        call, decoded and checked.

        Raises
        ------
        JudgeVerdict : ``UnsupportedReturn``, one of them cannot be decoded or does not fit in
            memory (the program's own message, when it sent one).
        """
        try:
            state = self._state(answer.get("state"))
            random_state = self._random_state(answer.get("random"))
            trace, calls = self._trace(answer.get("trace")), answer.get("calls")
            path = self._path(answer.get("path", []))
        except codec_module.CodecError as exc:
            if "unsupported" in answer and type(answer["unsupported"]) is str:
                raise self._unsupported(answer["unsupported"]) from None
            raise self._fail("error", "UnsupportedReturn",
                             f"the program's answer cannot be checked: {exc}") from None
        except MemoryError:
            raise self._fail("error", "UnsupportedReturn",
                             "the program's answer does not fit in the judge's memory") from None
        return state, random_state, trace, calls, path

    def _decode_return(self, answer: dict[str, Any]) -> tuple[Any, bool]:
        """``(value, True)``: the decoded return value of the program's ``answer`` to a call;
        ``(None, False)`` when the answer carries none (it raised, or its value cannot cross).

        Raises
        ------
        JudgeVerdict : ``UnsupportedReturn``, the value cannot be decoded or does not fit in memory.
        """
        if "return" not in answer or "unsupported" in answer or "exception" in answer:
            return None, False
        try:
            return self.library.codec.decode(answer["return"]), True
        except codec_module.CodecError as exc:
            raise self._fail("error", "UnsupportedReturn",
                             f"the program's return value cannot be checked: {exc}") from None
        except MemoryError:
            raise self._fail("error", "UnsupportedReturn",
                             "the program's return value does not fit in the judge's memory") from None

    def _raise_unless_returned(
        self, answer: dict[str, Any], returned: bool, kept: int, path: list[int]
    ) -> None:
        """End the call unless the program returned a value: its unsupported value or its
        exception (noted as the call's outcome after ``kept`` trace entries, with its executed
        lines ``path``), else a malformed answer.

        Raises
        ------
        JudgeVerdict : ``UnsupportedReturn``, or ``SandboxViolation`` for an answer with neither
            a value nor an exception.
        BaseException : the program's exception, raised again (:meth:`raise_program_exception`).
        """
        if "unsupported" in answer:
            raise self._unsupported(answer["unsupported"])
        if "exception" in answer:
            info = answer["exception"]
            if type(info) is dict and type(info.get("type")) is str and type(info.get("message")) is str:
                raised = f"{clean_name(info['type'])}: {info['message']}"
                self.outcomes.append((kept, "raise", cap_text(clean_text(raised))))
                self.paths.append(path)
            self.raise_program_exception(info)
        if not returned:
            raise self._fail("error", "SandboxViolation", "the program's process sent a malformed answer")

    def _collateral(self, before: Any, after: Any, random_state: tuple[Any, ...]) -> int:
        """Rows of the world ``before`` the call that the program removed or changed and the
        reference program, run on the same world and ``random`` state, did not.

        ``before`` is the judge's encoding of the world it sent, ``after`` the program's encoding
        of the world it left (already decoded once without error). A row counts as kept when an
        equal row is still there (a multiset: two equal rows need two); only when the program
        dropped some is the reference program run (in the judge: it is the task's own code).
        """
        removed = _removed_rows(before, after)
        if not removed:
            return 0
        if self.reference is not None:
            removed -= self.reference.removed_rows(before, random_state)
        return sum(removed.values())

    def _state(self, data: Any) -> dict[str, list[dict[str, Any]]] | None:
        from primsel.simulator.state import TABLES

        if data is None:
            raise codec_module.CodecError("no world state")
        state = self.library.codec.decode(data)
        if type(state) is not dict or set(state) != set(TABLES):
            raise codec_module.CodecError("the world state does not have the expected tables")
        for rows in state.values():
            if type(rows) is not list or any(type(r) is not dict or any(type(k) is not str for k in r) for r in rows):
                raise codec_module.CodecError("a table of the world state is not a list of rows")
        return state

    def _random_state(self, data: Any) -> tuple[Any, ...]:
        value = self.library.codec.decode(data)
        valid = (
            type(value) is tuple
            and len(value) == 3
            and value[0] == 3
            and type(value[1]) is tuple
            and len(value[1]) == 625
            and set(map(type, value[1])) == {int}  # checked in C: 625 words per call
            and 0 <= min(value[1])
            and max(value[1]) < 2**32
            and value[1][-1] <= 624
            and (value[2] is None or type(value[2]) is float)
        )
        if not valid:
            raise codec_module.CodecError("malformed random state")
        return value

    def _path(self, data: Any) -> list[int]:
        if type(data) is not list or len(data) > PATH_CAP or any(type(v) is not int or not 0 <= v <= MAX_LINE for v in data):
            raise codec_module.CodecError("malformed path of executed lines")
        return data

    def _trace(self, data: Any) -> list[tuple[str, int | None, str]]:
        if type(data) is not list:
            raise codec_module.CodecError("malformed call trace")
        trace = []
        for entry in data[:TRACE_CAP]:
            if (
                type(entry) is not list
                or len(entry) != 3
                or type(entry[0]) is not str
                or type(entry[1]) not in (int, type(None))
                or type(entry[2]) is not str
            ):
                raise codec_module.CodecError("malformed call trace")
            if entry[0] not in self.library.primitive_ids:
                raise codec_module.CodecError("the call trace names no primitive of the library")
            line = entry[1] if entry[1] is not None and 1 <= entry[1] <= MAX_LINE else None
            trace.append((entry[0], line, clean_text(entry[2][:ARGS_CAP])))
        return trace

    def raise_program_exception(self, info: Any) -> None:
        """Raise the program's exception again in the judge.

        Library exceptions (``RequiresUserInput`` and the others of the ``exceptions`` app) come
        back as the library's own classes and builtin exceptions as the builtin class, built
        from their plain arguments; anything else as :class:`ProgramException`. SystemExit,
        KeyboardInterrupt and other non-``Exception`` classes end the task at once (``error``).
        The program's class name and line are kept for the verdict.
        """
        if not (
            type(info) is dict
            and type(info.get("type")) is str
            and type(info.get("message")) is str
            and type(info.get("module")) in (str, type(None))
            and type(info.get("line")) in (int, type(None))
            and type(info.get("args")) in (list, type(None))
        ):
            raise self._fail("error", "SandboxViolation", "the program's process sent a malformed exception")
        name, module, message, line = info["type"][:NAME_CAP], info["module"], cap_text(info["message"]), info["line"]
        args = info["args"]
        if args is not None and not all(type(a) in (str, int, bool, type(None)) for a in args):
            args = None
        cls: type[BaseException] | None = None
        if module == "primsel.simulator.apps.exceptions":
            cls = self.library.library_exceptions.get(name)
        elif module == "builtins":
            cls = _BUILTIN_EXCEPTIONS.get(name)
        exc: BaseException | None = None
        if cls is not None:
            with contextlib.suppress(Exception):
                exc = cls(*args) if args is not None else cls(message)
        if exc is None:
            if module == "builtins" and name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException"):
                fatal = self._fail("error", name, message)
                self.origins.append((fatal, name, line, message))
                raise fatal
            exc = ProgramException(name, message)
        self.origins.append((exc, name, line, message))
        raise exc


#: Columns that identify a row of a table, where its rows have an identity: in these tables a
#: row is also compared with the rows that hold its id after the call (:func:`_removed_rows`).
#: A shared calendar holds one row per calendar for an event, so its rows are identified by both.
ROW_IDS = {
    "USER_CALENDAR": ("event_id",),
    "SHARED_CALENDARS": ("calendar_id", "event_id"),
    "EMPLOYEES": ("employee_id",),
    "CONFERENCE_ROOMS": ("room_id",),
    "CONFERENCE_ROOM_BOOKINGS": ("booking_id",),
}


def _removed_rows(before: Any, after: Any) -> collections.Counter[str]:
    """The rows of the encoded world ``before`` (``{"d": [[table, [row, ...]], ...]}``) that are
    not in ``after``, each as its table's name and the text of its encoding (sets in sorted
    order), counted.

    A row is kept when an equal row is still there (two equal rows need two) and, in a table of
    :data:`ROW_IDS`, its id is held by no row whose value no row had before: a row changed in
    place counts as gone even when a copy of its old value is added back (every row of the world
    before with that id counts), while an equal copy of a row, or a row with a new id, is only
    an addition. A table encoded alike on both sides, as most are, is not looked into.
    """
    tables_after = {table: rows for table, rows in after["d"]}
    removed: collections.Counter[str] = collections.Counter()
    for table, rows in before["d"]:
        rows_after = tables_after.get(table, [])
        if rows != rows_after:
            gone = _removed_from_table(ROW_IDS.get(table, ()), rows, rows_after)
            removed.update({f"{table}\n{text}": count for text, count in gone.items()})
    return removed


def _removed_from_table(id_columns: tuple[str, ...], rows: list[Any],
                        rows_after: list[Any]) -> collections.Counter[str]:
    """The texts (:func:`_row_text`) of the encoded ``rows`` not kept in ``rows_after``, counted
    (the rule of :func:`_removed_rows`; ``id_columns`` empty: equal rows only)."""
    texts = [_row_text(row) for row in rows]
    texts_after = [_row_text(row) for row in rows_after]
    counts = collections.Counter(texts)
    counts_after = collections.Counter(texts_after)
    removed = counts - counts_after
    if not id_columns:
        return removed
    # ids held after the call by a value no row had before (a row changed, or a new row)
    changed_ids = {_row_id(row, id_columns) for row, text in zip(rows_after, texts_after) if text not in counts}
    changed_ids.discard(None)
    if not changed_ids:
        return removed
    for row, text in zip(rows, texts):
        if _row_id(row, id_columns) in changed_ids:
            removed[text] = counts[text]
    return removed


def _row_id(row: Any, id_columns: tuple[str, ...]) -> tuple[str, ...] | None:
    """The id of an encoded row (``{"d": [[column, value], ...]}``): the JSON texts of its
    ``id_columns``' values, or None when one is missing or null."""
    values = {column: value for column, value in row["d"] if column in id_columns}
    if len(values) != len(id_columns) or None in values.values():
        return None
    return tuple(json.dumps(values[column], separators=(",", ":")) for column in id_columns)


def _row_text(row: Any) -> str:
    """The canonical text of an encoded row (``{"d": [[column, value], ...]}``): equal for rows
    of equal values, whatever the order of their columns, of the entries of a dict in them or of
    the items of a set (:func:`_canonical`)."""
    entries = sorted(row["d"], key=_entry_order)
    text = json.dumps(entries, separators=(",", ":"), sort_keys=True)
    if '{"d":' in text or '{"s":' in text or '{"fs":' in text:  # a dict or a set inside
        text = json.dumps(_canonical(entries), separators=(",", ":"), sort_keys=True)
    return text


def _entry_order(entry: list[Any]) -> tuple[int, str]:
    """The sort key of an encoded dict entry ``[key, value]``: its key (a string as it is, any
    other key by its JSON text, after the strings)."""
    key = entry[0]
    if type(key) is str:
        return (0, key)
    return (1, json.dumps(key, separators=(",", ":"), sort_keys=True))


def _canonical(encoded: Any) -> Any:
    """``encoded`` (the codec's wire form) with every dict's entries in :func:`_entry_order` and
    every set's items in the order of their JSON text, so that equal values read alike (the
    fields of a library object are ordered by ``json.dumps(..., sort_keys=True)``)."""
    if type(encoded) is list:
        return [_canonical(item) for item in encoded]
    if type(encoded) is not dict:
        return encoded
    (tag, body), = encoded.items()  # every dict of the wire form is one tag and its body
    if tag == "obj":
        name, fields = body
        return {tag: [name, {field: _canonical(value) for field, value in fields.items()}]}
    if tag == "d":
        return {tag: sorted(_canonical(body), key=_entry_order)}
    if tag in ("s", "fs"):
        items = [_canonical(item) for item in body]
        return {tag: sorted(items, key=lambda item: json.dumps(item, separators=(",", ":"), sort_keys=True))}
    return {tag: _canonical(body)}


class Reference:
    """The task's reference program, which the judge runs itself for the collateral audit.

    It is the task's own code, like the setup and evaluation programs, so it runs in the judge
    (on a copy of the world the program was given), never in a program process.

    Parameters
    ----------
    library : the judge's library.
    text : the reference program's source (its first top-level function is its entry point).
    apps : the task's apps (star-exported into its namespace).
    """

    def __init__(self, library: JudgeLibrary, text: str, apps: list[str]) -> None:
        self.library = library
        self.text = text
        self.apps = apps
        self._entry: Any = None

    def removed_rows(self, encoded_state: Any, random_state: tuple[Any, ...]) -> collections.Counter[str]:
        """The rows of ``encoded_state`` (keys of :func:`_removed_rows`) that the reference program,
        run on that world with ``random`` in ``random_state``, removed or changed.

        Whatever it raises ends its run (its changes until then count); the judge's own world
        and ``random`` state are left as they were.
        """
        from primsel.simulator.state import TABLES, ExecutionContext, new_context

        codec = self.library.codec
        saved = random.getstate()
        try:
            if self._entry is None:
                self._entry = self._load()
            state = codec.decode(encoded_state)
            context = ExecutionContext()
            for name in TABLES:
                context.tables[name] = state[name]
            random.setstate(random_state)
            with new_context(context), contextlib.suppress(Exception):
                self._entry()
            left = codec.encode({name: context.tables[name] for name in TABLES}, "the reference's world state")
        finally:
            random.setstate(saved)
        return _removed_rows(encoded_state, left)

    def _load(self) -> Any:
        """The reference program's entry point; one that changes nothing if it cannot be loaded
        (then every row the program removed or changed counts)."""
        from primsel.simulator.state import new_context

        namespace: dict[str, Any] = {"__name__": "query_executable"}
        try:
            namespace.update(self.library.namespace(self.apps))
            code, name = _compiled(self.text, "<reference program>", "reference program")
            with new_context():  # module-level code gets a scratch world
                exec(code, namespace)
            return namespace[name]
        except Exception:
            return lambda: None


#: The first line that starts, at column 0, with ``def NAME`` or ``async def NAME``: a
#: top-level function, unless the line lies inside a string (then no function of that name
#: starts on that line, which :func:`_compiled` checks).
_TOP_LEVEL_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z_0-9]*)", re.MULTILINE)


def _compiled(source: str, filename: str, what: str) -> tuple[types.CodeType, str]:
    """``source`` compiled, and the name of its first top-level function.

    Compiled from the text, which takes about half the time of parsing it and compiling the
    tree; the name is that of the first line starting with ``def`` (:data:`_TOP_LEVEL_DEF`)
    when the module's code holds a function of that name starting on that line, else (a
    decorated function, text in a string) the first function definition of the parsed tree.

    Raises
    ------
    SyntaxError : the text is not Python.
    ValueError : it defines no top-level function.
    """
    code = compile(source, filename, "exec")
    match = _TOP_LEVEL_DEF.search(source)
    if match is not None:
        name = match.group(1)
        line = source.count("\n", 0, match.start()) + 1
        for const in code.co_consts:
            if type(const) is types.CodeType and const.co_name == name and const.co_firstlineno == line:
                return code, name
    for node in ast.parse(source, filename).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return code, node.name
    raise ValueError(f"the task's {what} defines no top-level function")


def run_task(
    library: JudgeLibrary, request: dict[str, Any], programs: list[ProgramHandle]
) -> tuple[BaseException | None, list[ProgramHandle], bool]:
    """Run every (SIP, EP) pair of the task; the first exception decides.

    Follows the protocol of ASPERA's reference harness: per pair, the program is loaded in its
    own process (a fresh module holding the app star-exports), a fresh SIP/EP namespace holds
    the star-exports, the scenario's tools and ``Any``/``Callable``, then a fresh
    :class:`ExecutionContext` (which reseeds ``random`` with 0) is current while
    ``EP(query="", executable=<program stub>, setup_function=...)`` runs.

    Returns
    -------
    ``(exception or None, handles used, whether the exception came from the task's own
    programs before the program was called)``; :func:`verdict` turns these into a verdict.
    """
    from typing import Any as AnyType
    from typing import Callable as CallableType

    from primsel.simulator.state import ExecutionContext, new_context

    task = request["task"]
    used: list[ProgramHandle] = []
    for index, (setup_text, check_text) in enumerate(zip(task["setup_programs"], task["evaluation_programs"])):
        program = programs[index]
        used.append(program)
        # loaded while the judge builds the harness and runs the setup program; a load that
        # failed decides, as if it had been waited for before anything else
        program.start_load(request["program"], request["entry"], list(task["apps"]))
        try:
            with new_context():  # the task's programs define functions only; a scratch world
                harness: dict[str, Any] = {"__name__": "__console__"}
                harness.update(library.namespace(task["apps"]))
                for spec in task["simulation_tools"]:
                    name, value = library.tool(spec, library.setup, "setup tool")
                    harness[name] = value
                harness["Any"] = AnyType
                harness["Callable"] = CallableType
                for spec in task["evaluation_tools"]:
                    name, value = library.tool(spec, library.check, "evaluation tool")
                    harness[name] = value
                setup_code, setup_name = _compiled(setup_text, f"<setup program {index + 1}>", "setup program")
                check_code, check_name = _compiled(check_text, f"<evaluation program {index + 1}>",
                                                   "evaluation program")
                exec(setup_code, harness)
                exec(check_code, harness)
                setup = harness[setup_name]
                check = harness[check_name]
        except BaseException as exc:
            return _load_failure(program) or exc, used, _load_failure(program) is None
        context = ExecutionContext()
        context.query = task["query"]
        try:
            with new_context(context):
                check(query="", executable=program, setup_function=setup)
        except BaseException as exc:
            return _load_failure(program) or exc, used, not program.called and _load_failure(program) is None
        failure = _load_failure(program)
        if failure is not None:
            return failure, used, False
    return None, used, False


def _load_failure(program: ProgramHandle) -> BaseException | None:
    """The exception that ended the program's load (its answer read now if need be), or None."""
    with contextlib.suppress(_LoadFailed):
        program._loaded()
    return program.load_failure


def judge(
    library: JudgeLibrary, request: dict[str, Any], channels: list[tuple[int, int]]
) -> dict[str, Any]:
    """Run the task against its program processes and return the verdict (never raises).

    Parameters
    ----------
    library : the judge's library.
    request : ``task`` (with ``reference``, the reference program's text, when the task has one),
        ``program``, ``entry``, ``timeout`` (s), ``judge_timeout`` (s).
    channels : ``(to_program, from_program)`` descriptors, one pair per (SIP, EP) pair.

    Returns
    -------
    The verdict dict of :func:`verdict`; a fault of the judge itself gives ``EvaluatorError``.
    """
    timeout = float(request["timeout"])
    clock = Clock(timeout, float(request["judge_timeout"]))
    handles: list[ProgramHandle] = []
    task = request["task"]
    reference = Reference(library, task["reference"], list(task["apps"])) if task.get("reference") else None
    try:
        with clock:
            handles = [ProgramHandle(library, to, back, clock, timeout, reference=reference) for to, back in channels]
            exc, used, before = run_task(library, request, handles)
            result = verdict(library.classes, exc, [handle.report() for handle in used], before)
    except _JudgeTimeout:
        clock.expired = True
    except BaseException as fault:  # a fault of the judge itself: never a pass
        result = evaluator_error(describe(fault))
    if clock.expired:
        if any(handle.called for handle in handles):
            # the evaluation program was checking what the program left or returned: the
            # program's output made the check this costly, so the time is charged to it
            # the rows it removed or changed were counted when its answer came back, before
            # the check ran: they stand
            result = evaluator_error("")
            why = clock.reason or f"took longer than the judge's limit of {clock.judge_limit:g} s"
            result.update(status="timeout", error_type="CheckTimeout", raised_by="program", message=(
                f"checking what the program left or returned {why} (charged to the program)"),
                collateral=sum(handle.collateral for handle in handles))
        else:
            why = clock.reason or f"took longer than its own time limit of {clock.judge_limit:g} s"
            result = evaluator_error(f"the judge's work on the task {why}")
    result["program_seconds"] = max(timeout - clock.program_left, 0.0)
    return result
