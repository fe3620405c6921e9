"""One cell: select from a ranking, (generate, execute,) score, and write the cell's files.

This is the pipeline both ``primsel run`` (every cell of a grid, :mod:`primsel.experiments.runner`)
and ``primsel retrieve`` (one cell, printed) go through:

1. the retrieval (:class:`primsel.experiments.store.Retrieval`: the whole library ranked for
   every task, cross-validated where the retriever learns from tasks);
2. the selection of every task (:func:`primsel.retrieval.selector.select`: threshold, top-k,
   closure; or the cell's ``selector`` class, fitted per fold on the other folds' rankings when
   it learns);
3. with a generator: a program per task (the generator fitted per fold when it can be,
   :class:`primsel.types.FitsOnTasks`), run in the sandbox, failures attributed;
4. the metrics: ranking metrics of the retrieval (in primitive-id order of tied scores and
   tie-aware), set metrics of the selection, task success.

A generated program whose status is not ``ok`` (``truncated``, ``llm_error``, ``no_program``) is
not executed: the task's status is the program's status (:data:`TASK_STATUSES`), and its
failure is attributed without an execution result.

A cell is incomplete (``"complete": false``, ``incomplete_tasks`` > 0) when an LLM request it
depends on failed after its retries: a task with status ``llm_error``, or a task whose LLM
selection had a failed module request.

Files of a cell directory (written by :func:`run_cell`, report.json last)::

    config.json     resolved settings, dataset and library fingerprints, digests of the
                    source of every component the settings name, package versions; written
                    by :meth:`primsel.experiments.run_files.CellConfig.to_json`
    run.trec        the whole library ranked for every task
    tasks.jsonl     one row per task (with an LLM selector, its per-task ``selection_usage``)
    failures.jsonl  with a generator: one attribution row per task that did not pass
    report.json     metric name -> value (every ranking metric also tie-aware, as
                    ``tie_aware_<metric>``, and ``tied_tasks@k``; with an LLM, ``llm_answers``
                    and how many came from a cache, ``llm_answers_cached``), plus ``complete``,
                    and what the report needs: ``learns``, ``frontier``, ``retrieval_key``;
                    written by :meth:`primsel.experiments.records.CellReport.to_json`
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.eval.aspera import aspera_figures
from primsel.eval.attribution import attribute, count_categories
from primsel.eval.metrics import per_task, set_metrics, set_metrics_per_task, tied_tasks
from primsel.experiments.config import Cell, generator_spec
from primsel.experiments.dataset import Dataset
from primsel.experiments.records import (
    BASE_METRICS,
    CURVE_KS,
    REPORT_KS,
    SELECTOR_USAGE,
    TASK_METRICS,
    TASK_STATUSES,
    TIE_AWARE,
    Aspera,
    CellReport,
    Generation,
    Learning,
    Ranking,
    Round,
    RunFacts,
    SelectionFigures,
    SelectorUsage,
    retrieval_key,
)
from primsel.experiments.reflection import execute_programs, reference_runs, round_figures, run_rounds
from primsel.experiments.results import frontier_figures
from primsel.experiments.run_files import CellConfig
from primsel.experiments.settings import CellSettings
from primsel.experiments.store import Retrieval, RetrievalStore, retrieval_errors
from primsel.files import dumps_json, dumps_jsonl, write_atomic
from primsel.generation.generators import PROMPT_TOO_LONG
from primsel.library import Library
from primsel.retrieval.cv import fit_per_fold
from primsel.retrieval.encoders import DEFAULT_MODEL, EncoderLoadError, window_counts
from primsel.retrieval.selector import estimate_tokens, select, tokens_of
from primsel.retrieval.trec import format_run
from primsel.simulator.sandbox import Sandbox
from primsel.types import FitsOnTasks, LearnsFromTasks, GeneratesMany, Run, Selection, SummarisesUsage, Task

#: The metric names (kept here for the modules that import them from the cell).
__all__ = ["BASE_METRICS", "CURVE_KS", "REPORT_KS", "SELECTOR_USAGE", "TASK_METRICS", "TASK_STATUSES", "TIE_AWARE",
           "CellContext", "CellOutcome", "compute_cell", "embedding_windows", "learns_from_tasks",
           "llm_answers", "run_cell", "stage_messages", "write_cell"]


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What :func:`compute_cell` computed.

    Parameters
    ----------
    report : metric name -> value (report.json without the cell's wall time ``seconds``).
    rows : one row per task (tasks.jsonl), in task order.
    run : the retrieval as a :data:`primsel.types.Run`.
    selections : task id -> :class:`primsel.types.Selection`.
    failures : with a generator, one attribution row per task that did not pass; else None.
    record : the report as a :class:`primsel.experiments.records.CellReport` (``report`` is its
        :meth:`~primsel.experiments.records.CellReport.to_json`).
    """

    report: dict[str, Any]
    rows: list[dict[str, Any]]
    run: Run
    selections: dict[str, Selection]
    failures: list[dict[str, Any]] | None = None
    record: CellReport | None = None


