"""The open registry: names, "module:Class" paths, tables, and what is not a component."""

from __future__ import annotations

import pytest

from primsel.registry import UnknownComponentError, build, register, resolve
from primsel.retrieval.bm25 import BM25Retriever


def test_names_paths_and_tables_build_the_same_class():
    assert resolve("bm25") is BM25Retriever
    assert resolve("primsel.retrieval.bm25:BM25Retriever") is BM25Retriever
    assert build({"type": "bm25", "k1": 2.0}).k1 == 2.0


def test_a_path_to_a_function_is_not_a_component():
    with pytest.raises(UnknownComponentError, match="retriever 'os:system' is not a class"):
        resolve("os:system")


def test_a_class_without_fit_and_search_is_not_a_retriever():
    with pytest.raises(UnknownComponentError, match="'json:JSONDecoder' .* is not a retriever: it lacks fit and search"):
        resolve("json:JSONDecoder")
    with pytest.raises(UnknownComponentError, match="is not a generator: it lacks generate"):
        resolve("primsel.retrieval.bm25:BM25Retriever", "generator")


@pytest.mark.parametrize("name", ["no_such_module_xyz:Thing", "json:NoSuchClass", ":BM25Retriever", "json:"])
def test_unimportable_paths_are_unknown_components(name):
    with pytest.raises(UnknownComponentError, match="cannot import retriever"):
        resolve(name)


def test_a_parameter_the_class_does_not_take_lists_those_it_takes():
    with pytest.raises(TypeError, match=r"retriever 'bm25': .*'bogus'.*\(it takes: view, k1, b, stopwords, backend\)"):
        build({"type": "bm25", "bogus": 1})


def test_a_rejected_value_is_prefixed_with_the_component():
    with pytest.raises(ValueError, match="retriever 'bm25': k1 must be a number, got 'abc'"):
        build({"type": "bm25", "k1": "abc"})


def test_register_decorates_classes_only():
    with pytest.raises(TypeError, match="decorates a class"):
        register("test_not_a_class")(lambda: None)
