"""``primsel run``: run an experiment grid declared in a TOML file, then write its report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from primsel.commands.common import UsageError, report_answers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel run``."""
    parser.add_argument(
        "config", metavar="CONFIG.toml", help="experiment declaration (see experiments/*.toml)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a key of the file, as the TOML would (repeatable): KEY dotted as in the file, "
        "VALUE in TOML syntax, e.g. --set k=10 --set retriever.k1=1.2 "
        "--set 'generator.model=\"gpt-4o\"' --set 'grid.k=[5, 10]'",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print every cell the run would compute or reuse (state, id, label, settings) "
        "and exit without writing anything",
    )
    parser.add_argument(
        "--out",
        default="runs",
        metavar="DIR",
        help="output root; cells go to DIR/<name>/<cell_id>/ (default runs/)",
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="Asper-Bench archive or retrieval-only data (any kind the user guide lists, e.g. "
        "a BEIR directory, the MetaTool or APIBench folder or one of their subsets, "
        "pydoc[:SIZE]); overrides the "
        "file's 'data' key; default: $PRIMSEL_ASPER_BENCH, else the built-in tasks",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="sandbox worker processes when a generator runs (default: CPUs)",
    )
    parser.add_argument(
        "--no-report", action="store_true", help="do not write the report (Markdown and plots)"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="read and write no cache: retrieval rankings, embeddings, LLM answers",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--backend",
        choices=("serial", "ray"),
        default="serial",
        help="serial (default): cells one after the other here; ray: cells as Ray tasks "
        "(pip install 'primsel[ray]'), same files and report",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="run every cell on N tasks drawn with the experiment's seed (the same tasks for "
        "every cell; retrieval still cross-validated over all tasks, so the answers are "
        "reused by the full run): a quick look before a long run",
    )
    which.add_argument(
        "--tasks",
        default=None,
        metavar="ID,ID,...",
        help="run every cell on these tasks only (as --sample)",
    )
    which.add_argument(
        "--fold",
        type=int,
        default=None,
        metavar="K",
        help="run every cell on the tasks of cross-validation fold K (0 .. folds - 1 of the "
        "experiment's folds and seed; as --sample): a random part of the tasks, and the "
        "one a local model answers fastest, its prompts sharing their worked example",
    )
    parser.add_argument(
        "--address",
        default=None,
        metavar="ADDR",
        help="with --backend ray: the Ray cluster to connect to (default: a local Ray "
        "started for the run)",
    )


def _task_ids(args: argparse.Namespace) -> list[str] | None:
    """Check the options that need no file; the task ids of ``--tasks`` (None without it).

    Raises
    ------
    UsageError : a bad number, an empty ``--tasks``, ``--address`` without Ray, or Ray missing.
    """
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.sample is not None and args.sample < 1:
        raise UsageError(f"--sample must be >= 1, got {args.sample}")
    if args.fold is not None and args.fold < 0:
        raise UsageError(f"--fold must be >= 0, got {args.fold}")
    if args.address is not None and args.backend != "ray":
        raise UsageError("--address needs --backend ray")
    if args.backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(
                "--backend ray needs Ray: pip install 'primsel[ray]' (or pip install ray)"
            ) from None
    if args.tasks is None:
        return None
    task_ids = [t for t in args.tasks.split(",") if t.strip()]
    if not task_ids:
        raise UsageError("--tasks needs at least one task id (ID,ID,...)")
    return task_ids


