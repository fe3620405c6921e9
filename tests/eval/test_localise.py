"""Localisation against the reference: the rules of primsel.eval.localise on hand-made traces."""

from __future__ import annotations

import pytest

from primsel.eval.localise import localise, normalise_ids, split_arguments
from primsel.types import ExecutionResult

U1, U2, U3 = "0b6a1c2e-1111-4a4a-8b8b-000000000001", "0b6a1c2e-2222-4a4a-8b8b-000000000002", \
    "9f6a1c2e-3333-4a4a-8b8b-000000000003"


def run(trace, outcomes=None, status="fail", line=None):
    trace = tuple(trace)
    if outcomes is None:
        outcomes = ((len(trace), "return", "None"),)
    return ExecutionResult("t", status, line=line, trace=trace, outcomes=tuple(outcomes))


PROGRAM = (
    "def plan():\n"                                      # 1
    "    alex = find_employee('Alex')[0]\n"              # 2
    "    event = Event(\n"                               # 3
    "        subject='Sync',\n"                          # 4
    "        attendees=[alex],\n"                        # 5
    "    )\n"                                            # 6
    "    add_event(event)\n"                             # 7
    "    return 3\n"                                     # 8
)
ALEX = f"Employee(name='Alex', employee_id='{U1}')"
REFERENCE = [
    ("company_directory.find_employee", 2, "'Alex'"),
    ("work_calendar.Event", 3, f"subject='Sync', attendees=[{ALEX}]"),
    ("work_calendar.add_event", 7, f"Event(attendees=[{ALEX}], subject='Sync')"),
]


def test_split_arguments_respects_brackets_and_strings():
    assert split_arguments("1, 'a, b', key=[1, 2], other=f(x=1, y=(2, 3))") == [
        (None, "1"), (None, "'a, b'"), ("key", "[1, 2]"), ("other", "f(x=1, y=(2, 3))")]
    assert split_arguments("") == []
    assert split_arguments("'it\\'s, here', x='='") == [(None, "'it\\'s, here'"), ("x", "'='")]


def test_ids_are_renamed_in_order_of_first_appearance():
    assert normalise_ids([f"a={U2}", f"b={U1}, c={U2}"]) == ["a=<id1>", "b=<id2>, c=<id1>"]


def test_the_same_calls_with_other_run_time_ids_agree():
    mine = [(p, line, args.replace(U1, U3)) for p, line, args in REFERENCE]
    place = localise(PROGRAM, run(mine), run(REFERENCE, status="pass"))
    assert (place.difference, place.divergence_line, place.expected_call) == ("none", None, None)


def test_other_arguments_point_at_the_differing_keyword_line():
    mine = list(REFERENCE)
    mine[1] = ("work_calendar.Event", 3, f"subject='Sync!', attendees=[{ALEX}]")
    place = localise(PROGRAM, run(mine), run(REFERENCE))
    assert (place.difference, place.divergence_line, place.index) == ("arguments", 4, 1)
    assert place.expected_call == "work_calendar.Event(subject='Sync', attendees=[Employee(name='Alex', employee_id='<id1>')])"
    assert place.actual_call == "work_calendar.Event(subject='Sync!', attendees=[Employee(name='Alex', employee_id='<id1>')])"


def test_a_record_argument_is_followed_to_the_field_that_differs():
    # the variable 'event' is assigned at line 3 by Event(...): its differing field is on line 5
    other = "Employee(name='Bo', employee_id='x')"
    mine = REFERENCE[:2] + [("work_calendar.add_event", 7, f"Event(attendees=[{other}], subject='Sync')")]
    place = localise(PROGRAM, run(mine), run(REFERENCE))
    assert (place.difference, place.divergence_line) == ("arguments", 5)


def test_a_different_id_is_a_different_argument():
    mine = [("work_calendar.delete_event", 2, f"'{U1}'"), ("work_calendar.delete_event", 3, f"'{U2}'")]
    theirs = [("work_calendar.delete_event", 2, f"'{U1}'"), ("work_calendar.delete_event", 3, f"'{U1}'")]
    assert localise("def f():\n    pass\n", run(mine), run(theirs)).difference == "arguments"


@pytest.mark.parametrize(("mine", "difference", "line"), [
    ([REFERENCE[0], REFERENCE[2], REFERENCE[1]], "order", 7),         # the same calls, two swapped
    ([REFERENCE[0], REFERENCE[2]], "missing_call", 7),                # Event(...) never made
    ([REFERENCE[0], ("time_utils.now_", 2, ""), *REFERENCE[1:]], "extra_call", 2),
    ([REFERENCE[0], ("time_utils.now_", 2, ""), REFERENCE[2]], "missing_call", 2),  # replaced by another call
])
def test_which_call_differs(mine, difference, line):
    place = localise(PROGRAM, run(mine), run(REFERENCE))
    assert (place.difference, place.divergence_line) == (difference, line)


def test_calls_that_end_early_point_at_the_return():
    place = localise(PROGRAM, run(REFERENCE[:2]), run(REFERENCE))
    assert (place.difference, place.divergence_line) == ("missing_call", 8)
    assert place.expected_call.startswith("work_calendar.add_event(") and place.actual_call == "return None"


