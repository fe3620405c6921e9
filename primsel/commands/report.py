"""``primsel report``: (re)write the Markdown report and plots of an experiment directory
(:func:`primsel.reporting.write_report`), or print every finished cell as one table
(``--format csv|json|latex``, :mod:`primsel.reporting.export`).
"""

from __future__ import annotations

import argparse
import sys

from primsel.commands.common import UsageError, add_test_options, check_test_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel report``."""
    parser.add_argument(
        "directory",
        metavar="DIR",
        help="experiment directory, <out>/<name> (e.g. runs/retrieval_ablation)",
    )
    parser.add_argument(
        "--export",
        metavar="DIR",
        default=None,
        help="also write <DIR>/<name>.md and its PNG plots there (aggregate tables only), "
        "e.g. experiments/, and, when cells generated programs with a chat model, "
        "<DIR>/<name>.answers.jsonl.gz: its answers, which primsel run of <DIR>/<name>.toml reads back",
    )
    add_test_options(parser)
    parser.add_argument(
        "--format",
        choices=("md", "csv", "json", "latex"),
        default="md",
        help="md: write the Markdown report (default); csv, json, latex: print every finished "
        "cell with all its report values as one table on stdout instead (csv and json at "
        "full precision; latex: a tabular with the report's rounding, special characters "
        "escaped)",
    )


def main(args: argparse.Namespace) -> int:
    """Write the report (or print the table); exit 2 when the directory holds no experiment."""
    from primsel.reporting import ReportError, load_experiment, write_report
    from primsel.reporting.export import FORMATS, cell_rows

    check_test_options(args)
    if args.format != "md":
        try:
            rows = cell_rows(load_experiment(args.directory))
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        sys.stdout.write(FORMATS[args.format](rows))
        return 0
    try:
        path = write_report(
            args.directory, export=args.export, n_resamples=args.n_resamples, seed=args.seed
        )
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print(
        f"primsel report: wrote {path}"
        + (f" and exported to {args.export}" if args.export else ""),
        file=sys.stderr,
    )
    print(path)
    return 0
