"""The experiment report rendered from synthetic cell directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primsel.cli import main as cli_main
from primsel.reporting import ReportError, baseline_pairs, load_experiment, significance, write_report

TASKS = ("t1", "t2", "t3")


def make_cell(root: Path, cid: str, retriever, k: int, closure: bool, recall_k: tuple[float, ...],
              report: dict | None = None, finished: bool = True, generator=None, passed=None) -> dict:
    """A cell directory with per-task recall@k values and a report.json (when finished)."""
    settings = {"retriever": retriever, "k": k, "closure": closure, "folds": 5, "seed": 0,
                "generator": generator, "dataset": "synthetic/3/abc"}
    d = root / cid
    d.mkdir(parents=True)
    rows = []
    for i, (t, r) in enumerate(zip(TASKS, recall_k)):
        row = {"task_id": t, "metrics": {f"recall@{k}": r}}
        if passed is not None:
            row["status"] = "pass" if passed[i] else "fail"
        rows.append(row)
    (d / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "config.json").write_text(json.dumps({"id": cid, "label": cid, "settings": settings}))
    if finished:
        full = {f"recall@{i}": min(1.0, i / 10) for i in range(1, 21)}
        full.update({"complete@10": 0.5, "complete@15": 0.6, "complete@20": 0.7, "ndcg@10": 0.55, "mrr": 0.6,
                     "set_precision_micro": 0.25, "set_recall_micro": 0.75, "set_f1_micro": 0.375,
                     "set_precision_macro": 0.2, "set_recall_macro": 0.7, "set_f1_macro": 0.3,
                     "docs_tokens": 123.45, "n_tasks": 3,
                     "learns": {"retriever": False, "selector": False, "generator": False}})
        full.update(report or {})
        (d / "report.json").write_text(json.dumps(full))
    return {"id": cid, "label": cid, "settings": settings}


def make_experiment(root: Path, cells: list[dict], baseline: str | None = "bm25", name: str = "demo") -> Path:
    exp = root / name
    (exp / "experiment.json").write_text(json.dumps({
        "name": name, "description": "A synthetic experiment.", "baseline": baseline,
        "data": {"source": "builtin", "n_tasks": 3, "fingerprint": "builtin/3/abc"}, "cells": cells}))
    return exp


@pytest.fixture()
def experiment(tmp_path) -> Path:
    root = tmp_path / "runs" / "demo"
    root.mkdir(parents=True)
    cells = [
        make_cell(root, "c_bm25_5", "bm25", 5, False, (0.0, 0.0, 0.0), {"recall@5": 0.125}),
        make_cell(root, "c_tfidf_5", "tfidf", 5, False, (0.75, 0.25, 0.25), {"recall@5": 0.4}),
        make_cell(root, "c_prior_10", "prior", 10, True, (1.0, 1.0, 1.0),
                  {"learns": {"retriever": True, "selector": False, "generator": False}}),  # prior learns
        make_cell(root, "c_tfidf_20", "tfidf", 20, False, (1.0, 1.0, 1.0), finished=False),
    ]
    return make_experiment(tmp_path / "runs", cells)


def test_each_cell_is_paired_with_the_baseline_with_the_same_other_settings(experiment):
    exp = load_experiment(experiment)
    assert baseline_pairs(exp) == {"c_bm25_5": "c_bm25_5", "c_tfidf_5": "c_bm25_5", "c_prior_10": None}


def test_significance_on_per_task_recall_at_k(experiment):
    tests = significance(load_experiment(experiment))
    rec = tests["c_tfidf_5"]["recall"]
    # differences (0.75, 0.25, 0.25): sign flips give |sums| 1.25, 0.75, 0.75, 0.25 (each twice):
    # only the two extreme patterns reach 1.25, so p = 2/8.
    assert rec["p_randomisation"] == 2 / 8
    assert rec["mean_diff"] == pytest.approx(1.25 / 3)
    assert tests["c_bm25_5"]["recall"] is None and tests["c_prior_10"]["recall"] is None


def test_report_table_rows_and_notes(experiment):
    path = write_report(experiment)
    text = path.read_text()
    assert path == experiment / "report.md"
    assert text.startswith("# demo\n\nA synthetic experiment.\n")
    assert "Data: the built-in tasks (3 tasks). Cells finished: 3 of 4." in text
    row = next(line for line in text.splitlines() if line.startswith("| tfidf | 5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:7] == ["tfidf", "5", "no", "0.400", "1.000", "1.000", "1.000"]
    assert cells[18] == "123.5"            # docs tokens, one decimal
    assert cells[19] == "–"                # ties@k: not in this report.json
    assert cells[20:23] == ["+0.417", "0.130", "0.250"]  # p values: see the two tests below
    assert cells[23] == "`c_tfidf_5`"
    assert "| bm25 | 5 | no |" in text and "baseline" in text
    assert "| prior | 10 | yes |" in text
    assert "c_tfidf_20" not in text          # not finished: no row
    assert "prior) are scored by 5-fold cross-validation" in text
    for png in ("demo_recall_at_k.png", "demo_recall_vs_tokens.png"):
        assert (experiment / png).stat().st_size > 0
        assert f"]({png})" in text


def test_paired_t_p_value_of_the_table(experiment):
    # d = (0.75, 0.25, 0.25): mean 5/12, sd sqrt(1/12), t = (5/12) / (sqrt(1/12) / sqrt(3)) = 2.5;
    # df = 2: p = 1 - t / sqrt(t^2 + 2) = 1 - 2.5 / sqrt(8.25) = 0.1296...  (printed 0.130)
    tests = significance(load_experiment(experiment))
    assert tests["c_tfidf_5"]["recall"]["p_t"] == pytest.approx(1 - 2.5 / 8.25 ** 0.5)


def test_export_writes_the_aggregate_report_and_plots(experiment, tmp_path):
    out = tmp_path / "experiments"
    write_report(experiment, export=out)
    assert sorted(p.name for p in out.iterdir()) == ["demo.md", "demo_recall_at_k.png", "demo_recall_vs_tokens.png"]
    text = (out / "demo.md").read_text()
    assert text == (experiment / "report.md").read_text()
    assert not any(t in text for t in TASKS)  # no per-task rows


def test_generator_cells_get_success_and_its_tests(tmp_path):
    root = tmp_path / "runs" / "gen"
    root.mkdir(parents=True)
    gen = {"type": "reference"}
    cells = [
        make_cell(root, "g_bm25", "bm25", 5, False, (0.5, 0.5, 0.5), {"success": 1 / 3}, generator=gen,
                  passed=(True, False, False)),
        make_cell(root, "g_tfidf", "tfidf", 5, False, (0.5, 0.5, 0.5), {"success": 1.0}, generator=gen,
                  passed=(True, True, True)),
    ]
    exp = make_experiment(tmp_path / "runs", cells, baseline=None, name="gen")
    text = write_report(exp).read_text()
    header = next(line for line in text.splitlines() if line.startswith("| configuration"))
    assert "success" in header and "p rand succ" in header
    row = next(line for line in text.splitlines() if line.startswith("| tfidf |"))
    cols = [c.strip() for c in row.strip("|").split("|")]
    # success 1.000; recall identical (p 1); success differences (0, 1, 1): the randomisation
    # test drops the zero, the flips of (1, 1) give |sum| 2, 0, 0, 2: p = 2/4; paired t: mean 2/3,
    # sd sqrt(1/3), t = (2/3) / (sqrt(1/3) / sqrt(3)) = 2, df 2: p = 1 - 2 / sqrt(6) = 0.184
    assert cols[20] == "1.000"
    assert cols[21:24] == ["+0.000", "1.000", "1.000"]
    assert cols[24:27] == ["+0.667", "0.184", "0.500"]


def test_varied_generator_parameters_and_threshold_get_columns(tmp_path):
    root = tmp_path / "runs" / "seeds"
    root.mkdir(parents=True)
    cells = []
    for retriever, extra in (("llm_selector", {"threshold": 0.5}), ("bm25", {})):
        for seed in (0, 1):
            cid = f"{retriever}_{seed}"
            cell = make_cell(root, cid, retriever, 5, False, (0.5, 0.5, 0.5), {"success": 0.5},
                             generator={"type": "openai", "model": "m", "seed": seed}, passed=(True, False, True))
            config = json.loads((root / cid / "config.json").read_text())
            config["settings"].update(extra)
            (root / cid / "config.json").write_text(json.dumps(config))
            cells.append({**cell, "settings": config["settings"]})
    text = write_report(make_experiment(tmp_path / "runs", cells, baseline="bm25", name="seeds")).read_text()
    lines = text.splitlines()
    header_line = next(line for line in lines if line.startswith("| configuration"))
    header = [c.strip() for c in header_line.strip("|").split("|")]
    # the generator's type and model are the same everywhere: only its seed gets a column
    assert header[:5] == ["configuration", "k", "closure", "generator.seed", "threshold"]
    rows = [[c.strip() for c in line.strip("|").split("|")][:5] for line in lines if line.startswith("| bm25 |")
            or line.startswith("| llm_selector |")]
    assert sorted(rows) == [["bm25", "5", "no", "0", "–"], ["bm25", "5", "no", "1", "–"],
                            ["llm_selector", "5", "no", "0", "0.5"], ["llm_selector", "5", "no", "1", "0.5"]]


def test_unknown_baseline_is_an_error(tmp_path):
    root = tmp_path / "runs" / "demo"
    root.mkdir(parents=True)
    cells = [make_cell(root, "a", "bm25", 5, False, (0.0, 0.0, 0.0))]
    exp = make_experiment(tmp_path / "runs", cells, baseline="dense")
    with pytest.raises(ReportError, match="baseline 'dense'"):
        write_report(exp)


def test_report_cli_exit_codes(experiment, tmp_path, capsys):
    assert cli_main(["report", str(experiment)]) == 0
    assert cli_main(["report", str(tmp_path / "nowhere")]) == 2
    assert "no such experiment directory" in capsys.readouterr().err


def _with_set_recall(root: Path, cid: str, values: tuple[float, ...]) -> None:
    """Adds per-task ``set_recall`` to a cell's tasks.jsonl."""
    path = root / cid / "tasks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row, value in zip(rows, values):
        row["metrics"]["set_recall"] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_pair_on_tests_each_cell_against_the_baseline_cell_of_the_same_seed(tmp_path):
    root = tmp_path / "runs" / "ps"
    root.mkdir(parents=True)
    cells = []
    selector = {"type": "llm_selector", "model": "m"}
    for retriever, k, extra in ((selector, 65, {"threshold": 0.5}), ("hybrid", 15, {})):
        for seed in (0, 1):
            cid = f"{'ps' if retriever is selector else 'hy'}_{seed}"
            passed = (True, False, False) if retriever is selector else (True, True, seed == 1)
            cell = make_cell(root, cid, retriever, k, False, (0.5, 0.5, 0.5), {"success": sum(passed) / 3},
                             generator={"type": "openai", "model": "m", "seed": seed}, passed=passed)
            config = json.loads((root / cid / "config.json").read_text())
            config["settings"].update(extra)
            (root / cid / "config.json").write_text(json.dumps(config))
            cells.append({**cell, "settings": config["settings"]})
            _with_set_recall(root, cid, (0.5, 0.5, 0.5) if retriever is selector else (1.0, 0.75, 0.75))
    exp_dir = make_experiment(tmp_path / "runs", cells, baseline="llm_selector", name="ps")
    manifest = json.loads((exp_dir / "experiment.json").read_text())
    # without pair_on nothing pairs: k and threshold differ
    assert baseline_pairs(load_experiment(exp_dir)) == {"ps_0": "ps_0", "ps_1": "ps_1", "hy_0": None, "hy_1": None}
    (exp_dir / "experiment.json").write_text(json.dumps({**manifest, "pair_on": ["generator.seed"]}))
    exp = load_experiment(exp_dir)
    assert baseline_pairs(exp) == {"ps_0": "ps_0", "ps_1": "ps_1", "hy_0": "ps_0", "hy_1": "ps_1"}
    tests = significance(exp)
    # k differs (15 vs 65): the selections' recall is compared; differences (0.5, 0.25, 0.25)
    assert tests["hy_0"]["recall_metric"] == "set_recall"
    assert tests["hy_0"]["recall"]["mean_diff"] == pytest.approx(1 / 3)
    assert tests["hy_0"]["recall"]["p_randomisation"] == 2 / 8
    # success differences: seed 0 (0, 1, 0), seed 1 (0, 1, 1)
    assert tests["hy_0"]["success"]["mean_diff"] == pytest.approx(1 / 3)
    assert tests["hy_1"]["success"]["mean_diff"] == pytest.approx(2 / 3)
    text = write_report(exp_dir).read_text()
    row = next(line for line in text.splitlines() if "`hy_1`" in line)
    cols = [c.strip() for c in row.strip("|").split("|")]
    assert "+0.333 (set)" in cols and "+0.667" in cols
    assert "with the same generator.seed" in text


