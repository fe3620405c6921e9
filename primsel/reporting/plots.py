"""The report's figures, with 95% bootstrap intervals over tasks; each ``plot_*`` takes the
experiment, the PNG's path and the :class:`~primsel.reporting.style.Palette`, and returns False (no
file) when there is nothing to draw. Every text reaches matplotlib through
:func:`~primsel.reporting.style.figure_text` (labels where their artist is made, titles and axis
labels in :func:`save`), so a name with ``$`` or a label starting with ``_`` is drawn as written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from primsel.eval.significance import bootstrap_interval
from primsel.experiments.results import (
    FrontierCurve,
    LoadedCell,
    LoadedExperiment,
    dataset_groups,
    passed_by_round,
    ranking_frontier,
)
from primsel.files import canonical_json
from primsel.reporting.compare import best_of_configurations, shown_rankings, task_interval
from primsel.reporting.style import (
    Palette,
    figure_text,
    is_default,
    is_reference,
    or_default,
    other_columns,
    ranking_key,
    ranking_labels,
    ranks_nothing,
    setting_parts,
    short_labels,
    short_value,
    title,
    wrap,
)

#: The token axis is logarithmic when the largest mean is more than this many times the smallest.
LOG_AXIS_RATIO = 4.0
#: Markers of the selector points, in order of appearance.
SELECTOR_MARKERS = ("*", "D", "P", "X", "v")


def new_figure(width: float = 7.0, height: float = 4.6) -> tuple[Figure, Any]:
    """A figure (matplotlib's object API: no pyplot state) and its axes."""
    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


def save(
    fig: Figure,
    ax: Any,
    path: Path,
    heading: str,
    xlabel: str,
    ylabel: str,
    handles: Sequence[Any] | None = None,
    ylim: tuple[float, float] | None = (0, 1.02),
) -> None:
    """Set ``ylim``, label the axes (through :func:`figure_text`), put the legend (``handles``,
    default: the labelled artists; labels wrapped) beside them and save the PNG."""
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(xlabel=figure_text(xlabel), ylabel=figure_text(ylabel))
    ax.set_title(figure_text(heading), loc="left", fontsize=10)
    ax.grid(True, alpha=0.3)
    if handles is None:
        handles = ax.get_legend_handles_labels()[0]
    handles = list(handles)
    if handles:
        for h in handles:
            h.set_label(wrap(h.get_label()))
        ax.legend(
            handles=handles,
            fontsize=7.5,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0,
            frameon=False,
            labelspacing=0.7,
        )
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})


def _named(label: str, cell: LoadedCell) -> str:
    """A ranking's label in a legend (through :func:`figure_text`), the default marked."""
    if is_default(cell):
        label += " (recommended default)"
    return figure_text(label)


def _legend(label: str, cell: LoadedCell, palette: Palette) -> Line2D:
    """A legend entry of a ranking: its line's colour and style."""
    return Line2D(
        [], [], color=palette.colour(cell), **palette.line(cell), label=_named(label, cell)
    )


def _rankings(experiment: LoadedExperiment) -> list[tuple[str, str, LoadedCell]]:
    """(ranking key, label, a cell) of the shown rankings, then the references, in leaderboard
    order."""
    best = [
        c
        for c in best_of_configurations(experiment.cells).values()
        if not c.settings.get("selector")
    ]
    labels, shown = ranking_labels(best), shown_rankings(experiment)
    firsts: dict[str, LoadedCell] = {}
    for c in best:
        firsts.setdefault(ranking_key(c), c)
    drawn = [k for k in firsts if k in shown] + [k for k, c in firsts.items() if is_reference(c)]
    return [(k, labels[k], firsts[k]) for k in drawn]


def _errorbar(
    ax: Any,
    x: float,
    y: float,
    interval: tuple[float, float] | None,
    colour: str,
    horizontal: bool = False,
) -> None:
    """An error bar of ``interval`` at (x, y), vertical (or ``horizontal``); nothing for None."""
    if interval is None:
        return
    at = x if horizontal else y
    err = [[max(0.0, at - interval[0])], [max(0.0, interval[1] - at)]]
    if horizontal:
        ax.errorbar(
            [x], [y], xerr=err, fmt="none", ecolor=colour, elinewidth=1, capsize=2.5, zorder=6
        )
    else:
        ax.errorbar(
            [x], [y], yerr=err, fmt="none", ecolor=colour, elinewidth=1, capsize=2.5, zorder=6
        )


