"""The report's text: the leaderboard (or the summary by dataset), the figures, the table of every
cell, the ties, generation, ASPERA's figures, the frontier and the reflection rounds, each with its
notes. Never per-task rows. :func:`render_markdown` puts the sections together; each section is a
function returning its lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.eval.aspera import FIGURES as ASPERA_COLUMNS
from primsel.eval.significance import N_BOOTSTRAP, N_RESAMPLES, compare
from primsel.eval.success import success_by_coverage, wilson_interval
from primsel.experiments.columns import (
    LEADER_COLUMNS,
    RANKED_COLUMNS,
    REPORT_KS,
    SUMMARY_METRICS,
    TABLE_COLUMNS,
    decimals,
)
from primsel.experiments.labels import generator_label, get_dotted
from primsel.experiments.results import (
    LoadedCell,
    LoadedExperiment,
    data_text,
    dataset_groups,
    passed_by_round,
)
from primsel.reporting.compare import LEADER_METRIC, Standing
from primsel.reporting.style import (
    is_default,
    is_reference,
    num,
    other_columns,
    p_value,
    ranking_key,
    ranking_labels,
    ranks_nothing,
    short_labels,
    short_value,
    slug,
    table,
)

COLUMNS_NOTE = (
    "R@k: recall@k and C@k: complete@k (fraction of tasks whose gold primitives all rank in the top k) "
    "read each task's full ranking; nDCG@10 and MRR likewise. P, R, F1: set precision, recall and F1 of "
    "the selection (the top k, plus the library types it depends on when closure is on), micro (mi: "
    "pooled over tasks) and macro (ma: mean over tasks). tokens: mean documentation tokens of the "
    "selected primitives per task (estimated as characters / 4 of the stubs a prompt shows). ties@k: "
    "tasks whose ranking has a tie across the cell's k (equal scores at ranks k and k + 1, so "
    "primitive-id order, not the retriever, decides what is selected); the table of ties below gives the "
    "ranking metrics averaged over tie orders."
)
GENERATION_NOTE = (
    "- Generation: success with its 95% Wilson interval; strict: success without collateral, the "
    "share of tasks that passed and removed or changed no row of their world that the task's reference "
    "program left alone (the collateral audit, docs/sandbox.md; – for a cell run before it); "
    "score: ASPERA's score (100 x passed / "
    "evaluated, minus refused / all); sel. R: selection recall (macro: the mean over tasks of the "
    "share of gold primitives selected); gold complete: share of tasks whose selection held every gold "
    "primitive, with the success of those tasks and of the others, and Fisher's exact test of the "
    "difference (two-sided); prompt sent / computed: mean prompt tokens per task sent to the model and "
    "computed by it (sent minus the tokens its prompt cache held); answer: mean completion tokens per "
    "task; wall: the cell's wall time in minutes (answers from primsel's answer cache take none)."
)
ROUNDS_NOTE = (
    "- success: fraction of tasks passed by that round (a task that passes stops). Δ: gain over the round "
    "before; p t: two-sided paired t-test and p rand: paired randomisation (sign-flip) test, {n_resamples} "
    "resamples, seed {seed}, on per-task success by the round against by the round before. requests: "
    "generation requests of the round (failed tasks of the round before; answered from the cache or not); "
    "sent: HTTP requests the generator sent (retries included); cached: answered from the cache. Tokens as "
    "the endpoint reported them; cumulative: rounds 1 to this one (plus the LLM selector's tokens when it "
    "selects again)."
)
RESELECT_NOTE = (
    " selection recall: mean set recall of the selection each task had in that round "
    "(reselect: ranked again with the query plus the error)."
)


def _yes_no(flag: Any) -> str:
    """``yes`` or ``no``."""
    if flag:
        return "yes"
    return "no"


def _tested(test: Mapping[str, Any] | None) -> list[str]:
    """The difference and p-value of a paired test (``–`` twice without one)."""
    if not test:
        return ["–", "–"]
    return [num(test["mean_diff"], signed=True), p_value(test["p_randomisation"])]


# ------------------------------------------------------------------------------------------------
# The leaderboard
# ------------------------------------------------------------------------------------------------
def _leader_name(standing: Standing) -> str:
    """A configuration as the leaderboard names it: bold for the default, marked as reference or
    baseline."""
    cell = standing.cell
    if is_default(cell) and not cell.settings.get("selector"):
        return f"**{standing.label}** (recommended default)"
    if is_reference(cell):
        return f"{standing.label} (reference)"
    if standing.baseline:
        return f"{standing.label} (baseline)"
    return standing.label


def _leader_row(rank: int, standing: Standing, has_generator: bool) -> list[str]:
    """A leaderboard row (the whole library's ranking metrics are not shown: its order says
    nothing)."""
    cell, report = standing.cell, standing.cell.report
    blind = ranks_nothing(cell)

    def value(name: str) -> float | None:
        """The value shown of ``name``: tokens always, the others unless the ranking says nothing."""
        if name == "docs_tokens":
            return report.docs_tokens
        if blind:
            return None
        return report.metric(name)

    interval = ""
    if standing.interval is not None and not blind:
        interval = f" [{standing.interval[0]:.3f}, {standing.interval[1]:.3f}]"
    row = [
        str(rank),
        _leader_name(standing),
        str(cell.settings.get("k")),
        _yes_no(cell.settings.get("closure")),
        num(value(LEADER_METRIC)) + interval,
    ]
    row += [num(value(key), digits) for key, _, digits in LEADER_COLUMNS]
    if has_generator:
        row.append(num(report.success) if cell.settings.get("generator") else "–")
    if standing.baseline:
        row += ["baseline", "–"]
    else:
        row += _tested(None if blind else standing.recall)
    if has_generator:
        row += _tested(standing.success)
    return row


def _headline(standings: Sequence[Standing], has_generator: bool) -> list[str]:
    """One sentence: the best configuration, by how much it beats the baseline, and where the
    default ranks."""
    competing = [s for s in standings if not is_reference(s.cell)]
    if not competing:
        return []
    top = competing[0]
    metric = "success" if has_generator else LEADER_METRIC
    what = "task success" if has_generator else "recall@15"
    text = f"Highest {what}: {top.label} ({num(top.cell.report.metric(metric))})"
    test = top.success if has_generator else top.recall
    if test:
        p = p_value(test["p_randomisation"])
        relation = f"< {p[1:]}" if p.startswith("<") else f"= {p}"
        base = next((s for s in standings if s.baseline), None)
        named = ""
        if base is not None:
            named = f" {base.label} ({num(base.cell.report.metric(metric))})"
        text += (
            f", {num(test['mean_diff'], signed=True)} over the baseline{named} (paired randomisation test, "
            f"p {relation})"
        )
    default = next(
        (s for s in competing if is_default(s.cell) and not s.cell.settings.get("selector")), None
    )
    if default is not None and default is not top:
        text += (
            f"; the recommended default ranks {standings.index(default) + 1} "
            f"({num(default.cell.report.metric(LEADER_METRIC))} recall@15)"
        )
    return [text + ".", ""]


def _leaderboard_note(has_generator: bool, n_resamples: int, seed: int) -> str:
    """The paragraph under the leaderboard."""
    then = "task success, then " if has_generator else ""
    best_k = f"highest {then}" if has_generator else ""
    note = (
        f"Each configuration at its best k ({best_k}highest set F1 (macro), then fewest documentation tokens; "
        f"the full table below has every k), ordered by {then}recall@15, references last. R@15 [95% CI]: mean "
        f"recall@15 over tasks and its percentile bootstrap interval ({N_BOOTSTRAP} resamples of the tasks, "
        f"seed {seed}). R sel: recall of the selection at that k (macro; what the tokens buy). ΔR@15: mean "
        "per-task difference of recall@15 to the baseline configuration with the same other settings; p: "
        f"two-sided paired randomisation test ({n_resamples} sign flips, seed {seed})"
    )
    if has_generator:
        note += "; Δsucc: difference of task success to the baseline cell at the same k and closure, with its p"
    return note + "."


def leaderboard_lines(
    standings: Sequence[Standing], n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[str]:
    """The Markdown lines of the leaderboard (:func:`~primsel.reporting.compare.leaderboard`), none
    when empty."""
    if not standings:
        return []
    has_generator = any(s.cell.settings.get("generator") for s in standings)
    header = [
        "#",
        "configuration",
        "k",
        "closure",
        "R@15 [95% CI]",
        *(h for _, h, _ in LEADER_COLUMNS),
    ]
    if has_generator:
        header.append("success")
    header += ["ΔR@15", "p"]
    if has_generator:
        header += ["Δsucc", "p succ"]
    rows = [_leader_row(rank, s, has_generator) for rank, s in enumerate(standings, start=1)]
    align = "rlrl" + "r" * (len(header) - 4)  # rank, configuration, k, closure, then the figures
    return [
        "## Leaderboard",
        "",
        *_headline(standings, has_generator),
        *table(header, rows, align),
        "",
        _leaderboard_note(has_generator, n_resamples, seed),
        "",
    ]


# ------------------------------------------------------------------------------------------------
# The table of every cell
# ------------------------------------------------------------------------------------------------
def _setting_text(cell: LoadedCell, key: str) -> str:
    """A varying setting in the table of cells: the generator by type and model, another by its
    value."""
    if key == "generator":
        return generator_label(get_dotted(cell.settings, key))
    return short_value(get_dotted(cell.settings, key))


def _tests_of_cell(test: Mapping[str, Any], cell: LoadedCell) -> list[str]:
    """ΔR@k, p t and p rand of a cell against its baseline cell (``(set)`` marks a set-recall
    comparison)."""
    if test.get("baseline") == cell.id:
        return ["baseline", "–", "–"]
    recall = test.get("recall")
    if not recall:
        return ["–", "–", "–"]
    mark = " (set)" if test.get("recall_metric") == "set_recall" else ""
    return [
        num(recall["mean_diff"], signed=True) + mark,
        p_value(recall["p_t"]),
        p_value(recall["p_randomisation"]),
    ]


def _success_tests(test: Mapping[str, Any] | None) -> list[str]:
    """Δsucc, p t succ and p rand succ of a cell against its baseline cell."""
    if not test:
        return ["–", "–", "–"]
    return [
        num(test["mean_diff"], signed=True),
        p_value(test["p_t"]),
        p_value(test["p_randomisation"]),
    ]


def cell_table(
    cells: Sequence[LoadedCell],
    tests: Mapping[str, Mapping[str, Any]],
    others: Sequence[str],
    has_generator: bool,
    has_llm: bool,
) -> list[str]:
    """The Markdown lines of the table of ``cells``: a row per cell, the settings ``others`` that
    vary, its metrics (with those its ``metrics`` setting adds), its tests against its baseline cell
    and its id."""
    table_metrics = dict(TABLE_COLUMNS)
    extra = sorted(
        {m for c in cells for m in (c.settings.get("metrics") or ()) if m not in table_metrics}
    )
    header = [
        "configuration",
        "k",
        "closure",
        *others,
        *(h for _, h in TABLE_COLUMNS),
        *extra,
        "ties@k",
    ]
    if has_generator:
        header.append("success")
    if has_llm:
        header.append("cached")
    header += ["ΔR@k", "p t", "p rand"]
    if has_generator:
        header += ["Δsucc", "p t succ", "p rand succ"]
    header.append("cell")
    rows = []
    for c in cells:
        report = c.report
        tied = report.ranking.tied(c.settings.get("k"))
        row = [c.retriever, str(c.settings.get("k")), _yes_no(c.settings.get("closure"))]
        row += [_setting_text(c, key) for key in others]
        row += [num(report.metric(key), decimals(key)) for key, _ in TABLE_COLUMNS]
        row += [num(report.metric(key)) for key in extra]
        row.append("–" if tied is None else str(int(tied)))
        if has_generator:
            row.append(num(report.success) if c.settings.get("generator") else "–")
        if has_llm:
            answers = report.run.llm_answers
            row.append(
                f"{int(report.run.llm_answers_cached or 0)}/{int(answers)}" if answers else "–"
            )
        test = tests.get(c.id, {})
        row += _tests_of_cell(test, c)
        if has_generator:
            row += _success_tests(test.get("success"))
        row.append(f"`{c.id}`" + ("" if c.complete else " *incomplete*"))
        rows.append(row)
    settings = 3 + len(others)  # the configuration, k, closure and the settings that vary: left
    align = (
        "l" * settings + "r" * (len(header) - settings - 1) + "l"
    )  # the figures right, the id left
    return table(header, rows, align) + [""]


# ------------------------------------------------------------------------------------------------
# Ties, frontier, generation, ASPERA, rounds
# ------------------------------------------------------------------------------------------------
def tie_table(cells: Sequence[LoadedCell], title: str = "Ties") -> list[str]:
    """The Markdown lines of the table of ties under ``title``: a row per ranking, each ranking
    metric in id order and tie-aware, and the tasks with a tie across k = 5, 10, 15, 20; none when
    no cell has tie-aware values."""
    series: dict[str, LoadedCell] = {}
    for c in cells:
        if c.report.ranking.tie_aware:
            series.setdefault(ranking_key(c), c)
    if not series:
        return []
    labels = ranking_labels(list(series.values()))
    n_tasks = "/".join(
        str(n) for n in sorted({int(c.report.selection.n_tasks or 0) for c in series.values()})
    )
    header = [
        "ranking",
        *(x for _, h in RANKED_COLUMNS for x in (h, f"{h} ta")),
        *(f"ties@{k}" for k in REPORT_KS),
    ]
    rows = []
    for key, c in series.items():
        ranking = c.report.ranking
        row = [labels[key]]
        for metric, _ in RANKED_COLUMNS:
            row += [num(c.report.metric(metric)), num(ranking.tie_aware.get(metric))]
        for k in REPORT_KS:
            tied = ranking.tied(k)
            row.append("–" if tied is None else str(int(tied)))
        rows.append(row)
    note = (
        "Each ranking metric with tied scores in primitive-id order (as above) and tie-aware (*ta*: the mean "
        "over every order of the tied primitives, computed exactly per group of tied scores; McSherry and "
        f"Najork, ECIR 2008). ties@k: tasks (of {n_tasks}) whose ranking has a tie across rank k."
    )
    return [f"## {title}", "", note, "", *table(header, rows), ""]


def frontier_table(
    frontiers: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    levels: Sequence[float] = (0.9, 0.95),
) -> list[str]:
    """The Markdown lines of the frontier table: per ranking (label -> (mean tokens per k, mean
    recall per k)), the smallest k whose mean recall@k reaches each of ``levels`` and the mean
    tokens of that top k."""
    if not frontiers:
        return []
    rows = []
    for label, (tokens, recall) in frontiers.items():
        row = [label]
        for level in levels:
            reached = next((i for i, r in enumerate(recall) if r >= level - 1e-12), None)
            if reached is None:
                row += ["–", "–"]
            else:
                row += [str(reached + 1), f"{tokens[reached]:.0f}"]
        rows.append(row)
    header = [
        "ranking",
        *(f"{what} for R {level:g}" for level in levels for what in ("k", "tokens")),
    ]
    return [
        "Recall/tokens frontier of each ranking (top k, k = 1 .. all): the smallest k whose mean "
        "recall@k reaches the level, and the mean documentation tokens of that top k.",
        "",
        *table(header, rows),
        "",
    ]


def _generation_row(cell: LoadedCell) -> list[str]:
    """A row of the generation table, from the cell's task rows."""
    rows = cell.task_rows()
    outcomes = [row.program for row in rows if row.program is not None]
    n, report = len(outcomes), cell.report
    cover = success_by_coverage([row.to_json() for row in rows])
    passed = sum(outcome.passed for outcome in outcomes)
    low, high = wilson_interval(passed, n) if n else (0.0, 0.0)
    totals = {
        key: sum(float(outcome.tokens.get(key, 0)) for outcome in outcomes)
        for key in ("prompt", "prompt_cached", "completion")
    }
    totals["computed"] = totals["prompt"] - totals["prompt_cached"]
    means = {key: total / n if n else 0.0 for key, total in totals.items()}
    rates = []
    for tasks, tasks_passed in (cover["complete"], cover["incomplete"]):
        rates.append(f"{tasks_passed}/{tasks} ({tasks_passed / tasks:.0%})" if tasks else "–")
    score = None if report.aspera is None else report.aspera.score
    recall = report.selection.recall_macro
    strict = report.metric("strict_success")
    return [
        cell.label,
        str(cell.settings.get("k")),
        str(n),
        f"{passed / n if n else 0:.3f} [{low:.3f}, {high:.3f}]",
        "–" if strict is None else f"{strict:.3f}",
        "–" if score is None else f"{score:.1f}",
        "–" if recall is None else f"{recall:.3f}",
        f"{cover['complete'][0] / n if n else 0:.2f}",
        " / ".join(rates),
        p_value(cover["p_fisher"]),
        *(f"{means[key]:,.0f}" for key in ("prompt", "computed", "completion")),
        f"{float(report.run.seconds or 0.0) / 60:.1f}",
    ]


