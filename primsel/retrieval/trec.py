"""TREC files: runs (``qid Q0 docid rank score tag``, one line per (task, primitive)) and qrels
(``qid 0 docid relevance``, one line per gold primitive of a task).

A run is written so that every tool ranks it as primsel does: the scores written strictly
decrease down each task's ranking (:func:`written_scores`), so trec_eval and ranx, which break
ties their own ways, have no tie to break, and with the qrels of the same tasks
(:func:`format_qrels`) they give primsel's recall@k, nDCG@k and MRR.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from primsel.files import write_atomic
from primsel.types import Run, check_run, ranking


def format_run(run: Mapping[str, Mapping[str, float]], tag: str) -> str:
    """The TREC text of a run: for every task (in the run's order) its primitives ranked by
    score descending, ties by primitive id, ranks from 1.

    The scores written are :func:`written_scores`: strictly decreasing down each ranking, equal
    to the run's wherever that keeps them decreasing, and a few units in the last place below
    within a group of tied scores. So a tool that ranks by score alone (trec_eval, ranx, and
    :func:`read_run`) ranks exactly as primsel ranked, tied scores in primitive-id order, and
    scores that differ keep their order however close they are. Each is written with
    :func:`format_score`, the shortest text that reads back as the same float.

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
        order = ranking(scores)
        written = written_scores([scores[pid] for pid in order])
        for rank, (pid, score) in enumerate(zip(order, written), start=1):
            _check_token(pid, "primitive id")
            lines.append(f"{task_id} Q0 {pid} {rank} {format_score(score)} {tag}\n")
    return "".join(lines)


def written_scores(scores: Sequence[float]) -> list[float]:
    """Scores in ranking order made strictly decreasing, changing as little as possible: each is
    its own score, or the float just below the one written before it when that is lower
    (``math.nextafter`` towards minus infinity).

    ``[1.0, 0.5, 0.5, 0.5, 0.0]`` gives ``[1.0, 0.5, 0.49999999999999994, 0.4999999999999999,
    0.0]``: the order is kept and no two are equal.

    Parameters
    ----------
    scores : one task's scores, best first (non-increasing), length n.

    Returns
    -------
    n floats, strictly decreasing.
    """
    out: list[float] = []
    for score in scores:
        value = float(score)
        if out and value >= out[-1]:
            value = math.nextafter(out[-1], -math.inf)
        out.append(value)
    return out


def format_qrels(gold: Mapping[str, Iterable[str]]) -> str:
    """The TREC qrels text of gold sets: ``task 0 primitive 1`` per gold primitive, tasks in
    the mapping's order, each task's primitives sorted; a task without gold gets no line (the
    metrics leave it out, as ranx does).

    Raises
    ------
    ValueError : a task id or primitive id is empty or contains whitespace.
    """
    lines = []
    for task_id, primitives in gold.items():
        _check_token(task_id, "task id")
        for pid in sorted(set(primitives)):
            _check_token(pid, "primitive id")
            lines.append(f"{task_id} 0 {pid} 1\n")
    return "".join(lines)


def write_qrels(gold: Mapping[str, Iterable[str]], path: str | os.PathLike[str]) -> None:
    """Write :func:`format_qrels` to ``path`` atomically (parent directories are created)."""
    write_atomic(path, format_qrels(gold))


def read_qrels(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """The gold sets of a qrels file, ``{task id: [primitive id, ...]}`` in file order; lines of
    relevance 0 or below are not gold.

    Raises
    ------
    ValueError : naming the file and the line number: a line without 4 fields, or a relevance
        that is not an integer.
    """
    gold: dict[str, list[str]] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 4:
            raise ValueError(f"{path}:{n}: expected 'qid 0 docid relevance', got {line!r}")
        try:
            relevance = int(fields[3])
        except ValueError:
            raise ValueError(f"{path}:{n}: relevance {fields[3]!r} is not an integer") from None
        if relevance > 0:
            gold.setdefault(fields[0], []).append(fields[2])
    return gold


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