@dataclasses.dataclass(frozen=True)
class _Generated:
    """The records of the generation stage (all empty without a generator)."""

    generation: Generation | None = None
    rounds: tuple[Round, ...] = ()
    aspera: Aspera | None = None
    fitted: bool = False


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else 0.0


def compute_cell(settings: CellSettings, retrieval: Retrieval, dataset: Dataset, library: Library, *,
                 name: str = "", workers: int | None = None, base_dir: Path | None = None,
                 task_bar: Any = None, requery: Callable[[Mapping[str, str]], Retrieval] | None = None
                 ) -> CellOutcome:
    """Select, (generate, execute,) and score one cell over every task of ``dataset``.

    Parameters
    ----------
    settings : the cell's settings.
    retrieval : the ranking of every task under ``settings.retriever``, ``folds`` and ``seed``.
    dataset : the tasks (gold filled).
    library : the library.
    name : recorded as the selections' retriever (the cell id, or the TREC tag).
    workers : sandbox worker processes when a generator runs (default: the sandbox's).
    base_dir : directory a relative generator ``programs`` path is resolved against.
    task_bar : a tqdm bar advanced per task and step, or None.
    requery : ``{task id: text}`` -> the retrieval of those tasks ranked with those texts by
        the cell's retriever, folds and seed (:meth:`RetrievalStore.rerank`); needed by a
        generator with ``reselect = true`` (reflection rounds).

    Raises
    ------
    ValueError : ``reselect`` without ``requery``.
    Whatever the selector, a generator or the sandbox raises.
    """
    k = settings.k
    tasks = dataset.tasks
    gold = {t.id: t.gold for t in tasks}
    run = retrieval.run()
    selectors = _selectors(settings.selector, retrieval, tasks, library)
    selections = {}
    for t in tasks:
        selections[t.id] = _selection(settings, retrieval, library, t.id, name, selectors)
        if task_bar is not None:
            task_bar.update(1)
    selected = {t: tuple(sel.ids) for t, sel in selections.items()}

    at_k = (f"recall@{k}", f"complete@{k}")
    names = tuple(dict.fromkeys((*BASE_METRICS, *at_k, *settings.metrics)))
    task_names = tuple(dict.fromkeys((*TASK_METRICS, *at_k, *settings.metrics)))
    rows_rank = per_task(run, gold, names)
    rows_set = set_metrics_per_task(selected, gold)
    tokens = {t: tokens_of(sel, library) for t, sel in selections.items()}

    # beside every ranking metric its tie-aware value, and how many tasks a tie across each
    # cut-off touches (primsel.eval.metrics, "Ties")
    rows_expected = per_task(run, gold, names, ties="expected")
    ranking = Ranking(values={name: _mean(r[name] for r in rows_rank.values()) for name in names},
                      tie_aware={name: _mean(r[name] for r in rows_expected.values()) for name in names},
                      tied_tasks={cut: float(tied_tasks(run, gold, cut)) for cut in sorted({*REPORT_KS, k})})
    selection = SelectionFigures(n_tasks=len(tasks), selected=_mean(len(ids) for ids in selected.values()),
                                 closure_added=_mean(len(sel.added_by_closure) for sel in selections.values()),
                                 docs_tokens=_mean(tokens.values()), scores=set_metrics(selected, gold))
    # totals over the tasks: the LLM cost of the ranking this cell selects from
    selector_usage = SelectorUsage({name: math.fsum(float(u.get(name, 0.0)) for u in retrieval.usage.values())
                                    for name in SELECTOR_USAGE}) if retrieval.usage else None

    rows = []
    for t in tasks:
        metrics = {metric: rows_rank[t.id][metric] for metric in task_names}
        metrics.update({f"set_{m}": rows_set[t.id][m] for m in ("precision", "recall", "f1")})
        rows.append({"task_id": t.id, "fold": retrieval.folds.get(t.id), "selection": list(selected[t.id]),
                     "closure_added": list(selections[t.id].added_by_closure), "gold": sorted(t.gold),
                     "metrics": metrics, "docs_tokens": tokens[t.id]})
        if retrieval.usage:
            rows[-1]["selection_usage"] = dict(selections[t.id].usage)

    failures: list[dict[str, Any]] | None = None
    generated = _Generated()
    if settings.generator:
        gen_rows, failures, generated = _generate_and_execute(settings, dataset, library, selections,
                                                              retrieval.folds, workers, base_dir, task_bar,
                                                              _reselector(settings, library, name, requery, selectors))
        for row in rows:
            row.update(gen_rows[row["task_id"]])

    # a task whose LLM request (selection or generation) failed after its retries makes the cell
    # incomplete: it is written, and recomputed by the next run
    incomplete = set(retrieval_errors(retrieval))
    incomplete.update(row["task_id"] for row in rows if row.get("status") == "llm_error")
    answers = llm_answers(selector_usage, generated.generation, retrieval.cached)
    record = CellReport(
        ranking=ranking, selection=selection, selector_usage=selector_usage, generation=generated.generation,
        rounds=generated.rounds, aspera=generated.aspera,
        run=RunFacts(retrieval_seconds=retrieval.seconds, retrieval_cached=float(retrieval.cached),
                     llm_answers=answers[0] if answers else None, llm_answers_cached=answers[1] if answers else None,
                     incomplete_tasks=float(len(incomplete)), complete=not incomplete),
        learning=Learning(retriever=learns_from_tasks(settings.retriever),
                          selector=bool(selectors) and getattr(next(iter(selectors.values())), "learns_from_tasks", False),
                          generator=generated.fitted),
        frontier=frontier_figures(run, gold, _tokens_of_ranked(run, library)),
        retrieval_key=retrieval.key or retrieval_key(dataset.fingerprint, settings.retriever, settings.folds,
                                                     settings.seed, settings.depth))
    report = record.to_json()
    return CellOutcome(report=report, rows=rows, run=run, selections=selections, failures=failures, record=record)