def generation_table(cells: Sequence[LoadedCell]) -> list[str]:
    """The Markdown lines of the generation section (none without a generator): a row per cell with
    one, its success and Wilson interval, score, success by completeness of the selection, tokens
    and minutes."""
    rows = [
        _generation_row(c)
        for c in cells
        if c.settings.get("generator") and c.report.success is not None
    ]
    if not rows:
        return []
    header = [
        "configuration",
        "k",
        "tasks",
        "success [95% CI]",
        "strict",
        "score",
        "sel. R",
        "gold complete",
        "success: complete / not",
        "p Fisher",
        "prompt sent",
        "computed",
        "answer",
        "wall min",
    ]
    return ["", "## Generation", "", *table(header, rows, "lrrlrrrrlrrrrr"), "", GENERATION_NOTE]


def aspera_table(cells: Sequence[LoadedCell]) -> list[str]:
    """The Markdown lines of ASPERA's figures, a row per cell whose report holds them (none when no
    cell does)."""
    rows = []
    for c in cells:
        aspera = c.report.aspera
        if aspera is None or "score" not in aspera.figures:
            continue
        values = [
            num(aspera.figures.get(key), 3 if key.startswith("primitives") else 2)
            for key, _ in ASPERA_COLUMNS
        ]
        rows.append([c.label, aspera.extraction or "–", *values])
    if not rows:
        return []
    header = ["configuration", "extraction", *(h for _, h in ASPERA_COLUMNS)]
    return [
        "## ASPERA's figures",
        "",
        "Computed as ASPERA's agent runner does (`primsel.eval.aspera`): percentages except the F1 "
        "values; `extraction` says how programs were taken from the answers.",
        "",
        *table(header, rows, "ll" + "r" * len(ASPERA_COLUMNS)),
        "",
    ]


