"""Dense retrieval: cosine (not inner product), FAISS clamping, embedding cache."""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pytest

from primsel.library import Library
from primsel.retrieval.dense import DenseRetriever, cosine_search
from primsel.retrieval import encoders
from primsel.files import cache_dir
from primsel.retrieval.encoders import EncoderLoadError, SentenceEncoder, l2_normalise
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
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    class FakeModel:
        pass

    def embed_alone(model, text):
        calls.append(text)
        return np.array([len(text), 1.0], dtype=np.float32)

    monkeypatch.setattr(encoders, "embed_alone", embed_alone)

    model, other = tmp_path / "model", tmp_path / "other"
    for directory, content in ((model, "{}"), (other, "{ }")):
        directory.mkdir()
        (directory / "config.json").write_text(content)
    enc = SentenceEncoder(str(model))
    enc._model = FakeModel()
    first = enc.encode(["ab", "abc", "ab"])
    assert calls == ["ab", "abc"]
    again = SentenceEncoder(str(model))
    again._model = FakeModel()
    assert again.encode(["abc", "ab"]).tolist() == [[3.0, 1.0], [2.0, 1.0]]
    assert calls == ["ab", "abc"]  # served from the cache
    assert first.tolist() == [[2.0, 1.0], [3.0, 1.0], [2.0, 1.0]]
    assert enc.cache_path.parent == cache_dir() / "embeddings"
    assert SentenceEncoder(str(other)).cache_path != enc.cache_path   # another content, another key


def test_dense_rejects_bad_parameters_naming_them():
    with pytest.raises(ValueError, match="model must be a non-empty string"):
        DenseRetriever(model="")
    with pytest.raises(ValueError, match="view must be one of"):
        DenseRetriever(view="body")
    with pytest.raises(ValueError, match="query_prefix must be a string"):
        DenseRetriever(query_prefix=1)


@pytest.mark.dense
def test_unloadable_model_is_an_error_naming_it(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(encoders, "_LOADED", {})
    empty = tmp_path / "no-model-here"
    empty.mkdir()
    with pytest.raises(EncoderLoadError, match=re.escape(f"cannot load the sentence-transformers model '{empty}'")):
        DenseRetriever(model=str(empty)).fit(_library())


@pytest.mark.dense
def test_loading_the_model_logs_at_info_and_prints_no_progress_bar(monkeypatch, caplog, capfd):
    pytest.importorskip("sentence_transformers")
    from transformers.utils import logging as hf_logging

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(encoders, "_LOADED", {})
    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    with caplog.at_level(logging.INFO, logger="primsel"):
        vectors = SentenceEncoder(use_cache=False).encode(["book a room", "cancel my meeting"])
    assert vectors.shape == (2, 384)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("primsel")] == [
        f"loading sentence encoder {encoders.DEFAULT_MODEL}"]
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err and captured.err == ""
    # transformers' own settings are as they were
    assert (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) == (bars, verbosity)
