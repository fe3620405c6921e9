"""One cell of ``primsel run`` or ``primsel retrieve``: select from a ranking (a ``selector``
learning is fitted per fold), with a generator generate and execute a program per task, score, and
write config.json, run.trec, tasks.jsonl, failures.jsonl (with a generator) and report.json, last. A
cell is incomplete (``"complete": false``) when an LLM request it depends on failed after its retries.
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
from primsel.eval.attribution import attribute, count_categories
from primsel.eval.execution import execute_programs, lenient_statuses, reference_runs
from primsel.eval.frontier import frontier
from primsel.eval.metrics import per_task, set_metrics, set_metrics_per_task, tied_tasks_at
from primsel.experiments.agents import aspera_selection_names, is_aspera
from primsel.experiments.config import Cell, generator_spec
from primsel.experiments.dataset import Dataset
from primsel.experiments.reflection import round_figures, run_rounds
from primsel.experiments.results import (BASE_METRICS, REPORT_KS, SELECTOR_USAGE, TASK_METRICS, TASK_STATUSES,
                                        Aspera, CellConfig, CellReport, Generation, Learning, Ranking, RunFacts,
                                        FrontierFigures, SelectionFigures, SelectorUsage)
from primsel.experiments.settings import CellSettings
from primsel.retrieval.store import Retrieval, RetrievalStore, retrieval_errors, retrieval_key
from primsel.files import dumps_json, dumps_jsonl, write_atomic
from primsel.generation.generators import PROMPT_TOO_LONG
from primsel.library import Library
from primsel.retrieval.cv import fit_per_fold
from primsel.retrieval.selector import estimate_tokens, select
from primsel.retrieval.trec import format_run
from primsel.retrieval.windows import embedding_windows
from primsel.simulator.sandbox import Sandbox
from primsel.types import FitsOnTasks, LearnsFromTasks, GeneratesMany, Run, Selection, SummarisesUsage, Task

__all__ = ["TASK_STATUSES", "CellContext", "CellOutcome", "compute", "compute_cell", "llm_answers",
           "run_cell", "write_cell"]


@dataclasses.dataclass(frozen=True)
class CellOutcome:
    """What :func:`compute_cell` computed: ``record`` (report.json without ``seconds``), ``rows`` (tasks.jsonl, in
    task order), ``run``, ``selections`` (task id -> Selection) and, with a generator, ``failures``."""

    record: CellReport
    rows: list[dict[str, Any]]
    run: Run
    selections: dict[str, Selection]
    failures: list[dict[str, Any]] | None = None

    @property
    def report(self) -> dict[str, Any]:
        """The record as report.json holds it."""
        return self.record.to_json()


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else 0.0


def compute_cell(settings: CellSettings, retrieval: Retrieval, dataset: Dataset, library: Library, *, name: str = "",
                 workers: int | None = None, base_dir: Path | None = None, task_bar: Any = None,
                 requery: Callable[[Mapping[str, str]], Retrieval] | None = None) -> CellOutcome:
    """Select, (generate, execute,) and score one cell over every task of ``dataset``.

    ``name``: the selections' retriever; ``workers``: sandbox processes; ``base_dir``: resolves a relative
    generator ``programs`` path; ``task_bar``: a tqdm bar advanced per task and step; ``requery``:
    :meth:`RetrievalStore.rerank` of the cell's retriever, for reflection's ``reselect``.

    Returns
    -------
    :class:`CellOutcome`.

    Raises
    ------
    ValueError : reflection's ``reselect`` without ``requery``.
    Whatever the selector, a generator or the sandbox raises.
    """
    k, tasks = settings.k, dataset.tasks
    gold = {t.id: t.gold for t in tasks}
    run = retrieval.run()
    selectors = _selectors(settings.selector, retrieval, tasks, library)
    selections = _select(settings, retrieval, library, [t.id for t in tasks], name, selectors, task_bar)
    selected = {t: tuple(sel.ids) for t, sel in selections.items()}

    at_k = (f"recall@{k}", f"complete@{k}")
    names = tuple(dict.fromkeys((*BASE_METRICS, *at_k, *settings.metrics)))
    task_names = tuple(dict.fromkeys((*TASK_METRICS, *at_k, *settings.metrics)))
    rows_rank = per_task(run, gold, names)
    rows_set = set_metrics_per_task(selected, gold)
    doc_tokens = {p: estimate_tokens(doc.text("full")) for p, doc in library.items()}  # as tokens_of counts
    tokens = {t: sum(doc_tokens[p] for p in sel.ids) for t, sel in selections.items()}
    rows_expected, ties = per_task(run, gold, names, ties="expected"), tied_tasks_at(run, gold, sorted({*REPORT_KS, k}))
    ranking = Ranking(values={n: _mean(r[n] for r in rows_rank.values()) for n in names},
                      tie_aware={n: _mean(r[n] for r in rows_expected.values()) for n in names},
                      tied_tasks={cut: float(n) for cut, n in ties.items()})
    selection = SelectionFigures(n_tasks=len(tasks), selected=_mean(len(ids) for ids in selected.values()),
                                 closure_added=_mean(len(sel.added_by_closure) for sel in selections.values()),
                                 docs_tokens=_mean(tokens.values()), scores=set_metrics(selected, gold))
    selector_usage = SelectorUsage({n: math.fsum(float(u.get(n, 0.0)) for u in retrieval.usage.values())
                                    for n in SELECTOR_USAGE}) if retrieval.usage else None
    rows = [{"task_id": t.id, "fold": retrieval.folds.get(t.id), "selection": list(selected[t.id]),
             "closure_added": list(selections[t.id].added_by_closure), "gold": sorted(t.gold),
             "metrics": {**{metric: rows_rank[t.id][metric] for metric in task_names},
                         **{f"set_{m}": rows_set[t.id][m] for m in ("precision", "recall", "f1")}},
             "docs_tokens": tokens[t.id],
             **({"selection_usage": dict(selections[t.id].usage)} if retrieval.usage else {})} for t in tasks]

    failures, generated, fitted = None, {}, False
    if settings.generator:
        reselect = None if requery is None else (
            lambda texts: _select(settings, requery(texts), library, list(texts), name, selectors))
        failures, generated, fitted = _generate_and_execute(
            settings, dataset, library, selections, retrieval.folds, workers, base_dir, task_bar, reselect, rows)

    incomplete = {*retrieval_errors(retrieval), *(row["task_id"] for row in rows if row.get("status") == "llm_error")}
    answers = llm_answers(selector_usage, generated.get("generation"), retrieval.cached)
    record = CellReport(
        ranking=ranking, selection=selection, selector_usage=selector_usage, **generated,
        run=RunFacts(retrieval_seconds=retrieval.seconds, retrieval_cached=float(retrieval.cached),
                     llm_answers=answers[0] if answers else None, llm_answers_cached=answers[1] if answers else None,
                     incomplete_tasks=float(len(incomplete)), complete=not incomplete),
        learning=Learning(
            retriever=isinstance(registry.build(settings.retriever, "retriever"), LearnsFromTasks),
            selector=bool(selectors) and getattr(next(iter(selectors.values())), "learns_from_tasks", False),
            generator=fitted),
        frontier=FrontierFigures(*curve) if (curve := frontier(run, gold, doc_tokens)) else None,
        retrieval_key=retrieval.key or retrieval_key(dataset.fingerprint, settings.retriever, settings.folds,
                                                     settings.seed, settings.depth))
    return CellOutcome(record, rows, run, selections, failures)


def _selectors(spec: Any, retrieval: Retrieval, tasks: Sequence[Task], library: Library) -> dict[int, Any]:
    """Fold -> selector ({} without ``selector``); one that learns is fitted on the other folds."""
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


def _select(settings: CellSettings, retrieval: Retrieval, library: Library, task_ids: Iterable[str], name: str,
            selectors: Mapping[int, Any], task_bar: Any = None) -> dict[str, Selection]:
    """Task id -> its selection, by the selector of its fold, else by the cell's k, threshold, closure."""
    out = {}
    for task_id in task_ids:
        chooser = selectors.get(retrieval.folds.get(task_id, 0))
        out[task_id] = (select if chooser is None else chooser.select)(
            retrieval.ranked[task_id], library, k=settings.k, threshold=settings.threshold,
            closure=settings.closure, task_id=task_id, retriever=name, usage=retrieval.usage.get(task_id))
        if task_bar is not None:
            task_bar.update(1)
    return out


