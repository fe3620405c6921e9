"""Labels of components: what tables, figures and folders show, never what is computed."""

from __future__ import annotations

import json

import pytest

from primsel import registry
from primsel import spec as specs
from primsel.cli import main as cli_main
from primsel.experiments.config import ConfigError, cell_id, expand, parse_config
from primsel.experiments.labels import folder_name, generator_label

HYBRID = {"type": "hybrid", "members": ["bm25", "prior"]}


@pytest.fixture(autouse=True)
def _builtin_tasks(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


def test_a_label_names_the_component_and_leaves_the_cell_id_alone():
    plain = expand(parse_config({"retriever": HYBRID, "k": 15}))[0]
    named = expand(parse_config({"retriever": {**HYBRID, "label": "Fused BM25+prior"}, "k": 15}))[0]
    assert plain.label == "hybrid(bm25+prior) k=15" and named.label == "Fused BM25+prior k=15"
    assert named.id == plain.id == cell_id(plain.settings)
    assert plain.directory_name == plain.id  # no label: the bare id, as before
    assert named.directory_name == f"fused-bm25-prior-k-15-{plain.id}"
    assert named.settings.to_json()["retriever"]["label"] == "Fused BM25+prior"  # config.json has it


def test_labels_of_nested_members_generators_and_selectors():
    member = {"type": "bm25", "k1": 1.2, "label": "BM25 tuned"}
    assert specs.label({"type": "hybrid", "members": [member, "prior"]}) == "hybrid(BM25 tuned+prior)"
    assert generator_label({"type": "openai", "model": "gpt-4o", "label": "GPT"}) == "GPT"
    assert generator_label({"type": "openai", "model": "gpt-4o"}) == "openai:gpt-4o"
    settings = {"retriever": "bm25", "selector": {"type": "topk", "label": "mine"}}
    assert folder_name("abc", "bm25 k=10 selector=mine", settings) == "bm25-k-10-selector-mine-abc"
    assert folder_name("abc", "bm25 k=10", {"retriever": "bm25"}) == "abc"


def test_a_label_is_not_a_constructor_parameter_and_must_be_text():
    retriever = registry.build({"type": "bm25", "label": "B"})
    assert type(retriever).__name__ == "BM25Retriever"
    with pytest.raises(ConfigError, match="retriever.label: must be a non-empty string, got integer 3"):
        parse_config({"retriever": {"type": "bm25", "label": 3}})
    # a label that happens to be a registered name is not taken for a nested specification
    assert specs.names({"type": "hybrid", "members": ["bm25"], "label": "dense"}) == ["hybrid", "bm25"]


def test_slug():
    assert specs.slug("Keyword v2 k=15") == "keyword-v2-k-15"
    assert specs.slug("../..") == ""
    assert len(specs.slug("x" * 100)) == 40


def test_labelled_cells_in_folders_tables_summary_and_reuse(tmp_path, capsys):
    cfg = tmp_path / "lab.toml"
    toml = (
        'name = "lab"\nk = 15\n[grid]\nretriever = ["bm25", {type = "hybrid", members = '
        '["bm25", "prior"], label = "LABEL"}]\n'
    )
    out = tmp_path / "runs"
    args = ["run", str(cfg), "--out", str(out), "--quiet"]
    # first without the label: the folder is the bare id (a run of an older version)
    cfg.write_text(toml.replace(', label = "LABEL"', ""))
    assert cli_main(args) == 0
    cells = json.loads((out / "lab" / "experiment.json").read_text())["cells"]
    hybrid_id = cells[1]["id"]
    assert (out / "lab" / hybrid_id / "report.json").is_file() and "folder" not in cells[1]
    capsys.readouterr()
    # labelled: the same cell (same id), reused in its old folder; tables and summary say the label
    cfg.write_text(toml.replace("LABEL", "Fused"))
    assert cli_main(args) == 0
    captured = capsys.readouterr()
    assert "0 cells computed, 2 already finished" in captured.err
    assert "\nFused " in captured.out and "hybrid(" not in captured.out
    report = (out / "lab" / "report.md").read_text()
    assert "| Fused | 15 |" in report and "hybrid(bm25+prior)" not in report
    # a new output folder: the labelled cell's folder is <label-slug>-<id>
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "new"), "--quiet"]) == 0
    manifest = json.loads((tmp_path / "new" / "lab" / "experiment.json").read_text())
    assert manifest["cells"][1]["folder"] == f"fused-k-15-{hybrid_id}"
    assert (tmp_path / "new" / "lab" / f"fused-k-15-{hybrid_id}" / "report.json").is_file()
    assert (tmp_path / "new" / "lab" / manifest["cells"][0]["id"] / "report.json").is_file()
    # relabelled again: still the same cell, reused in the folder it has
    capsys.readouterr()
    cfg.write_text(toml.replace("LABEL", "Renamed"))
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "new"), "--quiet", "--no-report"]) == 0
    assert "0 cells computed, 2 already finished" in capsys.readouterr().err


def test_the_default_retriever_under_a_label_is_still_the_default(tmp_path):
    from primsel.experiments.results import LoadedCell
    from primsel.reporting.style import DEFAULT_RETRIEVER, is_default

    default = specs.canonical(DEFAULT_RETRIEVER)
    named = {**(default if isinstance(default, dict) else {"type": default}), "label": "ours"}
    cell = LoadedCell(id="a", label="ours k=15", settings={"retriever": named}, directory=tmp_path)
    assert cell.retriever == "ours" and is_default(cell)
    other = LoadedCell(id="b", label="bm25", settings={"retriever": "bm25"}, directory=tmp_path)
    assert not is_default(other)