def test_cells_of_other_data_are_counted_not_shown(experiment):
    # a cell computed on other data earlier (e.g. Asper-Bench), absent from experiment.json
    other = make_cell(experiment, "c_other", "bm25", 5, False, (1.0, 1.0, 1.0))
    config = json.loads((experiment / "c_other" / "config.json").read_text())
    config["data"] = {"source": "asper-bench", "n_tasks": 250, "fingerprint": "asper-bench/250/def"}
    (experiment / "c_other" / "config.json").write_text(json.dumps(config))
    text = write_report(experiment).read_text()
    assert "Data: the built-in tasks (3 tasks). Cells finished: 3 of 4." in text
    assert ("This report covers only the cells run on the built-in tasks (3 tasks). The directory also holds "
            "1 cells computed on Asper-Bench (250 tasks), not shown here") in text
    assert other["id"] not in text.split("This report covers")[1]
    (experiment / "c_other" / "config.json").unlink()
    assert "other data" not in write_report(experiment).read_text()


def test_unwritable_export_directory_is_a_report_error(experiment, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ReportError, match="cannot export to"):
        write_report(experiment, export=blocker / "sub")
    assert cli_main(["report", str(experiment), "--export", str(blocker / "sub")]) == 2
    assert f"cannot export to {blocker / 'sub'}" in capsys.readouterr().err


