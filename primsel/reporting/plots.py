"""The report's figures: recall@k, recall against documentation tokens, the recall/tokens
frontier of each ranking, task success, and a metric by dataset.

Every figure follows :mod:`primsel.reporting.style`: one colour per ranking (the same in every
figure), the recommended default in black with a thick line, the references (oracle, random,
the whole library) in grey as reference lines, at most :data:`primsel.reporting.compare.MAX_SERIES`
rankings (the rest are in the report's tables), 95% bootstrap intervals over tasks, and a
legend beside the axes that never grows wider than them. Each function returns False (and
writes no file) when there is nothing to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from primsel.experiments.results import (
    CellResult,
    Experiment,
    FrontierCurve,
    ReportError,
    dataset_groups,
    per_task_values,
)
from primsel.experiments.results import ranking_frontier as frontier_of
from primsel.files import canonical_json
from primsel.reporting.compare import best_of_configurations, bootstrap_interval, shown_rankings
from primsel.reporting.style import (
    Palette,
    is_default,
    is_reference,
    other_columns,
    ranking_key,
    ranking_labels,
    ranks_nothing,
    short_value,
    title,
    wrap,
)
from primsel.experiments.labels import get_dotted

__all__ = ["LOG_AXIS_RATIO", "Frontier", "plot_frontier", "plot_metric_by_dataset", "plot_recall_curves",
           "plot_recall_vs_tokens", "plot_success", "ranking_frontier", "ranking_frontiers"]

#: The recall-against-tokens plot takes a log scale when the largest mean is more than this
#: many times the smallest.
LOG_AXIS_RATIO = 4.0
#: Markers of the selector points, in order of appearance.
SELECTOR_MARKERS = ("*", "D", "P", "X", "v")


def new_figure(width: float = 7.0, height: float = 4.6) -> tuple[Figure, Any]:
    """A figure (matplotlib's object API: no pyplot state, no backend chosen) and its axes."""
    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def save(fig: Figure, ax: Any, path: Path, heading: str, xlabel: str, ylabel: str,
         handles: Sequence[Any] | None = None) -> None:
    """Label the axes, put the legend beside them (labels wrapped, so it stays narrower than
    the axes) and save a PNG with every artist inside the image."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(heading, loc="left", fontsize=10)
    ax.grid(True, alpha=0.3)
    handles = list(handles) if handles is not None else ax.get_legend_handles_labels()[0]
    if handles:
        for h in handles:
            h.set_label(wrap(h.get_label()))
        ax.legend(handles=handles, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  frameon=False, labelspacing=0.7)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def _legend_label(label: str, cell: CellResult) -> str:
    return label + (" (recommended default)" if is_default(cell) else "")


def _rankings(experiment: Experiment) -> list[tuple[str, str, CellResult]]:
    """(ranking key, label, a cell) of the rankings a figure draws, in leaderboard order: the
    shown ones (:func:`shown_rankings`), then the references; selector cells are not rankings."""
    best = [c for c in best_of_configurations(experiment.cells).values() if not c.settings.get("selector")]
    labels = ranking_labels(best)
    shown = shown_rankings(experiment)
    firsts: dict[str, CellResult] = {}
    for c in best:
        firsts.setdefault(ranking_key(c), c)
    drawn = [k for k in firsts if k in shown] + [k for k, c in firsts.items() if is_reference(c)]
    return [(k, labels[k], firsts[k]) for k in drawn]


def _errorbar(ax: Any, x: float, y: float, interval: tuple[float, float] | None, colour: str,
              horizontal: bool = False) -> None:
    if interval is None:
        return
    err = [[max(0.0, (y if not horizontal else x) - interval[0])], [max(0.0, interval[1] - (y if not horizontal else x))]]
    if horizontal:
        ax.errorbar([x], [y], xerr=err, fmt="none", ecolor=colour, elinewidth=1, capsize=2.5, zorder=6)
    else:
        ax.errorbar([x], [y], yerr=err, fmt="none", ecolor=colour, elinewidth=1, capsize=2.5, zorder=6)


def plot_recall_curves(experiment: Experiment, path: Path, palette: Palette | None = None) -> bool:
    """Recall@k against k (1..20, or what report.json holds), one curve per shown ranking
    (selectors do not rank, so they have no curve; the whole library ranks in id order, so it
    has none either), with 95% bootstrap intervals at the k whose per-task recall tasks.jsonl
    keeps."""
    palette = palette or Palette(experiment.cells)
    fig, ax = new_figure()
    drawn = False
    for _, label, c in _rankings(experiment):
        if ranks_nothing(c):
            continue
        ranking = c.record.ranking
        ks = ranking.recall_ks()
        ks = [k for k in ks if k <= 20] or ks
        if not ks:
            continue
        colour = palette.colour(c)
        ax.plot(ks, [float(ranking.values[f"recall@{k}"]) for k in ks], marker=".", markersize=4, color=colour,
                label=_legend_label(label, c), **palette.line(c))
        for k in ks:
            if not is_reference(c):
                _errorbar(ax, k, float(ranking.values[f"recall@{k}"]), _task_interval(c, f"recall@{k}"), colour)
        drawn = True
    if not drawn:
        return False
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1.02)
    save(fig, ax, path, title(experiment, "recall@k"), "k (primitives selected)", "recall@k (mean over tasks)")
    return True


def _task_interval(cell: CellResult, metric: str) -> tuple[float, float] | None:
    """95% bootstrap interval of a per-task metric of a cell; None when tasks.jsonl lacks it
    (it keeps recall@k for k = 5, 10, 15, 20 and the cell's k only)."""
    try:
        values = list(per_task_values(cell, metric).values())
    except ReportError:
        return None
    low, high = bootstrap_interval(values)
    return float(low), float(high)


def _closure_lines(ax: Any, cells: Sequence[CellResult], colour: str, line: Mapping[str, Any]) -> None:
    """Selection recall against tokens over k, one line without closure (solid, circles) and
    one with (dashed, triangles), with intervals on recall."""
    for closure, marker, style in ((False, "o", "-"), (True, "^", "--")):
        if closure and "linestyle" in line:
            break  # a reference: one line, in its own style
        group = sorted((c for c in cells if bool(c.settings.get("closure")) == closure),
                       key=lambda c: c.record.docs_tokens)
        if not group:
            continue
        ax.plot([c.record.docs_tokens for c in group], [c.record.selection.recall_macro for c in group],
                marker=marker, markersize=4, color=colour, **{"linestyle": style, **line})
        for c in group:
            _errorbar(ax, c.record.docs_tokens, c.record.selection.recall_macro, _task_interval(c, "set_recall"),
                      colour)


def _by_ranking(cells: Sequence[CellResult]) -> dict[str, list[CellResult]]:
    """The cells of each ranking without a selector, one per (k, closure, threshold): cells
    that differ only in what follows the selection select the same."""
    out: dict[str, dict[str, CellResult]] = {}
    for c in cells:
        if not c.settings.get("selector"):
            cut = canonical_json([c.settings.get("k"), bool(c.settings.get("closure")), c.settings.get("threshold")])
            out.setdefault(ranking_key(c), {}).setdefault(cut, c)
    return {key: list(group.values()) for key, group in out.items()}


def _selector_points(ax: Any, cells: Sequence[CellResult], palette: Palette, shown: set[str]) -> list[Any]:
    """Stars (and other markers) for the selector cells whose ranking is shown; their legend
    handles."""
    handles = []
    markers = iter(SELECTOR_MARKERS * 4)
    for c in cells:
        if not c.settings.get("selector") or ranking_key(c) not in shown:
            continue
        marker, colour = next(markers), palette.colour(c)
        x, y = c.record.docs_tokens, c.record.selection.recall_macro
        ax.plot([x], [y], marker=marker, markersize=10, linestyle="none", color=colour, markeredgecolor="white",
                zorder=7)
        _errorbar(ax, x, y, _task_interval(c, "set_recall"), colour)
        handles.append(Line2D([], [], marker=marker, markersize=9, linestyle="none", color=colour,
                              label=f"{short_value(c.settings['selector'])} selector (k <= {c.settings.get('k')}) "
                                    "on the ranking of its colour"))
    return handles


def _all_line(ax: Any, cells: Sequence[CellResult], palette: Palette) -> list[Any]:
    """A vertical reference line at the documentation tokens of the whole library."""
    whole = [c for c in cells if ranks_nothing(c)]
    if not whole:
        return []
    tokens = whole[0].record.docs_tokens
    ax.axvline(tokens, color=palette.colour(whole[0]), **{**palette.line(whole[0]), "linewidth": 1.2})
    return [Line2D([], [], color=palette.colour(whole[0]), **palette.line(whole[0]),
                   label=f"all: the whole library ({tokens:,.0f} tokens, recall 1)")]


def _style_handles() -> list[Any]:
    return [Line2D([], [], color="#555555", marker="o", markersize=4, linestyle="-", label="top k"),
            Line2D([], [], color="#555555", marker="^", markersize=4, linestyle="--", label="top k + type closure")]


def plot_recall_vs_tokens(experiment: Experiment, path: Path, palette: Palette | None = None) -> bool:
    """Selection recall (macro) against documentation tokens selected per task: one line per
    shown ranking over k (solid without closure, dashed with), its selector cells as points,
    the whole library as a vertical reference line; 95% bootstrap intervals on recall. Returns
    False (nothing drawn) when no cell has a ranking or selector to draw besides the whole library."""
    cells = _token_cells(experiment)
    if not cells:
        return False
    palette = palette or Palette(experiment.cells)
    shown = shown_rankings(experiment)
    groups = _by_ranking(cells)
    fig, ax = new_figure()
    handles = []
    for key, label, best in _rankings(experiment):
        group = groups.get(key, [])
        if not group or ranks_nothing(best):
            continue
        _closure_lines(ax, group, palette.colour(best), palette.line(best))
        handles.append(Line2D([], [], color=palette.colour(best), **palette.line(best), label=_legend_label(label, best)))
    handles += _selector_points(ax, cells, palette, shown)
    if not handles:  # the whole library alone compares nothing: no figure
        return False
    handles += _all_line(ax, cells, palette)
    _token_axis(ax, [c.record.docs_tokens for c in cells])
    ax.set_ylim(0, 1.02)
    save(fig, ax, path, title(experiment, "recall against documentation size"),
         "documentation tokens selected per task (mean" + (", log scale)" if ax.get_xscale() == "log" else ")"),
         "selection recall (macro)", handles + _style_handles())
    return True


def _token_cells(experiment: Experiment) -> list[CellResult]:
    """The finished cells whose report has documentation tokens and selection recall."""
    return [c for c in experiment.cells
            if c.finished and c.record.docs_tokens is not None and c.record.selection.recall_macro is not None]


def _token_axis(ax: Any, tokens: Sequence[float]) -> None:
    """A log scale with plain tick labels when the tokens span more than :data:`LOG_AXIS_RATIO`."""
    tokens = [t for t in tokens if t > 0]
    if tokens and max(tokens) > LOG_AXIS_RATIO * min(tokens):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if f"{x:.0e}"[0] in "25" else ""))