def plot_recall_curves(experiment: LoadedExperiment, path: Path, palette: Palette) -> bool:
    """Recall@k against k (up to 20), one curve per shown ranking but the whole library, with
    95% bootstrap intervals at the k whose per-task recall tasks.jsonl keeps."""
    fig, ax = new_figure()
    for _, label, c in _rankings(experiment):
        ks = c.report.ranking.recall_ks()
        ks = [k for k in ks if k <= 20] or ks
        if ranks_nothing(c) or not ks:
            continue
        values = [float(c.report.ranking.values[f"recall@{k}"]) for k in ks]
        ax.plot(
            ks,
            values,
            marker=".",
            markersize=4,
            color=palette.colour(c),
            label=_named(label, c),
            **palette.line(c),
        )
        for k, value in zip(ks, values):
            if not is_reference(c):
                _errorbar(ax, k, value, task_interval(c, f"recall@{k}"), palette.colour(c))
    if not ax.lines:
        return False
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    save(
        fig,
        ax,
        path,
        title(experiment, "recall@k"),
        "k (primitives selected)",
        "recall@k (mean over tasks)",
    )
    return True


def _token_cells(experiment: LoadedExperiment) -> list[LoadedCell]:
    """The finished cells that record their documentation tokens and selection recall."""
    return [
        c
        for c in experiment.cells
        if c.finished
        and c.report.docs_tokens is not None
        and c.report.selection.recall_macro is not None
    ]


def _points(
    ax: Any,
    cells: Sequence[LoadedCell],
    palette: Palette,
    experiment: LoadedExperiment,
    handles: list[Any],
) -> bool:
    """Draw the selector cells of the shown rankings as points and the whole library as a vertical
    line, adding their legend ``handles``; False (drawing nothing) when only the whole library would
    be drawn."""
    shown, markers = shown_rankings(experiment), iter(SELECTOR_MARKERS * 4)
    for c in cells:
        if not c.settings.get("selector") or ranking_key(c) not in shown:
            continue
        marker, colour = next(markers), palette.colour(c)
        x, y = c.report.docs_tokens, c.report.selection.recall_macro
        ax.plot(
            [x],
            [y],
            marker=marker,
            markersize=10,
            linestyle="none",
            color=colour,
            markeredgecolor="white",
            zorder=7,
        )
        _errorbar(ax, x, y, task_interval(c, "set_recall"), colour)
        label = (
            f"{short_value(c.settings['selector'])} selector (k <= {c.settings.get('k')}) "
            "on the ranking of its colour"
        )
        handles.append(
            Line2D(
                [],
                [],
                marker=marker,
                markersize=9,
                linestyle="none",
                color=colour,
                label=figure_text(label),
            )
        )
    if not handles:
        return False
    whole = [c for c in cells if ranks_nothing(c)]
    if whole:
        tokens = whole[0].report.docs_tokens
        ax.axvline(
            tokens, color=palette.colour(whole[0]), **{**palette.line(whole[0]), "linewidth": 1.2}
        )
        handles.append(
            _legend(f"all: the whole library ({tokens:,.0f} tokens, recall 1)", whole[0], palette)
        )
    return True


def _cuts_by_ranking(cells: Sequence[LoadedCell]) -> dict[str, dict[str, LoadedCell]]:
    """Ranking key -> (k, closure, threshold) -> its first cell without a selector."""
    groups: dict[str, dict[str, LoadedCell]] = {}
    for c in cells:
        if c.settings.get("selector"):
            continue
        cut = canonical_json(
            [c.settings.get("k"), bool(c.settings.get("closure")), c.settings.get("threshold")]
        )
        groups.setdefault(ranking_key(c), {}).setdefault(cut, c)
    return groups


def _draw_cuts(ax: Any, cuts: Sequence[LoadedCell], best: LoadedCell, palette: Palette) -> None:
    """A ranking's cells over k: a solid line without closure and a dashed one with it (a reference:
    one line in its own style), with their intervals."""
    colour, line = palette.colour(best), palette.line(best)
    for closure, marker, style in ((False, "o", "-"), (True, "^", "--")):
        if closure and "linestyle" in line:
            break  # a reference: one line, in its own style
        group = sorted(
            (c for c in cuts if bool(c.settings.get("closure")) == closure),
            key=lambda c: c.report.docs_tokens,
        )
        if group:
            ax.plot(
                [c.report.docs_tokens for c in group],
                [c.report.selection.recall_macro for c in group],
                marker=marker,
                markersize=4,
                color=colour,
                **{"linestyle": style, **line},
            )
        for c in group:
            _errorbar(
                ax,
                c.report.docs_tokens,
                c.report.selection.recall_macro,
                task_interval(c, "set_recall"),
                colour,
            )


