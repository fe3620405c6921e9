"""Set completion: primitives that programs use together raise each other's scores.

A program fails when one primitive it needs is missing, and the primitives of a program come in
groups (a type and the functions that return or take it, a parser and the enum of its
expressions). ``cooccurrence`` wraps any retriever and adds to each primitive's score a boost
from the primitives it is used with in the training programs (the gold sets of the training
folds), in the spirit of label-dependency methods for multi-label ranking (Read et al.,
"Classifier chains for multi-label classification", Machine Learning 2011; Zhang & Zhou,
"A review on multi-label learning algorithms", TKDE 2014). The selector's type closure
(``closure``) is the fixed, documentation-derived counterpart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from primsel.checks import check_choice, check_number
from primsel.registry import build, error_context, register
from primsel.retrieval.base import BaseRetriever, fit_nested, pass_gold
from primsel.retrieval.hybrid import min_max
from primsel.types import Task

FORMS = ("max", "mean")


def cooccurrence_matrix(gold_sets: Sequence[frozenset[str] | set[str]], ids: Sequence[str],
                        smoothing: float = 1.0) -> np.ndarray:
    """Conditional co-occurrence of primitives in gold sets.

    ``P[i, j] = n(i and j) / (n(i) + smoothing)``: the share of the gold sets holding primitive
    i that also hold j, shrunk towards 0 for rarely seen i; the diagonal is 0.

    Parameters
    ----------
    gold_sets : one set of primitive ids per training task.
    ids : the primitive ids, in the order of the rows and columns.
    smoothing : pseudo-count added to ``n(i)``, >= 0.

    Returns
    -------
    ``(len(ids), len(ids)) float64``.
    """
    column = {p: j for j, p in enumerate(ids)}
    y = np.zeros((len(gold_sets), len(ids)))
    for row, gold in enumerate(gold_sets):
        for p in gold:
            if p in column:
                y[row, column[p]] = 1.0
    counts = y.sum(0)
    together = y.T @ y
    with np.errstate(invalid="ignore", divide="ignore"):
        p = together / (counts[:, None] + smoothing)
    p = np.nan_to_num(p)
    np.fill_diagonal(p, 0.0)
    return p


def boost(scores: np.ndarray, matrix: np.ndarray, form: str = "max") -> np.ndarray:
    """Co-occurrence boost of every primitive from the others' scores.

    ``"max"``: ``b_j = max_i s_i * P[i, j]`` (the strongest partner vouches for j);
    ``"mean"``: ``b_j = sum_i s_i * P[i, j] / sum_i s_i``.

    Parameters
    ----------
    scores : ``(n_queries, n_primitives)`` scores in [0, 1].
    matrix : ``(n_primitives, n_primitives)`` from :func:`cooccurrence_matrix`.
    form : ``"max"`` or ``"mean"``.

    Returns
    -------
    ``(n_queries, n_primitives) float64``.
    """
    if form == "max":
        return (scores[:, :, None] * matrix[None, :, :]).max(axis=1)
    total = scores.sum(axis=1, keepdims=True)
    return np.divide(scores @ matrix, total, out=np.zeros_like(scores, dtype=np.float64), where=total > 0)


@register("cooccurrence")
class CooccurrenceRetriever(BaseRetriever):
    """Any retriever's scores plus a boost from the primitives used with them in training programs.

    ``score(j) = s_j + weight * boost_j``, with ``s`` the base retriever's scores min-max
    normalised per query and ``boost`` from :func:`boost` over the training folds' gold sets
    (:func:`cooccurrence_matrix`). ``weight = 0`` is the base ranking.

    Parameters
    ----------
    base : the retriever whose scores are completed (specification).
    weight : strength of the boost, >= 0 (a parameter of scoring only: changing it needs no
        refit, which :class:`primsel.retrieval.tuned.TunedRetriever` uses).
    smoothing : pseudo-count of :func:`cooccurrence_matrix`, >= 0.
    form : ``"max"`` or ``"mean"``.

    Raises
    ------
    ValueError : negative weight or smoothing, unknown form, or a base the registry rejects.
    """

    learns_from_tasks = True
    #: Parameters that change scoring only (no refit needed).
    score_parameters = ("weight",)

    def __init__(self, base: Any = "classifier", weight: float = 0.1, smoothing: float = 1.0,
                 form: str = "max") -> None:
        self.base = dict(base) if isinstance(base, Mapping) else base
        self.weight = check_number("weight", weight, minimum=0)
        self.smoothing = check_number("smoothing", smoothing, minimum=0)
        self.form = check_choice("form", form, FORMS)
        with error_context("base", key=True):
            build(self.base, "retriever")

    def set_gold(self, gold: Mapping[str, Any]) -> None:
        """Pass the gold sets on to a base that sees gold (only bounds do)."""
        pass_gold(self._base, gold)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> CooccurrenceRetriever:
        super().fit(library, train_tasks)
        self._base = fit_nested(self.base, "base", library, train_tasks)
        self._matrix = cooccurrence_matrix([t.gold for t in train_tasks], self.ids, self.smoothing)
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        qids = list(queries)
        run = self._base.search(queries, len(self.ids))
        s = np.array([[min_max(run[q]).get(p, 0.0) for p in self.ids] for q in qids])
        out = s + self.weight * boost(s, self._matrix, self.form) if self.weight else s
        return {q: out[row].tolist() for row, q in enumerate(qids)}
