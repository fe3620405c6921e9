"""Specifications: canonical form, labels, parsing, nested specifications, source digests, seeds, checks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest

from primsel import spec as specs
from primsel.registry import UnknownComponentError, register
from primsel.retrieval.baselines import RandomRetriever
from primsel.retrieval.base import BaseRetriever


def test_canonical_form_names_a_table_of_only_a_type():
    assert specs.canonical({"type": "bm25"}) == "bm25"
    assert specs.canonical({"type": "hybrid", "members": [{"type": "bm25"}, "dense"]}) == \
        {"type": "hybrid", "members": ["bm25", "dense"]}
    assert specs.canonical("openai", table=True) == {"type": "openai"}


def test_labels_and_tags():
    assert specs.label({"type": "hybrid", "members": ["bm25", "dense"], "method": "wsum", "weights": [0.3, 0.7]}) \
        == "hybrid(bm25+dense, method=wsum, weights=0.3+0.7)"
    assert specs.tag({"type": "my mod:Cls"}) == "my_mod:Cls"


@pytest.mark.parametrize(("text", "expected"), [
    ("bm25", "bm25"), (" my_mod:Cls ", "my_mod:Cls"), ('{"type": "bm25", "k1": 2}', {"type": "bm25", "k1": 2}),
])
def test_parse(text, expected):
    assert specs.parse(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ('{"type": "bm25",', "invalid JSON table"), ('{"k1": 2}', "needs a 'type' key"), ("  ", "empty specification"),
])
def test_parse_errors(text, problem):
    with pytest.raises(specs.SpecError, match=problem):
        specs.parse(text)


def test_walk_finds_nested_specifications_under_any_key():
    spec = {"type": "stack", "stages": [{"type": "bm25", "k1": 2.0}, "my_mod:Cls"],
            "base": {"type": "hybrid", "members": ["tfidf", {"type": "dense"}]},
            "options": {"fallback": "prior"}, "method": "wsum", "view": "full"}
    assert list(specs.walk(spec)) == [
        ("", spec),
        ("stages[0]", {"type": "bm25", "k1": 2.0}),
        ("stages[1]", "my_mod:Cls"),
        ("base", spec["base"]),
        ("base.members[0]", "tfidf"),
        ("base.members[1]", {"type": "dense"}),
        ("options.fallback", "prior"),
    ]
    assert specs.names(spec) == ["stack", "bm25", "my_mod:Cls", "hybrid", "tfidf", "dense", "prior"]


PLUGIN = "from primsel.retrieval.base import BaseRetriever\n\n\nclass Plugged(BaseRetriever):\n    first = {first!r}\n"


def test_sources_follow_plug_ins_nested_under_any_key(tmp_path, monkeypatch):
    (tmp_path / "plug_mod_spec.py").write_text(PLUGIN.format(first="g"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plug_mod_spec", raising=False)
    spec = {"type": "hybrid", "members": ["bm25"], "stages": [{"type": "plug_mod_spec:Plugged"}]}
    before = specs.sources(spec)
    assert set(before) == {"hybrid", "bm25", "plug_mod_spec:Plugged"} and "?" not in before.values()
    (tmp_path / "plug_mod_spec.py").write_text(PLUGIN.format(first="h"))
    after = specs.sources(spec)
    assert after["plug_mod_spec:Plugged"] != before["plug_mod_spec:Plugged"]
    assert {k: after[k] for k in ("hybrid", "bm25")} == {k: before[k] for k in ("hybrid", "bm25")}
    assert specs.sources("no_such_module_xyz:Thing") == {"no_such_module_xyz:Thing": "?"}


def test_with_seed_passes_the_seed_to_classes_that_take_one():
    assert specs.with_seed("random", 7) == {"type": "random", "seed": 7}
    assert specs.with_seed({"type": "random"}, 7) == {"type": "random", "seed": 7}
    assert specs.with_seed({"type": "random", "seed": 1}, 7) == {"type": "random", "seed": 1}  # the table wins
    assert specs.with_seed("bm25", 7) == "bm25"  # no seed parameter
    table = {"type": "hybrid", "members": ["random"]}
    assert specs.with_seed(table, 7) is table  # members are left alone
    instance = RandomRetriever(seed=2)
    assert specs.with_seed(instance, 7) is instance
    with pytest.raises(UnknownComponentError):
        specs.with_seed("nope", 7)


class Encoder:
    """A type pydantic has no schema for: values of it cannot be checked."""


@pytest.mark.parametrize("value,hint,expected", [
    (1, float, True), (True, float, False), (True, int, False), (1.5, int, False), ("a", str, True),
    (None, float | None, True), ("x", float | None, False), ([1, 2.5], Sequence[float], True),
    (["a"], Sequence[float], False), ("ab", Sequence[str], False), ({"a": 1}, Mapping[str, Any], True),
    ("rrf", Literal["rrf", "wsum"], True), ("max", Literal["rrf", "wsum"], False),
    ("x", Encoder, None), ("p.jsonl", str | os.PathLike[str] | None, True), ([1, 2], tuple[float, ...], True),
    ("5", int, False),
])
def test_fits(value, hint, expected):
    assert specs.fits(value, hint) is expected


class _Plain(BaseRetriever):
    """A plug-in that checks nothing itself: the annotations are all there is."""

    def __init__(self, weight: float = 1.0, names: Sequence[str] = ()) -> None:
        self.weight = weight
        self.names = names

    def score(self, queries):
        return {q: {} for q in queries}


@pytest.mark.parametrize(("spec", "key", "problem"), [
    ("bm99", "", "unknown retriever 'bm99'"),
    ({"type": "bm25", "zzz": 1}, "zzz", "unknown retriever parameter for 'bm25'"),
    ({"type": "test_plain", "weight": "heavy"}, "weight", "retriever 'test_plain' expects float, got string 'heavy'"),
    ({"type": "hybrid", "members": ["bm25", {"type": "test_plain", "names": "ab"}]}, "members[1].names",
     "expects Sequence[str], got string 'ab'"),
    ({"type": "hybrid", "members": ["bm25", "nope"]}, "members[1]", "members[1]: unknown retriever 'nope'"),
    ({"type": "hybrid", "method": "max"}, "", "method must be one of 'rrf', 'wsum'"),
    ({"members": ["bm25"]}, "", "a table needs a 'type' string"),
])
def test_check_names_the_faulty_key(spec, key, problem):
    register("test_plain")(_Plain)
    with pytest.raises(specs.SpecError) as info:
        specs.check(spec)
    assert info.value.key == key and problem in info.value.problem


def test_check_accepts_valid_nested_specifications():
    register("test_plain")(_Plain)
    specs.check({"type": "hybrid", "members": ["bm25", {"type": "test_plain", "weight": 2, "names": ["a"]}],
                 "weights": [1, 0.5], "method": "wsum"})
