"""Reflection rounds: after a program that did not pass, the model gets feedback and tries again.

Three settings belong to this loop, not to the generator. An experiment file writes them in the
``[generator]`` table (or, equally, in a ``[reflection]`` table of their own); a cell's settings
hold them apart, as a :class:`Reflection` (``CellSettings.reflection``), and the generator is
built without them:

==============  ===================================================================  ==========
key             meaning                                                              default
==============  ===================================================================  ==========
``rounds``      most programs per task (>= 1); a task that passes stops              1
``feedback``    what the model is told about a failed program: ``"verdict"``,        ``"error"``
                ``"error"`` or ``"trace"`` (:mod:`primsel.eval.feedback`)
``reselect``    re-rank the library for the next round with the query plus the       false
                error message (:func:`primsel.eval.feedback.error_text`)
==============  ===================================================================  ==========

Round 1 is the cell's ordinary generation. In each later round every task whose program did not
pass (and got an answer: a task whose request failed, ``llm_error``, is not retried) is sent the
conversation so far: the round-1 request (with the documentation of the round's selection),
then for each earlier round the model's answer and the feedback on its program
(:meth:`primsel.generation.generators.OpenAIGenerator.revise_many`, the
:class:`primsel.types.Revises` ability). The new program runs in the sandbox like the first.
Every round's request goes through the generator's answer cache, so a run that is interrupted
and started again sends no request twice. A task's final status is that of its last round.

Feedback at every level comes from the execution result alone; it never holds the evaluation
program's text or expected values, nor anything of the reference program, nor a comparison
with it (the rule: :mod:`primsel.eval.feedback`). The failure diagnosis
(:func:`primsel.eval.attribution.attribute`, with the reference program's run on the same
initial state) is recorded in the round records (``category``) for the researcher only.

With ``reselect``, a retried task whose feedback names an error is ranked again by the cell's
retriever (same folds and training tasks) with ``query + "\\n" + error``; the selection of the
next round is taken from that ranking with the cell's ``k``, ``threshold`` and ``closure``, and
the conversation's opening request shows its documentation. With ``feedback = "verdict"`` no
error is told, so the selection never changes.

Figures (:func:`round_figures`): ``success@r`` (fraction of tasks passed by round r), per round
``calls@r`` (generation requests of the round, cache hits included), ``cache_hits@r``,
``requests@r`` (HTTP requests the generator sent in the round, retries included),
``prompt_tokens@r``, ``completion_tokens@r`` and ``cumulative_tokens@r`` (prompt + completion
tokens of rounds 1..r, plus those of re-selection by an LLM selector), and with ``reselect``
``selection_recall@r`` (mean set recall of the selection each task had in round r).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from primsel.checks import ROUNDS_BOUNDS, flag_problem, number_problem
from primsel.eval.attribution import attribute
from primsel.eval.feedback import error_text, feedback_text
from primsel.experiments.records import Round
from primsel.types import ExecutionResult, Program, Revises, Selection, SummarisesUsage, Task

__all__ = [
    "FEEDBACK_LEVELS", "REFLECTION_KEYS", "Reflection", "RoundsOutcome", "execute_programs",
    "reflection_problem", "round_figures", "run_rounds",
]

#: The reflection settings (keys of a ``[reflection]`` table, or of the generator table).
REFLECTION_KEYS = ("rounds", "feedback", "reselect")
#: Feedback levels (:data:`primsel.eval.feedback.LEVELS`).
FEEDBACK_LEVELS = ("verdict", "error", "trace")


@dataclass(frozen=True)
class Reflection:
    """The reflection settings of a cell (the ``reflection`` field of
    :class:`primsel.experiments.settings.CellSettings`).

    Parameters
    ----------
    rounds : most programs per task, >= 1 (:data:`primsel.checks.ROUNDS_BOUNDS`).
    feedback : ``"verdict"``, ``"error"`` or ``"trace"``.
    reselect : re-rank with the query plus the error message before each later round.
    given : the keys the experiment set, in :data:`REFLECTION_KEYS` order; when there is at
        least one (:attr:`configured`), rows and reports carry the per-round figures, even with
        ``rounds = 1``. Only these keys are written back into the cell's settings
        (:meth:`to_table`), so a cell's id does not depend on where they were written.

    Raises
    ------
    ValueError : a value out of its range (:func:`reflection_problem`), or ``given`` naming a
        key that is not one of :data:`REFLECTION_KEYS`.
    """

    rounds: int = 1
    feedback: str = "error"
    reselect: bool = False
    given: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problem = reflection_problem({"rounds": self.rounds, "feedback": self.feedback, "reselect": self.reselect})
        if problem is not None:
            raise ValueError(f"{problem[0]} {problem[1]}")
        unknown = [key for key in self.given if key not in REFLECTION_KEYS]
        if unknown:
            raise ValueError(f"given must name keys among {', '.join(REFLECTION_KEYS)}, got {unknown[0]!r}")
        object.__setattr__(self, "given", tuple(key for key in REFLECTION_KEYS if key in self.given))

    @property
    def configured(self) -> bool:
        """True when the experiment set at least one reflection key."""
        return bool(self.given)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Reflection:
        """The reflection settings a table sets (its other keys are ignored); ``given`` lists
        the reflection keys it holds.

        Raises
        ------
        ValueError : a value out of its range, as ``"<key> <problem>"``.
        """
        given = tuple(key for key in REFLECTION_KEYS if key in table)
        return cls(**{key: table[key] for key in given}, given=given)

    def to_table(self) -> dict[str, Any]:
        """The keys the experiment set, with their values (empty when none was set)."""
        return {key: getattr(self, key) for key in self.given}


def reflection_problem(table: Mapping[str, Any]) -> tuple[str, str] | None:
    """What is wrong with the reflection keys of a table, as ``(key, problem)``, or None. Keys it
    does not hold are not checked."""
    if "rounds" in table:
        problem = number_problem(table["rounds"], **ROUNDS_BOUNDS)
        if problem is not None:
            return "rounds", problem
    if "feedback" in table and table["feedback"] not in FEEDBACK_LEVELS:
        return "feedback", f"must be one of {', '.join(repr(v) for v in FEEDBACK_LEVELS)}, got {table['feedback']!r}"
    if "reselect" in table:
        problem = flag_problem(table["reselect"])
        if problem is not None:
            return "reselect", problem
    return None


def execute_programs(sandbox: Any, tasks: Sequence[Task], programs: Mapping[str, Program],
                     on_result: Callable[[], None] | None = None) -> dict[str, ExecutionResult]:
    """Run the programs whose status is ``ok`` in the sandbox.

    A program that is not ``ok`` (``truncated``, ``llm_error``, ``no_program``) gets no result;
    under ASPERA's rules an entry point that is not a top-level function gets ASPERA's verdict
    without running (:func:`primsel.generation.extract.entry_point_error`).

    Parameters
    ----------
    sandbox : an open :class:`primsel.simulator.sandbox.Sandbox`.
    tasks : the tasks whose programs run (each must be in ``programs``).
    programs : task id -> program.
    on_result : called once per task (run or not), e.g. to advance a progress bar.

    Returns
    -------
    task id -> execution result, for the tasks that got one.
    """
    # local: the settings import this module, and primsel.generation loads the LLM clients
    from primsel.generation.extract import entry_point_error

    results = {t.id: r for t in tasks if (r := entry_point_error(programs[t.id])) is not None}
    jobs = [(t, programs[t.id].code, programs[t.id].entry_point) for t in tasks
            if programs[t.id].status == "ok" and t.id not in results]
    if on_result is not None:
        for _ in range(len(tasks) - len(jobs)):
            on_result()
    if jobs:
        for result in sandbox.execute_many(jobs):
            results[result.task_id] = result
            if on_result is not None:
                on_result()
    return results


def reference_runs(sandbox: Any, tasks: Sequence[Task], known: dict[str, ExecutionResult]) -> None:
    """Run the reference program of each task not in ``known`` (on the same initial state as the
    task's program: the comparison of :mod:`primsel.eval.localise`) and add its result there."""
    todo = [t for t in tasks if t.id not in known]
    if todo:
        known.update((r.task_id, r) for r in sandbox.execute_many((t, t.program, None) for t in todo))


@dataclass
class RoundsOutcome:
    """What :func:`run_rounds` leaves: the final round of every task and the record of all rounds.

    Parameters
    ----------
    programs, results, selections : task id -> the last round's program, execution result (for
        the tasks that got one) and selection.
    rounds : task id -> one entry per round the task ran (``round``, ``status``, ``error_type``,
        ``message``, ``line``, ``program_status``, ``program``, ``tokens``, ``cached``,
        ``category`` and ``feedback``: the diagnosis category of a failed round and the feedback
        the next round was given (None when the task passed or had no next round); with
        ``reselect``, ``selection`` and ``set_recall``).
    references : task id -> the reference program's run, for the tasks that failed a round.
    usage : per round (index 0 = round 1), the generator's ``requests`` sent and the tokens of
        re-selection (``reselect_tokens``).
    """

    programs: dict[str, Program]
    results: dict[str, ExecutionResult]
    selections: dict[str, Selection]
    rounds: dict[str, list[dict[str, Any]]]
    references: dict[str, ExecutionResult] = field(default_factory=dict)
    usage: list[dict[str, float]] = field(default_factory=list)


def _status(program: Program, result: ExecutionResult | None) -> str:
    return result.status if result is not None else program.status


def _entry(round_no: int, program: Program, result: ExecutionResult | None) -> dict[str, Any]:
    usage = dict(program.usage)
    return {
        "round": round_no,
        "status": _status(program, result),
        "error_type": result.error_type if result is not None else None,
        "message": result.message if result is not None else (program.raw if program.status == "llm_error" else None),
        "line": result.line if result is not None else None,
        "program_status": program.status,
        "program": program.code,
        "tokens": {"prompt": int(usage.get("prompt_tokens", 0)), "completion": int(usage.get("completion_tokens", 0)),
                   "prompt_cached": int(usage.get("prompt_tokens_cached", 0))},
        "cached": bool(usage.get("cached", 0)),
        "category": None,
        "feedback": None,
    }


def _sent(generators: Sequence[Any]) -> float:
    """HTTP requests the generators' clients have sent so far (retries included)."""
    return math.fsum(float(g.usage_summary().get("requests", 0.0)) for g in generators
                     if isinstance(g, SummarisesUsage))


def _set_recall(selection: Selection, gold: frozenset[str]) -> float:
    return len(set(selection.ids) & gold) / len(gold) if gold else 0.0


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
    reselect: Callable[[Mapping[str, str]], Mapping[str, Selection]] | None = None,
    task_bar: Any = None,
) -> RoundsOutcome:
    """Rounds 2..R of every task whose program did not pass (see the module docstring).

    Parameters
    ----------
    reflection : the settings (``rounds``, ``feedback``, ``reselect``).
    tasks : the cell's tasks (gold filled).
    owners : task id -> the generator that wrote its round-1 program (the one fitted on its
        fold); it writes the task's later rounds too. It must have the
        :class:`primsel.types.Revises` ability when ``rounds`` > 1.
    selections : task id -> round-1 selection.
    programs, results : round 1 (results for the programs that ran).
    sandbox : an open sandbox (:func:`execute_programs`).
    library : the library (ids -> primitives).
    timeout : the task's time limit in seconds (named in the feedback on a timeout).
    reselect : with ``reflection.reselect``: ``{task id: text}`` -> new selections of those
        tasks (the cell's retriever, folds and selector).
    task_bar : a tqdm bar: its total grows by two steps per retried task and round (generation,
        execution), advanced as they are done; or None.

    Returns
    -------
    :class:`RoundsOutcome`.

    Raises
    ------
    ValueError : a retried task's generator cannot revise, or ``reflection.reselect`` without
        ``reselect``.
    Whatever the generator or the sandbox raises (fatal LLM errors stop the run).
    """
    if reflection.reselect and reselect is None:
        raise ValueError("reselect needs the cell's retriever to rank again")
    generators = list({id(g): g for g in owners.values()}.values())
    gold = {t.id: frozenset(t.gold) for t in tasks}
    out = RoundsOutcome(programs=dict(programs), results=dict(results), selections=dict(selections),
                        rounds={t.id: [_entry(1, programs[t.id], results.get(t.id))] for t in tasks})
    out.usage.append({"requests": _sent(generators), "reselect_tokens": 0.0})
    if reflection.reselect:
        for t in tasks:
            out.rounds[t.id][0].update(selection=list(selections[t.id].ids),
                                       set_recall=_set_recall(selections[t.id], gold[t.id]))
    turns: dict[str, list[tuple[Program, str]]] = {t.id: [] for t in tasks}
    docs = {t.id: [library[p] for p in selections[t.id].ids] for t in tasks}
    for round_no in range(2, reflection.rounds + 1):
        retry = [t for t in tasks if _status(out.programs[t.id], out.results.get(t.id)) != "pass"
                 and out.programs[t.id].status not in ("llm_error", "prompt_too_long")]
        if not retry:
            break
        for t in retry:
            if not isinstance(owners[t.id], Revises):
                raise ValueError(f"generator {type(owners[t.id]).__name__} cannot revise a program "
                                 "(rounds > 1 needs a generator with revise_many, e.g. openai)")
        if task_bar is not None:
            task_bar.total += 2 * len(retry)
            task_bar.refresh()
        reference_runs(sandbox, [t for t in retry if t.id in out.results], out.references)
        errors: dict[str, str] = {}
        for t in retry:
            program, result = out.programs[t.id], out.results.get(t.id)
            diagnosis = attribute(t, out.selections[t.id], program, result, library, out.references.get(t.id))
            text = feedback_text(reflection.feedback, program, result, timeout)
            turns[t.id].append((program, text))
            out.rounds[t.id][-1].update(category=diagnosis["category"] if diagnosis else None, feedback=text)
            errors[t.id] = error_text(program, result, reflection.feedback)
        reselect_tokens = 0.0
        if reflection.reselect and reselect is not None:
            texts = {t.id: f"{t.query}\n{errors[t.id]}" for t in retry if errors[t.id]}
            if texts:
                chosen = reselect(texts)
                for task_id, selection in chosen.items():
                    out.selections[task_id] = selection
                    docs[task_id] = [library[p] for p in selection.ids]
                    reselect_tokens += float(selection.usage.get("prompt_tokens", 0.0)) + \
                        float(selection.usage.get("completion_tokens", 0.0))
        revised: dict[str, Program] = {}
        for generator in generators:
            mine = [t for t in retry if owners[t.id] is generator]
            if mine:
                items = [(t, docs[t.id], tuple(turns[t.id])) for t in mine]
                revised.update((t.id, p) for t, p in zip(mine, generator.revise_many(items)))
                if task_bar is not None:
                    task_bar.update(len(mine))
        out.programs.update(revised)
        new_results = execute_programs(sandbox, retry, revised,
                                       (lambda: task_bar.update(1)) if task_bar is not None else None)
        for t in retry:
            out.results.pop(t.id, None)
        out.results.update(new_results)
        for t in retry:
            entry = _entry(round_no, revised[t.id], new_results.get(t.id))
            if reflection.reselect:
                entry.update(selection=list(out.selections[t.id].ids),
                             set_recall=_set_recall(out.selections[t.id], gold[t.id]))
            out.rounds[t.id].append(entry)
        out.usage.append({"requests": _sent(generators), "reselect_tokens": reselect_tokens})
    # requests per round, from the running totals
    totals = [u["requests"] for u in out.usage]
    for i, usage in enumerate(out.usage):
        usage["requests"] = totals[i] - (totals[i - 1] if i else 0.0)
    return out


