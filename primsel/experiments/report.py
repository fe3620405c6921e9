"""The report of an experiment: one Markdown table row per cell, significance, plots.

:func:`write_report` reads an experiment directory written by
:func:`primsel.experiments.runner.run_experiment` (``experiment.json`` and, per finished cell,
``config.json``, ``report.json`` and ``tasks.jsonl``) and writes

* ``report.md``: the data the cells ran on (and how many cells of other data the directory
  holds, which it does not show), a row per finished cell (retriever, k, closure,
  recall@5/10/15/20, complete@10/15/20, nDCG@10, MRR, set precision / recall / F1 micro and
  macro, documentation tokens selected, task success when a generator ran, the LLM answers
  taken from the answer cache when an LLM was used; an incomplete cell,
  whose LLM requests failed, is marked) and the p-values of paired tests of the cell against
  its baseline cell on per-task recall (and on per-task success when a generator ran); with a
  generator, a second table of ASPERA's own figures (:mod:`primsel.eval.aspera`); a table of
  ties: every ranking metric in primitive-id order and tie-aware, per ranking, with the tasks
  whose ranking has a tie across k; with reflection rounds, a table of success, gain and cost by
  round (:mod:`primsel.experiments.report_rounds`);
* ``<name>_recall_at_k.png``: recall@k curves, one per retriever;
* ``<name>_recall_vs_tokens.png``: selection recall against documentation tokens selected
  (tokens on a log scale when the whole library is among the selections);
* ``<name>_frontier.png`` and a table: the recall/tokens frontier of every ranking (top k for
  every k, from ``run.trec``), with the cells of selector classes as points;
* ``<name>_success.png``: with a generator, the task success of every cell;
* ``<name>_success_by_round.png``: with reflection rounds, success against round, one line per cell.

Plots name the data in their title, keep their legends outside the axes and give every
ranking a distinct colour.

The report holds aggregates only (never per-task rows), so it can be exported
(``export=...``) next to the experiment declaration and committed.

Baseline: every cell is compared with the cell of the baseline retriever that agrees with it
on everything else (k, closure, folds, seed, generator, ...), or, when the experiment sets
``pair_on``, on those settings only. The baseline retriever is the experiment's ``baseline`` (a
retriever label, a retriever type one label has, or a cell id), else the retriever of the first
cell. Recall is compared as per-task recall@k when the two cells have the same k and threshold,
else as per-task selection (set) recall.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.eval.aspera import markdown_table as aspera_table
from primsel.eval.significance import N_RESAMPLES, compare
from primsel.experiments.cell import TIE_AWARE
from primsel.experiments.labels import baseline_label, generator_label, get_dotted, pair_key, varied_keys
from primsel.files import canonical_json, read_jsonl, write_atomic
from primsel.types import LearnsFromTasks

#: The table's metric columns: (report.json key, header).
COLUMNS = (
    ("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@15", "R@15"), ("recall@20", "R@20"),
    ("complete@10", "C@10"), ("complete@15", "C@15"), ("complete@20", "C@20"),
    ("ndcg@10", "nDCG@10"), ("mrr", "MRR"),
    ("set_precision_micro", "P mi"), ("set_recall_micro", "R mi"), ("set_f1_micro", "F1 mi"),
    ("set_precision_macro", "P ma"), ("set_recall_macro", "R ma"), ("set_f1_macro", "F1 ma"),
    ("docs_tokens", "tokens"),
)


#: The ranking metrics shown in primitive-id order and tie-aware in the table of ties.
RANKED_COLUMNS = COLUMNS[:9]
#: Cut-offs at which the table of ties counts the tasks with a tie across the cut-off.
TIE_KS = (5, 10, 15, 20)


class ReportError(ValueError):
    """The directory is not an experiment directory (nothing to report)."""


@dataclass(frozen=True)
class CellResult:
    """One cell of an experiment as read from disk.

    Parameters
    ----------
    id : cell id (its directory name).
    label : readable label.
    settings : resolved settings (``retriever``, ``k``, ``closure``, ...).
    report : report.json (empty when the cell has none).
    directory : the cell's directory.
    """

    id: str
    label: str
    settings: Mapping[str, Any]
    report: Mapping[str, float]
    directory: Path

    @property
    def finished(self) -> bool:
        """True when the cell's report.json exists (complete or not)."""
        return bool(self.report)

    @property
    def complete(self) -> bool:
        """False when report.json says ``"complete": false`` (LLM requests failed; the next
        ``primsel run`` recomputes the cell)."""
        return self.report.get("complete", True) is not False

    @property
    def retriever(self) -> str:
        """Readable label of the cell's retriever."""
        return specs.label(self.settings.get("retriever", "?"))


@dataclass(frozen=True)
class Experiment:
    """An experiment directory: its name, description, baseline, dataset summary and cells.

    ``pair_on`` is the experiment's ``pair_on`` (None: every setting except the retriever);
    ``other_data`` counts the cell directories of other data (not in ``experiment.json``),
    ``{"<source> (<n> tasks)": cells}``; ``datasets`` lists the datasets of an experiment run on
    several (``source``, ``n_tasks``, ``fingerprint``, ``n_documents``, ``notes``), empty for one.
    """

    name: str
    directory: Path
    cells: tuple[CellResult, ...]
    description: str = ""
    baseline: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    pair_on: tuple[str, ...] | None = None
    other_data: Mapping[str, int] = field(default_factory=dict)
    datasets: tuple[Mapping[str, Any], ...] = ()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable: {exc}") from None


