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


def test_a_pair_scored_twice_names_both_lines(tmp_path):
    path = tmp_path / "dup.trec"
    path.write_text("1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n\n1 Q0 a 3 0.5 t\n")
    with pytest.raises(ValueError, match=r"dup.trec:4: task '1' ranks primitive 'a' a second time \(first at line 1\)"):
        read_run(path)


def test_the_same_primitive_under_two_tasks_is_fine(tmp_path):
    path = tmp_path / "ok.trec"
    path.write_text("1 Q0 a 1 2.0 t\n2 Q0 a 1 1.0 t\n")
    assert read_run(path) == {"1": {"a": 2.0}, "2": {"a": 1.0}}


@pytest.mark.parametrize("score, problem", [("high", "'high' is not a number"), ("nan", "NaN")])
def test_a_bad_score_names_its_line(tmp_path, score, problem):
    path = tmp_path / "bad.trec"
    path.write_text(f"1 Q0 a 1 1.0 t\n1 Q0 b 2 {score} t\n")
    with pytest.raises(ValueError, match=f":2: score .*{problem}" if score == "nan" else f":2: score {problem}"):
        read_run(path)


def test_integer_ids_are_refused_when_writing():
    with pytest.raises(TypeError, match="task id 1 is int"):
        format_run({1: {"a": 1.0}}, "t")
    with pytest.raises(TypeError, match="primitive id 3 is int"):
        format_run({"1": {3: 1.0}}, "t")


def test_scores_that_differ_past_ten_digits_keep_their_order(tmp_path):
    # With 10 significant digits both scores were written as 0.123456789, read back equal and
    # re-ranked by id ("a" before "z"): the gold "z" fell to rank 2, MRR 1.0 -> 0.5.
    from primsel.eval.metrics import evaluate

    run = {"1": {"z": 0.12345678901234, "a": 0.12345678900001}}
    write_run(run, tmp_path / "run.trec", "t")
    back = read_run(tmp_path / "run.trec")
    assert back == run
    assert evaluate(back, {"1": ["z"]}, ["mrr"]) == {"mrr": 1.0}


def test_a_weighted_sum_near_tie_keeps_its_order(tmp_path):
    from primsel.eval.metrics import evaluate

    run = {"1": {"z": 1.0, "a": 0.9999999999999998}}
    write_run(run, tmp_path / "run.trec", "t")
    text = (tmp_path / "run.trec").read_text()
    assert text == "1 Q0 z 1 1 t\n1 Q0 a 2 0.9999999999999998 t\n"
    back = read_run(tmp_path / "run.trec")
    assert back["1"]["a"] == 0.9999999999999998
    assert evaluate(back, {"1": ["z"]}, ["mrr"]) == {"mrr": 1.0}


@pytest.mark.parametrize("score, text", [(1.0, "1"), (0.5, "0.5"), (-0.0, "-0"), (1e16, "1e+16"),
                                         (0.1 + 0.2, "0.30000000000000004")])
def test_format_score_is_the_shortest_round_trip(score, text):
    from primsel.retrieval.trec import format_score

    assert format_score(score) == text
    assert float(text) == score