def _endpoint_failed(exc: Exception, computed: int, directory: object) -> int:
    """Say on stderr that the LLM endpoint stopped the run
    (:class:`primsel.llm.client.LLMFatalError`), what stays and how to resume; the exit status 1."""
    from primsel.llm.client import EndpointUnreachableError

    if isinstance(exc, EndpointUnreachableError):
        print(
            f"primsel run: error: the LLM endpoint cannot be reached, stopping: {exc}",
            file=sys.stderr,
        )
        if "llama.cpp server" in str(exc):
            fix = "see the server's output above"
        else:
            fix = "start the server or correct base_url / OPENAI_BASE_URL"
    else:
        print(
            f"primsel run: error: the LLM endpoint refuses the requests, stopping: "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        fix = "fix the key, quota or model name"
    print(
        f"primsel run: {computed} cells computed before it stay in {directory}; "
        f"{fix} and run the same command again to resume",
        file=sys.stderr,
    )
    return 1


def main(args: argparse.Namespace) -> int:
    """Run the experiment.

    Exit status: 0 when every cell ran (incomplete cells, whose LLM requests failed after their
    retries, are reported on stderr and recomputed by the next run); 2 on a bad declaration,
    dataset or output directory (checked before anything is written); 1 when the LLM endpoint
    refuses every request (no quota, bad key, unknown model) or cannot be reached
    (:class:`primsel.llm.client.LLMFatalError`); 130 on Ctrl-C. The cells finished before
    a stop stay written, and the same command resumes.
    """
    from pathlib import Path

    from primsel.aspera import AsperaSourceError
    from primsel.datasets import DatasetError
    from primsel.experiments.config import ConfigError, load_config
    from primsel.llm.answers import AnswersError
    from primsel.experiments.runner import OutputError, run_experiment
    from primsel.llm.client import LLMFatalError
    from primsel.llm.local import LocalModelError

    task_ids = _task_ids(args)
    finished: list[str] = []
    try:
        config = load_config(args.config, args.overrides)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    directory = Path(args.out) / config.name
    try:
        if args.dry_run:
            return _dry_run(args, config, task_ids)
        result = run_experiment(
            config,
            args.out,
            data=args.data,
            workers=args.workers,
            progress=not args.quiet,
            use_cache=not args.no_cache,
            on_cell=lambda cell, report: finished.append(cell.id),
            backend=args.backend,
            address=args.address,
            sample=args.sample,
            task_ids=task_ids,
            fold=args.fold,
        )
    except (
        ConfigError,
        DatasetError,
        OutputError,
        LocalModelError,
        AsperaSourceError,
        AnswersError,
    ) as exc:
        raise UsageError(str(exc)) from None
    except LLMFatalError as exc:
        return _endpoint_failed(exc, len(finished), directory)
    except KeyboardInterrupt:
        newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's "^C"
        print(
            f"{newline}primsel run: interrupted; {len(finished)} cells computed before it stay in {directory}; "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    return _finish(args, result)


#: How ``--dry-run`` names a cell's state (:class:`primsel.experiments.runner.PlannedCell`).
DRY_RUN_STATES = {
    "new": "compute",
    "finished": "reuse",
    "incomplete": "compute (incomplete: an LLM request failed)",
    "stale": "compute (source changed: {changed})",
}


def _dry_run(args: argparse.Namespace, config: Any, task_ids: list[str] | None) -> int:
    """``primsel run --dry-run``: print on stdout every cell of ``config`` with what the run
    would do with it (compute or reuse), its folder, label and settings; write nothing. Errors
    as a run's (raised for :func:`main` to turn into exit statuses)."""
    import json

    from primsel.experiments.runner import plan_experiment

    planned = plan_experiment(
        config,
        args.out,
        data=args.data,
        sample=args.sample,
        task_ids=task_ids,
        fold=args.fold,
    )
    reused = sum(1 for p in planned if p.reused)
    print(
        f"{config.name}: {len(planned)} cells, {len(planned) - reused} to compute, "
        f"{reused} finished and reused (dry run: nothing written)"
    )
    for p in planned:
        state = DRY_RUN_STATES[p.state].format(changed=", ".join(p.changed))
        settings = {k: v for k, v in p.cell.settings.to_json().items() if k != "dataset"}
        print(f"{state}  {p.folder}  {p.cell.label}")
        print(f"    {json.dumps(settings, sort_keys=True)}")
    return 0


def _finish(args: argparse.Namespace, result: Any) -> int:
    """After the cells of ``result`` (:class:`primsel.experiments.runner.ExperimentResult`): say
    what ran, write the report (unless ``--no-report``) and print the summary
    (:func:`primsel.reporting.summary.best_cells`) and the report's path; the exit status."""
    from primsel.reporting import ReportError, load_experiment, write_report
    from primsel.reporting.summary import best_cells

    report_answers(result.answers, {c.id: c.label for c in result.cells}, sys.stderr)
    print(
        f"primsel run: {len(result.computed)} cells computed, {len(result.skipped)} already finished, "
        f"{result.seconds:.1f} s; results in {result.directory}",
        file=sys.stderr,
    )
    if result.incomplete:
        print(
            f"primsel run: warning: {len(result.incomplete)} cells are incomplete (LLM requests failed "
            f"after their retries: {', '.join(result.incomplete)}); run the same command again to "
            "recompute them (answers already received are cached)",
            file=sys.stderr,
        )
    if not args.no_report:
        try:
            path = write_report(result.directory)
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        except KeyboardInterrupt:
            newline = "\n" if sys.stderr.isatty() else ""
            print(
                f"{newline}primsel run: interrupted while writing the report; every cell stays in "
                f"{result.directory}; `primsel report {result.directory}` writes it",
                file=sys.stderr,
            )
            return 130
    try:  # a short summary on stdout; the full table is the report's
        summary = best_cells(load_experiment(result.directory))
    except ReportError:
        summary = []
    if summary:
        print("\n".join(summary))
    if not args.no_report:
        print(path)
    return 0
