"""MetaTool (Huang et al., "MetaTool Benchmark for Large Language Models: Deciding Whether to Use
Tools and Which to Use", ICLR 2024), as published in its repository (MIT licence).

Two retrieval-only datasets from one folder:

* ``metatool-single``: the single-tool queries of ``all_clean_data.csv`` (columns ``Query``,
  ``Tool``) over the 199 tools of ``plugin_des.json`` (``{tool name: description}``);
* ``metatool-multi``: the queries of ``multi_tool_query_golden.json`` (``[{"query", "tool":
  [name, name]}]``) over the 47 merged tools of ``big_tool_des.json``.

A document is the tool name (its id and title) and its description. Task ids: the data row of
the CSV (``"1"`` is the first row after the header) and the 1-based position in the multi-tool
list. Repeated queries follow :func:`primsel.datasets.retrieval_only.merge_queries`: compared
without surrounding quotes and white space, a repeat with the same tool is kept once, a query
given different tools is dropped. A tool name that is not in the description file, an empty
query or a malformed row is an error naming the file and line (or list position).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from primsel.datasets.asperbench import DatasetError
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    document,
    merge_queries,
    query_task,
    read_json,
    read_text,
    register_loader,
    require_text,
)

SINGLE_TOOLS = "plugin_des.json"
SINGLE_QUERIES = "all_clean_data.csv"
MULTI_TOOLS = "big_tool_des.json"
MULTI_QUERIES = "multi_tool_query_golden.json"
#: Subsets of a MetaTool folder: name -> dataset name.
SUBSETS = {"single": "metatool-single", "multi": "metatool-multi"}


def is_metatool(path: Path) -> bool:
    """True when ``path`` is a directory holding MetaTool's tool descriptions."""
    return path.is_dir() and (path / SINGLE_TOOLS).is_file() and (path / SINGLE_QUERIES).is_file()


def _tools(path: Path, name: str) -> list:
    raw = read_json(path)
    if not isinstance(raw, dict) or not raw:
        raise DatasetError(f"{path}: expected a JSON object {{tool name: description}}")
    docs = []
    for tool, text in raw.items():
        require_text(text, f"{path}: tool {tool!r}", "description")
        docs.append(document(tool, tool, text.strip(), name))
    return docs


def load_metatool(path: Path, subset: str) -> RetrievalDataset:
    """One MetaTool dataset: ``subset`` = ``"single"`` or ``"multi"`` (see the module docstring).

    Raises
    ------
    DatasetError : unknown subset, a missing or malformed file (file and line named), a tool
        not in the description file.
    """
    if subset not in SUBSETS:
        raise DatasetError(f"MetaTool has no subset {subset!r}; expected one of {', '.join(SUBSETS)}")
    name = SUBSETS[subset]
    if subset == "single":
        docs = _tools(path / SINGLE_TOOLS, name)
        rows = _single_rows(path / SINGLE_QUERIES, {d.id for d in docs})
        where = SINGLE_QUERIES
    else:
        docs = _tools(path / MULTI_TOOLS, name)
        rows = _multi_rows(path / MULTI_QUERIES, {d.id for d in docs})
        where = MULTI_QUERIES
    kept, notes = merge_queries(rows, where)
    tasks = tuple(query_task(t, q, g, name) for t, q, g in kept)
    return RetrievalDataset(name=name, documents=tuple(docs), tasks=tasks, notes=tuple(notes))


def _single_rows(path: Path, tools: set[str]) -> list[tuple[str, str, frozenset[str]]]:
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["Query", "Tool"]:
            raise DatasetError(f"{path}:1: expected the header 'Query,Tool', got {header!r}")
        rows = []
        line = reader.line_num
        for number, row in enumerate(reader, start=1):
            where = f"{path}:{line + 1}"
            line = reader.line_num
            if len(row) != 2:
                raise DatasetError(f"{where}: expected 2 fields (Query, Tool), got {len(row)}")
            query, tool = row[0], row[1].strip()
            require_text(query, where, "Query")
            if tool not in tools:
                raise DatasetError(f"{where}: tool {tool!r} is not in {SINGLE_TOOLS}")
            rows.append((str(number), query, frozenset([tool])))
    except csv.Error as exc:
        raise DatasetError(f"{path}:{reader.line_num}: malformed CSV: {exc}") from None
    return rows


def _multi_rows(path: Path, tools: set[str]) -> list[tuple[str, str, frozenset[str]]]:
    raw = read_json(path)
    if not isinstance(raw, list):
        raise DatasetError(f"{path}: expected a JSON list of {{'query', 'tool'}} objects")
    rows = []
    for number, item in enumerate(raw, start=1):
        where = f"{path}: item {number}"
        if not isinstance(item, dict) or "query" not in item or "tool" not in item:
            raise DatasetError(f"{where}: expected an object with 'query' and 'tool'")
        require_text(item["query"], where, "query")
        names = item["tool"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DatasetError(f"{where}: 'tool' must be a non-empty list of tool names")
        unknown = [n for n in names if n not in tools]
        if unknown:
            raise DatasetError(f"{where}: tools {unknown} are not in {MULTI_TOOLS}")
        rows.append((str(number), item["query"], frozenset(names)))
    return rows


LOADER = register_loader(RetrievalLoader(
    kind="metatool", description="MetaTool", recognise=is_metatool, load=load_metatool,
    subsets=tuple(SUBSETS), example=".../metatool/multi", order=20))
