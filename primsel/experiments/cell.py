"""One cell of ``primsel run`` or ``primsel retrieve``: the pipeline from a ranking to the cell's
files.

:func:`compute_cell` runs the steps in order, each a function of this module:

1. **select** (:func:`select_tasks`): cut each task's ranking into a selection, by the cell's k,
   threshold and closure or by its ``selector`` (fitted per fold on the other folds when it learns);
2. **score** (:func:`score_ranking`, :func:`score_selections`): the ranking and set metrics, per
   task and as means, and the recall/tokens frontier;
3. **generate** (only with a generator, :func:`generate_and_execute`): write a program per task from
   the documentation of its selection, execute it in the sandbox, run the reflection rounds, and
   diagnose each task that did not pass. The step returns a :class:`GenerationOutcome`: a
   :class:`~primsel.experiments.records.ProgramOutcome` per task and the cell's figures. Another way
   of generating slots in here as another function returning a :class:`GenerationOutcome`;
4. **record** (:func:`record_cell`): the task rows and the report.json record.

:func:`write_cell` then writes the files (:func:`primsel.experiments.results.write_cell_files`):

=================  ==============================================================  ====================
file               what                                                            record
=================  ==============================================================  ====================
config.json        the settings, the data, the library, source digests, versions    ConfigFile
run.trec           the ranking                                                       (TREC run)
qrels.trec         the gold primitives of the tasks                                  (TREC qrels)
tasks.jsonl        a row per task: selection, gold, per-task metrics, the program    TaskRow
failures.jsonl     with a generator, the diagnosis of each task that did not pass    (attribution)
report.json        the means, written last: a cell without it is not finished       ReportFile
=================  ==============================================================  ====================

A cell is incomplete (``"complete": false``) when an LLM request it depends on failed after its
retries; the next ``primsel run`` computes it again.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel import registry
from primsel.eval.aspera import aspera_figures
from primsel.experiments.agents import aspera_selection_names, is_aspera
from primsel.eval.attribution import attribute, count_categories
from primsel.eval.execution import execute_programs, lenient_statuses, reference_runs
from primsel.eval.frontier import frontier
from primsel.eval.metrics import per_task, set_metrics, set_metrics_per_task, tied_tasks_at
from primsel.experiments.columns import (
    BASE_METRICS,
    REPORT_KS,
    SELECTOR_USAGE,
    TASK_METRICS,
    TASK_STATUSES,
)
from primsel.experiments.config import Cell, generator_spec
from primsel.experiments.dataset import Dataset
from primsel.experiments.records import (
    AsperaFigures,
    ConfigFile,
    Frontier,
    GenerationFigures,
    Learning,
    ProgramOutcome,
    RankingFigures,
    ReportFile,
    RoundEntry,
    RoundFigures,
    RunFacts,
    SelectionFigures,
    SelectorUsage,
    TaskRow,
    answer_tokens,
)
from primsel.experiments.reflection import round_figures, run_rounds
from primsel.experiments.results import write_cell_files
from primsel.experiments.settings import CellSettings
from primsel.generation.generators import PROMPT_TOO_LONG
from primsel.library import Library
from primsel.retrieval.cv import fit_per_fold
from primsel.retrieval.selector import estimate_tokens, select
from primsel.retrieval.store import Retrieval, RetrievalStore, retrieval_errors, retrieval_key
from primsel.retrieval.windows import embedding_windows
from primsel.simulator.sandbox import Sandbox
from primsel.types import (
    ExecutionResult,
    FitsOnTasks,
    GeneratesMany,
    LearnsFromTasks,
    Program,
    Run,
    Selection,
    SummarisesUsage,
    Task,
)

__all__ = [
    "TASK_STATUSES",
    "CellInputs",
    "ComputedCell",
    "GenerationOutcome",
    "RunContext",
    "compute",
    "compute_cell",
    "llm_answers",
    "run_cell",
    "write_cell",
]


def _mean(values: Iterable[float]) -> float:
    """The mean of ``values``, 0.0 for none."""
    found = list(values)
    if not found:
        return 0.0
    return math.fsum(found) / len(found)


@dataclasses.dataclass(frozen=True)
class CellInputs:
    """What one cell is computed from.

    Parameters
    ----------
    settings : the cell's settings.
    retrieval : its ranking of every task (:meth:`primsel.retrieval.store.RetrievalStore.get`).
    dataset, library : the tasks and the library they are ranked against.
    name : the retriever's name in the selections (a run's cell id, ``primsel retrieve``'s tag).
    workers : sandbox processes (None: one per CPU).
    base_dir : the directory a relative generator ``programs`` or ``gguf`` path is resolved against.
    task_bar : a tqdm bar advanced per task and step (None: no bar).
    requery : :meth:`RetrievalStore.rerank` of the cell's retriever, ``{task id: text}`` -> a new
        retrieval (reflection's ``reselect``; None: not possible).
    """

    settings: CellSettings
    retrieval: Retrieval
    dataset: Dataset
    library: Library
    name: str = ""
    workers: int | None = None
    base_dir: Path | None = None
    task_bar: Any = None
    requery: Callable[[Mapping[str, str]], Retrieval] | None = None

    def advance(self, steps: int = 1) -> None:
        """Advance the task bar by ``steps`` (nothing without a bar)."""
        if self.task_bar is not None:
            self.task_bar.update(steps)


@dataclasses.dataclass(frozen=True)
class GenerationOutcome:
    """What the generation step of a cell leaves.

    Parameters
    ----------
    programs : task id -> what became of its program (in the order of the tasks).
    rounds : task id -> its reflection rounds (empty without reflection).
    selections : task id -> the last selection (reflection's ``reselect`` may have changed the
        first).
    failures : the diagnosis of every task that did not pass, in task order (failures.jsonl).
    figures, round_figures, aspera : the cell's generation figures, per-round figures and ASPERA's
        figures.
    fitted : True when a generator was fitted on the training folds.
    """

    programs: Mapping[str, ProgramOutcome]
    rounds: Mapping[str, tuple[RoundEntry, ...]]
    selections: Mapping[str, Selection]
    failures: list[Mapping[str, Any]]
    figures: GenerationFigures
    round_figures: tuple[RoundFigures, ...]
    aspera: AsperaFigures
    fitted: bool


@dataclasses.dataclass(frozen=True)
class ComputedCell:
    """What :func:`compute_cell` computed, ready to be written.

    Parameters
    ----------
    report : report.json's record (without the wall time: :func:`write_cell` adds it).
    rows : tasks.jsonl's rows, in task order.
    run : the ranking (run.trec).
    selections : task id -> its (first) selection.
    failures : with a generator, failures.jsonl's diagnoses (None without).
    """

    report: ReportFile
    rows: list[TaskRow]
    run: Run
    selections: dict[str, Selection]
    failures: list[Mapping[str, Any]] | None = None


# ------------------------------------------------------------------------------------------------
# The pipeline
# ------------------------------------------------------------------------------------------------
def compute_cell(
    settings: CellSettings,
    retrieval: Retrieval,
    dataset: Dataset,
    library: Library,
    *,
    name: str = "",
    workers: int | None = None,
    base_dir: Path | None = None,
    task_bar: Any = None,
    requery: Callable[[Mapping[str, str]], Retrieval] | None = None,
) -> ComputedCell:
    """Select, score and (with a generator) generate and execute one cell over every task of
    ``dataset``.

    Parameters are those of :class:`CellInputs`.

    Returns
    -------
    :class:`ComputedCell`.

    Raises
    ------
    ValueError : reflection's ``reselect`` without ``requery``.
    Whatever the selector, a generator or the sandbox raises.
    """
    inputs = CellInputs(
        settings=settings,
        retrieval=retrieval,
        dataset=dataset,
        library=library,
        name=name,
        workers=workers,
        base_dir=base_dir,
        task_bar=task_bar,
        requery=requery,
    )
    selectors = fit_selectors(inputs)
    selections = select_tasks(inputs, selectors, [t.id for t in dataset.tasks], retrieval)
    generated = None
    if settings.generator is not None:
        generated = generate_and_execute(inputs, selectors, selections)
    rows = task_rows(inputs, selections, generated)
    report = record_cell(inputs, selectors, selections, generated)
    failures = None if generated is None else generated.failures
    return ComputedCell(
        report=report, rows=rows, run=retrieval.run(), selections=selections, failures=failures
    )


def fit_selectors(inputs: CellInputs) -> dict[int, Any]:
    """Fold -> the cell's selector ({} without ``selector``); one that learns from tasks is fitted
    per fold on the rankings and gold sets of the other folds' tasks."""
    spec, retrieval = inputs.settings.selector, inputs.retrieval
    if spec is None:
        return {}
    folds = sorted({retrieval.folds.get(t.id, 0) for t in inputs.dataset.tasks})
    probe = registry.build(spec, "selector")
    if not getattr(probe, "learns_from_tasks", False):
        return dict.fromkeys(folds, probe)

    def fit(chooser: Any, fold: int) -> Any:
        """Fit ``chooser`` on the rankings and gold sets of the tasks not in ``fold``."""
        training = [
            (retrieval.ranked[t.id], t.gold)
            for t in inputs.dataset.tasks
            if retrieval.folds.get(t.id, 0) != fold
        ]
        return chooser.fit(inputs.library, training)

    return dict(fit_per_fold(probe, lambda: registry.build(spec, "selector"), folds, fit))


def select_tasks(
    inputs: CellInputs,
    selectors: Mapping[int, Any],
    task_ids: Iterable[str],
    retrieval: Retrieval,
    count: bool = True,
) -> dict[str, Selection]:
    """Task id -> its selection from ``retrieval``: by the selector of its fold, else by the cell's
    k, threshold and closure (:func:`primsel.retrieval.selector.select`). With ``count``, the task
    bar advances per task."""
    s = inputs.settings
    out = {}
    for task_id in task_ids:
        chooser = selectors.get(retrieval.folds.get(task_id, 0))
        choose = select if chooser is None else chooser.select
        out[task_id] = choose(
            retrieval.ranked[task_id],
            inputs.library,
            k=s.k,
            threshold=s.threshold,
            closure=s.closure,
            task_id=task_id,
            retriever=inputs.name,
            usage=retrieval.usage.get(task_id),
        )
        if count:
            inputs.advance()
    return out


def _ranking_metrics(settings: CellSettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the ranking metrics the cell reports as means, those each task row keeps)."""
    at_k = (f"recall@{settings.k}", f"complete@{settings.k}")
    means = tuple(dict.fromkeys((*BASE_METRICS, *at_k, *settings.metrics)))
    per_row = tuple(dict.fromkeys((*TASK_METRICS, *at_k, *settings.metrics)))
    return means, per_row


def score_ranking(inputs: CellInputs) -> RankingFigures:
    """The ranking metrics of the cell: means over tasks, in id order and tie-aware, and the tasks
    with a tie across each of the report's cut-offs and the cell's k."""
    run, gold = inputs.retrieval.run(), {t.id: t.gold for t in inputs.dataset.tasks}
    names, _ = _ranking_metrics(inputs.settings)
    in_id_order = per_task(run, gold, names)
    tie_aware = per_task(run, gold, names, ties="expected")
    ties = tied_tasks_at(run, gold, sorted({*REPORT_KS, inputs.settings.k}))
    return RankingFigures(
        values={n: _mean(row[n] for row in in_id_order.values()) for n in names},
        tie_aware={n: _mean(row[n] for row in tie_aware.values()) for n in names},
        tied_tasks={cut: float(count) for cut, count in ties.items()},
    )


def _document_tokens(library: Library) -> dict[str, int]:
    """Primitive id -> tokens of its documentation, as a prompt shows it
    (:func:`estimate_tokens`)."""
    return {p: estimate_tokens(doc.text("full")) for p, doc in library.items()}


def score_selections(inputs: CellInputs, selections: Mapping[str, Selection]) -> SelectionFigures:
    """The selections of the cell: means over tasks of their size, of what the closure added and of
    their documentation tokens, and the set metrics."""
    tokens = _document_tokens(inputs.library)
    selected = {t: tuple(selection.ids) for t, selection in selections.items()}
    gold = {t.id: t.gold for t in inputs.dataset.tasks}
    return SelectionFigures(
        n_tasks=len(inputs.dataset.tasks),
        selected=_mean(len(ids) for ids in selected.values()),
        closure_added=_mean(len(s.added_by_closure) for s in selections.values()),
        docs_tokens=_mean(sum(tokens[p] for p in ids) for ids in selected.values()),
        scores=set_metrics(selected, gold),
    )


def task_rows(
    inputs: CellInputs, selections: Mapping[str, Selection], generated: GenerationOutcome | None
) -> list[TaskRow]:
    """The rows of tasks.jsonl, in task order: each task's selection, gold, per-task metrics and
    documentation tokens, its selector's usage (with an LLM selector) and, with a generator, its
    program and rounds."""
    retrieval, tasks = inputs.retrieval, inputs.dataset.tasks
    gold = {t.id: t.gold for t in tasks}
    _, names = _ranking_metrics(inputs.settings)
    ranking = per_task(retrieval.run(), gold, names)
    selected = {t: tuple(selection.ids) for t, selection in selections.items()}
    set_scores = set_metrics_per_task(selected, gold)
    tokens = _document_tokens(inputs.library)
    rows = []
    for t in tasks:
        metrics = {name: ranking[t.id][name] for name in names}
        for name in ("precision", "recall", "f1"):
            metrics[f"set_{name}"] = set_scores[t.id][name]
        usage = dict(selections[t.id].usage) if retrieval.usage else None
        program = rounds = None
        if generated is not None:
            program = generated.programs[t.id]
            rounds = generated.rounds.get(t.id)
        rows.append(
            TaskRow(
                task_id=t.id,
                fold=retrieval.folds.get(t.id),
                selection=selected[t.id],
                closure_added=tuple(selections[t.id].added_by_closure),
                gold=tuple(sorted(t.gold)),
                metrics=metrics,
                docs_tokens=sum(tokens[p] for p in selected[t.id]),
                selection_usage=usage,
                program=program,
                rounds=rounds,
            )
        )
    return rows


def _learns_from_tasks(spec: Any, kind: str) -> bool:
    """True when the component ``spec`` names learns from tasks (built to ask: constructors only
    store their parameters, and whether a hybrid learns depends on its members)."""
    return isinstance(registry.build(spec, kind), LearnsFromTasks)


def record_cell(
    inputs: CellInputs,
    selectors: Mapping[int, Any],
    selections: Mapping[str, Selection],
    generated: GenerationOutcome | None,
) -> ReportFile:
    """report.json's record of the cell (without its wall time): the ranking and selection figures,
    the selector's usage, the generation's figures, how the cell ran, what learns, the frontier and
    the name of its ranking."""
    s, retrieval, dataset = inputs.settings, inputs.retrieval, inputs.dataset
    selector_usage = None
    if retrieval.usage:
        totals = {
            name: math.fsum(float(u.get(name, 0.0)) for u in retrieval.usage.values())
            for name in SELECTOR_USAGE
        }
        selector_usage = SelectorUsage(totals)
    incomplete = set(retrieval_errors(retrieval))
    if generated is not None:
        incomplete |= {
            task_id for task_id, p in generated.programs.items() if p.status == "llm_error"
        }
    answers = llm_answers(
        selector_usage, None if generated is None else generated.figures, retrieval.cached
    )
    run = RunFacts(
        retrieval_seconds=retrieval.seconds,
        retrieval_cached=float(retrieval.cached),
        llm_answers=None if answers is None else answers[0],
        llm_answers_cached=None if answers is None else answers[1],
        incomplete_tasks=float(len(incomplete)),
        complete=not incomplete,
    )
    selector_learns = any(
        getattr(chooser, "learns_from_tasks", False) for chooser in selectors.values()
    )
    learning = Learning(
        retriever=_learns_from_tasks(s.retriever, "retriever"),
        selector=selector_learns,
        generator=generated is not None and generated.fitted,
    )
    curve = frontier(
        retrieval.run(), {t.id: t.gold for t in dataset.tasks}, _document_tokens(inputs.library)
    )
    key = retrieval.key or retrieval_key(dataset.fingerprint, s.retriever, s.folds, s.seed, s.depth)
    return ReportFile(
        ranking=score_ranking(inputs),
        selection=score_selections(inputs, selections),
        selector_usage=selector_usage,
        generation=None if generated is None else generated.figures,
        rounds=() if generated is None else generated.round_figures,
        aspera=None if generated is None else generated.aspera,
        run=run,
        learning=learning,
        frontier=None if curve is None else Frontier(*curve),
        retrieval_key=key,
    )


def llm_answers(
    selector: SelectorUsage | None,
    generation: GenerationFigures | None,
    ranking_cached: bool = False,
) -> tuple[float, float] | None:
    """How many LLM answers (calls not ending in an error) a cell rests on, its selector's and its
    generator's, and how many came from a cache (all the selector's when ``ranking_cached``: its
    ranking was cached).

    Returns
    -------
    ``(answers, cached)``, or None when the cell used no LLM.
    """
    use = dict(selector.values) if selector is not None else {}
    gen = dict(generation.usage) if generation is not None else {}

    def total(values: Mapping[str, Any], key: str) -> float:
        """The number under ``key`` (0 when absent or None)."""
        return float(values.get(key, 0.0) or 0.0)

    from_selector = total(use, "calls") - total(use, "errors")
    from_generator = total(gen, "calls") - total(gen, "errors")
    if from_selector + from_generator <= 0:
        return None
    if ranking_cached:
        cached = from_selector
    else:
        cached = total(use, "cached")
    return from_selector + from_generator, cached + total(gen, "cache_hits")


# ------------------------------------------------------------------------------------------------
# The generation step
# ------------------------------------------------------------------------------------------------
def generate_and_execute(
    inputs: CellInputs, selectors: Mapping[int, Any], selections: Mapping[str, Selection]
) -> GenerationOutcome:
    """The generation step: a program per task from its selection (a generator per fold when it
    learns), executed in a fresh sandbox; reflection rounds for the tasks that did not pass (with
    ``reflection``); the import-lenient re-runs and the reference runs the diagnoses need; a
    diagnosis per task that did not pass.

    Raises
    ------
    ValueError : reflection's ``reselect`` without ``inputs.requery``.
    Whatever a generator or the sandbox raises.
    """
    s, tasks = inputs.settings, inputs.dataset.tasks
    spec = generator_spec(s.generator, inputs.base_dir)
    programs, owners, generators = _generate_per_fold(inputs, spec, selections)
    reselect = None
    if inputs.requery is not None:

        def reselect(texts: Mapping[str, str]) -> dict[str, Selection]:
            """The new selections of the tasks of ``texts``, ranked again from them."""
            return select_tasks(inputs, selectors, list(texts), inputs.requery(texts), count=False)

    rounds = None
    references: dict[str, ExecutionResult] = {}
    with Sandbox(workers=inputs.workers, timeout=s.timeout) as sandbox:
        results = execute_programs(sandbox, tasks, programs, inputs.advance)
        if s.reflection.configured:
            rounds = run_rounds(
                s.reflection,
                tasks,
                owners,
                selections,
                programs,
                results,
                sandbox,
                inputs.library,
                timeout=s.timeout,
                reselect=reselect,
                task_bar=inputs.task_bar,
            )
            programs, results, selections = rounds.programs, rounds.results, rounds.selections
            references = rounds.references
        lenient = lenient_statuses(sandbox, tasks, programs, results)
        failed = [t for t in tasks if t.id in results and not results[t.id].passed]
        reference_runs(sandbox, failed, references)

    outcomes: dict[str, ProgramOutcome] = {}
    entries: dict[str, tuple[RoundEntry, ...]] = {}
    failures = []
    for t in tasks:
        outcome = program_outcome(programs[t.id], results.get(t.id), lenient.get(t.id))
        if outcome.status != "pass":
            diagnosis = attribute(
                t,
                selections[t.id],
                programs[t.id],
                results.get(t.id),
                inputs.library,
                reference=references.get(t.id),
            )
            outcome = dataclasses.replace(outcome, attribution=diagnosis)
            failures.append(diagnosis)
        if rounds is not None:
            entries[t.id] = _last_round_diagnosed(rounds.rounds[t.id], outcome.attribution)
            outcome = dataclasses.replace(outcome, tokens=_round_tokens(entries[t.id]))
        outcomes[t.id] = outcome
    if is_aspera(s.generator):
        names = aspera_selection_names(s.generator, tasks, selections, inputs.library)
        for t in tasks:
            outcomes[t.id] = dataclasses.replace(outcomes[t.id], **names[t.id])

    # ASPERA's figures read the selections the programs were written from (reselect may have changed them)
    figure_rows = [
        dataclasses.replace(_aspera_row(t, outcomes[t.id]), selection=tuple(selections[t.id].ids))
        for t in tasks
    ]
    extraction = getattr(generators[0], "extraction", None) if generators else None
    figures = round_figures(s.reflection, rounds.rounds, rounds.usage) if rounds is not None else ()
    return GenerationOutcome(
        programs=outcomes,
        rounds=entries,
        selections=dict(selections),
        failures=failures,
        figures=_generation_figures(list(outcomes.values()), failures, generators),
        round_figures=figures,
        aspera=AsperaFigures(
            extraction=extraction, figures=aspera_figures([row.to_json() for row in figure_rows])
        ),
        fitted=any(isinstance(g, FitsOnTasks) for g in generators),
    )


def _aspera_row(task: Task, outcome: ProgramOutcome) -> TaskRow:
    """A task row holding what ASPERA's figures read: the gold set and the program."""
    return TaskRow(task_id=task.id, gold=tuple(sorted(task.gold)), program=outcome)


