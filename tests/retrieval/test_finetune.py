"""The fine-tuned bi-encoder: its loss, batches, cache keys, and a tiny training run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from primsel.retrieval.encoders import EncoderLoadError
from primsel.retrieval.finetune import (FinetunedRetriever, library_contrastive_loss, model_content_digest,
                                        pair_batches, training_fingerprint)
from tests.retrieval.conftest import make_task

TINY = {"epochs": 1, "frozen_layers": 5, "max_seq_length": 16}


def test_library_loss_contrasts_each_gold_document_with_the_non_gold_ones():
    torch = pytest.importorskip("torch")
    sims = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    gold = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    pairs = [-2 + math.log(math.exp(2) + math.exp(0)),            # query 0, document 0 vs document 2
             -1 + math.log(math.exp(1) + math.exp(0)),            # query 0, document 1 vs document 2
             -3 + math.log(math.exp(3) + math.exp(0) + math.exp(1))]  # query 1, document 1 vs 0 and 2
    assert library_contrastive_loss(sims, gold).item() == pytest.approx(sum(pairs) / 3, rel=1e-6)


def test_pair_batches_hold_each_pair_once_and_no_repeated_query_or_document():
    pairs = [(0, 0), (0, 1), (1, 0), (1, 2), (2, 1), (2, 2), (3, 0)]
    batches = pair_batches(pairs, 3, np.random.default_rng(0))
    assert sorted(i for b in batches for i in b) == list(range(len(pairs)))
    for b in batches:
        assert len(b) <= 3
        assert len({pairs[i][0] for i in b}) == len(b) and len({pairs[i][1] for i in b}) == len(b)


def test_model_digest_follows_the_files(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "weights.bin").write_bytes(b"\x00" * 10)
    first = model_content_digest(str(model))
    assert model_content_digest(str(model)) == first
    (model / "weights.bin").write_bytes(b"\x01" * 11)
    second = model_content_digest(str(model))
    assert second != first
    (model / "README.md").write_text("documentation is not content")
    assert model_content_digest(str(model)) == second
    with pytest.raises(EncoderLoadError, match="org/not-downloaded"):
        model_content_digest("org/not-downloaded")


def test_training_fingerprint_is_the_fold_whatever_the_order():
    a = make_task("2", "x", {"m.b", "m.a"})
    b = make_task("10", "y", {"m.c"})
    assert training_fingerprint([b, a]) == training_fingerprint([a, b]) == [["2", "x", ["m.a", "m.b"]],
                                                                            ["10", "y", ["m.c"]]]


@pytest.mark.parametrize("kwargs", [{"loss": "triplet"}, {"doc_vectors": "both"}, {"epochs": 0}, {"lr": 0},
                                    {"loss": "mnrl", "batch_size": 1}, {"frozen_layers": -1}])
def test_bad_parameters_are_errors(kwargs):
    with pytest.raises(ValueError):
        FinetunedRetriever(**kwargs)


@pytest.mark.dense
def test_training_is_cached_per_fold_and_setting(small_library, small_tasks):
    pytest.importorskip("sentence_transformers")
    queries = {t.id: t.query for t in small_tasks[6:]}
    first = FinetunedRetriever(**TINY).fit(small_library, small_tasks[:6])
    assert first.fit_seconds > 0 and (first.folder / "weights.safetensors").is_file()
    ranked = first.search(queries, 6)
    again = FinetunedRetriever(**TINY).fit(small_library, small_tasks[:6])
    assert again.fit_seconds == 0.0 and again.folder == first.folder
    assert again.search(queries, 6) == ranked
    # another fold, another setting or another seed is another model
    assert FinetunedRetriever(**TINY).fit(small_library, small_tasks[:5]).folder != first.folder
    assert FinetunedRetriever(**{**TINY, "lr": 2e-4}).fit(small_library, small_tasks[:6]).folder != first.folder
    assert FinetunedRetriever(**TINY, seed=1).fit(small_library, small_tasks[:6]).folder != first.folder


@pytest.mark.dense
def test_weights_trained_from_another_embedding_scheme_are_not_reused(monkeypatch, small_library, small_tasks):
    """The learned document vectors start from the encoder's: weights trained when the encoder
    computed vectors another way are another model."""
    pytest.importorskip("sentence_transformers")
    from primsel.retrieval import finetune

    monkeypatch.setattr(FinetunedRetriever, "_train", lambda self, tasks: None)
    now = FinetunedRetriever(**TINY).fit(small_library, small_tasks[:6]).folder
    monkeypatch.setattr(finetune, "EMBEDDING_SCHEME", "batched")
    assert FinetunedRetriever(**TINY).fit(small_library, small_tasks[:6]).folder != now


@pytest.mark.dense
def test_frozen_document_vectors_stay_the_base_models(small_library, small_tasks):
    pytest.importorskip("sentence_transformers")
    from primsel.retrieval.encoders import SentenceEncoder, l2_normalise

    base = l2_normalise(SentenceEncoder().encode([small_library[p].text("full") for p in small_library]))
    frozen = FinetunedRetriever(**TINY, doc_vectors="frozen", cache=False).fit(small_library, small_tasks)
    learned = FinetunedRetriever(**TINY, doc_vectors="learned", cache=False).fit(small_library, small_tasks)
    assert np.allclose(frozen._docs, base, atol=1e-6)
    assert not np.allclose(learned._docs, base, atol=1e-4)
    untrained = FinetunedRetriever(**TINY).fit(small_library, ())
    assert np.allclose(untrained._docs, base, atol=1e-6)


@pytest.mark.dense
def test_a_trained_query_vector_does_not_depend_on_the_queries_ranked_with_it(small_library, small_tasks):
    pytest.importorskip("sentence_transformers")
    trained = FinetunedRetriever(**TINY, cache=False).fit(small_library, small_tasks[:6])
    texts = [t.query for t in small_tasks]
    together = trained._encode_queries(texts)
    alone = FinetunedRetriever(**TINY, cache=False).fit(small_library, small_tasks[:6])._encode_queries(texts[6:7])
    assert together[6].tobytes() == alone[0].tobytes()