def test_frontier_of_a_ranking_and_selector_cells_as_points(tmp_path):
    from primsel.experiments.results import ranking_frontier
    from primsel.reporting import frontier_table, load_experiment
    from primsel.simulator.library import build_library
    from primsel.retrieval.selector import estimate_tokens

    library = build_library()
    a, b, c = "work_calendar.add_event", "work_calendar.Event", "time_utils.now_"
    tokens = {p: estimate_tokens(library[p].text("full")) for p in (a, b, c)}
    root = tmp_path / "runs" / "demo"
    root.mkdir(parents=True)
    # the mean tokens of the top k the run recorded: k=1: a (t1), c (t2); k=2: a, b and c, a; k=3: all
    recorded = {"tokens": [(tokens[a] + tokens[c]) / 2, (tokens[a] + tokens[b] + tokens[c] + tokens[a]) / 2,
                           sum(tokens.values())], "recall": [0.25, 1.0, 1.0]}
    cells = [make_cell(root, "c_rank", "bm25", 5, False, (1.0, 1.0, 1.0), {"frontier": recorded}),
             make_cell(root, "c_sel", "bm25", 5, False, (1.0, 1.0, 1.0), {"docs_tokens": 50.0})]
    cells[1]["settings"]["selector"] = {"type": "calibrated", "target_recall": 0.9}
    (root / "c_rank" / "run.trec").write_text(
        f"t1 Q0 {a} 1 3 x\nt1 Q0 {b} 2 2 x\nt1 Q0 {c} 3 1 x\n"
        f"t2 Q0 {c} 1 3 x\nt2 Q0 {a} 2 2 x\nt2 Q0 {b} 3 1 x\n")
    (root / "c_rank" / "tasks.jsonl").write_text(
        json.dumps({"task_id": "t1", "gold": [a, b]}) + "\n" + json.dumps({"task_id": "t2", "gold": [a]}) + "\n")
    exp = load_experiment(make_experiment(tmp_path / "runs", cells))
    curve = ranking_frontier(exp.cells[0])
    spent, recall = list(curve.tokens), curve.mean_recall
    # k=1: t1 has a (recall 1/2), t2 has c (0); k=2: t1 a, b (1), t2 c, a (1); k=3: both 1
    assert recall == pytest.approx([0.25, 1.0, 1.0])
    assert spent == pytest.approx([(tokens[a] + tokens[c]) / 2, (tokens[a] + tokens[b] + tokens[c] + tokens[a]) / 2,
                                   sum(tokens.values())])
    table = frontier_table({"bm25": (spent, recall)})
    assert f"| bm25 | 2 | {spent[1]:.0f} | 2 | {spent[1]:.0f} |" in table
    text = write_report(exp.directory).read_text()
    assert "![recall/tokens frontier](demo_frontier.png)" in text and (exp.directory / "demo_frontier.png").is_file()


