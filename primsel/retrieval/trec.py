"""TREC run files: ``qid Q0 docid rank score tag``, one line per (task, primitive)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from primsel.files import write_atomic
from primsel.types import Run, check_run, ranking


def format_run(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    """The TREC text of a run: for every task (in the run's order) its primitives ranked by
    score descending, ties by primitive id, ranks from 1.

    Scores are written with :func:`format_score`, the shortest text that reads back as the
    same float, so :func:`read_run` returns exactly the scores written and ranks them as they
    were ranked (two scores a rounding would make equal stay apart).

    Raises
    ------
    ValueError : the tag, a task id or a primitive id is empty or contains whitespace.
    TypeError : an id that is not a string or a score that is not a number
        (:func:`primsel.types.check_run`).
    """
    check_run(run)
    _check_token(tag, "tag")
    lines = []
    for task_id, scores in run.items():
        _check_token(task_id, "task id")
        for rank, pid in enumerate(ranking(scores), start=1):
            _check_token(pid, "primitive id")
            lines.append(f"{task_id} Q0 {pid} {rank} {format_score(scores[pid])} {tag}\n")
    return "".join(lines)


def format_score(score: float) -> str:
    """The shortest decimal text of ``score`` that ``float()`` reads back as the same float
    (Python's ``repr``), without a trailing ``.0``: ``1.0 -> "1"``, ``0.5 -> "0.5"``,
    ``0.9999999999999998 -> "0.9999999999999998"``, ``1e+16 -> "1e+16"``.
    """
    text = repr(float(score))
    return text[:-2] if text.endswith(".0") else text


def write_run(run: Mapping[str, Mapping[str, float]], path: str | os.PathLike[str], tag: str) -> None:
    """Write :func:`format_run` to ``path`` atomically (parent directories are created)."""
    write_atomic(path, format_run(run, tag))


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a TREC run file into ``{task_id: {primitive_id: score}}`` (task order of the file).

    Ids are kept as the strings the file holds. The rank column is not read (the scores rank,
    as trec_eval and ranx do).

    Raises
    ------
    ValueError : naming the file and the line number: a line without 6 fields, a score that is
        not a number (or is NaN), or a (task, primitive) pair that an earlier line already
        scored (which line to believe would be a guess).
    """
    run: Run = {}
    seen: dict[tuple[str, str], int] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            raise ValueError(f"{path}:{n}: expected 'qid Q0 docid rank score tag', got {line!r}")
        task_id, pid = fields[0], fields[2]
        try:
            score = float(fields[4])
        except ValueError:
            raise ValueError(f"{path}:{n}: score {fields[4]!r} is not a number") from None
        if math.isnan(score):
            raise ValueError(f"{path}:{n}: score is NaN")
        if (task_id, pid) in seen:
            raise ValueError(f"{path}:{n}: task {task_id!r} ranks primitive {pid!r} a second time "
                             f"(first at line {seen[task_id, pid]}); a run scores each pair once")
        seen[task_id, pid] = n
        run.setdefault(task_id, {})[pid] = score
    return run


def _check_token(value: str, what: str) -> None:
    if value.split() != [value]:  # empty, or holds whitespace
        raise ValueError(f"TREC {what} must be non-empty without whitespace, got {value!r}")
