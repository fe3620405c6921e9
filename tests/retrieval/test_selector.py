"""Selection rules: top-k, threshold, token budget, type closure."""

from __future__ import annotations

import pytest

from primsel.retrieval.selector import estimate_tokens, select, select_run, tokens_of

RANKED = {"calendar.add_event": 0.9, "rooms.book_room": 0.5, "calendar.delete_event": 0.5, "rooms.Slot": 0.1}


def test_top_k_in_rank_order_ties_by_id(small_library):
    sel = select(RANKED, small_library, k=2, task_id="7", retriever="x")
    assert sel.ids == ("calendar.add_event", "calendar.delete_event")
    assert sel.ranked[0] == ("calendar.add_event", 0.9) and len(sel.ranked) == 4
    assert (sel.task_id, sel.retriever, sel.added_by_closure) == ("7", "x", ())


def test_threshold(small_library):
    assert select(RANKED, small_library, threshold=0.5).ids == (
        "calendar.add_event", "calendar.delete_event", "rooms.book_room")


def test_closure_adds_dependencies_transitively(small_library):
    sel = select(RANKED, small_library, k=3, closure=True)
    # add_event -> Event, delete_event -> Event, book_room -> Room -> Slot
    assert sel.ids == ("calendar.add_event", "calendar.delete_event", "rooms.book_room",
                       "calendar.Event", "rooms.Room", "rooms.Slot")
    assert sel.added_by_closure == ("calendar.Event", "rooms.Room", "rooms.Slot")


def test_closure_does_not_repeat_selected_types(small_library):
    sel = select({"rooms.book_room": 1.0, "rooms.Slot": 0.5}, small_library, closure=True)
    assert sel.ids == ("rooms.book_room", "rooms.Slot", "rooms.Room")
    assert sel.added_by_closure == ("rooms.Room",)


def test_estimate_tokens_is_four_characters_per_token():
    assert [estimate_tokens(""), estimate_tokens("abcd"), estimate_tokens("abcde")] == [0, 1, 2]


def test_token_budget_skips_what_does_not_fit(small_library):
    cost = {p: estimate_tokens(small_library[p].text("full")) for p in RANKED}
    budget = cost["calendar.add_event"] + cost["rooms.Slot"]
    assert cost["calendar.delete_event"] > cost["rooms.Slot"] and cost["rooms.book_room"] > cost["rooms.Slot"]
    sel = select(RANKED, small_library, budget=budget)
    assert sel.ids == ("calendar.add_event", "rooms.Slot")
    assert tokens_of(sel, small_library) == budget


def test_sequence_input_keeps_order_and_drops_repeats_and_unknown_ids(small_library):
    sel = select([("rooms.Slot", 1.0), ("nope.x", 0.9), ("rooms.Slot", 0.8), ("rooms.Room", 0.7)], small_library)
    assert sel.ids == ("rooms.Slot", "rooms.Room")


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": -2}, {"budget": -1}])
def test_bad_rules_are_errors(small_library, kwargs):
    with pytest.raises(ValueError):
        select(RANKED, small_library, **kwargs)


def test_select_run_covers_every_task(small_library):
    sels = select_run({"a": RANKED, "b": {}}, small_library, k=1, retriever="r")
    assert sels["a"].ids == ("calendar.add_event",) and sels["b"].ids == ()


# ---------------------------------------------------------------------------------------------
# Selector classes
# ---------------------------------------------------------------------------------------------
from primsel import registry  # noqa: E402
from primsel.retrieval.selector import CalibratedSelector, TopKSelector  # noqa: E402

# pooled over both examples: score 0.9 is gold 2 of 2 times, 0.5 once of 2, 0.1 never
EXAMPLES = [({"x.a": 0.9, "x.b": 0.5, "x.c": 0.1}, {"x.a", "x.b"}),
            ({"x.a": 0.9, "x.b": 0.5, "x.c": 0.1}, {"x.a"})]
