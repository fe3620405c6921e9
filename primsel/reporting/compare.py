"""Comparisons of an experiment's cells: the baseline of each cell, paired tests against it,
bootstrap intervals, and the leaderboard of configurations.

Baseline: every cell is compared with the cell of the baseline retriever that agrees with it
on everything else (k, closure, folds, seed, generator, ...), or, when the experiment sets
``pair_on``, on those settings only. The baseline retriever is the experiment's ``baseline`` (a
retriever label, a retriever type one label has, or a cell id), else the retriever of the first
cell. Recall is compared as per-task recall@k when the two cells have the same k and threshold,
else as per-task selection (set) recall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from primsel.eval.significance import N_RESAMPLES, compare
from primsel.experiments.labels import baseline_label, pair_key
from primsel.experiments.results import CellResult, Experiment, ReportError, per_task_values
from primsel.files import canonical_json
from primsel.reporting.style import configuration_key, configuration_labels, is_default, is_reference, ranking_key

__all__ = ["LEADER_METRIC", "MAX_SERIES", "N_BOOTSTRAP", "Standing", "baseline_pairs", "bootstrap_interval",
           "leaderboard", "recall_metric", "shown_rankings", "significance"]

#: The ranking metric the leaderboard orders and tests by (when no generator ran).
LEADER_METRIC = "recall@15"
#: At most this many rankings in a figure (besides the references); the rest are in the tables.
MAX_SERIES = 8
#: Resamples of the bootstrap intervals.
N_BOOTSTRAP = 2000


def baseline_retriever(experiment: Experiment) -> str:
    """The retriever label of the experiment's baseline.

    Raises
    ------
    ReportError : the experiment's ``baseline`` names neither a retriever label, a retriever
        type nor a cell id of it.
    """
    try:
        return baseline_label(experiment.baseline, [(c.id, c.settings.get("retriever", "?")) for c in experiment.cells])
    except ValueError as exc:
        raise ReportError(f"{experiment.name}: {exc}") from None


def baseline_pairs(experiment: Experiment) -> dict[str, str | None]:
    """The baseline cell of every finished cell: cell id -> baseline cell id (None when the
    baseline retriever has no finished cell with the same other settings, or the same
    ``pair_on`` settings; when several agree, the first in grid order).

    Raises
    ------
    ReportError : see :func:`baseline_retriever`.
    """
    finished = [c for c in experiment.cells if c.finished]
    if not finished:
        return {}
    wanted = baseline_retriever(experiment)
    base: dict[str, str] = {}
    for c in finished:
        if c.retriever == wanted:
            base.setdefault(pair_key(c.settings, experiment.pair_on), c.id)
    out = {}
    for c in finished:
        key = pair_key(c.settings, experiment.pair_on)
        own = c.id if c.retriever == wanted and base.get(key) == c.id else None
        out[c.id] = own or base.get(key)
    return out


def recall_metric(cell: CellResult, base: CellResult) -> str:
    """The per-task recall a cell is compared on with its baseline cell: ``recall@k`` (k of the
    cell) when both have the same k and threshold, else ``set_recall`` (the recall of what each
    selected)."""
    same = cell.settings.get("k") == base.settings.get("k") and \
        cell.settings.get("threshold") == base.settings.get("threshold")
    return f"recall@{cell.settings.get('k')}" if same else "set_recall"


def _paired(cell: CellResult, base: CellResult, metric: str, n_resamples: int, seed: int) -> dict[str, Any]:
    """:func:`primsel.eval.significance.compare` of a per-task metric of two cells."""
    return compare(per_task_values(cell, metric), per_task_values(base, metric), n_resamples=n_resamples, seed=seed)


def significance(experiment: Experiment, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Paired tests of every finished cell against its baseline cell (:func:`baseline_pairs`).

    Per-task recall is compared (:func:`recall_metric`); when both cells ran a generator,
    per-task success too.

    Returns
    -------
    cell id -> ``{"baseline": id or None, "recall_metric": name or None, "recall": compare(...)
    or None, "success": compare(...) or None}`` (see :func:`primsel.eval.significance.compare`);
    ``recall``/``success`` are None for the baseline cell itself and when there is no partner.
    """
    out: dict[str, dict[str, Any]] = {}
    by_id = {c.id: c for c in experiment.cells}
    for cid, bid in baseline_pairs(experiment).items():
        entry: dict[str, Any] = {"baseline": bid, "recall_metric": None, "recall": None, "success": None}
        if bid is not None and bid != cid:
            cell, base = by_id[cid], by_id[bid]
            entry["recall_metric"] = recall_metric(cell, base)
            entry["recall"] = _paired(cell, base, entry["recall_metric"], n_resamples, seed)
            if cell.settings.get("generator") and base.settings.get("generator"):
                entry["success"] = _paired(cell, base, "success", n_resamples, seed)
        out[cid] = entry
    return out


