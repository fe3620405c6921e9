"""Run an experiment grid: retrieve, select, (generate, execute,) score and write every cell.

Layout of the outputs (DESIGN.md, Interfaces, "Experiments")::

    <out>/<name>/experiment.json          the cells of the current declaration, in grid order
    <out>/<name>/<cell_id>/config.json    resolved settings, dataset and library fingerprints, versions
    <out>/<name>/<cell_id>/run.trec       the whole library ranked for every task
    <out>/<name>/<cell_id>/tasks.jsonl    one row per task (with an LLM selector, its per-task
                                          ``selection_usage``)
    <out>/<name>/<cell_id>/failures.jsonl with a generator: one attribution row per task that did
                                          not pass (primsel.eval.attribution.attribute)
    <out>/<name>/<cell_id>/report.json    metric name -> value, plus ``complete`` (true/false);
                                          written last, atomically

A cell whose ``report.json`` exists and says ``"complete": true`` is finished and skipped on a
re-run. Any other cell is recomputed, so a killed run loses at most the cell in flight. A cell is
incomplete (``"complete": false``, ``incomplete_tasks`` > 0) when an LLM request it depends on
failed after its retries: a task with status ``llm_error``, or a task whose LLM selection had a
failed module request. Its files are written (to be inspected) but the next run recomputes it;
the LLM answer cache makes the requests that succeeded free. Every file is written to a
temporary name and renamed; JSON text keeps any string (lone surrogates become ``\\udXXXX``
escapes, read back as the same string).

Retrieval (the full ranking of every task and the fold of every task) depends only on the
retriever specification, the dataset, the library, ``folds`` and ``seed``: it is computed once per
process for all cells that share them (cells that differ in ``k``, ``closure`` or the
generator), and cached on disk under ``$PRIMSEL_CACHE_DIR/experiments/retrieval`` (default
``~/.cache/primsel``). The cache key also holds a hash of the retrieval package's source and of
the source file of every class the retriever specification names (members of a hybrid too, and
their base classes), so an edit of a built-in or a plug-in retriever invalidates it. A
retrieval with failed LLM requests is not cached on disk.

A generated program whose status is not ``ok`` (``truncated``, ``llm_error``, ``no_program``) is
not executed: the task's status is the program's status (:data:`TASK_STATUSES`), and its
failure is attributed without an execution result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from primsel import registry
from primsel.experiments.config import Cell, ExperimentConfig, canonical_json, expand, generator_spec
from primsel.types import STATUSES, Run, Task, to_json

#: Ranking metrics every cell reports (plus ``recall@k`` and ``complete@k`` of the cell's k).
CURVE_KS = tuple(range(1, 21))
REPORT_KS = (5, 10, 15, 20)
BASE_METRICS = (
    *(f"recall@{k}" for k in CURVE_KS),
    *(f"complete@{k}" for k in REPORT_KS),
    "ndcg@10",
    "mrr",
)
#: Per-task ranking metrics kept in tasks.jsonl (the cell's ``recall@k`` / ``complete@k`` too).
TASK_METRICS = (*(f"recall@{k}" for k in REPORT_KS), *(f"complete@{k}" for k in REPORT_KS), "ndcg@10", "mrr")
#: Statuses of a task in a cell with a generator: the execution statuses, plus the statuses of a
#: program that was not executed (it is not ``ok``; ``no_program`` is in both).
TASK_STATUSES = tuple(dict.fromkeys((*STATUSES, "truncated", "llm_error")))
#: Selector usage entries summed into report.json as ``selector_<name>`` (``cached`` as
#: ``selector_cache_hits``).
SELECTOR_USAGE = ("prompt_tokens", "completion_tokens", "seconds", "calls", "errors", "unknown_names", "cached")
#: Packages whose versions are recorded in every config.json.
VERSIONED_PACKAGES = (
    "primsel", "numpy", "scipy", "scikit-learn", "ranx", "rank-bm25", "faiss-cpu", "torch",
    "sentence-transformers", "openai",
)


# ---------------------------------------------------------------------------------------------
# Small I/O helpers
# ---------------------------------------------------------------------------------------------
def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename,
    so readers never see a partial file.

    The text is encoded as UTF-8; a lone surrogate (which UTF-8 cannot encode, e.g. from a
    program's exception message) is written as a ``\\udXXXX`` escape, so JSON text reads back as
    the same string. On any failure the temporary file is removed and the error raised.

    Raises
    ------
    OSError : the directory cannot be created or the file written.
    """
    data = text.encode("utf-8", errors="backslashreplace")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _json(obj: Any) -> str:
    return json.dumps(to_json(obj), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(to_json(r), ensure_ascii=False) + "\n" for r in rows)


