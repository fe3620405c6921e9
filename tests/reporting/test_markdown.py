"""The report's text: the answer first, then the figures, then the full tables."""

from __future__ import annotations

import json

from primsel.reporting import write_report
from primsel.retrieval import DEFAULT_RETRIEVER


def rows_of(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table under ``heading``."""
    lines = text.splitlines()
    start = lines.index(heading)
    table = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|--"):
            continue  # the alignment row
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip("|").split("|")])
        elif table:
            break
    return table


def test_the_report_leads_with_the_leaderboard_then_figures_then_every_cell(make_run):
    run = make_run([
        {"cid": "bm25_5", "retriever": "bm25", "k": 5, "recall15": (0.0, 0.5, 0.5)},
        {"cid": "def_5", "retriever": DEFAULT_RETRIEVER, "k": 5, "recall15": (1.0, 1.0, 0.5)},
        {"cid": "all", "retriever": "all", "k": 65, "recall15": (0.5, 0.5, 0.5), "report": {"docs_tokens": 9000.0}},
    ])
    text = write_report(run).read_text()
    order = [text.index(h) for h in ("## Leaderboard", "## Figures", "## All cells")]
    assert order == sorted(order)
    header, *rows = rows_of(text, "## Leaderboard")
    assert header[:5] == ["#", "configuration", "k", "closure", "R@15 [95% CI]"]
    board = {row[1]: dict(zip(header, row)) for row in rows}
    default = board[f"**{DEFAULT_RETRIEVER['type']}(classifier+finetuned+bm25+dense, method=wsum, "
                    "weights=1+1+0.15+0.15)** (recommended default)"]
    # per-task recall@15 (1, 1, 0.5) against bm25's (0, 0.5, 0.5): mean difference 0.5; the
    # bootstrap means of (1, 1, 0.5) run from 0.5 to 1 (all three 0.5: probability 1/27 > 2.5%)
    assert default["#"] == "1" and default["ΔR@15"] == "+0.500"
    assert default["R@15 [95% CI]"] == "0.833 [0.500, 1.000]"
    assert board["bm25 (baseline)"]["ΔR@15"] == "baseline"
    # the whole library ranks in primitive-id order: no ranking metric, no test, last
    assert board["all (reference)"]["R@15 [95% CI]"] == "–" and board["all (reference)"]["tokens"] == "9000.0"
    assert rows[-1][1] == "all (reference)"
    assert "Highest recall@15: hybrid(" in text and "+0.500 over the baseline bm25 (0.333)" in text


def test_metrics_a_cell_asks_for_get_a_column_of_the_full_table(make_run):
    run = make_run([{"cid": "b", "retriever": "bm25", "k": 5, "recall15": (0.5, 0.5, 0.5),
                     "report": {"precision@5": 0.125}}])
    config = json.loads((run / "experiment.json").read_text())
    config["cells"][0]["settings"]["metrics"] = ["precision@5"]
    (run / "experiment.json").write_text(json.dumps(config))
    header, row = rows_of(write_report(run).read_text(), "## All cells")
    assert dict(zip(header, row))["precision@5"] == "0.125"


def test_the_aspera_table_has_a_row_per_cell_with_aspera_figures(tmp_path):
    from primsel.eval.aspera import FIGURES, aspera_figures
    from primsel.experiments.records import AsperaFigures, GenerationFigures, ReportFile
    from primsel.experiments.results import LoadedCell
    from primsel.reporting.markdown import aspera_table
    from tests.eval.test_aspera_figures import ROWS

    with_figures = ReportFile(generation=GenerationFigures(success=0.5),
                              aspera=AsperaFigures("aspera", aspera_figures(ROWS)))
    cells = [LoadedCell("c1", "bm25 k=5", {}, tmp_path, True, with_figures),
             LoadedCell("c2", "x", {}, tmp_path, True, ReportFile(generation=GenerationFigures(success=1.0)))]
    lines = aspera_table(cells)
    assert lines[0] == "## ASPERA's figures"
    header = next(line for line in lines if line.startswith("| configuration"))
    assert header.count("|") == len(FIGURES) + 3
    (body,) = [line for line in lines if line.startswith("| bm25")]
    assert body == ("| bm25 k=5 | aspera | 24.90 | 0.704 | 0.762 | 20.00 | 33.33 | 25.00 | 16.67 | 50.00 | 33.33 "
                    "| 37.50 |")
    assert aspera_table(cells[1:]) == []
