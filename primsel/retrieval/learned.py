"""Retrievers that learn from the training tasks' queries and gold sets.

All three see only the tasks passed to ``fit`` (cross-validation passes the other folds):

* ``knn`` -- the gold sets of the most similar training queries vote (instance-based
  multi-label learning, ML-kNN style: Zhang & Zhou, Pattern Recognition 2007; the same idea as
  retrieving tools through similar past requests);
* ``expansion`` -- BM25 over each primitive's documentation expanded with the training queries
  whose gold set contains it (document expansion, as doc2query, Nogueira et al. 2019, and tool
  document expansion, Re-Invoke, Chen et al. 2024);
* ``classifier`` -- one logistic-regression classifier per primitive over features of the query
  (binary relevance, Tsoumakas & Katakis 2007): TF-IDF of the query words and/or its sentence
  embedding.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from primsel.registry import register
from primsel.checks import check_choice, check_flag, check_number, check_text
from primsel.files import digest
from primsel.retrieval.base import BaseRetriever, code_tokens, english_stopwords
from primsel.retrieval.bm25 import bm25_index
from primsel.retrieval.encoders import DEFAULT_MODEL, Encoder, SentenceEncoder, l2_normalise
from primsel.types import TEXT_VIEWS, Task

logger = logging.getLogger(__name__)

FEATURES = ("tfidf", "dense", "tfidf+dense")

#: Classifiers fitted in this process, by parameters, library and training tasks: a fit is
#: deterministic, so the cells, hybrids and nested folds that train one on the same tasks share
#: it (at most :data:`_FITTED_MAX`, the oldest dropped first; not with an encoder of one's own).
_FITTED: dict[str, tuple[np.ndarray, dict[int, Any], Any]] = {}
_FITTED_MAX = 64


def _label_matrix(ids: Sequence[str], tasks: Sequence[Task]) -> np.ndarray:
    """``(n_tasks, n_primitives) float64``: 1 where the primitive is in the task's gold set."""
    column = {p: j for j, p in enumerate(ids)}
    y = np.zeros((len(tasks), len(ids)))
    for i, t in enumerate(tasks):
        for p in t.gold:
            if p in column:
                y[i, column[p]] = 1.0
    return y


class _QueryFeatures:
    """Query features fitted on the training queries: TF-IDF of code tokens and/or embeddings."""

    def __init__(self, features: str, model: str, dense_weight: float, encoder: Encoder | None) -> None:
        self.features = features
        self.model = model
        self.dense_weight = dense_weight
        self.encoder = encoder

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.encoder is None:
            self.encoder = SentenceEncoder(self.model).encode
        return l2_normalise(self.encoder(list(texts)))

    def fit_transform(self, texts: Sequence[str]) -> Any:
        """Features of the training queries, ``(n_texts, n_features)``; None when there are none
        (the TF-IDF block is dropped, with a warning, when the queries hold no word at all)."""
        parts = []
        self._vectorizer = None
        if "tfidf" in self.features:
            from sklearn.feature_extraction.text import TfidfVectorizer

            vectorizer = TfidfVectorizer(analyzer=code_tokens, sublinear_tf=True)
            if any(code_tokens(text) for text in texts):
                self._vectorizer = vectorizer
                parts.append(vectorizer.fit_transform(texts))
            else:  # scikit-learn would raise "empty vocabulary"
                logger.warning("no word in any of the %d training queries: the query words give no "
                               "signal%s", len(texts), "" if "dense" in self.features else " (every score is 0)")
        if "dense" in self.features:
            parts.append(self.dense_weight * self._encode(texts))
        return _stack(parts)

    def transform(self, texts: Sequence[str]) -> Any:
        parts = []
        if self._vectorizer is not None:
            parts.append(self._vectorizer.transform(texts))
        if "dense" in self.features:
            parts.append(self.dense_weight * self._encode(texts))
        return _stack(parts)


def _stack(parts: list[Any]) -> Any:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    from scipy.sparse import csr_matrix, hstack

    return hstack([p if hasattr(p, "tocsr") else csr_matrix(p) for p in parts]).tocsr()


