"""Reflection rounds: a task whose program did not pass (and got an answer) is sent the conversation
so far with feedback from its execution result (:mod:`primsel.eval.feedback`) and runs the revised
program; its status is that of its last round. Settings and figures: docs/user-guide.md ("Reflection
rounds").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from primsel.checks import ROUNDS_BOUNDS, flag_problem, number_problem
from primsel.eval.attribution import attribute
from primsel.eval.execution import execute_programs, reference_runs
from primsel.eval.feedback import error_text, feedback_text
from primsel.experiments.records import RoundEntry, RoundFigures
from primsel.types import ExecutionResult, Program, Revises, Selection, SummarisesUsage, Task

#: The reflection settings (keys of a ``[reflection]`` table, or of the generator table).
REFLECTION_KEYS = ("rounds", "feedback", "reselect")
#: Feedback levels (:data:`primsel.eval.feedback.LEVELS`).
FEEDBACK_LEVELS = ("verdict", "error", "trace")
#: A re-selection: ``{task id: text}`` -> ``{task id: selection}``.
Reselect = Callable[[Mapping[str, str]], Mapping[str, Selection]]


@dataclass(frozen=True)
class Reflection:
    """The reflection settings of a cell (``CellSettings.reflection``).

    Parameters
    ----------
    rounds : most programs per task, >= 1.
    feedback : ``"verdict"``, ``"error"`` or ``"trace"``: what the model is told of a failure.
    reselect : re-rank with the query plus the error message before each later round.
    given : the keys the experiment set (:data:`REFLECTION_KEYS` order); only these are written back
        into the cell's settings (:meth:`to_table`), and with any, reports show rounds.

    Raises
    ------
    ValueError : a value out of its range (``"<key> <problem>"``), or ``given`` naming another key.
    """

    rounds: int = 1
    feedback: str = "error"
    reselect: bool = False
    given: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check every value, and keep ``given`` in :data:`REFLECTION_KEYS` order."""
        feedback = (
            None
            if self.feedback in FEEDBACK_LEVELS
            else f"must be one of {', '.join(repr(v) for v in FEEDBACK_LEVELS)}, got {self.feedback!r}"
        )
        unknown = [key for key in self.given if key not in REFLECTION_KEYS]
        given = (
            f"must name keys among {', '.join(REFLECTION_KEYS)}, got {unknown[0]!r}"
            if unknown
            else None
        )
        problems = {
            "rounds": number_problem(self.rounds, **ROUNDS_BOUNDS),
            "feedback": feedback,
            "reselect": flag_problem(self.reselect),
            "given": given,
        }
        for key, problem in problems.items():
            if problem is not None:
                raise ValueError(f"{key} {problem}")
        object.__setattr__(
            self, "given", tuple(key for key in REFLECTION_KEYS if key in self.given)
        )

    @property
    def configured(self) -> bool:
        """True when the experiment set at least one reflection key."""
        return bool(self.given)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Reflection:
        """The reflection keys a table sets (other keys ignored); raises ValueError for a value out
        of its range (``"<key> <problem>"``)."""
        given = tuple(key for key in REFLECTION_KEYS if key in table)
        return cls(**{key: table[key] for key in given}, given=given)

    def to_table(self) -> dict[str, Any]:
        """The keys the experiment set, with their values (empty when none was set)."""
        return {key: getattr(self, key) for key in self.given}


@dataclass
class RoundsOutcome:
    """What :func:`run_rounds` leaves.

    Parameters
    ----------
    programs, results, selections : task id -> the last round's program, execution result (if any)
        and selection.
    rounds : task id -> one entry per round the task ran (``category`` and ``feedback``: those given
        to the next round).
    references : task id -> the reference program's run, for the tasks that failed a round.
    usage : per round, the generator's ``requests`` and the ``reselect_tokens``.
    """

    programs: dict[str, Program]
    results: dict[str, ExecutionResult]
    selections: dict[str, Selection]
    rounds: dict[str, list[RoundEntry]]
    references: dict[str, ExecutionResult] = field(default_factory=dict)
    usage: list[dict[str, float]] = field(default_factory=list)


def _entry(
    round_no: int,
    program: Program,
    result: ExecutionResult | None,
    selection: Selection | None = None,
    gold: frozenset[str] = frozenset(),
) -> RoundEntry:
    """One round's record of a task; with ``selection``, its ids and set recall against ``gold``."""
    usage = dict(program.usage)
    tokens = {
        "prompt": int(usage.get("prompt_tokens", 0)),
        "completion": int(usage.get("completion_tokens", 0)),
        "prompt_cached": int(usage.get("prompt_tokens_cached", 0)),
    }
    chosen = recall = None
    if selection is not None:
        chosen = tuple(selection.ids)
        recall = len(set(selection.ids) & gold) / len(gold) if gold else 0.0
    common = {
        "round": round_no,
        "program_status": program.status,
        "program": program.code,
        "tokens": tokens,
        "cached": bool(usage.get("cached", 0)),
        "selection": chosen,
        "set_recall": recall,
    }
    if result is not None:
        return RoundEntry(
            status=result.status,
            error_type=result.error_type,
            message=result.message,
            line=result.line,
            **common,
        )
    message = program.raw if program.status == "llm_error" else None
    return RoundEntry(status=program.status, message=message, **common)


