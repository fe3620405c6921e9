"""``primsel retrieve`` on the built-in tasks (no archive, no sentence model)."""

from __future__ import annotations

import pytest

from primsel.cli import main
from primsel.retrieval.trec import read_run


@pytest.fixture(autouse=True)
def _builtin_tasks(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


def test_unknown_retriever_exits_2_listing_the_known_ones(capsys):
    assert main(["retrieve", "--retriever", "no_such_retriever"]) == 2
    err = capsys.readouterr().err
    assert "no_such_retriever" in err and "bm25" in err and "classifier" in err and "oracle" in err


@pytest.mark.parametrize("k", ["0", "-1"])
def test_non_positive_k_exits_2(capsys, k):
    assert main(["retrieve", "--retriever", "bm25", "--k", k]) == 2
    assert "--k must be >= 1" in capsys.readouterr().err


def test_bad_json_table_exits_2(capsys):
    assert main(["retrieve", "--retriever", '{"type": "bm25",']) == 2
    assert "invalid JSON" in capsys.readouterr().err


def test_writes_a_full_trec_run_and_prints_metrics(tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert main(["retrieve", "--retriever", '{"type": "bm25", "k1": 1.5}', "--k", "5", "--closure",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for metric in ("recall@5", "recall@20", "ndcg@10", "mrr", "complete@20", "set_f1_micro", "set_f1_macro",
                   "closure_added"):
        assert metric in printed
    run = read_run(out)
    lines = out.read_text().splitlines()
    assert len(run) >= 1 and all(len(scores) == 65 for scores in run.values())
    assert len(lines) == 65 * len(run) and lines[0].split()[1::2] == ["Q0", "1", "bm25"]


def test_module_class_spec_is_accepted(capsys):
    assert main(["retrieve", "--retriever", "primsel.retrieval.bm25:BM25Retriever"]) == 0
    assert "recall@15" in capsys.readouterr().out