def rounds_table(
    cells: Sequence[LoadedCell], n_resamples: int = N_RESAMPLES, seed: int = 0
) -> list[str]:
    """The Markdown lines of the reflection rounds of finished cells, a row per cell and round; none
    when no cell has rounds. ``n_resamples``, ``seed``: of the randomisation test of each round's
    gain."""
    cells = [c for c in cells if c.report.rounds]
    if not cells:
        return []
    reselect = any(c.report.rounds[0].selection_recall is not None for c in cells)
    header = [
        "configuration",
        "round",
        "success",
        "Δ",
        "p t",
        "p rand",
        "requests",
        "sent",
        "cached",
        "prompt tokens",
        "completion tokens",
        "cumulative tokens",
    ]
    if reselect:
        header.append("selection recall")
    labels = short_labels(cells)
    rows = []
    for c in cells:
        passed = passed_by_round(c, len(c.report.rounds)) if len(c.report.rounds) >= 2 else []
        for r, figures in enumerate(c.report.rounds, start=1):
            gain = ["–", "–", "–"]
            if r >= 2:
                test = compare(passed[r - 1], passed[r - 2], n_resamples=n_resamples, seed=seed)
                gain = [
                    num(test["mean_diff"], signed=True),
                    p_value(test["p_t"]),
                    p_value(test["p_randomisation"]),
                ]
            counts = (
                figures.calls,
                figures.requests,
                figures.cache_hits,
                figures.prompt_tokens,
                figures.completion_tokens,
                figures.cumulative_tokens,
            )
            row = [
                labels[c.id] if r == 1 else "",
                str(r),
                num(figures.success),
                *gain,
                *(num(v, 0) for v in counts),
            ]
            if reselect:
                row.append(num(figures.selection_recall))
            rows.append(row)
    note = ROUNDS_NOTE.format(n_resamples=n_resamples, seed=seed)
    if reselect:
        note += RESELECT_NOTE
    return [
        "## Reflection rounds",
        "",
        "Configurations are named by the settings that differ between them (the cell "
        "ids are in the first table).",
        "",
        *table(header, rows),
        "",
        note,
        "",
    ]


