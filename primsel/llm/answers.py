"""A run's model answers as a file to commit, and back into the answer cache.

A model's answers are what a generation run costs: hours on a local model, money on an API. Exported, they let
anyone re-score the run, or resume it, on another machine and without the model. The file holds no prompt (the
prompts hold the benchmark's queries): each line is one answer filed under the run's cell, the task and the
prompt's digest, the answer-cache key of its request (:func:`primsel.llm.completion.cache_key`), which a run
computes from the prompt it is about to send::

    {"cell": "9876325ad048", "task": "17", "digest": "3f0c...", "answer": {"text": "...", "finish_reason": "stop",
     "prompt_tokens": 9512, "completion_tokens": 301, ...}}

Files are gzip-compressed JSON Lines (``*.answers.jsonl.gz``), sorted by cell, task and digest, with gzip's
timestamp fixed at 0, so the same answers always give the same bytes. :func:`export_answers` reads the answers from
the cache; :func:`import_answers` writes the ones the cache lacks.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from primsel.files import JsonlError, cache_dir, read_jsonl, write_atomic

__all__ = ["ANSWERS_SUFFIX", "AnswersError", "answer_path", "export_answers", "import_answers"]

#: The suffix of an answers file.
ANSWERS_SUFFIX = ".answers.jsonl.gz"
_DIGEST_CHARS = frozenset("0123456789abcdef")


class AnswersError(ValueError):
    """An answers file cannot be read: the message names the file and the line."""


def answer_path(digest: str) -> Path:
    """Where the answer cache keeps the answer of the request ``digest`` (as :class:`primsel.llm.client.ChatClient`
    reads it)."""
    return cache_dir() / "llm" / digest[:2] / f"{digest}.json"


def export_answers(entries: Iterable[tuple[str, str, str]], path: str | os.PathLike[str]) -> tuple[int, int]:
    """Write the cached answers of ``entries``, ``(cell id, task id, prompt digest)`` triples, to ``path``.

    Returns
    -------
    ``(written, missing)``: answers written, and entries whose answer is not in the cache (left out).

    Raises
    ------
    OSError : ``path`` cannot be written.
    """
    rows = []
    missing = 0
    for cell, task, digest in sorted(set(entries)):
        answer = _cached(digest)
        if answer is None:
            missing += 1
            continue
        rows.append({"cell": cell, "task": task, "digest": digest, "answer": answer})
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as fh:
        for row in rows:
            fh.write((json.dumps(row, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii"))
    write_atomic(Path(path), buffer.getvalue())
    return len(rows), missing


def import_answers(path: str | os.PathLike[str]) -> tuple[int, int]:
    """Put the answers of the file ``path`` into the answer cache, those it does not hold yet.

    Returns
    -------
    ``(added, present)``: answers written to the cache, and answers it held already (left as they are).

    Raises
    ------
    AnswersError : the file is not gzip, a line is not a JSON object with a hex ``digest`` and an ``answer`` object
        holding ``text`` (the message names the file and the line); nothing is written then.
    OSError : the file cannot be read.
    """
    path = Path(path)
    answers = list(_read(path))
    added = present = 0
    for digest, answer in answers:
        target = answer_path(digest)
        if target.exists():
            present += 1
            continue
        entry = {"key": digest, "response": answer, "imported_from": path.name}
        write_atomic(target, json.dumps(entry), durable=False)
        added += 1
    return added, present


def _cached(digest: str) -> dict[str, Any] | None:
    try:
        with open(answer_path(digest), encoding="utf-8") as fh:
            response = json.load(fh)["response"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return response if isinstance(response, dict) else None


def _not_json(error: JsonlError) -> None:
    """Raise the :class:`AnswersError` of a line of an answers file that is not JSON."""
    raise AnswersError(f"{error.path}:{error.line}: not JSON ({error.reason})")


def _read(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
    except (gzip.BadGzipFile, EOFError, UnicodeDecodeError) as exc:
        raise AnswersError(f"{path}: not a gzip-compressed JSON Lines file of answers ({exc})") from None
    out = []
    for number, row in read_jsonl(path, text=text, on_error=_not_json):
        digest = row.get("digest") if isinstance(row, dict) else None
        answer = row.get("answer") if isinstance(row, dict) else None
        if not (isinstance(digest, str) and len(digest) == 64 and set(digest) <= _DIGEST_CHARS):
            raise AnswersError(f"{path}:{number}: expected a 64-character hex 'digest'")
        if not (isinstance(answer, dict) and isinstance(answer.get("text"), str)):
            raise AnswersError(f"{path}:{number}: expected an 'answer' object with a 'text' string")
        out.append((digest, answer))
    return out
