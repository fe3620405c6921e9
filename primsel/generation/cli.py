"""``primsel extract``: take the programs out of stored model answers, without calling a model.

``primsel extract [--mode aspera|primsel] [--entry NAME] IN.jsonl [--out OUT.jsonl]``

Input: one JSON object per line, ``{"id": "17", "answer": "...", "finish_reason": "stop"}``
(``finish_reason`` optional; ``id`` a string or an integer; ``answer`` a string or null). Blank
lines are skipped. Output: one line per input line, in input order, to ``--out`` (or stdout):
``{"id", "status" (ok|truncated|no_program), "program", "entry_point", "dropped_lines",
"parse_failure", "async_entry"}`` (:class:`primsel.generation.extract.Extraction`). The last
stdout line is ``extracted N/M``: N answers gave a program (status ``ok`` and, in ``aspera``
mode, no parser failure) out of M. Exit 0; 2 on an unreadable input (the message names the line)
or an unwritable ``--out``.

``--mode`` (default ``primsel``) chooses the rules (:mod:`primsel.generation.extract`;
``aspera``: :mod:`primsel.generation.aspera_parser`); ``--entry`` names the function the prompt
asked for (``primsel`` mode: preferred entry point and choice of block; ASPERA ignores it).
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from typing import Any

#: Keys of an output row, in order.
ROW_KEYS = ("id", "status", "program", "entry_point", "dropped_lines", "parse_failure", "async_entry")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``extract`` options to ``parser``."""
    parser.add_argument("answers", metavar="IN.jsonl",
                        help='stored answers, one JSON object per line: {"id": "17", "answer": "...", '
                             '"finish_reason": "stop"} (finish_reason optional)')
    parser.add_argument("--mode", choices=("primsel", "aspera"), default="primsel",
                        help="primsel: our rules (default); aspera: ASPERA's agent, quirks included")
    parser.add_argument("--entry", metavar="NAME", default=None,
                        help="the function the prompt asked for (primsel mode; ASPERA ignores it)")
    parser.add_argument("--out", metavar="OUT.jsonl", help="write the rows here instead of stdout")


def read_answers(path: str) -> list[tuple[Any, str | None, str | None]]:
    """``(id, answer, finish_reason)`` of every non-blank line of ``path`` (read with
    :func:`primsel.cli.read_jsonl_objects`).

    Raises
    ------
    primsel.cli.UsageError : the file cannot be read, or a line is not a JSON object with an
        ``id`` (string or integer), an ``answer`` (string or null) and an optional
        ``finish_reason`` (string or null); the message gives the file and line number.
    """
    from primsel.cli import UsageError, read_jsonl_objects

    rows = []
    for where, record in read_jsonl_objects(path, "id and answer"):
        ident = record.get("id")
        if isinstance(ident, bool) or not isinstance(ident, (str, int)) or ident == "":
            raise UsageError(f"{where}: 'id' must be a non-empty string or an integer")
        if "answer" not in record:
            raise UsageError(f"{where}: missing 'answer'")
        answer, finish = record["answer"], record.get("finish_reason")
        if answer is not None and not isinstance(answer, str):
            raise UsageError(f"{where}: 'answer' must be a string or null")
        if finish is not None and not isinstance(finish, str):
            raise UsageError(f"{where}: 'finish_reason' must be a string or null")
        rows.append((ident, answer, finish))
    return rows


def row(ident: Any, found: Any) -> dict[str, Any]:
    """The output row of one answer (:data:`ROW_KEYS`)."""
    return {"id": ident, "status": found.status, "program": found.program, "entry_point": found.entry_point,
            "dropped_lines": list(found.dropped_lines), "parse_failure": found.parse_failure,
            "async_entry": found.async_entry}


def main(args: argparse.Namespace) -> int:
    """Extract every answer; returns the exit status (see the module docstring)."""
    from primsel.cli import output_stream
    from primsel.generation.extract import extract

    answers = read_answers(args.answers)
    extracted = 0
    with ExitStack() as stack:
        out = output_stream(stack, args.out)
        for ident, answer, finish in answers:
            found = extract(answer, args.mode, args.entry, finish)
            extracted += found.status == "ok" and found.parse_failure is None
            out.write(json.dumps(row(ident, found)) + "\n")
    print(f"extracted {extracted}/{len(answers)}")
    return 0