# ------------------------------------------------------------------------------------------------
# Preamble, summary by dataset and notes
# ------------------------------------------------------------------------------------------------
def _summary(groups: Sequence[tuple[Mapping[str, Any], Sequence[LoadedCell]]]) -> list[str]:
    """Per summary metric, a table of a row per retriever and a column per dataset."""
    sources = [str(data.get("source", "?")) for data, _ in groups]
    labels = dict.fromkeys(c.retriever for _, cells in groups for c in cells if c.finished)
    found = {
        label: [
            next((c for c in cells if c.finished and c.retriever == label), None)
            for _, cells in groups
        ]
        for label in labels
    }
    lines = []
    for key, heading in SUMMARY_METRICS:
        rows = []
        for label, per_dataset in found.items():
            rows.append(
                [label, *("–" if c is None else num(c.report.metric(key)) for c in per_dataset)]
            )
        lines += [f"**{heading}** by dataset", "", *table(["retriever", *sources], rows), ""]
    return lines


def _preamble(experiment: LoadedExperiment, cells: Sequence[LoadedCell]) -> list[str]:
    """Title, description, the data and how many cells finished, and the cells of other data."""
    lines = [f"# {experiment.name}", ""]
    if experiment.description:
        lines += [experiment.description.strip(), ""]
    incomplete = [c for c in cells if not c.complete]
    done = f"Cells finished: {len(cells) - len(incomplete)} of {len(experiment.cells)}"
    if incomplete:
        done += (
            f"; {len(incomplete)} more incomplete (LLM requests failed after their retries; marked "
            "*incomplete*, recomputed by the next `primsel run`)"
        )
    lines.append(f"Data: {data_text(experiment.data)}. {done}.")
    other = experiment.other_data
    if other:
        if len(other) == 1:
            which = f"on {next(iter(other))}"
        else:
            which = (
                "on other data (" + ", ".join(f"{n} on {text}" for text, n in other.items()) + ")"
            )
        lines += [
            "",
            f"This report covers only the cells run on {data_text(experiment.data)}. The directory "
            f"also holds {sum(other.values())} cells computed {which}, not shown here; run the experiment "
            "on that data again to report them (their cells are reused).",
        ]
    return lines + [""]


