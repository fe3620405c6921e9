"""The ``primsel`` command line: one entry point, one subcommand per stage.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``main(args) -> int``. Those modules import heavy packages only inside ``main``.
Progress goes to stderr, results to stdout or files. Bad arguments exit with status 2, an
interrupt (Ctrl-C) with status 130.

As ``python -m`` does, the command puts the current directory first on ``sys.path``, so
``"module:Class"`` specifications name modules in the directory it is run from. Log messages of
the ``primsel`` loggers go to stderr from level WARNING (``-v``: INFO, ``-vv``: DEBUG).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TextIO

#: subcommand -> (module, one-line help, example)
SUBCOMMANDS = {
    "verify": (
        "primsel.simulator.verify",
        "run programs (default: every task's reference program) against the tasks' evaluation programs",
        "primsel verify --data asper_bench.tgz --programs mine.jsonl --out verdicts.jsonl",
    ),
    "retrieve": (
        "primsel.experiments.retrieve_cli",
        "rank the library for every task with a retriever and print retrieval metrics",
        'primsel retrieve --retriever bm25 --k 15 --out bm25.trec',
    ),
    "extract": (
        "primsel.generation.cli",
        "take the programs out of stored model answers (primsel's rules or ASPERA's), without a model",
        "primsel extract --mode aspera answers.jsonl --out programs.jsonl",
    ),
    "run": (
        "primsel.experiments.run_cli",
        "run an experiment grid declared in a TOML file (resumable) and write its report",
        "primsel run experiments/retrieval_ablation.toml --out runs/",
    ),
    "report": (
        "primsel.experiments.report_cli",
        "(re)write the Markdown report and plots of an experiment directory",
        "primsel report runs/retrieval_ablation",
    ),
    "compare": (
        "primsel.experiments.compare",
        "compare two runs cell by cell: values side by side, paired tests, the tasks that flip",
        "primsel compare runs/before/retrieval_ablation runs/after/retrieval_ablation --format csv",
    ),
    "tasks": (
        "primsel.tasks",
        "list task cards (query, gold primitives, features, checks), filtered; 'tasks show ID' for one",
        "primsel tasks --primitive work_calendar.add_event --feature loop",
    ),
    "explore": (
        "primsel.explore.cli",
        "write a static site to browse an experiment's cells, tasks, programs and failures",
        "primsel explore runs/retrieval_ablation --out site/",
    ),
    "local": (
        "primsel.generation.local_cli",
        "prepare and serve a small real model on this machine (no API key, no network)",
        "primsel local prepare && primsel local serve --port 8765",
    ),
}


VERBOSE_HELP = "more messages on stderr: -v for INFO (e.g. model loading), -vv for DEBUG"


class UsageError(Exception):
    """Bad command-line input; the message names the problem. Exits with status 2."""


def read_jsonl_objects(path: str, expected: str, what: str = "",
                       bad: list[str] | None = None) -> list[tuple[str, dict]]:
    """The JSON objects of a JSONL input file, one per non-blank line.

    Parameters
    ----------
    path : the file.
    expected : what an object must hold, for the error message (``"id and answer"``).
    what : the option that named the file (``"--programs"``), for the error message.
    bad : when a list, a line that is not valid JSON or not a JSON object is not an error:
        its message (file, line and, for bad JSON, column) is appended here and the line is
        left out, so the good lines are still read.

    Returns
    -------
    ``(where, object)`` per non-blank line, in order; ``where`` is ``"<path> line <n>"``, for the
    caller's own messages about a line.

    Raises
    ------
    UsageError : the file cannot be read (or is not UTF-8), or (without ``bad``) a line is not
        valid JSON or not a JSON object; the message names the file, the line and the column.
    """
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        named = f"{what} {path}" if what else path
        raise UsageError(f"cannot read {named}: {getattr(exc, 'strerror', None) or exc}") from exc
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"{where} column {exc.colno}: not valid JSON ({exc.msg})"
        else:
            if isinstance(record, dict):
                out.append((where, record))
                continue
            problem = f"{where}: expected a JSON object with {expected}"
        if bad is None:
            raise UsageError(problem)
        bad.append(problem)
    return out


def output_stream(stack: contextlib.ExitStack, path: str | None) -> TextIO:
    """The file ``--out`` names, opened for writing (UTF-8) and closed with ``stack``; stdout
    when ``path`` is None.

    Raises
    ------
    UsageError : the file cannot be opened (the message names it).
    """
    if not path:
        return sys.stdout
    try:
        return stack.enter_context(open(path, "w", encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write --out {path}: {exc.strerror or exc}") from exc


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached."""
    from primsel import __version__

    parser = argparse.ArgumentParser(
        prog="primsel",
        description="Primitive selection for program-writing assistants (ASPERA / Asper-Bench).",
        epilog="examples:\n" + "\n".join(f"  {ex}" for _, _, ex in SUBCOMMANDS.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"primsel {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
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
        # also accepted after the subcommand; SUPPRESS keeps a top-level -v when it is absent here
        sub.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        sub.set_defaults(_module=module_name)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each message (it may be replaced)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


@contextlib.contextmanager
def log_to_stderr(verbosity: int = 0) -> Iterator[None]:
    """While active, messages of the ``primsel`` loggers go to stderr: WARNING and above, INFO
    with ``verbosity`` 1, DEBUG with 2 or more. The logger's previous level is restored after."""
    logger = logging.getLogger("primsel")
    level = logger.level
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO if verbosity == 1 else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _cwd_first_on_path() -> None:
    """Put the current directory first on ``sys.path`` (as ``python -m`` does), once."""
    cwd = os.getcwd()
    if not sys.path or sys.path[0] not in (cwd, ""):
        sys.path.insert(0, cwd)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit status.

    Returns
    -------
    the subcommand's status; 2 on a :class:`UsageError` (message on stderr), 130 when
    interrupted (Ctrl-C: one line on stderr, no traceback).
    """
    command = "primsel"
    try:
        _cwd_first_on_path()
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help(sys.stderr)
            return 2
        command = f"primsel {args.command}"
        module = importlib.import_module(args._module)
        with log_to_stderr(args.verbose):
            try:
                status = int(module.main(args) or 0)
            except UsageError as exc:
                print(f"{command}: error: {exc}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:
        newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's "^C"
        print(f"{newline}{command}: interrupted", file=sys.stderr)
        status = 130
    if status == 130:
        _end_quickly()
    return status


def _end_quickly() -> None:
    """After an interrupt, let the process end without the interpreter's final garbage
    collection, which takes seconds over the scientific libraries loaded (0.3 s instead of 2.7 s
    on a busy 2-core machine) while nothing in them needs finalising: primsel's files are written
    atomically and closed. Exit handlers still run; a caller that goes on is not affected."""
    import atexit
    import gc

    atexit.register(gc.freeze)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
