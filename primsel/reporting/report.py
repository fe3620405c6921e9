"""Write an experiment's report beside its run folder: ``report.md``, the figures
(``<name>_<figure>.png``) and ``colours.json`` (``{"cells": {cell id: "#rrggbb"}}``, the colours the
explorer shows)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from primsel.eval.significance import N_RESAMPLES
from primsel.experiments.results import (
    LoadedExperiment,
    ReportError,
    dataset_groups,
    learning_retrievers,
    load_experiment,
    markdown_path,
    write_colours,
)
from primsel.files import write_atomic
from primsel.llm.answers import ANSWERS_SUFFIX, export_answers
from primsel.reporting.compare import MAX_SERIES, leaderboard, significance
from primsel.reporting.markdown import frontier_table, render_markdown
from primsel.reporting.plots import (
    plot_frontier,
    plot_metric_by_dataset,
    plot_recall_curves,
    plot_recall_vs_tokens,
    plot_success,
    plot_success_by_round,
    ranking_frontiers,
)
from primsel.reporting.style import Palette, is_reference, ranking_key, slug


def _draw(
    experiment: LoadedExperiment, palette: Palette, frontiers: dict, single: bool
) -> list[tuple[str, str]]:
    """Draw the experiment's figures into its directory; (title, file) of those drawn."""
    if single:  # each draws (experiment, path, palette) and answers whether it wrote the file
        figures = [
            ("recall_at_k", "recall@k", plot_recall_curves),
            ("recall_vs_tokens", "recall against tokens", plot_recall_vs_tokens),
            (
                "frontier",
                "recall/tokens frontier",
                lambda e, p, c: plot_frontier(e, p, frontiers, c),
            ),
            ("success", "task success", plot_success),
            ("success_by_round", "success by round", plot_success_by_round),
        ]
    else:
        figures = [("ndcg_by_dataset", "nDCG@10 by dataset", plot_metric_by_dataset)]
        for data, cells in dataset_groups(experiment):
            sub = dataclasses.replace(experiment, data=data, cells=tuple(cells), datasets=())
            figures.append(
                (
                    f"{slug(data.get('source', '?'))}_recall_at_k",
                    f"recall@k, {data.get('source', '?')}",
                    lambda _, p, c, sub=sub: plot_recall_curves(sub, p, c),
                )
            )
    images = []
    for suffix, heading, draw in figures:
        file = f"{experiment.name}_{suffix}.png"
        try:
            if draw(experiment, experiment.directory / file, palette):
                images.append((heading, file))
        except OSError as exc:
            raise ReportError(
                f"cannot write {experiment.directory / file}: {exc.strerror or exc}"
            ) from None
    return images


def write_report(
    directory: str | os.PathLike[str],
    export: str | os.PathLike[str] | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Path:
    """Write ``report.md``, the figures and ``colours.json`` into ``directory`` (``<out>/<name>``);
    with ``export``, also ``<export>/<name>.md`` and its figures. ``n_resamples``, ``seed``: of the
    randomisation test (``seed`` also seeds the bootstrap intervals). Returns the Path of
    ``report.md``.

    Raises
    ------
    ReportError : the experiment cannot be read or paired with its baseline, or a file cannot be
        written (named).
    """
    experiment = load_experiment(directory)
    tests = significance(experiment, n_resamples=n_resamples, seed=seed)
    single = len(dataset_groups(experiment)) == 1
    frontiers = ranking_frontiers(experiment) if single else {}
    palette = Palette(experiment.cells)
    images = _draw(experiment, palette, frontiers, single)
    rankings = {
        ranking_key(c)
        for c in experiment.cells
        if c.finished and not c.settings.get("selector") and not is_reference(c)
    }
    shown = "Error bars and bands: 95% bootstrap intervals over tasks."
    if len(rankings) > MAX_SERIES:
        shown = (
            f"The figures draw the recommended default (black), the baseline and the best other rankings by "
            f"recall@15, {MAX_SERIES} in all, with the oracle, random and the whole library as grey references; "
            f"the others are in the tables. {shown}"
        )
    text = render_markdown(
        experiment,
        tests,
        images,
        n_resamples=n_resamples,
        seed=seed,
        frontier=frontier_table(
            {label: (list(f.tokens), f.mean_recall) for label, _, f in frontiers.values()}
        ),
        standings=leaderboard(experiment, tests, n_resamples, seed) if single else (),
        learning=learning_retrievers([c for c in experiment.cells if c.finished]),
        shown_note=shown,
    )
    target = markdown_path(experiment.directory)
    try:
        write_atomic(target, text)
        write_colours(experiment.directory, {c.id: palette.colour(c) for c in experiment.cells})
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    if export is not None:
        export = Path(export)
        try:
            export.mkdir(parents=True, exist_ok=True)
            write_atomic(export / f"{experiment.name}.md", text)
            for _, file in images:
                shutil.copyfile(experiment.directory / file, export / file)
            export_model_answers(experiment, export)
        except OSError as exc:
            raise ReportError(f"cannot export to {export}: {exc.strerror or exc}") from None
    return target


def export_model_answers(experiment: LoadedExperiment, export: Path) -> Path | None:
    """Write ``<export>/<name>.answers.jsonl.gz``: the model answers of the cells that generated
    programs with a chat model, read from the answer cache (:mod:`primsel.llm.answers`), filed under
    each cell, task and prompt digest. ``primsel run`` of the experiment file beside it reads them
    back.

    Returns
    -------
    The file's path, or None when no cell recorded a prompt digest (nothing written).

    Raises
    ------
    OSError : the file cannot be written.
    """
    entries = [
        (cell.id, row.task_id, row.program.prompt_digest)
        for cell in experiment.cells
        for row in cell.task_rows(missing_ok=True)
        if row.program is not None and row.program.prompt_digest
    ]
    if not entries:
        return None
    path = export / f"{experiment.name}{ANSWERS_SUFFIX}"
    export_answers(entries, path)
    return path
