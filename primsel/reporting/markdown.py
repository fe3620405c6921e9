"""The text of an experiment's report: the leaderboard first, then the figures, then the full
tables (every cell, ties, ASPERA's figures, the frontier, reflection rounds) and their notes.

Aggregates only (never per-task rows), so the text can be committed beside the experiment's
declaration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.eval.aspera import markdown_table as aspera_table
from primsel.eval.significance import N_RESAMPLES
from primsel.experiments.labels import generator_label, get_dotted
from primsel.experiments.records import (
    LEADER_COLUMNS,
    RANKED_COLUMNS,
    REPORT_KS,
    SUMMARY_COLUMNS,
    SUMMARY_METRICS,
    TABLE_COLUMNS,
)
from primsel.experiments.results import CellResult, Experiment, data_text, dataset_groups
from primsel.reporting.generation import generation_table
from primsel.reporting.compare import LEADER_METRIC, N_BOOTSTRAP, Standing
from primsel.reporting.rounds import rounds_table
from primsel.reporting.style import (
    configuration_key,
    configuration_labels,
    is_default,
    is_reference,
    num,
    other_columns,
    p_value,
    ranking_key,
    ranking_labels,
    ranks_nothing,
    short_value,
    slug,
)

__all__ = ["COLUMNS", "RANKED_COLUMNS", "SUMMARY_COLUMNS", "TIE_KS", "best_cells", "frontier_table",
           "leaderboard_lines", "render_markdown", "tie_table"]

#: The table's metric columns, the ranking columns of the table of ties and their cut-offs, the
#: summary's and the leaderboard's columns: from :mod:`primsel.experiments.records`.
COLUMNS = TABLE_COLUMNS
TIE_KS = REPORT_KS


def _row(values: Sequence[str]) -> str:
    return "| " + " | ".join(values) + " |"


# ---------------------------------------------------------------------------------------------
# The leaderboard
# ---------------------------------------------------------------------------------------------
def _leader_name(s: Standing) -> str:
    if is_default(s.cell) and not s.cell.settings.get("selector"):
        return f"**{s.label}** (recommended default)"
    if is_reference(s.cell):
        return f"{s.label} (reference)"
    return s.label + (" (baseline)" if s.baseline else "")


def _test_cells(test: Mapping[str, Any] | None, baseline: bool) -> list[str]:
    if baseline:
        return ["baseline", "–"]
    if not test:
        return ["–", "–"]
    return [f"{test['mean_diff']:+.3f}", p_value(test["p_randomisation"])]


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def _leader_row(rank: int, s: Standing, has_gen: bool) -> list[str]:
    record = s.cell.record

    def value(name: str) -> float | None:
        # the whole library's order is primitive-id order: its ranking metrics say nothing
        return record.docs_tokens if name == "docs_tokens" else None if ranks_nothing(s.cell) else record.metric(name)

    recall = num(value(LEADER_METRIC))
    if s.interval is not None and not ranks_nothing(s.cell):
        recall += f" [{s.interval[0]:.3f}, {s.interval[1]:.3f}]"
    row = [str(rank), _leader_name(s), str(s.cell.settings.get("k")), "yes" if s.cell.settings.get("closure") else "no",
           recall, *(num(value(key), digits) for key, _, digits in LEADER_COLUMNS)]
    if has_gen:
        row.append(num(record.success) if s.cell.settings.get("generator") else "–")
    row += _test_cells(None if ranks_nothing(s.cell) else s.recall, s.baseline)
    if has_gen:
        row += _test_cells(s.success, False)
    return row


def _headline(standings: Sequence[Standing], has_gen: bool) -> list[str]:
    """One sentence: the best configuration, by how much it beats the baseline, and the default."""
    competing = [s for s in standings if not is_reference(s.cell)]
    if not competing:
        return []
    top, what = competing[0], "task success" if has_gen else "recall@15"
    value = top.cell.record.metric("success" if has_gen else LEADER_METRIC)
    text = f"Highest {what}: {top.label} ({num(value)})"
    test = top.success if has_gen else top.recall
    if test:
        p = p_value(test["p_randomisation"])
        base = next((x for x in standings if x.baseline), None)
        named = f" {base.label} ({num(base.cell.record.metric('success' if has_gen else LEADER_METRIC))})" if base else ""
        text += (f", {test['mean_diff']:+.3f} over the baseline{named} (paired randomisation test, "
                 f"p {'< ' + p[1:] if p.startswith('<') else '= ' + p})")
    default = next((s for s in competing if is_default(s.cell) and not s.cell.settings.get("selector")), None)
    if default is not None and default is not top:
        rank = standings.index(default) + 1
        text += f"; the recommended default ranks {rank} ({num(default.cell.record.metric(LEADER_METRIC))} recall@15)"
    return [text + ".", ""]


def leaderboard_lines(standings: Sequence[Standing], n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[str]:
    """Markdown lines of the leaderboard: one row per configuration at its best k, best first
    (references last), with recall@15 and its 95% bootstrap interval, complete@20, nDCG@10,
    tokens, success when a generator ran, and the difference to the baseline with its p-value.
    Empty when no cell finished."""
    if not standings:
        return []
    has_gen = any(s.cell.settings.get("generator") for s in standings)
    header = ["#", "configuration", "k", "closure", "R@15 [95% CI]", *(h for _, h, _ in LEADER_COLUMNS)]
    header += ["success"] if has_gen else []
    header += ["ΔR@15", "p"] + (["Δsucc", "p succ"] if has_gen else [])
    lines = ["## Leaderboard", "", *_headline(standings, has_gen), _row(header),
             "|--:|---|--:|---|" + "--:|" * (len(header) - 4)]
    lines += [_row(_leader_row(i, s, has_gen)) for i, s in enumerate(standings, start=1)]
    lines += ["", f"Each configuration at its best k ({'highest task success, then ' if has_gen else ''}highest set "
              "F1 (macro), then fewest documentation tokens; the full table below has every k), ordered by "
              + ("task success, then " if has_gen else "") + "recall@15, references last. R@15 [95% CI]: mean "
              f"recall@15 over tasks and its percentile bootstrap interval ({N_BOOTSTRAP} resamples of the "
              f"tasks, seed {seed}). R sel: recall of the selection at that k (macro; what the tokens buy). "
              "ΔR@15: mean per-task difference of recall@15 to the baseline configuration "
              f"with the same other settings; p: two-sided paired randomisation test ({n_resamples} sign flips, "
              f"seed {seed})" + ("; Δsucc: difference of task success to the baseline cell at the same k and "
                                 "closure, with its p" if has_gen else "") + ".", ""]
    return lines


# ---------------------------------------------------------------------------------------------
# The full table of cells
# ---------------------------------------------------------------------------------------------
def extra_metrics(cells: Sequence[CellResult]) -> list[str]:
    """The metrics the cells' ``metrics`` setting asks for beyond :data:`COLUMNS` (each gets a
    column of the full table, headed by its name), sorted."""
    shown = {key for key, _ in COLUMNS}
    return sorted({m for c in cells for m in (c.settings.get("metrics") or ()) if m not in shown})


def _header(others: Sequence[str], has_gen: bool, has_llm: bool, extra: Sequence[str] = ()) -> list[str]:
    header = ["configuration", "k", "closure", *others, *(h for _, h in COLUMNS), *extra, "ties@k"]
    header += (["success"] if has_gen else []) + (["cached"] if has_llm else []) + ["ΔR@k", "p t", "p rand"]
    return header + (["Δsucc", "p t succ", "p rand succ"] if has_gen else []) + ["cell"]


def _tests(t: Mapping[str, Any], cid: str, has_gen: bool) -> list[str]:
    if t.get("baseline") == cid:
        row = ["baseline", "–", "–"]
    elif t.get("recall"):
        mark = "" if str(t.get("recall_metric") or "recall@").startswith("recall@") else " (set)"
        row = [f"{t['recall']['mean_diff']:+.3f}{mark}", p_value(t["recall"]["p_t"]),
               p_value(t["recall"]["p_randomisation"])]
    else:
        row = ["–", "–", "–"]
    if has_gen:
        s = t.get("success")
        row += [f"{s['mean_diff']:+.3f}", p_value(s["p_t"]), p_value(s["p_randomisation"])] if s else ["–", "–", "–"]
    return row


def _cell_row(c: CellResult, t: Mapping[str, Any], others: Sequence[str], has_gen: bool, has_llm: bool,
              extra: Sequence[str] = ()) -> list[str]:
    r = c.record
    row = [c.retriever, str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no"]
    for key in others:
        value = get_dotted(c.settings, key)
        row.append(generator_label(value) if key == "generator" else short_value(value))
    row += [num(r.metric(key), 1 if key == "docs_tokens" else 3) for key, _ in COLUMNS]
    row += [num(r.metric(key)) for key in extra]
    tied = r.ranking.tied(c.settings.get("k"))
    row.append("–" if tied is None else str(int(tied)))
    if has_gen:
        row.append(num(r.success) if c.settings.get("generator") else "–")
    if has_llm:
        row.append(f"{int(r.run.llm_answers_cached or 0)}/{int(r.run.llm_answers)}" if r.run.llm_answers else "–")
    return row + _tests(t, c.id, has_gen) + [f"`{c.id}`" + ("" if c.complete else " *incomplete*")]


def cell_table(cells: Sequence[CellResult], tests: Mapping[str, Mapping[str, Any]], others: Sequence[str],
               has_gen: bool, has_llm: bool) -> list[str]:
    """Markdown lines of the table of ``cells``: one row per cell, its metrics and its test
    against the baseline."""
    extra = extra_metrics(cells)
    header = _header(others, has_gen, has_llm, extra)
    lines = [_row(header), "|" + "|".join("---" if i < 3 + len(others) else "--:" for i in range(len(header) - 1)) + "|---|"]
    lines += [_row(_cell_row(c, tests.get(c.id, {}), others, has_gen, has_llm, extra)) for c in cells]
    return lines + [""]


def tie_table(cells: Sequence[CellResult], title: str = "Ties") -> list[str]:
    """Markdown lines of the table of ties: one row per ranking (cells that differ only in k
    and closure share one), each ranking metric in primitive-id order and tie-aware (the mean
    over every order of tied scores, :func:`primsel.eval.metrics.tie_aware`) side by side, and
    the number of tasks with a tie across k = 5, 10, 15, 20. Cells whose selector differs share
    their ranking's row; a label names only the settings that change the ranking. Empty when no cell has tie-aware
    values (cells computed before they existed). ``title``: the section heading."""
    series: dict[str, CellResult] = {}
    for c in cells:
        if c.record.ranking.tie_aware:
            series.setdefault(ranking_key(c), c)
    if not series:
        return []
    labels = ranking_labels(list(series.values()))
    n_tasks = {int(c.record.selection.n_tasks or 0) for c in series.values()}
    header = ["ranking", *(x for _, h in RANKED_COLUMNS for x in (h, f"{h} ta")), *(f"ties@{k}" for k in TIE_KS)]
    lines = [f"## {title}", "",
             "Each ranking metric with tied scores in primitive-id order (as above) and tie-aware (*ta*: "
             "the mean over every order of the tied primitives, computed exactly per group of tied scores; "
             "McSherry and Najork, ECIR 2008). ties@k: tasks (of "
             f"{'/'.join(str(n) for n in sorted(n_tasks))}) whose ranking has a tie across rank k.", "",
             _row(header), "|---|" + "|".join("--:" for _ in header[1:]) + "|"]
    for key, c in series.items():
        ranking = c.record.ranking
        row = [labels[key], *(x for m, _ in RANKED_COLUMNS for x in (num(c.record.metric(m)), num(ranking.tie_aware.get(m))))]
        row += ["–" if ranking.tied(k) is None else str(int(ranking.tied_tasks[k])) for k in TIE_KS]
        lines.append(_row(row))
    return lines + [""]


def _summary(groups: Sequence[tuple[Mapping[str, Any], Sequence[CellResult]]]) -> list[str]:
    """Tables with a row per retriever and a column per dataset, one per :data:`SUMMARY_METRICS`
    metric (the first finished cell of each retriever and dataset)."""
    labels = list(dict.fromkeys(c.retriever for _, cells in groups for c in cells if c.finished))
    lines = []
    for key, heading in SUMMARY_METRICS:
        lines += [f"**{heading}** by dataset", "",
                  "| retriever | " + " | ".join(str(d.get("source", "?")) for d, _ in groups) + " |",
                  "|---|" + "--:|" * len(groups)]
        for label in labels:
            row = [label]
            for _, cells in groups:
                found = next((c for c in cells if c.finished and c.retriever == label), None)
                row.append(num(found.record.metric(key)) if found is not None else "–")
            lines.append(_row(row))
        lines.append("")
    return lines


def frontier_table(frontiers: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                   levels: Sequence[float] = (0.9, 0.95)) -> list[str]:
    """Markdown lines: per ranking (label -> (mean tokens per k, mean recall per k)), the
    smallest k whose mean recall@k reaches each of ``levels`` and the mean documentation
    tokens of that top k."""
    if not frontiers:
        return []
    head = " | ".join(f"k for R {level:g} | tokens for R {level:g}" for level in levels)
    lines = ["Recall/tokens frontier of each ranking (top k, k = 1 .. all): the smallest k whose mean "
             "recall@k reaches the level, and the mean documentation tokens of that top k.", "",
             f"| ranking | {head} |", "|---|" + "--:|" * (2 * len(levels))]
    for label, (tokens, recall) in frontiers.items():
        row = [label]
        for level in levels:
            k = next((i for i, r in enumerate(recall) if r >= level - 1e-12), None)
            row += ["–", "–"] if k is None else [str(k + 1), f"{tokens[k]:.0f}"]
        lines.append(_row(row))
    return lines + [""]


# ---------------------------------------------------------------------------------------------
# The whole text
# ---------------------------------------------------------------------------------------------
def _preamble(experiment: Experiment, cells: Sequence[CellResult]) -> list[str]:
    """Title, description, the data and how many cells finished, and the cells of other data."""
    lines = [f"# {experiment.name}", ""]
    if experiment.description:
        lines += [experiment.description.strip(), ""]
    incomplete = [c for c in cells if not c.complete]
    done = f"Cells finished: {len(cells) - len(incomplete)} of {len(experiment.cells)}"
    if incomplete:
        done += (f"; {len(incomplete)} more incomplete (LLM requests failed after their retries; marked "
                 "*incomplete*, recomputed by the next `primsel run`)")
    lines.append(f"Data: {data_text(experiment.data)}. {done}.")
    if experiment.other_data:
        n_other = sum(experiment.other_data.values())
        if len(experiment.other_data) == 1:
            which = f"on {next(iter(experiment.other_data))}"
        else:
            which = "on other data (" + ", ".join(f"{n} on {text}" for text, n in experiment.other_data.items()) + ")"
        lines += ["", f"This report covers only the cells run on {data_text(experiment.data)}. The directory "
                      f"also holds {n_other} cells computed {which}, not shown here; run the experiment on "
                      "that data again to report them (their cells are reused)."]
    return lines + [""]


def _images(images: Sequence[tuple[str, str]]) -> list[str]:
    return [line for heading, file in images for line in (f"![{heading}]({file})", "")]


def _figures(images: Sequence[tuple[str, str]], shown_note: str) -> list[str]:
    if not images:
        return []
    return ["## Figures", "", *([shown_note, ""] if shown_note else []), *_images(images)]


def _dataset_sections(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]],
                      images: Sequence[tuple[str, str]], flags: tuple[Sequence[str], bool, bool]) -> list[str]:
    """Per dataset of an experiment on several: its notes, its table and its figures."""
    others, has_gen, has_llm = flags
    lines: list[str] = []
    for data, group in dataset_groups(experiment):
        lines += [f"## {data_text(data)}", ""]
        notes = [n for n in data.get("notes", ()) if isinstance(n, str)]
        info = data.get("info") or {}
        if info.get("packages"):
            notes.append(f"Python {info.get('python')} and {len(info['packages'])} packages")
        if notes:
            lines += [f"Data: {'; '.join(notes)}.", ""]
        lines += cell_table([c for c in group if c.finished], tests, others, has_gen, has_llm)
        lines += _images([(t, f) for t, f in images if f.startswith(f"{experiment.name}_{slug(data.get('source', ''))}_")])
    return lines


def _significance_note(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]], n_resamples: int,
                       seed: int) -> str:
    by_id = {c.id: c for c in experiment.cells}
    baselines = sorted({by_id[t["baseline"]].retriever for t in tests.values() if t.get("baseline")})
    return (f"Significance: each cell against the cell of the baseline retriever "
            f"({', '.join(baselines) or 'none'}) with "
            + ("the same other settings" if experiment.pair_on is None else
               f"the same {', '.join(experiment.pair_on) or 'data'}")
            + "; ΔR@k is the mean per-task difference of recall@k (k of the cell)"
            + (", or of selection recall (set recall of what each cell selected; marked (set)) when the "
               "two cells differ in k or threshold" if any(t.get("recall_metric") == "set_recall" for t in tests.values())
               else "")
            + "; p t: two-sided paired t-test; p rand: "
            f"two-sided paired randomisation (sign-flip) test, {n_resamples} resamples, seed {seed} "
            "(exact when there are fewer sign patterns).")


def _llm_note(cells: Sequence[CellResult]) -> str:
    cached = sum(int(c.record.run.llm_answers_cached or 0) for c in cells)
    total = sum(int(c.record.run.llm_answers or 0) for c in cells)
    offline = sum(1 for c in cells if c.record.run.llm_answers and
                  c.record.run.llm_answers_cached == c.record.run.llm_answers)
    return (f"cached: LLM answers (selection and generation) taken from the answer cache, of all "
            f"the cell's answers; {cached} of {total} answers from the cache in all"
            + (f"; {offline} cells contacted no endpoint at all (the cache is keyed by model name, "
               "messages and sampling parameters, not by URL)" if offline else "") + ".")


def _folds_note(cells: Sequence[CellResult], learning: Sequence[str]) -> str:
    folds = "/".join(map(str, sorted({c.settings.get("folds") for c in cells if c.settings.get("folds") is not None})))
    seeds = "/".join(map(str, sorted({c.settings.get("seed") for c in cells if c.settings.get("seed") is not None})))
    if learning:
        return (f"Retrievers that learn from tasks ({', '.join(learning)}) are scored by {folds}-fold "
                f"cross-validation (scikit-learn KFold, shuffled, seed {seeds}): each task is ranked by a model "
                "fitted on the other folds only.")
    return f"Folds: {folds}, seed {seeds} (used by retrievers that learn from tasks; none here)."


def _depth_note(experiment: Experiment, cells: Sequence[CellResult]) -> str | None:
    sizes = {d.get("fingerprint"): d.get("n_documents") for d in (*experiment.datasets, experiment.data)}
    depths = sorted({int(c.settings["depth"]) for c in cells if c.settings.get("depth") is not None
                     and int(c.settings["depth"]) < int(sizes.get(c.settings.get("dataset")) or math.inf)})
    if not depths:
        return None
    n = "/".join(map(str, depths))
    return (f"Rankings are kept to depth {n} (`depth`): MRR is MRR@{n}; a tie across rank {n} is "
            f"not seen (ties@{n} is 0) and a group of tied scores running past it is cut there, so "
            f"tie-aware values at k close to {n} are approximate.")


#: The first note under the full table: what its columns mean.
COLUMNS_NOTE = (
    "R@k: recall@k and C@k: complete@k (fraction of tasks whose gold primitives all rank in the "
    "top k) read each task's full ranking; nDCG@10 and MRR likewise. P, R, F1: set precision, "
    "recall and F1 of the selection (the top k, plus the library types it depends on when "
    "closure is on), micro (mi: pooled over tasks) and macro (ma: mean over tasks). tokens: mean "
    "documentation tokens of the selected primitives per task (estimated as characters / 4 "
    "of the stubs a prompt shows). ties@k: tasks whose ranking has a tie across the cell's k "
    "(equal scores at ranks k and k + 1, so primitive-id order, not the retriever, decides what "
    "is selected); the table of ties below gives the ranking metrics averaged over tie orders.")


def _notes(experiment: Experiment, cells: Sequence[CellResult], tests: Mapping[str, Mapping[str, Any]],
           learning: Sequence[str], n_resamples: int, seed: int) -> list[str]:
    notes = [COLUMNS_NOTE, _significance_note(experiment, tests, n_resamples, seed)]
    if any(c.settings.get("generator") for c in cells):
        notes.append("success: fraction of tasks whose generated program passed every evaluation "
                     "program; Δsucc and its p-values compare per-task success with the baseline cell.")
    if any(c.record.run.llm_answers for c in cells):
        notes.append(_llm_note(cells))
    notes.append(_folds_note(cells, learning))
    depth = _depth_note(experiment, cells)
    return [f"- {n}" for n in (*notes, *([depth] if depth else []))] + [""]


def render_markdown(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]],
                    images: Sequence[tuple[str, str]] = (), n_resamples: int = N_RESAMPLES,
                    seed: int = 0, frontier: Sequence[str] = (), standings: Sequence[Standing] = (),
                    learning: Sequence[str] = (), shown_note: str = "") -> str:
    """The report text: the leaderboard (one dataset) or the summary by dataset, the figures,
    then the full tables and their notes.

    Parameters
    ----------
    experiment : the experiment (:func:`primsel.experiments.results.load_experiment`).
    tests : :func:`primsel.reporting.compare.significance` of it.
    images : (title, relative file name) of the figures to link.
    n_resamples, seed : of the randomisation test and the bootstrap (stated in the notes).
    frontier : Markdown lines of the frontier table (:func:`frontier_table`).
    standings : :func:`primsel.reporting.compare.leaderboard` of it (no leaderboard when empty).
    learning : labels of the retrievers that learn from tasks (named in the notes).
    shown_note : a sentence under the figures' heading (which configurations they draw).
    """
    cells = [c for c in experiment.cells if c.finished]
    flags = (other_columns(cells), any(c.settings.get("generator") for c in cells),
             any(c.record.run.llm_answers for c in cells))
    groups = dataset_groups(experiment)
    lines = _preamble(experiment, cells)
    if len(groups) == 1:
        lines += leaderboard_lines(standings, n_resamples, seed) + _figures(images, shown_note)
        lines += ["## All cells", "", *cell_table(cells, tests, *flags)]
    else:
        slugs = [f"{experiment.name}_{slug(d.get('source', ''))}_" for d, _ in groups]
        overall = [(t, f) for t, f in images if not any(f.startswith(s) for s in slugs)]
        lines += _summary(groups) + _figures(overall, shown_note) + _dataset_sections(experiment, tests, images, flags)
    lines += _notes(experiment, cells, tests, learning, n_resamples, seed)
    if len(groups) == 1:
        lines += tie_table(cells)
    else:  # one table per dataset: the same retriever ranks each differently
        for data, group in groups:
            lines += tie_table([c for c in group if c.finished], title=f"Ties: {data.get('source', '?')}")
    generation = generation_table(cells)
    if generation:
        lines += ["", "## Generation", "", *generation]
    lines += aspera_table([(c.label, c.record.aspera.to_json() if c.record.aspera is not None else {})
                           for c in cells if c.settings.get("generator")])
    lines += list(frontier) + rounds_table(cells, n_resamples=n_resamples, seed=seed)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The summary `primsel run` prints
# ---------------------------------------------------------------------------------------------
#: The cut-off of the headline figures (the README's): :func:`best_cells` shows each ranking's
#: cell at this k where the experiment ran it.
HEADLINE_K = 15
#: Widest line :func:`best_cells` prints (longer configuration labels are cut in the middle, "…").
SUMMARY_WIDTH = 100


def best_cells(experiment: Experiment, limit: int = 12) -> list[str]:
    """A short table (plain text lines, at most :data:`SUMMARY_WIDTH` characters) of the best
    cell of each ranking, under a line naming the dataset.

    Each ranking shows its cell at k = :data:`HEADLINE_K` when the experiment ran that k (else
    at any k) of the highest task success when a generator ran, else of the highest set F1
    (macro), ties broken by fewer documentation tokens. Rankings are ordered by task success
    (with a generator), then recall@15, then set F1. At most ``limit`` rows; a last line says
    how many more there are and where all are (the report). Empty when no cell is finished.
    An experiment on several datasets gets one such table per dataset."""
    out: list[str] = []
    where = f"all in the report: primsel report {experiment.directory}"
    for data, group in dataset_groups(experiment):
        block = _best_of(group, limit, where)
        if block:
            out += [f"== {data_text(data)}", *block]
    return out


def _best_of(cells: Sequence[CellResult], limit: int, where: str = "") -> list[str]:
    """:func:`best_cells` of one dataset's cells."""
    cells = [c for c in cells if c.finished]
    if not cells:
        return []
    has_gen = any(c.settings.get("generator") for c in cells)
    labels = configuration_labels(cells)

    def merit(c: CellResult) -> tuple[float, float, float, float]:
        r = c.record
        return (float(c.settings.get("k") == HEADLINE_K),
                _or(r.success, -1.0) if has_gen else 0.0, _or(r.selection.f1_macro, 0.0),
                -_or(r.docs_tokens, 0.0))

    def order(c: CellResult) -> tuple[float, float, float]:
        r = c.record
        return (_or(r.success, -1.0) if has_gen else 0.0, _or(r.ranking.recall(HEADLINE_K), 0.0),
                _or(r.selection.f1_macro, 0.0))

    best: dict[tuple[str, str], CellResult] = {}
    for c in cells:
        key = configuration_key(c)
        if key not in best or merit(c) > merit(best[key]):
            best[key] = c
    ranked = sorted(best.items(), key=lambda item: order(item[1]), reverse=True)[:limit]
    header = ["configuration", "k", "closure", *(["success"] if has_gen else []), *(h for _, h in SUMMARY_COLUMNS)]
    rows = [[labels[key], str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no",
             *([num(c.record.success)] if has_gen else []),
             *(num(c.record.metric(m), 1 if m == "docs_tokens" else 3) for m, _ in SUMMARY_COLUMNS)] for key, c in ranked]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    room = max(len(header[0]), SUMMARY_WIDTH - sum(widths[1:]) - 2 * (len(header) - 1))
    if widths[0] > room:
        head = (room - 1) // 2
        for row in rows:  # cut in the middle: labels of one ranking's variants differ at their end
            row[0] = row[0] if len(row[0]) <= room else row[0][:head] + "…" + row[0][len(row[0]) - (room - 1 - head):]
        widths[0] = room
    fmt = [str.ljust if i < 3 else str.rjust for i in range(len(header))]
    lines = [f"best cell of each ranking (at k = {HEADLINE_K} where run), by "
             f"{'task success, then ' if has_gen else ''}R@{HEADLINE_K}:"]
    lines += ["  ".join(f(v, w) for f, v, w in zip(fmt, row, widths)).rstrip() for row in [header, *rows]]
    if len(best) > limit:
        lines.append(f"... {len(best) - limit} more rankings" + (f" ({where})" if where else ""))
    return lines