def load_experiment(directory: str | os.PathLike[str]) -> Experiment:
    """Read an experiment directory.

    The cells and their order come from ``experiment.json``; without it, every sub-directory
    holding a ``config.json`` is a cell (sorted by label).

    Raises
    ------
    ReportError : no such directory, or neither ``experiment.json`` nor any cell in it, or an
        unreadable JSON file (the message names the file).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    manifest = _read_json(directory / "experiment.json")
    entries: list[dict[str, Any]] = []
    if manifest is not None:
        entries = list(manifest.get("cells", []))
    else:
        for sub in sorted(p for p in directory.iterdir() if (p / "config.json").is_file()):
            config = _read_json(sub / "config.json")
            entries.append({"id": sub.name, "label": config.get("label", sub.name),
                            "settings": config.get("settings", {})})
        entries.sort(key=lambda e: e["label"])
        manifest = {"name": directory.name}
    if not entries:
        raise ReportError(f"{directory}: not an experiment directory (no experiment.json and no cells)")
    cells = []
    for e in entries:
        report = _read_json(directory / e["id"] / "report.json") or {}
        cells.append(CellResult(id=e["id"], label=e.get("label", e["id"]), settings=e.get("settings", {}),
                                report=report, directory=directory / e["id"]))
    pair_on = manifest.get("pair_on")
    datasets = tuple(d for d in manifest.get("datasets", ()) if isinstance(d, Mapping))
    fingerprints = {d.get("fingerprint") for d in datasets} or {(manifest.get("data") or {}).get("fingerprint")}
    return Experiment(name=manifest.get("name", directory.name), directory=directory, cells=tuple(cells),
                      description=manifest.get("description", "") or "", baseline=manifest.get("baseline"),
                      data=manifest.get("data", {}) or {},
                      pair_on=tuple(pair_on) if isinstance(pair_on, list) else None,
                      other_data=_other_data(directory, {c.id for c in cells}, fingerprints),
                      datasets=datasets)


def _data_text(data: Mapping[str, Any]) -> str:
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"


def _other_data(directory: Path, known: set[str], fingerprints: set[Any]) -> dict[str, int]:
    """Cell directories (with a config.json) that the manifest does not list and that ran on
    other data than its datasets (``fingerprints``), counted per data description."""
    counts: dict[str, int] = {}
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in known):
        try:
            config = json.loads((sub / "config.json").read_text(encoding="utf-8"))
            cell_data = config.get("data") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(cell_data, Mapping) or cell_data.get("fingerprint") in fingerprints:
            continue
        text = _data_text(cell_data)
        counts[text] = counts.get(text, 0) + 1
    return counts


# ---------------------------------------------------------------------------------------------
# Significance against the baseline
# ---------------------------------------------------------------------------------------------
def baseline_pairs(experiment: Experiment) -> dict[str, str | None]:
    """The baseline cell of every finished cell: cell id -> baseline cell id (None when the
    baseline retriever has no finished cell with the same other settings, or the same
    ``pair_on`` settings; when several agree, the first in grid order).

    Raises
    ------
    ReportError : the experiment's ``baseline`` names neither a retriever label, a retriever
        type nor a cell id of it.
    """
    finished = [c for c in experiment.cells if c.finished]
    if not finished:
        return {}
    try:
        wanted = baseline_label(experiment.baseline, [(c.id, c.settings.get("retriever", "?")) for c in experiment.cells])
    except ValueError as exc:
        raise ReportError(f"{experiment.name}: {exc}") from None
    base: dict[str, str] = {}
    for c in finished:
        if c.retriever == wanted:
            base.setdefault(pair_key(c.settings, experiment.pair_on), c.id)
    out = {}
    for c in finished:
        own = c.id if c.retriever == wanted and base.get(pair_key(c.settings, experiment.pair_on)) == c.id else None
        out[c.id] = own or base.get(pair_key(c.settings, experiment.pair_on))
    return out


def recall_metric(cell: CellResult, base: CellResult) -> str:
    """The per-task recall a cell is compared on with its baseline cell: ``recall@k`` (k of the
    cell) when both have the same k and threshold, else ``set_recall`` (the recall of what each
    selected)."""
    same = cell.settings.get("k") == base.settings.get("k") and \
        cell.settings.get("threshold") == base.settings.get("threshold")
    return f"recall@{cell.settings.get('k')}" if same else "set_recall"


def per_task_values(cell: CellResult, metric: str) -> dict[str, float]:
    """``{task_id: value}`` of a per-task metric from the cell's tasks.jsonl (``metrics`` entry,
    or ``success`` from ``status``).

    Raises
    ------
    ReportError : tasks.jsonl is missing or lacks the metric for a task.
    """
    path = cell.directory / "tasks.jsonl"
    out: dict[str, float] = {}
    try:
        for _, row in read_jsonl(path):
            if metric == "success":
                out[str(row["task_id"])] = 1.0 if row.get("status") == "pass" else 0.0
            else:
                out[str(row["task_id"])] = float(row["metrics"][metric])
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ReportError(f"{path}: no per-task {metric!r}: {exc}") from None
    return out


def significance(experiment: Experiment, n_resamples: int = N_RESAMPLES, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Paired tests of every finished cell against its baseline cell (:func:`baseline_pairs`).

    Per-task recall is compared (:func:`recall_metric`); when both cells ran a generator,
    per-task success too.

    Returns
    -------
    cell id -> ``{"baseline": id or None, "recall_metric": name or None, "recall": compare(...)
    or None, "success": compare(...) or None}`` (see :func:`primsel.eval.significance.compare`);
    ``recall``/``success`` are None for the baseline cell itself and when there is no partner.
    """
    out: dict[str, dict[str, Any]] = {}
    by_id = {c.id: c for c in experiment.cells}
    for cid, bid in baseline_pairs(experiment).items():
        entry: dict[str, Any] = {"baseline": bid, "recall_metric": None, "recall": None, "success": None}
        if bid is not None and bid != cid:
            cell, base = by_id[cid], by_id[bid]
            metric = entry["recall_metric"] = recall_metric(cell, base)
            entry["recall"] = compare(per_task_values(cell, metric), per_task_values(base, metric),
                                      n_resamples=n_resamples, seed=seed)
            if cell.settings.get("generator") and base.settings.get("generator"):
                entry["success"] = compare(per_task_values(cell, "success"), per_task_values(base, "success"),
                                           n_resamples=n_resamples, seed=seed)
        out[cid] = entry
    return out


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return str(value)


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _learning_retrievers(cells: Sequence[CellResult]) -> list[str]:
    """Labels of the cells' retrievers that learn from tasks (built from their specification,
    which only stores parameters, and asked for ``learns_from_tasks``)."""
    from primsel import registry

    out = []
    for label, spec in {c.retriever: c.settings.get("retriever") for c in cells}.items():
        try:
            retriever = registry.build(spec, "retriever")
            if isinstance(retriever, LearnsFromTasks):
                out.append(label)
        except Exception:  # noqa: BLE001 - a retriever that cannot be built here is not annotated
            continue
    return out