def _generate_per_fold(
    inputs: CellInputs, spec: Any, selections: Mapping[str, Selection]
) -> tuple[dict[str, Program], dict[str, Any], list[Any]]:
    """Round 1: a generator per fold, fitted on the other folds' tasks, when it learns; else one for
    every task.

    Returns
    -------
    (task id -> program, task id -> the generator that wrote it, the generators).
    """
    dataset, folds = inputs.dataset, inputs.retrieval.folds
    probe = registry.build(spec, "generator")
    learns = isinstance(probe, FitsOnTasks)
    groups: dict[int, list[Task]] = {}
    for t in dataset.tasks:
        fold = folds.get(t.id, 0) if learns else 0
        groups.setdefault(fold, []).append(t)

    def fit(generator: Any, fold: int) -> None:
        # the worked-example pool: the other folds of every task (of the whole dataset, for a subset)
        """Fit ``generator`` on the tasks not in ``fold``."""
        generator.fit(inputs.library, [t for t in dataset.all_tasks if folds.get(t.id, 0) != fold])

    if learns:
        per_fold = fit_per_fold(
            probe, lambda: registry.build(spec, "generator"), sorted(groups), fit
        )
    else:
        per_fold = [(0, probe)]
    programs: dict[str, Program] = {}
    owners: dict[str, Any] = {}
    generators = []
    for fold, generator in per_fold:
        generators.append(generator)
        items = [(t, [inputs.library[p] for p in selections[t.id].ids]) for t in groups[fold]]
        if isinstance(generator, GeneratesMany):
            made = generator.generate_many(items)
        else:
            made = [generator.generate(task, docs) for task, docs in items]
        for (t, _), program in zip(items, made):
            programs[t.id] = program
            owners[t.id] = generator
        inputs.advance(len(groups[fold]))
    return programs, owners, generators