def llm_answers(selector: SelectorUsage | None, generation: Generation | None,
                ranking_cached: bool = False) -> tuple[float, float] | None:
    """How many LLM answers (calls not ending in an error) a cell rests on, selector's and
    generator's, and how many came from a cache (all the selector's when ``ranking_cached``).

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


def _generate_and_execute(settings: CellSettings, dataset: Dataset, library: Library,
                          selections: Mapping[str, Selection], folds: Mapping[str, int], workers: int | None,
                          base_dir: Path | None, task_bar: Any,
                          reselect: Callable[[Mapping[str, str]], Mapping[str, Selection]] | None,
                          rows: Sequence[dict[str, Any]]) -> tuple[list[dict], dict[str, Any], bool]:
    """Generate, execute, reflect and attribute, adding to ``rows`` (tasks.jsonl, in task order): (failures,
    the ``generation``, ``rounds`` and ``aspera`` of the record, whether a generator was fitted)."""
    tasks = dataset.tasks
    programs, owners, generators = _generate_per_fold(generator_spec(settings.generator, base_dir), dataset,
                                                      library, selections, folds, task_bar)
    advance = (lambda: task_bar.update(1)) if task_bar is not None else None
    rounds, references = None, {}
    with Sandbox(workers=workers, timeout=settings.timeout) as sandbox:
        results = execute_programs(sandbox, tasks, programs, advance)
        if settings.reflection.configured:
            rounds = run_rounds(settings.reflection, tasks, owners, selections, programs, results, sandbox,
                                library, timeout=settings.timeout, reselect=reselect, task_bar=task_bar)
            programs, results, selections = rounds.programs, rounds.results, rounds.selections
            references = rounds.references
        lenient = lenient_statuses(sandbox, tasks, programs, results)
        reference_runs(sandbox, [t for t in tasks if t.id in results and not results[t.id].passed], references)

    failures: list[dict] = []
    for t, row in zip(tasks, rows):
        prog, res = programs[t.id], results.get(t.id)
        row.update(_program_row(prog, res, lenient.get(t.id)))
        if row["status"] != "pass":
            row["attribution"] = attribute(t, selections[t.id], prog, res, library, reference=references.get(t.id))
            failures.append(row["attribution"])
        if rounds is not None:
            entries = rounds.rounds[t.id]
            if row["attribution"] is not None:
                entries[-1]["category"] = row["attribution"]["category"]
            row["rounds"] = entries
            row["tokens"] = {part: sum(e["tokens"].get(part, 0) for e in entries)
                             for part in ("prompt", "completion", "prompt_cached")}
    usage: dict[str, float] = {}
    for key, value in (kv for g in generators if isinstance(g, SummarisesUsage) for kv in g.usage_summary().items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            usage[key] = usage.get(key, 0.0) + float(value)
    status = [row["status"] for row in rows]
    generation = Generation(success=_mean(1.0 if s == "pass" else 0.0 for s in status),
                            status={n: _mean(1.0 if s == n else 0.0 for s in status) for n in TASK_STATUSES},
                            failures={c: float(count) for c, count in count_categories(failures).items()},
                            usage=usage, cache_hits=usage.get("cache_hits"))
    if is_aspera(settings.generator):
        names = aspera_selection_names(settings.generator, tasks, selections, library)
        for t, row in zip(tasks, rows):
            row.update(names[t.id])
    # the rows hold the first selection; reflection's reselect may have changed it since
    figure_rows = [{**row, "selection": list(selections[t.id].ids)} for t, row in zip(tasks, rows)]
    return failures, {
        "generation": generation,
        "rounds": round_figures(settings.reflection, rounds.rounds, rounds.usage) if rounds is not None else (),
        "aspera": Aspera(extraction=getattr(generators[0], "extraction", None) if generators else None,
                         figures=aspera_figures(figure_rows))}, any(isinstance(g, FitsOnTasks) for g in generators)


def _generate_per_fold(spec: Any, dataset: Dataset, library: Library, selections: Mapping[str, Selection],
                       folds: Mapping[str, int], task_bar: Any) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """Round 1 by a generator per fold (fitted on the other folds) when it learns, else by one:
    (task id -> program, task id -> its generator, the generators)."""
    probe = registry.build(spec, "generator")
    learns = isinstance(probe, FitsOnTasks)
    groups: dict[int, list[Task]] = {}
    for t in dataset.tasks:
        groups.setdefault(folds.get(t.id, 0) if learns else 0, []).append(t)

    def fit(gen: Any, fold: int) -> None:
        # the worked-example pool: the other folds of every task (of the whole dataset, for a subset)
        gen.fit(library, [t for t in dataset.all_tasks if folds.get(t.id, 0) != fold])

    per_fold = fit_per_fold(probe, lambda: registry.build(spec, "generator"), sorted(groups), fit) if learns \
        else [(0, probe)]
    programs, owners, generators = {}, {}, []
    for fold, gen in per_fold:
        generators.append(gen)
        items = [(t, [library[p] for p in selections[t.id].ids]) for t in groups[fold]]
        made = gen.generate_many(items) if isinstance(gen, GeneratesMany) else [gen.generate(*i) for i in items]
        programs.update((t.id, prog) for (t, _), prog in zip(items, made))
        owners.update((t.id, gen) for t in groups[fold])
        if task_bar is not None:
            task_bar.update(len(groups[fold]))
    return programs, owners, generators


def _program_row(prog: Any, res: Any, lenient: str | None) -> dict[str, Any]:
    """The generation part of a task's row in tasks.jsonl (``attribution`` None)."""
    too_long = res is None and prog.status == PROMPT_TOO_LONG
    usage, extraction = dict(prog.usage), prog.extraction
    return {"status": res.status if res is not None else ("error" if too_long else prog.status),
            "error_type": res.error_type if res is not None else ("PromptTooLong" if too_long else None),
            "message": res.message if res is not None else (prog.raw if prog.status in ("llm_error", PROMPT_TOO_LONG)
                                                            else None),
            "program_status": prog.status, "program": prog.code,
            "tokens": {"prompt": usage.get("prompt_tokens", 0), "completion": usage.get("completion_tokens", 0),
                       "prompt_cached": usage.get("prompt_tokens_cached", 0)},
            "generation_seconds": usage.get("seconds", 0.0), "seconds": res.seconds if res is not None else 0.0,
            "called_primitives": list(res.called_primitives) if res is not None else [], "attribution": None,
            "extraction": extraction.get("mode"), "dropped_lines": list(extraction.get("dropped_lines", ())),
            "parse_failure": extraction.get("parse_failure"), "import_lenient_status": lenient,
            "prompt_digest": prog.prompt_digest}


