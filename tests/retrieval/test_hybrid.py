"""Fusion: reciprocal rank fusion and weighted sums, by hand."""

from __future__ import annotations

import pytest

from primsel.registry import UnknownComponentError
from primsel.retrieval.hybrid import HybridRetriever, competition_ranks, min_max, rrf, wsum


def test_rrf_by_hand():
    a = {"x": 3.0, "y": 2.0, "z": 1.0}
    b = {"z": 5.0, "x": 4.0, "y": 0.0}
    fused = rrf([a, b], [1.0, 1.0], k=60)
    assert fused["x"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 2))
    assert fused["y"] == pytest.approx(1 / (60 + 2) + 1 / (60 + 3))
    assert fused["z"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))


def test_rrf_weights_and_tied_scores_share_a_rank():
    assert competition_ranks({"x": 1.0, "y": 1.0, "z": 0.0}) == {"x": 1, "y": 1, "z": 3}
    fused = rrf([{"x": 1.0, "y": 1.0, "z": 0.0}], [2.0], k=60)
    assert fused == pytest.approx({"x": 2 / 61, "y": 2 / 61, "z": 2 / 63})


def test_wsum_by_hand():
    assert min_max({"x": 2.0, "y": 4.0, "z": 3.0}) == {"x": 0.0, "y": 1.0, "z": 0.5}
    assert min_max({"x": 1.0, "y": 1.0}) == {"x": 0.0, "y": 0.0}
    fused = wsum([{"x": 2.0, "y": 4.0, "z": 3.0}, {"x": 1.0, "y": 0.0, "z": 0.0}], [1.0, 0.5])
    assert fused == pytest.approx({"x": 0.5, "y": 1.0, "z": 0.5})


def test_hybrid_rejects_bad_configuration():
    with pytest.raises(ValueError, match="method must be one of 'rrf', 'wsum'"):
        HybridRetriever(["bm25"], method="max")
    with pytest.raises(ValueError, match="weights"):
        HybridRetriever(["bm25", "tfidf"], weights=[1.0])
    with pytest.raises(ValueError, match=r"weights\[1\] must be a number"):
        HybridRetriever(["bm25", "tfidf"], weights=[1.0, "x"])
    with pytest.raises(ValueError, match="at least one member"):
        HybridRetriever([])
    with pytest.raises(ValueError, match="members must be a list"):
        HybridRetriever("bm25")


@pytest.mark.parametrize("rrf_k", [-60, -1, float("nan"), "60"])
def test_hybrid_rejects_an_rrf_constant_that_could_divide_by_zero(rrf_k):
    with pytest.raises(ValueError, match="rrf_k must be"):
        HybridRetriever(["bm25", "tfidf"], rrf_k=rrf_k)


def test_hybrid_accepts_rrf_k_zero_as_plain_reciprocal_rank():
    assert rrf([{"x": 2.0, "y": 1.0}], [1.0], k=0) == pytest.approx({"x": 1 / 1, "y": 1 / 2})
    assert HybridRetriever(["bm25"], rrf_k=0).rrf_k == 0


def test_hybrid_names_the_bad_member_when_constructed():
    with pytest.raises(UnknownComponentError, match=r"members\[1\]: unknown retriever 'nope'"):
        HybridRetriever(["bm25", "nope"])
    with pytest.raises(TypeError, match=r"members\[0\]: retriever 'bm25': .*bogus.*it takes: view, k1, b, stopwords"):
        HybridRetriever([{"type": "bm25", "bogus": 1}])
    with pytest.raises(ValueError, match=r"members\[0\]: retriever 'bm25': k1 must be a number"):
        HybridRetriever([{"type": "bm25", "k1": "abc"}])
    with pytest.raises(TypeError, match=r"members\[0\]: retriever specification must be a name or a table"):
        HybridRetriever([3])


def test_hybrid_learns_from_tasks_when_a_member_does():
    assert HybridRetriever(["bm25", "tfidf"]).learns_from_tasks is False
    assert HybridRetriever(["bm25", "prior"]).learns_from_tasks is True


def test_hybrid_rrf_of_members(small_library):
    run = HybridRetriever(["bm25", "tfidf"], method="rrf").fit(small_library).search({"q": "delete an event"}, 2)
    assert list(run["q"])[0] == "calendar.delete_event"