class _LearnedBase(BaseRetriever):
    learns_from_tasks = True

    def set_encoder(self, encoder: Encoder) -> _LearnedBase:
        """Use ``encoder`` (texts -> ``(n, dim)`` vectors) instead of the sentence model. Returns ``self``."""
        self._encoder = encoder
        return self

    def _features(self) -> _QueryFeatures:
        return _QueryFeatures(self.features, self.model, self.dense_weight, getattr(self, "_encoder", None))


@register("knn")
class KnnRetriever(_LearnedBase):
    """Votes of the gold sets of the ``neighbours`` training queries most similar to the query.

    ``score(p) = sum_j s_j**power * [p in gold_j] / sum_j s_j**power`` over the neighbours j,
    with s_j the cosine similarity of the query features (negative similarities count 0).
    Without training tasks every score is 0.

    Parameters
    ----------
    neighbours : number of training queries that vote.
    power : exponent that sharpens the similarity weights.
    features : ``"tfidf"`` (query words), ``"dense"`` (sentence embedding) or ``"tfidf+dense"``.
    model : sentence-transformers model for dense features (see :class:`DenseRetriever`).
    dense_weight : scale of the embedding block when features are concatenated, >= 0.

    Raises
    ------
    ValueError : neighbours not an integer >= 1, negative power or dense_weight, unknown
        features, or an empty model name.
    """

    def __init__(self, neighbours: int = 10, power: float = 2.0, features: str = "tfidf",
                 model: str = DEFAULT_MODEL, dense_weight: float = 1.0) -> None:
        self.neighbours = check_number("neighbours", neighbours, minimum=1, integer=True)
        self.power = check_number("power", power, minimum=0)
        self.features = check_choice("features", features, FEATURES)
        self.model = check_text("model", model, empty=False)
        self.dense_weight = check_number("dense_weight", dense_weight, minimum=0)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> KnnRetriever:
        super().fit(library, train_tasks)
        self._y = _label_matrix(self.ids, train_tasks)
        self._feat = None
        if train_tasks:
            feat = self._features()
            x = feat.fit_transform([t.query for t in train_tasks])
            if x is not None:  # else no feature at all: every score is 0
                self._feat = feat
                self._x = l2_normalise(x.toarray() if hasattr(x, "toarray") else x)
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        if self._feat is None:
            return {q: {} for q in queries}  # type: ignore[misc]
        qids = list(queries)
        x = self._feat.transform([queries[q] for q in qids])
        sims = l2_normalise(x.toarray() if hasattr(x, "toarray") else x) @ self._x.T
        n = min(self.neighbours, sims.shape[1])
        out = {}
        for row, q in enumerate(qids):
            order = np.argsort(-sims[row], kind="stable")[:n]  # similarity descending, ties by position
            w = np.maximum(sims[row, order], 0.0) ** self.power
            total = w.sum()
            out[q] = ((w[:, None] * self._y[order]).sum(0) / total).tolist() if total > 0 else [0.0] * len(self.ids)
        return out


@register("expansion")
class ExpansionRetriever(BaseRetriever):
    """BM25 over each primitive's documentation plus the training queries that needed it.

    Parameters
    ----------
    view : documentation text per primitive (``"full"``, ``"signature"``, ``"name"``).
    k1, b : BM25 parameters (Lucene idf, see :mod:`primsel.retrieval.bm25`): k1 > 0, b in [0, 1].
    stopwords : drop English stop words.

    Raises
    ------
    ValueError : unknown view, k1 <= 0, b outside [0, 1], or stopwords not a boolean.
    """

    learns_from_tasks = True

    def __init__(self, view: str = "full", k1: float = 1.2, b: float = 0.75, stopwords: bool = True) -> None:
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.k1 = check_number("k1", k1, above=0)
        self.b = check_number("b", b, minimum=0, maximum=1)
        self.stopwords = check_flag("stopwords", stopwords)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> ExpansionRetriever:
        super().fit(library, train_tasks)
        self._stop = english_stopwords() if self.stopwords else frozenset()
        extra: dict[str, list[str]] = {p: [] for p in self.ids}
        for t in train_tasks:
            for p in t.gold:
                if p in extra:
                    extra[p].append(t.query)
        docs = [code_tokens("\n".join([library[p].text(self.view), *extra[p]]), self._stop) for p in self.ids]
        self._index = bm25_index(docs, self.k1, self.b)
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        return {q: self._index.get_scores(code_tokens(text, self._stop)).tolist() for q, text in queries.items()}


