"""The ``primsel`` command line: one entry point, one subcommand per stage.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``main(args) -> int``. Those modules import heavy packages only inside ``main``.
Progress goes to stderr, results to stdout or files. Bad arguments exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, one-line help, example)
SUBCOMMANDS = {
    "verify": (
        "primsel.simulator.verify",
        "run programs (default: every task's reference program) against the tasks' evaluation programs",
        "primsel verify --data asper_bench.tgz --programs mine.jsonl --out verdicts.jsonl",
    ),
    "retrieve": (
        "primsel.retrieval.cli",
        "rank the library for every task with a retriever and print retrieval metrics",
        'primsel retrieve --retriever bm25 --k 15 --out bm25.trec',
    ),
    "run": (
        "primsel.experiments.cli",
        "run an experiment grid declared in a TOML file (resumable) and write its report",
        "primsel run experiments/retrieval_ablation.toml --out runs/",
    ),
    "report": (
        "primsel.eval.cli",
        "(re)write the Markdown report and plots of an experiment directory",
        "primsel report runs/retrieval_ablation",
    ),
}


class UsageError(Exception):
    """Bad command-line input; the message names the problem. Exits with status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    parser = argparse.ArgumentParser(
        prog="primsel",
        description="Primitive selection for program-writing assistants (ASPERA / Asper-Bench).",
        epilog="examples:\n" + "\n".join(f"  {ex}" for _, _, ex in SUBCOMMANDS.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text, example) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(sub)
        sub.set_defaults(_module=module_name)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.main(args) or 0)
    except UsageError as exc:
        print(f"primsel {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
