"""Fusion: reciprocal rank fusion and weighted sums, by hand."""

from __future__ import annotations

import pytest

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
    with pytest.raises(ValueError, match="fusion method"):
        HybridRetriever(["bm25"], method="max")
    with pytest.raises(ValueError, match="weights"):
        HybridRetriever(["bm25", "tfidf"], weights=[1.0])
    with pytest.raises(ValueError, match="at least one member"):
        HybridRetriever([])


def test_hybrid_learns_from_tasks_when_a_member_does():
    assert HybridRetriever(["bm25", "tfidf"]).learns_from_tasks is False
    assert HybridRetriever(["bm25", "prior"]).learns_from_tasks is True


def test_hybrid_rrf_of_members(small_library):
    run = HybridRetriever(["bm25", "tfidf"], method="rrf").fit(small_library).search({"q": "delete an event"}, 2)
    assert list(run["q"])[0] == "calendar.delete_event"