def program_outcome(
    program: Program, result: ExecutionResult | None, lenient: str | None
) -> ProgramOutcome:
    """What became of a task's last program: its execution's verdict (``result``; None: not
    executed), its answer's tokens and time, how it was extracted, and ``lenient``, the status of
    its import-lenient re-run (no diagnosis yet). A prompt too long for the model is an ``error`` of
    type ``PromptTooLong``."""
    usage, extraction = dict(program.usage), program.extraction
    common = {
        "program_status": program.status,
        "program": program.code,
        "tokens": answer_tokens(usage),
        "generation_seconds": usage.get("seconds", 0.0),
        "extraction": extraction.get("mode"),
        "dropped_lines": tuple(extraction.get("dropped_lines", ())),
        "parse_failure": extraction.get("parse_failure"),
        "import_lenient_status": lenient,
        "prompt_digest": program.prompt_digest,
    }
    if result is not None:
        return ProgramOutcome(
            status=result.status,
            error_type=result.error_type,
            message=result.message,
            seconds=result.seconds,
            called_primitives=tuple(result.called_primitives),
            collateral=result.collateral,
            **common,
        )
    if program.status == PROMPT_TOO_LONG:
        return ProgramOutcome(
            status="error", error_type="PromptTooLong", message=program.raw, **common
        )
    message = program.raw if program.status == "llm_error" else None
    return ProgramOutcome(status=program.status, message=message, **common)


