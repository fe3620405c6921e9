"""What a model is told about its failed program before a reflection round.

Reflection (Shinn et al., 2023, "Reflexion: Language Agents with Verbal Reinforcement
Learning", NeurIPS; Chen et al., 2024, "Teaching Large Language Models to Self-Debug", ICLR)
gives a model the outcome of its program and asks for a corrected one. :func:`feedback_text`
writes that outcome at one of three levels, each adding to the one before:

===========  ==================================================================================
level        the feedback holds
===========  ==================================================================================
``verdict``  that the program did not pass (nothing else)
``error``    how it ended: cut off at the length limit, no program found, the time limit, or the
             exception the program raised (class, program line with its text, message); for a
             program that ran to the end, only that its outcome was judged wrong
``trace``    what the program did, as its own process recorded it: its first library calls (the
             program line and the call with a short summary of its arguments) and how each call
             of its entry point ended (the returned value or the exception, summarised); ids
             made at run time shown as ``<id1>``, ``<id2>``, ... so the same run reads the same
===========  ==================================================================================

What the feedback never holds (the rule, enforced here and tested):

* nothing of the evaluation program (EP): not its text, not what it expected, and not the message
  of an exception it raised -- a ``SolutionError`` or ``AssertionError`` message names expected
  values. An exception's class and message are shown only when the program raised it, or when it
  is the sandbox's verdict on the program's process or answer
  (:attr:`primsel.types.ExecutionResult.raised_by` ``"program"`` or ``"sandbox"``); anything
  the task's setup or evaluation program raised, or a fault of the judge (``"task"``), is told
  as the status alone;
* nothing of the reference program (AEP), which is the gold solution: not its text, not its calls,
  not its returned value, not the gold primitives or the ones the selection missed, and no
  comparison with it. The call trace and outcomes are written by the program's own process, so
  a program can forge them; compared with the reference (:mod:`primsel.eval.localise`), a
  forged trace would confirm a guess at the reference's calls every round. The comparison
  (the failure diagnosis) is for the researcher's rows and round records, never for the
  model;
* nothing of the setup program (SIP) beyond what the program's own calls returned.

* nothing unclean: every text that comes from the program (messages, class names, quoted
  lines, call and value summaries) is shown on one line, without control characters, bidi
  overrides or lone surrogates, and cut at :data:`QUOTE_CAP` characters; program lines,
  messages, calls and values are quoted as code spans they cannot close (:func:`quote`), so no
  text of the program reads as the feedback's own words;
* nothing the program could have written told as the sandbox's verdict: a verdict of the
  sandbox's own (``raised_by`` ``"sandbox"``) is told as "The sandbox stopped it", anything
  the program or its process raised or sent as "It raised".

So a model that reads the feedback learns what its own program did, never what the right answer
is.
"""

from __future__ import annotations

import re

from primsel.eval.localise import normalise_ids
from primsel.types import ExecutionResult, Program

__all__ = ["LEVELS", "error_text", "feedback_text", "quote", "told_exception"]

#: Feedback levels, from least to most information.
LEVELS = ("verdict", "error", "trace")
#: Longest call or value text quoted from the program's execution (characters).
QUOTE_CAP = 300
#: Library calls of the program listed at level ``trace`` (the rest are counted).
CALLS_SHOWN = 10
#: Control characters (line breaks included), bidirectional overrides and isolates, zero-width
#: characters and lone surrogates: never shown.
_UNCLEAN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]+")

_VERDICT = "Your program did not pass: it does not carry out the request correctly."
_HANDED_BACK = "It handed the request back to the user (RequiresUserInput), which this request does not call for."
#: Error types of faults outside the program (the judge, the sandbox's workers).
_OUTSIDE = frozenset({"EvaluatorError", "SandboxError", "WorkerDied", "WorkerStartFailed", "ScratchError"})

#: What each diagnosis category says, from the program's side (docs/user-guide.md, "Failure diagnosis").
_CATEGORY = {
    "llm_error": "the model's answer could not be obtained",
    "truncated": "the answer was cut off at the length limit",
    "no_program": "no program was found in the answer",
    "timeout": "the program did not finish in time",
    "hallucinated_primitive": "the program uses a name that neither it nor the library defines",
    "runtime_error": "the program raised an exception",
    "retrieval_miss": "the documentation shown lacks a library function or type the request needs",
    "unselected_primitive": "the program uses a library name that was not among the documented ones",
    "requires_user_input_misuse": "the program handles handing the request back to the user "
                                  "(RequiresUserInput) differently from a correct program",
    "wrong_arguments": "a library function is called with wrong arguments",
    "wrong_order": "the library calls are made in the wrong order",
    "missing_call": "a library call the request needs is missing",
    "extra_call": "the program makes a library call it should not make",
    "wrong_return": "the returned value is wrong",
    "wrong_effect": "the effect on the calendar, directory or bookings is wrong",
}


def told_exception(result: ExecutionResult | None) -> bool:
    """True when the class and message of what ended ``result`` may be shown to the model: the
    program raised it, or it is the sandbox's verdict on the program (``raised_by`` ``"program"``
    or ``"sandbox"``). Never for what the task's setup or evaluation program raised."""
    return result is not None and result.raised_by in ("program", "sandbox") and bool(result.error_type)


def error_text(program: Program, result: ExecutionResult | None, level: str = "error") -> str:
    """The error of a failed round in one line, as the retriever is re-queried with it
    (``reselect``): ``"<class>: <message>"`` of an exception :func:`told_exception` allows,
    else ``""`` (also at level ``verdict``, which tells the model no error).

    Raises
    ------
    ValueError : unknown level.
    """
    _check_level(level)
    if result is None or level == "verdict" or not told_exception(result):
        return ""
    return f"{result.error_type}: {result.message}" if result.message else str(result.error_type)