def _selectors(spec: Any, retrieval: Retrieval, tasks: Sequence[Task], library: Library) -> dict[int, Any]:
    """The selector of every fold (fold -> selector), or {} for the fixed rules (no ``selector``).

    A selector that learns (``learns_from_tasks``) is fitted per fold on the rankings and gold
    sets of the other folds' tasks, never on the fold it selects for; one that does not is
    built once and serves every fold.
    """
    if spec is None:
        return {}
    folds = sorted({retrieval.folds.get(t.id, 0) for t in tasks})
    probe = registry.build(spec, "selector")
    if not getattr(probe, "learns_from_tasks", False):
        return dict.fromkeys(folds, probe)

    def fit(chooser: Any, fold: int) -> Any:
        return chooser.fit(library, [(retrieval.ranked[t.id], t.gold) for t in tasks
                                     if retrieval.folds.get(t.id, 0) != fold])

    return dict(fit_per_fold(probe, lambda: registry.build(spec, "selector"), folds, fit))


def _tokens_of_ranked(run: Run, library: Library) -> dict[str, int]:
    """Estimated documentation tokens (characters / 4 of the ``full`` text) of every ranked
    primitive of the library."""
    return {p: estimate_tokens(library[p].text("full")) for scores in run.values() for p in scores if p in library}


