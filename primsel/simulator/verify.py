"""The verdict rows of programs run against their tasks' evaluation programs.

A job is ``(task_id, program, entry_point)``; its row (:data:`ROW_KEYS`) holds the sandbox's
verdict: ASPERA's ``status`` and the collateral audit beside it (``collateral``: rows of the world
the program was given that it removed or changed and the task's reference program did not;
``strict``: passed with no collateral; :class:`primsel.types.ExecutionResult`). A job whose task id
the dataset does not hold gets an ``error`` / ``UnknownTask`` row, and one whose entry point is
:data:`TRUNCATED` (an answer cut off) an ``error`` / ``TruncatedAnswer`` row; neither is run.
``primsel verify`` writes these rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

#: Keys of a verdict row, in order.
ROW_KEYS = ("task_id", "status", "error_type", "message", "line", "seconds", "collateral", "strict")
#: ``entry_point`` of a job read from a row that ``primsel extract`` marked ``truncated``: the
#: job is not run.
TRUNCATED = "\x00truncated"

#: A job: ``(task_id, program, entry_point)``.
Job = tuple[str, str | None, str | None]


def runnable(tasks: Mapping[str, Any], jobs: Sequence[Job]) -> list[tuple[Any, str | None, str | None]]:
    """``(task, program, entry_point)`` of the jobs that run: a known task, not truncated."""
    return [(tasks[task_id], program, entry) for task_id, program, entry in jobs
            if task_id in tasks and entry != TRUNCATED]


def verdict_rows(sandbox: Any, tasks: Mapping[str, Any], jobs: Sequence[Job]) -> Iterator[dict[str, Any]]:
    """Rows in job order, each as soon as its program has run (``sandbox.execute_many``)."""
    results = sandbox.execute_many(runnable(tasks, jobs))
    for task_id, _, entry in jobs:
        if task_id not in tasks:
            yield unknown_task_row(task_id)
        elif entry == TRUNCATED:
            yield truncated_row(task_id)
        else:
            yield result_row(next(results))


def result_row(result: Any) -> dict[str, Any]:
    """The row of one sandbox result (:class:`primsel.types.ExecutionResult`)."""
    return verdict_row(result.task_id, result.status, result.error_type, result.message, result.line, result.seconds,
                       result.collateral)


def unknown_task_row(task_id: str) -> dict[str, Any]:
    """The row of a job whose task the dataset does not hold."""
    return verdict_row(task_id, "error", "UnknownTask", f"no task with id {task_id!r} in the dataset", None, 0.0)


def truncated_row(task_id: str) -> dict[str, Any]:
    """The row of a job whose answer was cut off (not run)."""
    return verdict_row(task_id, "error", "TruncatedAnswer",
                       "the answer was cut off (primsel extract marked it truncated); not run", None, 0.0)


def verdict_row(task_id: str, status: str, error_type: str | None, message: str | None, line: int | None,
                seconds: float, collateral: int = 0) -> dict[str, Any]:
    """A row of :data:`ROW_KEYS`: texts made valid UTF-8 (:func:`clean`), seconds rounded to 0.1 ms,
    ``strict`` true when the status is ``pass`` and ``collateral`` is 0."""
    strict = status == "pass" and collateral == 0
    values = (clean(task_id), status, clean(error_type), clean(message), line, round(seconds, 4), collateral, strict)
    return dict(zip(ROW_KEYS, values))


def clean(text: str | None) -> str | None:
    """``text`` with lone surrogates replaced by ``?``, so every row is valid UTF-8 JSON."""
    if text is None or text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")
