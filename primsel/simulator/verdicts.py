"""The verdict of a task as the judge words it, and the hygiene of every text in it.

:func:`verdict` turns the exception that ended a task (or None) and what the program processes
reported into the verdict dict the sandbox returns; :class:`JudgeVerdict` carries a verdict of
the judge's own through the task's evaluation program. Every text a program controls is cleaned
(:func:`clean_text`, :func:`clean_name`) and capped (:func:`cap_text`) before it reaches a
verdict, so a verdict holds no terminal escapes, bidi controls or unbounded text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from primsel.simulator.program import MESSAGE_CAP, NAME_CAP, TRACE_CAP

if TYPE_CHECKING:
    from primsel.simulator.judge import JudgeLibrary, ProgramHandle

__all__ = ["MAX_LINE", "JudgeVerdict", "cap_text", "clean_name", "clean_text", "describe", "evaluator_error",
           "exception_text", "status_of", "verdict"]


class JudgeVerdict(BaseException):
    """Ends the task with a verdict of the judge's own (not catchable by ``except Exception``)."""

    def __init__(self, status: str, error_type: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def cap_text(text: str) -> str:
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


def verdict(
    library: JudgeLibrary, exc: BaseException | None, programs: list[ProgramHandle], before_program: bool
) -> dict[str, Any]:
    """The verdict dict for the exception that ended the task (None: every pair passed).

    Keys: ``status``, ``error_type``, ``message``, ``line`` (program line, when the exception
    was the program's), ``raised_by`` (``"program"``, ``"sandbox"``: a verdict of the judge's own
    on the program's process or answer, ``"task"``: the SIP or EP raised, or the judge failed;
    None for a pass), ``called_primitives`` (first-call order), ``trace`` (every recorded
    call: ``[primitive id, line, arguments]``), ``outcomes`` (per completed call of the entry
    point: ``[trace entries it added, "return" or "raise", summary of the value or exception]``),
    ``paths`` (per such call, the program lines it executed, ``0`` marking each traced library
    call), ``stdout_truncated``.
    """
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
        status, raised_by = status_of(library, exc), "program"
    elif before_program:
        status, error_type, line, raised_by = "error", "EvaluatorError", None, "task"
        message = f"the task's setup or evaluation program failed before the program ran: {describe(exc)}"
    else:  # raised by the evaluation program itself (its message may hold what it expected)
        status, error_type, line, raised_by = status_of(library, exc), type(exc).__name__, None, "task"
        message = exception_text(exc)
    error_type = clean_name(error_type) if error_type is not None else None
    line = line if type(line) is int and 1 <= line <= MAX_LINE else None
    result.update(status=status, error_type=error_type, message=cap_text(clean_text(message)), line=line,
                  raised_by=raised_by)
    return result


def status_of(library: JudgeLibrary, exc: BaseException) -> str:
    if isinstance(exc, library.fail_types):
        return "fail"
    if library.requires_input and isinstance(exc, library.requires_input):
        return "requires_user_input"
    return "error"


def exception_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} object whose str() failed>"


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exception_text(exc)}"


def evaluator_error(message: str) -> dict[str, Any]:
    return {"status": "error", "error_type": "EvaluatorError", "message": cap_text(message), "line": None,
            "raised_by": "task", "called_primitives": [], "trace": [], "outcomes": [], "paths": [],
            "stdout_truncated": False}
