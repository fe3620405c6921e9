"""The cross-encoder re-ranker: candidates from the first stage, a tiny training run, the cache."""

from __future__ import annotations

import pytest

from primsel.retrieval.bm25 import BM25Retriever
from primsel.retrieval.hybrid import min_max
from primsel.retrieval.rerank import RerankRetriever

TINY = {"first_stage": "bm25", "epochs": 1, "frozen_layers": 5, "max_seq_length": 32, "negatives": 2}


@pytest.mark.parametrize("kwargs", [{"top_n": 0}, {"weight": 1.5}, {"negatives": -1}, {"first_stage": "nothing"}])
def test_bad_parameters_are_errors(kwargs):
    with pytest.raises(ValueError):
        RerankRetriever(**kwargs)


def test_untrained_it_returns_the_first_stage_ranking(small_library, small_tasks):
    queries = {t.id: t.query for t in small_tasks}
    first = BM25Retriever().fit(small_library).search(queries, 6)
    run = RerankRetriever(**TINY).fit(small_library, ()).search(queries, 6)
    assert {q: list(r) for q, r in run.items()} == {q: list(r) for q, r in first.items()}


@pytest.mark.dense
def test_candidates_rank_above_the_rest_and_training_is_cached(small_library, small_tasks):
    pytest.importorskip("transformers")
    queries = {t.id: t.query for t in small_tasks[6:]}
    reranker = RerankRetriever(**TINY, top_n=2).fit(small_library, small_tasks[:6])
    assert reranker.fit_seconds > 0 and (reranker.folder / "weights.safetensors").is_file()
    run = reranker.search(queries, 6)
    first = BM25Retriever().fit(small_library).search(queries, 6)
    for q, scores in run.items():
        top2 = set(list(first[q])[:2])
        assert set(list(scores)[:2]) == top2                     # the two candidates first
        assert all(1.0 <= scores[p] <= 2.0 for p in top2)       # 1 + the cross-encoder's probability
        rest = min_max(first[q])
        assert all(scores[p] == pytest.approx(rest[p]) for p in scores if p not in top2)
    again = RerankRetriever(**TINY, top_n=2).fit(small_library, small_tasks[:6])
    assert again.fit_seconds == 0.0 and again.search(queries, 6) == run


@pytest.mark.dense
def test_the_first_stages_hard_negatives_identify_the_trained_model(monkeypatch, small_library, small_tasks):
    """A first stage that ranks the training tasks otherwise (new code, another cache) must not
    reuse weights trained on the old hard negatives."""
    pytest.importorskip("transformers")
    seen = []
    monkeypatch.setattr(RerankRetriever, "_train", lambda self, tasks, negatives: seen.append(negatives))
    train = small_tasks[:6]
    reranker = RerankRetriever(**TINY).fit(small_library, train)
    bm25 = BM25Retriever().fit(small_library, train).search({t.id: t.query for t in train}, 6)
    expected = {t.id: [p for p in bm25[t.id] if p not in t.gold][:2] for t in train}
    assert seen == [expected]                      # the negatives it trains on: BM25's best non-gold
    monkeypatch.setattr(RerankRetriever, "_hard_negatives", lambda self, tasks: {t.id: [] for t in tasks})
    assert RerankRetriever(**TINY).fit(small_library, train).folder != reranker.folder