@register("classifier")
class ClassifierRetriever(_LearnedBase):
    """One logistic-regression classifier per primitive predicts whether the query needs it.

    Each primitive with both positive and negative training tasks gets an L2-regularised
    logistic regression (scikit-learn, lbfgs) on the query features, with balanced class
    weights; its score is the predicted probability. A primitive gold in every training task
    scores 1, one gold in none scores 0 (no signal: fuse with a lexical or dense retriever to
    rank such primitives, as the default configuration does).

    Parameters
    ----------
    features : ``"tfidf"`` (code tokens of the query, sublinear tf), ``"dense"`` (sentence
        embedding) or ``"tfidf+dense"`` (both, concatenated).
    C : inverse regularisation strength, > 0.
    class_weight : ``"balanced"`` or None.
    model : sentence-transformers model for dense features.
    dense_weight : scale of the embedding block in ``"tfidf+dense"``, >= 0.
    max_iter : lbfgs iterations, >= 1.

    Raises
    ------
    ValueError : unknown features or class_weight, C <= 0, negative dense_weight, max_iter not
        an integer >= 1, or an empty model name.
    """

    def __init__(self, features: str = "tfidf+dense", C: float = 30.0, class_weight: str | None = "balanced",
                 model: str = DEFAULT_MODEL, dense_weight: float = 1.0, max_iter: int = 2000) -> None:
        self.features = check_choice("features", features, FEATURES)
        self.C = check_number("C", C, above=0)
        self.class_weight = check_choice("class_weight", class_weight, ("balanced", None))
        self.model = check_text("model", model, empty=False)
        self.dense_weight = check_number("dense_weight", dense_weight, minimum=0)
        self.max_iter = check_number("max_iter", max_iter, minimum=1, integer=True)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> ClassifierRetriever:
        from sklearn.linear_model import LogisticRegression

        super().fit(library, train_tasks)
        key = None
        if getattr(self, "_encoder", None) is None:
            key = digest({"params": self.get_params(), "ids": list(self.ids),
                          "train": [[t.id, t.query, sorted(t.gold)] for t in train_tasks]})
            if key in _FITTED:
                self._constant, self._models, self._feat = _FITTED[key]
                return self
        y = _label_matrix(self.ids, train_tasks)
        self._constant = np.zeros(len(self.ids))
        self._models: dict[int, Any] = {}
        self._feat = None
        if not train_tasks:
            return self
        feat = self._features()
        x = feat.fit_transform([t.query for t in train_tasks])
        if x is None:  # no feature at all: only the primitives gold in every training task score
            return self
        self._feat = feat
        for j in range(len(self.ids)):
            positives = y[:, j].sum()
            if positives == len(train_tasks):
                self._constant[j] = 1.0
            elif positives > 0:
                model = LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=self.max_iter)
                self._models[j] = model.fit(x, y[:, j])
        logger.debug("classifier: %d primitives learned from %d tasks", len(self._models), len(train_tasks))
        if key is not None:
            if len(_FITTED) >= _FITTED_MAX:
                _FITTED.pop(next(iter(_FITTED)))
            _FITTED[key] = (self._constant, self._models, self._feat)
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        qids = list(queries)
        scores = np.tile(self._constant, (len(qids), 1))
        if self._feat is not None and self._models:
            x = self._feat.transform([queries[q] for q in qids])
            for j, model in self._models.items():
                scores[:, j] = model.predict_proba(x)[:, 1]
        return {q: scores[row].tolist() for row, q in enumerate(qids)}
