"""Retrieval commands, grids and reports on retrieval-only data; BM25 on the shared tool corpora
against an independent rank-bm25 computation; the ray backend against the serial one."""

from __future__ import annotations

import importlib.util
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from primsel.cli import main
from primsel.datasets import load_retrieval_data
from primsel.experiments.config import load_config
from primsel.experiments.runner import run_experiment
from primsel.retrieval.base import code_tokens, english_stopwords

from tests.datasets.test_retrieval_only import shared, write_beir

# report.json keys that are wall times (or say whether a cache answered): they differ between
# any two runs, serial or not
TIMING_KEYS = ("seconds", "retrieval_seconds", "retrieval_cached")


def _toy(tmp_path: Path, name: str = "toy") -> Path:
    return write_beir(tmp_path / name)


def test_retrieve_on_a_beir_directory_prints_hand_computed_metrics(tmp_path, capsys):
    assert main(["retrieve", "--retriever", "bm25", "--data", str(_toy(tmp_path)), "--k", "1",
                 "--out", str(tmp_path / "run.trec")]) == 0
    out = capsys.readouterr()
    assert "2 tasks (beir-toy, 3 documents)" in out.err
    metrics = dict(line.split() for line in out.out.splitlines()[1:] if len(line.split()) == 2)
    # q1 "will it rain tomorrow" shares "rain" only with d1; q2 "euros to dollars" shares nothing
    # (every document scores 0, ranked by id: "3", "d1", "d2"): gold d2 is third
    assert float(metrics["recall@5"]) == 1.0
    assert float(metrics["mrr"]) == pytest.approx((1 + 1 / 3) / 2, abs=1e-4)
    assert float(metrics["set_recall_macro"]) == 0.5
    lines = (tmp_path / "run.trec").read_text().splitlines()
    # the tie of "3" and "d2" at 0 is written one float apart, so no tool ranks it otherwise
    assert lines[:3] == [
        "q1 Q0 d1 1 " + lines[0].split()[4] + " bm25", "q1 Q0 3 2 0 bm25", "q1 Q0 d2 3 -5e-324 bm25",
    ]


def test_retrieve_over_a_folder_of_several_datasets_needs_one_for_out(tmp_path, capsys):
    assert main(["retrieve", "--retriever", "bm25", "--data", str(shared("metatool")), "--out",
                 str(tmp_path / "x.trec")]) == 2
    assert "holds 2 datasets (metatool-single, metatool-multi)" in capsys.readouterr().err


def _grid(tmp_path: Path, data: list[Path], retrievers: str = '["bm25", "tfidf", "prior", "knn"]') -> Path:
    cfg = tmp_path / "exp.toml"
    cfg.write_text(f"name = \"exp\"\ndata = {json.dumps([str(d) for d in data])}\nk = 2\nfolds = 2\n"
                   f"baseline = \"bm25\"\n[grid]\nretriever = {retrievers}\n", encoding="utf-8")
    return cfg


