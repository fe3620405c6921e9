"""Kinds of retrieval-only data are declared by their loader modules: the package recognises,
loads and names them from the registered declarations. A toy kind registered here, as a loader
module registers its own, is read by ``primsel retrieve`` with no edit anywhere else."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from primsel.commands.retrieve import add_arguments
from primsel.commands.retrieve import main as retrieve_main
from primsel.datasets import (
    DatasetError,
    is_retrieval_data,
    load_retrieval_data,
    resolve_dataset,
    retrieval_data_kinds,
)
from primsel.datasets.retrieval_only import (
    RetrievalDataset,
    RetrievalLoader,
    document,
    query_task,
    read_jsonl_rows,
    register_loader,
    require_object,
    require_text,
    retrieval_loaders,
    unregister_loader,
)

MARKER = "toy.marker"
ITEMS = "items.jsonl"
BUILT_IN = ("a BEIR directory with corpus.jsonl, the MetaTool or Gorilla APIBench folder or one of their "
            "subsets (.../metatool/multi, .../gorilla-apibench/torchhub), or pydoc[:SIZE]")


def is_toy(path: Path) -> bool:
    """A directory holding the marker file."""
    return path.is_dir() and (path / MARKER).is_file()


def load_toy(folder: Path, subset: str | None) -> RetrievalDataset:
    """``items.jsonl``: ``{"doc", "text"}`` and ``{"query", "text", "gold"}`` lines."""
    name = f"toy-{folder.name}"
    docs, tasks = [], []
    for number, row in read_jsonl_rows(folder / ITEMS):
        where = f"{folder / ITEMS}:{number}"
        row = require_object(row, where, ("text",))
        text = require_text(row["text"], where, "text")
        if "doc" in row:
            docs.append(document(row["doc"], row["doc"], text, name))
        else:
            tasks.append(query_task(row["query"], text, row["gold"], name))
    return RetrievalDataset(name=name, documents=tuple(docs), tasks=tuple(tasks))


TOY = RetrievalLoader(kind="toy", description=f"a toy folder with {MARKER}", recognise=is_toy, load=load_toy,
                      order=40)


@pytest.fixture
def toy():
    """The toy kind, registered for one test as a loader module registers its declaration."""
    register_loader(TOY)
    try:
        yield TOY
    finally:
        unregister_loader("toy")


def write_toy(root: Path, marker: bool = True) -> Path:
    rows = [{"doc": "t1", "text": "rain forecast for the weather"},
            {"doc": "t2", "text": "currency exchange rates"},
            {"doc": "t3", "text": "stock market prices"},
            {"query": "q1", "text": "rain tomorrow", "gold": ["t1"]},
            {"query": "q2", "text": "exchange euros", "gold": ["t2"]},
            {"query": "q3", "text": "stock", "gold": ["t1"]}]
    root.mkdir(parents=True)
    (root / ITEMS).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if marker:
        (root / MARKER).write_text("", encoding="utf-8")
    return root


def test_the_built_in_kinds_in_recognition_order():
    # a kind added beside them (one more loader module) may fall anywhere before BEIR
    shipped = {"pydoc", "metatool", "apibench", "beir"}
    loaders = retrieval_loaders()
    assert [(loader.kind, loader.order) for loader in loaders if loader.kind in shipped] == [
        ("pydoc", 10), ("metatool", 20), ("apibench", 30), ("beir", 90)]
    assert loaders[-1].kind == "beir"  # any folder with a corpus.jsonl looks like BEIR: tried last
    if {loader.kind for loader in loaders} == shipped:
        assert retrieval_data_kinds() == BUILT_IN


def test_a_registered_kind_is_recognised_and_loaded(tmp_path, toy):
    folder = write_toy(tmp_path / "small")
    assert is_retrieval_data(folder)
    assert not is_retrieval_data(write_toy(tmp_path / "unmarked", marker=False))
    (data,) = load_retrieval_data(folder)
    assert data.name == "toy-small"
    assert [d.id for d in data.documents] == ["t1", "t2", "t3"]
    assert [(t.id, t.query, sorted(t.gold)) for t in data.tasks] == [
        ("q1", "rain tomorrow", ["t1"]), ("q2", "exchange euros", ["t2"]), ("q3", "stock", ["t1"])]


def test_the_messages_list_a_registered_kind(tmp_path, toy):
    # in recognition order: the toy (order 40) before BEIR (90)
    kinds = retrieval_data_kinds()
    assert kinds.index("a toy folder with toy.marker, ") < kinds.index("a BEIR directory with corpus.jsonl, ")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(DatasetError) as raised:
        load_retrieval_data(plain)
    assert str(raised.value) == f"{plain}: not retrieval-only data (expected {kinds})"
    with pytest.raises(DatasetError, match=r"retrieval-only data: a toy folder with toy\.marker, "):
        resolve_dataset(tmp_path / "nowhere")


def test_retrieve_reads_a_registered_kind(tmp_path, toy, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--retriever", "bm25", "--k", "1", "--data", str(write_toy(tmp_path / "small"))])
    assert retrieve_main(args) == 0
    out = capsys.readouterr()
    assert "3 tasks (toy-small, 3 documents)" in out.err
    metrics = dict(line.split() for line in out.out.splitlines()[1:] if len(line.split()) == 2)
    # q1 "rain" and q2 "exchange" match their gold document only; q3 "stock" matches t3 only, and
    # its gold t1 (score 0, tied with t2, ordered by id) is second
    assert float(metrics["recall@5"]) == 1.0
    assert float(metrics["mrr"]) == pytest.approx((1 + 1 + 1 / 2) / 3, abs=1e-4)
    assert float(metrics["set_recall_macro"]) == pytest.approx(2 / 3, abs=1e-4)


def test_an_unregistered_kind_is_no_longer_recognised(tmp_path):
    folder = write_toy(tmp_path / "small")
    before = retrieval_data_kinds()
    register_loader(TOY)
    assert "toy.marker" in retrieval_data_kinds()
    unregister_loader("toy")
    assert not is_retrieval_data(folder)
    assert retrieval_data_kinds() == before
    with pytest.raises(KeyError):
        unregister_loader("toy")


def test_a_kind_is_registered_once(toy):
    assert register_loader(toy) is toy  # the same declaration again (a module imported twice)
    with pytest.raises(ValueError, match=r"retrieval loader 'beir' is already registered \(by primsel\.datasets\.beir\)"):
        register_loader(RetrievalLoader(kind="beir", description="another", recognise=is_toy, load=load_toy))


@pytest.mark.parametrize(("fields", "problem"), [
    ({"recognise": is_toy, "recognise_name": str.isalpha}, "give exactly one of recognise"),
    ({}, "give exactly one of recognise"),
    ({"recognise": is_toy, "description": " "}, "kind and description must be non-empty"),
    ({"recognise_name": str.isalpha, "subsets": ("a",), "example": ".../x/a"}, "data named by a text has no subsets"),
    ({"recognise": is_toy, "subsets": ("a",)}, "give an example subset path"),
])
def test_a_malformed_declaration_is_refused(fields, problem):
    fields = {"kind": "toy", "description": "a toy folder", "load": load_toy, **fields}
    with pytest.raises(ValueError, match=problem):
        RetrievalLoader(**fields)
