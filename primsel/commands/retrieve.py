"""``primsel retrieve``: rank the library for every task and print retrieval metrics.

The command runs one cell of the pipeline ``primsel run`` uses (:mod:`primsel.experiments.cell`),
without a generator and without the disk cache: retrievers that learn from tasks are
cross-validated (``--folds``, ``--seed``); the TREC run (``--out``) ranks the whole library for
every task. The selection scored by the set metrics is the top ``--k`` primitives (or what the
``--selector`` class chooses, at most ``--k``), plus their type dependencies with ``--closure``.
With ``--json`` the figures are printed as one JSON object instead of text (:func:`json_result`).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.commands.common import UsageError, report_answers
from primsel.experiments.columns import RANKING_METRICS, SET_METRICS, TIE_AWARE
from primsel.registry import available, build


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``retrieve`` options to ``parser``."""
    parser.add_argument(
        "--retriever",
        metavar="SPEC",
        default=None,
        help=f"a registered name ({', '.join(available('retriever'))}), "
        "'package.module:Class' (modules in the current directory included), or an "
        "inline JSON table such as "
        '\'{"type": "hybrid", "members": ["bm25", "dense"], "method": "rrf"}\' '
        "(default: the learned hybrid, see primsel.retrieval.DEFAULT_RETRIEVER)",
    )
    parser.add_argument(
        "--k",
        type=int,
        default=15,
        help="selection size for the set metrics (default 15; above the library size, "
        "the whole library)",
    )
    parser.add_argument(
        "--selector",
        metavar="SPEC",
        default=None,
        help="a selector class instead of the plain top-k: 'topk', or a JSON table such as "
        '\'{"type": "calibrated", "target_recall": 0.95}\' (k per task from calibrated '
        "scores, fitted on the training folds; --k is then its cap)",
    )
    parser.add_argument(
        "--closure",
        action="store_true",
        help="add the library types the selected primitives depend on",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=5,
        help="cross-validation folds for learned retrievers (default 5)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the fold split, also passed to retrievers that take a 'seed' "
        "parameter (random) unless the JSON table sets one (default 0)",
    )
    parser.add_argument(
        "--data",
        metavar="PATH",
        default=None,
        help="Asper-Bench archive, or retrieval-only data of any kind the user guide's Data "
        "section lists, e.g. a BEIR directory, the MetaTool or Gorilla APIBench "
        "folder (every dataset in it) or one of their subsets (metatool/single, "
        "gorilla-apibench/torchhub, ...), pydoc[:1k|10k|full] "
        "(default: $PRIMSEL_ASPER_BENCH, else the built-in tasks)",
    )
    parser.add_argument(
        "--library",
        choices=("primsel", "aspera"),
        default="primsel",
        help="the documentation ranked: primsel's library (default) or ASPERA's documentation of it, "
        "read from the checkout $PRIMSEL_ASPERA_SRC names (Asper-Bench and built-in tasks)",
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=None,
        metavar="N",
        help="keep the first N (>= 20) of each ranking (default: the whole library)",
    )
    parser.add_argument(
        "--out",
        metavar="RUN.trec",
        default=None,
        help="write the TREC run here (its directory must exist)",
    )
    parser.add_argument(
        "--qrels-out",
        metavar="QRELS.trec",
        default=None,
        help="write the tasks' gold primitives here as TREC qrels (its directory must exist): "
        "with the run of --out, trec_eval or ranx give the recall@k, nDCG@k and MRR printed",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as one JSON object on stdout instead of text: the settings, "
        "then per dataset every metric at full precision",
    )


def check_output_path(path: str, option: str = "--out") -> None:
    """Fail early when ``path`` (given by ``option``, which messages name) cannot be written,
    leaving nothing behind.

    The parent directory must exist (it is not created); an existing file is opened for
    appending (not changed) to probe it, a new one is created and removed again.

    Raises
    ------
    primsel.commands.common.UsageError : ``path`` is a directory, its parent is missing or not a
        directory, or the file cannot be opened for writing (the message gives the system's reason).
    """
    target = Path(path)
    parent = target.parent
    try:
        if target.is_dir():
            raise UsageError(f"{option} {path}: is a directory; give a file name")
        if not parent.exists():
            raise UsageError(
                f"{option} {path}: directory {parent} does not exist (create it first)"
            )
        if not parent.is_dir():
            raise UsageError(f"{option} {path}: {parent} is not a directory")
        existed = target.exists()
        with open(target, "a", encoding="utf-8"):
            pass
        if not existed:
            target.unlink()
    except OSError as exc:  # e.g. a name too long, no permission, a read-only file system
        raise UsageError(f"{option} {path}: cannot write: {exc.strerror or exc}") from exc