def llm_answers(selector: SelectorUsage | None, generation: Generation | None,
                ranking_cached: bool = False) -> tuple[float, float] | None:
    """How many LLM answers a cell's results rest on, and how many of them came from a cache.

    Answers are the LLM calls that did not end in an error: the LLM selector's (``calls -
    errors`` of ``selector``) and the generator's (``calls - errors`` of the generation's
    usage). Cached are the answers taken from the answer cache (the selector's ``cached``, the
    generator's ``cache_hits``), and every selector answer when the ranking itself was read from
    the retrieval cache (``ranking_cached``).

    Returns
    -------
    ``(answers, cached)``, or None when the cell used no LLM.
    """
    use = dict(selector.values) if selector is not None else {}
    gen = dict(generation.usage) if generation is not None else {}

    def total(values: Mapping[str, Any], key: str) -> float:
        return float(values.get(key, 0.0) or 0.0)

    from_selector = total(use, "calls") - total(use, "errors")
    from_generator = total(gen, "calls") - total(gen, "errors")
    if from_selector + from_generator <= 0:
        return None
    cached = (from_selector if ranking_cached else total(use, "cached")) + total(gen, "cache_hits")
    return from_selector + from_generator, cached


def learns_from_tasks(spec: Any) -> bool:
    """True when the retriever of ``spec`` learns from tasks (:class:`primsel.types.LearnsFromTasks`;
    it is built, unfitted, and asked).

    Raises
    ------
    Whatever :func:`primsel.registry.build` raises for a bad specification.
    """
    return isinstance(registry.build(spec, "retriever"), LearnsFromTasks)


def _generate_and_execute(settings: CellSettings, dataset: Dataset, library: Library,
                          selections: Mapping[str, Selection], folds: Mapping[str, int], workers: int | None,
                          base_dir: Path | None, task_bar: Any,
                          reselect: Callable[[Mapping[str, str]], Mapping[str, Selection]] | None = None
                          ) -> tuple[dict[str, dict], list[dict], _Generated]:
    """Generate a program per task (per fold when the generator learns from training folds),
    run them in the sandbox, give the failed ones their reflection rounds
    (:mod:`primsel.experiments.reflection`), attribute failures. Returns (row updates, failures,
    the generation's records)."""
    tasks = dataset.tasks
    programs, owners, generators = _generate_per_fold(generator_spec(settings.generator, base_dir), dataset,
                                                      library, selections, folds, task_bar)
    # only programs with status "ok" run; the others (truncated, llm_error, no_program) keep
    # their program status as the task's status
    advance = (lambda: task_bar.update(1)) if task_bar is not None else None
    rounds = None
    references: dict[str, Any] = {}
    with Sandbox(workers=workers, timeout=settings.timeout) as sandbox:
        results = execute_programs(sandbox, tasks, programs, advance)
        if settings.reflection.configured:
            rounds = run_rounds(settings.reflection, tasks, owners, selections, programs, results, sandbox,
                                library, timeout=settings.timeout, reselect=reselect, task_bar=task_bar)
            programs, results, selections = rounds.programs, rounds.results, rounds.selections
            references = rounds.references
        lenient = _import_lenient(sandbox, tasks, programs, results)
        # the reference program of every failed task, on the same initial state, for localisation
        reference_runs(sandbox, [t for t in tasks if t.id in results and not results[t.id].passed], references)

    rows: dict[str, dict] = {}
    failures = []
    for t in tasks:
        prog, res = programs[t.id], results.get(t.id)
        rows[t.id] = _program_row(prog, res, lenient.get(t.id))
        if rows[t.id]["status"] != "pass":
            rows[t.id]["attribution"] = attribute(t, selections[t.id], prog, res, library,
                                                  reference=references.get(t.id))
            failures.append(rows[t.id]["attribution"])
        if rounds is not None:
            entries = rounds.rounds[t.id]
            if rows[t.id]["attribution"] is not None:
                entries[-1]["category"] = rows[t.id]["attribution"]["category"]
            rows[t.id]["rounds"] = entries
            # the task's cost over its rounds; its last program's tokens are in its last round
            rows[t.id]["tokens"] = {part: sum(e["tokens"].get(part, 0) for e in entries)
                                    for part in ("prompt", "completion", "prompt_cached")}
    generation, round_records = _generation_report(settings, tasks, rows, failures, generators, rounds)
    return rows, failures, _Generated(generation=generation, rounds=round_records,
                                      aspera=_aspera_part(generators, tasks, selections, rows),
                                      fitted=any(isinstance(g, FitsOnTasks) for g in generators))