def _last_round_diagnosed(
    entries: Sequence[RoundEntry], attribution: Mapping[str, Any] | None
) -> tuple[RoundEntry, ...]:
    """A task's rounds, the last one with the category of the task's diagnosis (when it has one)."""
    if attribution is None:
        return tuple(entries)
    last = dataclasses.replace(entries[-1], category=attribution["category"])
    return (*entries[:-1], last)


def _round_tokens(entries: Sequence[RoundEntry]) -> dict[str, int]:
    """A task's tokens over all its rounds."""
    return {
        part: sum(entry.tokens.get(part, 0) for entry in entries)
        for part in ("prompt", "completion", "prompt_cached")
    }


def _generation_figures(
    outcomes: Sequence[ProgramOutcome],
    failures: Sequence[Mapping[str, Any]],
    generators: Sequence[Any],
) -> GenerationFigures:
    """The cell's generation figures: success and strict success (passed without collateral), the
    share of tasks per status, the tasks per failure category and the generators' usage summed."""
    usage: dict[str, float] = {}
    for generator in generators:
        if not isinstance(generator, SummarisesUsage):
            continue
        for key, value in generator.usage_summary().items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                usage[key] = usage.get(key, 0.0) + float(value)
    statuses = [outcome.status for outcome in outcomes]
    audited = [outcome for outcome in outcomes if outcome.collateral is not None]
    strict_success = None
    if audited:
        # a task whose program was not executed is not strict either
        strict_success = _mean(float(outcome.strict is True) for outcome in outcomes)
    return GenerationFigures(
        strict_success=strict_success,
        success=_mean(float(status == "pass") for status in statuses),
        status={
            name: _mean(float(status == name) for status in statuses) for name in TASK_STATUSES
        },
        failures={category: float(count) for category, count in count_categories(failures).items()},
        usage=usage,
        cache_hits=usage.get("cache_hits"),
    )


