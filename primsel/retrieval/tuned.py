"""Hyper-parameters chosen by cross-validation inside the training tasks (nested cross-validation).

``tuned`` wraps any retriever specification and a grid of parameter values. Its ``fit`` splits
the training tasks it is given into inner folds, scores every grid point by the mean of a
ranking metric over the inner held-out tasks, and fits the best point on all training tasks.
Run inside the cell pipeline's outer cross-validation this is nested cross-validation (Varma &
Simon, BMC Bioinformatics 2006; Cawley & Talbot, JMLR 2010): no test task ever influences
which parameters are used for it.
"""

from __future__ import annotations

import copy
import itertools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.checks import check_number
from primsel.registry import build, error_context, register
from primsel.retrieval.base import BaseRetriever, fit_nested, pass_gold
from primsel.retrieval.cv import fold_assignment
from primsel.types import LearnsFromTasks, Task, ranking

logger = logging.getLogger(__name__)


def ranking_metric(name: str, ranked: Sequence[str], gold: frozenset[str] | set[str]) -> float:
    """``recall@k`` or ``complete@k`` of one ranking.

    Parameters
    ----------
    name : ``"recall@<k>"`` (share of gold in the first k) or ``"complete@<k>"`` (1 when every
        gold primitive is in the first k, else 0).
    ranked : primitive ids, best first.
    gold : the task's gold ids (non-empty).

    Raises
    ------
    ValueError : another metric name, or a k that is not an integer >= 1.
    """
    base, _, cut = name.partition("@")
    if base not in ("recall", "complete") or not cut.isdecimal() or int(cut) < 1:
        raise ValueError(f"metric must be 'recall@k' or 'complete@k' with k >= 1, got {name!r}")
    found = len(set(ranked[:int(cut)]) & set(gold))
    if base == "recall":
        return found / len(gold) if gold else 0.0
    return 1.0 if found == len(gold) else 0.0


def _with_params(spec: Any, params: Mapping[str, Any]) -> Any:
    if not params:
        return spec
    table = {"type": spec} if isinstance(spec, str) else dict(spec)
    return {**table, **params}


@register("tuned")
class TunedRetriever(BaseRetriever):
    """A retriever whose parameters are chosen by cross-validation on its training tasks.

    ``fit(library, train_tasks)`` splits ``train_tasks`` into ``inner_folds`` folds
    (:func:`primsel.retrieval.cv.fold_assignment` with ``seed``), fits the base with every grid
    point on the other inner folds, ranks each inner held-out fold, and keeps the point with the
    highest mean ``metric`` (the sum of the metrics when several are given; ties go to the first
    point in grid order). The base is then fitted with that point on all ``train_tasks``;
    ``chosen`` and ``inner_scores`` say what was found.

    Grid keys are constructor parameters of the base. When every key is one of the base class's
    ``score_parameters`` (parameters of scoring only, e.g. a hybrid's ``weights``), each inner
    fold fits the base once and only re-scores per grid point.

    Parameters
    ----------
    base : the retriever specification (a name or a table).
    grid : parameter name -> list of values; the grid points are their Cartesian product.
    metric : a ranking metric (``"complete@20"``) or a list of them, summed.
    inner_folds : inner cross-validation folds, >= 2 (fewer training tasks than that: the first
        grid point is used).
    seed : seed of the inner folds, >= 0 (an experiment passes its seed).

    Raises
    ------
    ValueError : a grid that is not a table of non-empty lists, an unknown metric, bad
        inner_folds or seed, or a grid point the base class rejects.
    """

    def __init__(self, base: Any = "classifier", grid: Mapping[str, Sequence[Any]] | None = None,
                 metric: str | Sequence[str] = "complete@20", inner_folds: int = 3, seed: int = 0) -> None:
        self.base = dict(base) if isinstance(base, Mapping) else base
        grid = {} if grid is None else grid
        if not isinstance(grid, Mapping) or not all(isinstance(v, (list, tuple)) and v for v in grid.values()):
            raise ValueError(f"grid must be a table of non-empty lists of values, got {grid!r}")
        self.grid = {str(k): list(v) for k, v in grid.items()}
        metrics = [metric] if isinstance(metric, str) else list(metric)
        for name in metrics:
            ranking_metric(name, [], {"x"})
        self.metric = metric if isinstance(metric, str) else metrics
        self.inner_folds = check_number("inner_folds", inner_folds, minimum=2, integer=True)
        self.seed = check_number("seed", seed, minimum=0, integer=True)
        for i, point in enumerate(self.points()):
            with error_context(f"grid point {i} ({point})", key=False):
                build(_with_params(self.base, point), "retriever")

    def points(self) -> list[dict[str, Any]]:
        """The grid points in grid order (the last key varying fastest)."""
        keys = list(self.grid)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.grid[k] for k in keys))]

    @property
    def learns_from_tasks(self) -> bool:
        """True when the base learns from tasks or there is a grid to choose from."""
        return bool(self.grid) or isinstance(build(self.base, "retriever"), LearnsFromTasks)

    def _score_only(self) -> bool:
        probe = build(self.base, "retriever")
        allowed = set(getattr(probe, "score_parameters", ()))
        return bool(self.grid) and set(self.grid) <= allowed

    def _metric_names(self) -> list[str]:
        return [self.metric] if isinstance(self.metric, str) else list(self.metric)

    def _evaluate(self, retriever: Any, tasks: Sequence[Task], n: int) -> float:
        run = retriever.search({t.id: t.query for t in tasks}, n)
        total = 0.0
        for t in tasks:
            order = ranking(run[t.id])
            total += sum(ranking_metric(m, order, t.gold) for m in self._metric_names())
        return total / len(tasks)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> TunedRetriever:
        super().fit(library, train_tasks)
        points = self.points() or [{}]
        self.inner_scores = [0.0] * len(points)
        chosen = 0
        if len(points) > 1 and len(train_tasks) >= self.inner_folds:
            inner = fold_assignment([t.id for t in train_tasks], self.inner_folds, self.seed)
            score_only = self._score_only()
            for fold in range(self.inner_folds):
                fit_on = [t for t in train_tasks if inner[t.id] != fold]
                held = [t for t in train_tasks if inner[t.id] == fold]
                fitted = None
                for i, point in enumerate(points):
                    candidate = build(_with_params(self.base, point), "retriever")
                    if score_only and fitted is not None:
                        state = {k: v for k, v in fitted.__dict__.items() if k not in point}
                        candidate = copy.copy(candidate)
                        candidate.__dict__.update(state)
                    else:
                        candidate.fit(library, fit_on)
                        fitted = candidate
                    self.inner_scores[i] += self._evaluate(candidate, held, len(self.ids)) / self.inner_folds
            chosen = max(range(len(points)), key=lambda i: (self.inner_scores[i], -i))
        self.chosen = points[chosen]
        logger.info("tuned: chose %s (inner %s %.3f) on %d tasks", self.chosen, self.metric,
                    self.inner_scores[chosen], len(train_tasks))
        self._fitted = fit_nested(_with_params(self.base, self.chosen), "base", library, train_tasks)
        return self

    def set_gold(self, gold: Mapping[str, Any]) -> None:
        """Pass the gold sets on to a base that sees them (only bounds do)."""
        pass_gold(self._fitted, gold)

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        return self._fitted.search(queries, len(self.ids))
