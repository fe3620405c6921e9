"""The ``primsel`` command line: one entry point, one subcommand per stage.

Each subcommand lives in its own module of this package, which provides
``add_arguments(parser)`` and ``main(args) -> int`` and holds only the command-line part:
options, messages and exit statuses; the work is done by the library functions it calls. What
the subcommands share (:class:`~primsel.commands.common.UsageError`, the JSONL input reader,
the ``--out`` stream) is in :mod:`primsel.commands.common`. The modules import the packages that
do the work inside ``main``, so that building the parser (``primsel --help``) stays quick.
Progress goes to stderr, results to stdout or files (a summary line goes to stderr when stdout
carries the results). Bad arguments exit with status 2, an interrupt (Ctrl-C) with status 130 and
a closed stdout (``primsel tasks --json | head``) quietly with status 141, the shell's 128 + SIGPIPE,
as ``cat`` ends.

As ``python -m`` does, the command puts the current directory first on ``sys.path``, so
``"module:Class"`` specifications name modules in the directory it is run from. Log messages of
the ``primsel`` loggers go to stderr from level WARNING (``-v``: INFO, ``-vv``: DEBUG).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Iterator

from primsel import __version__
from primsel.commands.common import UsageError, output_stream, read_jsonl_objects

#: subcommand -> (module, one-line help, example)
SUBCOMMANDS = {
    "verify": (
        "primsel.commands.verify",
        "run programs (default: every task's reference program) against the tasks' evaluation programs",
        "primsel verify --data asper_bench.tgz --programs mine.jsonl --out verdicts.jsonl",
    ),
    "retrieve": (
        "primsel.commands.retrieve",
        "rank the library for every task with a retriever and print retrieval metrics",
        "primsel retrieve --retriever bm25 --k 15 --out bm25.trec",
    ),
    "extract": (
        "primsel.commands.extract",
        "take the programs out of stored model answers (primsel's rules or ASPERA's), without a model",
        "primsel extract --mode aspera answers.jsonl --out programs.jsonl",
    ),
    "run": (
        "primsel.commands.run",
        "run an experiment grid declared in a TOML file (resumable) and write its report",
        "primsel run experiments/retrieval_ablation.toml --out runs/",
    ),
    "report": (
        "primsel.commands.report",
        "(re)write the Markdown report and plots of an experiment directory",
        "primsel report runs/retrieval_ablation",
    ),
    "compare": (
        "primsel.commands.compare",
        "compare two runs cell by cell: values side by side, paired tests, the tasks that flip",
        "primsel compare runs/before/retrieval_ablation runs/after/retrieval_ablation --format csv",
    ),
    "tasks": (
        "primsel.commands.tasks",
        "list task cards (query, gold primitives, features, checks), filtered; 'tasks show ID' for one",
        "primsel tasks --primitive work_calendar.add_event --feature loop",
    ),
    "explore": (
        "primsel.commands.explore",
        "write a static site to browse an experiment's cells, tasks, programs and failures",
        "primsel explore runs/retrieval_ablation --out site/",
    ),
    "local": (
        "primsel.commands.local",
        "prepare and serve a small real model on this machine (no API key, no network)",
        "primsel local prepare && primsel local serve --port 8765",
    ),
}


#: The status of a command whose stdout was closed by its reader: the shell's 128 + SIGPIPE.
BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE

VERBOSE_HELP = "more messages on stderr: -v for INFO (e.g. model loading), -vv for DEBUG"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every subcommand attached.

    Parameters
    ----------
    command : a subcommand name: only its module is imported and only its options attached
        (the other subcommands are listed, without options), so that running one subcommand
        does not import what the others need to build their options (``retrieve`` lists the
        registered retrievers, ``local`` reads the local model's defaults). None or an unknown
        name: every subcommand's options.
    """
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
        sub = subparsers.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command is None or command not in SUBCOMMANDS or command == name:
            importlib.import_module(module_name).add_arguments(sub)
        # also accepted after the subcommand; SUPPRESS keeps a top-level -v when it is absent here
        sub.add_argument(
            "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
        sub.set_defaults(_module=module_name)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each message (it may be replaced)."""

    @property
    def stream(self):  # type: ignore[override]
        """The stream: ``sys.stderr`` as it is now."""
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        """Ignore a new stream: the handler always writes to the current ``sys.stderr``."""


@contextlib.contextmanager
def log_to_stderr(verbosity: int = 0) -> Iterator[None]:
    """While active, messages of the ``primsel`` loggers go to stderr: WARNING and above, INFO
    with ``verbosity`` 1, DEBUG with 2 or more. The logger's previous level is restored after."""
    logger = logging.getLogger("primsel")
    level = logger.level
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    if verbosity >= 2:
        logger.setLevel(logging.DEBUG)
    elif verbosity == 1:
        logger.setLevel(logging.INFO)
    else:
        logger.setLevel(logging.WARNING)
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


def _command_named(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level options
    take no value); None when there is none."""
    for word in argv:
        if not word.startswith("-"):
            return word
    return None


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit status.

    Returns
    -------
    the subcommand's status; 2 on a :class:`UsageError` (message on stderr), 130 when
    interrupted (Ctrl-C: one line on stderr, no traceback), :data:`BROKEN_PIPE_STATUS` when the
    reader of stdout closed it (``| head``: nothing on stderr, no traceback).
    """
    command = "primsel"
    try:
        _cwd_first_on_path()
        parser = build_parser(_command_named(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help(sys.stderr)
            return 2
        command = f"primsel {args.command}"
        module = importlib.import_module(args._module)
        with log_to_stderr(args.verbose):
            try:
                status = int(module.main(args) or 0)
                sys.stdout.flush()  # a closed pipe shows here rather than at the interpreter's exit
            except UsageError as exc:
                print(f"{command}: error: {exc}", file=sys.stderr)
                return 2
    except BrokenPipeError:
        _discard_stdout()
        return BROKEN_PIPE_STATUS
    except KeyboardInterrupt:
        newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's "^C"
        print(f"{newline}{command}: interrupted", file=sys.stderr)
        status = 130
    if status == 130:
        _end_quickly()
    return status


def _discard_stdout() -> None:
    """Point stdout's file descriptor at the null device, so that the interpreter's last flush of
    what is still buffered for a closed pipe writes nowhere instead of printing an error."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced by an object with no descriptor
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def _end_quickly() -> None:
    """After an interrupt, let the process end without the interpreter's final garbage
    collection, which takes seconds over the scientific libraries loaded (0.3 s instead of 2.7 s
    on a busy 2-core machine) while nothing in them needs finalising: primsel's files are written
    atomically and closed. Exit handlers still run; a caller that goes on is not affected."""
    atexit.register(gc.freeze)


__all__ = [
    "BROKEN_PIPE_STATUS",
    "SUBCOMMANDS",
    "UsageError",
    "build_parser",
    "log_to_stderr",
    "main",
    "output_stream",
    "read_jsonl_objects",
]