# ------------------------------------------------------------------------------------------------
# A cell of a run
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class RunContext:
    """What every cell of a run shares.

    Parameters
    ----------
    experiment : the experiment's name.
    library, dataset : the library and the tasks.
    store : the retrieval store of the dataset.
    workers : sandbox processes (None: one per CPU).
    versions : package versions, recorded in every config.json.
    base_dir : the experiment file's directory (relative generator paths).
    """

    experiment: str
    library: Library
    dataset: Dataset
    store: RetrievalStore
    workers: int | None = None
    versions: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    base_dir: Path | None = None


def run_cell(
    cell: Cell,
    ctx: RunContext,
    directory: Path,
    task_bar: Any = None,
    sources: Mapping[str, Mapping[str, str]] | None = None,
) -> ReportFile:
    """Compute one cell of a run (its retrieval from ``ctx.store``, then :func:`compute`) and write
    its files (:func:`write_cell`; ``sources`` as there).

    Returns
    -------
    The cell's report.json record. Whatever a component raises propagates, report.json unwritten: a
    re-run computes the cell again.
    """
    start = time.perf_counter()
    s = cell.settings
    show = None
    if task_bar is not None:

        def show(stage: str, i: int, n: int) -> None:
            """Show the retrieval's stage on the task bar."""
            fold = f" fold {i}/{n}" if n > 1 else ""
            task_bar.set_description_str(f"  {stage}{fold}", refresh=True)

    retrieval = ctx.store.get(s.retriever, s.folds, s.seed, s.depth, progress=show)
    if task_bar is not None:
        # the task steps start now: the time spent fitting must not feed their ETA
        task_bar.set_description_str("  tasks", refresh=False)
        task_bar.reset(total=task_bar.total)
    computed = compute(cell, ctx, retrieval, task_bar)
    return write_cell(cell, ctx, directory, computed, time.perf_counter() - start, sources)


