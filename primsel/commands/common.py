"""What every subcommand shares: the error of bad input, the input reader, the output stream, the
count of LLM answers from the cache."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Mapping
from typing import TextIO

from primsel.files import JsonlError, NotUtf8Error, read_jsonl, read_utf8


class UsageError(Exception):
    """Bad command-line input; the message names the problem. Exits with status 2."""


def read_jsonl_objects(
    path: str, expected: str, what: str = "", bad: list[str] | None = None
) -> list[tuple[str, dict]]:
    """The JSON objects of a JSONL input file, one per non-blank line
    (:func:`primsel.files.read_jsonl`).

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
    UsageError : the file cannot be read, or is not UTF-8 (the message names the file and the
        byte offset of the first bad byte), or (without ``bad``) a line is not valid JSON or not
        a JSON object; the message names the file, the line and the column.
    """
    named = f"{what} {path}" if what else path
    try:
        text = read_utf8(path)
    except NotUtf8Error as exc:
        raise UsageError(f"{what + ' ' if what else ''}{exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {named}: {exc.strerror or exc}") from exc

    def report(problem: str) -> None:
        """Raise ``problem`` as a UsageError, or keep it in ``bad`` when given."""
        if bad is None:
            raise UsageError(problem)
        bad.append(problem)

    def not_json(exc: JsonlError) -> None:
        """Report a line that is not valid JSON."""
        report(f"{path} line {exc.line} column {exc.column}: not valid JSON ({exc.reason})")

    out = []
    for number, record in read_jsonl(path, text=text, on_error=not_json):
        where = f"{path} line {number}"
        if isinstance(record, dict):
            out.append((where, record))
        else:
            report(f"{where}: expected a JSON object with {expected}")
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


def summary_stream(out_path: str | None) -> TextIO:
    """Where a command's summary line goes: stdout when ``--out`` took the data (``out_path``
    set), else stderr, so that stdout holds the data alone (``primsel extract a.jsonl > p.jsonl``
    leaves a file of rows)."""
    if out_path:
        return sys.stdout
    return sys.stderr


def report_answers(
    answers: Mapping[str, tuple[int, int]],
    labels: Mapping[str, str],
    log: TextIO,
    command: str = "primsel run",
) -> None:
    """Say on ``log`` how many LLM answers came from the cache, and warn about the cells whose every
    answer did (no endpoint contacted: the cache is not keyed by URL). ``answers``: cell id ->
    (answers, from a cache) (:attr:`primsel.experiments.runner.ExperimentResult.answers`);
    ``labels``: cell id -> label; ``command``: the prefix of the lines."""
    total = sum(n for n, _ in answers.values())
    if not total:
        return
    cached = sum(c for _, c in answers.values())
    print(f"{command}: {cached} of {total} LLM answers from the cache", file=log)
    offline = [cid for cid, (n, c) in answers.items() if n and c == n]
    if offline:
        names = ", ".join(
            labels.get(c, c) + (f" ({c})" if labels.get(c, c) != c else "") for c in offline
        )
        print(
            f"{command}: warning: no LLM endpoint was contacted for {names}: every answer came from the "
            "cache, which is keyed by model name, messages and sampling parameters, not by URL (set "
            "cache_namespace to keep the answers of different endpoints apart)",
            file=log,
        )


def add_test_options(parser: argparse.ArgumentParser) -> None:
    """The options of the paired randomisation test: ``--n-resamples`` (sign flips, default 10000)
    and ``--seed`` (default 0)."""
    parser.add_argument(
        "--n-resamples",
        type=int,
        default=10_000,
        metavar="N",
        help="sign flips of the paired randomisation test (default 10000)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the randomisation test (default 0)"
    )


def check_test_options(args: argparse.Namespace) -> None:
    """UsageError when ``--n-resamples`` is below 1."""
    if args.n_resamples < 1:
        raise UsageError(f"--n-resamples must be >= 1, got {args.n_resamples}")
