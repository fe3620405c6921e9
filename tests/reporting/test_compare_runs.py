"""``primsel compare``: cells matched by label, paired tests by task id, the tasks that flip."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from primsel.cli import main
from primsel.reporting.compare_runs import compare_runs


def write_run(root, cells):
    """An experiment directory: ``cells`` = {label: (k, {task id: recall@k})}."""
    entries = []
    for i, (label, (k, values)) in enumerate(cells.items()):
        cid = f"c{i}"
        entries.append({"id": cid, "label": label, "settings": {"retriever": label.split()[0], "k": k}})
        (root / cid).mkdir(parents=True)
        (root / cid / "config.json").write_text(json.dumps({"id": cid, **entries[-1]}))
        (root / cid / "report.json").write_text(json.dumps({f"recall@{k}": sum(values.values()) / len(values)}))
        (root / cid / "tasks.jsonl").write_text("".join(
            json.dumps({"task_id": t, "metrics": {f"recall@{k}": v, "mrr": v / 2}}) + "\n" for t, v in values.items()))
    (root / "experiment.json").write_text(json.dumps({"name": root.name, "cells": entries}))
    return root


@pytest.fixture
def runs(tmp_path):
    a = write_run(tmp_path / "a", {"bm25 k=15": (15, {"1": 1.0, "2": 0.5, "3": 0.0}),
                                   "dense k=15": (15, {"1": 0.5, "2": 0.5, "3": 0.5}),
                                   "tfidf k=10": (10, {"1": 1.0, "2": 1.0, "3": 1.0})})
    b = write_run(tmp_path / "b", {"bm25 k=15": (15, {"3": 0.0, "2": 1.0, "1": 1.0}),
                                   "dense k=15": (15, {"1": 0.5, "2": 0.5 + 5.6e-17, "3": 0.5}),
                                   "prior k=10": (10, {"1": 0.0, "2": 0.0, "3": 0.0})})
    return a, b


def test_pairs_by_label_with_hand_computed_tests_and_flips(runs):
    a, b = runs
    result = compare_runs(a, b).to_json()
    bm25, dense = result["pairs"]
    # d = B - A = [0, 0.5, 0]: mean 1/6, sd sqrt(1/12), t = 1 with 2 degrees of freedom:
    # p = 1 - t / sqrt(t^2 + 2); randomisation: one non-zero difference, both signs as extreme
    assert (bm25["cell"], bm25["metric"], bm25["tasks"]) == ("bm25 k=15", "recall@15", 3)
    assert (bm25["mean_a"], bm25["mean_b"]) == (0.5, pytest.approx(2 / 3))
    assert bm25["diff"] == pytest.approx(1 / 6)
    assert bm25["p_t"] == pytest.approx(1 - 1 / math.sqrt(3))
    assert bm25["p_randomisation"] == 1.0
    assert (bm25["up"], bm25["down"], bm25["up_tasks"], bm25["down_tasks"]) == (1, 0, ["2"], [])
    # float noise on one task is no flip and no difference for either test
    assert (dense["up"], dense["down"], dense["p_t"], dense["p_randomisation"]) == (0, 0, 1.0, 1.0)
    assert result["only_a"] == ["tfidf k=10"] and result["only_b"] == ["prior k=10"]


def test_another_metric_and_the_csv_and_json_formats(runs, capsys):
    a, b = runs
    assert main(["compare", str(a), str(b), "--metric", "mrr", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["cell"], r["metric"], r["up"], r["down"]) for r in rows] == [
        ("bm25 k=15", "mrr", "1", "0"), ("dense k=15", "mrr", "0", "0")]
    assert float(rows[0]["diff"]) == pytest.approx(1 / 12)
    out = a.parent / "cmp.json"
    assert main(["compare", str(a), str(b), "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["pairs"][0]["up_tasks"] == ["2"]


def test_the_text_table_names_both_runs_and_the_unmatched_cells(runs, capsys):
    a, b = runs
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == f"A: {a}" and text[1] == f"B: {b}"
    row = next(line.split() for line in text if line.startswith("bm25"))
    assert row[2:] == ["recall@15", "3", "0.5000", "0.6667", "+0.1667", "0.4226", "1.0000", "1", "0"]
    assert text[-2:] == ["only in A (1): tfidf k=10", "only in B (1): prior k=10"]


def test_two_cell_directories_are_compared_whatever_their_labels(runs, capsys):
    a, b = runs
    assert main(["compare", str(a / "c0"), str(b / "c1"), "--format", "json"]) == 0
    (pair,) = json.loads(capsys.readouterr().out)["pairs"]
    assert (pair["cell"], pair["mean_a"], pair["mean_b"], pair["down_tasks"]) == ("bm25 k=15", 0.5, 0.5, ["1"])


def test_runs_that_cannot_be_compared_exit_2(runs, tmp_path, capsys):
    a, b = runs
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert "no such experiment directory" in capsys.readouterr().err
    other = write_run(tmp_path / "other", {"knn k=5": (5, {"1": 1.0})})
    assert main(["compare", str(a), str(other)]) == 2
    assert "nothing to compare" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--metric", "nope"]) == 2
    assert "no per-task 'nope'" in capsys.readouterr().err


def test_a_real_run_compared_with_itself_changes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\n[grid]\nretriever = ["bm25", "prior"]\nk = [5, 15]\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    result = compare_runs(tmp_path / "runs" / "small", tmp_path / "runs" / "small").to_json()
    assert len(result["pairs"]) == 4 and {p["tasks"] for p in result["pairs"]} == {32}
    assert all(p["diff"] == 0 and p["up"] == p["down"] == 0 and p["p_t"] == 1.0 for p in result["pairs"])


def test_success_of_runs_without_a_generator_is_an_error_not_zero_against_zero(runs, capsys):
    """The guide: exit 2 when a matched cell lacks the metric; retrieval-only rows have no success."""
    a, b = runs
    assert main(["compare", str(a), str(b), "--metric", "success"]) == 2
    err = capsys.readouterr().err
    assert "no task success to compare (the cell ran no generator)" in err and "bm25 k=15" in err


def write_generation_run(root, statuses):
    """An experiment directory of one generator cell ``bm25 k=5`` whose tasks end with ``statuses``
    ({task id: status}); ``complete`` false when one is ``llm_error``."""
    settings = {"retriever": "bm25", "k": 5, "generator": {"type": "openai", "model": "m"}}
    (root / "c0").mkdir(parents=True)
    incomplete = sum(s == "llm_error" for s in statuses.values())
    (root / "c0" / "report.json").write_text(json.dumps({
        "recall@5": 1.0, "success": sum(s == "pass" for s in statuses.values()) / len(statuses),
        "complete": not incomplete, "incomplete_tasks": float(incomplete)}))
    (root / "c0" / "tasks.jsonl").write_text("".join(
        json.dumps({"task_id": t, "metrics": {"recall@5": 1.0}, "status": s, "program_status":
                    "llm_error" if s == "llm_error" else "ok"}) + "\n" for t, s in statuses.items()))
    (root / "experiment.json").write_text(json.dumps({"name": root.name, "cells": [
        {"id": "c0", "label": "bm25 k=5", "settings": settings}]}))
    return root


def test_tasks_whose_llm_request_failed_are_left_out_of_success_and_said(tmp_path, capsys):
    """Task 3 of A did not get an answer (an incomplete cell): its success is unknown, not a failure."""
    a = write_generation_run(tmp_path / "a", {"1": "pass", "2": "fail", "3": "llm_error", "4": "fail"})
    b = write_generation_run(tmp_path / "b", {"1": "pass", "2": "pass", "3": "fail", "4": "fail"})
    (pair,) = compare_runs(a, b, "success").pairs
    assert (pair.tasks, pair.mean_a, pair.mean_b, pair.up_tasks, pair.down_tasks) == (3, 1 / 3, 2 / 3, ("2",), ())
    assert (pair.llm_errors_a, pair.llm_errors_b) == (1, 0)
    assert main(["compare", str(a), str(b), "--metric", "success"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("A: bm25 k=5: 1 tasks left out: their LLM request failed (llm_error; the cell is "
                       "incomplete, and the next primsel run computes them again)")
    assert main(["compare", str(a), str(b), "--metric", "success", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["pairs"][0]["llm_errors_a"] == 1
    assert "primsel compare: warning: A: bm25 k=5: 1 tasks left out" in captured.err
