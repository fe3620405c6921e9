"""Retrieval-only datasets: a corpus of documents, queries and their gold documents.

A retrieval-only dataset has no programs and no simulator: each task is a query and the ids of
its gold documents (:class:`primsel.types.Task` with only ``id``, ``query``, ``gold`` and
``source``), and the corpus is a tuple of :class:`primsel.types.Primitive` of kind
``"document"`` (ids kept as the source gives them, as strings). Retrievers rank the corpus as
they rank the assistant library; metrics and reports work unchanged; generation and execution
refuse such tasks.

The loaders (:mod:`primsel.datasets.beir`, :mod:`primsel.datasets.metatool`,
:mod:`primsel.datasets.apibench`, :mod:`primsel.datasets.pydoc`) check what they read and name
the file and line of anything malformed (:class:`primsel.datasets.DatasetError`). What they
merge or drop (repeated queries, contradictory labels, duplicate documents, items without a
gold document) is counted in :attr:`RetrievalDataset.notes`.

Each loader module declares what it reads with one :class:`RetrievalLoader`, registered at
import by :func:`register_loader`; :mod:`primsel.datasets` imports every module of its package
and recognises and loads data through the declarations (:func:`retrieval_loaders`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primsel.datasets.asperbench import DatasetError
from primsel.files import JsonlError, read_jsonl
from primsel.types import DOCUMENT_KIND, Primitive, Task


@dataclass(frozen=True)
class RetrievalDataset:
    """A corpus with queries and gold documents, and nothing to execute.

    Parameters
    ----------
    name : dataset name, also the tasks' ``source`` (``"metatool-single"``, ``"apibench-torchhub"``,
        ``"beir-scifact"``, ``"pydoc-10k"``).
    documents : the corpus, in corpus order; ids unique.
    tasks : the queries, each with a non-empty gold set of document ids; ids unique.
    notes : what the loader merged or dropped, and by which rule (one sentence each).
    info : facts about the data to record beside results (e.g. package versions for ``pydoc``).

    Raises
    ------
    DatasetError : duplicate document or task ids, an empty corpus or no task, a task without
        gold or with a gold id not in the corpus.
    """

    name: str
    documents: tuple[Primitive, ...]
    tasks: tuple[Task, ...]
    notes: tuple[str, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        ids = [d.id for d in self.documents]
        if not ids:
            raise DatasetError(f"{self.name}: the corpus has no documents")
        if len(set(ids)) != len(ids):
            raise DatasetError(f"{self.name}: duplicate document ids")
        if not self.tasks:
            raise DatasetError(f"{self.name}: no queries with a gold document")
        if len({t.id for t in self.tasks}) != len(self.tasks):
            raise DatasetError(f"{self.name}: duplicate query ids")
        known = set(ids)
        for t in self.tasks:
            if not t.gold:
                raise DatasetError(f"{self.name}: query {t.id!r} has no gold document")
            unknown = sorted(t.gold - known)
            if unknown:
                raise DatasetError(f"{self.name}: query {t.id!r} has gold ids not in the corpus: {unknown[:5]}")


@dataclass(frozen=True)
class RetrievalLoader:
    """The declaration of one kind of retrieval-only data: how a path is recognised as it and
    how it is loaded. A loader module registers one with :func:`register_loader`.

    Parameters
    ----------
    kind : a short name (``"beir"``, ``"metatool"``); unique among the registered loaders.
    description : how messages name the data. Without ``subsets``: a noun phrase (``"a BEIR
        directory with corpus.jsonl"``, ``"pydoc[:SIZE]"``). With ``subsets``: the name of the
        folder (``"MetaTool"``), which messages write as ``"the MetaTool folder or one of its
        subsets (EXAMPLE)"``, folders with subsets listed together.
    recognise : ``recognise(path) -> bool``, True when the existing ``path`` (a
        :class:`~pathlib.Path`, ``~`` expanded) holds this kind of data. Exactly one of
        ``recognise`` and ``recognise_name`` is given.
    recognise_name : for data named by a text rather than a path (``pydoc:10k``):
        ``recognise_name(text) -> bool`` on the text as given; asked only when no file or
        directory of that name exists.
    load : ``load(folder, subset) -> RetrievalDataset``: ``folder`` the recognised path (for
        data named by a text, that text as a path), ``subset`` one of ``subsets``, the text
        itself for data named by a text, else None. Raises :class:`DatasetError` naming the file
        and line of anything malformed.
    subsets : the names of the datasets one folder holds, in loading order; a folder gives all
        of them, and ``FOLDER/NAME`` (a path that does not exist, below a recognised folder)
        gives the one named.
    example : a subset path for messages (``".../metatool/multi"``); required with ``subsets``.
    order : recognition order: lower is asked first, ties by ``kind``. Layouts that a more
        general one would also match go first (a BEIR directory, any folder with a
        ``corpus.jsonl``, is asked last: 90).

    Raises
    ------
    ValueError : an empty ``kind`` or ``description``, not exactly one of ``recognise`` and
        ``recognise_name``, subsets for data named by a text, or subsets without an example.
    """

    kind: str
    description: str
    load: Callable[[Path, str | None], RetrievalDataset]
    recognise: Callable[[Path], bool] | None = None
    recognise_name: Callable[[str], bool] | None = None
    subsets: tuple[str, ...] = ()
    example: str = ""
    order: int = 50

    def __post_init__(self) -> None:
        where = f"retrieval loader {self.kind!r}"
        if not self.kind.strip() or not self.description.strip():
            raise ValueError(f"{where}: kind and description must be non-empty")
        if (self.recognise is None) == (self.recognise_name is None):
            raise ValueError(f"{where}: give exactly one of recognise (a path) and recognise_name (a text)")
        if self.subsets and self.recognise_name is not None:
            raise ValueError(f"{where}: data named by a text has no subsets")
        if self.subsets and not self.example:
            raise ValueError(f"{where}: give an example subset path for messages (\".../folder/subset\")")


# kind -> declaration; filled by the loader modules as they are imported
_LOADERS: dict[str, RetrievalLoader] = {}


def register_loader(loader: RetrievalLoader) -> RetrievalLoader:
    """Register ``loader`` (a loader module calls this at import) and return it.

    Raises
    ------
    ValueError : another declaration of the same kind is registered.
    """
    known = _LOADERS.get(loader.kind)
    if known is not None and known != loader:
        raise ValueError(f"retrieval loader {loader.kind!r} is already registered "
                         f"(by {getattr(known.load, '__module__', '?')})")
    _LOADERS[loader.kind] = loader
    return loader


def unregister_loader(kind: str) -> None:
    """Remove the declaration of ``kind`` (tests that register a loader of their own).

    Raises
    ------
    KeyError : no loader of that kind is registered.
    """
    del _LOADERS[kind]


def retrieval_loaders() -> tuple[RetrievalLoader, ...]:
    """The registered declarations in recognition order (``order``, then ``kind``)."""
    return tuple(sorted(_LOADERS.values(), key=lambda loader: (loader.order, loader.kind)))


def document(doc_id: str, title: str, text: str, source: str, name: str | None = None) -> Primitive:
    """A corpus document as a :class:`primsel.types.Primitive` of kind ``"document"``.

    Parameters
    ----------
    doc_id : the document id, as the source gives it.
    title : its title line (``Primitive.signature``; the ``"signature"`` view).
    text : its body (``Primitive.doc``); the ``"full"`` view is the title line, then the body.
    source : the dataset name (``Primitive.module``).
    name : the bare name (``"name"`` view); default the title.
    """
    return Primitive(id=str(doc_id), name=title if name is None else name, module=source, kind=DOCUMENT_KIND,
                     signature=title, doc=text)


def query_task(task_id: str, query: str, gold: Iterable[str], source: str) -> Task:
    """A retrieval-only :class:`primsel.types.Task`: an id, a query, a gold set, no programs."""
    return Task(id=str(task_id), query=query, gold=frozenset(str(g) for g in gold), source=source)


def clean_query(text: str) -> str:
    """A query as compared for duplicates and ranked: surrounding white space removed, then one
    pair of surrounding double quotes (and the white space inside them)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].strip()
    return text


