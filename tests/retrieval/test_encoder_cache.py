"""The embedding cache follows the model's content, not its name; ``caches_disabled`` bypasses it.

A tiny real model directory (:func:`primsel.testing.tiny_model.write_tiny_model`) is changed in
place, as retraining into the same folder does, and the vectors must be those that
sentence-transformers itself computes from the directory as it is now.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from primsel.datasets import load_builtin_tasks
from primsel.eval.metrics import evaluate
from primsel.files import cache_dir, caches_disabled
from primsel.library import with_gold
from primsel.simulator.library import build_library
from primsel.retrieval import encoders
from primsel.retrieval.dense import DenseRetriever
from primsel.retrieval.encoders import SentenceEncoder, model_digest, model_files

pytestmark = pytest.mark.dense

TEXTS = ["book a meeting room for tomorrow", "delete my next event", "who is my manager"]


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from primsel.testing.tiny_model import write_tiny_model

    library = build_library()
    words = [p.text("full") for p in library.values()] + [t.query for t in load_builtin_tasks()]
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", words, dim=16, seed=0)


@pytest.fixture
def tiny_model(tiny_template, tmp_path, monkeypatch):
    """A copy of the tiny model (modification times kept, as a model copied or unpacked earlier)."""
    monkeypatch.setattr(encoders, "_LOADED", {})
    return shutil.copytree(tiny_template, tmp_path / "model")


def change_weights_in_place(directory, seed: int = 1) -> None:
    """Rewrite model.safetensors with other weights of the same shapes: same name, same size."""
    import torch
    from safetensors.torch import load_file, save_file

    path = directory / "model.safetensors"
    size = path.stat().st_size
    generator = torch.Generator().manual_seed(seed)
    tensors = {name: t + 0.5 * torch.randn(t.shape, generator=generator, dtype=t.dtype)
               for name, t in load_file(path).items()}
    save_file(tensors, str(path), metadata={"format": "pt"})
    assert path.stat().st_size == size


def reference_vectors(directory, texts) -> np.ndarray:
    """What sentence-transformers computes from the directory as it is now (the right value)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(directory), device="cpu", local_files_only=True).encode(list(texts))


def test_weights_changed_in_place_give_the_new_models_vectors(tiny_model):
    before = SentenceEncoder(str(tiny_model)).encode(TEXTS)
    old_folder = SentenceEncoder(str(tiny_model)).cache_path
    np.testing.assert_allclose(before, reference_vectors(tiny_model, TEXTS), atol=1e-5)
    change_weights_in_place(tiny_model)
    after = SentenceEncoder(str(tiny_model)).encode(TEXTS)
    # keyed by the name, the cache returned `before` again; keyed by the content, the new vectors
    np.testing.assert_allclose(after, reference_vectors(tiny_model, TEXTS), atol=1e-5)
    assert not np.allclose(after, before, atol=1e-3)
    new_folder = SentenceEncoder(str(tiny_model)).cache_path
    assert new_folder != old_folder and new_folder.parent == old_folder.parent == cache_dir() / "embeddings"
    assert len(list(new_folder.glob("*.npy"))) == len(list(old_folder.glob("*.npy"))) == len(TEXTS)


def test_a_change_is_seen_even_when_the_modification_time_is_put_back(tiny_model):
    weights = tiny_model / "model.safetensors"
    stamp = weights.stat()
    before = SentenceEncoder(str(tiny_model)).encode(TEXTS)
    change_weights_in_place(tiny_model)
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))   # as `cp -p` or `rsync -t` leave it
    after = SentenceEncoder(str(tiny_model)).encode(TEXTS)
    np.testing.assert_allclose(after, reference_vectors(tiny_model, TEXTS), atol=1e-5)
    assert not np.allclose(after, before, atol=1e-3)


def test_dense_retrieval_after_a_change_in_place_equals_a_fresh_run(tiny_model):
    # the case: recall@10 0.3946 from stale vectors against 0.3318 fresh
    library = build_library()
    tasks = with_gold(load_builtin_tasks(), library)
    queries = {t.id: t.query for t in tasks}
    qrels = {t.id: {p: 1 for p in t.gold} for t in tasks}

    def run():
        return DenseRetriever(model=str(tiny_model)).fit(library).search(queries, 65)

    first = run()
    change_weights_in_place(tiny_model)
    cached = run()
    with caches_disabled():
        fresh = run()
    assert cached == fresh and cached != first
    assert evaluate(cached, qrels, ["recall@10"]) == evaluate(fresh, qrels, ["recall@10"])


def test_caches_disabled_neither_reads_nor_writes_vectors(tiny_model):
    encoder = SentenceEncoder(str(tiny_model))
    right = encoder.encode(TEXTS[:1])
    stale = encoder.cache_path / next(p.name for p in encoder.cache_path.glob("*.npy"))
    np.save(stale, np.zeros(16, dtype=np.float32))               # a wrong vector in the cache
    assert SentenceEncoder(str(tiny_model)).encode(TEXTS[:1]).tolist() == [[0.0] * 16]   # it is read
    with caches_disabled():
        np.testing.assert_allclose(SentenceEncoder(str(tiny_model)).encode(TEXTS[:1]), right, atol=1e-6)
        SentenceEncoder(str(tiny_model)).encode(TEXTS[1:])
    assert len(list(encoder.cache_path.glob("*.npy"))) == 1    # nothing written inside the block


def test_the_content_is_the_model_files_wherever_the_directory_is(tiny_model, tmp_path):
    (tiny_model / "README.md").write_text("notes")
    (tiny_model / ".gitattributes").write_text("*.safetensors filter=lfs")
    (tiny_model / "onnx").mkdir()
    (tiny_model / "onnx" / "model.onnx").write_bytes(b"other back end")
    names = [p.relative_to(tiny_model).as_posix() for p in model_files(tiny_model)]
    assert names == ["1_Pooling/config.json", "config.json", "model.safetensors", "modules.json",
                     "sentence_bert_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    moved = shutil.copytree(tiny_model, tmp_path / "elsewhere")
    assert model_digest(moved) == model_digest(tiny_model)
    (moved / "1_Pooling" / "config.json").write_text((moved / "1_Pooling" / "config.json").read_text() + " ")
    assert model_digest(moved) != model_digest(tiny_model)
