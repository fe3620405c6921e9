"""The recall/tokens frontier of a ranking (primsel.eval.frontier), values computed by hand."""

from primsel.eval.frontier import depth_of, frontier, ranked_tasks, recall_by_k


def test_the_frontier_counts_a_short_ranking_whole_at_deeper_k():
    run = {"1": {"a": 2.0, "b": 1.0}, "2": {"b": 1.0}, "3": {"a": 1.0}}
    gold = {"1": {"b"}, "2": {"b"}, "3": set()}
    # task 3 has no gold: left out; k = 1: tokens (3 + 5) / 2, recall (0 + 1) / 2; k = 2: task 2
    # keeps its one primitive, tokens (3 + 5 + 5) / 2, recall (1 + 1) / 2
    assert frontier(run, gold, {"a": 3, "b": 5}) == ((4.0, 6.5), (0.5, 1.0))
    assert frontier(run, gold, {"b": 5}) is None
    assert frontier(run, {"3": set()}, {"a": 3, "b": 5}) is None


def test_the_frontier_counts_an_empty_ranking_as_nothing_spent_and_nothing_found():
    run = {"1": {"a": 2.0, "b": 1.0}, "2": {}}
    gold = {"1": {"b"}, "2": {"b"}}
    # task 2 ranks nothing: 0 tokens, recall 0 at every k; k = 1: tokens (3 + 0) / 2, recall
    # (0 + 0) / 2; k = 2: tokens (3 + 5 + 0) / 2, recall (1 + 0) / 2
    assert frontier(run, gold, {"a": 3, "b": 5}) == ((1.5, 4.0), (0.0, 0.5))


def test_recall_by_k_gives_each_tasks_recall_down_to_the_deepest_ranking():
    run = {"1": {"a": 3.0, "b": 2.0, "c": 1.0}, "2": {"c": 1.0}, "3": {"a": 1.0}}
    gold = {"1": ["c", "a"], "2": ["c", "d"], "3": []}
    orders = ranked_tasks(run, gold)
    # task 3 has no gold: left out; task 1 ranks a, b, c (gold a, c); task 2 ranks c (gold c, d)
    assert orders == {"1": ["a", "b", "c"], "2": ["c"]} and depth_of(orders) == 3 and depth_of({}) == 0
    assert recall_by_k(orders, gold) == ((0.5, 0.5, 1.0), (0.5, 0.5, 0.5))
