"""The verdict of a task as the judge words it, and the hygiene of every text in it.

:func:`verdict` turns the exception that ended a task (or None) and what the judge learned from
each program process (a :class:`PairReport`, plain data) into the verdict dict the sandbox
returns; :class:`JudgeVerdict` carries a verdict of the judge's own through the task's
evaluation program. Every text a program controls is cleaned (:func:`clean_text`,
:func:`clean_name`) and capped (:func:`cap_text`) before it reaches a verdict, so a verdict holds
no terminal escapes, bidi controls or unbounded text. This module knows nothing of the judge:
the judge hands it reports and exception classes.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from primsel.simulator.program import MESSAGE_CAP, NAME_CAP, TRACE_CAP

__all__ = ["MAX_LINE", "ExceptionClasses", "JudgeVerdict", "PairReport", "cap_text", "clean_name", "clean_text",
           "describe", "evaluator_error", "exception_text", "status_of", "verdict"]


class JudgeVerdict(BaseException):
    """Ends the task with a verdict of the judge's own (not catchable by ``except Exception``)."""

    def __init__(self, status: str, error_type: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def cap_text(text: str) -> str:
    """``text`` cut to :data:`primsel.simulator.program.MESSAGE_CAP` characters (then ``...``)."""
    return text if len(text) <= MESSAGE_CAP else text[:MESSAGE_CAP] + "..."


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
#: Largest program line number kept (a program is at most 256 KiB, so it has fewer lines).
MAX_LINE = 1_000_000


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8 without control characters: lone surrogates become ``?``;
    control characters (terminal escapes among them) other than tab and line break, bidi
    overrides and isolates and zero-width characters are dropped."""
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


def clean_name(name: str) -> str:
    """An exception class name fit for a verdict: a Python identifier (dots allowed, at most
    :data:`NAME_CAP` characters); anything else is reported as ``ProgramException``."""
    name = name[:NAME_CAP]
    return name if all(part.isidentifier() for part in name.split(".")) else "ProgramException"


#: An exception's origin in the program: ``(exception as raised in the judge, the program's
#: class name, program line or None, message)``.
Origin = tuple[BaseException, str, "int | None", str]


@dataclasses.dataclass
class PairReport:
    """What the judge learned from the program process of one (SIP, EP) pair.

    Attributes
    ----------
    trace : the library calls the program reported, ``(primitive id, line or None, arguments)``.
    outcomes : per completed call of the entry point, ``(trace entries it added, "return" or
        "raise", summary)``.
    paths : per such call, the program lines it executed.
    stdout_truncated : the program's output passed the cap.
    fatal : a verdict of the judge's own on this process (it stands whatever the EP does), or None.
    origins : the exceptions raised again in the judge on the program's behalf (:data:`Origin`).
    collateral : rows of the world the program was given that it removed or changed and the
        task's reference program, run on the same world, did not (summed over the calls).
    """

    trace: list[tuple[str, int | None, str]] = dataclasses.field(default_factory=list)
    outcomes: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)
    paths: list[list[int]] = dataclasses.field(default_factory=list)
    stdout_truncated: bool = False
    fatal: JudgeVerdict | None = None
    origins: list[Origin] = dataclasses.field(default_factory=list)
    collateral: int = 0


@dataclasses.dataclass(frozen=True)
class ExceptionClasses:
    """The exception classes that decide a status: ``fail`` (an evaluation program's
    ``SolutionError`` and ``AssertionError``) and ``requires_input`` (``RequiresUserInput``)."""

    fail: tuple[type[BaseException], ...] = (AssertionError,)
    requires_input: tuple[type[BaseException], ...] = ()


def verdict(
    classes: ExceptionClasses, exc: BaseException | None, reports: list[PairReport], before_program: bool
) -> dict[str, Any]:
    """The verdict dict for the exception that ended the task (None: every pair passed).

    Parameters
    ----------
    classes : which exception classes are ``fail`` and ``requires_user_input``.
    exc : what ended the task, or None.
    reports : one per (SIP, EP) pair that ran, in order.
    before_program : ``exc`` came from the task's own programs before the program was called.

    Keys: ``status``, ``error_type``, ``message``, ``line`` (program line, when the exception
    was the program's), ``raised_by`` (``"program"``, ``"sandbox"``: a verdict of the judge's own
    on the program's process or answer, ``"task"``: the SIP or EP raised, or the judge failed;
    None for a pass), ``called_primitives`` (first-call order), ``trace`` (every recorded
    call: ``[primitive id, line, arguments]``), ``outcomes`` (per completed call of the entry
    point: ``[trace entries it added, "return" or "raise", summary of the value or exception]``),
    ``paths`` (per such call, the program lines it executed, ``0`` marking each traced library
    call), ``stdout_truncated``, ``collateral`` (summed over the pairs).
    """
    programs = reports
    trace = [list(entry) for program in programs for entry in program.trace][:TRACE_CAP]
    called = list(dict.fromkeys(entry[0] for entry in trace))
    result = {
        "status": "pass",
        "error_type": None,
        "message": None,
        "line": None,
        "called_primitives": called,
        "trace": trace,
        "outcomes": [list(outcome) for program in programs for outcome in program.outcomes],
        "paths": [path for program in programs for path in program.paths],
        "stdout_truncated": any(program.stdout_truncated for program in programs),
        "collateral": sum(program.collateral for program in programs),
    }
    fatal = next((program.fatal for program in programs if program.fatal is not None), None)
    exc = fatal or exc  # an EP that caught it (e.g. with a bare except) does not change it
    if exc is None:
        return result
    origin = next((o for program in programs for o in program.origins if o[0] is exc), None)
    if isinstance(exc, JudgeVerdict):
        status, error_type, message = exc.status, exc.error_type, exc.message
        line = origin[2] if origin else None
        raised_by = "program" if origin else "task" if error_type == "EvaluatorError" else "sandbox"
    elif origin is not None:
        _, error_type, line, message = origin
        status, raised_by = status_of(classes, exc), "program"
    elif before_program:
        status, error_type, line, raised_by = "error", "EvaluatorError", None, "task"
        message = f"the task's setup or evaluation program failed before the program ran: {describe(exc)}"
    else:  # raised by the evaluation program itself (its message may hold what it expected)
        status, error_type, line, raised_by = status_of(classes, exc), type(exc).__name__, None, "task"
        message = exception_text(exc)
    error_type = clean_name(error_type) if error_type is not None else None
    line = line if type(line) is int and 1 <= line <= MAX_LINE else None
    result.update(status=status, error_type=error_type, message=cap_text(clean_text(message)), line=line,
                  raised_by=raised_by)
    return result


def status_of(classes: ExceptionClasses, exc: BaseException) -> str:
    """``fail``, ``requires_user_input`` or ``error``: the status an exception ending a task gives."""
    if isinstance(exc, classes.fail):
        return "fail"
    if classes.requires_input and isinstance(exc, classes.requires_input):
        return "requires_user_input"
    return "error"


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder naming the class when ``str()`` fails."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} object whose str() failed>"


def describe(exc: BaseException) -> str:
    """``"Type: message"`` of an exception."""
    return f"{type(exc).__name__}: {exception_text(exc)}"


def evaluator_error(message: str) -> dict[str, Any]:
    """The verdict dict of a fault of the judge or of the task's own programs (``EvaluatorError``)."""
    return {"status": "error", "error_type": "EvaluatorError", "message": cap_text(message), "line": None,
            "raised_by": "task", "called_primitives": [], "trace": [], "outcomes": [], "paths": [],
            "stdout_truncated": False, "collateral": 0}