def _images(images: Sequence[tuple[str, str]]) -> list[str]:
    """A Markdown image and a blank line per (title, file)."""
    lines = []
    for heading, file in images:
        lines += [f"![{heading}]({file})", ""]
    return lines


def _dataset_sections(
    experiment: LoadedExperiment,
    tests: Mapping[str, Mapping[str, Any]],
    images: Sequence[tuple[str, str]],
    columns: tuple[Sequence[str], bool, bool],
) -> list[str]:
    """Per dataset of an experiment on several: its notes, its table of cells and its figures."""
    lines: list[str] = []
    for data, group in dataset_groups(experiment):
        notes = [note for note in data.get("notes", ()) if isinstance(note, str)]
        info = data.get("info") or {}
        if info.get("packages"):
            notes.append(f"Python {info.get('python')} and {len(info['packages'])} packages")
        lines += [f"## {data_text(data)}", ""]
        if notes:
            lines += [f"Data: {'; '.join(notes)}.", ""]
        lines += cell_table([c for c in group if c.finished], tests, *columns)
        prefix = f"{experiment.name}_{slug(data.get('source', ''))}_"
        lines += _images([(heading, file) for heading, file in images if file.startswith(prefix)])
    return lines


def _significance_note(
    experiment: LoadedExperiment,
    tests: Mapping[str, Mapping[str, Any]],
    n_resamples: int,
    seed: int,
) -> str:
    """What each cell is tested against, and how."""
    by_id = {c.id: c for c in experiment.cells}
    named = {by_id[t["baseline"]].retriever for t in tests.values() if t.get("baseline")}
    baselines = ", ".join(sorted(named)) or "none"
    if experiment.pair_on is None:
        pairs = "other settings"
    else:
        pairs = ", ".join(experiment.pair_on) or "data"
    note = (
        f"Significance: each cell against the cell of the baseline retriever ({baselines}) with the same "
        f"{pairs}; ΔR@k is the mean per-task difference of recall@k (k of the cell)"
    )
    if any(t.get("recall_metric") == "set_recall" for t in tests.values()):
        note += (
            ", or of selection recall (set recall of what each cell selected; marked (set)) when the two cells "
            "differ in k or threshold"
        )
    return note + (
        f"; p t: two-sided paired t-test; p rand: two-sided paired randomisation (sign-flip) test, "
        f"{n_resamples} resamples, seed {seed} (exact when there are fewer sign patterns)."
    )