def test_tie_aware_values_and_tie_counts_are_reported_beside_the_id_order_ones(tmp_path):
    root = tmp_path / "runs" / "ties"
    root.mkdir(parents=True)
    tied = {"tie_aware_recall@5": 0.25, "tie_aware_recall@15": 0.3125, "tie_aware_mrr": 0.5,
            "tie_aware_complete@20": 0.0625, "tied_tasks@5": 2.0, "tied_tasks@10": 3.0, "tied_tasks@15": 1.0,
            "tied_tasks@20": 0.0}
    cells = [make_cell(root, f"b{k}", "bm25", k, False, (0.5, 0.5, 0.5), tied) for k in (5, 10)]
    text = write_report(make_experiment(tmp_path / "runs", cells, name="ties")).read_text()
    lines = text.splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| bm25 |")]
    # the main table: ties@k of each cell's own k; then the table of ties: one row per ranking
    assert [row[19] for row in rows[:2]] == ["2", "3"]
    header = [c.strip() for c in lines[lines.index("## Ties") + 4].strip("|").split("|")]
    assert header[:5] == ["ranking", "R@5", "R@5 ta", "R@10", "R@10 ta"]
    assert header[-4:] == ["ties@5", "ties@10", "ties@15", "ties@20"]
    ties = dict(zip(header, rows[2]))
    assert len(rows) == 3 and ties["ranking"] == "bm25"
    assert (ties["R@5"], ties["R@5 ta"], ties["R@15"], ties["R@15 ta"]) == ("0.500", "0.250", "1.000", "0.312")
    assert (ties["MRR"], ties["MRR ta"], ties["C@20"], ties["C@20 ta"]) == ("0.600", "0.500", "0.700", "0.062")
    assert (ties["R@10 ta"], ties["nDCG@10 ta"]) == ("–", "–")
    assert [ties[f"ties@{k}"] for k in (5, 10, 15, 20)] == ["2", "3", "1", "0"]
    assert "(of 3) whose ranking has a tie across rank k" in text


