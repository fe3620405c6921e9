"""Fault injection (primsel.eval.faults): each kind edits the right place and names the right line."""

from __future__ import annotations

import pytest

from primsel.eval.faults import KINDS, make_faults

LIBRARY = {"find_events", "add_event", "delete_event", "now_", "Event", "time_by_hm"}
PROGRAM = (
    "def plan():\n"                                        # 1
    '    """Docstring 1."""\n'                             # 2
    "    start = time_by_hm(hour=2, minute=30)\n"          # 3
    "    events = find_events()\n"                         # 4
    "    for event in events:\n"                           # 5
    "        if event.subject == 'Sync':\n"                # 6
    "            delete_event(event)\n"                    # 7
    "    add_event(Event(subject='New', starts_at=start))\n"  # 8
    "    now_()\n"                                         # 9
    "    raise RequiresUserInput('which 1?')\n"            # 10
)


def every(kind):
    return make_faults("t", PROGRAM, LIBRARY, kinds=[kind], per_kind=100)


def changed_lines(fault):
    before, after = PROGRAM.splitlines(), fault.program.splitlines()
    assert len(before) == len(after)  # every other line keeps its number
    return {i + 1: a for i, (b, a) in enumerate(zip(before, after)) if a != b}


def test_constants_change_except_docstrings_and_raise_messages():
    faults = every("change_constant")
    assert sorted((f.line, changed_lines(f)[f.line].strip()) for f in faults) == [
        (3, "start = time_by_hm(hour=2, minute=31)"),
        (3, "start = time_by_hm(hour=3, minute=30)"),
        (6, "if event.subject == 'Sync_x':"),
        (8, "add_event(Event(subject='New_x', starts_at=start))"),
    ]


def test_comparisons_are_negated_on_their_line():
    [fault] = every("flip_comparison")
    assert fault.line == 6 and changed_lines(fault) == {6: "        if event.subject != 'Sync':"}


def test_a_dropped_call_names_the_next_line_executed():
    faults = {f.description: f for f in every("drop_call")}
    # line 7 is the last of the loop body: the loop header runs next; line 8 is followed by line 9;
    # after line 9 comes line 10
    assert {d: f.line for d, f in faults.items()} == {
        "line 7: delete_event(...) dropped": 5, "line 8: add_event(...) dropped": 9, "line 9: now_(...) dropped": 10}
    assert changed_lines(faults["line 7: delete_event(...) dropped"]) == {7: "            pass"}


def test_swaps_keep_dependent_statements_in_order():
    # 3/4 swap (independent), 8/9 swap; 4/5 is a loop (not simple), 9/10 has no library call in 10
    assert sorted(f.line for f in every("swap_calls")) == [3, 8]
    fault = next(f for f in every("swap_calls") if f.line == 3)
    assert changed_lines(fault) == {3: "    events = find_events()", 4: "    start = time_by_hm(hour=2, minute=30)"}


def test_a_keyword_argument_is_removed_at_the_call_line():
    faults = sorted(every("change_argument"), key=lambda f: f.line)
    assert [(f.line, changed_lines(f)[f.line].strip()) for f in faults] == [
        (3, "start = time_by_hm(hour=2)"), (8, "add_event(Event(subject='New'))")]


def test_draws_are_seeded_and_bounded():
    one = make_faults("t", PROGRAM, LIBRARY, per_kind=1, seed=3)
    assert one == make_faults("t", PROGRAM, LIBRARY, per_kind=1, seed=3)
    assert [f.kind for f in one] == list(KINDS)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        make_faults("t", PROGRAM, LIBRARY, kinds=["typo"])