def _other_columns(cells: Sequence[CellResult]) -> list[str]:
    """Setting keys (besides retriever, k, closure, dataset) whose values differ between cells.

    The generator is shown by ``generator`` (type and model) when those differ, and by a
    ``generator.<parameter>`` column for each other parameter that differs (``generator.seed``).
    """
    keys = sorted({k for c in cells for k in c.settings} - {"retriever", "k", "closure", "dataset"})
    out = varied_keys([c.settings for c in cells], keys)
    if "generator" in out and len({generator_label(c.settings.get("generator")) for c in cells}) == 1:
        out.remove("generator")
    return [k for k in out if k not in ("generator.type", "generator.model")]


def render_markdown(experiment: Experiment, tests: Mapping[str, Mapping[str, Any]],
                    images: Sequence[tuple[str, str]] = (), n_resamples: int = N_RESAMPLES,
                    seed: int = 0, frontier: Sequence[str] = ()) -> str:
    """The report text.

    Parameters
    ----------
    experiment : the experiment (:func:`load_experiment`).
    tests : :func:`significance` of it.
    images : (title, relative file name) of the plots to link.
    n_resamples, seed : of the randomisation test (stated in the notes).
    frontier : Markdown lines of the frontier table (:func:`frontier_table`), placed before the plots.
    """
    cells = [c for c in experiment.cells if c.finished]
    has_gen = any(c.settings.get("generator") for c in cells)
    has_llm = any(c.report.get("llm_answers") for c in cells)
    others = _other_columns(cells)
    by_id = {c.id: c for c in experiment.cells}
    lines = [f"# {experiment.name}", ""]
    if experiment.description:
        lines += [experiment.description.strip(), ""]
    incomplete = [c for c in cells if not c.complete]
    done = f"Cells finished: {len(cells) - len(incomplete)} of {len(experiment.cells)}"
    if incomplete:
        done += (f"; {len(incomplete)} more incomplete (LLM requests failed after their retries; marked "
                 "*incomplete*, recomputed by the next `primsel run`)")
    lines.append(f"Data: {_data_text(experiment.data)}. {done}.")
    if experiment.other_data:
        n_other = sum(experiment.other_data.values())
        if len(experiment.other_data) == 1:
            which = f"on {next(iter(experiment.other_data))}"
        else:
            which = "on other data (" + ", ".join(f"{n} on {text}" for text, n in experiment.other_data.items()) + ")"
        lines += ["", f"This report covers only the cells run on {_data_text(experiment.data)}. The directory "
                      f"also holds {n_other} cells computed {which}, not shown here; run the experiment on "
                      "that data again to report them (their cells are reused)."]
    lines.append("")

    groups = dataset_groups(experiment)
    if len(groups) == 1:
        lines += _table(cells, tests, others, has_gen, has_llm, by_id)
    else:
        lines += _summary(experiment, groups)
        for data, group in groups:
            lines += [f"## {_data_text(data)}", ""]
            notes = [n for n in data.get("notes", ()) if isinstance(n, str)]
            info = data.get("info") or {}
            if info.get("packages"):
                notes.append(f"Python {info.get('python')} and {len(info['packages'])} packages")
            if notes:
                lines += [f"Data: {'; '.join(notes)}.", ""]
            group_cells = [c for c in group if c.finished]
            lines += _table(group_cells, tests, others, has_gen, has_llm, by_id)
            for title, file in images:
                if file.startswith(f"{experiment.name}_{_slug(data.get('source', ''))}_"):
                    lines += [f"![{title}]({file})", ""]
    baselines = sorted({by_id[t["baseline"]].retriever for t in tests.values() if t.get("baseline")})
    folds = sorted({c.settings.get("folds") for c in cells if c.settings.get("folds") is not None})
    seeds = sorted({c.settings.get("seed") for c in cells if c.settings.get("seed") is not None})
    learning = _learning_retrievers(cells)
    notes = [
        "R@k: recall@k and C@k: complete@k (fraction of tasks whose gold primitives all rank in the "
        "top k) read each task's full ranking; nDCG@10 and MRR likewise. P, R, F1: set precision, "
        "recall and F1 of the selection (the top k, plus the library types it depends on when "
        "closure is on), micro (mi: pooled over tasks) and macro (ma: mean over tasks). tokens: mean "
        "documentation tokens of the selected primitives per task (estimated as characters / 4 "
        "of the stubs a prompt shows). ties@k: tasks whose ranking has a tie across the cell's k "
        "(equal scores at ranks k and k + 1, so primitive-id order, not the retriever, decides what "
        "is selected); the table of ties below gives the ranking metrics averaged over tie orders.",
        f"Significance: each cell against the cell of the baseline retriever "
        f"({', '.join(baselines) or 'none'}) with "
        + ("the same other settings" if experiment.pair_on is None else
           f"the same {', '.join(experiment.pair_on) or 'data'}")
        + "; ΔR@k is the mean per-task difference of recall@k (k of the cell)"
        + (", or of selection recall (set recall of what each cell selected; marked (set)) when the "
           "two cells differ in k or threshold" if any(t.get("recall_metric") == "set_recall" for t in tests.values())
           else "")
        + "; p t: two-sided paired t-test; p rand: "
        f"two-sided paired randomisation (sign-flip) test, {n_resamples} resamples, seed {seed} "
        "(exact when there are fewer sign patterns).",
    ]
    if has_gen:
        notes.append("success: fraction of tasks whose generated program passed every evaluation "
                     "program; Δsucc and its p-values compare per-task success with the baseline cell.")
    if has_llm:
        cached = sum(int(c.report.get("llm_answers_cached", 0)) for c in cells)
        total = sum(int(c.report.get("llm_answers", 0)) for c in cells)
        offline = sum(1 for c in cells if c.report.get("llm_answers") and
                      c.report.get("llm_answers_cached") == c.report.get("llm_answers"))
        notes.append(f"cached: LLM answers (selection and generation) taken from the answer cache, of all "
                     f"the cell's answers; {cached} of {total} answers from the cache in all"
                     + (f"; {offline} cells contacted no endpoint at all (the cache is keyed by model name, "
                        "messages and sampling parameters, not by URL)" if offline else "") + ".")
    if learning:
        notes.append(f"Retrievers that learn from tasks ({', '.join(learning)}) are scored by "
                     f"{'/'.join(map(str, folds))}-fold cross-validation (scikit-learn KFold, "
                     f"shuffled, seed {'/'.join(map(str, seeds))}): each task is ranked by a model "
                     "fitted on the other folds only.")
    else:
        notes.append(f"Folds: {'/'.join(map(str, folds))}, seed {'/'.join(map(str, seeds))} "
                     "(used by retrievers that learn from tasks; none here).")
    sizes = {d.get("fingerprint"): d.get("n_documents") for d in (*experiment.datasets, experiment.data)}
    depths = sorted({int(c.settings["depth"]) for c in cells if c.settings.get("depth") is not None
                     and int(c.settings["depth"]) < int(sizes.get(c.settings.get("dataset")) or math.inf)})
    if depths:
        n = "/".join(map(str, depths))
        notes.append(f"Rankings are kept to depth {n} (`depth`): MRR is MRR@{n}; a tie across rank {n} is "
                     f"not seen (ties@{n} is 0) and a group of tied scores running past it is cut there, so "
                     f"tie-aware values at k close to {n} are approximate.")
    lines += [f"- {n}" for n in notes]
    lines.append("")
    if len(groups) == 1:
        lines += tie_table(cells)
    else:  # one table per dataset: the same retriever ranks each differently
        for data, group in groups:
            lines += tie_table([c for c in group if c.finished], title=f"Ties: {data.get('source', '?')}")
    lines += aspera_table([(c.label, c.report) for c in cells if c.settings.get("generator")])
    lines += list(frontier)
    from primsel.experiments.report_rounds import rounds_table  # it uses this module's style

    lines += rounds_table(cells, n_resamples=n_resamples, seed=seed)
    for title, file in images:
        if len(groups) == 1 or not any(file.startswith(f"{experiment.name}_{_slug(d.get('source', ''))}_")
                                       for d, _ in groups):
            lines += [f"![{title}]({file})", ""]
    return "\n".join(lines)