def _cache_note(cells: Sequence[LoadedCell]) -> str | None:
    """How many LLM answers came from the cache (None when no cell used an LLM)."""
    runs = [c.report.run for c in cells]
    if not any(r.llm_answers for r in runs):
        return None
    offline = sum(1 for r in runs if r.llm_answers and r.llm_answers_cached == r.llm_answers)
    note = (
        "cached: LLM answers (selection and generation) taken from the answer cache, of all the cell's "
        f"answers; {sum(int(r.llm_answers_cached or 0) for r in runs)} of "
        f"{sum(int(r.llm_answers or 0) for r in runs)} answers from the cache in all"
    )
    if offline:
        note += (
            f"; {offline} cells contacted no endpoint at all (the cache is keyed by model name, messages and "
            "sampling parameters, not by URL)"
        )
    return note + "."


def _folds_note(cells: Sequence[LoadedCell], learning: Sequence[str]) -> str:
    """The folds and seeds, and the retrievers that learn from tasks."""
    values = {}
    for key in ("folds", "seed"):
        found = sorted({c.settings.get(key) for c in cells if c.settings.get(key) is not None})
        values[key] = "/".join(map(str, found))
    folds, seeds = values["folds"], values["seed"]
    if learning:
        return (
            f"Retrievers that learn from tasks ({', '.join(learning)}) are scored by {folds}-fold "
            f"cross-validation (scikit-learn KFold, shuffled, seed {seeds}): each task is ranked by a model "
            "fitted on the other folds only."
        )
    return f"Folds: {folds}, seed {seeds} (used by retrievers that learn from tasks; none here)."