#: The recall/tokens frontier of one ranking (:class:`primsel.experiments.results.FrontierCurve`).
Frontier = FrontierCurve


def ranking_frontier(cell: CellResult) -> tuple[list[float], list[float]] | None:
    """The recall/tokens frontier of a cell's ranking: for k = 1 .. library size, the mean
    documentation tokens and the mean recall of the top k, over the tasks
    (:func:`primsel.experiments.results.ranking_frontier`).

    Returns
    -------
    (mean tokens per k, mean recall per k), or None when the cell has no frontier.
    """
    found = frontier_of(cell)
    return None if found is None else (list(found.tokens), found.mean_recall)


def ranking_frontiers(experiment: Experiment) -> dict[str, tuple[str, CellResult, Frontier]]:
    """One frontier per ranking (:func:`primsel.reporting.style.ranking_key`; cells without a
    selector), in grid order: ranking key -> (label, its first finished cell with a frontier,
    :class:`primsel.experiments.results.FrontierCurve`)."""
    cells = [c for c in experiment.cells if c.finished and not c.settings.get("selector")]
    labels = ranking_labels(cells)
    out: dict[str, tuple[str, CellResult, Frontier]] = {}
    for c in cells:
        key = ranking_key(c)
        if key not in out and (found := frontier_of(c)) is not None:
            out[key] = (labels[key], c, found)
    return out


