"""Retrieval at scale: the bm25s backend gives rank-bm25's scores, the NumPy top-k keeps the
ranking rule, and the approximate FAISS indexes rank as the flat one on easy data."""

from __future__ import annotations

import random

import numpy as np
import pytest

from primsel.library import Library
from primsel.retrieval.base import id_ranks, top_k_array
from primsel.retrieval.bm25 import BM25Retriever, BM25sIndex, bm25_index, lucene_idf
from primsel.retrieval.dense import UNRETURNED_SCORE, DenseRetriever
from primsel.types import Primitive, top_k

WORDS = [f"w{i}" for i in range(40)]


def _corpus(seed: int, n_docs: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [[rng.choice(WORDS) for _ in range(rng.randint(0, 30))] for _ in range(n_docs)]


@pytest.mark.parametrize("seed", range(5))
def test_bm25s_scores_equal_rank_bm25_scores(seed):
    corpus = _corpus(seed, 60)
    reference, fast = bm25_index(corpus, 1.2, 0.75), BM25sIndex(corpus, 1.2, 0.75)
    rng = random.Random(100 + seed)
    for _ in range(20):
        query = [rng.choice(WORDS + ["unseen"]) for _ in range(rng.randint(1, 6))]
        assert fast.get_scores(query) == pytest.approx(reference.get_scores(query), rel=1e-5, abs=1e-6)


def test_bm25s_score_of_a_hand_computed_case():
    # two documents; the query term occurs twice in the first (length 3), not in the second (length 1)
    corpus = [["a", "a", "b"], ["b"]]
    k1, b, avg = 1.2, 0.75, 2.0
    tf_part = 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / avg))
    expected = lucene_idf(2, 1) * tf_part
    assert BM25sIndex(corpus, k1, b).get_scores(["a"]).tolist() == pytest.approx([expected, 0.0], rel=1e-6)
    assert BM25sIndex(corpus, k1, b).get_scores(["zzz"]).tolist() == [0.0, 0.0]


def test_bm25_backends_rank_a_library_alike():
    lib = Library([Primitive(id=f"m.f{i}", name=f"f{i}", module="m", kind="function", signature=f"def f{i}()",
                             doc=" ".join(doc)) for i, doc in enumerate(_corpus(7, 80))])
    queries = {str(i): " ".join(random.Random(i).choices(WORDS, k=4)) for i in range(30)}
    slow = BM25Retriever(backend="rank_bm25", stopwords=False).fit(lib).search(queries, 10)
    fast = BM25Retriever(backend="bm25s", stopwords=False).fit(lib).search(queries, 10)
    for q in queries:
        assert list(fast[q].values()) == pytest.approx(list(slow[q].values()), rel=1e-5)
        # the same ids wherever the scores are not tied to float32 precision
        values = list(slow[q].values())
        distinct = [i for i in range(len(values)) if all(abs(values[i] - v) > 1e-4 for j, v in enumerate(values) if j != i)]
        assert [list(fast[q])[i] for i in distinct] == [list(slow[q])[i] for i in distinct]


def test_bm25_rejects_an_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of"):
        BM25Retriever(backend="lucene")


@pytest.mark.parametrize("seed", range(20))
def test_top_k_array_is_top_k(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    ids = [f"id{rng.randint(0, 10**6):07d}" for _ in range(n)]
    ids = list(dict.fromkeys(ids))
    scores = np.array([rng.choice([0.0, 0.5, 1.0, -1.0, rng.random(), float("nan"), float("inf")]) for _ in ids])
    for k in (1, 3, len(ids), len(ids) + 5):
        assert list(top_k_array(ids, id_ranks(ids), scores, k).items()) == list(top_k(ids, scores.tolist(), k).items())


def _vectors(n: int, dim: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"doc{i:03d}": rng.normal(size=dim).astype(np.float32) for i in range(n)}


def _dense(index: str, vectors: dict[str, np.ndarray], **params) -> DenseRetriever:
    lib = Library([Primitive(id=f"m.{n}", name=n, module="m", kind="function", signature=f"def {n}()", doc="")
                   for n in vectors])

    def encode(texts):
        return np.stack([vectors[t] if t in vectors else vectors[t.removeprefix("near:")] * 1.0
                         + 0.01 for t in texts])

    return DenseRetriever(view="name", index=index, **params).set_encoder(encode).fit(lib)


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_approximate_indexes_find_the_nearest_documents(index):
    vectors = _vectors(300)
    flat = _dense("flat", vectors)
    approx = _dense(index, vectors, nlist=4, nprobe=4)
    queries = {f"q{i}": f"near:doc{i:03d}" for i in range(0, 300, 15)}
    exact, found = flat.search(queries, 5), approx.search(queries, 5)
    for q, text in queries.items():
        target = "m." + text.removeprefix("near:")
        assert next(iter(exact[q])) == target and next(iter(found[q])) == target
        assert list(found[q].values()) == pytest.approx(list(exact[q].values()), abs=1e-5)


def test_documents_an_approximate_index_does_not_return_score_the_lowest_cosine():
    vectors = _vectors(100, seed=1)
    run = _dense("ivf", vectors, nlist=10, nprobe=1).search({"q": "near:doc007"}, 100)
    values = list(run["q"].values())
    assert len(values) == 100 and UNRETURNED_SCORE in values
    tail = [p for p, s in run["q"].items() if s == UNRETURNED_SCORE]
    assert tail == sorted(tail) and values[: len(values) - len(tail)] == sorted(values[: len(values) - len(tail)], reverse=True)


def test_dense_rejects_an_unknown_index():
    with pytest.raises(ValueError, match="index must be one of"):
        DenseRetriever(index="annoy")