@dataclasses.dataclass
class CellContext:
    """What every cell of a run shares."""

    experiment: str
    library: Library
    dataset: Dataset
    store: RetrievalStore
    workers: int | None = None
    versions: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    base_dir: Path | None = None


def run_cell(cell: Cell, ctx: CellContext, directory: Path, task_bar: Any = None,
             sources: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Compute one cell (its retrieval from ``ctx.store``, then :func:`compute_cell`) and write its files
    (:func:`write_cell`, ``sources`` as there).

    Returns
    -------
    The cell's report (metric name -> value, and ``complete``). Whatever a component raises propagates,
    report.json unwritten: a re-run recomputes the cell.
    """
    start = time.perf_counter()
    s = cell.settings
    show = None if task_bar is None else lambda stage, i, n: task_bar.set_description_str(
        f"  {stage}" + (f" fold {i}/{n}" if n > 1 else ""), refresh=True)
    retrieval = ctx.store.get(s.retriever, s.folds, s.seed, s.depth, progress=show)
    if task_bar is not None:
        # the task steps start now: the time spent fitting must not feed their ETA
        task_bar.set_description_str("  tasks", refresh=False)
        task_bar.reset(total=task_bar.total)
    return write_cell(cell, ctx, directory, compute(cell, ctx, retrieval, task_bar), time.perf_counter() - start,
                      sources)


def compute(cell: Cell, ctx: CellContext, retrieval: Retrieval, task_bar: Any = None) -> CellOutcome:
    """:func:`compute_cell` of a cell of a run, from its retrieval; every backend computes through here."""
    s = cell.settings
    return compute_cell(s, retrieval, ctx.dataset, ctx.library, name=cell.id, workers=ctx.workers,
                        base_dir=ctx.base_dir, task_bar=task_bar,
                        requery=lambda queries: ctx.store.rerank(s.retriever, s.folds, s.seed, queries))


def write_cell(cell: Cell, ctx: CellContext, directory: Path, outcome: CellOutcome, seconds: float,
               sources: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
    """Write a computed cell's files, report.json (with ``seconds``, the wall time) last; every backend writes
    through here. ``sources``: the source digests config.json records (default: :meth:`CellSettings.sources`).

    Returns
    -------
    The cell's report.
    """
    s = cell.settings
    record = outcome.record
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