def _table(cells: Sequence[CellResult], tests: Mapping[str, Mapping[str, Any]], others: Sequence[str],
           has_gen: bool, has_llm: bool, by_id: Mapping[str, CellResult]) -> list[str]:
    """The table of ``cells``: one row per cell, its metrics and its test against the baseline."""
    lines: list[str] = []
    header = ["configuration", "k", "closure", *others]
    header += [h for _, h in COLUMNS]
    header += ["ties@k"]
    if has_gen:
        header += ["success"]
    if has_llm:
        header += ["cached"]
    header += ["ΔR@k", "p t", "p rand"]
    if has_gen:
        header += ["Δsucc", "p t succ", "p rand succ"]
    header += ["cell"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if i < 3 + len(others) else "--:" for i in range(len(header) - 1)) + "|---|")
    for c in cells:
        r = c.report
        row = [c.retriever, str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no"]
        for key in others:
            value = get_dotted(c.settings, key)
            row.append(generator_label(value) if key == "generator" else _short_value(value))
        row += [_num(r.get(key), 1 if key == "docs_tokens" else 3) for key, _ in COLUMNS]
        tied = r.get(f"tied_tasks@{c.settings.get('k')}")
        row.append("–" if tied is None else str(int(tied)))
        if has_gen:
            row.append(_num(r.get("success")) if c.settings.get("generator") else "–")
        if has_llm:
            row.append(f"{int(r['llm_answers_cached'])}/{int(r['llm_answers'])}" if r.get("llm_answers") else "–")
        t = tests.get(c.id, {})
        if t.get("baseline") == c.id:
            row += ["baseline", "–", "–"]
        elif t.get("recall"):
            mark = "" if str(t.get("recall_metric") or "recall@").startswith("recall@") else " (set)"
            row += [f"{t['recall']['mean_diff']:+.3f}{mark}", _p(t["recall"]["p_t"]),
                    _p(t["recall"]["p_randomisation"])]
        else:
            row += ["–", "–", "–"]
        if has_gen:
            if t.get("success"):
                row += [f"{t['success']['mean_diff']:+.3f}", _p(t["success"]["p_t"]),
                        _p(t["success"]["p_randomisation"])]
            else:
                row += ["–", "–", "–"]
        row.append(f"`{c.id}`" + ("" if c.complete else " *incomplete*"))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def tie_table(cells: Sequence[CellResult], title: str = "Ties") -> list[str]:
    """Markdown lines of the table of ties: one row per ranking (cells that differ only in k
    and closure share one), each ranking metric in primitive-id order and tie-aware (the mean
    over every order of tied scores, :func:`primsel.eval.metrics.tie_aware`) side by side, and
    the number of tasks with a tie across k = 5, 10, 15, 20. Empty when no cell has tie-aware
    values (cells computed before they existed). ``title``: the section heading."""
    series: dict[tuple[str, str], CellResult] = {}
    for c in cells:
        if any(key.startswith(TIE_AWARE) for key in c.report):
            series.setdefault(_series_key(c), c)
    if not series:
        return []
    labels = _series_labels(list(series.values()))
    n_tasks = {int(c.report.get("n_tasks", 0)) for c in series.values()}
    header = ["ranking"]
    for _, h in RANKED_COLUMNS:
        header += [h, f"{h} ta"]
    header += [f"ties@{k}" for k in TIE_KS]
    lines = [
        f"## {title}",
        "",
        "Each ranking metric with tied scores in primitive-id order (as above) and tie-aware (*ta*: "
        "the mean over every order of the tied primitives, computed exactly per group of tied scores; "
        "McSherry and Najork, ECIR 2008). ties@k: tasks (of "
        f"{'/'.join(str(n) for n in sorted(n_tasks))}) whose ranking has a tie across rank k.",
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "|".join("--:" for _ in header[1:]) + "|",
    ]
    for key, c in series.items():
        r = c.report
        row = [labels[key]]
        for metric, _ in RANKED_COLUMNS:
            row += [_num(r.get(metric)), _num(r.get(TIE_AWARE + metric))]
        for k in TIE_KS:
            tied = r.get(f"tied_tasks@{k}")
            row.append("–" if tied is None else str(int(tied)))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(text))


