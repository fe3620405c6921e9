"""Retrieval-only data in the BEIR layout (Thakur et al., "BEIR: A Heterogeneous Benchmark for
Zero-shot Evaluation of Information Retrieval Models", NeurIPS 2021 Datasets and Benchmarks).

A directory holding::

    corpus.jsonl     {"_id": ..., "title": ..., "text": ...} per line
    queries.jsonl    {"_id": ..., "text": ...} per line
    qrels/test.tsv   a header line, then "query-id <TAB> corpus-id <TAB> score" per line

Ids are kept as given (numbers are read as their decimal text). A document is its title line
and its text; an empty title gives the id as the title. The gold set of a query is the corpus
ids its qrels rows give a score > 0; queries without such a row are not evaluated (BEIR's
rule) and are counted in the notes. A duplicate id, an id holding whitespace (which a TREC run
file cannot hold), a qrels row naming an unknown query or document, or a score that is not a
number is an error naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from primsel.datasets.asperbench import DatasetError
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    document,
    query_task,
    read_jsonl_rows,
    register_loader,
    require_object,
)

#: Files of a BEIR-layout directory.
CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"
QRELS = "qrels/test.tsv"


def is_beir(path: Path) -> bool:
    """True when ``path`` is a directory with a BEIR ``corpus.jsonl``."""
    return path.is_dir() and (path / CORPUS).is_file()


def _id(value: object, where: str, key: str) -> str:
    """``value`` as an id; DatasetError naming ``where`` (file and line) when it is not a
    non-empty string or integer, or holds whitespace (a TREC run file, which ``primsel run`` and
    ``primsel retrieve --out`` write, separates its fields by whitespace)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise DatasetError(f"{where}: {key!r} must be a non-empty string (or an integer), got {value!r}")
    text = str(value)
    if text.split() != [text]:
        raise DatasetError(f"{where}: {key!r} {text!r} holds whitespace; ids are fields of TREC run files, "
                           "which whitespace separates: rename it")
    return text


def _rows(path: Path, what: str) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """``(id, row, "file:line")`` of a BEIR JSON Lines file whose rows have ``_id`` and ``text``;
    an id used twice is an error."""
    seen: set[str] = set()
    for number, row in read_jsonl_rows(path):
        where = f"{path}:{number}"
        row = require_object(row, where, ("_id", "text"))
        row_id = _id(row["_id"], where, "_id")
        if row_id in seen:
            raise DatasetError(f"{where}: {what} id {row_id!r} is used twice")
        seen.add(row_id)
        yield row_id, row, where


def load_beir(path: Path, name: str | None = None) -> RetrievalDataset:
    """Read a BEIR-layout directory.

    Parameters
    ----------
    path : the directory.
    name : dataset name (default ``"beir-<directory name>"``).

    Raises
    ------
    DatasetError : a missing file, a malformed line (named by file and line), duplicate ids,
        qrels naming unknown ids, or no query with a gold document.
    """
    name = name or f"beir-{path.resolve().name}"
    documents = []
    for doc_id, row, where in _rows(path / CORPUS, "document"):
        title, text = row.get("title") or "", row["text"]
        if not isinstance(title, str) or not isinstance(text, str):
            raise DatasetError(f"{where}: 'title' and 'text' must be strings")
        documents.append(document(doc_id, title.strip() or doc_id, text, name))
    seen = {d.id for d in documents}
    queries: dict[str, str] = {}
    for query_id, row, where in _rows(path / QUERIES, "query"):
        if not isinstance(row["text"], str):
            raise DatasetError(f"{where}: 'text' must be a string")
        queries[query_id] = row["text"]
    gold = _read_qrels(path / QRELS, set(queries), seen)
    tasks = [query_task(q, queries[q], gold[q], name) for q in queries if gold.get(q)]
    notes = []
    unjudged = sum(1 for q in queries if not gold.get(q))
    if unjudged:
        notes.append(f"{QUERIES}: {unjudged} queries without a qrels row of score > 0 are not evaluated")
    return RetrievalDataset(name=name, documents=tuple(documents), tasks=tuple(tasks), notes=tuple(notes))


def _read_qrels(path: Path, queries: set[str], documents: set[str]) -> dict[str, set[str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing (a BEIR directory needs {QRELS})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from None
    gold: dict[str, set[str]] = {}
    for number, line in enumerate(lines, start=1):
        if number == 1 or not line.strip():
            continue  # the header line
        parts = line.rstrip("\r\n").split("\t")
        where = f"{path}:{number}"
        if len(parts) != 3:
            raise DatasetError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), "
                               f"got {len(parts)}")
        query_id, doc_id, score = parts
        try:
            value = float(score)
        except ValueError:
            raise DatasetError(f"{where}: score {score!r} is not a number") from None
        if query_id not in queries:
            raise DatasetError(f"{where}: query id {query_id!r} is not in {QUERIES}")
        if doc_id not in documents:
            raise DatasetError(f"{where}: corpus id {doc_id!r} is not in {CORPUS}")
        if value > 0:
            gold.setdefault(query_id, set()).add(doc_id)
    return gold


#: Asked last: any directory with a corpus.jsonl is taken for a BEIR directory.
LOADER = register_loader(RetrievalLoader(
    kind="beir", description=f"a BEIR directory with {CORPUS}", recognise=is_beir,
    load=lambda folder, subset: load_beir(folder), order=90))
