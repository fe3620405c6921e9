"""``primsel compare RUN_A RUN_B``: two runs side by side, cell by cell, with paired tests
(:mod:`primsel.reporting.compare_runs` compares; this module parses, writes and says).

Exit 2 when a run cannot be read, no cell matches, or a matched cell lacks the metric (``success``
of a run without a generator included).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack

from primsel.commands.common import UsageError, add_test_options, check_test_options, output_stream

#: Output formats of ``primsel compare``.
FORMATS = ("text", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel compare``."""
    parser.add_argument(
        "run_a", metavar="RUN_A", help="experiment directory (or one cell directory)"
    )
    parser.add_argument(
        "run_b", metavar="RUN_B", help="the run to compare with RUN_A (B - A is shown)"
    )
    parser.add_argument(
        "--metric",
        default=None,
        help="per-task metric of the cells' task rows (mrr, ndcg@10, complete@15, set_f1, ...) or "
        "'success' (default: recall@k at each cell's k)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="text table (default), csv or json"
    )
    parser.add_argument("--out", metavar="FILE", default=None, help="write here instead of stdout")
    add_test_options(parser)


def main(args: argparse.Namespace) -> int:
    """Compare and write; exit 2 on runs that cannot be compared."""
    from primsel.reporting.compare_runs import FORMATS as WRITERS
    from primsel.reporting.compare_runs import ReportError, compare_runs, left_out_lines

    check_test_options(args)
    try:
        comparison = compare_runs(args.run_a, args.run_b, args.metric, args.n_resamples, args.seed)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    text = WRITERS[args.format](comparison)
    with ExitStack() as stack:
        output_stream(stack, args.out).write(text)
    if args.format != "text":
        for line in left_out_lines(comparison.pairs):
            print(f"primsel compare: warning: {line}", file=sys.stderr)
    if args.out:
        print(f"primsel compare: wrote {args.out}", file=sys.stderr)
    return 0