def merge_queries(rows: Iterable[tuple[str, str, frozenset[str]]], where: str) -> tuple[list[tuple[str, str, frozenset[str]]], list[str]]:
    """Apply the duplicate-query rule to ``(task id, query, gold)`` rows, in input order.

    The rule: queries are compared after :func:`clean_query`. A query repeated with the same
    gold set is kept once (its first row); a query repeated with different gold sets is a
    contradictory label and dropped with all its rows.

    Returns
    -------
    (kept rows, notes): the rows kept, in input order, their queries cleaned; a note for each
    kind of row merged or dropped (none when nothing was).
    """
    first: dict[str, int] = {}
    kept: list[tuple[str, str, frozenset[str]]] = []
    conflicted: set[str] = set()
    repeats = 0
    for task_id, query, gold in rows:
        text = clean_query(query)
        if text in first:
            if kept[first[text]][2] != gold:
                conflicted.add(text)
            else:
                repeats += 1
            continue
        first[text] = len(kept)
        kept.append((task_id, text, gold))
    notes = []
    if repeats:
        notes.append(f"{where}: {repeats} repeated queries with the same gold set kept once (their first row)")
    if conflicted:
        notes.append(f"{where}: {len(conflicted)} queries that appear with different gold sets dropped "
                     "(contradictory labels)")
    return [row for row in kept if row[1] not in conflicted], notes


