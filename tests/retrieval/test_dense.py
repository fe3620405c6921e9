"""Dense retrieval: cosine (not inner product), FAISS clamping, embedding cache."""

from __future__ import annotations

import math

import numpy as np
import pytest

from primsel.library import Library
from primsel.retrieval.dense import DenseRetriever, cosine_search
from primsel.retrieval.encoders import SentenceEncoder, cache_dir, l2_normalise
from primsel.types import Primitive

VECTORS = {"long_x": [10.0, 0.0], "diagonal": [1.0, 1.0], "short_y": [0.0, 0.1], "query": [1.0, 0.9]}


def fake_encoder(texts):
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def _library():
    return Library([Primitive(id=f"m.{n}", name=n, module="m", kind="function", signature=f"def {n}()", doc="")
                    for n in ("long_x", "diagonal", "short_y")])


def test_unnormalised_vectors_rank_by_cosine():
    run = DenseRetriever(view="name").set_encoder(fake_encoder).fit(_library()).search({"q": "query"}, 3)
    q = math.hypot(1.0, 0.9)
    # inner product would put long_x (10) first; cosine puts the diagonal first
    assert list(run["q"]) == ["m.diagonal", "m.long_x", "m.short_y"]
    assert list(run["q"].values()) == pytest.approx([1.9 / (q * math.sqrt(2)), 1 / q, 0.9 / q], rel=1e-5)


def test_k_larger_than_index_never_returns_missing_ids():
    sims = cosine_search(np.eye(3), np.array([[1.0, 0.0, 0.0]]))
    assert sims.shape == (1, 3)
    run = DenseRetriever(view="name").set_encoder(fake_encoder).fit(_library()).search({"q": "query"}, 50)
    assert len(run["q"]) == 3


def test_l2_normalise_keeps_zero_rows():
    out = l2_normalise([[3.0, 4.0], [0.0, 0.0]])
    assert out.dtype == np.float32
    assert out.tolist() == [pytest.approx([0.6, 0.8]), [0.0, 0.0]]


def test_embedding_cache_is_keyed_by_model_and_text(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path))
    calls = []

    class FakeModel:
        def encode(self, texts, **kwargs):
            calls.append(list(texts))
            return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    enc = SentenceEncoder("fake-model")
    enc._model = FakeModel()
    first = enc.encode(["ab", "abc", "ab"])
    assert calls == [["ab", "abc"]]
    again = SentenceEncoder("fake-model")
    again._model = FakeModel()
    assert again.encode(["abc", "ab"]).tolist() == [[3.0, 1.0], [2.0, 1.0]]
    assert calls == [["ab", "abc"]]  # served from the cache
    assert first.tolist() == [[2.0, 1.0], [3.0, 1.0], [2.0, 1.0]]
    assert enc.cache_path.parent == cache_dir() / "embeddings"
    assert SentenceEncoder("other-model").cache_path != enc.cache_path
