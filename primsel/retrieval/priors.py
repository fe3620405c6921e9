"""Popularity prior: how often each primitive is gold in the training tasks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.registry import register
from primsel.retrieval.base import BaseRetriever
from primsel.types import Task


@register("prior")
class PriorRetriever(BaseRetriever):
    """Ranks every query's primitives by their frequency in the training tasks' gold sets.

    The score of a primitive is the fraction of training tasks whose gold set contains it; the
    query text is not read (except that an empty query ranks by id with scores 0, as for every
    retriever). Without training tasks every score is 0. Learns from tasks: evaluate it by
    cross-validation (:func:`primsel.retrieval.cv.cross_validated_run`).
    """

    learns_from_tasks = True

    def __init__(self) -> None:
        pass

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> PriorRetriever:
        super().fit(library, train_tasks)
        counts: Counter[str] = Counter(p for t in train_tasks for p in t.gold if p in library)
        n = len(train_tasks)
        self._scores = {p: counts[p] / n for p in counts} if n else {}
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        return {q: self._scores for q in queries}
