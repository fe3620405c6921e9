"""How the report names and formats: table cells that keep a Markdown table whole, numbers, and
texts matplotlib draws as written."""

from __future__ import annotations

import json
import re

import pytest

from primsel.reporting import write_report
from primsel.reporting.style import figure_text, num, p_value, table, table_cell, text_table


def cells_per_row(line: str) -> int:
    """The cells of a Markdown table row: its ``|`` not escaped by a backslash, less one."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_a_table_cell_escapes_pipes_and_joins_lines():
    assert table_cell("a|b") == "a\\|b"
    assert table_cell("two\nlines") == "two lines"
    assert table_cell("plain") == "plain"
    lines = table(["name", "value"], [["x|y", "1"], ["p\nq", "2"]])
    assert lines == ["| name | value |", "|---|--:|", "| x\\|y | 1 |", "| p q | 2 |"]
    assert {cells_per_row(line) for line in lines} == {2}


def test_numbers_and_p_values():
    assert (num(0.12345), num(0.12345, 1), num(None), num(float("nan")), num(3)) == ("0.123", "0.1", "–", "–", "3.000")
    assert (num(0.0123, 4, signed=True), num(-0.5, signed=True), num(True)) == ("+0.0123", "-0.500", "True")
    assert (p_value(None), p_value(0.0004), p_value(0.25)) == ("–", "<0.001", "0.250")


def test_a_text_table_pads_its_columns():
    assert text_table(["a", "bb", "c"], [["long", "1", "22"]], left=2) == ["a     bb   c", "long  1   22"]


def test_figure_text_escapes_dollars_and_keeps_a_leading_underscore():
    assert figure_text("cost $5 to $10") == "cost \\$5 to \\$10"
    assert figure_text("_private") == "\u200b_private"
    assert figure_text("plain_name") == "plain_name"


def test_pipes_and_line_breaks_in_dataset_names_keep_the_report_tables_whole(tmp_path):
    """Dataset sources named with a ``|`` and a line break head the summary tables of an experiment
    on several datasets; every row of every table keeps the number of cells of its header."""
    root = tmp_path / "runs" / "two"
    datasets = [{"source": "left|right", "n_tasks": 2, "fingerprint": "f1"},
                {"source": "two\nlines", "n_tasks": 2, "fingerprint": "f2"}]
    entries = []
    for i, (dataset, retriever) in enumerate((d, r) for d in datasets for r in ("bm25", "tfidf")):
        settings = {"retriever": retriever, "k": 5, "closure": False, "folds": 5, "seed": 0,
                    "dataset": dataset["fingerprint"]}
        directory = root / f"c{i}"
        directory.mkdir(parents=True)
        rows = [{"task_id": t, "gold": ["p"], "docs_tokens": 10.0, "metrics": {"recall@5": 0.5, "set_recall": 0.5}}
                for t in ("1", "2")]
        (directory / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        report = {"recall@5": 0.5, "ndcg@10": 0.25, "complete@5": 0.0, "docs_tokens": 10.0, "n_tasks": 2,
                  "learns": {"retriever": False, "selector": False, "generator": False}}
        (directory / "report.json").write_text(json.dumps(report))
        entries.append({"id": f"c{i}", "label": f"{retriever} k=5", "settings": settings})
    (root / "experiment.json").write_text(json.dumps({
        "name": "two", "baseline": "bm25", "cells": entries, "datasets": datasets,
        "data": {"source": "left|right+two\nlines", "n_tasks": 4, "fingerprint": "f1+f2"}}))
    text = write_report(root).read_text()
    assert "| retriever | left\\|right | two lines |" in text
    tables: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert len(tables) >= 5  # three summary tables, a table of cells per dataset
    for lines in tables:
        assert {cells_per_row(line) for line in lines} == {cells_per_row(lines[0])}, lines


@pytest.mark.parametrize("name", ["run $^$ again", "cost $\\frac$"])
def test_an_experiment_name_with_dollars_is_drawn_as_written(make_run, saved_figures, name):
    """Two ``$`` made matplotlib read a formula, and raise on a bad one after every cell was computed."""
    root = make_run([{"cid": "c1", "retriever": "bm25", "k": 15, "recall15": (0.2, 0.4, 0.6)},
                     {"cid": "c2", "retriever": "tfidf", "k": 15, "recall15": (0.1, 0.2, 0.3)}], name=name)
    text = write_report(root).read_text()
    assert text.startswith(f"# {name}\n")
    figure = saved_figures[0]  # recall@k
    title = figure.axes[0].get_title(loc="left")
    assert title.startswith(name.replace("$", "\\$") + " on ")


def test_a_label_starting_with_an_underscore_stays_in_the_legend(make_run, saved_figures):
    """matplotlib leaves a legend label starting with ``_`` out; a retriever named so is drawn and listed."""
    root = make_run([{"cid": "c1", "retriever": "bm25", "k": 15, "recall15": (0.2, 0.4, 0.6)},
                     {"cid": "c2", "retriever": "_mine:Ranker", "k": 15, "recall15": (0.3, 0.5, 0.7)}])
    write_report(root)
    figure = saved_figures[0]  # recall@k
    texts = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert sorted(t.lstrip("\u200b") for t in texts) == ["_mine:Ranker", "bm25"]
