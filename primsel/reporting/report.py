"""Write an experiment's report: ``report.md``, its figures and the colours the explorer shows.

:func:`write_report` reads an experiment directory (:mod:`primsel.experiments.results`) and
writes beside it

* ``report.md``: the data, a leaderboard (one row per configuration at its best k, with the
  difference to the baseline and its p-value), the figures, then the table of every finished
  cell with its paired tests against its baseline cell, the table of ties, ASPERA's figures when
  a generator ran, the recall/tokens frontier and the reflection rounds
  (:mod:`primsel.reporting.markdown`);
* ``<name>_recall_at_k.png``, ``<name>_recall_vs_tokens.png``, ``<name>_frontier.png`` and,
  with a generator, ``<name>_success.png`` (and ``<name>_success_by_round.png`` with reflection
  rounds); an experiment on several datasets gets ``<name>_ndcg_by_dataset.png`` and a recall@k
  figure per dataset (:mod:`primsel.reporting.plots`);
* ``colours.json``: ``{"cells": {cell id: "#rrggbb"}}``, the colour of each cell's configuration
  in the figures, which the explorer shows beside the cell.

The report holds aggregates only (never per-task rows), so it can be exported (``export=...``)
next to the experiment declaration and committed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from primsel import registry
from primsel.eval.significance import N_RESAMPLES
from primsel.experiments.results import CellResult, Experiment, ReportError, dataset_groups, load_experiment
from primsel.files import write_atomic
from primsel.reporting.compare import MAX_SERIES, leaderboard, significance
from primsel.reporting.markdown import frontier_table, render_markdown
from primsel.reporting.plots import (
    plot_frontier,
    plot_metric_by_dataset,
    plot_recall_curves,
    plot_recall_vs_tokens,
    plot_success,
    ranking_frontiers,
)
from primsel.reporting.rounds import plot_success_by_round
from primsel.reporting.style import Palette, is_reference, ranking_key, slug
from primsel.retrieval.selector import estimate_tokens
from primsel.simulator.library import build_library
from primsel.types import LearnsFromTasks

__all__ = ["write_report"]

#: One figure: (file suffix, title, draw(experiment, path) -> drawn).
Figure = tuple[str, str, Callable[[Experiment, Path], bool]]


def _learning_retrievers(cells: Sequence[CellResult]) -> list[str]:
    """Labels of the cells' retrievers that learn from tasks (built from their specification,
    which only stores parameters, and asked for ``learns_from_tasks``)."""
    out = []
    for label, spec in {c.retriever: c.settings.get("retriever") for c in cells}.items():
        try:
            if isinstance(registry.build(spec, "retriever"), LearnsFromTasks):
                out.append(label)
        except Exception:  # noqa: BLE001 - a retriever that cannot be built here is not annotated
            continue
    return out


def _primitive_tokens() -> dict[str, int]:
    """Estimated documentation tokens of every primitive of the assistant library."""
    library = build_library()
    return {p: estimate_tokens(library[p].text("full")) for p in library}


def _figures(experiment: Experiment, palette: Palette, frontiers: Any) -> list[Figure]:
    """The figures of the experiment, in report order."""
    if len(dataset_groups(experiment)) == 1:
        return [("recall_at_k", "recall@k", lambda e, p: plot_recall_curves(e, p, palette)),
                ("recall_vs_tokens", "recall against tokens", lambda e, p: plot_recall_vs_tokens(e, p, palette)),
                ("frontier", "recall/tokens frontier", lambda e, p: plot_frontier(e, p, frontiers, palette)),
                ("success", "task success", lambda e, p: plot_success(e, p, palette)),
                ("success_by_round", "success by round", plot_success_by_round)]
    figures: list[Figure] = [("ndcg_by_dataset", "nDCG@10 by dataset",
                              lambda e, p: plot_metric_by_dataset(e, p, palette=palette))]
    for data, cells in dataset_groups(experiment):
        source = str(data.get("source", "?"))
        sub = dataclasses.replace(experiment, data=data, cells=tuple(cells), datasets=())
        figures.append((f"{slug(source)}_recall_at_k", f"recall@k, {source}",
                        lambda e, p, sub=sub: plot_recall_curves(sub, p, palette)))
    return figures


def _draw(experiment: Experiment, figures: Sequence[Figure]) -> list[tuple[str, str]]:
    """Draw every figure into the experiment directory; (title, file) of those drawn."""
    images = []
    for suffix, heading, draw in figures:
        file = f"{experiment.name}_{suffix}.png"
        try:
            if draw(experiment, experiment.directory / file):
                images.append((heading, file))
        except OSError as exc:
            raise ReportError(f"cannot write {experiment.directory / file}: {exc.strerror or exc}") from None
    return images


def _shown_note(experiment: Experiment) -> str:
    """What the figures draw: which rankings, when they leave some to the tables, and the intervals."""
    rankings = {ranking_key(c) for c in experiment.cells
                if c.finished and not c.settings.get("selector") and not is_reference(c)}
    intervals = "Error bars and bands: 95% bootstrap intervals over tasks."
    if len(rankings) <= MAX_SERIES:
        return intervals
    return (f"The figures draw the recommended default (black), the baseline and the best other rankings "
            f"by recall@15, {MAX_SERIES} in all, with the oracle, random and the whole library as grey "
            f"references; the others are in the tables. {intervals}")


def _write_text(experiment: Experiment, text: str, colours: dict[str, Any]) -> Path:
    target = experiment.directory / "report.md"
    try:
        write_atomic(target, text)
        write_atomic(experiment.directory / "colours.json", json.dumps(colours, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _export(experiment: Experiment, text: str, images: Sequence[tuple[str, str]], export: Path) -> None:
    try:
        export.mkdir(parents=True, exist_ok=True)
        write_atomic(export / f"{experiment.name}.md", text)
        for _, file in images:
            shutil.copyfile(experiment.directory / file, export / file)
    except OSError as exc:
        raise ReportError(f"cannot export to {export}: {exc.strerror or exc}") from None


def write_report(directory: str | os.PathLike[str], export: str | os.PathLike[str] | None = None,
                 n_resamples: int = N_RESAMPLES, seed: int = 0) -> Path:
    """Write ``report.md``, the figures and ``colours.json`` of an experiment directory.

    Parameters
    ----------
    directory : ``<out>/<name>``.
    export : also copy the report to ``<export>/<name>.md`` and the figures beside it (aggregate
        only: no per-task rows), e.g. ``experiments/``.
    n_resamples, seed : of the randomisation test; ``seed`` also seeds the bootstrap intervals.

    Returns
    -------
    Path of ``report.md``.

    Raises
    ------
    ReportError : see :func:`primsel.experiments.results.load_experiment` and
        :func:`primsel.reporting.compare.baseline_pairs`; or the report or the export directory
        cannot be written (the message names it).
    """
    experiment = load_experiment(directory)
    tests = significance(experiment, n_resamples=n_resamples, seed=seed)
    single = len(dataset_groups(experiment)) == 1
    # the frontier counts documentation tokens of the assistant library: one dataset only
    frontiers = ranking_frontiers(experiment, _primitive_tokens()) if single else {}
    palette = Palette(experiment.cells)
    images = _draw(experiment, _figures(experiment, palette, frontiers))
    finished = [c for c in experiment.cells if c.finished]
    text = render_markdown(
        experiment, tests, images, n_resamples=n_resamples, seed=seed,
        frontier=frontier_table({label: (f.tokens.tolist(), f.mean_recall.tolist()) for label, _, f in frontiers.values()}),
        standings=leaderboard(experiment, tests, n_resamples, seed) if single else (),
        learning=_learning_retrievers(finished), shown_note=_shown_note(experiment))
    target = _write_text(experiment, text, {"cells": {c.id: palette.colour(c) for c in experiment.cells}})
    if export is not None:
        _export(experiment, text, images, Path(export))
    return target