def _sent(generators: Sequence[Any]) -> float:
    """HTTP requests the generators' clients have sent so far (retries included)."""
    return math.fsum(
        float(g.usage_summary().get("requests", 0.0))
        for g in generators
        if isinstance(g, SummarisesUsage)
    )


def _tell(
    reflection: Reflection,
    retry: Sequence[Task],
    out: RoundsOutcome,
    library: Any,
    turns: dict[str, list[tuple[Program, str]]],
    timeout: float | None,
) -> dict[str, str]:
    """Diagnose each retried task's last round and add its feedback turn; returns its error
    texts."""
    errors: dict[str, str] = {}
    for t in retry:
        program, result = out.programs[t.id], out.results.get(t.id)
        diagnosis = attribute(
            t, out.selections[t.id], program, result, library, out.references.get(t.id)
        )
        text = feedback_text(reflection.feedback, program, result, timeout)
        turns[t.id].append((program, text))
        category = diagnosis["category"] if diagnosis else None
        out.rounds[t.id][-1] = replace(out.rounds[t.id][-1], category=category, feedback=text)
        errors[t.id] = error_text(program, result, reflection.feedback)
    return errors


def _reselect(
    reselect: Reselect | None,
    texts: Mapping[str, str],
    out: RoundsOutcome,
    docs: dict[str, list[Any]],
    library: Any,
) -> float:
    """Rank the tasks of ``texts`` again; returns the tokens the re-selection used."""
    tokens = 0.0
    for task_id, selection in (reselect(texts) if texts and reselect is not None else {}).items():
        out.selections[task_id] = selection
        docs[task_id] = [library[p] for p in selection.ids]
        tokens += sum(
            float(selection.usage.get(key, 0.0)) for key in ("prompt_tokens", "completion_tokens")
        )
    return tokens


def _can_retry(last: RoundEntry) -> bool:
    """True when a task whose last round is ``last`` gets another round: it did not pass and got an
    answer."""
    return last.status != "pass" and last.program_status not in ("llm_error", "prompt_too_long")


def _one_step(task_bar: Any) -> Any:
    """A callable advancing ``task_bar`` by one step (None without a bar)."""
    if task_bar is None:
        return None
    return lambda: task_bar.update(1)


def _check_revisers(retry: Sequence[Task], owners: Mapping[str, Any]) -> None:
    """ValueError when the generator of a task to retry cannot revise a program."""
    for t in retry:
        if not isinstance(owners[t.id], Revises):
            raise ValueError(
                f"generator {type(owners[t.id]).__name__} cannot revise a program "
                "(rounds > 1 needs a generator with revise_many, e.g. openai)"
            )


def _revise(
    retry: Sequence[Task],
    owners: Mapping[str, Any],
    generators: Sequence[Any],
    docs: Mapping[str, list[Any]],
    turns: Mapping[str, list[tuple[Program, str]]],
    task_bar: Any,
) -> dict[str, Program]:
    """Task id -> the revised program of each task of ``retry``, each generator revising its own
    tasks at once; the task bar advances by a step per task."""
    revised: dict[str, Program] = {}
    for generator in generators:
        mine = [t for t in retry if owners[t.id] is generator]
        if not mine:
            continue
        items = [(t, docs[t.id], tuple(turns[t.id])) for t in mine]
        revised.update((t.id, p) for t, p in zip(mine, generator.revise_many(items)))
        if task_bar is not None:
            task_bar.update(len(mine))
    return revised