def _depth_note(experiment: LoadedExperiment, cells: Sequence[LoadedCell]) -> str | None:
    """What a depth shorter than the library changes (None when every ranking is whole)."""
    sizes = {
        d.get("fingerprint"): d.get("n_documents") for d in (*experiment.datasets, experiment.data)
    }
    depths = set()
    for c in cells:
        depth = c.settings.get("depth")
        library_size = sizes.get(c.settings.get("dataset")) or math.inf
        if depth is not None and int(depth) < library_size:
            depths.add(int(depth))
    if not depths:
        return None
    n = "/".join(map(str, sorted(depths)))
    return (
        f"Rankings are kept to depth {n} (`depth`): MRR is MRR@{n}; a tie across rank {n} is not seen "
        f"(ties@{n} is 0) and a group of tied scores running past it is cut there, so tie-aware values at k "
        f"close to {n} are approximate."
    )


def _notes(
    experiment: LoadedExperiment,
    cells: Sequence[LoadedCell],
    tests: Mapping[str, Mapping[str, Any]],
    learning: Sequence[str],
    n_resamples: int,
    seed: int,
) -> list[str]:
    """The notes under the tables: columns, significance, success, cache, folds and depth."""
    notes = [COLUMNS_NOTE, _significance_note(experiment, tests, n_resamples, seed)]
    if any(c.settings.get("generator") for c in cells):
        notes.append(
            "success: fraction of tasks whose generated program passed every evaluation "
            "program; Δsucc and its p-values compare per-task success with the baseline cell."
        )
    notes.append(_cache_note(cells))
    notes.append(_folds_note(cells, learning))
    notes.append(_depth_note(experiment, cells))
    return [f"- {note}" for note in notes if note is not None] + [""]