def dataset_groups(experiment: Experiment) -> list[tuple[Mapping[str, Any], list[CellResult]]]:
    """The experiment's cells grouped by dataset, in the manifest's dataset order:
    ``[(dataset summary, cells)]``; one group holding every cell for an experiment on one
    dataset."""
    if len(experiment.datasets) <= 1:
        return [(experiment.data, list(experiment.cells))]
    groups: list[tuple[Mapping[str, Any], list[CellResult]]] = [(d, []) for d in experiment.datasets]
    index = {d.get("fingerprint"): i for i, d in enumerate(experiment.datasets)}
    for c in experiment.cells:
        i = index.get(c.settings.get("dataset"))
        if i is not None:
            groups[i][1].append(c)
    return groups


#: Metrics of the summary tables of an experiment on several datasets.
SUMMARY_METRICS = (("recall@5", "recall@5"), ("ndcg@10", "nDCG@10"), ("complete@5", "complete@5"))


def _summary(experiment: Experiment, groups: Sequence[tuple[Mapping[str, Any], Sequence[CellResult]]]) -> list[str]:
    """Tables with a row per retriever and a column per dataset, one per :data:`SUMMARY_METRICS`
    metric (the first finished cell of each retriever and dataset)."""
    labels = list(dict.fromkeys(c.retriever for _, cells in groups for c in cells if c.finished))
    lines = []
    for key, title in SUMMARY_METRICS:
        lines += [f"**{title}** by dataset", "",
                  "| retriever | " + " | ".join(str(d.get("source", "?")) for d, _ in groups) + " |",
                  "|---|" + "--:|" * len(groups)]
        for label in labels:
            row = [label]
            for _, cells in groups:
                found = next((c for c in cells if c.finished and c.retriever == label), None)
                row.append(_num(found.report.get(key)) if found is not None else "–")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return lines


#: Columns of the summary :func:`best_cells` prints: (report.json key, header).
SUMMARY_COLUMNS = (("recall@10", "R@10"), ("recall@15", "R@15"), ("complete@20", "C@20"), ("mrr", "MRR"),
                   ("set_f1_macro", "F1 ma"), ("docs_tokens", "tokens"))


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
            out += [f"== {_data_text(data)}", *block]
    return out


