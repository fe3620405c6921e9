"""The reflection rounds of a report: a table of success by round with the gain of each round
over the one before (paired tests on per-task success), its requests and tokens, and a figure of
success against round."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.ticker import MaxNLocator

from primsel.eval.significance import N_RESAMPLES, compare
from primsel.experiments.labels import get_dotted, varied_keys
from primsel.files import read_jsonl
from primsel.reporting.compare import bootstrap_interval
from primsel.reporting.plots import new_figure, save
from primsel.reporting.style import Palette, num, p_value, short_value, table, title


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
    """Cell id -> the settings that vary between the cells (``generator.feedback=trace``), or the
    cell's label when none does."""
    settings = [dict(c.settings) for c in cells]
    keys = sorted({k for s in settings for k in s} - {"dataset"})
    varied = [k for k in varied_keys(settings, keys) if k != "generator"]
    return {c.id: " ".join(f"{k}={short_value(get_dotted(c.settings, k))}" for k in varied) or c.label for c in cells}


def rounds_table(cells: Sequence[Any], n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[str]:
    """Markdown lines of the reflection table of finished cells (``label``, ``directory``,
    ``record``), a row per round; empty when no cell has rounds. ``n_resamples``, ``seed``: of
    the randomisation test."""
    cells = [c for c in cells if c.record.rounds]
    if not cells:
        return []
    reselect = any(c.record.rounds[0].selection_recall is not None for c in cells)
    header = ["configuration", "round", "success", "Δ", "p t", "p rand", "requests", "sent", "cached",
              "prompt tokens", "completion tokens", "cumulative tokens", *(["selection recall"] if reselect else [])]
    labels, rows = short_labels(cells), []
    for c in cells:
        passed = _passed_by_round(Path(c.directory), len(c.record.rounds)) if len(c.record.rounds) >= 2 else []
        for r, rep in enumerate(c.record.rounds, start=1):
            g = compare(passed[r - 1], passed[r - 2], n_resamples=n_resamples, seed=seed) if r >= 2 else None
            gain = [f"{g['mean_diff']:+.3f}", p_value(g["p_t"]), p_value(g["p_randomisation"])] if g else ["–"] * 3
            rows.append([labels[c.id] if r == 1 else "", str(r), num(rep.success), *gain,
                         *(num(v, 0) for v in (rep.calls, rep.requests, rep.cache_hits, rep.prompt_tokens,
                                               rep.completion_tokens, rep.cumulative_tokens)),
                         *([num(rep.selection_recall)] if reselect else [])])
    return ["## Reflection rounds", "", "Configurations are named by the settings that differ between them (the cell "
            "ids are in the first table).", "", *table(header, rows), "",
            "- success: fraction of tasks passed by that round (a task that passes stops). Δ: gain over "
            "the round before; p t: two-sided paired t-test and p rand: paired randomisation "
            f"(sign-flip) test, {n_resamples} resamples, seed {seed}, on per-task success by the round "
            "against by the round before. requests: generation requests of the round (failed tasks of "
            "the round before; answered from the cache or not); sent: HTTP requests the generator sent "
            "(retries included); cached: answered from the cache. Tokens as the endpoint reported them; "
            "cumulative: rounds 1 to this one (plus the LLM selector's tokens when it selects again)."
            + (" selection recall: mean set recall of the selection each task had in that round "
               "(reselect: ranked again with the query plus the error)." if reselect else ""), ""]


def plot_success_by_round(experiment: Any, path: Path) -> bool:
    """Success against round, one line per finished cell with reflection rounds, with 95%
    bootstrap bands over tasks; False (and no file) when no finished cell has rounds."""
    cells = [c for c in experiment.cells if c.finished and c.record.rounds]
    if not cells:
        return False
    labels, palette = short_labels(cells), Palette(experiment.cells)
    fig, ax = new_figure(8.0, 4.6)
    for c in cells:
        rounds = list(range(1, len(c.record.rounds) + 1))
        colour = palette.colour(c)
        success = [float(f.success or 0.0) for f in c.record.rounds]
        ax.plot(rounds, success, marker="o", label=labels[c.id], color=colour)
        passed = _passed_by_round(Path(c.directory), len(rounds))
        if passed[0]:
            low, high = bootstrap_interval([[p[t] for p in passed] for t in passed[0]])
            ax.fill_between(rounds, low, high, color=colour, alpha=0.15, linewidth=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    save(fig, ax, path, title(experiment, "success by round"), "round", "success (passed by the round)", ylim=None)
    return True
