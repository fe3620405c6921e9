"""Verdict rows that say why a program failed: where its run departs from the reference
program's and the diagnosis (``primsel verify --explain``).

Each row of :func:`primsel.simulator.verify.verdict_rows` that did not pass also gets
:data:`EXPLAIN_KEYS`: ``divergence_line``, ``expected_call`` and ``actual_call`` (where the
program's execution first departs from the task's reference program run on the same initial
state: :func:`primsel.eval.localise.localise`) and ``category`` (its diagnosis,
:func:`primsel.eval.attribution.attribute`); the other rows get them as None, except a row that
passed, which is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from primsel.eval.attribution import attribute
from primsel.simulator.verify import (
    TRUNCATED,
    Job,
    clean,
    result_row,
    runnable,
    truncated_row,
    unknown_task_row,
)
from primsel.types import Primitive, Program

#: Keys the explanation adds to the rows that did not pass, in order.
EXPLAIN_KEYS = ("divergence_line", "expected_call", "actual_call", "category")


def explained_rows(sandbox: Any, tasks: Mapping[str, Any], jobs: Sequence[Job],
                   library: Mapping[str, Primitive]) -> Iterator[dict[str, Any]]:
    """Rows in job order, :data:`EXPLAIN_KEYS` added to every row that did not pass; every
    program runs first, then the reference program of each task that failed."""
    results = list(sandbox.execute_many(runnable(tasks, jobs)))
    failed = list(dict.fromkeys(r.task_id for r in results if not r.passed))
    references = {r.task_id: r for r in sandbox.execute_many((tasks[t], tasks[t].program, None) for t in failed)}
    explained = iter(results)
    for task_id, program, entry in jobs:
        if task_id not in tasks:
            yield {**unknown_task_row(task_id), **dict.fromkeys(EXPLAIN_KEYS)}
            continue
        if entry == TRUNCATED:
            yield {**truncated_row(task_id), **dict.fromkeys(EXPLAIN_KEYS)}
            continue
        result = next(explained)
        row = result_row(result)
        if not result.passed:
            why = attribute(tasks[task_id], None, Program(task_id, program, entry_point=entry), result, library,
                            reference=references.get(task_id)) or {}
            row.update({key: why.get(key) for key in EXPLAIN_KEYS})
            row["expected_call"], row["actual_call"] = clean(row["expected_call"]), clean(row["actual_call"])
        yield row
