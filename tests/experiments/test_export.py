"""``primsel report DIR --format csv|json``: every finished cell with all its report values."""

from __future__ import annotations

import csv
import io
import json

from primsel.cli import main


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
