"""The reflection part of an experiment's report: success by round, its cost, and the gain of
each round with its significance.

For every finished cell with reflection rounds (its ``report.json`` holds ``success@1``,
:mod:`primsel.experiments.reflection`), :func:`rounds_table` gives one row per round: success by
that round, the gain over the round before with the p-values of two paired tests on per-task
success (by round r against by round r - 1, read from the ``rounds`` of ``tasks.jsonl``;
:func:`primsel.eval.significance.compare`), the generation requests of the round (asked, sent
to the endpoint, answered from the cache), its tokens and the cumulative tokens, and with
``reselect`` the recall of the round's selection. :func:`plot_success_by_round` draws success
against round, one line per cell. Aggregates only, like the rest of the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.ticker import MaxNLocator

from primsel.eval.significance import N_RESAMPLES, compare
from primsel.experiments.records import CellReport
from primsel.experiments.labels import get_dotted, varied_keys
from primsel.files import read_jsonl
from primsel.reporting.compare import bootstrap_interval
from primsel.reporting.plots import new_figure, save
from primsel.reporting.style import Palette, num, p_value, short_value, title

__all__ = ["plot_success_by_round", "round_count", "round_gains", "rounds_table", "short_labels"]


def round_count(record: CellReport) -> int:
    """The number of rounds a cell's report covers (0: no reflection)."""
    return len(record.rounds)


def _passed_by_round(directory: Path, rounds: int) -> list[dict[str, float]]:
    """Per round r (index r - 1), ``{task id: 1.0 if passed by round r else 0.0}``."""
    out: list[dict[str, float]] = [{} for _ in range(rounds)]
    for _, row in read_jsonl(directory / "tasks.jsonl"):
        entries = row.get("rounds") or [{"round": 1, "status": row.get("status")}]
        for r in range(1, rounds + 1):
            passed = any(e.get("status") == "pass" for e in entries if int(e.get("round", 1)) <= r)
            out[r - 1][str(row["task_id"])] = 1.0 if passed else 0.0
    return out


def short_labels(cells: Sequence[Any]) -> dict[str, str]:
    """Cell id -> what tells the cell apart from the others: the settings that vary between
    them (``generator.feedback=trace``), the cell's label when none does."""
    settings = [dict(c.settings) for c in cells]
    keys = sorted({k for s in settings for k in s} - {"dataset"})
    varied = [k for k in varied_keys(settings, keys) if k != "generator"]
    out = {}
    for c in cells:
        parts = [f"{k}={short_value(get_dotted(c.settings, k))}" for k in varied]
        out[c.id] = " ".join(parts) or c.label
    return out


def round_gains(cell: Any, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict[int, dict[str, Any]]:
    """The gain of each round over the one before, for rounds 2..R of a cell.

    Parameters
    ----------
    cell : a finished cell (``directory``, ``record``), e.g. a
        :class:`primsel.experiments.results.CellResult`.
    n_resamples, seed : of the randomisation test.

    Returns
    -------
    round -> :func:`primsel.eval.significance.compare` of per-task success by that round
    against by the round before (``mean_diff``, ``p_t``, ``p_randomisation``, ...).

    Raises
    ------
    FileNotFoundError : the cell has no tasks.jsonl.
    """
    rounds = round_count(cell.record)
    if rounds < 2:
        return {}
    passed = _passed_by_round(Path(cell.directory), rounds)
    return {r: compare(passed[r - 1], passed[r - 2], n_resamples=n_resamples, seed=seed)
            for r in range(2, rounds + 1)}


def rounds_table(cells: Sequence[Any], n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[str]:
    """Markdown lines of the reflection table (empty when no cell has rounds).

    Parameters
    ----------
    cells : finished cells (``label``, ``directory``, ``record``).
    n_resamples, seed : of the randomisation test.
    """
    cells = [c for c in cells if round_count(c.record)]
    if not cells:
        return []
    reselect = any(c.record.rounds[0].selection_recall is not None for c in cells)
    header = ["configuration", "round", "success", "Δ", "p t", "p rand", "requests", "sent", "cached",
              "prompt tokens", "completion tokens", "cumulative tokens"]
    if reselect:
        header.append("selection recall")
    lines = ["## Reflection rounds", "",
             "Configurations are named by the settings that differ between them (the cell ids are in the "
             "first table).", "",
             "| " + " | ".join(header) + " |",
             "|---|" + "|".join("--:" for _ in header[1:]) + "|"]
    labels = short_labels(cells)
    for c in cells:
        gains = round_gains(c, n_resamples, seed)
        for r, rep in enumerate(c.record.rounds, start=1):
            g = gains.get(r)
            row = [labels[c.id] if r == 1 else "", str(r), num(rep.success),
                   f"{g['mean_diff']:+.3f}" if g else "–", p_value(g["p_t"]) if g else "–",
                   p_value(g["p_randomisation"]) if g else "–",
                   num(rep.calls, 0), num(rep.requests, 0), num(rep.cache_hits, 0), num(rep.prompt_tokens, 0),
                   num(rep.completion_tokens, 0), num(rep.cumulative_tokens, 0)]
            if reselect:
                row.append(num(rep.selection_recall))
            lines.append("| " + " | ".join(row) + " |")
    lines += ["",
              "- success: fraction of tasks passed by that round (a task that passes stops). Δ: gain over "
              "the round before; p t: two-sided paired t-test and p rand: paired randomisation "
              f"(sign-flip) test, {n_resamples} resamples, seed {seed}, on per-task success by the round "
              "against by the round before. requests: generation requests of the round (failed tasks of "
              "the round before; answered from the cache or not); sent: HTTP requests the generator sent "
              "(retries included); cached: answered from the cache. Tokens as the endpoint reported them; "
              "cumulative: rounds 1 to this one (plus the LLM selector's tokens when it selects again)."
              + (" selection recall: mean set recall of the selection each task had in that round "
                 "(reselect: ranked again with the query plus the error)." if reselect else ""),
              ""]
    return lines


def plot_success_by_round(experiment: Any, path: Path) -> bool:
    """Success against round, one line per finished cell with reflection rounds, with 95%
    bootstrap intervals over tasks.

    Returns
    -------
    False (and no file) when no finished cell has rounds.
    """
    cells = [c for c in experiment.cells if c.finished and round_count(c.record)]
    if not cells:
        return False
    labels, palette = short_labels(cells), Palette(experiment.cells)
    fig, ax = new_figure(8.0, 4.6)
    for c in cells:
        rounds = list(range(1, round_count(c.record) + 1))
        colour = palette.colour(c)
        ax.plot(rounds, [float(figures.success or 0.0) for figures in c.record.rounds], marker="o", label=labels[c.id],
                color=colour)
        passed = _passed_by_round(Path(c.directory), len(rounds))
        if passed[0]:
            low, high = bootstrap_interval([[p[t] for p in passed] for t in passed[0]])
            ax.fill_between(rounds, low, high, color=colour, alpha=0.15, linewidth=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    save(fig, ax, path, title(experiment, "success by round"), "round", "success (passed by the round)")
    return True