def test_a_grid_over_two_datasets_reports_each(tmp_path):
    first = _toy(tmp_path, "one")
    second = write_beir(tmp_path / "two", queries=[{"_id": "a", "text": "stock prices"}, {"_id": "b", "text": "rain"},
                                                   {"_id": "c", "text": "currency"}],
                        qrels=["a\t3\t1", "b\td1\t1", "c\td2\t1"])
    assert main(["run", str(_grid(tmp_path, [first, second])), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    manifest = json.loads((tmp_path / "runs" / "exp" / "experiment.json").read_text())
    assert [d["source"] for d in manifest["datasets"]] == ["beir-one", "beir-two"]
    assert len(manifest["cells"]) == 8
    report = (tmp_path / "runs" / "exp" / "report.md").read_text()
    assert "## beir-one (2 tasks, 3 documents)" in report and "## beir-two (3 tasks, 3 documents)" in report
    assert "**nDCG@10** by dataset" in report
    assert (tmp_path / "runs" / "exp" / "exp_beir-two_recall_at_k.png").is_file()
    assert (tmp_path / "runs" / "exp" / "exp_ndcg_by_dataset.png").is_file()
    cell = next(c for c in manifest["cells"] if c["label"].startswith("bm25") and
                c["settings"]["dataset"] == manifest["datasets"][1]["fingerprint"])
    r = json.loads((tmp_path / "runs" / "exp" / cell["id"] / "report.json").read_text())
    # "stock prices" -> 3 (Stocks), "rain" -> d1, "currency" matches no document (d2 says
    # "currencies"): ranked by id, d2 is third
    assert r["recall@1"] == pytest.approx(2 / 3) and r["mrr"] == pytest.approx((1 + 1 + 1 / 3) / 3)


def _independent_bm25(name: str, folder: Path, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """recall@5/10, nDCG@10 and complete@5 of BM25 computed here: rank-bm25's BM25Okapi with
    Lucene's idf over the same documents and tokens, ranked by score then id."""
    from rank_bm25 import BM25Okapi

    (data,) = [d for d in load_retrieval_data(folder) if d.name == name]
    stop = english_stopwords()
    ids = [d.id for d in data.documents]
    docs = [code_tokens(d.text("full"), stop) or ["\0"] for d in data.documents]
    index = BM25Okapi(docs, k1=k1, b=b)
    df = Counter(w for d in docs for w in set(d))
    index.idf = {w: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for w, n in df.items()}
    totals = {"recall@5": 0.0, "recall@10": 0.0, "recall@20": 0.0, "ndcg@10": 0.0, "complete@5": 0.0,
              "complete@10": 0.0}
    for task in data.tasks:
        scores = index.get_scores(code_tokens(task.query, stop))
        ranked = [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))]
        gold = task.gold
        for k in (5, 10, 20):
            totals[f"recall@{k}"] += len(gold & set(ranked[:k])) / len(gold)
        for k in (5, 10):
            totals[f"complete@{k}"] += float(gold <= set(ranked[:k]))
        dcg = sum(1 / math.log2(i + 2) for i, p in enumerate(ranked[:10]) if p in gold)
        totals["ndcg@10"] += dcg / sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    return {key: value / len(data.tasks) for key, value in totals.items()}


#: The tool corpora of experiments/tool_corpora.toml: (dataset name, path below ../shared/datasets).
TOOL_CORPORA = [
    ("metatool-multi", "metatool/multi"), ("apibench-torchhub", "gorilla-apibench/torchhub"),
    ("apibench-tensorflowhub", "gorilla-apibench/tensorflowhub"),
    ("apibench-huggingface", "gorilla-apibench/huggingface"), ("metatool-single", "metatool/single"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "subset"), TOOL_CORPORA[:3])
def test_bm25_on_tool_corpora_matches_an_independent_rank_bm25_computation(tmp_path, name, subset):
    folder = shared(subset.split("/")[0]) / subset.split("/")[1]
    cfg = _grid(tmp_path, [folder], '["bm25"]')
    result = run_experiment(load_config(cfg), tmp_path / "runs", progress=False)
    (cell,) = result.cells
    report = json.loads((result.directory / cell.id / "report.json").read_text())
    expected = _independent_bm25(name, folder)
    for key, value in expected.items():
        assert report[key] == pytest.approx(value, abs=0.005), key


def _report_row(report: str, dataset: str, retriever: str) -> dict[str, str]:
    """The row of ``retriever`` in the table of ``dataset`` of a committed report (header -> cell)."""
    section = report.split(f"\n## {dataset} (", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    header = [h.strip() for h in table[0].strip("|").split("|")]
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == retriever:
            return dict(zip(header, cells))
    raise AssertionError(f"no {retriever} row for {dataset}")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "subset"), TOOL_CORPORA)
def test_the_committed_tool_corpora_report_has_the_bm25_figures_of_rank_bm25(name, subset):
    """The BM25 figures of experiments/tool_corpora.md (3 decimals) against rank-bm25 over the
    same documents and queries, on every dataset of the report."""
    folder = shared(subset.split("/")[0]) / subset.split("/")[1]
    report = (Path(__file__).resolve().parents[2] / "experiments" / "tool_corpora.md").read_text(encoding="utf-8")
    row = _report_row(report, name, "bm25")
    expected = _independent_bm25(name, folder)
    for key, column in (("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@20", "R@20"),
                        ("ndcg@10", "nDCG@10"), ("complete@10", "C@10")):
        assert float(row[column]) == pytest.approx(expected[key], abs=0.005), key


