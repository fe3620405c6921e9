"""Ranking metrics (by hand and against ranx) and ASPERA's set metrics."""

from __future__ import annotations

import math
import random
import warnings

import pytest

from primsel.eval.metrics import (
    evaluate, parse_metric, per_task, ranking, set_metrics, set_scores, tied_tasks, tied_tasks_at, to_qrels,
)

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


@pytest.mark.parametrize("name", ["recall", "ndcg", "map@5", "recall@0", "bogus@3"])
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


@pytest.mark.slow
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


# --- tie-aware metrics (McSherry and Najork, ECIR 2008) -----------------------------------------

TIED_RUN = {"q1": {"create_event": 0, "delete_file": 0, "send_email": 0}}
TIED_GOLD = {"q1": {"send_email"}}


def test_tie_aware_values_by_hand():
    values = per_task(TIED_RUN, TIED_GOLD, ["recall@1", "mrr", "recall@2", "complete@2"], ties="expected")["q1"]
    assert values["recall@1"] == pytest.approx(1 / 3)
    assert values["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert values["recall@2"] == pytest.approx(2 / 3)
    assert values["complete@2"] == pytest.approx(2 / 3)
    # id order puts send_email last
    assert per_task(TIED_RUN, TIED_GOLD, ["recall@1", "mrr"])["q1"] == {"recall@1": 0.0, "mrr": 1 / 3}


def test_tie_aware_values_do_not_depend_on_the_ids():
    renamed = {"q1": {"z_create_event": 0, "z_delete_file": 0, "a_send_email": 0}}
    gold = {"q1": {"a_send_email"}}
    metrics = ["recall@1", "mrr", "ndcg@2", "precision@1", "complete@1"]
    assert per_task(renamed, gold, ["recall@1"])["q1"]["recall@1"] == 1.0  # id order now favours it
    ours = per_task(renamed, gold, metrics, ties="expected")["q1"]
    theirs = per_task(TIED_RUN, TIED_GOLD, metrics, ties="expected")["q1"]
    assert ours == pytest.approx(theirs)
    assert ours["recall@1"] == pytest.approx(1 / 3)


def test_tie_aware_complete_with_a_group_across_the_cut_off():
    # a (3) first, then b, c, d, e tied (1); gold {a, c, e}; k = 3 leaves 2 of the 4 tied ranks
    # inside: both gold primitives of the group must be among them, C(2, 2) / C(4, 2) = 1/6
    run = {"q": {"a": 3, "b": 1, "c": 1, "d": 1, "e": 1}}
    values = per_task(run, {"q": {"a", "c", "e"}}, ["complete@3", "complete@5", "recall@3", "ndcg@3"],
                      ties="expected")["q"]
    assert values["complete@3"] == pytest.approx(1 / 6)
    assert values["complete@5"] == 1.0
    assert values["recall@3"] == pytest.approx((1 + 2 * (2 / 4)) / 3)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert values["ndcg@3"] == pytest.approx((1 + (2 / 4) / math.log2(3) + (2 / 4) / math.log2(4)) / ideal)


def test_tie_aware_equals_id_order_without_ties():
    rng = random.Random(3)
    docs = [f"p{i}" for i in range(12)]
    run = {f"t{q}": dict(zip(docs, rng.sample(range(100), len(docs)))) for q in range(20)}
    qrels = {t: set(rng.sample(docs, rng.randint(1, 5))) for t in run}
    metrics = ["recall@3", "precision@4", "ndcg@5", "mrr", "mrr@2", "complete@6"]
    assert evaluate(run, qrels, metrics, ties="expected") == pytest.approx(evaluate(run, qrels, metrics))


def _orders(groups):
    """Every ranking obtained by permuting each group of tied ids."""
    import itertools

    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [p for group in combo for p in group]


def test_tie_aware_equals_the_mean_over_every_tie_order_on_random_runs():
    from primsel.types import tie_groups

    rng = random.Random(7)
    metrics = ["recall@1", "recall@3", "precision@2", "ndcg@3", "ndcg@10", "mrr", "mrr@2",
               "complete@2", "complete@4", "complete@7"]
    for trial in range(60):
        docs = [f"p{i}" for i in range(rng.randint(2, 7))]
        ranked = rng.sample(docs, rng.randint(1, len(docs)))  # some primitives may be unranked
        run = {"q": {p: float(rng.choice([0, 1, 2])) for p in ranked}}
        gold = {"q": set(rng.sample(docs, rng.randint(1, len(docs))))}
        orders = list(_orders(tie_groups(run["q"])))
        brute = {m: 0.0 for m in metrics}
        for order in orders:
            # scores that force this order under the id rule
            values = per_task({"q": {p: -i for i, p in enumerate(order)}}, gold, metrics)["q"]
            for m in metrics:
                brute[m] += values[m] / len(orders)
        exact = per_task(run, gold, metrics, ties="expected")["q"]
        for m in metrics:
            assert exact[m] == pytest.approx(brute[m], abs=1e-12), (trial, m, run, gold)


def test_tied_tasks_counts_ties_across_the_cut_off():
    run = {
        "a": {"x": 2, "y": 1, "z": 1},   # tie at ranks 2-3
        "b": {"x": 1, "y": 1, "z": 1},   # tie at ranks 1-3
        "c": {"x": 3, "y": 2, "z": 1},   # no tie
    }
    assert [tied_tasks(run, run, k) for k in (1, 2, 3)] == [1, 2, 0]
    assert tied_tasks(run, ["a", "missing"], 2) == 1
    with pytest.raises(ValueError, match="k must be"):
        tied_tasks(run, run, 0)


def test_tied_tasks_at_counts_every_cut_off_in_one_pass():
    run = {
        "a": {"x": 2, "y": 1, "z": 1, "w": 0},   # tie at ranks 2-3
        "b": {"x": 1, "y": 1, "z": 1, "w": 1},   # tie at ranks 1-4
        "c": {"x": 3, "y": 2, "z": 1, "w": 1},   # tie at ranks 3-4
    }
    # k = 1: b; k = 2: a, b; k = 3: b, c; k = 4: no rank 5, so no tie across it
    assert tied_tasks_at(run, run, (3, 1, 4, 2, 3)) == {3: 2, 1: 1, 4: 0, 2: 2}
    assert tied_tasks_at(run, ["c", "missing"], [3]) == {3: 1} and tied_tasks_at(run, run, []) == {}
    with pytest.raises(ValueError, match="k must be an integer >= 1, got True"):
        tied_tasks_at(run, run, (2, True))


def test_unknown_tie_mode():
    with pytest.raises(ValueError, match="ties must be one of"):
        evaluate(RUN, GOLD, ["mrr"], ties="random")


# --- ids of the wrong type -------------------------------------------------------------------

@pytest.mark.parametrize("run, named", [
    ({1: {"send_email": 1.0}}, "task id 1 is int"),
    ({"1": {7: 1.0}}, "primitive id 7 is int"),
    ({"1": {"send_email": "high"}}, "score of 'send_email' is str"),
])
def test_ids_of_another_type_are_refused_not_scored_zero(run, named):
    with pytest.raises(TypeError, match=named):
        evaluate(run, {"1": {"send_email"}}, ["recall@5"])
