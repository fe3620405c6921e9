"""Nested cross-validation: the tuned wrapper picks parameters on its training tasks only."""

from __future__ import annotations

from collections import Counter

import pytest

from primsel import registry
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.tuned import TunedRetriever, ranking_metric
from tests.retrieval.conftest import make_task

FITS: Counter = Counter()


class Popular(BaseRetriever):
    """Ranks by training frequency (``flip=False``) or against it (``flip=True``); counts fits."""

    learns_from_tasks = True
    score_parameters = ("flip",)

    def __init__(self, flip: bool = False) -> None:
        self.flip = flip

    def fit(self, library, train_tasks=()):
        super().fit(library, train_tasks)
        FITS[self.flip] += 1
        self._freq = Counter(p for t in train_tasks for p in t.gold)
        return self

    def score(self, queries):
        sign = -1.0 if self.flip else 1.0
        return {q: {p: 1.0 + sign * self._freq[p] for p in self.ids} for q in queries}


class Unscored(Popular):
    score_parameters = ()


def test_ranking_metrics_by_hand():
    ranked = ["a", "b", "c", "d"]
    assert ranking_metric("recall@2", ranked, {"a", "c"}) == 0.5
    assert ranking_metric("complete@3", ranked, {"a", "c"}) == 1.0
    assert ranking_metric("complete@2", ranked, {"a", "c"}) == 0.0
    with pytest.raises(ValueError, match="recall@k"):
        ranking_metric("ndcg@10", ranked, {"a"})


@pytest.mark.parametrize("cls, fits", [(Popular, 3 + 1), (Unscored, 3 * 2 + 1)])
def test_the_better_point_is_chosen_and_score_only_grids_fit_once_per_inner_fold(small_library, cls, fits):
    registry.register("popular")(cls)
    FITS.clear()
    tasks = [make_task(str(i), f"add event {i}", {"calendar.add_event"}) for i in range(1, 7)]
    tuned = TunedRetriever(base="popular", grid={"flip": [True, False]}, metric="recall@1", inner_folds=3)
    tuned.fit(small_library, tasks)
    # by popularity add_event ranks first for every held-out task (recall@1 = 1); flipped, last
    assert tuned.chosen == {"flip": False}
    assert tuned.inner_scores == [0.0, 1.0]
    assert sum(FITS.values()) == fits
    # the final model is the chosen point fitted on all 6 training tasks
    assert tuned.search({"q": "anything"}, 1)["q"] == {"calendar.add_event": 1.0 + 6}


def test_a_single_point_or_too_few_tasks_skip_the_inner_loop(small_library, small_tasks):
    registry.register("popular")(Popular)
    FITS.clear()
    TunedRetriever(base="popular", grid={"flip": [True, False]}, inner_folds=3).fit(small_library, small_tasks[:2])
    assert FITS == Counter({True: 1})  # the first point, fitted once
    assert TunedRetriever(base="bm25").learns_from_tasks is False
    assert TunedRetriever(base="bm25", grid={"k1": [1.0, 2.0]}).learns_from_tasks is True


@pytest.mark.parametrize("kwargs, match", [
    ({"grid": {"k1": []}}, "grid"),
    ({"grid": {"k1": [-1.0]}}, "grid point 0"),
    ({"metric": "mrr"}, "metric"),
    ({"inner_folds": 1}, "inner_folds"),
])
def test_bad_parameters_are_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TunedRetriever(base="bm25", **kwargs)


def test_rescoring_a_fitted_hybrid_equals_refitting_it(small_library, small_tasks):
    from primsel.registry import build
    from primsel.retrieval.cv import fold_assignment

    base = {"type": "hybrid", "method": "wsum", "members": ["bm25", "prior"]}
    grid = {"weights": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]}
    tuned = TunedRetriever(base=base, grid=grid, metric=["recall@2", "complete@3"], inner_folds=2)
    tuned.fit(small_library, small_tasks)
    inner = fold_assignment([t.id for t in small_tasks], 2, 0)
    expected = []
    for weights in grid["weights"]:
        total = 0.0
        for fold in (0, 1):
            fitted = build({**base, "weights": weights}).fit(small_library, [t for t in small_tasks if inner[t.id] != fold])
            held = [t for t in small_tasks if inner[t.id] == fold]
            total += tuned._evaluate(fitted, held, len(small_library)) / 2
        expected.append(total)
    assert tuned.inner_scores == pytest.approx(expected)
