"""``primsel report DIR --format csv|json|latex``: every finished cell with all its report values."""

from __future__ import annotations

import csv
import io
import json

import pytest

from primsel.cli import main
from primsel.reporting.export import latex_escape, latex_number


def test_csv_and_json_hold_every_cell_and_value_of_a_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\n[grid]\nretriever = ["bm25", "prior"]\nk = [5, 15]\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    exp = tmp_path / "runs" / "small"
    assert main(["report", str(exp), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert main(["report", str(exp), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert not (exp / "report.md").exists()                  # printed, not written
    cells = json.loads((exp / "experiment.json").read_text())["cells"]
    assert [r["id"] for r in rows] == [r["id"] for r in records] == [c["id"] for c in cells]
    for row, record, c in zip(rows, records, cells):
        report = json.loads((exp / c["id"] / "report.json").read_text())
        assert (row["retriever"], row["k"], row["closure"], row["dataset"]) == (
            c["settings"]["retriever"], str(c["settings"]["k"]), "false", "builtin/32")
        assert float(row["recall@15"]) == report["recall@15"]  # full precision: exact
        assert record["recall@15"] == report["recall@15"] and record["set_f1_macro"] == report["set_f1_macro"]
    assert list(rows[0])[:6] == ["id", "label", "retriever", "k", "closure", "dataset"]


def write_experiment(root, cells):
    """An experiment directory by hand: ``cells`` = [(id, label, settings, report or None)]."""
    root.mkdir(parents=True)
    entries = [{"id": cid, "label": label, "settings": settings} for cid, label, settings, _ in cells]
    (root / "experiment.json").write_text(json.dumps({"name": root.name, "cells": entries,
                                                      "data": {"source": "builtin", "n_tasks": 32}}))
    for cid, _, settings, report in cells:
        (root / cid).mkdir()
        (root / cid / "config.json").write_text(json.dumps({"id": cid, "settings": settings}))
        if report is not None:
            (root / cid / "report.json").write_text(json.dumps(report))
    return root


def test_latex_rounds_like_the_report_and_escapes_special_characters(tmp_path, capsys):
    exp = write_experiment(tmp_path / "small", [
        ("c0", "bm25 & 5% #1", {"retriever": "bm25", "k": 15, "closure": False},
         {"recall@15": 0.52345, "docs_tokens": 2948.25, "tied_tasks@15": 3, "set_f1_macro": 0.35349}),
        ("c1", r"x_{a}~b^c \ <d>", {"retriever": "tfidf", "k": 5, "closure": True},
         {"recall@15": float("nan"), "docs_tokens": 2817.0}),
        ("c2", "not finished", {"retriever": "dense", "k": 5}, None),
    ])
    assert main(["report", str(exp), "--format", "latex"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        r"\begin{tabular}{lllrllrrrr}",
        r"\hline",
        r"id & label & retriever & k & closure & dataset & docs\_tokens & recall@15 & set\_f1\_macro & tied\_tasks@15 \\",
        r"\hline",
        r"c0 & bm25 \& 5\% \#1 & bm25 & 15 & no & builtin/32 & 2948.2 & 0.523 & 0.353 & 3 \\",
        r"c1 & x\_\{a\}\textasciitilde{}b\textasciicircum{}c \textbackslash{} \textless{}d\textgreater{} & tfidf & 5 "
        r"& yes & builtin/32 & 2817.0 & -- & -- & -- \\",
        r"\hline",
        r"\end{tabular}",
    ]
    assert not (exp / "report.md").exists()


@pytest.mark.parametrize(("text", "escaped"), [
    ("a_b", r"a\_b"), ("50%", r"50\%"), ("R&D", r"R\&D"), ("#1", r"\#1"), ("$5", r"\$5"),
    ("{x}", r"\{x\}"), ("~", r"\textasciitilde{}"), ("^", r"\textasciicircum{}"), ("\\", r"\textbackslash{}"),
    ("\\_", r"\textbackslash{}\_"), ("a–b", "a--b"), ("plain text", "plain text"),
])
def test_latex_escape(text, escaped):
    assert latex_escape(text) == escaped


@pytest.mark.parametrize(("key", "value", "text"), [
    ("recall@15", 0.8975, "0.897"), ("recall@15", 0.89751, "0.898"), ("docs_tokens", 3008.44, "3008.4"),
    ("tied_tasks@15", 33, "33"), ("closure", True, "yes"), ("closure", False, "no"), ("mrr", None, "--"),
    ("mrr", float("nan"), "--"), ("embedding", {"b": 1, "a": 2}, '{"a": 2, "b": 1}'), ("label", "bm25", "bm25"),
])
def test_latex_numbers_are_written_like_the_markdown_report(key, value, text):
    assert latex_number(key, value) == text