# --- plots (the figures' style: tests/reporting/test_plots.py) -----------------------------------


def test_generator_experiments_get_a_task_success_plot(tmp_path, saved_figures):
    root = tmp_path / "runs" / "gen"
    root.mkdir(parents=True)
    gen = {"type": "reference"}
    cells = [make_cell(root, "g1", "bm25", 5, False, (0.5, 0.5, 0.5), {"success": 1 / 3}, generator=gen,
                       passed=(True, False, False)),
             make_cell(root, "g2", "tfidf", 5, False, (0.5, 0.5, 0.5), {"success": 1.0}, generator=gen,
                       passed=(True, True, True))]
    exp = make_experiment(tmp_path / "runs", cells, name="gen")
    text = write_report(exp).read_text()
    assert "![task success](gen_success.png)" in text and (exp / "gen_success.png").stat().st_size > 0
    (ax,) = saved_figures[-1].axes
    assert ax.get_title(loc="left") == "gen on the built-in tasks (3 tasks): task success"
    assert [round(bar.get_width(), 6) for bar in ax.patches] == [round(1 / 3, 6), 1.0]
    height = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert set(height) == {"bm25 k=5", "tfidf k=5"} and height["bm25 k=5"] > height["tfidf k=5"]  # grid order, top down


def test_the_table_of_ties_has_one_row_per_ranking_whatever_the_selector(tmp_path):
    """Two selectors on the same ranking share one row of the table of ties, labelled by the
    retriever alone (no ``selector=`` setting, set or unset)."""
    root = tmp_path / "runs" / "sel"
    root.mkdir(parents=True)
    tied = {"tie_aware_recall@5": 0.25, "tied_tasks@5": 2.0, "tied_tasks@10": 1.0, "tied_tasks@15": 0.0,
            "tied_tasks@20": 0.0}
    cells = [make_cell(root, "top", "bm25", 10, False, (0.5, 0.5, 0.5), tied),
             make_cell(root, "cal", "bm25", 65, False, (0.5, 0.5, 0.5), tied)]
    cells[1]["settings"]["selector"] = {"type": "calibrated", "target_recall": 0.9}
    (root / "cal" / "config.json").write_text(json.dumps({"id": "cal", "label": "cal", "settings": cells[1]["settings"]}))
    text = write_report(make_experiment(tmp_path / "runs", cells, name="sel")).read_text()
    lines = text.splitlines()
    start = lines.index("## Ties")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rows = [line for line in lines[start:end] if line.startswith("| ") and not line.startswith("| ranking")]
    assert len(rows) == 1
    cols = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cols[0] == "bm25" and cols[1:3] == ["0.500", "0.250"] and cols[-4:] == ["2", "1", "0", "0"]
    assert "selector=" not in text.split("## Ties", 1)[1]
