"""TREC run files."""

from __future__ import annotations

import pytest

from primsel.retrieval.trec import format_run, read_run, write_run


def test_format_ranks_by_score_then_id():
    text = format_run({"1": {"b": 0.5, "a": 0.5, "c": 1.0}}, "bm25")
    assert text == "1 Q0 c 1 1 bm25\n1 Q0 a 2 0.5 bm25\n1 Q0 b 3 0.5 bm25\n"


def test_round_trip(tmp_path):
    run = {"2": {"x.f": 0.25, "x.g": 0.0}, "10": {"x.g": 3.0}}
    write_run(run, tmp_path / "sub" / "run.trec", "tag")
    assert read_run(tmp_path / "sub" / "run.trec") == run


def test_whitespace_in_ids_is_an_error():
    with pytest.raises(ValueError, match="tag"):
        format_run({"1": {"a": 1.0}}, "my tag")


def test_malformed_line_names_its_number(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("1 Q0 a 1 1.0 t\n1 Q0 b 2\n")
    with pytest.raises(ValueError, match=":2:"):
        read_run(path)
