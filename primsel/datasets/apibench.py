"""Gorilla APIBench (Patil et al., "Gorilla: Large Language Model Connected with Massive APIs",
2023), as published in its repository (Apache-2.0), as retrieval-only datasets.

A folder holding ``api/<hub>_api.jsonl`` (one API document per line) and
``apibench/<hub>_eval.json`` (one evaluation item per line) gives three datasets:
``apibench-torchhub``, ``apibench-tensorflowhub`` and ``apibench-huggingface``.

Documents
    Id ``"<hub>/<line>"`` (the 1-based line in the API file, zero-padded to 4 digits, so ids
    sort in file order); title the ``api_call``; name the ``api_name``; text the ``api_name``,
    ``domain``, ``functionality`` and ``description``. A line identical in every field to an
    earlier one is the same document: kept once (the first line), counted in the notes.
Queries
    The text after ``###Instruction:`` (``### Instruction:`` too) up to ``###Output:`` (or the
    end). Task id: the 1-based line of the evaluation file.
Gold document (the rule for ambiguous items)
    The document equal in every field to the item's ``api_data``; else the documents with its
    ``api_call``, narrowed to those that also have its ``api_name`` and ``functionality`` when
    that leaves any; else the documents with its ``api_name`` and ``functionality``. When several
    documents remain, every one of them is gold (they share the call the item asks for; the
    count is in the notes). An item that matches no document is dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from primsel.datasets.asperbench import DatasetError
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    document,
    merge_queries,
    query_task,
    read_jsonl_rows,
    register_loader,
    require_object,
    require_text,
)

#: hub -> (API file, evaluation file) below the folder.
HUBS = {
    "torchhub": ("api/torchhub_api.jsonl", "apibench/torchhub_eval.json"),
    "tensorflowhub": ("api/tensorflowhub_api.jsonl", "apibench/tensorflow_eval.json"),
    "huggingface": ("api/huggingface_api.jsonl", "apibench/huggingface_eval.json"),
}
#: Fields every API document must have.
DOC_FIELDS = ("api_name", "api_call", "domain", "functionality", "description")
_INSTRUCTION = re.compile(r"#{3}\s*Instruction:\s*", re.IGNORECASE)
_OUTPUT = re.compile(r"#{3}\s*Output:", re.IGNORECASE)


def is_apibench(path: Path) -> bool:
    """True when ``path`` is a directory with APIBench's ``api/`` and ``apibench/`` folders."""
    return path.is_dir() and (path / "api").is_dir() and (path / "apibench").is_dir()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _canonical(value)


def instruction(code: str) -> str | None:
    """The query of an evaluation item's ``code``: the text after ``###Instruction:`` up to
    ``###Output:`` (or the end), stripped; None when there is no instruction marker."""
    start = _INSTRUCTION.search(code)
    if start is None:
        return None
    end = _OUTPUT.search(code, start.end())
    return code[start.end():end.start() if end else len(code)].strip()


def _api_documents(api_file: Path, hub: str, name: str) -> tuple[list[Any], list[tuple[str, Any]], dict[str, str], int]:
    """The API documents of a hub's API file, each line that repeats an earlier one kept once.

    Returns
    -------
    (the documents, (document id, its row) of each, canonical row -> document id, the lines left
    out as repeats).

    Raises
    ------
    DatasetError : a malformed line or a document without a required field.
    """
    docs, raw_docs = [], []
    seen: dict[str, str] = {}
    duplicates = 0
    for number, row in read_jsonl_rows(api_file):
        where = f"{api_file}:{number}"
        row = require_object(row, where, DOC_FIELDS)
        for key in ("api_name", "api_call"):
            require_text(row[key], where, key)
        key = _canonical(row)
        if key in seen:
            duplicates += 1
            continue
        doc_id = f"{hub}/{number:04d}"
        seen[key] = doc_id
        text = "\n".join(_text(row[k]).strip() for k in ("api_name", "domain", "functionality", "description"))
        docs.append(document(doc_id, row["api_call"].strip(), text, name, name=row["api_name"]))
        raw_docs.append((doc_id, row))
    return docs, raw_docs, seen, duplicates


def load_apibench(path: Path, hub: str) -> RetrievalDataset:
    """One APIBench hub (see the module docstring for the rules).

    Raises
    ------
    DatasetError : unknown hub, a missing file, a malformed line (file and line named), an API
        document without a required field, an item without ``code``, ``api_data`` or an
        instruction.
    """
    if hub not in HUBS:
        raise DatasetError(f"APIBench has no hub {hub!r}; expected one of {', '.join(HUBS)}")
    name = f"apibench-{hub}"
    api_file, eval_file = (path / f for f in HUBS[hub])
    docs, raw_docs, seen, duplicates = _api_documents(api_file, hub, name)
    by_call: dict[str, list[str]] = {}
    by_name: dict[tuple[str, str], list[str]] = {}
    for doc_id, row in raw_docs:
        by_call.setdefault(_canonical(row["api_call"]), []).append(doc_id)
        by_name.setdefault((_canonical(row["api_name"]), _canonical(row["functionality"])), []).append(doc_id)
    rows = []
    unmatched = ambiguous = 0
    for number, item in read_jsonl_rows(eval_file):
        where = f"{eval_file}:{number}"
        item = require_object(item, where, ("code", "api_data"))
        query = instruction(require_text(item["code"], where, "code"))
        if not query:
            raise DatasetError(f"{where}: 'code' has no '###Instruction:' text")
        gold = _gold(item["api_data"], seen, by_call, by_name, where)
        if not gold:
            unmatched += 1
            continue
        ambiguous += len(gold) > 1
        rows.append((str(number), query, frozenset(gold)))
    kept, notes = merge_queries(rows, eval_file.name)
    if duplicates:
        notes.insert(0, f"{api_file.name}: {duplicates} lines identical to an earlier line kept once")
    if ambiguous:
        notes.append(f"{eval_file.name}: {ambiguous} items match several documents of the same call; all are gold")
    if unmatched:
        notes.append(f"{eval_file.name}: {unmatched} items match no API document and are dropped")
    tasks = tuple(query_task(t, q, g, name) for t, q, g in kept)
    return RetrievalDataset(name=name, documents=tuple(docs), tasks=tasks, notes=tuple(notes))


def _gold(api_data: Any, exact: Mapping[str, str], by_call: Mapping[str, list[str]],
          by_name: Mapping[tuple[str, str], list[str]], where: str) -> list[str]:
    if not isinstance(api_data, Mapping):
        raise DatasetError(f"{where}: 'api_data' must be a JSON object")
    key = _canonical(api_data)
    if key in exact:
        return [exact[key]]
    named = set(by_name.get((_canonical(api_data.get("api_name")), _canonical(api_data.get("functionality"))), ()))
    calls = by_call.get(_canonical(api_data.get("api_call")), [])
    if calls:
        narrowed = [d for d in calls if d in named]
        return narrowed or list(calls)
    return sorted(named)


LOADER = register_loader(RetrievalLoader(
    kind="apibench", description="Gorilla APIBench", recognise=is_apibench, load=load_apibench,
    subsets=tuple(HUBS), example=".../gorilla-apibench/torchhub", order=30))