def _retriever(text: str | None, seed: int) -> tuple[Any, Any]:
    """The ``--retriever`` specification (default :data:`primsel.retrieval.DEFAULT_RETRIEVER`)
    with the seed, and an unfitted instance of it, built to report a bad specification before
    any data is read."""
    from primsel.retrieval import DEFAULT_RETRIEVER

    try:
        spec = copy.deepcopy(DEFAULT_RETRIEVER) if text is None else specs.parse(text)
        spec = specs.with_seed(spec, seed, "retriever")
        return spec, build(spec, "retriever")
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--retriever: {exc}") from exc


def _selector(text: str | None) -> Any:
    """The ``--selector`` specification (None: plain top-k), checked before any data is read."""
    if text is None:
        return None
    try:
        spec = specs.parse(text)
        specs.check(spec, "selector")
        return spec
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--selector: {exc}") from exc


def _settings(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The retriever's specification (seed included), an unfitted instance of it and the cell
    settings of the options, checked before any data is read (``--out`` probed).

    Raises
    ------
    UsageError : a bad value, naming the option that set it.
    """
    from primsel.experiments.settings import CellSettings, SettingError, check_setting

    for key in ("k", "folds", "seed", "depth"):
        value = getattr(args, key)
        if value is None:
            continue
        try:
            check_setting(key, value)
        except SettingError as exc:
            raise UsageError(f"--{key} {exc.problem}") from None
    if args.out:
        check_output_path(args.out)
    if args.qrels_out:
        check_output_path(args.qrels_out, "--qrels-out")
    spec, probe = _retriever(args.retriever, args.seed)
    selector = _selector(args.selector)
    try:
        settings = CellSettings(
            retriever=spec,
            k=args.k,
            closure=args.closure,
            folds=args.folds,
            seed=args.seed,
            selector=selector,
            depth=args.depth,
        )
    except SettingError as exc:  # the flag that set the value: --retriever, --selector, ...
        flag, _, below = exc.key.partition(".")
        inner = f"{below}: " if below else ""
        raise UsageError(f"--{flag}: {inner}{exc.problem}") from None
    return spec, probe, settings


def main(args: argparse.Namespace) -> int:
    """Run ``primsel retrieve``; returns the exit status: 0 done, 2 on bad arguments (via
    UsageError), 1 when an LLM selector's endpoint refuses every request or cannot be reached."""
    from primsel.aspera import AsperaSourceError
    from primsel.datasets import DatasetError
    from primsel.experiments.dataset import load_datasets

    spec, probe, settings = _settings(args)
    try:
        datasets = load_datasets(args.data, library_name=args.library)
    except (DatasetError, AsperaSourceError) as exc:
        raise UsageError(str(exc)) from exc
    outputs = (("--out", args.out), ("--qrels-out", args.qrels_out))
    written = [flag for flag, path in outputs if path]
    if written and len(datasets) > 1:
        raise UsageError(
            f"{written[0]}: {args.data} holds {len(datasets)} datasets "
            f"({', '.join(d.source for d in datasets)}); give one of them to write its run"
        )
    results = []
    for dataset in datasets:
        if len(datasets) > 1 and not args.json:
            print(f"== {dataset.source}")
        status, result = _retrieve_one(args, spec, probe, settings, dataset)
        if status:
            return status
        results.append(result)
    if args.json:
        sys.stdout.write(json.dumps(json_result(spec, settings, results), indent=2) + "\n")
    return 0


def json_result(spec: Any, settings: Any, datasets: list[dict[str, Any]]) -> dict[str, Any]:
    """The object ``primsel retrieve --json`` prints.

    Keys, in this order: ``retriever`` (the specification, seed included), ``label`` (its
    readable label), ``k``, ``closure``, ``selector`` (None: plain top-k), ``folds``, ``seed``,
    ``depth`` (None: the whole library), then ``datasets``: one object per dataset, in the
    order the data gives them, as :func:`dataset_result` builds it.
    """
    return {
        "retriever": spec,
        "label": specs.label(spec),
        "k": settings.k,
        "closure": settings.closure,
        "selector": settings.selector,
        "folds": settings.folds,
        "seed": settings.seed,
        "depth": settings.depth,
        "datasets": datasets,
    }


def dataset_result(
    report: Any,
    k: int,
    source: str,
    tasks: int,
    documents: int,
    folds: int,
    closure_added: int | None,
) -> dict[str, Any]:
    """One dataset's figures for :func:`json_result`: what the text output prints, at full
    precision.

    ``report`` is the cell's :class:`~primsel.experiments.records.ReportFile`. Keys, in this order:
    ``dataset`` (its source name), ``tasks``, ``documents`` (library size), ``folds`` (used: fewer
    than asked when there are fewer tasks), ``metrics`` (the ranking metrics of
    :data:`RANKING_METRICS`, then the set metrics, ``mean_selection_size`` in primitives per task
    and ``docs_tokens`` per task, all floats), ``tie_aware`` (the ranking metrics as the mean over
    every order of tied scores), ``tied_tasks`` (tasks whose ranking has a tie across rank ``k``, an
    int) and, with ``--closure``, ``closure_added`` (primitives added by the closure over all tasks,
    an int; absent without ``--closure``).
    """
    metrics = {name: float(report.metric(name)) for name in (*RANKING_METRICS, *SET_METRICS)}
    metrics["mean_selection_size"] = float(report.selection.selected)
    metrics["docs_tokens"] = float(report.selection.docs_tokens)
    out: dict[str, Any] = {
        "dataset": source,
        "tasks": tasks,
        "documents": documents,
        "folds": folds,
        "metrics": metrics,
        "tie_aware": {name: float(report.ranking.tie_aware[name]) for name in RANKING_METRICS},
        "tied_tasks": int(report.ranking.tied_tasks[k]),
    }
    if closure_added is not None:
        out["closure_added"] = int(closure_added)
    return out


def _say_dataset(dataset: Any, args: argparse.Namespace, folds: int, learned: bool) -> None:
    """Say on stderr what is ranked: the tasks, the loader's notes, the folds capped and a --k above
    the library."""
    library, tasks = dataset.library, dataset.tasks
    kind = "" if dataset.executable else f", {len(library)} documents"
    print(f"{len(tasks)} tasks ({dataset.source}{kind})", file=sys.stderr)
    for note in dataset.notes:
        print(f"  {note}", file=sys.stderr)
    if folds != args.folds:
        print(f"only {len(tasks)} tasks: using {folds} folds", file=sys.stderr)
    if args.k > len(library):
        print(
            f"--k {args.k} is above the library size: selecting all {len(library)} primitives",
            file=sys.stderr,
        )


def _say_windows(spec: Any, library: Any) -> None:
    """Say on stderr which documents are longer than a dense retriever's window."""
    from primsel.retrieval.windows import embedding_windows

    for key, w in embedding_windows(spec, library).items():
        print(
            f"dense{' ' + key if key else ''}: {w['texts_windowed']} of {w['texts']} documents longer than "
            f"the model's {w['window_tokens']} word pieces, embedded whole as the mean of their windows "
            f"({w['texts_cut']} cut; longest {w['longest_tokens']})",
            file=sys.stderr,
        )


def _retrieve_one(
    args: argparse.Namespace, spec: Any, probe: Any, settings: Any, dataset: Any
) -> tuple[int, dict[str, Any] | None]:
    """Rank, score and print one dataset (and write its run with ``--out``); returns the exit
    status (0, or 1 when an LLM selector's endpoint fails, see :func:`main`) and the dataset's
    figures for ``--json`` (:func:`dataset_result`; None when the status is not 0). With
    ``--json`` nothing is printed on stdout here."""
    from primsel.experiments.cell import compute_cell
    from primsel.retrieval.store import RetrievalStore
    from primsel.retrieval.trec import write_qrels, write_run
    from primsel.types import LearnsFromTasks

    library, tasks = dataset.library, dataset.tasks
    learned = isinstance(probe, LearnsFromTasks)
    if learned and len(tasks) < 2:
        raise UsageError(
            "a retriever that learns from tasks needs at least 2 tasks to cross-validate"
        )
    store = RetrievalStore(library, dataset, use_disk=False)
    folds = store.effective_folds(args.folds)
    _say_dataset(dataset, args, folds, learned)
    retrieval = _rank(args, spec, store, folds if learned else 1)
    if retrieval is None:
        return 1, None
    cross_validated = f" ({folds}-fold cross-validation, seed {args.seed})" if learned else ""
    print(
        f"ranked {len(retrieval.ranked)} tasks in {retrieval.seconds:.2f} s{cross_validated}",
        file=sys.stderr,
    )
    _say_windows(spec, library)

    tag = specs.tag(spec)
    computed = compute_cell(settings, retrieval, dataset, library, name=tag)
    report = computed.report
    if report.run.llm_answers:
        answers = (int(report.run.llm_answers), int(report.run.llm_answers_cached or 0))
        report_answers({specs.label(spec): answers}, {}, sys.stderr, command="primsel retrieve")
    gold = {row.task_id: row.gold for row in computed.rows}
    for option, path, write in (
        ("--out", args.out, lambda: write_run(computed.run, args.out, tag)),
        ("--qrels-out", args.qrels_out, lambda: write_qrels(gold, args.qrels_out)),
    ):
        if not path:
            continue
        try:
            write()
        except OSError as exc:  # checked before ranking, but the file system may have changed
            raise UsageError(f"{option} {path}: cannot write: {exc.strerror or exc}") from exc
        print(f"wrote {path}", file=sys.stderr)

    added = sum(len(s.added_by_closure) for s in computed.selections.values())
    result = dataset_result(
        report,
        args.k,
        dataset.source,
        len(tasks),
        len(library),
        folds,
        added if args.closure else None,
    )
    if not args.json:
        _print_figures(args, spec, settings.selector, report, len(tasks), added)
    return 0, result


def _rank(args: argparse.Namespace, spec: Any, store: Any, fits: int) -> Any:
    """The cross-validated ranking of ``spec`` (a :class:`primsel.retrieval.store.Retrieval`) under
    a bar over its ``fits``, whose description names the stage, so a long fit is not silence (a line
    per stage when stderr is a file); None, said on stderr, when an LLM selector's endpoint refuses
    or cannot be reached."""
    from primsel.llm.client import EndpointUnreachableError, LLMFatalError
    from primsel.progress import progress_bar, show_progress
    from primsel.retrieval.encoders import EncoderLoadError

    shown = None if args.quiet else sys.stderr  # also the epochs, texts embedded and LLM requests
    with show_progress(shown), progress_bar(
        total=fits,
        desc="fitting",
        unit="fold" if fits > 1 else "fit",
        file=sys.stderr,
        leave=False,
        disable=args.quiet,
        lines="stages",
    ) as bar:

        def stage(what: str, i: int, n: int) -> None:
            """Show the stage ``what`` of fold ``i`` of ``n`` on the bar."""
            bar.update(i - 1 - bar.n)  # the folds before this one are done
            bar.set_description_str(what, refresh=True)

        try:
            retrieval = store.get(spec, args.folds, args.seed, args.depth, progress=stage)
        except EncoderLoadError as exc:
            raise UsageError(f"--retriever: {exc}") from exc
        except LLMFatalError as exc:
            what = (
                "cannot be reached"
                if isinstance(exc, EndpointUnreachableError)
                else "refuses the requests"
            )
            print(
                f"primsel retrieve: error: the LLM endpoint {what}, stopping: {exc}",
                file=sys.stderr,
            )
            return None
        bar.update(bar.total - bar.n)
    return retrieval


def _print_figures(
    args: argparse.Namespace, spec: Any, selector: Any, report: Any, n_tasks: int, added: int
) -> None:
    """The figures of one dataset on stdout (``report``: its
    :class:`~primsel.experiments.records.ReportFile`): ranking and set metrics, selection size and
    tokens, the tie-aware ranking metrics and the tasks whose selection a tie across ``--k``
    decides, and with ``--closure`` the types it added."""
    named = spec if isinstance(spec, str) else json.dumps(spec)
    closure = "  closure" if args.closure else ""
    chosen = f"  selector {json.dumps(selector)}" if selector is not None else ""
    print(f"retriever {named}  k={args.k}{closure}{chosen}  tasks={n_tasks}")
    for name in (*RANKING_METRICS, *SET_METRICS):
        print(f"{name:22s} {report.metric(name):.4f}")
    print(f"{'mean_selection_size':22s} {report.selection.selected:.2f}")
    print(f"{'docs_tokens':22s} {report.selection.docs_tokens:.1f}")
    for name in RANKING_METRICS:
        print(f"{TIE_AWARE + name:22s} {report.ranking.tie_aware[name]:.4f}")
    print(f"{f'tied_tasks@{args.k}':22s} {int(report.ranking.tied_tasks[args.k])} of {n_tasks}")
    if args.closure:
        print(f"{'closure_added':22s} {added} ({added / n_tasks:.2f} per task)")