TASK = {"calendar.add_event": 0.9, "rooms.book_room": 0.5, "rooms.Slot": 0.1}


def test_selectors_are_registered_under_their_kind():
    assert registry.available("selector") == ["calibrated", "positive", "topk"]
    assert isinstance(registry.build({"type": "calibrated", "target_recall": 0.8}, "selector"), CalibratedSelector)


def test_topk_selector_applies_the_fixed_rules(small_library):
    assert TopKSelector().select(RANKED, small_library, k=2).ids == select(RANKED, small_library, k=2).ids
    budget = estimate_tokens(small_library["calendar.add_event"].text("full"))
    assert TopKSelector(budget=budget).select(RANKED, small_library).ids == ("calendar.add_event",)


def test_calibration_is_the_gold_rate_per_score(small_library):
    chooser = CalibratedSelector().fit({"x.a": 1, "x.b": 1, "x.c": 1}, EXAMPLES)
    assert chooser.probabilities([0.9, 0.5, 0.1]) == pytest.approx([1.0, 0.5, 0.0])


@pytest.mark.parametrize("target, expected", [
    # p = 1, 0.5, 0 (sum 1.5): the first alone gives 1/1.5 = 0.667 of the expected recall
    (0.6, ("calendar.add_event",)),
    (0.67, ("calendar.add_event", "rooms.book_room")),
    (1.0, ("calendar.add_event", "rooms.book_room")),
])
def test_calibrated_selector_stops_at_the_target_expected_recall(small_library, target, expected):
    library = {**{p: small_library[p] for p in small_library}, "x.a": 1, "x.b": 1, "x.c": 1}
    chooser = CalibratedSelector(target_recall=target).fit(library, EXAMPLES)
    assert chooser.select(TASK, small_library).ids == expected


def test_calibrated_selector_k_caps_min_k_floors_closure_follows(small_library):
    chooser = CalibratedSelector(target_recall=1.0).fit({"x.a": 1, "x.b": 1, "x.c": 1}, EXAMPLES)
    assert chooser.select(TASK, small_library, k=1).ids == ("calendar.add_event",)
    floor = CalibratedSelector(target_recall=0.1, min_k=3).fit({"x.a": 1, "x.b": 1, "x.c": 1}, EXAMPLES)
    assert floor.select(TASK, small_library).ids == ("calendar.add_event", "rooms.book_room", "rooms.Slot")
    sel = chooser.select(TASK, small_library, closure=True)
    assert sel.added_by_closure == ("calendar.Event", "rooms.Room", "rooms.Slot")  # Room needs Slot


def test_density_order_prefers_cheap_documentation_at_equal_probability(small_library):
    ranked = {"rooms.Room": 0.5, "rooms.Slot": 0.5}
    cost = {p: estimate_tokens(small_library[p].text("full")) for p in ranked}
    assert cost["rooms.Slot"] < cost["rooms.Room"]
    chooser = CalibratedSelector(target_recall=0.5, order="density")  # unfitted: scores as probabilities
    assert chooser.select(ranked, small_library).ids == ("rooms.Slot",)
    assert CalibratedSelector(target_recall=0.5).select(ranked, small_library).ids == ("rooms.Room",)


@pytest.mark.parametrize("kwargs", [{"target_recall": 0}, {"target_recall": 1.5}, {"order": "tokens"},
                                    {"min_k": 0}])
def test_bad_calibrated_parameters_are_errors(kwargs):
    with pytest.raises(ValueError):
        CalibratedSelector(**kwargs)


def test_positive_selector_keeps_every_positive_score_whatever_k(small_library):
    from primsel.retrieval.selector import PositiveSelector

    ids = list(small_library)
    ranked = {ids[0]: 0.25, ids[1]: 1.0, ids[2]: 0.0, ids[3]: 5e-324}
    chosen = PositiveSelector().select(ranked, small_library, k=1, threshold=0.9)
    # rank order: 1.0, 0.25, then the least positive float; the 0 is left out
    assert chosen.ids == (ids[1], ids[0], ids[3])