def _generate_per_fold(spec: Any, dataset: Dataset, library: Library, selections: Mapping[str, Selection],
                       folds: Mapping[str, int], task_bar: Any) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Round 1: a program for every task, by a generator fitted on the other folds when it
    learns from tasks (:func:`primsel.retrieval.cv.fit_per_fold`), else by one generator.
    Returns (task id -> program, task id -> the generator that wrote it, the generators)."""
    tasks = dataset.tasks
    docs = {t.id: [library[p] for p in selections[t.id].ids] for t in tasks}
    probe = registry.build(spec, "generator")
    groups: dict[int, list[Task]] = {}
    for t in tasks:
        groups.setdefault(folds.get(t.id, 0) if isinstance(probe, FitsOnTasks) else 0, []).append(t)

    def fit(gen: Any, fold: int) -> None:
        # the worked-example pool: the other folds of every task (of the whole dataset, for a subset)
        gen.fit(library, [t for t in dataset.all_tasks if folds.get(t.id, 0) != fold])

    per_fold = (fit_per_fold(probe, lambda: registry.build(spec, "generator"), sorted(groups), fit)
                if isinstance(probe, FitsOnTasks) else [(0, probe)])
    programs: dict[str, Any] = {}
    owners: dict[str, Any] = {}
    generators = []
    for fold, gen in per_fold:
        generators.append(gen)
        programs.update(_generate(gen, [(t, docs[t.id]) for t in groups[fold]]))
        owners.update((t.id, gen) for t in groups[fold])
        if task_bar is not None:
            task_bar.update(len(groups[fold]))
    return programs, owners, generators


def _program_row(prog: Any, res: Any, lenient: str | None) -> dict[str, Any]:
    """The generation part of a task's row in tasks.jsonl (``attribution`` None: the caller
    attributes a failure)."""
    too_long = res is None and prog.status == PROMPT_TOO_LONG
    usage = dict(prog.usage)
    return {
        "status": res.status if res is not None else ("error" if too_long else prog.status),
        "error_type": res.error_type if res is not None else ("PromptTooLong" if too_long else None),
        "message": res.message if res is not None else (prog.raw if prog.status in ("llm_error", PROMPT_TOO_LONG)
                                                        else None),
        "program_status": prog.status, "program": prog.code,
        "tokens": {"prompt": usage.get("prompt_tokens", 0), "completion": usage.get("completion_tokens", 0),
                   "prompt_cached": usage.get("prompt_tokens_cached", 0)},
        "generation_seconds": usage.get("seconds", 0.0), "seconds": res.seconds if res is not None else 0.0,
        "called_primitives": list(res.called_primitives) if res is not None else [], "attribution": None,
        # how the program was taken from the answer (primsel.generation.extract)
        "extraction": prog.extraction.get("mode"), "dropped_lines": list(prog.extraction.get("dropped_lines", ())),
        "parse_failure": prog.extraction.get("parse_failure"), "import_lenient_status": lenient,
    }


def _generation_report(settings: CellSettings, tasks: Sequence[Task], rows: Mapping[str, Mapping[str, Any]],
                       failures: Sequence[Mapping[str, Any]], generators: Sequence[Any],
                       rounds: Any) -> tuple[Generation, tuple[Round, ...]]:
    """The generation part of report.json: success, the share of every status, failures per
    category, the generators' usage summed; and the per-round figures with reflection rounds."""
    status = {t.id: rows[t.id]["status"] for t in tasks}
    usage_total: dict[str, float] = {}
    for gen in generators:
        if isinstance(gen, SummarisesUsage):
            for key, value in gen.usage_summary().items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    usage_total[key] = usage_total.get(key, 0.0) + float(value)
    generation = Generation(
        success=_mean(1.0 if status[t.id] == "pass" else 0.0 for t in tasks),
        status={name: _mean(1.0 if status[t.id] == name else 0.0 for t in tasks) for name in TASK_STATUSES},
        failures={category: float(count) for category, count in count_categories(failures).items()},
        usage=usage_total, cache_hits=usage_total.get("cache_hits"))
    figures = round_figures(settings.reflection, rounds.rounds, rounds.usage) if rounds is not None else ()
    return generation, figures