def _best_of(cells: Sequence[CellResult], limit: int, where: str = "") -> list[str]:
    """:func:`best_cells` of one dataset's cells."""
    cells = [c for c in cells if c.finished]
    if not cells:
        return []
    has_gen = any(c.settings.get("generator") for c in cells)

    def merit(c: CellResult) -> tuple[float, float, float, float]:
        r = c.report
        return (float(c.settings.get("k") == HEADLINE_K),
                float(r.get("success", -1.0)) if has_gen else 0.0, float(r.get("set_f1_macro", 0.0)),
                -float(r.get("docs_tokens", 0.0)))

    def order(c: CellResult) -> tuple[float, float, float]:
        r = c.report
        return (float(r.get("success", -1.0)) if has_gen else 0.0, float(r.get(f"recall@{HEADLINE_K}", 0.0)),
                float(r.get("set_f1_macro", 0.0)))

    best: dict[tuple[str, str], CellResult] = {}
    for c in cells:
        key = _series_key(c)
        if key not in best or merit(c) > merit(best[key]):
            best[key] = c
    labels = _series_labels(cells)
    ranked = sorted(best.items(), key=lambda item: order(item[1]), reverse=True)[:limit]
    header = ["configuration", "k", "closure", *(["success"] if has_gen else []), *(h for _, h in SUMMARY_COLUMNS)]
    rows = []
    for key, c in ranked:
        r = c.report
        rows.append([labels[key], str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no",
                     *([_num(r.get("success"))] if has_gen else []),
                     *(_num(r.get(m), 1 if m == "docs_tokens" else 3) for m, _ in SUMMARY_COLUMNS)])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    room = max(len(header[0]), SUMMARY_WIDTH - sum(widths[1:]) - 2 * (len(header) - 1))
    if widths[0] > room:
        for row in rows:
            # cut in the middle: labels of one ranking's variants differ at their end (selector=...)
            head = (room - 1) // 2
            row[0] = row[0] if len(row[0]) <= room else row[0][:head] + "…" + row[0][len(row[0]) - (room - 1 - head):]
        widths[0] = room
    fmt = [str.ljust if i < 3 else str.rjust for i in range(len(header))]
    lines = [f"best cell of each ranking (at k = {HEADLINE_K} where run), by "
             f"{'task success, then ' if has_gen else ''}R@{HEADLINE_K}:"]
    lines += ["  ".join(f(v, w) for f, v, w in zip(fmt, row, widths)).rstrip() for row in [header, *rows]]
    if len(best) > limit:
        lines.append(f"... {len(best) - limit} more rankings" + (f" ({where})" if where else ""))
    return lines


def _short_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return specs.label(value)
    if isinstance(value, float):
        return f"{value:g}"
    return "–" if value is None else str(value)


def _series_key(c: CellResult) -> tuple[str, str]:
    """Cells that share a ranking (same settings except k and closure) form one curve."""
    rest = {k: v for k, v in c.settings.items() if k not in ("k", "closure", "retriever", "dataset")}
    return c.retriever, canonical_json(rest)


def _series_labels(cells: Sequence[CellResult]) -> dict[tuple[str, str], str]:
    keys = list(dict.fromkeys(_series_key(c) for c in cells))
    extra = _other_columns(cells)
    out = {}
    for key in keys:
        cell = next(c for c in cells if _series_key(c) == key)
        parts = [cell.retriever] + [f"{k}={_short_value(get_dotted(cell.settings, k))}" for k in extra]
        out[key] = " ".join(parts)
    return out


def plot_recall_curves(experiment: Experiment, path: Path) -> bool:
    """Recall@k against k (1..20, or what report.json holds), one curve per retriever.

    Returns
    -------
    False (and no file) when no finished cell has recall values.
    """
    cells = [c for c in experiment.cells if c.finished]
    labels = _series_labels(cells)
    curves: dict[str, tuple[list[int], list[float]]] = {}
    for c in cells:
        label = labels[_series_key(c)]
        if label in curves:
            continue
        ks = sorted(int(key.split("@")[1]) for key in c.report if key.startswith("recall@") and key[7:].isdigit())
        ks = [k for k in ks if k <= 20] or ks
        if ks:
            curves[label] = (ks, [float(c.report[f"recall@{k}"]) for k in ks])
    if not curves:
        return False
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    palette = _palette(len(curves))
    for (label, (ks, values)), colour in zip(curves.items(), palette):
        ax.plot(ks, values, marker=".", label=label, color=colour)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1.02)
    _finish(plt, fig, ax, path, _title(experiment, "recall@k"), "k (primitives selected)", "recall@k")
    return True


def plot_recall_vs_tokens(experiment: Experiment, path: Path) -> bool:
    """Selection recall (macro) against documentation tokens selected per task, one line per
    retriever over k; circles without closure, triangles with.

    Returns
    -------
    False (and no file) when no finished cell has both values.
    """
    cells = [c for c in experiment.cells if c.finished and "docs_tokens" in c.report
             and "set_recall_macro" in c.report]
    if not cells:
        return False
    labels = _series_labels(cells)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colours: dict[str, Any] = {}
    cycle = _palette(len(set(labels.values())))
    for closure, marker, style in ((False, "o", "-"), (True, "^", "--")):
        groups: dict[str, list[CellResult]] = {}
        for c in cells:
            if bool(c.settings.get("closure")) == closure:
                groups.setdefault(labels[_series_key(c)], []).append(c)
        for label, group in groups.items():
            group.sort(key=lambda c: c.report["docs_tokens"])
            colour = colours.setdefault(label, cycle[len(colours) % len(cycle)])
            ax.plot([c.report["docs_tokens"] for c in group], [c.report["set_recall_macro"] for c in group],
                    marker=marker, linestyle=style, color=colour,
                    label=label + (" +closure" if closure else ""))
    tokens = [c.report["docs_tokens"] for c in cells if c.report["docs_tokens"] > 0]
    if tokens and max(tokens) > LOG_AXIS_RATIO * min(tokens):
        # the whole library (`all`, ~11k tokens) would squeeze every other point to the left
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}" if f"{x:.0e}"[0] in "25" else ""))
    ax.set_ylim(0, 1.02)
    _finish(plt, fig, ax, path, _title(experiment, "recall against documentation size"),
            "documentation tokens selected per task (mean"
            + (", log scale)" if ax.get_xscale() == "log" else ")"), "selection recall (macro)")
    return True


#: Recall levels of the frontier table: the fewest tokens at which top-k recall reaches them.
FRONTIER_LEVELS = (0.9, 0.95)


