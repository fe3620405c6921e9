"""The report's generation table: task success with its interval, cost in tokens and time, and
success against the completeness of the selection, for every cell that ran a generator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from primsel.eval.success import success_by_coverage, wilson_interval
from primsel.files import read_jsonl

__all__ = ["generation_rows", "generation_table"]

_NOTE = (
    "- Generation: success with its 95% Wilson interval; score: ASPERA's score (100 x passed / "
    "evaluated, minus refused / all); sel. R: selection recall (macro: the mean over tasks of the "
    "share of gold primitives selected); gold complete: share of tasks whose selection held every gold "
    "primitive, with the success of those tasks and of the others, and Fisher's exact test of the "
    "difference (two-sided); prompt sent / computed: mean prompt tokens per task sent to the model "
    "and computed by it (sent minus the tokens its prompt cache held); answer: mean completion tokens "
    "per task; wall: the cell's wall time in minutes (answers from primsel's answer cache take none)."
)


def _rows(directory: Any) -> list[dict[str, Any]]:
    return [row for _, row in read_jsonl(directory / "tasks.jsonl")]


def generation_rows(cell: Any) -> dict[str, Any]:
    """The figures of one finished cell with a generator (see :data:`_NOTE`), from its report
    (``cell.record``, :class:`primsel.experiments.records.CellReport`) and tasks.jsonl.

    Returns
    -------
    ``{"n", "passed", "success", "low", "high", "score", "set_recall", "complete", "complete_passed",
    "incomplete", "incomplete_passed", "p_fisher", "prompt", "computed", "completion", "minutes"}``.
    """
    rows = _rows(cell.directory)
    record = cell.record
    n = len(rows)
    passed = sum(row.get("status") == "pass" for row in rows)
    low, high = wilson_interval(passed, n) if n else (0.0, 0.0)
    cover = success_by_coverage(rows)
    prompt = sum(float((row.get("tokens") or {}).get("prompt", 0)) for row in rows)
    cached = sum(float((row.get("tokens") or {}).get("prompt_cached", 0)) for row in rows)
    completion = sum(float((row.get("tokens") or {}).get("completion", 0)) for row in rows)
    return {
        "n": n, "passed": passed, "success": passed / n if n else 0.0, "low": low, "high": high,
        "score": record.aspera.score if record.aspera is not None else None,
        "set_recall": record.selection.recall_macro,
        "complete": cover["complete"][0], "complete_passed": cover["complete"][1],
        "incomplete": cover["incomplete"][0], "incomplete_passed": cover["incomplete"][1],
        "p_fisher": cover["p_fisher"],
        "prompt": prompt / n if n else 0.0, "computed": (prompt - cached) / n if n else 0.0,
        "completion": completion / n if n else 0.0, "minutes": float(record.run.seconds or 0.0) / 60,
    }


def _rate(passed: int, n: int) -> str:
    return f"{passed}/{n} ({passed / n:.0%})" if n else "–"


def generation_table(cells: Sequence[Any], label_of: Mapping[str, str] | None = None) -> list[str]:
    """Markdown lines of the generation table (one row per finished cell with a generator), its
    note last; [] when no cell ran a generator.

    Parameters
    ----------
    cells : the experiment's cells (:class:`primsel.experiments.results.CellResult`: ``id``,
        ``label``, ``settings``, ``record``, ``directory``, ``finished``).
    label_of : cell id -> the label to show (default: the cell's label).
    """
    gen = [c for c in cells if getattr(c, "finished", True) and c.settings.get("generator") and c.record.success is not None]
    if not gen:
        return []
    lines = ["| configuration | k | tasks | success [95% CI] | score | sel. R | gold complete | success: complete / not "
             "| p Fisher | prompt sent | computed | answer | wall min |",
             "|---|--:|--:|---|--:|--:|--:|---|--:|--:|--:|--:|--:|"]
    for c in gen:
        f = generation_rows(c)
        label = (label_of or {}).get(c.id, c.label)
        p = "–" if f["p_fisher"] is None else (f"{f['p_fisher']:.3f}" if f["p_fisher"] >= 0.001 else "<0.001")
        score = "–" if f["score"] is None else f"{f['score']:.1f}"
        recall = "–" if f["set_recall"] is None else f"{f['set_recall']:.3f}"
        lines.append(
            f"| {label} | {c.settings.get('k')} | {f['n']} | {f['success']:.3f} [{f['low']:.3f}, {f['high']:.3f}] | "
            f"{score} | {recall} | {f['complete'] / f['n'] if f['n'] else 0:.2f} | {_rate(f['complete_passed'], f['complete'])} / "
            f"{_rate(f['incomplete_passed'], f['incomplete'])} | {p} | {f['prompt']:,.0f} | {f['computed']:,.0f} | "
            f"{f['completion']:,.0f} | {f['minutes']:.1f} |")
    return [*lines, "", _NOTE]
