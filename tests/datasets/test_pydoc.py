"""The pydoc dataset: specifications, known-item queries, and a catalogue of a few stdlib packages
walked for real (in a child process)."""

from __future__ import annotations

import pytest

from primsel.datasets import DatasetError, is_retrieval_data, load_retrieval_data
from primsel.datasets.pydoc import first_sentence, known_item_query, load_pydoc, parse_spec


@pytest.mark.parametrize(("spec", "expected"), [
    ("pydoc", (None, (), "full")), ("pydoc:1k", (1000, (), "1k")), ("pydoc:10k", (10000, (), "10k")),
    ("pydoc:250:json,email", (250, ("email", "json"), "250")), ("pydoc:full:json", (None, ("json",), "full")),
])
def test_specifications(spec, expected):
    assert parse_spec(spec) == expected
    assert is_retrieval_data(spec)


@pytest.mark.parametrize("spec", ["pydoc:0", "pydoc:big", "pydoc:1k:not-a-name"])
def test_bad_specifications_are_errors(spec):
    with pytest.raises(DatasetError):
        parse_spec(spec)


def test_first_sentence_skips_signature_lines():
    assert first_sentence("abs(x, /)\n--\n\nReturn the absolute value of the argument.") == \
        "Return the absolute value of the argument."
    assert first_sentence("Join two or more\npathname components. More text.") == "Join two or more pathname components."
    assert first_sentence("No full stop here") == "No full stop here"


def test_known_item_query_removes_the_name_words():
    assert known_item_query("join", "Join two or more pathname components, inserting '/' as needed.") == \
        "two or more pathname components, inserting '/' as needed."
    assert known_item_query("body_encode", "Body-encode a string by converting it first to bytes.") == \
        "a string by converting it first to bytes."
    assert known_item_query("OrderedDict", "Dictionary that remembers insertion order") == \
        "Dictionary that remembers insertion order"  # 'ordered' and 'dict' are not whole words here


@pytest.fixture(scope="module")
def json_catalogue(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path_factory.mktemp("pydoc-cache")))
        return load_pydoc("pydoc:full:json")


def test_a_walked_catalogue_documents_public_callables(json_catalogue):
    data = json_catalogue
    ids = [d.id for d in data.documents]
    assert ids == sorted(ids)
    assert "json.dumps" in ids and "json.JSONDecoder.decode" in ids
    assert not any(part.startswith("_") for i in ids for part in i.split("."))
    dumps = next(d for d in data.documents if d.id == "json.dumps")
    assert dumps.signature.startswith("def dumps(obj, *, skipkeys=False")
    assert dumps.doc.startswith("Serialize ``obj`` to a JSON formatted ``str``.")
    # an object reachable under several paths is kept once, under the shortest
    assert "json.decoder.JSONDecoder" not in ids and "json.JSONDecoder" in ids
    for task in data.tasks:
        assert task.gold == frozenset({task.id}) and len(task.query.split()) >= 3
    assert data.info["python"] and "numpy" in data.info["packages"]


def test_sized_libraries_are_nested(json_catalogue):
    total = len(json_catalogue.documents)
    small = {d.id for d in load_pydoc("pydoc:5:json").documents}
    larger = {d.id for d in load_pydoc("pydoc:12:json").documents}
    assert len(small) == 5 and len(larger) == 12 and small < larger
    with pytest.raises(DatasetError, match=f"the catalogue has {total}"):
        load_pydoc(f"pydoc:{total + 1}:json")
    assert [d.name for d in load_retrieval_data("pydoc:5:json")] == ["pydoc-5-json"]
