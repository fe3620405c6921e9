"""The report's text: the leaderboard (or summary by dataset), figures, tables of every cell, ties, generation,
ASPERA, frontier and reflection rounds with notes. Never per-task rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel.eval.aspera import markdown_table as aspera_table
from primsel.eval.significance import N_BOOTSTRAP, N_RESAMPLES, compare
from primsel.eval.success import success_by_coverage, wilson_interval
from primsel.experiments.labels import generator_label, get_dotted
from primsel.experiments.results import (LEADER_COLUMNS, RANKED_COLUMNS, REPORT_KS, SUMMARY_METRICS, TABLE_COLUMNS,
                                        CellResult, Experiment, data_text, dataset_groups)
from primsel.files import read_jsonl
from primsel.reporting.compare import LEADER_METRIC, Standing, passed_by_round
from primsel.reporting.style import is_default, is_reference, num, other_columns, p_value, \
    ranking_key, ranking_labels, ranks_nothing, short_labels, short_value, slug, table

COLUMNS_NOTE = ("R@k: recall@k and C@k: complete@k (fraction of tasks whose gold primitives all rank in the top k) "
                "read each task's full ranking; nDCG@10 and MRR likewise. P, R, F1: set precision, recall and F1 of "
                "the selection (the top k, plus the library types it depends on when closure is on), micro (mi: "
                "pooled over tasks) and macro (ma: mean over tasks). tokens: mean documentation tokens of the "
                "selected primitives per task (estimated as characters / 4 of the stubs a prompt shows). ties@k: "
                "tasks whose ranking has a tie across the cell's k (equal scores at ranks k and k + 1, so "
                "primitive-id order, not the retriever, decides what is selected); the table of ties below gives the "
                "ranking metrics averaged over tie orders.")
GENERATION_NOTE = ("- Generation: success with its 95% Wilson interval; score: ASPERA's score (100 x passed / "
                   "evaluated, minus refused / all); sel. R: selection recall (macro: the mean over tasks of the "
                   "share of gold primitives selected); gold complete: share of tasks whose selection held every gold "
                   "primitive, with the success of those tasks and of the others, and Fisher's exact test of the "
                   "difference (two-sided); prompt sent / computed: mean prompt tokens per task sent to the model and "
                   "computed by it (sent minus the tokens its prompt cache held); answer: mean completion tokens per "
                   "task; wall: the cell's wall time in minutes (answers from primsel's answer cache take none).")


def _leader_row(rank: int, s: Standing, has_gen: bool) -> list[str]:
    record, blind = s.cell.record, ranks_nothing(s.cell)  # the whole library's order says nothing

    def value(name: str) -> float | None:
        return record.docs_tokens if name == "docs_tokens" else None if blind else record.metric(name)

    def tested(test: Mapping[str, Any] | None, baseline: bool) -> list[str]:
        return ["baseline", "–"] if baseline else ["–", "–"] if not test else \
            [f"{test['mean_diff']:+.3f}", p_value(test["p_randomisation"])]

    name = f"{s.label} (reference)" if is_reference(s.cell) else s.label + (" (baseline)" if s.baseline else "")
    if is_default(s.cell) and not s.cell.settings.get("selector"):
        name = f"**{s.label}** (recommended default)"
    interval = "" if s.interval is None or blind else f" [{s.interval[0]:.3f}, {s.interval[1]:.3f}]"
    row = [str(rank), name, str(s.cell.settings.get("k")), "yes" if s.cell.settings.get("closure") else "no",
           num(value(LEADER_METRIC)) + interval, *(num(value(key), digits) for key, _, digits in LEADER_COLUMNS)]
    row += [num(record.success) if s.cell.settings.get("generator") else "–"] if has_gen else []
    return row + tested(None if blind else s.recall, s.baseline) + (tested(s.success, False) if has_gen else [])


def _headline(standings: Sequence[Standing], has_gen: bool) -> list[str]:
    """One sentence: the best configuration, by how much it beats the baseline, and the default."""
    competing = [s for s in standings if not is_reference(s.cell)]
    if not competing:
        return []
    top, metric = competing[0], "success" if has_gen else LEADER_METRIC
    text = f"Highest {'task success' if has_gen else 'recall@15'}: {top.label} ({num(top.cell.record.metric(metric))})"
    test = top.success if has_gen else top.recall
    if test:
        p = p_value(test["p_randomisation"])
        base = next((x for x in standings if x.baseline), None)
        named = f" {base.label} ({num(base.cell.record.metric(metric))})" if base else ""
        text += (f", {test['mean_diff']:+.3f} over the baseline{named} (paired randomisation test, "
                 f"p {'< ' + p[1:] if p.startswith('<') else '= ' + p})")
    default = next((s for s in competing if is_default(s.cell) and not s.cell.settings.get("selector")), None)
    if default is not None and default is not top:
        text += (f"; the recommended default ranks {standings.index(default) + 1} "
                 f"({num(default.cell.record.metric(LEADER_METRIC))} recall@15)")
    return [text + ".", ""]


def leaderboard_lines(standings: Sequence[Standing], n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[str]:
    """Markdown lines of the leaderboard (:func:`~primsel.reporting.compare.leaderboard`), empty when none."""
    if not standings:
        return []
    has_gen = any(s.cell.settings.get("generator") for s in standings)
    header = ["#", "configuration", "k", "closure", "R@15 [95% CI]", *(h for _, h, _ in LEADER_COLUMNS)]
    header += (["success"] if has_gen else []) + ["ΔR@15", "p"] + (["Δsucc", "p succ"] if has_gen else [])
    rows = [_leader_row(i, s, has_gen) for i, s in enumerate(standings, start=1)]
    then = "task success, then " if has_gen else ""
    return ["## Leaderboard", "", *_headline(standings, has_gen), *table(header, rows, "rlrl" + "r" * len(header[4:])),
            "", f"Each configuration at its best k ({'highest ' + then if has_gen else ''}highest set F1 (macro), then "
            f"fewest documentation tokens; the full table below has every k), ordered by {then}recall@15, "
            f"references last. R@15 [95% CI]: mean recall@15 over tasks and its percentile bootstrap interval "
            f"({N_BOOTSTRAP} resamples of the tasks, seed {seed}). R sel: recall of the selection at that k (macro; "
            "what the tokens buy). ΔR@15: mean per-task difference of recall@15 to the baseline configuration with "
            f"the same other settings; p: two-sided paired randomisation test ({n_resamples} sign flips, seed {seed})"
            + ("; Δsucc: difference of task success to the baseline cell at the same k and closure, with its p"
               if has_gen else "") + ".", ""]


def cell_table(cells: Sequence[CellResult], tests: Mapping[str, Mapping[str, Any]], others: Sequence[str],
               has_gen: bool, has_llm: bool) -> list[str]:
    """Markdown lines of the table of ``cells``: a row per cell, its metrics (those its
    ``metrics`` setting adds too) and its tests against its baseline cell."""
    def tested(test: Mapping[str, Any] | None, mark: str = "") -> list[str]:
        return [f"{test['mean_diff']:+.3f}{mark}", p_value(test["p_t"]), p_value(test["p_randomisation"])] if test \
            else ["–", "–", "–"]

    extra = sorted({m for c in cells for m in (c.settings.get("metrics") or ()) if m not in dict(TABLE_COLUMNS)})
    header = ["configuration", "k", "closure", *others, *(h for _, h in TABLE_COLUMNS), *extra, "ties@k"]
    header += (["success"] if has_gen else []) + (["cached"] if has_llm else []) + ["ΔR@k", "p t", "p rand"]
    header += (["Δsucc", "p t succ", "p rand succ"] if has_gen else []) + ["cell"]
    rows = []
    for c in cells:
        r, tied = c.record, c.record.ranking.tied(c.settings.get("k"))
        row = [c.retriever, str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no"]
        row += [generator_label(get_dotted(c.settings, key)) if key == "generator" else
                short_value(get_dotted(c.settings, key)) for key in others]
        row += [num(r.metric(key), 1 if key == "docs_tokens" else 3) for key, _ in TABLE_COLUMNS]
        row += [num(r.metric(key)) for key in extra] + ["–" if tied is None else str(int(tied))]
        row += [num(r.success) if c.settings.get("generator") else "–"] if has_gen else []
        if has_llm:
            row.append(f"{int(r.run.llm_answers_cached or 0)}/{int(r.run.llm_answers)}" if r.run.llm_answers else "–")
        t = tests.get(c.id, {})
        mark = " (set)" if t.get("recall_metric") == "set_recall" else ""
        row += ["baseline", "–", "–"] if t.get("baseline") == c.id else tested(t.get("recall"), mark)
        row += tested(t.get("success")) if has_gen else []
        rows.append(row + [f"`{c.id}`" + ("" if c.complete else " *incomplete*")])
    return table(header, rows, "l" * (3 + len(others)) + "r" * (len(header) - 4 - len(others)) + "l") + [""]


def tie_table(cells: Sequence[CellResult], title: str = "Ties") -> list[str]:
    """Markdown lines of the table of ties under ``title``: a row per ranking, each ranking metric in id order and
    tie-aware, and the tasks with a tie across k = 5, 10, 15, 20; empty when no cell has tie-aware values."""
    series: dict[str, CellResult] = {}
    for c in (c for c in cells if c.record.ranking.tie_aware):
        series.setdefault(ranking_key(c), c)
    if not series:
        return []
    labels = ranking_labels(list(series.values()))
    n_tasks = "/".join(str(n) for n in sorted({int(c.record.selection.n_tasks or 0) for c in series.values()}))
    header = ["ranking", *(x for _, h in RANKED_COLUMNS for x in (h, f"{h} ta")), *(f"ties@{k}" for k in REPORT_KS)]
    rows = []
    for key, c in series.items():
        r = c.record.ranking
        values = [x for m, _ in RANKED_COLUMNS for x in (num(c.record.metric(m)), num(r.tie_aware.get(m)))]
        ties = ["–" if r.tied(k) is None else str(int(r.tied_tasks[k])) for k in REPORT_KS]
        rows.append([labels[key], *values, *ties])
    return [f"## {title}", "", "Each ranking metric with tied scores in primitive-id order (as above) and tie-aware "
            "(*ta*: the mean over every order of the tied primitives, computed exactly per group of tied scores; "
            f"McSherry and Najork, ECIR 2008). ties@k: tasks (of {n_tasks}) whose ranking has a tie across rank k.",
            "", *table(header, rows), ""]


def frontier_table(frontiers: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                   levels: Sequence[float] = (0.9, 0.95)) -> list[str]:
    """Markdown lines: per ranking (label -> (mean tokens per k, mean recall per k)), the
    smallest k whose mean recall@k reaches each of ``levels`` and the mean tokens of that top k."""
    if not frontiers:
        return []
    rows = []
    for label, (tokens, recall) in frontiers.items():
        found = [next((i for i, r in enumerate(recall) if r >= level - 1e-12), None) for level in levels]
        pairs = [["–", "–"] if k is None else [str(k + 1), f"{tokens[k]:.0f}"] for k in found]
        rows.append([label, *(x for pair in pairs for x in pair)])
    return ["Recall/tokens frontier of each ranking (top k, k = 1 .. all): the smallest k whose mean "
            "recall@k reaches the level, and the mean documentation tokens of that top k.", "",
            *table(["ranking", *(f"{w} for R {level:g}" for level in levels for w in ("k", "tokens"))], rows), ""]


def generation_table(cells: Sequence[Any]) -> list[str]:
    """Markdown lines of the generation section (none without a generator): a row per cell with one, its success
    and Wilson interval, score, success by completeness of the selection, tokens and minutes; then the note."""
    rows = []
    for c in cells:
        if not (c.settings.get("generator") and c.record.success is not None):
            continue
        tasks = [row for _, row in read_jsonl(c.directory / "tasks.jsonl")]
        n, record, cover = len(tasks), c.record, success_by_coverage(tasks)
        passed = sum(row.get("status") == "pass" for row in tasks)
        low, high = wilson_interval(passed, n) if n else (0.0, 0.0)
        tokens = {key: sum(float((row.get("tokens") or {}).get(key, 0)) for row in tasks)
                  for key in ("prompt", "prompt_cached", "completion")}
        rate = [f"{p}/{m} ({p / m:.0%})" if m else "–" for m, p in (cover["complete"], cover["incomplete"])]
        tokens["computed"] = tokens["prompt"] - tokens["prompt_cached"]
        mean = {key: v / n if n else 0.0 for key, v in tokens.items()}
        rows.append([c.label, str(c.settings.get("k")), str(n), f"{passed / n if n else 0:.3f} [{low:.3f}, {high:.3f}]",
                     "–" if record.aspera is None or record.aspera.score is None else f"{record.aspera.score:.1f}",
                     "–" if record.selection.recall_macro is None else f"{record.selection.recall_macro:.3f}",
                     f"{cover['complete'][0] / n if n else 0:.2f}", " / ".join(rate), p_value(cover["p_fisher"]),
                     *(f"{mean[k]:,.0f}" for k in ("prompt", "computed", "completion")),
                     f"{float(record.run.seconds or 0.0) / 60:.1f}"])
    header = ["configuration", "k", "tasks", "success [95% CI]", "score", "sel. R", "gold complete",
              "success: complete / not", "p Fisher", "prompt sent", "computed", "answer", "wall min"]
    return ["", "## Generation", "", *table(header, rows, "lrrlrrrlrrrrr"), "", GENERATION_NOTE] if rows else []


def _summary(groups: Sequence[tuple[Mapping[str, Any], Sequence[CellResult]]]) -> list[str]:
    """Per summary metric, a table of a row per retriever and a column per dataset."""
    sources = [str(d.get("source", "?")) for d, _ in groups]
    found = {label: [next((c for c in cells if c.finished and c.retriever == label), None) for _, cells in groups]
             for label in dict.fromkeys(c.retriever for _, cells in groups for c in cells if c.finished)}
    lines = []
    for key, heading in SUMMARY_METRICS:
        rows = [[label, *("–" if c is None else num(c.record.metric(key)) for c in row)]
                for label, row in found.items()]
        lines += [f"**{heading}** by dataset", "", *table(["retriever", *sources], rows), ""]
    return lines


def _preamble(experiment: Experiment, cells: Sequence[CellResult]) -> list[str]:
    """Title, description, the data and how many cells finished, and the cells of other data."""
    lines = [f"# {experiment.name}", "", *([experiment.description.strip(), ""] if experiment.description else [])]
    incomplete = [c for c in cells if not c.complete]
    done = f"Cells finished: {len(cells) - len(incomplete)} of {len(experiment.cells)}"
    if incomplete:
        done += (f"; {len(incomplete)} more incomplete (LLM requests failed after their retries; marked "
                 "*incomplete*, recomputed by the next `primsel run`)")
    lines.append(f"Data: {data_text(experiment.data)}. {done}.")
    if other := experiment.other_data:
        which = f"on {next(iter(other))}" if len(other) == 1 else \
            "on other data (" + ", ".join(f"{n} on {text}" for text, n in other.items()) + ")"
        lines += ["", f"This report covers only the cells run on {data_text(experiment.data)}. The directory "
                      f"also holds {sum(other.values())} cells computed {which}, not shown here; run the experiment "
                      "on that data again to report them (their cells are reused)."]
    return lines + [""]


def _images(images: Sequence[tuple[str, str]]) -> list[str]:
    return [line for heading, file in images for line in (f"![{heading}]({file})", "")]


def _dataset_sections(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]],
                      images: Sequence[tuple[str, str]], flags: tuple[Sequence[str], bool, bool]) -> list[str]:
    """Per dataset of an experiment on several: its notes, its table and its figures."""
    lines: list[str] = []
    for data, group in dataset_groups(experiment):
        notes = [n for n in data.get("notes", ()) if isinstance(n, str)]
        info = data.get("info") or {}
        if info.get("packages"):
            notes.append(f"Python {info.get('python')} and {len(info['packages'])} packages")
        lines += [f"## {data_text(data)}", "", *([f"Data: {'; '.join(notes)}.", ""] if notes else [])]
        lines += cell_table([c for c in group if c.finished], tests, *flags)
        prefix = f"{experiment.name}_{slug(data.get('source', ''))}_"
        lines += _images([(t, f) for t, f in images if f.startswith(prefix)])
    return lines


def _notes(experiment: Experiment, cells: Sequence[CellResult], tests: Mapping[str, Mapping[str, Any]],
           learning: Sequence[str], n_resamples: int, seed: int) -> list[str]:
    """The notes under the tables: columns, significance, success, cache, folds and depth."""
    by_id = {c.id: c for c in experiment.cells}
    named = {by_id[t["baseline"]].retriever for t in tests.values() if t.get("baseline")}
    baselines = ", ".join(sorted(named)) or "none"
    pairs = "other settings" if experiment.pair_on is None else ", ".join(experiment.pair_on) or "data"
    sets = any(t.get("recall_metric") == "set_recall" for t in tests.values())
    notes = [COLUMNS_NOTE, f"Significance: each cell against the cell of the baseline retriever ({baselines}) "
             f"with the same {pairs}; ΔR@k is the mean per-task difference of recall@k (k of the cell)"
             + (", or of selection recall (set recall of what each cell selected; marked (set)) when the two cells "
                "differ in k or threshold" if sets else "")
             + f"; p t: two-sided paired t-test; p rand: two-sided paired randomisation (sign-flip) test, "
             f"{n_resamples} resamples, seed {seed} (exact when there are fewer sign patterns)."]
    if any(c.settings.get("generator") for c in cells):
        notes.append("success: fraction of tasks whose generated program passed every evaluation "
                     "program; Δsucc and its p-values compare per-task success with the baseline cell.")
    runs = [c.record.run for c in cells]
    if any(r.llm_answers for r in runs):
        offline = sum(1 for r in runs if r.llm_answers and r.llm_answers_cached == r.llm_answers)
        notes.append("cached: LLM answers (selection and generation) taken from the answer cache, of all the cell's "
                     f"answers; {sum(int(r.llm_answers_cached or 0) for r in runs)} of "
                     f"{sum(int(r.llm_answers or 0) for r in runs)} answers from the cache in all"
                     + (f"; {offline} cells contacted no endpoint at all (the cache is keyed by model name, "
                        "messages and sampling parameters, not by URL)" if offline else "") + ".")
    folds, seeds = ("/".join(map(str, sorted({c.settings.get(key) for c in cells if c.settings.get(key) is not None})))
                    for key in ("folds", "seed"))
    notes.append(f"Retrievers that learn from tasks ({', '.join(learning)}) are scored by {folds}-fold "
                 f"cross-validation (scikit-learn KFold, shuffled, seed {seeds}): each task is ranked by a model "
                 "fitted on the other folds only." if learning else
                 f"Folds: {folds}, seed {seeds} (used by retrievers that learn from tasks; none here).")
    sizes = {d.get("fingerprint"): d.get("n_documents") for d in (*experiment.datasets, experiment.data)}
    depths = sorted({int(c.settings["depth"]) for c in cells if c.settings.get("depth") is not None
                     and int(c.settings["depth"]) < int(sizes.get(c.settings.get("dataset")) or math.inf)})
    if depths:
        n = "/".join(map(str, depths))
        notes.append(f"Rankings are kept to depth {n} (`depth`): MRR is MRR@{n}; a tie across rank {n} is "
                     f"not seen (ties@{n} is 0) and a group of tied scores running past it is cut there, so "
                     f"tie-aware values at k close to {n} are approximate.")
    return [f"- {n}" for n in notes] + [""]


def render_markdown(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]],
                    images: Sequence[tuple[str, str]] = (), n_resamples: int = N_RESAMPLES,
                    seed: int = 0, frontier: Sequence[str] = (), standings: Sequence[Standing] = (),
                    learning: Sequence[str] = (), shown_note: str = "") -> str:
    """The report text of ``experiment``: its ``tests`` (:func:`~primsel.reporting.compare.significance`), figures
    ``images`` ((title, file name)), the notes' ``n_resamples`` and ``seed``, the :func:`frontier_table` lines, the
    leaderboard's ``standings`` (none when empty), ``learning`` retrievers' labels, ``shown_note`` under the figures."""
    cells = [c for c in experiment.cells if c.finished]
    flags = (other_columns(cells), any(c.settings.get("generator") for c in cells),
             any(c.record.run.llm_answers for c in cells))
    groups = dataset_groups(experiment)
    lines = _preamble(experiment, cells)
    if len(groups) > 1:
        sections = _dataset_sections(experiment, tests, images, flags)
        slugs = tuple(f"{experiment.name}_{slug(d.get('source', ''))}_" for d, _ in groups)
        images = [(t, f) for t, f in images if not f.startswith(slugs)]
        lines += _summary(groups)
    else:
        lines += leaderboard_lines(standings, n_resamples, seed)
        sections = ["## All cells", "", *cell_table(cells, tests, *flags)]
    lines += ["## Figures", "", *([shown_note, ""] if shown_note else []), *_images(images)] if images else []
    lines += sections
    lines += _notes(experiment, cells, tests, learning, n_resamples, seed)
    for data, group in groups:  # one table per dataset: the same retriever ranks each differently
        lines += tie_table(cells) if len(groups) == 1 else \
            tie_table([c for c in group if c.finished], title=f"Ties: {data.get('source', '?')}")
    lines += generation_table(cells)
    lines += aspera_table([(c.label, c.record.aspera.to_json() if c.record.aspera is not None else {})
                           for c in cells if c.settings.get("generator")])
    return "\n".join(lines + list(frontier) + rounds_table(cells, n_resamples=n_resamples, seed=seed))


def rounds_table(cells: Sequence[Any], n_resamples: int = N_RESAMPLES, seed: int = 0) -> list[str]:
    """Markdown lines of the reflection table of finished cells (``label``, ``directory``, ``record``), a row per
    round; empty when no cell has rounds. ``n_resamples``, ``seed``: of the randomisation test."""
    cells = [c for c in cells if c.record.rounds]
    if not cells:
        return []
    reselect = any(c.record.rounds[0].selection_recall is not None for c in cells)
    header = ["configuration", "round", "success", "Δ", "p t", "p rand", "requests", "sent", "cached",
              "prompt tokens", "completion tokens", "cumulative tokens", *(["selection recall"] if reselect else [])]
    labels, rows = short_labels(cells), []
    for c in cells:
        passed = passed_by_round(Path(c.directory), len(c.record.rounds)) if len(c.record.rounds) >= 2 else []
        for r, rep in enumerate(c.record.rounds, start=1):
            g = compare(passed[r - 1], passed[r - 2], n_resamples=n_resamples, seed=seed) if r >= 2 else None
            gain = [f"{g['mean_diff']:+.3f}", p_value(g["p_t"]), p_value(g["p_randomisation"])] if g else ["–"] * 3
            rows.append([labels[c.id] if r == 1 else "", str(r), num(rep.success), *gain,
                         *(num(v, 0) for v in (rep.calls, rep.requests, rep.cache_hits, rep.prompt_tokens,
                                               rep.completion_tokens, rep.cumulative_tokens)),
                         *([num(rep.selection_recall)] if reselect else [])])
    return ["## Reflection rounds", "", "Configurations are named by the settings that differ between them (the cell "
            "ids are in the first table).", "", *table(header, rows), "",
            "- success: fraction of tasks passed by that round (a task that passes stops). Δ: gain over the round "
            f"before; p t: two-sided paired t-test and p rand: paired randomisation (sign-flip) test, {n_resamples} "
            f"resamples, seed {seed}, on per-task success by the round against by the round before. requests: "
            "generation requests of the round (failed tasks of the round before; answered from the cache or not); "
            "sent: HTTP requests the generator sent (retries included); cached: answered from the cache. Tokens as "
            "the endpoint reported them; cumulative: rounds 1 to this one (plus the LLM selector's tokens when it "
            "selects again)."
            + (" selection recall: mean set recall of the selection each task had in that round "
               "(reselect: ranked again with the query plus the error)." if reselect else ""), ""]