def package_versions() -> dict[str, str | None]:
    """Installed versions of :data:`VERSIONED_PACKAGES` (None when absent) and of Python."""
    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def is_finished(directory: Path) -> bool:
    """True when the cell directory holds a ``report.json`` that does not say
    ``"complete": false`` (reports written before that key existed count as complete)."""
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and report.get("complete", True) is not False


class OutputError(ValueError):
    """The output directory cannot be created or written (the message names it)."""


def cache_dir() -> Path:
    """``$PRIMSEL_CACHE_DIR`` or ``~/.cache/primsel``."""
    return Path(os.environ.get("PRIMSEL_CACHE_DIR") or Path.home() / ".cache" / "primsel")


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Dataset:
    """Tasks of an experiment (gold filled) and how to name them without a path.

    Parameters
    ----------
    tasks : the tasks, gold primitives filled.
    source : ``"asper-bench"``, ``"builtin"`` or the tasks' ``source`` otherwise.
    fingerprint : ``"<source>/<n tasks>/<sha256 prefix of the task contents>"``.
    """

    tasks: tuple[Task, ...]
    source: str
    fingerprint: str


def dataset_fingerprint(tasks: Sequence[Task]) -> str:
    """``"<source>/<n>/<hash>"``: the hash covers every task's id, query, programs and gold set,
    so a cell id changes when (and only when) the tasks it runs on change."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(canonical_json([t.id, t.query, t.program, list(t.setup_programs),
                                 list(t.evaluation_programs), sorted(t.gold)]).encode("utf-8"))
    sources = sorted({t.source or "custom" for t in tasks}) or ["empty"]
    return f"{'+'.join(sources)}/{len(tasks)}/{h.hexdigest()[:12]}"


def make_dataset(tasks: Sequence[Task]) -> Dataset:
    """A :class:`Dataset` of tasks whose gold sets are already filled.

    Raises
    ------
    primsel.datasets.DatasetError : no tasks, duplicate task ids, or a task without gold
        primitives (ranking metrics are undefined for it).
    """
    from primsel.datasets import DatasetError

    if not tasks:
        raise DatasetError("no tasks to run")
    if len({t.id for t in tasks}) != len(tasks):
        raise DatasetError("duplicate task ids")
    empty = [t.id for t in tasks if not t.gold]
    if empty:
        raise DatasetError(f"tasks without gold primitives (their reference programs use no library "
                           f"primitive): {', '.join(empty[:10])}")
    fp = dataset_fingerprint(tasks)
    return Dataset(tasks=tuple(tasks), source=fp.split("/", 1)[0], fingerprint=fp)


def load_dataset(path: str | os.PathLike[str] | None, library: Mapping[str, Any],
                 log: TextIO | None = None) -> Dataset:
    """Load the tasks of ``path`` (else ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks, which
    is said on ``log``) and fill their gold primitives.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed archive, a reference program that does
        not parse, or a task whose reference program uses no library primitive (ranking
        metrics are undefined for it).
    """
    from primsel.datasets import DatasetError, load_tasks, resolve_dataset
    from primsel.library import with_gold

    archive = resolve_dataset(path)
    if archive is None and log is not None:
        print("primsel run: no Asper-Bench archive (no 'data' key, --data or $PRIMSEL_ASPER_BENCH): "
              "running on the built-in tasks", file=log)
    try:
        tasks = with_gold(load_tasks(archive), library)
    except ValueError as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(str(exc)) from None
    return make_dataset(tasks)


# ---------------------------------------------------------------------------------------------
# Retrieval, shared between cells
# ---------------------------------------------------------------------------------------------
def _source_hash(package: str) -> str:
    import importlib

    module = importlib.import_module(package)
    h = hashlib.sha256()
    for path in sorted(Path(module.__file__).parent.rglob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _spec_names(spec: Any) -> list[str]:
    """Every class name a retriever specification uses: its ``type`` (or the name itself), and
    recursively those of nested tables and of ``members``."""
    if isinstance(spec, str):
        return [spec]
    if not isinstance(spec, Mapping):
        return []
    names = [spec["type"]] if isinstance(spec.get("type"), str) else []
    for key, value in spec.items():
        if key == "type":
            continue
        if isinstance(value, Mapping):
            names += _spec_names(value)
        elif key == "members" and isinstance(value, (list, tuple)):
            for member in value:
                names += _spec_names(member)
    return names


def spec_sources(spec: Any) -> dict[str, str]:
    """Content hashes of the source files defining the classes a retriever specification names.

    Each name is resolved with :func:`primsel.registry.resolve`; the files of the modules
    defining the class and its base classes (the standard library and ``builtins`` aside) are
    hashed, so editing a plug-in retriever (``"my_retrievers:KeywordRetriever"``) changes the
    result.

    Returns
    -------
    ``{name as written in the specification: sha256 prefix of those files}``; ``"?"`` for a
    class without a source file (defined interactively) or that cannot be resolved.
    """
    import sys as _sys
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    out: dict[str, str] = {}
    for name in dict.fromkeys(_spec_names(spec)):
        try:
            cls = registry.resolve(name, "retriever")
        except (ValueError, TypeError):
            out[name] = "?"
            continue
        h = hashlib.sha256()
        files: list[Path] = []
        for klass in getattr(cls, "__mro__", (cls,)):
            module = _sys.modules.get(getattr(klass, "__module__", "") or "")
            file = getattr(module, "__file__", None)
            if file is None:
                continue
            path = Path(file).resolve()
            if stdlib in path.parents and "site-packages" not in path.parts:
                continue
            if path not in files:
                files.append(path)
        if not files:
            out[name] = "?"
            continue
        for path in files:
            try:
                h.update(path.name.encode() + b"\0" + path.read_bytes())
            except OSError:
                h.update(path.name.encode() + b"\0?")
        out[name] = h.hexdigest()[:16]
    return out


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """The full ranking of every task by one retriever, and the fold of every task.

    Parameters
    ----------
    ranked : task id -> ((primitive id, score), ...), best first, the whole library.
    folds : task id -> fold (0-based).
    seconds : wall time of computing the retrieval, in seconds (for a disk-cache hit, the time
        the computing run took).
    cached : True when it was read from the disk cache.
    usage : task id -> LLM usage of the retriever for that task (retrievers with the
        :class:`primsel.types.ReportsUsage` ability, else empty); for a disk-cache hit, the
        usage of the computing run.
    """

    ranked: Mapping[str, tuple[tuple[str, float], ...]]
    folds: Mapping[str, int]
    seconds: float
    cached: bool = False
    usage: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    def run(self) -> Run:
        """The ranking as a :data:`primsel.types.Run`."""
        return {t: dict(r) for t, r in self.ranked.items()}


def retrieval_errors(retrieval: Retrieval) -> dict[str, int]:
    """Task id -> failed LLM requests of the retriever for that task (``usage`` ``errors``),
    for the tasks that had any."""
    out = {}
    for task_id, usage in retrieval.usage.items():
        errors = int(float(usage.get("errors", 0) or 0))
        if errors:
            out[task_id] = errors
    return out


class RetrievalStore:
    """Computes retrievals once per process and keeps them on disk (see the module docstring).

    Parameters
    ----------
    library : the library.
    dataset : the tasks.
    use_disk : read and write the disk cache.
    """

    def __init__(self, library: Any, dataset: Dataset, use_disk: bool = True) -> None:
        self.library = library
        self.dataset = dataset
        self.use_disk = use_disk
        self._memo: dict[str, Retrieval] = {}
        self._code = None

    def key(self, spec: Any, folds: int, seed: int) -> str:
        """Cache key of a retrieval (sha256 hex)."""
        if self._code is None:
            self._code = _source_hash("primsel.retrieval")
        fingerprint = self.library.fingerprint() if hasattr(self.library, "fingerprint") else \
            hashlib.sha256(canonical_json(to_json(list(self.library.values()))).encode()).hexdigest()
        payload = {"spec": spec, "folds": folds, "seed": seed, "library": fingerprint,
                   "dataset": self.dataset.fingerprint, "code": self._code, "sources": spec_sources(spec)}
        return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()

    def effective_folds(self, folds: int) -> int:
        """``folds`` capped at the number of tasks (so a small task set still runs)."""
        return max(2, min(folds, len(self.dataset.tasks)))

    def get(self, spec: Any, folds: int, seed: int) -> Retrieval:
        """The retrieval of ``spec`` with the given folds (capped, :meth:`effective_folds`) and
        seed (memoised, disk-cached)."""
        folds = self.effective_folds(folds)
        key = self.key(spec, folds, seed)
        if key in self._memo:
            return self._memo[key]
        path = cache_dir() / "experiments" / "retrieval" / f"{key}.json"
        result = self._read(path) if self.use_disk else None
        if result is None:
            result = self._compute(spec, folds, seed)
            if self.use_disk and not retrieval_errors(result):
                payload = {"ranked": {t: [list(p) for p in r] for t, r in result.ranked.items()},
                           "folds": dict(result.folds), "seconds": result.seconds,
                           "usage": {t: dict(u) for t, u in result.usage.items()}}
                try:
                    write_atomic(path, json.dumps(payload))
                except OSError:
                    pass  # the cache is an optimisation; an unwritable cache directory is not an error
        self._memo[key] = result
        return result

    def _read(self, path: Path) -> Retrieval | None:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            ranked = {t: tuple((str(p), float(s)) for p, s in r) for t, r in payload["ranked"].items()}
            if set(ranked) != {t.id for t in self.dataset.tasks}:
                return None
            usage = {str(t): {str(n): float(v) for n, v in u.items()} for t, u in payload.get("usage", {}).items()}
            return Retrieval(ranked=ranked, folds={t: int(f) for t, f in payload["folds"].items()},
                             seconds=float(payload.get("seconds", 0.0)), cached=True, usage=usage)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _compute(self, spec: Any, folds: int, seed: int) -> Retrieval:
        from primsel.eval.metrics import ranking
        from primsel.retrieval.cv import cross_validated_run

        start = time.perf_counter()
        usage: dict[str, dict[str, float]] = {}
        run, fold_of = cross_validated_run(registry.with_seed(spec, seed), self.library, list(self.dataset.tasks),
                                           k=len(self.library), folds=folds, seed=seed, usage_out=usage)
        ranked = {}
        for t in self.dataset.tasks:
            scores = run.get(t.id, {})
            ranked[t.id] = tuple((p, float(scores[p])) for p in ranking(scores))
        return Retrieval(ranked=ranked, folds=dict(fold_of), seconds=time.perf_counter() - start, usage=usage)


# ---------------------------------------------------------------------------------------------
# One cell
# ---------------------------------------------------------------------------------------------
def _select(ranked: Sequence[tuple[str, float]], task_id: str, retriever: str, k: int, closure: bool,
            library: Any, threshold: float | None = None, usage: Mapping[str, float] | None = None) -> Any:
    from primsel.retrieval.selector import select

    return select(ranked, library, k=k, threshold=threshold, closure=closure, task_id=task_id,
                  retriever=retriever, usage=usage)


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else 0.0


@dataclasses.dataclass
class CellContext:
    """What every cell of a run shares."""

    experiment: str
    library: Any
    dataset: Dataset
    store: RetrievalStore
    workers: int | None = None
    progress: bool = True
    versions: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    base_dir: Path | None = None


def run_cell(cell: Cell, ctx: CellContext, directory: Path, task_bar: Any = None) -> dict[str, float]:
    """Compute one cell and write its files (report.json last).

    Returns
    -------
    The cell's report (metric name -> value, and ``complete``: False when a task's LLM request
    failed after its retries; see the module docstring).

    Raises
    ------
    Whatever a retriever, the selector, a generator or the sandbox raises; the cell's
    report.json is then not written, so a re-run recomputes it.
    """
    from primsel.eval.metrics import per_task, set_metrics, set_metrics_per_task
    from primsel.retrieval.selector import tokens_of
    from primsel.retrieval.trec import format_run

    start = time.perf_counter()
    s = cell.settings
    k, closure = int(s["k"]), bool(s["closure"])
    tasks = ctx.dataset.tasks
    retrieval = ctx.store.get(s["retriever"], int(s["folds"]), int(s["seed"]))
    run = retrieval.run()
    gold = {t.id: t.gold for t in tasks}

    threshold = s.get("threshold")
    selections = {}
    for t in tasks:
        selections[t.id] = _select(retrieval.ranked[t.id], t.id, cell.id, k, closure, ctx.library,
                                   threshold, retrieval.usage.get(t.id))
        if task_bar is not None:
            task_bar.update(1)
    selected = {t: tuple(sel.ids) for t, sel in selections.items()}

    extra = tuple(s.get("metrics", ()))
    at_k = (f"recall@{k}", f"complete@{k}")
    names = tuple(dict.fromkeys((*BASE_METRICS, *at_k, *extra)))
    task_names = tuple(dict.fromkeys((*TASK_METRICS, *at_k, *extra)))
    rows_rank = per_task(run, gold, names)
    rows_set = set_metrics_per_task(selected, gold)
    tokens = {t: tokens_of(sel, ctx.library) for t, sel in selections.items()}

    report: dict[str, float] = {name: _mean(r[name] for r in rows_rank.values()) for name in names}
    report.update(set_metrics(selected, gold))
    report["n_tasks"] = len(tasks)
    report["selected"] = _mean(len(ids) for ids in selected.values())
    report["closure_added"] = _mean(len(sel.added_by_closure) for sel in selections.values())
    report["docs_tokens"] = _mean(tokens.values())
    if retrieval.usage:
        # totals over the tasks: the LLM cost of the ranking this cell selects from
        for name in SELECTOR_USAGE:
            key = "selector_cache_hits" if name == "cached" else f"selector_{name}"
            report[key] = math.fsum(float(u.get(name, 0.0)) for u in retrieval.usage.values())

    rows = []
    for t in tasks:
        metrics = {name: rows_rank[t.id][name] for name in task_names}
        metrics.update({f"set_{m}": rows_set[t.id][m] for m in ("precision", "recall", "f1")})
        rows.append({
            "task_id": t.id,
            "fold": retrieval.folds.get(t.id),
            "selection": list(selected[t.id]),
            "closure_added": list(selections[t.id].added_by_closure),
            "gold": sorted(t.gold),
            "metrics": metrics,
            "docs_tokens": tokens[t.id],
        })
        if retrieval.usage:
            rows[-1]["selection_usage"] = dict(selections[t.id].usage)

    failures: list[dict[str, Any]] | None = None
    if s.get("generator"):
        gen_rows, failures, gen_report = _generate_and_execute(cell, ctx, selections, retrieval.folds, task_bar)
        for row in rows:
            row.update(gen_rows[row["task_id"]])
        report.update(gen_report)

    report["retrieval_seconds"] = retrieval.seconds
    report["retrieval_cached"] = float(retrieval.cached)
    report["seconds"] = time.perf_counter() - start
    # a task whose LLM request (selection or generation) failed after its retries makes the cell
    # incomplete: it is written, and recomputed by the next run
    incomplete = set(retrieval_errors(retrieval))
    incomplete.update(row["task_id"] for row in rows if row.get("status") == "llm_error")
    report["incomplete_tasks"] = float(len(incomplete))
    report["complete"] = not incomplete

    directory.mkdir(parents=True, exist_ok=True)
    # an earlier (incomplete) report.json must not outlive a run killed before the new one
    (directory / "report.json").unlink(missing_ok=True)
    write_atomic(directory / "config.json", _json({
        "id": cell.id,
        "label": cell.label,
        "experiment": ctx.experiment,
        "settings": cell.settings,
        "data": {"source": ctx.dataset.source, "n_tasks": len(tasks), "fingerprint": ctx.dataset.fingerprint},
        "effective_folds": ctx.store.effective_folds(int(s["folds"])),
        "library": {"n_primitives": len(ctx.library),
                    "fingerprint": ctx.library.fingerprint() if hasattr(ctx.library, "fingerprint") else None},
        "versions": ctx.versions,
    }))
    write_atomic(directory / "run.trec", format_run(run, cell.id))
    write_atomic(directory / "tasks.jsonl", _jsonl(rows))
    if failures is not None:
        write_atomic(directory / "failures.jsonl", _jsonl(failures))
    write_atomic(directory / "report.json", _json(report))
    return report


def _generate_and_execute(cell: Cell, ctx: CellContext, selections: Mapping[str, Any],
                          folds: Mapping[str, int], task_bar: Any) -> tuple[dict[str, dict], list[dict], dict]:
    """Generate a program per task (per fold when the generator learns from training folds),
    run them in the sandbox, attribute failures. Returns (row updates, failures, report part)."""
    from primsel.eval.attribution import attribute, count_categories
    from primsel.simulator.sandbox import Sandbox

    s = cell.settings
    spec = generator_spec(s["generator"], ctx.base_dir)
    tasks = ctx.dataset.tasks
    by_id = {t.id: t for t in tasks}
    docs = {t.id: [ctx.library[p] for p in selections[t.id].ids] for t in tasks}
    programs: dict[str, Any] = {}
    generators = []
    probe = registry.build(spec, "generator")
    if hasattr(probe, "fit"):
        groups = {}
        for t in tasks:
            groups.setdefault(folds.get(t.id, 0), []).append(t)
        for i, fold in enumerate(sorted(groups)):
            gen = probe if i == 0 else registry.build(spec, "generator")
            gen.fit(ctx.library, [t for t in tasks if folds.get(t.id, 0) != fold])
            generators.append(gen)
            programs.update(_generate(gen, [(t, docs[t.id]) for t in groups[fold]]))
            if task_bar is not None:
                task_bar.update(len(groups[fold]))
    else:
        generators.append(probe)
        programs.update(_generate(probe, [(t, docs[t.id]) for t in tasks]))
        if task_bar is not None:
            task_bar.update(len(tasks))

    # only programs with status "ok" run; the others (truncated, llm_error, no_program) keep
    # their program status as the task's status
    jobs = [(t, programs[t.id].code, programs[t.id].entry_point) for t in tasks if programs[t.id].status == "ok"]
    if task_bar is not None:
        task_bar.update(len(tasks) - len(jobs))
    results = {}
    references = {}
    if jobs:
        with Sandbox(workers=ctx.workers, timeout=float(s.get("timeout", 10.0))) as sandbox:
            for result in sandbox.execute_many(jobs):
                results[result.task_id] = result
                if task_bar is not None:
                    task_bar.update(1)
            # the reference program of every failed task, on the same initial state, for localisation
            failed = [by_id[task_id] for task_id, result in results.items() if not result.passed]
            references = {r.task_id: r for r in sandbox.execute_many((t, t.program, None) for t in failed)}

    rows: dict[str, dict] = {}
    failures = []
    status: dict[str, str] = {}
    for t in tasks:
        prog, res = programs[t.id], results.get(t.id)
        status[t.id] = res.status if res is not None else prog.status
        attribution = None
        if status[t.id] != "pass":
            attribution = attribute(by_id[t.id], selections[t.id], prog, res, ctx.library,
                                    reference=references.get(t.id))
            failures.append(attribution)
        usage = dict(prog.usage)
        rows[t.id] = {
            "status": status[t.id],
            "error_type": res.error_type if res is not None else None,
            "message": res.message if res is not None else (prog.raw if prog.status == "llm_error" else None),
            "program_status": prog.status,
            "program": prog.code,
            "tokens": {"prompt": usage.get("prompt_tokens", 0), "completion": usage.get("completion_tokens", 0)},
            "generation_seconds": usage.get("seconds", 0.0),
            "seconds": res.seconds if res is not None else 0.0,
            "called_primitives": list(res.called_primitives) if res is not None else [],
            "attribution": attribution,
        }
    report: dict[str, float] = {"success": _mean(1.0 if status[t.id] == "pass" else 0.0 for t in tasks)}
    for name in TASK_STATUSES:
        report[f"status_{name}"] = _mean(1.0 if status[t.id] == name else 0.0 for t in tasks)
    for category, count in count_categories(failures).items():
        report[f"failures_{category}"] = float(count)
    usage_total: dict[str, float] = {}
    for gen in generators:
        if hasattr(gen, "usage_summary"):
            for key, value in gen.usage_summary().items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    usage_total[key] = usage_total.get(key, 0.0) + float(value)
    report.update({f"generator_{k}": v for k, v in usage_total.items()})
    if "cache_hits" in usage_total:
        report["cache_hits"] = usage_total["cache_hits"]
    return rows, failures, report


def _generate(gen: Any, items: Sequence[tuple[Task, Sequence[Any]]]) -> dict[str, Any]:
    if hasattr(gen, "generate_many"):
        programs = gen.generate_many(items)
    else:
        programs = [gen.generate(task, docs) for task, docs in items]
    return {task.id: prog for (task, _), prog in zip(items, programs)}


# ---------------------------------------------------------------------------------------------
# The whole grid
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ExperimentResult:
    """Outcome of :func:`run_experiment`.

    Parameters
    ----------
    directory : ``<out>/<name>``.
    cells : every cell of the grid, in grid order.
    computed : ids of the cells computed by this call.
    skipped : ids of the cells already finished before it.
    seconds : wall time of the call.
    incomplete : ids of the computed cells that are incomplete (LLM requests failed after their
        retries); the next run recomputes them.
    """

    directory: Path
    cells: tuple[Cell, ...]
    computed: tuple[str, ...]
    skipped: tuple[str, ...]
    seconds: float
    incomplete: tuple[str, ...] = ()


def run_experiment(
    config: ExperimentConfig,
    out: str | os.PathLike[str] = "runs",
    *,
    data: str | os.PathLike[str] | None = None,
    tasks: Sequence[Task] | None = None,
    library: Any = None,
    workers: int | None = None,
    progress: bool = True,
    use_cache: bool = True,
    log: TextIO | None = None,
    on_cell: Callable[[Cell, Mapping[str, float]], None] | None = None,
) -> ExperimentResult:
    """Run every unfinished cell of an experiment and write its outputs.

    Parameters
    ----------
    config : the experiment (:func:`primsel.experiments.config.load_config`).
    out : output root; the experiment writes to ``<out>/<config.name>``.
    data : dataset path overriding ``config.data`` (the ``--data`` flag); without either, env
        ``PRIMSEL_ASPER_BENCH``, else the built-in tasks.
    tasks : use these tasks (gold filled) instead of loading a dataset.
    library : the library (default :meth:`primsel.library.Library.from_simulator`).
    workers : sandbox worker processes when a generator runs (default: the sandbox's).
    progress : show tqdm progress bars on stderr.
    use_cache : read and write the on-disk retrieval cache.
    log : stream for messages (default stderr).
    on_cell : called after each computed cell with the cell and its report.

    Returns
    -------
    :class:`ExperimentResult`.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed dataset.
    OutputError : ``<out>/<name>`` cannot be created or written.
    Anything a component raises while computing a cell (finished cells stay written).
    """
    from tqdm import tqdm

    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    if library is None:
        from primsel.library import Library

        library = Library.from_simulator()
    if tasks is not None:
        dataset = make_dataset(tasks)
    else:
        dataset = load_dataset(data if data is not None else config.data, library, log)
    cells = expand(config, dataset=dataset.fingerprint)
    directory = Path(out) / config.name
    manifest = {
        "name": config.name,
        "description": config.description,
        "baseline": config.baseline,
        "data": {"source": dataset.source, "n_tasks": len(dataset.tasks), "fingerprint": dataset.fingerprint},
        "grids": [{k: list(v) for k, v in g.items()} for g in config.grids],
        "cells": [{"id": c.id, "label": c.label, "settings": c.settings} for c in cells],
    }
    if config.pair_on is not None:
        manifest["pair_on"] = list(config.pair_on)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / "experiment.json", _json(manifest))
    except OSError as exc:
        raise OutputError(f"cannot write the output directory {directory}: "
                          f"{exc.strerror or exc}") from None
    ctx = CellContext(experiment=config.name, library=library, dataset=dataset,
                      store=RetrievalStore(library, dataset, use_disk=use_cache), workers=workers,
                      progress=progress, versions=package_versions(), base_dir=config.base_dir)
    done = [c.id for c in cells if is_finished(directory / c.id)]
    todo = [c for c in cells if c.id not in set(done)]
    if done:
        print(f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}", file=log)
    redo = [c.id for c in todo if (directory / c.id / "report.json").is_file()]
    if redo:
        print(f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
              "cached answers are reused", file=log)
    capped = sorted({int(c.settings["folds"]) for c in todo if ctx.store.effective_folds(int(c.settings["folds"]))
                     != int(c.settings["folds"])})
    if capped:
        print(f"primsel run: only {len(dataset.tasks)} tasks: folds {capped} capped at "
              f"{ctx.store.effective_folds(max(capped))}", file=log)
    computed = []
    incomplete = []
    with tqdm(total=len(cells), initial=len(done), desc=config.name, unit="cell", file=log,
              disable=not progress, position=0, dynamic_ncols=True) as cell_bar:
        for cell in todo:
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(dataset.tasks) * (3 if cell.settings.get("generator") else 1)
            with tqdm(total=steps, desc="  tasks", unit="task", file=log, leave=False,
                      disable=not progress, position=1, dynamic_ncols=True) as task_bar:
                report = run_cell(cell, ctx, directory / cell.id, task_bar)
            computed.append(cell.id)
            if report.get("complete") is False:
                incomplete.append(cell.id)
            cell_bar.update(1)
            if on_cell is not None:
                on_cell(cell, report)
    return ExperimentResult(directory=directory, cells=tuple(cells), computed=tuple(computed),
                            skipped=tuple(done), seconds=time.perf_counter() - begin,
                            incomplete=tuple(incomplete))
