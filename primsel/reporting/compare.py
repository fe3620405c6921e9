"""Paired tests of each cell against its baseline cell (the cell of the baseline retriever with the
same other settings, or the same ``pair_on`` settings), per-task bootstrap intervals, and the
leaderboard of configurations (each at its best finished cell)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from primsel.eval.significance import N_RESAMPLES, bootstrap_interval, compare
from primsel.experiments.labels import baseline_label, pair_key
from primsel.experiments.results import LoadedCell, LoadedExperiment, ReportError, per_task_values
from primsel.files import canonical_json
from primsel.reporting.style import (
    configuration_key,
    configuration_labels,
    is_default,
    is_reference,
    or_default,
    ranking_key,
)

#: The metric the leaderboard orders and tests by (when no generator ran).
LEADER_METRIC = "recall@15"
#: At most this many rankings in a figure besides the references; the rest are in the tables.
MAX_SERIES = 8


def baseline_retriever(experiment: LoadedExperiment) -> str:
    """The retriever label of the experiment's baseline; ReportError when ``baseline`` names no
    retriever label, retriever type or cell id of it."""
    try:
        return baseline_label(
            experiment.baseline,
            [(c.id, c.settings.get("retriever", "?")) for c in experiment.cells],
        )
    except ValueError as exc:
        raise ReportError(f"{experiment.name}: {exc}") from None


def baseline_pairs(experiment: LoadedExperiment) -> dict[str, str | None]:
    """Finished cell id -> its baseline cell id (the first in grid order; None without one);
    ReportError as :func:`baseline_retriever`."""
    finished = [c for c in experiment.cells if c.finished]
    wanted = baseline_retriever(experiment) if finished else None
    base: dict[str, str] = {}
    for c in (c for c in finished if c.retriever == wanted):
        base.setdefault(pair_key(c.settings, experiment.pair_on), c.id)
    return {c.id: base.get(pair_key(c.settings, experiment.pair_on)) for c in finished}


def recall_metric(cell: LoadedCell, base: LoadedCell) -> str:
    """``recall@k`` (the cell's k) when the cell and its baseline have the same k and threshold,
    else ``set_recall``: the per-task recall they are compared on."""
    same = all(cell.settings.get(key) == base.settings.get(key) for key in ("k", "threshold"))
    return f"recall@{cell.settings.get('k')}" if same else "set_recall"


def _paired(
    cell: LoadedCell, base: LoadedCell, metric: str, n_resamples: int, seed: int
) -> dict[str, Any]:
    """The paired tests of ``metric`` per task, ``cell`` against ``base``
    (:func:`primsel.eval.significance.compare`)."""
    return compare(
        per_task_values(cell, metric),
        per_task_values(base, metric),
        n_resamples=n_resamples,
        seed=seed,
    )


def significance(
    experiment: LoadedExperiment, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Paired tests of each finished cell against its baseline cell: per-task recall
    (:func:`recall_metric`), success when both ran a generator. Returns cell id -> ``{"baseline": id
    or None, "recall_metric", "recall", "success"}``, the last two
    :func:`primsel.eval.significance.compare` results, None for the baseline and without one."""
    out: dict[str, dict[str, Any]] = {}
    by_id = {c.id: c for c in experiment.cells}
    for cell_id, base_id in baseline_pairs(experiment).items():
        entry: dict[str, Any] = {
            "baseline": base_id,
            "recall_metric": None,
            "recall": None,
            "success": None,
        }
        out[cell_id] = entry
        if base_id is None or base_id == cell_id:
            continue
        cell, base = by_id[cell_id], by_id[base_id]
        entry["recall_metric"] = recall_metric(cell, base)
        entry["recall"] = _paired(cell, base, entry["recall_metric"], n_resamples, seed)
        if cell.settings.get("generator") and base.settings.get("generator"):
            entry["success"] = _paired(cell, base, "success", n_resamples, seed)
    return out


def task_interval(cell: LoadedCell, metric: str, seed: int = 0) -> tuple[float, float] | None:
    """95% bootstrap interval of a cell's per-task ``metric``; None when tasks.jsonl lacks it."""
    try:
        low, high = bootstrap_interval(list(per_task_values(cell, metric).values()), seed=seed)
    except ReportError:
        return None
    return float(low), float(high)


def best_of_configurations(
    cells: Sequence[LoadedCell], prefer_k: int | None = None, summary: bool = False
) -> dict[tuple[str, str], LoadedCell]:
    """Configuration key -> its best finished cell (at k = ``prefer_k`` where run; by success with
    a generator, then set F1, then fewer tokens), in leaderboard order (references last, then
    success and recall@15) or, with ``summary``, by success, recall@15 and set F1."""
    finished = [c for c in cells if c.finished]
    has_gen = any(c.settings.get("generator") for c in finished)

    def success(c: LoadedCell) -> float:
        """The cell's success (-1 without one) when the cells ran a generator, else 0."""
        if not has_gen:
            return 0.0
        return or_default(c.report.success, -1.0)

    def merit(c: LoadedCell) -> tuple[float, ...]:
        """Higher is better: at the preferred k, success, set F1, fewer tokens."""
        return (
            float(prefer_k is not None and c.settings.get("k") == prefer_k),
            success(c),
            or_default(c.report.selection.f1_macro, 0.0),
            -or_default(c.report.docs_tokens, 0.0),
        )

    def order(c: LoadedCell) -> tuple[float, ...]:
        """Higher comes first."""
        if summary:
            return success(c), or_default(c.report.ranking.recall(prefer_k), 0.0), merit(c)[2]
        return not is_reference(c), success(c), or_default(c.report.metric(LEADER_METRIC), -1.0)

    best: dict[tuple[str, str], LoadedCell] = {}
    for c in finished:
        key = configuration_key(c)
        if key not in best or merit(c) > merit(best[key]):
            best[key] = c
    return dict(sorted(best.items(), key=lambda item: order(item[1]), reverse=True))


def shown_rankings(experiment: LoadedExperiment, limit: int = MAX_SERIES) -> set[str]:
    """Ranking keys of the rankings a figure draws: the default's and the baseline's, then the best
    others in leaderboard order, at most ``limit`` (references and selectors apart); one per
    retriever first, at the lowest seed. ReportError as :func:`baseline_retriever`."""
    best = best_of_configurations(experiment.cells)
    if not best:
        return set()
    wanted = baseline_retriever(experiment)
    cells = [c for c in best.values() if not is_reference(c) and not c.settings.get("selector")]
    first = [c for c in cells if is_default(c)] + [
        c for c in cells if c.retriever == wanted and not is_default(c)
    ]
    lowest = min(
        (c.settings.get("seed") for c in cells if isinstance(c.settings.get("seed"), int)),
        default=None,
    )
    retrievers: set[str] = set()
    primary: list[str] = []  # the first ranking of each retriever
    others: list[str] = []
    for c in sorted(
        first + cells, key=lambda c: c.settings.get("seed") != lowest
    ):  # stable: the order above
        key = ranking_key(c)
        if key in primary or key in others:
            continue
        retriever = canonical_json(c.settings.get("retriever"))
        if retriever in retrievers:
            others.append(key)
        else:
            primary.append(key)
        retrievers.add(retriever)
    return set((primary + others)[:limit])


@dataclass(frozen=True)
class Standing:
    """A leaderboard row: a configuration (``label``) at its best finished ``cell``, the 95%
    bootstrap ``interval`` of its per-task :data:`LEADER_METRIC`, its paired tests of that metric
    against the baseline configuration (``recall``) and of success against its baseline cell
    (``success``), or None; ``baseline``: it is the baseline."""

    label: str
    cell: LoadedCell
    interval: tuple[float, float] | None
    recall: Mapping[str, Any] | None
    success: Mapping[str, Any] | None
    baseline: bool


def _unranked(cell: LoadedCell) -> str:
    """The settings besides those that name or cut the ranking, to find a baseline partner."""
    return canonical_json(
        {
            k: v
            for k, v in cell.settings.items()
            if k not in ("retriever", "k", "closure", "selector", "threshold")
        }
    )


def leaderboard(
    experiment: LoadedExperiment,
    tests: Mapping[str, Mapping[str, Any]],
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> list[Standing]:
    """One :class:`Standing` per configuration of the finished cells of an experiment on one
    dataset, in leaderboard order; ``tests``: its :func:`significance` (for the success tests).
    ReportError as :func:`baseline_retriever`."""
    best = best_of_configurations(experiment.cells)
    labels = configuration_labels(list(best.values()))
    wanted = baseline_retriever(experiment)
    partners: dict[str, LoadedCell] = {}
    for c in (c for c in best.values() if c.retriever == wanted and not c.settings.get("selector")):
        partners.setdefault(_unranked(c), c)
    intervals = {c.id: task_interval(c, LEADER_METRIC, seed) for c in best.values()}
    out = []
    for key, c in best.items():
        base = partners.get(_unranked(c))
        recall = None
        if (
            base is not None
            and base is not c
            and intervals[c.id] is not None
            and intervals[base.id] is not None
        ):
            recall = _paired(c, base, LEADER_METRIC, n_resamples, seed)
        out.append(
            Standing(
                label=labels[key],
                cell=c,
                interval=intervals[c.id],
                baseline=base is c,
                recall=recall,
                success=(tests.get(c.id) or {}).get("success"),
            )
        )
    return out
