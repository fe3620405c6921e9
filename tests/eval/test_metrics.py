"""Ranking metrics (by hand and against ranx) and ASPERA's set metrics."""

from __future__ import annotations

import math
import random
import warnings

import pytest

from primsel.eval.metrics import evaluate, parse_metric, per_task, ranking, set_metrics, set_scores, to_qrels

# ranking of q: a (0.9), b (0.8), c (0.8; tie with b, broken by id), d (0.1); gold {c, d}
RUN = {"q": {"d": 0.1, "c": 0.8, "b": 0.8, "a": 0.9}}
GOLD = {"q": {"c", "d"}}


def test_ties_are_broken_by_primitive_id():
    assert ranking(RUN["q"]) == ["a", "b", "c", "d"]


def test_ranking_metrics_by_hand():
    values = per_task(RUN, GOLD, ["recall@2", "recall@3", "precision@3", "mrr", "ndcg@3", "complete@3",
                                  "complete@4", "precision@10"])["q"]
    assert values["recall@2"] == 0.0
    assert values["recall@3"] == 1 / 2
    assert values["precision@3"] == 1 / 3
    assert values["mrr"] == 1 / 3
    assert values["ndcg@3"] == pytest.approx((1 / math.log2(4)) / (1 / math.log2(2) + 1 / math.log2(3)))
    assert values["complete@3"] == 0.0
    assert values["complete@4"] == 1.0
    assert values["precision@10"] == 2 / 10


def test_every_task_is_counted_missing_ones_score_zero():
    qrels = {"q": {"c", "d"}, "missing": {"a"}}
    values = evaluate(RUN, qrels, ["recall@3", "complete@4", "mrr"])
    assert values == {"recall@3": (1 / 2 + 0) / 2, "complete@4": (1 + 0) / 2, "mrr": (1 / 3 + 0) / 2}


def test_run_tasks_without_gold_are_ignored():
    assert evaluate({**RUN, "extra": {"a": 1.0}}, GOLD, ["mrr"]) == {"mrr": 1 / 3}


def test_task_id_equal_to_a_primitive_id():
    run = {"a": {"a": 0.2, "b": 0.9}, "b": {"a": 0.9, "b": 0.1}}
    gold = {"a": {"a"}, "b": {"a"}}
    assert per_task(run, gold, ["mrr"]) == {"a": {"mrr": 1 / 2}, "b": {"mrr": 1.0}}


def test_qrels_relevance_zero_is_not_gold():
    assert per_task(RUN, {"q": {"c": 1, "a": 0, "d": 2}}, ["recall@3"])["q"]["recall@3"] == 1 / 2
    assert to_qrels({"q": {"d", "c"}}) == {"q": {"c": 1, "d": 1}}


def test_empty_gold_is_an_error_for_ranking_metrics():
    with pytest.raises(ValueError, match="without gold"):
        evaluate(RUN, {"q": set()}, ["recall@5"])


@pytest.mark.parametrize("name", ["recall", "ndcg", "map@5", "recall@0", "hits@3"])
def test_unknown_or_incomplete_metric_names(name):
    with pytest.raises(ValueError):
        parse_metric(name)


def test_metric_names():
    assert parse_metric("mrr") == ("mrr", None)
    assert parse_metric("NDCG@10") == ("ndcg", 10)
    assert parse_metric("complete@20") == ("complete", 20)


def test_inputs_are_not_mutated():
    run = {"q": {"a": 1.0}}
    qrels = {"q": {"a": 1}, "r": {"b": 1}}
    evaluate(run, qrels, ["recall@5"])
    assert run == {"q": {"a": 1.0}} and qrels == {"q": {"a": 1}, "r": {"b": 1}}


def test_parity_with_ranx_on_random_runs():
    ranx = pytest.importorskip("ranx")
    rng = random.Random(0)
    docs = [f"m.p{i}" for i in range(30)]
    run, qrels = {}, {}
    for q in range(40):
        qid = f"t{q}"
        qrels[qid] = {d: 1 for d in rng.sample(docs, rng.randint(1, 8))}
        if q % 7:  # some tasks are missing from the run
            picked = rng.sample(docs, rng.randint(1, 30))
            scores = rng.sample(range(1, 10_000), len(picked))  # no ties
            run[qid] = {d: s / 10_000 for d, s in zip(picked, scores)}
    metrics = ["recall@5", "recall@15", "precision@5", "ndcg@10", "mrr", "mrr@5"]
    ours = evaluate(run, qrels, metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), metrics, make_comparable=True)
    for m in metrics:
        assert ours[m] == pytest.approx(float(theirs[m]), abs=1e-12), m


# --- ASPERA's set metrics --------------------------------------------------------------------

def test_set_scores_regular_case():
    s = set_scores(["a", "b", "c", "a"], {"a", "d"})  # duplicates count once
    assert (s["precision"], s["recall"]) == (1 / 3, 1 / 2)
    assert s["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_set_scores_both_empty():
    s = set_scores([], set())
    assert (s["precision"], s["recall"], s["f1"]) == (1.0, 1.0, 1.0)


def test_set_scores_gold_empty():
    s = set_scores(["a"], set())
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 1.0, 0.0)


def test_set_scores_selection_empty():
    s = set_scores([], {"a"})
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)


def test_set_scores_disjoint():
    s = set_scores(["b"], {"a"})
    assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)


def test_set_metrics_micro_and_macro_by_hand():
    selections = {"1": ["a", "b"], "2": ["c", "c"]}  # task 3 missing: it selected nothing
    gold = {"1": {"a"}, "2": {"c", "d", "e"}, "3": {"f"}}
    m = set_metrics(selections, gold)
    # per task: 1 -> P 1/2, R 1, F1 2/3; 2 -> P 1, R 1/3, F1 1/2; 3 -> 0, 0, 0
    assert m["set_precision_macro"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert m["set_recall_macro"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert m["set_f1_macro"] == pytest.approx((2 / 3 + 1 / 2 + 0) / 3)
    # micro: tp 2, selected 3, gold 5
    assert m["set_precision_micro"] == pytest.approx(2 / 3)
    assert m["set_recall_micro"] == pytest.approx(2 / 5)
    assert m["set_f1_micro"] == pytest.approx(2 * (2 / 3) * (2 / 5) / (2 / 3 + 2 / 5))


def test_set_metrics_micro_edge_cases():
    assert set_metrics({"1": []}, {"1": set()})["set_f1_micro"] == 1.0
    nothing_selected = set_metrics({}, {"1": {"a"}})
    assert (nothing_selected["set_precision_micro"], nothing_selected["set_recall_micro"]) == (0.0, 0.0)
    no_gold = set_metrics({"1": ["a"]}, {"1": set()})
    assert (no_gold["set_precision_micro"], no_gold["set_recall_micro"], no_gold["set_f1_micro"]) == (0.0, 1.0, 0.0)
