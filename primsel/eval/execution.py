"""The verdicts of generated programs: each runs in the sandbox against its task's state and evaluation
programs (:class:`primsel.simulator.sandbox.Sandbox`); an entry point ASPERA's rules refuse gets their verdict
without running. Also the two re-runs the report needs: ASPERA's import-lenient score re-runs a program that
failed on an import without its library imports, and failure attribution compares a failed program's run with
its task's reference program's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from primsel.types import ExecutionResult, Program, Task


def execute_programs(sandbox: Any, tasks: Sequence[Task], programs: Mapping[str, Program],
                     on_result: Callable[[], None] | None = None) -> dict[str, ExecutionResult]:
    """Run the programs whose status is ``ok`` in ``sandbox`` (an entry point ASPERA's rules refuse gets their
    verdict without running), calling ``on_result`` once per task; returns task id -> execution result, for the
    tasks that got one."""
    # local: primsel.generation loads the LLM clients, and the cell settings import this module
    from primsel.generation.extract import entry_point_error

    results = {t.id: r for t in tasks if (r := entry_point_error(programs[t.id])) is not None}
    jobs = [(t, programs[t.id].code, programs[t.id].entry_point) for t in tasks
            if programs[t.id].status == "ok" and t.id not in results]
    tick = on_result if on_result is not None else (lambda: None)
    for _ in range(len(tasks) - len(jobs)):
        tick()
    for result in (sandbox.execute_many(jobs) if jobs else ()):
        results[result.task_id] = result
        tick()
    return results


def reference_runs(sandbox: Any, tasks: Sequence[Task], known: dict[str, ExecutionResult]) -> None:
    """Run the reference program of each task not in ``known`` and add its result there."""
    todo = [t for t in tasks if t.id not in known]
    if todo:
        known.update((r.task_id, r) for r in sandbox.execute_many((t, t.program, None) for t in todo))


def lenient_statuses(sandbox: Any, tasks: Sequence[Task], programs: Mapping[str, Program],
                     results: Mapping[str, ExecutionResult]) -> dict[str, str]:
    """ASPERA's import-lenient re-run: each program whose run ended in ``ModuleNotFoundError`` runs again
    without its library imports (``extraction["program_no_imports"]``, when it has one).

    Returns
    -------
    task id -> the status of the re-run, for the programs re-run.
    """
    jobs = [(t, programs[t.id].extraction.get("program_no_imports"), programs[t.id].entry_point)
            for t in tasks if t.id in results and results[t.id].status == "error"
            and results[t.id].error_type == "ModuleNotFoundError"
            and programs[t.id].extraction.get("program_no_imports")]
    return {r.task_id: r.status for r in sandbox.execute_many(jobs)} if jobs else {}
