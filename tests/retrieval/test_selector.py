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