def run_rounds(
    reflection: Reflection,
    tasks: Sequence[Task],
    owners: Mapping[str, Any],
    selections: Mapping[str, Selection],
    programs: Mapping[str, Program],
    results: Mapping[str, ExecutionResult],
    sandbox: Any,
    library: Any,
    *,
    timeout: float | None = None,
    reselect: Reselect | None = None,
    task_bar: Any = None,
) -> RoundsOutcome:
    """Rounds 2..R of every task whose program did not pass, after round 1 (``selections``,
    ``programs`` and ``results``), as a :class:`RoundsOutcome`; ``owners`` maps a task id to the
    generator that wrote its program, ``timeout`` is named in the feedback on a timeout,
    ``reselect`` gives new selections of ``{task id: text}`` (with ``reflection.reselect``),
    ``task_bar`` (a tqdm bar) grows by two steps per retried task and round.

    Raises
    ------
    ValueError : a retried task's generator cannot revise, or ``reflection.reselect`` without
        ``reselect``; and whatever the generator or the sandbox raises.
    """
    if reflection.reselect and reselect is None:
        raise ValueError("reselect needs the cell's retriever to rank again")
    generators = list({id(g): g for g in owners.values()}.values())
    gold = {t.id: frozenset(t.gold) for t in tasks}
    chosen = selections if reflection.reselect else {}
    rounds = {
        t.id: [_entry(1, programs[t.id], results.get(t.id), chosen.get(t.id), gold[t.id])]
        for t in tasks
    }
    out = RoundsOutcome(
        programs=dict(programs), results=dict(results), selections=dict(selections), rounds=rounds
    )
    out.usage.append({"requests": _sent(generators), "reselect_tokens": 0.0})
    turns: dict[str, list[tuple[Program, str]]] = {t.id: [] for t in tasks}
    docs = {t.id: [library[p] for p in selections[t.id].ids] for t in tasks}
    for round_no in range(2, reflection.rounds + 1):
        retry = [t for t in tasks if _can_retry(out.rounds[t.id][-1])]
        if not retry:
            break
        _check_revisers(retry, owners)
        if task_bar is not None:
            task_bar.total += 2 * len(retry)
            task_bar.refresh()
        reference_runs(sandbox, [t for t in retry if t.id in out.results], out.references)
        errors = _tell(reflection, retry, out, library, turns, timeout)
        texts = {}
        if reflection.reselect:
            texts = {t.id: f"{t.query}\n{errors[t.id]}" for t in retry if errors[t.id]}
        reselect_tokens = _reselect(reselect, texts, out, docs, library)
        revised = _revise(retry, owners, generators, docs, turns, task_bar)
        out.programs.update(revised)
        new_results = execute_programs(sandbox, retry, revised, _one_step(task_bar))
        for t in retry:
            out.results.pop(t.id, None)
            out.rounds[t.id].append(
                _entry(
                    round_no,
                    revised[t.id],
                    new_results.get(t.id),
                    out.selections[t.id] if reflection.reselect else None,
                    gold[t.id],
                )
            )
        out.results.update(new_results)
        out.usage.append({"requests": _sent(generators), "reselect_tokens": reselect_tokens})
    totals = [u["requests"] for u in out.usage]  # running totals -> requests per round
    for i, usage in enumerate(out.usage):
        usage["requests"] = totals[i] - (totals[i - 1] if i else 0.0)
    return out


def round_figures(
    reflection: Reflection,
    rounds: Mapping[str, Sequence[RoundEntry]],
    usage: Sequence[Mapping[str, float]],
) -> tuple[RoundFigures, ...]:
    """The figures of rounds 1 .. ``reflection.rounds`` of a cell, one
    :class:`~primsel.experiments.records.RoundFigures` per round.

    Parameters
    ----------
    reflection : the cell's reflection settings.
    rounds : :attr:`RoundsOutcome.rounds`, task id -> its entries.
    usage : :attr:`RoundsOutcome.usage`, per round.

    A round no task reached repeats the success of the last one; ``selection_recall`` is None
    without ``reselect``.
    """
    n = len(rounds)
    out: list[RoundFigures] = []
    cumulative = 0.0
    for r in range(1, reflection.rounds + 1):
        entries = [e for task in rounds.values() for e in task if e.round == r]
        passed = sum(
            1 for task in rounds.values() if any(e.status == "pass" for e in task if e.round <= r)
        )
        prompt = math.fsum(e.tokens["prompt"] for e in entries)
        completion = math.fsum(e.tokens["completion"] for e in entries)
        reached = r - 1 < len(usage)
        cumulative += prompt + completion
        if reached:
            cumulative += float(usage[r - 1]["reselect_tokens"])
        selection_recall = None
        if reflection.reselect:
            last = [
                max((e for e in task if e.round <= r), key=lambda e: e.round)
                for task in rounds.values()
            ]
            selection_recall = math.fsum(e.set_recall or 0.0 for e in last) / n if n else 0.0
        out.append(
            RoundFigures(
                success=passed / n if n else 0.0,
                calls=float(len(entries)),
                cache_hits=float(sum(1 for e in entries if e.cached)),
                requests=float(usage[r - 1]["requests"]) if reached else 0.0,
                prompt_tokens=prompt,
                completion_tokens=completion,
                cumulative_tokens=cumulative,
                selection_recall=selection_recall,
            )
        )
    return tuple(out)