def _reselector(settings: CellSettings, library: Library, name: str,
                requery: Callable[[Mapping[str, str]], Retrieval] | None, selectors: Mapping[int, Any]
                ) -> Callable[[Mapping[str, str]], dict[str, Selection]] | None:
    """``{task id: text}`` -> the selections of those tasks ranked with those texts (reflection's
    ``reselect``) by the cell's selector of each task's fold, or None without ``requery``."""
    if requery is None:
        return None

    def reselect(texts: Mapping[str, str]) -> dict[str, Selection]:
        retrieval = requery(texts)
        return {task_id: _selection(settings, retrieval, library, task_id, name, selectors) for task_id in texts}

    return reselect


def _selection(settings: CellSettings, retrieval: Retrieval, library: Library, task_id: str, name: str,
               selectors: Mapping[int, Any]) -> Selection:
    """The selection of one task from a retrieval: by the selector of the task's fold
    (:func:`_selectors`) when the cell has one, else by the cell's k, threshold and closure."""
    chooser = selectors.get(retrieval.folds.get(task_id, 0)) if selectors else None
    choose = select if chooser is None else chooser.select
    return choose(retrieval.ranked[task_id], library, k=settings.k, threshold=settings.threshold,
                  closure=settings.closure, task_id=task_id, retriever=name, usage=retrieval.usage.get(task_id))


def _import_lenient(sandbox: Any, tasks: Sequence[Task], programs: Mapping[str, Any],
                    results: Mapping[str, Any]) -> dict[str, str]:
    """ASPERA's import-lenient re-run: every task that failed with ModuleNotFoundError runs again
    as its program without imports of library modules (``program_no_imports``, when there is
    one). Returns task id -> status of that run."""
    jobs = []
    for t in tasks:
        res, program = results.get(t.id), programs[t.id]
        variant = program.extraction.get("program_no_imports")
        if res is not None and res.status == "error" and res.error_type == "ModuleNotFoundError" and variant:
            jobs.append((t, variant, program.entry_point))
    return {r.task_id: r.status for r in sandbox.execute_many(jobs)} if jobs else {}


def _aspera_part(generators: Sequence[Any], tasks: Sequence[Task], selections: Mapping[str, Any],
                 rows: Mapping[str, Mapping[str, Any]]) -> Aspera:
    """The generator's extraction mode and ASPERA's figures (primsel.eval.aspera), for report.json."""
    figure_rows = [{**rows[t.id], "selection": list(selections[t.id].ids), "gold": sorted(t.gold)} for t in tasks]
    return Aspera(extraction=getattr(generators[0], "extraction", None) if generators else None,
                  figures=aspera_figures(figure_rows))


def _generate(gen: Any, items: Sequence[tuple[Task, Sequence[Any]]]) -> dict[str, Any]:
    if isinstance(gen, GeneratesMany):
        programs = gen.generate_many(items)
    else:
        programs = [gen.generate(task, docs) for task, docs in items]
    return {task.id: prog for (task, _), prog in zip(items, programs)}


# ---------------------------------------------------------------------------------------------
# A cell of an experiment: computed and written
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class CellContext:
    """What every cell of a run shares."""

    experiment: str
    library: Library
    dataset: Dataset
    store: RetrievalStore
    workers: int | None = None
    progress: bool = True
    versions: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    base_dir: Path | None = None


def stage_messages(bar: Any) -> Any:
    """A ``progress(stage, i, n)`` callback (:func:`primsel.retrieval.cv.cross_validated_run`)
    that shows the retrieval stage (``"fitting fold 2/5"``) as the description of a tqdm bar;
    None without a bar."""
    if bar is None:
        return None

    def show(stage: str, i: int, n: int) -> None:
        bar.set_description_str(f"  {stage}" + (f" fold {i}/{n}" if n > 1 else ""), refresh=True)

    return show