def ranking_frontier(cell: CellResult, tokens: Mapping[str, int]) -> tuple[list[float], list[float]] | None:
    """The recall/tokens frontier of a cell's ranking: for k = 1 .. library size, the mean
    documentation tokens and the mean recall of the top k, over the tasks.

    Parameters
    ----------
    cell : a finished cell with ``run.trec`` and ``tasks.jsonl`` (its gold sets).
    tokens : estimated tokens per primitive id.

    Returns
    -------
    (mean tokens per k, mean recall per k), or None when the files are missing or a ranked id
    has no token count.
    """
    from primsel.retrieval.trec import read_run
    from primsel.types import ranking

    try:
        run = read_run(cell.directory / "run.trec")
        gold = {str(row["task_id"]): set(row["gold"]) for _, row in read_jsonl(cell.directory / "tasks.jsonl")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    tasks = [t for t in gold if gold[t] and t in run]
    if not tasks:
        return None
    orders = {t: ranking(run[t]) for t in tasks}
    if any(p not in tokens for order in orders.values() for p in order):
        return None
    depth = max(len(o) for o in orders.values())
    mean_tokens, mean_recall = [], []
    for k in range(1, depth + 1):
        mean_tokens.append(math.fsum(sum(tokens[p] for p in orders[t][:k]) for t in tasks) / len(tasks))
        mean_recall.append(math.fsum(len(gold[t] & set(orders[t][:k])) / len(gold[t]) for t in tasks) / len(tasks))
    return mean_tokens, mean_recall


def _frontiers(experiment: Experiment) -> dict[str, tuple[list[float], list[float]]]:
    """One frontier per ranking (series of cells without a selector class), by series label."""
    from primsel.library import Library
    from primsel.retrieval.selector import estimate_tokens

    library = Library.from_simulator()
    tokens = {p: estimate_tokens(library[p].text("full")) for p in library}
    cells = [c for c in experiment.cells if c.finished and not c.settings.get("selector")]
    labels = _series_labels(cells)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for c in cells:
        label = labels[_series_key(c)]
        if label not in out and (curve := ranking_frontier(c, tokens)) is not None:
            out[label] = curve
    return out


def frontier_table(frontiers: Mapping[str, tuple[list[float], list[float]]]) -> list[str]:
    """Markdown lines: per ranking, the smallest k whose mean recall@k reaches each of
    :data:`FRONTIER_LEVELS` and the mean documentation tokens of that top k."""
    if not frontiers:
        return []
    head = " | ".join(f"k for R {level:g} | tokens for R {level:g}" for level in FRONTIER_LEVELS)
    lines = ["Recall/tokens frontier of each ranking (top k, k = 1 .. all): the smallest k whose mean "
             "recall@k reaches the level, and the mean documentation tokens of that top k.", "",
             f"| ranking | {head} |", "|---|" + "--:|" * (2 * len(FRONTIER_LEVELS))]
    for label, (tokens, recall) in frontiers.items():
        row = [label]
        for level in FRONTIER_LEVELS:
            k = next((i for i, r in enumerate(recall) if r >= level - 1e-12), None)
            row += ["–", "–"] if k is None else [str(k + 1), f"{tokens[k]:.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def plot_frontier(experiment: Experiment, path: Path,
                  frontiers: Mapping[str, tuple[list[float], list[float]]] | None = None) -> bool:
    """Recall against documentation tokens: one line per ranking (its top k for every k) and one
    point per cell with a selector class (its selection's macro recall and tokens).

    Returns
    -------
    False (and no file) when there is nothing to draw.
    """
    frontiers = _frontiers(experiment) if frontiers is None else frontiers
    chosen = [c for c in experiment.cells if c.finished and c.settings.get("selector")
              and "docs_tokens" in c.report and "set_recall_macro" in c.report]
    if not frontiers and not chosen:
        return False
    plt = _pyplot()
    n = len(frontiers) + len(chosen)
    fig, ax = plt.subplots(figsize=(9, 4.8 + 0.2 * n))
    colours = _palette(n)
    right = 0.0
    for (label, (tokens, recall)), colour in zip(frontiers.items(), colours):
        ax.plot(tokens, recall, linewidth=1.2, label=label, color=colour)
        # the interesting part ends where the curve is near 1
        right = max(right, next((t for t, r in zip(tokens, recall) if r >= 0.995), tokens[-1]))
    labels = _series_labels(chosen)
    for c, colour in zip(chosen, colours[len(frontiers):]):
        ax.plot([c.report["docs_tokens"]], [c.report["set_recall_macro"]], marker="*", markersize=10,
                linestyle="none", color=colour, label=f"{labels[_series_key(c)]} k<={c.settings.get('k')}")
        right = max(right, c.report["docs_tokens"])
    ax.set_xlim(0, right * 1.05 if right else None)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("documentation tokens selected per task (mean)")
    ax.set_ylabel("recall (macro)")
    ax.set_title(_title(experiment, "recall/tokens frontier"), loc="left")
    ax.grid(True, alpha=0.3)
    # under the axes: the labels of selector cells are long
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, borderaxespad=0)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return True


def plot_metric_by_dataset(experiment: Experiment, path: Path, metric: str = "ndcg@10") -> bool:
    """Grouped bars of ``metric``: one group per dataset, one bar per retriever (the first
    finished cell of each retriever and dataset).

    Returns
    -------
    False (and no file) when no finished cell has the metric.
    """
    groups = dataset_groups(experiment)
    labels = list(dict.fromkeys(c.retriever for _, cells in groups for c in cells if c.finished))
    if not labels:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.8))
    width = 0.8 / len(labels)
    palette = _palette(len(labels))
    for i, (label, colour) in enumerate(zip(labels, palette)):
        values = []
        for _, cells in groups:
            found = next((c for c in cells if c.finished and c.retriever == label), None)
            values.append(float(found.report.get(metric, 0.0)) if found is not None else 0.0)
        ax.bar([g + (i - (len(labels) - 1) / 2) * width for g in range(len(groups))], values, width,
               label=label, color=colour)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([str(d.get("source", "?")) for d, _ in groups], fontsize=8)
    ax.set_ylim(0, 1.02)
    _finish(plt, fig, ax, path, f"{experiment.name}: {metric} by dataset", "dataset", metric)
    return True