def _log_token_axis(ax: Any, cells: Sequence[LoadedCell]) -> None:
    """Make the token axis logarithmic when the largest mean is more than :data:`LOG_AXIS_RATIO`
    times the smallest."""
    tokens = [c.report.docs_tokens for c in cells if c.report.docs_tokens > 0]
    if not tokens or max(tokens) <= LOG_AXIS_RATIO * min(tokens):
        return
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.xaxis.set_minor_formatter(
        FuncFormatter(lambda x, _: f"{x:,.0f}" if f"{x:.0e}"[0] in "25" else "")
    )


def plot_recall_vs_tokens(experiment: LoadedExperiment, path: Path, palette: Palette) -> bool:
    """Selection recall (macro) against documentation tokens per task: a line per shown ranking over
    k (solid without closure, dashed with), selectors as points, the whole library a vertical line,
    95% bootstrap intervals."""
    cells = _token_cells(experiment)
    if not cells:
        return False
    groups = _cuts_by_ranking(cells)
    fig, ax = new_figure()
    handles = []
    for key, label, best in _rankings(experiment):
        if not groups.get(key) or ranks_nothing(best):
            continue
        _draw_cuts(ax, list(groups[key].values()), best, palette)
        handles.append(_legend(label, best, palette))
    if not _points(ax, cells, palette, experiment, handles):
        return False
    _log_token_axis(ax, cells)
    styles = [
        Line2D([], [], color="#555555", marker="o", markersize=4, linestyle="-", label="top k"),
        Line2D(
            [],
            [],
            color="#555555",
            marker="^",
            markersize=4,
            linestyle="--",
            label="top k + type closure",
        ),
    ]
    scale = ", log scale)" if ax.get_xscale() == "log" else ")"
    save(
        fig,
        ax,
        path,
        title(experiment, "recall against documentation size"),
        "documentation tokens selected per task (mean" + scale,
        "selection recall (macro)",
        handles + styles,
    )
    return True


def ranking_frontiers(
    experiment: LoadedExperiment,
) -> dict[str, tuple[str, LoadedCell, FrontierCurve]]:
    """Ranking key -> (label, its first finished cell with a frontier, the frontier), in grid
    order, for the cells without a selector."""
    cells = [c for c in experiment.cells if c.finished and not c.settings.get("selector")]
    labels = ranking_labels(cells)
    out: dict[str, tuple[str, LoadedCell, FrontierCurve]] = {}
    for c in cells:
        key = ranking_key(c)
        if key in out:
            continue
        found = ranking_frontier(c)
        if found is not None:
            out[key] = (labels[key], c, found)
    return out


def plot_frontier(
    experiment: LoadedExperiment,
    path: Path,
    frontiers: Mapping[str, tuple[str, LoadedCell, FrontierCurve]],
    palette: Palette,
) -> bool:
    """Recall against documentation tokens of the top k for every k, a line per shown ranking
    (``frontiers``) with a 95% bootstrap band, references in grey, the whole library a vertical line
    and the selector cells as points."""
    cells = _token_cells(experiment)
    if not frontiers:
        return False
    fig, ax = new_figure()
    handles, right = [], 0.0
    for key, _, _ in _rankings(experiment):
        label, c, found = frontiers.get(key, (None, None, None))
        if c is None or ranks_nothing(c):
            continue
        ax.plot(found.tokens, found.mean_recall, color=palette.colour(c), **palette.line(c))
        if not is_reference(c):
            low, high = bootstrap_interval(np.array(found.recall))
            ax.fill_between(
                found.tokens, low, high, color=palette.colour(c), alpha=0.15, linewidth=0
            )
        handles.append(_legend(label, c, palette))
        right = max(
            right,
            next(
                (t for t, r in zip(found.tokens, found.mean_recall) if r >= 0.995), found.tokens[-1]
            ),
        )
    if not _points(ax, cells, palette, experiment, handles):
        return False
    right = max([right, *(c.report.docs_tokens for c in cells if c.settings.get("selector"))])
    ax.set_xlim(0, right * 1.05 if right else None)
    save(
        fig,
        ax,
        path,
        title(experiment, "recall/tokens frontier"),
        "documentation tokens selected per task (mean)",
        "recall (macro)",
        handles,
    )
    return True