def run_cell(cell: Cell, ctx: CellContext, directory: Path, task_bar: Any = None,
             sources: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Compute one cell (its retrieval from ``ctx.store``, then :func:`compute_cell`) and write
    its files (:func:`write_cell`, report.json last).

    ``sources`` (default: computed, :meth:`CellSettings.sources`) are the digests of the
    component sources recorded in config.json, by which a later run tells a stale cell.

    Returns
    -------
    The cell's report (metric name -> value, and ``complete``: False when a task's LLM request
    failed after its retries; see the module docstring).

    Raises
    ------
    Whatever a retriever, the selector, a generator or the sandbox raises; the cell's
    report.json is then not written, so a re-run recomputes it.
    """
    start = time.perf_counter()
    s = cell.settings
    retrieval = ctx.store.get(s.retriever, s.folds, s.seed, s.depth, progress=stage_messages(task_bar))
    if task_bar is not None:
        # the task steps start now: the time spent fitting must not feed their ETA
        task_bar.set_description_str("  tasks", refresh=False)
        task_bar.reset(total=task_bar.total)
    outcome = compute_cell(s, retrieval, ctx.dataset, ctx.library, name=cell.id, workers=ctx.workers,
                           base_dir=ctx.base_dir, task_bar=task_bar,
                           requery=lambda queries: ctx.store.rerank(s.retriever, s.folds, s.seed, queries))
    return write_cell(cell, ctx, directory, outcome, time.perf_counter() - start, sources)


_WINDOWS: dict[tuple[str, str], dict[str, int]] = {}  # (model, digest of the texts) -> counts


def embedding_windows(retriever: Any, library: Library) -> dict[str, dict[str, Any]]:
    """How every ``dense`` retriever in a specification (itself or a member, :func:`primsel.spec.walk`)
    embeds the library's documents: :func:`primsel.retrieval.encoders.window_counts` of its
    document texts (``doc_prefix`` + the ``view`` of each primitive), with its ``model``.

    Returns
    -------
    ``{key of the dense specification ("" for the specification itself, "members[3]"): {"model":
    name, "window_tokens", "texts", "longest_tokens", "texts_windowed", "texts_cut"}}``; empty
    when the specification holds no ``dense``, or its model or tokenizer cannot be loaded (the
    retrieval itself then says why).
    """
    out: dict[str, dict[str, Any]] = {}
    for key, node in specs.walk(retriever):
        if specs.type_name(node) != "dense":
            continue
        params = node if isinstance(node, Mapping) else {}
        model = params.get("model", DEFAULT_MODEL)
        view, prefix = params.get("view", "full"), params.get("doc_prefix", "")
        try:
            texts = [prefix + p.text(view) for p in library.values()]
        except (ValueError, TypeError):  # a view or prefix the retriever itself will refuse
            continue
        memo = (model, hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest())
        if memo not in _WINDOWS:
            try:
                _WINDOWS[memo] = window_counts(model, texts)
            except EncoderLoadError:
                continue
        out[key] = {"model": model, **_WINDOWS[memo]}
    return out


def write_cell(cell: Cell, ctx: CellContext, directory: Path, outcome: CellOutcome, seconds: float,
               sources: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Write a computed cell's files (config.json, run.trec, tasks.jsonl, failures.jsonl with a
    generator, then report.json with ``seconds``, the cell's wall time). Every backend of the
    runner writes through here, so their files are the same. ``sources``: as :func:`run_cell`.

    Returns
    -------
    The cell's report.
    """
    s = cell.settings
    record = outcome.record if outcome.record is not None else CellReport.from_json(outcome.report)
    report = dataclasses.replace(record, run=dataclasses.replace(record.run, seconds=seconds)).to_json()
    directory.mkdir(parents=True, exist_ok=True)
    # an earlier (incomplete) report.json must not outlive a run killed before the new one
    (directory / "report.json").unlink(missing_ok=True)
    config = CellConfig(
        id=cell.id, label=cell.label, experiment=ctx.experiment, settings=s.to_json(), data=ctx.dataset.summary(),
        effective_folds=ctx.store.effective_folds(s.folds), generated=bool(s.generator),
        extraction=report.get("extraction") if s.generator else None,
        embedding=embedding_windows(s.retriever, ctx.library),
        library={"n_primitives": len(ctx.library), "fingerprint": ctx.store.library_fingerprint()},
        sources=sources if sources is not None else s.sources(), versions=ctx.versions)
    write_atomic(directory / "config.json", dumps_json(config.to_json()))
    write_atomic(directory / "run.trec", format_run(outcome.run, cell.id))
    write_atomic(directory / "tasks.jsonl", dumps_jsonl(outcome.rows))
    if outcome.failures is not None:
        write_atomic(directory / "failures.jsonl", dumps_jsonl(outcome.failures))
    write_atomic(directory / "report.json", dumps_json(report))
    return report