def compute(
    cell: Cell, ctx: RunContext, retrieval: Retrieval, task_bar: Any = None
) -> ComputedCell:
    """:func:`compute_cell` of a cell of a run, from its retrieval; every backend computes through
    here."""
    s = cell.settings

    def requery(queries: Mapping[str, str]) -> Retrieval:
        """The cell's retriever ranking the tasks of ``queries`` again."""
        return ctx.store.rerank(s.retriever, s.folds, s.seed, queries)

    return compute_cell(
        s,
        retrieval,
        ctx.dataset,
        ctx.library,
        name=cell.id,
        workers=ctx.workers,
        base_dir=ctx.base_dir,
        task_bar=task_bar,
        requery=requery,
    )


def write_cell(
    cell: Cell,
    ctx: RunContext,
    directory: Path,
    computed: ComputedCell,
    seconds: float,
    sources: Mapping[str, Mapping[str, str]] | None = None,
) -> ReportFile:
    """Write a computed cell's files into ``directory``, report.json (with ``seconds``, the wall
    time) last; every backend writes through here. ``sources``: the source digests config.json
    records (default: :meth:`CellSettings.sources`).

    Returns
    -------
    The cell's report.json record.
    """
    s = cell.settings
    report = computed.report.with_seconds(seconds)
    extraction = report.aspera.extraction if report.aspera is not None else None
    config = ConfigFile(
        id=cell.id,
        label=cell.label,
        experiment=ctx.experiment,
        settings=s.to_json(),
        data=ctx.dataset.summary(),
        effective_folds=ctx.store.effective_folds(s.folds),
        extraction=extraction,
        embedding=embedding_windows(s.retriever, ctx.library),
        library={"n_primitives": len(ctx.library), "fingerprint": ctx.store.library_fingerprint()},
        sources=sources if sources is not None else s.sources(),
        versions=ctx.versions,
    )
    write_cell_files(
        directory, config, report, computed.run, cell.id, computed.rows, computed.failures
    )
    return report