def plot_frontier(experiment: Experiment, path: Path,
                  frontiers: Mapping[str, tuple[str, CellResult, Frontier]],
                  palette: Palette | None = None) -> bool:
    """Recall against documentation tokens: one line per shown ranking (its top k for every k,
    with a 95% bootstrap band over tasks), the oracle and random as grey references, the whole
    library as a vertical line, and the selector cells as points. Returns False (nothing drawn)
    when no ranking or selector is drawn besides the whole library."""
    cells = _token_cells(experiment)
    if not frontiers:
        return False
    palette = palette or Palette(experiment.cells)
    shown = shown_rankings(experiment)
    fig, ax = new_figure()
    handles, right = [], 0.0
    for key, _, _ in _rankings(experiment):
        if key not in frontiers:
            continue
        label, c, found = frontiers[key]
        if ranks_nothing(c):
            continue
        colour, mean = palette.colour(c), found.mean_recall
        ax.plot(found.tokens, mean, color=colour, **palette.line(c))
        if not is_reference(c):
            low, high = bootstrap_interval(np.array(found.recall))
            ax.fill_between(found.tokens, low, high, color=colour, alpha=0.15, linewidth=0)
        handles.append(Line2D([], [], color=colour, **palette.line(c), label=_legend_label(label, c)))
        right = max(right, next((t for t, r in zip(found.tokens, mean) if r >= 0.995), found.tokens[-1]))
    handles += _selector_points(ax, cells, palette, shown)
    if not handles:  # the whole library alone compares nothing: no figure
        return False
    handles += _all_line(ax, cells, palette)
    right = max([right, *(c.record.docs_tokens for c in cells if c.settings.get("selector"))])
    ax.set_xlim(0, right * 1.05 if right else None)
    ax.set_ylim(0, 1.02)
    save(fig, ax, path, title(experiment, "recall/tokens frontier"),
         "documentation tokens selected per task (mean)", "recall (macro)", handles)
    return True