def feedback_text(level: str, program: Program, result: ExecutionResult | None,
                  timeout: float | None = None) -> str:
    """The feedback on one failed round (see the module docstring for what each level holds and
    what no level ever holds).

    Parameters
    ----------
    level : ``"verdict"``, ``"error"`` or ``"trace"``.
    program : the round's program (its status, text and extraction are read).
    result : its execution result, or None when it was not run (cut off, no program).
    timeout : the task's time limit in seconds, named when the program ran out of time.

    Returns
    -------
    Plain text, one sentence per line.

    Raises
    ------
    ValueError : unknown level, or ``result`` says the task passed.
    """
    _check_level(level)
    if result is not None and result.passed:
        raise ValueError(f"task {result.task_id} passed: there is no failure to tell")
    lines = [_VERDICT]
    if level == "verdict":
        return lines[0]
    lines += _how_it_ended(program, result, timeout)
    if level == "trace" and result is not None:
        lines += _what_it_did(program, result)
    return "\n".join(lines)


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"feedback level must be one of {', '.join(repr(v) for v in LEVELS)}, got {level!r}")


def clean(text: str | None, cap: int = QUOTE_CAP) -> str:
    """``text`` fit to quote to a model: one line, without control characters (runs of them,
    line breaks included, become one space), bidi overrides, zero-width characters or lone
    surrogates, cut at ``cap`` characters (then ``...``)."""
    text = _UNCLEAN.sub(" ", str(text or "")).strip()
    return text if len(text) <= cap else text[:cap] + "..."


def quote(text: str | None, cap: int = QUOTE_CAP) -> str:
    """``text`` (:func:`clean`, cut at ``cap`` characters) as inline code it cannot close.

    The fence is a run of backticks one longer than the longest run inside the text, so no run
    inside closes it (CommonMark's code spans); a text that begins or ends with a backtick gets
    a space inside each fence, which CommonMark strips (a text holding single backticks is
    fenced by two, one beginning with a backtick also padded by spaces).
    """
    body = clean(text, cap) or " "
    longest = max((len(run) for run in re.findall("`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`"):
        body = f" {body} "
    return f"{fence}{body}{fence}"


def _line_of(program: Program, line: int | None) -> str:
    """``line 7 (`events = find_events(...)`)`` (the line quoted by :func:`quote`), or ``line 7``
    when the text has no such line."""
    lines = (program.code or "").splitlines()
    if line is None:
        return ""
    if 1 <= line <= len(lines) and lines[line - 1].strip():
        return f"line {line} ({quote(lines[line - 1])})"
    return f"line {line}"


def _how_it_ended(program: Program, result: ExecutionResult | None, timeout: float | None) -> list[str]:
    if program.status == "truncated":
        return ["Your answer was cut off at the length limit before the program was complete; nothing was run."]
    if program.status == "no_program" or (result is not None and result.status == "no_program"):
        return ["No program was found in your answer (no top-level function); nothing was run."]
    if program.status == "llm_error" or result is None:
        return []
    out = []
    if program.extraction.get("parse_failure") == "answer":
        out.append("Your answer could not be read as a Python program; a placeholder that does nothing ran instead.")
    if result.status == "timeout":
        limit = f" of {timeout:g} s" if timeout is not None else ""
        out.append(f"It did not finish within the time limit{limit}.")
        return out
    told = told_exception(result)
    if told:
        out.append(_told(program, result))
    if result.status == "requires_user_input":
        out.append(_HANDED_BACK)
    elif not told and result.error_type in _OUTSIDE:
        out.append("Its outcome could not be evaluated (a fault outside your program).")
    elif not told:
        out.append("It ran, but what it did or returned is not what the request asks for.")
    return out


def _told(program: Program, result: ExecutionResult) -> str:
    """The exception :func:`told_exception` allows, its message quoted (:func:`quote`): as the
    sandbox's verdict only when the sandbox reached it (``raised_by`` ``"sandbox"``), else as
    what the program raised, with its line."""
    said = f": {quote(result.message)}" if result.message else ""
    error_type = clean(result.error_type, 100)
    if result.raised_by == "sandbox":
        return f"The sandbox stopped it ({error_type}){said}"
    where = _line_of(program, result.line)
    return f"It raised {error_type}" + (f" at {where}" if where else "") + said


def _what_it_did(program: Program, result: ExecutionResult) -> list[str]:
    """The program's own record of its run: its first library calls and how its calls ended."""
    out = []
    # ids made at run time (uuid4) are renamed <id1>, <id2>, ... so the same run is told the same
    shown = result.trace[:CALLS_SHOWN]
    outcomes = result.outcomes[:2]
    texts = normalise_ids([f"{primitive}({arguments})" for primitive, _, arguments in shown]
                          + [summary for _, _, summary in outcomes])
    calls = []
    for (_, line, _), text in zip(shown, texts):
        call = quote(text)
        calls.append(f"line {line} {call}" if isinstance(line, int) and 0 < line <= 10**6 else call)
    if calls:
        more = len(result.trace) - len(calls)
        out.append("Its library calls, in order: " + "; ".join(calls) + (f" (and {more} more)." if more > 0 else "."))
    elif result.outcomes:
        out.append("It made no library call.")
    for (_, how, _), text in zip(outcomes, texts[len(shown):]):
        verb = "returned" if how == "return" else "raised"
        out.append(f"A call of its entry point {verb} {quote(text)}.")
    return out
