"""The summary ``primsel run`` prints: the dataset named, at most 100 characters wide, each
ranking at the headline k = 15, ordered by R@15, and where the rankings left out are."""

from __future__ import annotations

from pathlib import Path

from primsel.experiments.records import ReportFile
from primsel.reporting import LoadedCell, LoadedExperiment
from primsel.reporting.summary import best_cells


def cell(retriever, k, recall15, f1, tokens=100.0):
    report = {"recall@10": recall15 - 0.1, "recall@15": recall15, "complete@20": 0.1, "mrr": 0.5,
              "set_f1_macro": f1, "docs_tokens": tokens}
    return LoadedCell(id=f"{k}-{f1}", label="x", settings={"retriever": retriever, "k": k, "closure": False},
                      directory=Path("."), finished=True, report=ReportFile.from_json(report))


def experiment(cells):
    return LoadedExperiment(name="e", directory=Path("runs/e"), cells=tuple(cells),
                      data={"source": "asper-bench", "n_tasks": 250})


def test_each_ranking_shows_its_k_15_cell_even_when_a_smaller_k_has_a_better_f1():
    lines = best_cells(experiment([cell("bm25", 10, 0.40, 0.30), cell("bm25", 15, 0.40, 0.25),
                                   cell("tfidf", 10, 0.50, 0.20), cell("tfidf", 15, 0.50, 0.18)]))
    assert lines[0] == "== Asper-Bench (250 tasks)"
    assert lines[1] == "best cell of each ranking (at k = 15 where run), by R@15:"
    rows = [line.split() for line in lines[3:]]
    # ordered by R@15 (tfidf 0.5 before bm25 0.4), not by set F1 (bm25 0.25 > tfidf 0.18)
    assert [(r[0], r[1], r[-2]) for r in rows] == [("tfidf", "15", "0.180"), ("bm25", "15", "0.250")]


def test_long_labels_are_cut_to_keep_lines_within_100_characters():
    long_spec = {"type": "hybrid", "members": ["classifier", "finetuned", "bm25", "dense"] * 4,
                 "weights": [1.0, 1.0, 0.15, 0.15] * 4, "method": "wsum"}
    lines = best_cells(experiment([cell(long_spec, 15, 0.6, 0.3), cell("bm25", 15, 0.4, 0.2)]))
    assert max(len(line) for line in lines) <= 100
    from primsel import spec as specs

    full, label = specs.label(long_spec), lines[3].split("  ")[0]
    # cut in the middle: the head and the end (where variants of one ranking differ) stay
    assert "…" in label and full.startswith(label.split("…")[0]) and full.endswith(label.split("…")[1])
    assert len(label.split("…")[1]) >= 15
    assert lines[4].split()[0] == "bm25"


def test_rankings_beyond_the_limit_say_where_they_all_are():
    cells = [cell(f"r{i}", 15, 0.1 * i, 0.1) for i in range(1, 6)]
    lines = best_cells(experiment(cells), limit=3)
    assert [line.split()[0] for line in lines[3:6]] == ["r5", "r4", "r3"]
    assert lines[-1] == f"... 2 more rankings (all in the report: primsel report {Path('runs/e')})"