def round_figures(reflection: Reflection, rounds: Mapping[str, Sequence[Mapping[str, Any]]],
                  usage: Sequence[Mapping[str, float]]) -> tuple[Round, ...]:
    """The per-round figures of a cell (see the module docstring), for rounds 1..``rounds``.

    Parameters
    ----------
    reflection : the settings (``rounds`` gives the number of figures; a round no task reached
        repeats the success of the last and has no requests).
    rounds : task id -> its round entries (:class:`RoundsOutcome`).
    usage : per round run, ``requests`` and ``reselect_tokens`` (:class:`RoundsOutcome`).

    Returns
    -------
    One :class:`primsel.experiments.records.Round` per round (written ``success@1``,
    ``calls@1``, ... in report.json); ``selection_recall`` None without ``reselect``.
    """
    n = len(rounds)
    out: list[Round] = []
    cumulative = 0.0
    for r in range(1, reflection.rounds + 1):
        entries = [e for task in rounds.values() for e in task if e["round"] == r]
        passed = sum(1 for task in rounds.values() if any(e["status"] == "pass" for e in task if e["round"] <= r))
        prompt = math.fsum(e["tokens"]["prompt"] for e in entries)
        completion = math.fsum(e["tokens"]["completion"] for e in entries)
        extra = float(usage[r - 1]["reselect_tokens"]) if r - 1 < len(usage) else 0.0
        cumulative += prompt + completion + extra
        selection_recall = None
        if reflection.reselect:
            last = [max((e for e in task if e["round"] <= r), key=lambda e: e["round"]) for task in rounds.values()]
            selection_recall = math.fsum(e.get("set_recall", 0.0) for e in last) / n if n else 0.0
        out.append(Round(success=passed / n if n else 0.0, calls=float(len(entries)),
                         cache_hits=float(sum(1 for e in entries if e["cached"])),
                         requests=float(usage[r - 1]["requests"]) if r - 1 < len(usage) else 0.0,
                         prompt_tokens=prompt, completion_tokens=completion, cumulative_tokens=cumulative,
                         selection_recall=selection_recall))
    return tuple(out)
