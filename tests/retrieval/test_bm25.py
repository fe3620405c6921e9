"""BM25 with Lucene idf: a term in half of the documents still counts."""

from __future__ import annotations

import math
import re

import pytest
from rank_bm25 import BM25Okapi

from primsel.library import Library
from primsel.retrieval.bm25 import BM25Retriever, bm25_index, lucene_idf
from primsel.types import Primitive

HALF = [["alpha", "beta"], ["alpha", "gamma"], ["delta", "gamma"], ["delta", "epsilon"]]


def test_lucene_idf_of_a_term_in_half_the_documents():
    assert lucene_idf(4, 2) == pytest.approx(math.log(1 + 2.5 / 2.5))


def test_term_in_half_the_documents_lifts_them_by_hand():
    # N=4, n=2: idf = log(2); every document has length 2 = avgdl, tf 1:
    # score = idf * tf*(k1+1) / (tf + k1*(1-b+b*1)) = log(2)
    scores = bm25_index(HALF, k1=1.2, b=0.75).get_scores(["alpha"])
    assert scores.tolist() == pytest.approx([math.log(2), math.log(2), 0.0, 0.0])


def test_rank_bm25_okapi_gives_such_a_term_nothing():
    # the reason for the Lucene idf: Okapi's log((N-n+0.5)/(n+0.5)) is 0 here
    assert BM25Okapi(HALF).get_scores(["alpha"]).tolist() == [0.0, 0.0, 0.0, 0.0]


def _named(names):
    return Library([Primitive(id=f"m.{n}", name=n, module="m", kind="function", signature=f"def {n}()", doc="")
                    for n in names])


def test_bm25_retriever_half_the_documents_ranks_them_first():
    lib = _named(["delta_epsilon", "alpha_gamma", "delta_gamma", "alpha_beta"])
    run = BM25Retriever(view="name").fit(lib).search({"q": "alpha"}, 10)
    # each name gives 3 tokens (two parts and the identifier): avgdl 3 = length, so score = log(2)
    assert list(run["q"]) == ["m.alpha_beta", "m.alpha_gamma", "m.delta_epsilon", "m.delta_gamma"]
    assert list(run["q"].values()) == pytest.approx([math.log(2), math.log(2), 0.0, 0.0])


def test_bm25_matches_identifier_parts(small_library):
    run = BM25Retriever().fit(small_library).search({"q": "delete an event"}, 1)
    assert list(run["q"]) == ["calendar.delete_event"]


@pytest.mark.parametrize(("params", "message"), [
    ({"k1": "abc"}, "k1 must be a number, got 'abc'"),
    ({"k1": 0}, "k1 must be a number > 0, got 0"),
    ({"b": 1.5}, "b must be a number <= 1, got 1.5"),
    ({"b": True}, "b must be a number, got True"),
    ({"view": "doc"}, "view must be one of 'name', 'signature', 'full'; got 'doc'"),
    ({"stopwords": "yes"}, "stopwords must be true or false, got 'yes'"),
])
def test_bm25_rejects_bad_parameters_naming_them(params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        BM25Retriever(**params)