def plot_metric_by_dataset(experiment: Experiment, path: Path, metric: str = "ndcg@10",
                           palette: Palette | None = None) -> bool:
    """Grouped bars of ``metric``: one group per dataset, one bar per shown retriever and
    reference (the first finished cell of each retriever and dataset; the whole library ranks
    nothing), with 95% bootstrap intervals over tasks."""
    groups = dataset_groups(experiment)
    shown = shown_rankings(experiment)
    firsts: dict[str, CellResult] = {}
    for _, cells in groups:
        for c in cells:
            if c.finished and not ranks_nothing(c) and (ranking_key(c) in shown or is_reference(c)):
                firsts.setdefault(c.retriever, c)
    if not firsts:
        return False
    palette = palette or Palette(experiment.cells)
    fig, ax = new_figure(9.0, 4.6)
    width = 0.8 / len(firsts)
    for i, (label, first) in enumerate(firsts.items()):
        for g, (_, cells) in enumerate(groups):
            found = next((c for c in cells if c.finished and c.retriever == label), None)
            if found is None:
                continue
            x, value = g + (i - (len(firsts) - 1) / 2) * width, _or(found.record.metric(metric), 0.0)
            named = label not in ax.get_legend_handles_labels()[1]
            ax.bar([x], [value], width, color=palette.colour(first), label=label if named else None)
            _errorbar(ax, x, value, _task_interval(found, metric), "#333333")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([str(d.get("source", "?")) for d, _ in groups], fontsize=8)
    ax.set_ylim(0, 1.02)
    save(fig, ax, path, f"{experiment.name}: {metric} by dataset", "dataset", f"{metric} (mean over tasks)")
    return True


def success_labels(cells: Sequence[CellResult]) -> list[str]:
    """Bar labels of the success plot: retriever, k, closure and the settings that vary."""
    others = other_columns(cells)
    return [" ".join([c.retriever, f"k={c.settings.get('k')}", *(["+closure"] if c.settings.get("closure") else []),
                      *(f"{k}={short_value(get_dotted(c.settings, k))}" for k in others
                        if get_dotted(c.settings, k) is not None)]) for c in cells]


def plot_success(experiment: Experiment, path: Path, palette: Palette | None = None) -> bool:
    """Task success of every finished cell that ran a generator, one horizontal bar each (in
    grid order, the value written at its end), with 95% bootstrap intervals over tasks."""
    cells = [c for c in experiment.cells if c.finished and c.settings.get("generator") and c.record.success is not None]
    if not cells:
        return False
    palette = palette or Palette(experiment.cells)
    fig, ax = new_figure(7.5, 1.2 + 0.32 * len(cells))
    positions = list(range(len(cells)))[::-1]
    values = [float(c.record.success) for c in cells]
    ax.barh(positions, values, color=[palette.colour(c) for c in cells], height=0.7)
    for y, value, c in zip(positions, values, cells):
        _errorbar(ax, value, y, _task_interval(c, "success"), "#333333", horizontal=True)
        ax.text(min(value, 1.0) + 0.015, y + 0.2, f"{value:.3f}", va="bottom", fontsize=7)
    ax.set_yticks(positions, success_labels(cells), fontsize=7)
    ax.set_xlim(0, 1.1)
    save(fig, ax, path, title(experiment, "task success"), "task success (fraction of tasks whose program passed)",
         "", handles=[])
    return True