def plot_metric_by_dataset(
    experiment: LoadedExperiment, path: Path, palette: Palette, metric: str = "ndcg@10"
) -> bool:
    """Grouped bars of ``metric``: a group per dataset, a bar per shown retriever and reference
    (its first finished cell per dataset; not the whole library), with 95% bootstrap intervals."""
    groups, shown = dataset_groups(experiment), shown_rankings(experiment)
    firsts: dict[str, LoadedCell] = {}
    for c in (c for _, cells in groups for c in cells):
        if c.finished and not ranks_nothing(c) and (ranking_key(c) in shown or is_reference(c)):
            firsts.setdefault(c.retriever, c)
    if not firsts:
        return False
    fig, ax = new_figure(9.0, 4.6)
    width = 0.8 / len(firsts)
    for i, (label, first) in enumerate(firsts.items()):
        for g, (_, cells) in enumerate(groups):
            found = next((c for c in cells if c.finished and c.retriever == label), None)
            if found is not None:
                x, value = (
                    g + (i - (len(firsts) - 1) / 2) * width,
                    or_default(found.report.metric(metric), 0.0),
                )
                named = figure_text(label) not in ax.get_legend_handles_labels()[1]
                ax.bar(
                    [x],
                    [value],
                    width,
                    color=palette.colour(first),
                    label=figure_text(label) if named else None,
                )
                _errorbar(ax, x, value, task_interval(found, metric), "#333333")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([figure_text(str(d.get("source", "?"))) for d, _ in groups], fontsize=8)
    save(
        fig,
        ax,
        path,
        f"{experiment.name}: {metric} by dataset",
        "dataset",
        f"{metric} (mean over tasks)",
    )
    return True


def plot_success(experiment: LoadedExperiment, path: Path, palette: Palette) -> bool:
    """Task success of every finished cell that ran a generator, a horizontal bar each in grid
    order with its value at its end, with 95% bootstrap intervals over tasks."""
    cells = [
        c
        for c in experiment.cells
        if c.finished and c.settings.get("generator") and c.report.success is not None
    ]
    if not cells:
        return False
    others = other_columns(cells)
    fig, ax = new_figure(7.5, 1.2 + 0.32 * len(cells))
    positions = list(range(len(cells)))[::-1]
    values = [float(c.report.success) for c in cells]
    ax.barh(positions, values, color=[palette.colour(c) for c in cells], height=0.7)
    for y, value, c in zip(positions, values, cells):
        _errorbar(ax, value, y, task_interval(c, "success"), "#333333", horizontal=True)
        ax.text(min(value, 1.0) + 0.015, y + 0.2, f"{value:.3f}", va="bottom", fontsize=7)
    labels = [
        " ".join(
            [
                c.retriever,
                f"k={c.settings.get('k')}",
                *(["+closure"] if c.settings.get("closure") else []),
                *setting_parts(c, others),
            ]
        )
        for c in cells
    ]
    ax.set_yticks(positions, [figure_text(label) for label in labels], fontsize=7)
    ax.set_xlim(0, 1.1)
    save(
        fig,
        ax,
        path,
        title(experiment, "task success"),
        "task success (fraction of tasks whose program passed)",
        "",
        handles=[],
        ylim=None,
    )
    return True


def plot_success_by_round(experiment: LoadedExperiment, path: Path, palette: Palette) -> bool:
    """Success against round, one line per finished cell with reflection rounds, with 95%
    bootstrap bands over tasks; False (and no file) when no finished cell has rounds."""
    cells = [c for c in experiment.cells if c.finished and c.report.rounds]
    if not cells:
        return False
    labels = short_labels(cells)
    fig, ax = new_figure(8.0, 4.6)
    for c in cells:
        rounds, colour = list(range(1, len(c.report.rounds) + 1)), palette.colour(c)
        success = [float(f.success or 0.0) for f in c.report.rounds]
        ax.plot(rounds, success, marker="o", label=figure_text(labels[c.id]), color=colour)
        passed = passed_by_round(c, len(rounds))
        if passed[0]:
            low, high = bootstrap_interval([[p[t] for p in passed] for t in passed[0]])
            ax.fill_between(rounds, low, high, color=colour, alpha=0.15, linewidth=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    save(
        fig,
        ax,
        path,
        title(experiment, "success by round"),
        "round",
        "success (passed by the round)",
        ylim=None,
    )
    return True