def plot_success(experiment: Experiment, path: Path) -> bool:
    """Task success of every finished cell that ran a generator, one horizontal bar each (in
    grid order, the value written at its end).

    Returns
    -------
    False (and no file) when no finished cell ran a generator.
    """
    cells = [c for c in experiment.cells if c.finished and c.settings.get("generator") and "success" in c.report]
    if not cells:
        return False
    others = _other_columns(cells)
    labels = [" ".join([c.retriever, f"k={c.settings.get('k')}", *(["+closure"] if c.settings.get("closure") else []),
                        *(f"{k}={_short_value(get_dotted(c.settings, k))}" for k in others)]) for c in cells]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.32 * len(cells)))
    series = list(dict.fromkeys(_series_key(c) for c in cells))
    palette = dict(zip(series, _palette(len(series))))
    positions = list(range(len(cells)))[::-1]
    values = [float(c.report["success"]) for c in cells]
    ax.barh(positions, values, color=[palette[_series_key(c)] for c in cells], height=0.7)
    for y, value in zip(positions, values):
        ax.text(min(value, 1.0) + 0.01, y, f"{value:.3f}", va="center", fontsize=7)
    ax.set_yticks(positions, labels, fontsize=7)
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("task success (fraction of tasks whose program passed)")
    ax.set_title(_title(experiment, "task success"), loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return True


#: The recall-against-tokens plot takes a log scale when the largest mean is more than this
#: many times the smallest.
LOG_AXIS_RATIO = 4.0


def _title(experiment: Experiment, what: str) -> str:
    """``"<name> on <data> (<n> tasks): <what>"``."""
    return f"{experiment.name} on {_data_text(experiment.data)}: {what}"


def _finish(plt: Any, fig: Any, ax: Any, path: Path, title: str, xlabel: str, ylabel: str) -> None:
    """Label a plot, put the legend outside the axes on the right and save it as PNG with every
    artist inside the image (so a long legend or title is never cut off)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def _palette(n: int) -> list[Any]:
    """``n`` distinct colours: colorcet's Glasbey palette that extends matplotlib's tab10 with
    colours chosen to differ as much as possible from those before (Glasbey et al., Journal of
    Applied Statistics 2007), so no two series share a hue as tab20's light/dark pairs do."""
    import colorcet

    palette = colorcet.glasbey_category10
    return [palette[i % len(palette)] for i in range(max(n, 1))]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_report(directory: str | os.PathLike[str], export: str | os.PathLike[str] | None = None,
                 n_resamples: int = N_RESAMPLES, seed: int = 0) -> Path:
    """Write ``report.md`` and the plots of an experiment directory.

    Parameters
    ----------
    directory : ``<out>/<name>``.
    export : also copy the report to ``<export>/<name>.md`` and the plots beside it (aggregate
        only: no per-task rows), e.g. ``experiments/``.
    n_resamples, seed : of the randomisation test.

    Returns
    -------
    Path of ``report.md``.

    Raises
    ------
    ReportError : see :func:`load_experiment` and :func:`baseline_pairs`; or the report or the
        export directory cannot be written (the message names it).
    """
    from primsel.experiments.report_rounds import plot_success_by_round  # it uses this module's style

    experiment = load_experiment(directory)
    tests = significance(experiment, n_resamples=n_resamples, seed=seed)
    groups = dataset_groups(experiment)
    # the frontier counts documentation tokens of the assistant library: one dataset only
    frontiers = _frontiers(experiment) if len(groups) == 1 else {}
    images = []
    plots: list[tuple[str, str, Any, Experiment]] = []
    if len(groups) == 1:
        plots += [("recall_at_k", "recall@k", plot_recall_curves, experiment),
                  ("recall_vs_tokens", "recall against tokens", plot_recall_vs_tokens, experiment),
                  ("frontier", "recall/tokens frontier", lambda e, p: plot_frontier(e, p, frontiers), experiment),
                  ("success", "task success", plot_success, experiment),
                  ("success_by_round", "success by round", plot_success_by_round, experiment)]
    else:
        plots.append(("ndcg_by_dataset", "nDCG@10 by dataset", plot_metric_by_dataset, experiment))
        for data, cells in groups:
            source = str(data.get("source", "?"))
            sub = dataclasses.replace(experiment, data=data, cells=tuple(cells), datasets=())
            plots.append((f"{_slug(source)}_recall_at_k", f"recall@k, {source}", plot_recall_curves, sub))
    for suffix, title, plot, target in plots:
        file = f"{experiment.name}_{suffix}.png"
        try:
            if plot(target, experiment.directory / file):
                images.append((title, file))
        except OSError as exc:
            raise ReportError(f"cannot write {experiment.directory / file}: {exc.strerror or exc}") from None
    text = render_markdown(experiment, tests, images, n_resamples=n_resamples, seed=seed,
                           frontier=frontier_table(frontiers))
    target = experiment.directory / "report.md"
    try:
        write_atomic(target, text)
    except OSError as exc:
        raise ReportError(f"cannot write {target}: {exc.strerror or exc}") from None
    if export is not None:
        export = Path(export)
        try:
            export.mkdir(parents=True, exist_ok=True)
            write_atomic(export / f"{experiment.name}.md", text)
            for _, file in images:
                shutil.copyfile(experiment.directory / file, export / file)
        except OSError as exc:
            raise ReportError(f"cannot export to {export}: {exc.strerror or exc}") from None
    return target