def bootstrap_interval(values: Sequence[float] | np.ndarray, n_resamples: int = N_BOOTSTRAP, seed: int = 0,
                       confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the mean over tasks (``scipy.stats.bootstrap``; Efron
    and Tibshirani, An Introduction to the Bootstrap, 1993).

    Parameters
    ----------
    values : per-task values, shape ``(n_tasks,)`` or ``(n_tasks, n_points)`` (one interval per
        column, the same resampled tasks for every column); n_tasks >= 1, finite.
    n_resamples, seed : of the resampling.
    confidence : level of the interval, in (0, 1).

    Returns
    -------
    (low, high), each of shape ``()`` or ``(n_points,)``; both equal the mean when every value
    is the same or there is one task.

    Raises
    ------
    ValueError : no tasks, or values that are not finite.
    """
    data = np.asarray(values, dtype=float)
    if data.ndim not in (1, 2) or data.shape[0] == 0:
        raise ValueError(f"bootstrap needs per-task values of shape (n_tasks,) or (n_tasks, n_points), got {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("bootstrap values contain NaN or infinite values")
    mean = data.mean(axis=0)
    if data.shape[0] == 1:
        return mean, mean
    result = stats.bootstrap((data,), np.mean, axis=0, vectorized=True, n_resamples=n_resamples,
                             confidence_level=confidence, method="percentile", random_state=seed)
    low, high = result.confidence_interval
    # every resample of constant values has the same mean; keep it exact
    return np.where(np.ptp(data, axis=0) == 0, mean, low), np.where(np.ptp(data, axis=0) == 0, mean, high)


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def _merit(cell: CellResult, has_gen: bool) -> tuple[float, float, float]:
    """Best k of a configuration: task success (with a generator), then set F1 (macro), then
    fewer documentation tokens."""
    r = cell.record
    return (_or(r.success, -1.0) if has_gen else 0.0, _or(r.selection.f1_macro, 0.0), -_or(r.docs_tokens, 0.0))


def _order(cell: CellResult, has_gen: bool) -> tuple[bool, float, float]:
    """Leaderboard order: references last, then by success (with a generator) and recall@15."""
    r = cell.record
    return (not is_reference(cell), _or(r.success, -1.0) if has_gen else 0.0, _or(r.metric(LEADER_METRIC), -1.0))


def best_of_configurations(cells: Sequence[CellResult]) -> dict[tuple[str, str], CellResult]:
    """Configuration key -> its best finished cell (:func:`_merit`), in leaderboard order."""
    finished = [c for c in cells if c.finished]
    has_gen = any(c.settings.get("generator") for c in finished)
    best: dict[tuple[str, str], CellResult] = {}
    for c in finished:
        key = configuration_key(c)
        if key not in best or _merit(c, has_gen) > _merit(best[key], has_gen):
            best[key] = c
    return dict(sorted(best.items(), key=lambda item: _order(item[1], has_gen), reverse=True))


def shown_rankings(experiment: Experiment, limit: int = MAX_SERIES) -> set[str]:
    """Ranking keys (:func:`primsel.reporting.style.ranking_key`) of the rankings a figure
    draws: the default's and the baseline's, then the best others in leaderboard order, at
    most ``limit`` (references and selectors apart: references are always drawn, a selector's
    points with its ranking). One ranking per retriever comes first, at the lowest seed (a
    retriever run at five seeds would otherwise fill a figure with itself); the other seeds
    and folds of a retriever only fill what is left.

    Raises
    ------
    ReportError : see :func:`baseline_retriever`.
    """
    best = best_of_configurations(experiment.cells)
    if not best:
        return set()
    wanted = baseline_retriever(experiment)
    cells = [c for c in best.values() if not is_reference(c) and not c.settings.get("selector")]
    first = [c for c in cells if is_default(c)] + [c for c in cells if c.retriever == wanted and not is_default(c)]
    seeds = [c.settings.get("seed") for c in cells if isinstance(c.settings.get("seed"), int)]
    lowest = min(seeds, default=None)
    ordered = sorted(first + cells, key=lambda c: c.settings.get("seed") != lowest)   # stable: the order above
    retrievers: set[str] = set()
    primary: list[str] = []
    others: list[str] = []
    for c in ordered:
        key = ranking_key(c)
        if key in primary or key in others:
            continue
        retriever = canonical_json(c.settings.get("retriever"))
        (others if retriever in retrievers else primary).append(key)
        retrievers.add(retriever)
    return set((primary + others)[:limit])


@dataclass(frozen=True)
class Standing:
    """One row of the leaderboard: a configuration at its best k.

    Parameters
    ----------
    label : the configuration's label (:func:`primsel.reporting.style.configuration_labels`).
    cell : its best finished cell.
    interval : 95% bootstrap interval of the cell's mean per-task :data:`LEADER_METRIC`, or None
        when tasks.jsonl lacks it.
    recall : paired test of per-task :data:`LEADER_METRIC` against the baseline configuration
        (:func:`primsel.eval.significance.compare`), None for the baseline and without partner.
    success : the cell's paired test of per-task success against its baseline cell, or None.
    baseline : True for the baseline configuration.
    """

    label: str
    cell: CellResult
    interval: tuple[float, float] | None
    recall: Mapping[str, Any] | None
    success: Mapping[str, Any] | None
    baseline: bool


def _unranked(cell: CellResult) -> str:
    """The settings besides those that name or cut the ranking, to find a baseline partner."""
    return canonical_json({k: v for k, v in cell.settings.items()
                           if k not in ("retriever", "k", "closure", "selector", "threshold")})


def leaderboard(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]], n_resamples: int = N_RESAMPLES,
                seed: int = 0) -> list[Standing]:
    """One :class:`Standing` per configuration of the experiment's finished cells, in
    leaderboard order (references last).

    Parameters
    ----------
    experiment : the experiment (one dataset).
    tests : :func:`significance` of it (the success test of each best cell is taken from it).
    n_resamples, seed : of the randomisation test and of the bootstrap.

    Raises
    ------
    ReportError : see :func:`baseline_retriever`; a tasks.jsonl without per-task recall@15.
    """
    best = best_of_configurations(experiment.cells)
    labels = configuration_labels(list(best.values()))
    wanted = baseline_retriever(experiment)
    partners: dict[str, CellResult] = {}
    for c in best.values():
        if c.retriever == wanted and not c.settings.get("selector"):
            partners.setdefault(_unranked(c), c)
    out = []
    for key, c in best.items():
        base = partners.get(_unranked(c))
        values = _values_or_none(c)
        interval = None if values is None else tuple(float(x) for x in bootstrap_interval(values, seed=seed))
        recall = None
        if base is not None and base is not c and values is not None and _values_or_none(base) is not None:
            recall = _paired(c, base, LEADER_METRIC, n_resamples, seed)
        out.append(Standing(label=labels[key], cell=c, interval=interval, recall=recall,
                            success=(tests.get(c.id) or {}).get("success"), baseline=base is c))
    return out


def _values_or_none(cell: CellResult) -> list[float] | None:
    try:
        return list(per_task_values(cell, LEADER_METRIC).values())
    except ReportError:
        return None
