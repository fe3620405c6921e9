"""BM25 over the primitives' documentation with code-aware tokens.

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
2009) computed by rank-bm25, with Lucene's idf ``log(1 + (N - n + 0.5) / (n + 0.5))``, which
stays positive: rank-bm25's own ``BM25Okapi`` idf ``log((N - n + 0.5) / (n + 0.5))`` is 0 for a
term found in exactly half of the documents, so such a term would not lift the documents that
contain it.

Two backends compute the same scores (``backend``): ``"rank_bm25"`` (default, the reference
implementation, a Python loop over query terms) and ``"bm25s"`` (Lù, "BM25S: Orders of
magnitude faster lexical search via eager sparse scoring", 2024: the per-term scores of every
document precomputed into a sparse matrix, a query summing its rows), for large libraries.
bm25s's ``lucene`` method omits the constant factor ``k1 + 1`` of the term-frequency part, so
its scores are multiplied by ``k1 + 1`` here; the two backends then agree to float32 precision
(bm25s computes in float32), which a test checks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from primsel.registry import register
from primsel.checks import check_choice, check_flag, check_number
from primsel.retrieval.base import BaseRetriever, code_tokens, english_stopwords
from primsel.types import TEXT_VIEWS, Task


def lucene_idf(n_docs: int, doc_freq: int) -> float:
    """Lucene's BM25 idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``; > 0 for every 0 <= n <= N."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25_index(corpus: Sequence[Sequence[str]], k1: float, b: float) -> Any:
    """A rank-bm25 index over tokenised documents, with :func:`lucene_idf`.

    Parameters
    ----------
    corpus : one token list per document (at least one document).
    k1 : term-frequency saturation (> 0).
    b : length normalisation, in [0, 1].

    Returns
    -------
    an object with ``get_scores(query_tokens) -> ndarray (n_docs,) float64``.
    """
    from rank_bm25 import BM25Okapi

    class _LuceneBM25(BM25Okapi):
        def _calc_idf(self, nd: Mapping[str, int]) -> None:
            self.idf = {word: lucene_idf(self.corpus_size, freq) for word, freq in nd.items()}

    # rank-bm25 divides by the mean document length: give empty corpora one dummy token.
    docs = [list(d) if len(d) else ["\0"] for d in corpus]
    return _LuceneBM25(docs, k1=k1, b=b)


class BM25sIndex:
    """The same BM25 scores as :func:`bm25_index`, computed by bm25s from a sparse matrix of
    precomputed per-term document scores (see the module docstring).

    Parameters
    ----------
    corpus : one token list per document (at least one document; an empty one gets the
        dummy token :func:`bm25_index` gives it, so document lengths agree).
    k1 : term-frequency saturation (> 0).
    b : length normalisation, in [0, 1].
    """

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float, b: float) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import
        docs = [list(d) if len(d) else ["\0"] for d in corpus]
        self._index = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._index.index(docs, show_progress=False)
        self._vocab: dict[str, int] = self._index.vocab_dict
        self._scale = k1 + 1.0
        self._n = len(docs)

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """``(n_docs,) float64`` BM25 scores of one tokenised query (repeated terms count
        again, as in rank-bm25; terms not in the corpus add nothing)."""
        ids = [self._vocab[t] for t in query if t in self._vocab]
        if not ids:
            return np.zeros(self._n)
        return self._index.get_scores_from_ids(ids).astype(np.float64) * self._scale


#: Backends of :class:`BM25Retriever`.
BACKENDS = ("rank_bm25", "bm25s")


@register("bm25")
class BM25Retriever(BaseRetriever):
    """Okapi BM25 with Lucene idf over code-aware tokens of each primitive's text.

    Parameters
    ----------
    view : text indexed per primitive: ``"full"`` (signature + docstring), ``"signature"``, ``"name"``.
    k1 : BM25 term-frequency saturation.
    b : BM25 document-length normalisation.
    stopwords : drop English stop words (and "hey", "assistant") from documents and queries.
    backend : ``"rank_bm25"`` (the reference) or ``"bm25s"`` (sparse, vectorised; the same
        scores to float32 precision, much faster on large libraries).

    Notes
    -----
    Tokens: :func:`primsel.retrieval.base.code_tokens` (snake_case / CamelCase parts plus the whole
    identifier, lower-cased). Primitives sharing no token with the query score 0.

    Raises
    ------
    ValueError : unknown view or backend, k1 <= 0, b outside [0, 1], or stopwords not a boolean.
    """

    def __init__(self, view: str = "full", k1: float = 1.2, b: float = 0.75, stopwords: bool = True,
                 backend: str = "rank_bm25") -> None:
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.k1 = check_number("k1", k1, above=0)
        self.b = check_number("b", b, minimum=0, maximum=1)
        self.stopwords = check_flag("stopwords", stopwords)
        self.backend = check_choice("backend", backend, BACKENDS)

    def _tokens(self, text: str) -> list[str]:
        return code_tokens(text, self._stop)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> BM25Retriever:
        super().fit(library, train_tasks)
        self._stop = english_stopwords() if self.stopwords else frozenset()
        docs = [self._tokens(library[i].text(self.view)) for i in self.ids]
        make = BM25sIndex if self.backend == "bm25s" else bm25_index
        self._index = make(docs, self.k1, self.b)
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, np.ndarray]:
        return {q: np.asarray(self._index.get_scores(self._tokens(text)), dtype=np.float64)
                for q, text in queries.items()}
