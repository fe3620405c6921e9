"""TREC run files."""

from __future__ import annotations

import pytest

from primsel.retrieval.trec import format_run, read_run, write_run


def test_format_ranks_by_score_then_id_with_scores_strictly_decreasing():
    text = format_run({"1": {"b": 0.5, "a": 0.5, "c": 1.0}}, "bm25")
    # the tie of a and b, ranked by id, is written one float apart so no tool re-orders it
    assert text == "1 Q0 c 1 1 bm25\n1 Q0 a 2 0.5 bm25\n1 Q0 b 3 0.49999999999999994 bm25\n"
    assert read_run_text(text) == {"1": {"c": 1.0, "a": 0.5, "b": 0.49999999999999994}}


def read_run_text(text, tmp=None):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.trec"
        path.write_text(text)
        return read_run(path)


def test_written_scores_are_strictly_decreasing_and_change_only_ties():
    from primsel.retrieval.trec import written_scores

    below_half = 0.49999999999999994  # the float just below 0.5
    assert written_scores([1.0, 0.5, 0.5, 0.5, 0.0]) == [
        1.0, 0.5, below_half, 0.4999999999999999, 0.0,
    ]
    # a tie squeezed against the next score pushes it down too: the order is kept
    assert written_scores([1.0, 1.0, 0.9999999999999999, 0.0]) == [
        1.0, 0.9999999999999999, 0.9999999999999998, 0.0,
    ]
    assert written_scores([0.0, 0.0]) == [0.0, -5e-324]
    assert written_scores([]) == []


def test_ranx_scores_a_tied_run_as_primsel_does(tmp_path):
    # Before the scores were made strictly decreasing, ranx broke ties its own way: on q4 below
    # (65 primitives tied at 0, as a retriever without signal gives) it ranked the gold "d00"
    # 34th where primsel ranks it first by id: MRR 0.029 for that task instead of 1.
    import ranx

    from primsel.eval.metrics import evaluate
    from primsel.retrieval.trec import read_qrels, write_qrels

    run = {
        "q1": {"a": 0.5, "b": 0.5, "c": 0.0},
        "q2": {"x": 1.0, "y": 0.0, "z": 0.0, "w": 0.0},
        "q3": {"m": 0.0, "n": 0.0, "o": 0.0},
        "q4": {f"d{i:02d}": 0.0 for i in range(65)},
    }
    gold = {"q1": ["a"], "q2": ["y", "z"], "q3": ["o"], "q4": ["d00"]}
    write_run(run, tmp_path / "run.trec", "t")
    write_qrels(gold, tmp_path / "qrels.trec")
    assert (tmp_path / "qrels.trec").read_text().splitlines()[:3] == [
        "q1 0 a 1", "q2 0 y 1", "q2 0 z 1",
    ]
    assert read_qrels(tmp_path / "qrels.trec") == gold
    metrics = ["recall@1", "recall@2", "recall@3", "ndcg@2", "ndcg@3", "mrr"]
    primsel = evaluate(run, gold, metrics)
    # by hand: q1 ranks a, b, c; q2 x, w, y, z (ties by id); q3 m, n, o; q4 d00 first
    assert primsel["recall@1"] == pytest.approx(2 / 4)
    assert primsel["recall@3"] == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    assert primsel["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 3 + 1) / 4)
    qrels = ranx.Qrels.from_file(str(tmp_path / "qrels.trec"), kind="trec")
    ranx_run = ranx.Run.from_file(str(tmp_path / "run.trec"), kind="trec")
    by_ranx = ranx.evaluate(qrels, ranx_run, metrics)
    assert by_ranx == pytest.approx(primsel, abs=1e-12)


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
