"""``primsel extract``: take the programs out of stored model answers, without calling a model.

``primsel extract [--mode aspera|primsel] [--entry NAME] IN.jsonl [--out OUT.jsonl]``

Input: one JSON object per line, ``{"id": "17", "answer": "...", "finish_reason": "stop"}``
(``finish_reason`` optional; ``id`` a string or an integer; ``answer`` a string or null). Blank
lines are skipped. Output: one line per input line, in input order, to ``--out`` (or stdout):
``{"id", "task_id" (the id as a string), "status" (ok|truncated|no_program), "program",
"entry_point", "dropped_lines", "parse_failure", "async_entry"}``
(:class:`primsel.generation.extract.Extraction`), so the output is the input of ``primsel
verify --programs`` as it is (which does not run a ``truncated`` row). The summary line is
``extracted N/M``: N answers gave a program (status ``ok`` and, in ``aspera`` mode, no parser
failure) out of M; it goes to stderr when the rows go to stdout, to stdout with ``--out``. A
line that is not a JSON object with the fields above is reported on stderr
(file, line and, for bad JSON, column) and left out; the other lines still get their rows.
Exit 0; 1 when some lines were left out; 2 on an input that cannot be read or an unwritable
``--out``.

``--mode`` (default ``primsel``) chooses the rules (:mod:`primsel.generation.extract`;
``aspera``: :mod:`primsel.generation.aspera_parser`); ``--entry`` names the function the prompt
asked for (``primsel`` mode: preferred entry point and choice of block; ASPERA ignores it).
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from typing import Any

from primsel.commands.common import UsageError, output_stream, read_jsonl_objects, summary_stream

#: Keys of an output row, in order.
ROW_KEYS = (
    "id",
    "task_id",
    "status",
    "program",
    "entry_point",
    "dropped_lines",
    "parse_failure",
    "async_entry",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``extract`` options to ``parser``."""
    parser.add_argument(
        "answers",
        metavar="IN.jsonl",
        help='stored answers, one JSON object per line: {"id": "17", "answer": "...", '
        '"finish_reason": "stop"} (finish_reason optional)',
    )
    parser.add_argument(
        "--mode",
        choices=("primsel", "aspera"),
        default="primsel",
        help="primsel: our rules (default); aspera: ASPERA's agent, quirks included",
    )
    parser.add_argument(
        "--entry",
        metavar="NAME",
        default=None,
        help="the function the prompt asked for (primsel mode; ASPERA ignores it)",
    )
    parser.add_argument("--out", metavar="OUT.jsonl", help="write the rows here instead of stdout")


def read_answers(
    path: str, bad: list[str] | None = None
) -> list[tuple[Any, str | None, str | None]]:
    """``(id, answer, finish_reason)`` of every non-blank line of ``path`` (read with
    :func:`primsel.commands.common.read_jsonl_objects`).

    Parameters
    ----------
    path : the JSONL file.
    bad : when a list, a line that is not a JSON object with the fields below is not an error:
        its message is appended here and the line left out.

    Raises
    ------
    primsel.commands.common.UsageError : the file cannot be read, or (without ``bad``) a line is not
        a JSON object with an ``id`` (string or integer), an ``answer`` (string or null) and an
        optional ``finish_reason`` (string or null); the message gives the file and line number (and
        the column of bad JSON).
    """
    rows = []
    for where, record in read_jsonl_objects(path, "id and answer", bad=bad):
        ident = record.get("id")
        answer, finish = record.get("answer"), record.get("finish_reason")
        if isinstance(ident, bool) or not isinstance(ident, (str, int)) or ident == "":
            problem = f"{where}: 'id' must be a non-empty string or an integer"
        elif "answer" not in record:
            problem = f"{where}: missing 'answer'"
        elif answer is not None and not isinstance(answer, str):
            problem = f"{where}: 'answer' must be a string or null"
        elif finish is not None and not isinstance(finish, str):
            problem = f"{where}: 'finish_reason' must be a string or null"
        else:
            rows.append((ident, answer, finish))
            continue
        if bad is None:
            raise UsageError(problem)
        bad.append(problem)
    return rows


def row(ident: Any, found: Any) -> dict[str, Any]:
    """The output row of one answer (:data:`ROW_KEYS`)."""
    return {
        "id": ident,
        "task_id": str(ident),
        "status": found.status,
        "program": found.program,
        "entry_point": found.entry_point,
        "dropped_lines": list(found.dropped_lines),
        "parse_failure": found.parse_failure,
        "async_entry": found.async_entry,
    }


def main(args: argparse.Namespace) -> int:
    """Extract every answer; returns the exit status (see the module docstring)."""
    from primsel.generation.extract import extract

    bad: list[str] = []
    answers = read_answers(args.answers, bad)
    for problem in bad:
        print(f"primsel extract: {problem}; line left out", file=sys.stderr)
    extracted = 0
    with ExitStack() as stack:
        out = output_stream(stack, args.out)
        for ident, answer, finish in answers:
            found = extract(answer, args.mode, args.entry, finish)
            extracted += found.status == "ok" and found.parse_failure is None
            out.write(json.dumps(row(ident, found)) + "\n")
    print(
        f"extracted {extracted}/{len(answers)}"
        + (f" ({len(bad)} bad lines left out)" if bad else ""),
        file=summary_stream(args.out),
    )
    return 1 if bad else 0