def test_an_extra_call_at_the_end():
    mine = [*REFERENCE, ("work_calendar.delete_event", 7, "'x'")]
    place = localise(PROGRAM, run(mine), run(REFERENCE))
    assert (place.difference, place.divergence_line, place.expected_call) == ("extra_call", 7, "return None")


def test_agreeing_calls_and_another_return_value():
    place = localise(PROGRAM, run(REFERENCE, [(3, "return", "4")]), run(REFERENCE, [(3, "return", "3")]))
    assert (place.difference, place.divergence_line) == ("return", 8)
    assert (place.expected_call, place.actual_call) == ("return 3", "return 4")


def test_an_exception_after_agreeing_calls_is_at_its_line():
    mine = run(REFERENCE[:1], [(1, "raise", "IndexError: list index out of range")], status="error", line=2)
    place = localise(PROGRAM, mine, run(REFERENCE))
    assert (place.difference, place.divergence_line) == ("exception", 2)
    assert place.actual_call == "raise IndexError: list index out of range"


def test_each_call_of_the_entry_point_is_compared_with_the_same_call_of_the_reference():
    # two (SIP, EP) pairs: the first agrees; in the second the program makes one call fewer
    first = [("time_utils.now_", 2, "")]
    mine = run(first + first, [(1, "return", "1"), (1, "return", "1")])
    theirs = run(first + first + first, [(1, "return", "1"), (2, "return", "1")])
    place = localise("def f():\n    now_()\n    return 1\n", mine, theirs)
    assert (place.difference, place.divergence_line) == ("missing_call", 3)


REFERENCE_SOURCE = (
    "def plan():\n"                                   # 1
    "    events = find_events()\n"                    # 2
    "    if len(events) > 1:\n"                       # 3
    "        raise RequiresUserInput('which?')\n"     # 4
    "    delete_event(events[0])\n"                   # 5
)
FLIPPED = REFERENCE_SOURCE.replace("> 1", "<= 1")


def with_paths(trace, paths, outcomes, status="fail"):
    return ExecutionResult("t", status, trace=tuple(trace), outcomes=tuple(outcomes), paths=tuple(paths))


def test_the_branch_that_went_the_other_way_is_the_divergence():
    theirs = with_paths([("work_calendar.find_events", 2, ""), ("work_calendar.delete_event", 5, "Event()")],
                        [(2, 0, 3, 5, 0)], [(2, "return", "None")], status="pass")
    mine = with_paths([("work_calendar.find_events", 2, ""), ("exceptions.RequiresUserInput", 4, "'which?'")],
                      [(2, 0, 3, 4, 0)], [(2, "raise", "RequiresUserInput: which?")], status="requires_user_input")
    assert localise(FLIPPED, mine, theirs).divergence_line == 4  # the calls alone: the differing call
    place = localise(FLIPPED, mine, theirs, REFERENCE_SOURCE)
    assert (place.difference, place.divergence_line) == ("missing_call", 3)
    assert place.actual_call == "exceptions.RequiresUserInput('which?')"


def test_a_loop_that_ran_another_number_of_times_points_at_what_it_iterates():
    reference = ("def plan():\n    events = find_events()\n    chosen = [e for e in events if e.x > 1]\n"
                 "    for e in chosen:\n        delete_event(e)\n")
    program = reference.replace("> 1", "<= 1")
    theirs = with_paths([("work_calendar.find_events", 2, ""), ("work_calendar.delete_event", 5, "Event()")],
                        [(2, 0, 3, 3, 3, 4, 5, 0, 4)], [(2, "return", "None")], status="pass")
    mine = with_paths([("work_calendar.find_events", 2, "")], [(2, 0, 3, 3, 3, 4)], [(1, "return", "None")])
    assert localise(program, mine, theirs).divergence_line is None  # no unique return: no line from the calls
    place = localise(program, mine, theirs, reference)
    assert (place.difference, place.divergence_line) == ("missing_call", 3)


def test_paths_are_not_compared_with_an_unrelated_reference():
    from primsel.eval.localise import line_correspondence

    assert line_correspondence(REFERENCE_SOURCE, FLIPPED) == {1: 1, 2: 2, 3: 3, 4: 4, 5: 5}
    other = "def f():\n    x = get_calendar()\n    y = [a for a in x]\n    share_calendar(y)\n    return None\n"
    assert line_correspondence(REFERENCE_SOURCE, other) is None


def test_a_line_without_counterpart_stops_the_comparison_of_paths():
    # the program replaced 'raise ...' (line 4) by an unrelated line: its path cannot be compared there
    program = REFERENCE_SOURCE.replace("        raise RequiresUserInput('which?')", "        events.sort(key=str)")
    theirs = with_paths([("work_calendar.find_events", 2, ""), ("exceptions.RequiresUserInput", 4, "'which?'")],
                        [(2, 0, 3, 4, 0)], [(2, "raise", "RequiresUserInput: which?")], status="pass")
    mine = with_paths([("work_calendar.find_events", 2, ""), ("work_calendar.delete_event", 5, "Event()")],
                      [(2, 0, 3, 4, 5, 0)], [(2, "return", "None")])
    place = localise(program, mine, theirs, REFERENCE_SOURCE)
    assert (place.difference, place.divergence_line) == ("missing_call", 5)  # from the calls alone