def render_markdown(
    experiment: LoadedExperiment,
    tests: Mapping[str, Mapping[str, Any]],
    images: Sequence[tuple[str, str]] = (),
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    frontier: Sequence[str] = (),
    standings: Sequence[Standing] = (),
    learning: Sequence[str] = (),
    shown_note: str = "",
) -> str:
    """The report text of ``experiment``.

    Parameters
    ----------
    experiment : the experiment as loaded.
    tests : its :func:`~primsel.reporting.compare.significance`.
    images : the figures drawn, (title, file name).
    n_resamples, seed : of the randomisation tests (said in the notes).
    frontier : the :func:`frontier_table` lines.
    standings : the leaderboard (none: no leaderboard, as for several datasets).
    learning : the labels of the retrievers that learn from tasks.
    shown_note : the paragraph under the figures' heading.
    """
    cells = [c for c in experiment.cells if c.finished]
    columns = (
        other_columns(cells),
        any(c.settings.get("generator") for c in cells),
        any(c.report.run.llm_answers for c in cells),
    )
    groups = dataset_groups(experiment)
    lines = _preamble(experiment, cells)
    if len(groups) > 1:
        sections = _dataset_sections(experiment, tests, images, columns)
        prefixes = tuple(f"{experiment.name}_{slug(data.get('source', ''))}_" for data, _ in groups)
        images = [(heading, file) for heading, file in images if not file.startswith(prefixes)]
        lines += _summary(groups)
    else:
        lines += leaderboard_lines(standings, n_resamples, seed)
        sections = ["## All cells", "", *cell_table(cells, tests, *columns)]
    if images:
        lines += ["## Figures", ""]
        if shown_note:
            lines += [shown_note, ""]
        lines += _images(images)
    lines += sections
    lines += _notes(experiment, cells, tests, learning, n_resamples, seed)
    if len(groups) == 1:
        lines += tie_table(cells)
    else:  # one table per dataset: the same retriever ranks each differently
        for data, group in groups:
            lines += tie_table(
                [c for c in group if c.finished], title=f"Ties: {data.get('source', '?')}"
            )
    lines += generation_table(cells)
    lines += aspera_table([c for c in cells if c.settings.get("generator")])
    lines += list(frontier)
    lines += rounds_table(cells, n_resamples=n_resamples, seed=seed)
    return "\n".join(lines)