def _files(directory: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "report.json":
                report = json.loads(data)
                data = json.dumps({k: v for k, v in report.items() if k not in TIMING_KEYS}).encode()
            out[str(path.relative_to(directory))] = data
    return out


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'primsel[ray]')")
def test_the_ray_backend_writes_the_files_and_report_of_the_serial_backend(tmp_path, capsys):
    cfg = _grid(tmp_path, [_toy(tmp_path, "one"), _toy(tmp_path, "two")])
    assert main(["run", str(cfg), "--out", str(tmp_path / "serial"), "--quiet", "--no-cache"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "ray"), "--quiet", "--no-cache", "--backend", "ray"]) == 0
    serial, ray = _files(tmp_path / "serial" / "exp"), _files(tmp_path / "ray" / "exp")
    assert sorted(serial) == sorted(ray) and len(serial) > 20
    assert [name for name in serial if serial[name] != ray[name]] == []
    assert (tmp_path / "ray" / "exp" / "report.md").read_bytes() == (tmp_path / "serial" / "exp" / "report.md").read_bytes()
    # resume: a second ray run finds every cell finished
    assert main(["run", str(cfg), "--out", str(tmp_path / "ray"), "--quiet", "--backend", "ray"]) == 0
    assert "8 of 8 cells already finished" in capsys.readouterr().err


def test_address_needs_the_ray_backend(tmp_path, capsys):
    assert main(["run", str(_grid(tmp_path, [_toy(tmp_path)])), "--address", "auto", "--quiet"]) == 2
    assert "--address needs --backend ray" in capsys.readouterr().err


def test_a_grid_with_data_runs_only_on_those_datasets(tmp_path):
    one, two = _toy(tmp_path, "one"), _toy(tmp_path, "two")
    cfg = tmp_path / "exp.toml"
    cfg.write_text(f'name = "exp"\ndata = ["{one}", "{two}"]\nfolds = 2\n'
                   f'[[grid]]\ndata = ["{one}"]\nretriever = ["bm25"]\n[[grid]]\nretriever = ["prior"]\n',
                   encoding="utf-8")
    result = run_experiment(load_config(cfg), tmp_path / "runs", progress=False)
    manifest = json.loads((result.directory / "experiment.json").read_text())
    source = {d["fingerprint"]: d["source"] for d in manifest["datasets"]}
    cells = sorted((source[c.settings.dataset], c.settings.retriever) for c in result.cells)
    assert cells == [("beir-one", "bm25"), ("beir-one", "prior"), ("beir-two", "prior")]


def test_a_ranking_depth_below_the_corpus_size_is_said_in_the_report(tmp_path):
    corpus = [{"_id": f"d{i:02d}", "title": "", "text": f"about subject{i}"} for i in range(25)]
    root = write_beir(tmp_path / "deep", corpus=corpus,
                      queries=[{"_id": "q1", "text": "subject3"}, {"_id": "q2", "text": "subject7"}],
                      qrels=["q1\td03\t1", "q2\td07\t1"])
    for depth, kept in ((20, 20), (30, 25)):
        cfg = tmp_path / f"exp{depth}.toml"
        cfg.write_text(f'name = "exp{depth}"\ndata = "{root}"\ndepth = {depth}\nfolds = 2\n'
                       '[grid]\nretriever = ["bm25"]\n', encoding="utf-8")
        assert main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
        directory = tmp_path / "runs" / f"exp{depth}"
        (cell,) = json.loads((directory / "experiment.json").read_text())["cells"]
        lines = (directory / cell["id"] / "run.trec").read_text().splitlines()
        assert sum(line.startswith("q1 ") for line in lines) == kept
        report = (directory / "report.md").read_text()
        # 20 of 25 documents kept: the report says what a cut ranking means for MRR and ties
        assert ("Rankings are kept to depth 20 (`depth`): MRR is MRR@20" in report) == (depth == 20)