def read_text(path: Path) -> str:
    """A UTF-8 text file, or :class:`DatasetError` naming the file and the problem."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_json(path: Path) -> Any:
    """A JSON file, or :class:`DatasetError` naming the file and the line of a syntax error or
    of a lone surrogate escape (:func:`check_unicode`)."""
    text = read_text(path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    problem = check_unicode(value)
    if problem:
        line = next((n for n, raw in enumerate(text.splitlines(), start=1) if _SURROGATE_ESCAPE.search(raw)), 1)
        raise DatasetError(f"{path}:{line}: {problem}")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def check_unicode(value: Any) -> str | None:
    """None when every string in a JSON value (keys included) is valid Unicode text, else what
    is wrong: JSON's ``\\uD83D`` escape of half a surrogate pair, without its other half,
    gives a string that no UTF-8 text can hold (so it could not be hashed, embedded or written).
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                i = exc.start
                return (f"the text {item[max(0, i - 20):i]!r}... holds a lone surrogate (escape "
                        f"\\u{ord(item[i]):04x}, half of a pair without the other half): not valid Unicode text")
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def read_jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON Lines file
    (:func:`primsel.files.read_jsonl`), each checked by :func:`check_unicode`.

    Raises
    ------
    DatasetError : the file is missing, unreadable or not UTF-8, or a line is not JSON or
        holds a lone surrogate escape (:func:`check_unicode`); the message names the file and
        the line.
    """
    def not_json(exc: JsonlError) -> None:
        raise DatasetError(f"{path}:{exc.line}: invalid JSON: {exc.reason} (column {exc.column})")

    for number, value in read_jsonl(path, text=read_text(path), on_error=not_json):
        problem = check_unicode(value)
        if problem:
            raise DatasetError(f"{path}:{number}: {problem}")
        yield number, value


def require_text(value: Any, where: str, key: str, empty: bool = False) -> str:
    """``value`` when it is a string (non-empty unless ``empty``), else :class:`DatasetError`
    naming ``where`` (file:line) and the key."""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {key!r} must be a string, got {type(value).__name__} {value!r}"[:300])
    if not empty and not value.strip():
        raise DatasetError(f"{where}: {key!r} is empty")
    return value


def require_object(value: Any, where: str, keys: Sequence[str]) -> Mapping[str, Any]:
    """``value`` when it is a JSON object holding ``keys``, else :class:`DatasetError`."""
    if not isinstance(value, Mapping):
        raise DatasetError(f"{where}: expected a JSON object, got {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise DatasetError(f"{where}: missing {', '.join(repr(k) for k in missing)}")
    return value
