"""TF-IDF cosine similarity between the query and each primitive's text (scikit-learn)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from primsel.registry import register
from primsel.checks import check_choice, check_flag
from primsel.retrieval.base import BaseRetriever, code_tokens, english_stopwords
from primsel.types import TEXT_VIEWS, Task


@register("tfidf")
class TfidfRetriever(BaseRetriever):
    """Cosine similarity of TF-IDF vectors (Salton & Buckley, 1988) over code-aware tokens.

    Parameters
    ----------
    view : text indexed per primitive (``"full"``, ``"signature"`` or ``"name"``).
    sublinear_tf : use ``1 + log(tf)``.
    stopwords : drop English stop words (and "hey", "assistant").

    Notes
    -----
    scikit-learn's ``TfidfVectorizer`` (smoothed idf, L2-normalised rows) fitted on the
    primitives' texts; a query's score for a primitive is the dot product of the two unit vectors.

    Raises
    ------
    ValueError : unknown view, or sublinear_tf / stopwords not a boolean.
    """

    def __init__(self, view: str = "full", sublinear_tf: bool = True, stopwords: bool = True) -> None:
        self.view = check_choice("view", view, TEXT_VIEWS)
        self.sublinear_tf = check_flag("sublinear_tf", sublinear_tf)
        self.stopwords = check_flag("stopwords", stopwords)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> TfidfRetriever:
        from sklearn.feature_extraction.text import TfidfVectorizer

        super().fit(library, train_tasks)
        stop = english_stopwords() if self.stopwords else frozenset()
        self._vectorizer = TfidfVectorizer(analyzer=lambda text: code_tokens(text, stop),
                                           sublinear_tf=self.sublinear_tf)
        self._matrix = self._vectorizer.fit_transform([library[i].text(self.view) for i in self.ids])
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        ids = list(queries)
        q = self._vectorizer.transform([queries[i] for i in ids])
        sims = (q @ self._matrix.T).toarray()
        return {qid: sims[row].tolist() for row, qid in enumerate(ids)}
