"""Tests of the work calendar, with test vectors computed by the reference implementation.

"Now" is fixed at Tuesday 2024-06-25 09:06.
"""

from __future__ import annotations

import copy
import datetime
from types import SimpleNamespace

import pydantic
import pytest

from primsel.simulator.apps import work_calendar as wc
from primsel.simulator.apps.company_directory import Employee
from primsel.simulator.apps.exceptions import EventDefinitionError, SearchError
from primsel.simulator.apps.time_utils import (
    Duration,
    EventFrequency,
    RepetitionSpec,
    TimeInterval,
    TimeUnits,
)
from primsel.simulator.apps.work_calendar import (
    CalendarSearchSettings,
    Event,
    ShowAsStatus,
    add_event,
    delete_event,
    find_available_slots,
    find_events,
    find_past_events,
    get_calendar,
    provide_event_details,
    share_calendar,
    summarise_calendar,
)
from primsel.simulator.state import new_context

D = datetime.datetime


def at(day: int, hour: int, minute: int = 0, month: int = 6) -> datetime.datetime:
    return datetime.datetime(2024, month, day, hour, minute)


def slot(day: int, h1: int, m1: int, h2: int, m2: int, month: int = 6) -> TimeInterval:
    return TimeInterval(at(day, h1, m1, month), at(day, h2, m2, month))


@pytest.fixture
def world():
    """A fresh context whose directory holds Alex (the user), Bob, Alice, Al and Charlie."""
    with new_context() as context:
        people = {}
        directory = [("Alex", "id-x"), ("Bob", "id-b"), ("Alice", "id-a"), ("Al", "id-l")]
        directory.append(("Charlie", "id-c"))
        for name, employee_id in directory:
            row = {"employee_id": employee_id, "name": name, "is_user": name == "Alex"}
            context.table("EMPLOYEES").append(row)
            people[name.lower()] = Employee(name=name, employee_id=employee_id)
        yield SimpleNamespace(context=context, **people)


def user_rows(world) -> list[dict]:
    return world.context.table("USER_CALENDAR")


# ---------------------------------------------------------------------------------------------
# 7.1 enum, settings, constants
# ---------------------------------------------------------------------------------------------


def test_show_as_status_members_are_lowercase_names():
    members = [(m.name, m.value) for m in ShowAsStatus]
    assert members == [("Busy", "busy"), ("OutOfOffice", "outofoffice"), ("Free", "free")]
    assert str(ShowAsStatus.Busy) == "busy"
    assert repr(ShowAsStatus.OutOfOffice) == "<ShowAsStatus.OutOfOffice: 'outofoffice'>"


def test_calendar_search_settings_is_a_named_tuple():
    settings = CalendarSearchSettings(datetime.time(9, 6), latest_free_slot_finish=datetime.time(17, 10))
    assert settings == (datetime.time(9, 6), datetime.time(17, 10))
    assert repr(settings) == (
        "CalendarSearchSettings(earliest_free_slot_start=datetime.time(9, 6), "
        "latest_free_slot_finish=datetime.time(17, 10))"
    )


def test_constants():
    assert wc.DEFAULT_EVENT_DURATION_MINUTES == 16
    assert wc.EMPLOYEE_FIELDS == (
        "attendees", "attendees_to_avoid", "optional_attendees", "declined_by", "tentative_attendees"
    )  # fmt: skip
    assert wc.ID_FIELDS == ("event_id", "recurrent_event_id")
    assert wc.STRUCT_FIELDS == ("repeats", "attachments")


def test_star_exports_bind_the_datetime_module_and_deepcopy():
    namespace: dict = {}
    exec("from primsel.simulator.apps.work_calendar import *", namespace)
    assert namespace["datetime"] is datetime
    assert namespace["deepcopy"] is copy.deepcopy
    assert namespace["DEFAULT_EVENT_DURATION_MINUTES"] == 16
    for name in ("Event", "add_event", "Employee", "Duration", "TimeInterval", "RepetitionSpec", "Any"):
        assert name in namespace


def test_default_preparation_time_is_30_minutes():
    result = wc.get_default_preparation_time()
    assert result == Duration(30, TimeUnits.Minutes)
    assert tuple(result) == (30, TimeUnits.Minutes)


@pytest.mark.parametrize("key", ["work", "default", "Work"])
def test_search_settings_are_the_working_day(key):
    assert wc.get_search_settings(key) == CalendarSearchSettings(datetime.time(9, 6), datetime.time(17, 10))


def test_search_settings_reject_unknown_key():
    with pytest.raises(ValueError, match="calendar key"):
        wc.get_search_settings("home")


# ---------------------------------------------------------------------------------------------
# 7.2 Event
# ---------------------------------------------------------------------------------------------


def test_event_fields_in_spec_order():
    assert list(Event.model_fields) == [
        "attendees", "attendees_to_avoid", "optional_attendees", "declined_by", "tentative_attendees",
        "subject", "location", "starts_at", "ends_at", "show_as_status", "event_importance", "repeats",
        "notes", "video_link", "attachments", "event_id", "recurrent_event_id", "original_starts_at",
    ]  # fmt: skip
    event = Event()
    assert event.show_as_status is ShowAsStatus.Busy and event.event_importance == "normal"
    assert event.attendees is None and event.event_id is None


def test_event_is_keyword_only_and_ignores_unknown_keywords():
    with pytest.raises(TypeError):
        Event([])  # type: ignore[misc]
    assert Event(subject="x", colour="red").subject == "x"


def test_event_coercions(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY)
    attendees = [world.bob]
    event = Event(
        attendees=attendees,
        optional_attendees=[{"name": "Alice", "employee_id": "id-a"}],
        starts_at=datetime.date(2024, 6, 26),
        ends_at="2024-06-26T10:30:00",
        show_as_status="outofoffice",
        repeats=spec,
    )
    assert event.starts_at == D(2024, 6, 26, 0, 0)
    assert event.ends_at == D(2024, 6, 26, 10, 30)
    assert event.show_as_status is ShowAsStatus.OutOfOffice
    assert event.repeats is spec  # the very same object
    assert event.attendees == attendees and event.attendees is not attendees
    assert event.attendees[0] is world.bob
    assert event.optional_attendees == [world.alice]


@pytest.mark.parametrize("bad", [{"event_importance": "low"}, {"attendees": ["Alice"]}])
def test_event_rejects_invalid_values(bad):
    with pytest.raises(pydantic.ValidationError):
        Event(**bad)


def test_event_assignment_is_not_validated():
    event = Event()
    event.event_importance = "urgent"
    assert event.event_importance == "urgent"


def test_duration_in_minutes():
    event = Event(starts_at=at(26, 10), ends_at=at(26, 11, 30))
    assert event.duration == Duration(90, TimeUnits.Minutes)
    assert tuple(event.duration) == (90.0, TimeUnits.Minutes)
    with pytest.raises(TypeError):
        Event(starts_at=at(26, 10)).duration


def test_equality_sorts_employee_lists_and_compares_ids(world):
    a = Event(attendees=[world.bob, world.alice], subject="s", event_id="1")
    b = Event(attendees=[world.alice, world.bob], subject="s", event_id="1")
    assert a == b and not a != b
    assert a != Event(attendees=[world.alice, world.bob], subject="s", event_id="2")
    assert Event(attendees=None) != Event(attendees=[])
    assert copy.deepcopy(a) == a


def test_equality_with_a_non_event_raises_and_events_are_unhashable():
    with pytest.raises(TypeError):
        Event() == None  # noqa: B015, E711
    with pytest.raises(TypeError):
        hash(Event())


def test_str_with_subject_and_attendees():
    alice = Employee(name="Alice", employee_id="id-a")
    event = Event(attendees=[alice], subject="1:1 Alice", starts_at=at(26, 9, 6), ends_at=at(26, 9, 22))
    assert str(event) == "'1:1 Alice' with Alice starting at: 2024-06-26 09:06:00 for 16 minutes"


def test_str_with_subject_without_attendees_shows_end():
    event = Event(subject="x", starts_at=at(26, 10), ends_at=at(26, 11), attendees=[])
    assert str(event) == "'x' starting at: 2024-06-26 10:00:00, ending at 2024-06-26 11:00:00"


def test_str_without_subject():
    assert str(Event(starts_at=at(26, 10), ends_at=at(26, 10))) == (
        "Meeting with None starting at: 2024-06-26 10:00:00 for less than a minute"
    )


def test_str_with_location_and_hours_and_minutes():
    alex = Employee(name="Alex", employee_id="id-x")
    event = Event(subject="s", attendees=[alex], starts_at=at(26, 10), ends_at=at(26, 12, 5))
    event.location = "Room 1"
    assert str(event) == (
        "'s' with Alex starting at: 2024-06-26 10:00:00 for 2 hours and 5 minutes (location: Room 1)"
    )


@pytest.mark.parametrize(
    ("end", "text"),
    [
        (D(2024, 6, 26, 11, 0), "1 hours"),
        (D(2024, 6, 26, 10, 1, 59), "1 minutes"),
        (D(2024, 6, 26, 10, 0, 59), "less than a minute"),
        (D(2024, 6, 27, 11, 1), "25 hours and 1 minutes"),
        (None, "N/A"),
    ],
)
def test_str_duration_texts(end, text):
    bob = Employee(name="Bob", employee_id="id-b")
    assert str(Event(attendees=[bob], starts_at=at(26, 10), ends_at=end)) == (
        f"Meeting with Bob starting at: 2024-06-26 10:00:00 for {text}"
    )


def test_str_missing_times_and_empty_location():
    assert str(Event(subject="x", location="")) == "'x' starting at: N/A, ending at N/A (location: )"


def test_repr_lists_every_field():
    text = repr(Event(subject="x"))
    assert text.startswith("Event(attendees=None, attendees_to_avoid=None, ")
    assert "subject='x'" in text and "show_as_status=<ShowAsStatus.Busy: 'busy'>" in text
    assert text.endswith("recurrent_event_id=None, original_starts_at=None)")


# ---------------------------------------------------------------------------------------------
# 7.3 add_event / delete_event and the storage round trip
# ---------------------------------------------------------------------------------------------


def test_add_event_vector_of_14_3(world):
    add_event(Event(attendees=[world.alice], subject="1:1 Alice", starts_at=at(26, 9, 6)))
    [event] = find_events(attendees=[world.alice])
    assert str(event) == "'1:1 Alice' with Alice starting at: 2024-06-26 09:06:00 for 16 minutes"
    assert event.duration == Duration(number=16.0, unit=TimeUnits.Minutes)


def test_add_event_mutates_the_callers_object(world):
    event = Event(subject="x", starts_at=at(26, 10))
    event_id = add_event(event)
    assert event.event_id == event_id and len(event_id) == 36
    assert event.ends_at == at(26, 10, 16)
    assert find_events() == [event]


def test_add_event_does_not_add_the_user(world):
    add_event(Event(subject="x", attendees=[world.bob], starts_at=at(26, 10)))
    assert find_events()[0].attendees == [world.bob]


def test_add_event_without_any_time_raises_type_error(world):
    with pytest.raises(TypeError):
        add_event(Event(subject="x"))


def test_add_recurring_event_without_start_raises(world):
    with pytest.raises(EventDefinitionError):
        add_event(Event(subject="x", repeats=RepetitionSpec(frequency=EventFrequency.DAILY)))
    assert user_rows(world) == []


def test_adding_the_same_object_twice_updates(world):
    event = Event(subject="x", starts_at=at(26, 10))
    first = add_event(event)
    event.starts_at, event.ends_at = at(27, 10), at(27, 11)
    assert add_event(event) == first
    [stored] = find_events()
    assert stored.starts_at == at(27, 10) and len(user_rows(world)) == 1


def test_re_adding_a_found_event_updates_it_in_place(world):
    add_event(Event(subject="x", starts_at=at(26, 10)))
    add_event(Event(subject="y", starts_at=at(26, 11)))
    found = find_events(subject="x")[0]
    found.location = "Room 1"
    add_event(found)
    assert [(e.subject, e.location) for e in find_events()] == [("x", "Room 1"), ("y", None)]
    assert [row["subject"] for row in user_rows(world)] == ["y", "x"]  # updated row goes to the end


def test_event_with_unknown_id_is_inserted_without_default_end(world):
    event = Event(subject="x", starts_at=at(26, 10), event_id="from-elsewhere")
    assert add_event(event) == "from-elsewhere"
    assert event.ends_at is None and find_events()[0].ends_at is None


def test_employee_lists_are_stored_as_name_sorted_ids(world):
    add_event(
        Event(
            subject="x",
            starts_at=at(26, 10),
            attendees=[world.charlie, world.alice, world.bob],
            declined_by=[],
            tentative_attendees=[world.bob, world.al],
        )
    )
    [row] = user_rows(world)
    assert row["attendees"] == ["id-a", "id-b", "id-c"]
    assert row["declined_by"] == [] and row["optional_attendees"] is None
    assert row["tentative_attendees"] == ["id-l", "id-b"]
    [event] = find_events()
    assert [e.name for e in event.attendees] == ["Alice", "Bob", "Charlie"]
    assert event.declined_by == [] and event.optional_attendees is None


def test_readers_return_new_objects(world):
    event = Event(subject="x", starts_at=at(26, 10), attendees=[world.bob])
    add_event(event)
    event.subject = "changed after add"
    event.attendees.append(world.alice)
    found = find_events()[0]
    assert found.subject == "x" and found.attendees == [world.bob]
    found.subject = "changed after read"
    assert find_events()[0].subject == "x"


def test_unknown_attendee_id_fails_on_read(world):
    ghost = Employee(name="Ghost", employee_id="nope")
    add_event(Event(subject="x", starts_at=at(26, 10), attendees=[ghost]))
    with pytest.raises(AssertionError):
        find_events()


def test_status_and_importance_round_trip(world):
    add_event(Event(subject="x", starts_at=at(26, 10), show_as_status="free", event_importance="high"))
    [event] = find_events()
    assert event.show_as_status is ShowAsStatus.Free and event.event_importance == "high"


def test_daily_series_vector_of_14_3(world):
    parent = Event(
        subject="daily",
        starts_at=at(26, 10),
        ends_at=at(26, 10, 30),
        repeats=RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=3),
    )
    parent_id = add_event(parent)
    rows = user_rows(world)
    assert len(rows) == 4 and rows[0]["event_id"] == parent_id
    expected = [(at(d, 10), at(d, 10, 30)) for d in (26, 27, 28)]
    assert [(r["starts_at"], r["ends_at"]) for r in rows[1:]] == expected
    assert all(r["recurrent_event_id"] == parent_id for r in rows[1:])
    assert all(r["original_starts_at"] == at(26, 10) for r in rows[1:])
    assert all(r["repeats"] is None for r in rows[1:])
    assert len({r["event_id"] for r in rows}) == 4
    assert [e.event_id for e in find_events()] == [parent_id]


def test_re_adding_a_series_with_a_new_rule_replaces_it(world):
    parent = Event(
        subject="daily",
        starts_at=at(26, 10),
        ends_at=at(26, 10, 30),
        repeats=RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=3),
    )
    parent_id = add_event(parent)
    spec = RepetitionSpec(frequency=EventFrequency.WEEKLY, recurs_until=datetime.date(2024, 7, 20))
    parent.repeats = spec
    assert add_event(parent) == parent_id
    rows = user_rows(world)
    assert len(rows) == 5
    july = [at(day, 10, month=7) for day in (3, 10, 17)]
    assert [r["starts_at"] for r in rows[1:]] == [at(26, 10), *july]
    assert spec.recurs_until == D(2024, 7, 20, 10, 0)
    stored = find_events()[0].repeats
    assert stored == spec and stored is not spec
    assert stored.frequency is EventFrequency.WEEKLY
    delete_event(parent)
    assert user_rows(world) == []
    with pytest.raises(SearchError):
        delete_event(parent)


def test_unbounded_series_has_23_occurrences(world):
    add_event(
        Event(starts_at=at(25, 10), ends_at=at(25, 11), repeats=RepetitionSpec(EventFrequency.WEEKLY))
    )
    rows = user_rows(world)
    assert len(rows) == 24
    assert rows[-1]["starts_at"] == D(2024, 11, 26, 10, 0)


def test_recurring_event_without_end_gets_default_end_before_expansion(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=2)
    add_event(Event(subject="d", starts_at=at(26, 10), repeats=spec))
    assert [r["ends_at"] for r in user_rows(world)] == [at(26, 10, 16), at(26, 10, 16), at(27, 10, 16)]


def test_delete_event_without_id_raises(world):
    with pytest.raises(SearchError):
        delete_event(Event(subject="x"))


def test_delete_single_event_keeps_others_in_order(world):
    ids = [add_event(Event(subject=s, starts_at=at(26, h))) for s, h in [("a", 10), ("b", 11), ("c", 12)]]
    delete_event(find_events(subject="b")[0])
    assert [r["event_id"] for r in user_rows(world)] == [ids[0], ids[2]]


# ---------------------------------------------------------------------------------------------
# find_events / find_past_events
# ---------------------------------------------------------------------------------------------


def test_find_events_is_an_exact_attendee_match(world):
    add_event(Event(subject="pair", starts_at=at(26, 10), attendees=[world.alice, world.bob]))
    add_event(Event(subject="solo", starts_at=at(26, 11), attendees=[world.alice]))
    add_event(Event(subject="empty", starts_at=at(26, 12), attendees=[]))
    add_event(Event(subject="none", starts_at=at(26, 13)))
    assert [e.subject for e in find_events(attendees=[world.alice])] == ["solo"]
    assert [e.subject for e in find_events(attendees=[world.bob, world.alice])] == ["pair"]
    assert [e.subject for e in find_events(attendees=[])] == ["empty"]
    assert find_events(attendees=[world.alice, world.alice]) == []
    assert find_events(attendees=[world.alex, world.alice]) == []


def test_find_events_subject_is_fuzzy(world):
    add_event(Event(subject="Project sync", starts_at=at(26, 10)))
    add_event(Event(subject="1:1 Alice", starts_at=at(26, 11)))
    add_event(Event(starts_at=at(26, 12)))  # no subject: never matches
    for query in ("sync", "Project", "project sync"):
        assert [e.subject for e in find_events(subject=query)] == ["Project sync"]
    assert [e.subject for e in find_events(subject="Alice")] == ["1:1 Alice"]
    assert find_events(subject="Budget review") == []
    assert len(find_events(subject="")) == 3  # empty subject means no subject filter


def test_find_events_combines_filters(world):
    add_event(Event(subject="Project sync", starts_at=at(26, 10), attendees=[world.bob]))
    add_event(Event(subject="Project sync", starts_at=at(26, 11), attendees=[world.alice]))
    [event] = find_events(attendees=[world.alice], subject="sync")
    assert event.starts_at == at(26, 11)


def test_find_events_sorted_and_only_upcoming(world):
    starts = [("later", at(27, 9)), ("now", at(25, 9, 6)), ("just before", at(25, 9, 5))]
    starts.append(("soon", at(25, 10)))
    for subject, start in starts:
        add_event(Event(subject=subject, starts_at=start))
    add_event(Event(subject="in progress", starts_at=at(25, 8), ends_at=at(25, 10)))
    assert [e.subject for e in find_events()] == ["now", "soon", "later"]
    assert [e.subject for e in find_past_events()] == ["in progress", "just before"]


def test_find_events_returns_parents_only(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=5)
    add_event(Event(subject="standup", starts_at=at(26, 9, 30), ends_at=at(26, 9, 45), repeats=spec))
    old_spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=5)
    add_event(Event(subject="old series", starts_at=at(24, 9), ends_at=at(24, 9, 15), repeats=old_spec))
    assert [e.subject for e in find_events()] == ["standup"]
    assert find_events()[0].repeats == spec
    # a series whose parent started in the past is past, even though later occurrences are upcoming
    assert [e.subject for e in find_past_events()] == ["old series"]
    assert find_events(subject="old series") == []


def test_find_past_events_filters_like_find_events(world):
    add_event(Event(subject="Retro", starts_at=at(20, 10), attendees=[world.bob, world.alice]))
    add_event(Event(subject="Retro", starts_at=at(21, 10), attendees=[world.bob]))
    add_event(Event(subject="Retro", starts_at=at(27, 10), attendees=[world.bob]))
    assert [e.starts_at for e in find_past_events(attendees=[world.bob])] == [at(21, 10)]
    assert [e.starts_at for e in find_past_events(subject="retro")] == [at(20, 10), at(21, 10)]


# ---------------------------------------------------------------------------------------------
# get_calendar
# ---------------------------------------------------------------------------------------------


def test_get_calendar_returns_shared_rows_in_insertion_order(world):
    shared = world.context.table("SHARED_CALENDARS")
    late = Event(subject="late", starts_at=at(28, 10), ends_at=at(28, 11), event_id="e1")
    early = Event(subject="early", starts_at=at(20, 10), event_id="e2", attendees=[world.bob, world.alice])
    other = Event(subject="other", starts_at=at(26, 10), event_id="e3")
    for event, owner in [(late, "id-b"), (early, "id-b"), (other, "id-c")]:
        shared.append(wc._event_to_row(event) | {"calendar_id": owner})
    events = get_calendar(world.bob)
    assert [e.subject for e in events] == ["late", "early"]  # unsorted, past included
    assert events[1].attendees == [world.alice, world.bob]
    assert get_calendar(world.alice) == []


def test_get_calendar_does_not_show_the_users_own_events(world):
    add_event(Event(subject="mine", starts_at=at(26, 10)))
    assert get_calendar(world.alex) == []


# ---------------------------------------------------------------------------------------------
# find_available_slots (worked examples of 7.3)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def busy_week():
    return [
        Event(subject="a", starts_at=at(26, 10), ends_at=at(26, 11)),
        Event(subject="b", starts_at=at(27, 8), ends_at=at(27, 9, 30)),
        Event(subject="c", starts_at=at(27, 18), ends_at=at(27, 19)),
        Event(subject="d", starts_at=at(27, 10, 30), ends_at=at(27, 10, 45)),
        Event(subject="free", starts_at=at(28, 9), ends_at=at(28, 17), show_as_status=ShowAsStatus.Free),
    ]


def test_slots_worked_example(busy_week):
    assert find_available_slots(busy_week) == [
        slot(26, 9, 6, 10, 0), slot(26, 11, 0, 17, 10), slot(27, 9, 30, 10, 30), slot(27, 10, 45, 18, 0)
    ]


def test_slots_for_one_date(busy_week):
    assert find_available_slots(busy_week, date=datetime.date(2024, 6, 27)) == [
        slot(27, 9, 30, 10, 30), slot(27, 10, 45, 18, 0)
    ]


def test_slots_for_a_date_without_events(busy_week):
    assert find_available_slots(busy_week, date=datetime.date(2024, 7, 3)) == [slot(3, 9, 6, 17, 10, month=7)]


def test_slots_with_custom_settings(busy_week):
    settings = CalendarSearchSettings(
        earliest_free_slot_start=datetime.time(8, 0), latest_free_slot_finish=datetime.time(20, 0)
    )
    assert find_available_slots(busy_week, settings, datetime.date(2024, 6, 27)) == [
        slot(27, 9, 30, 10, 30), slot(27, 10, 45, 18, 0), slot(27, 19, 0, 20, 0)
    ]


def test_slots_are_not_clipped_to_the_working_day():
    events = [
        Event(starts_at=at(27, 10, 30), ends_at=at(27, 10, 45)),
        Event(starts_at=at(27, 18), ends_at=at(27, 19)),
    ]
    assert find_available_slots(events) == [slot(27, 9, 6, 10, 30), slot(27, 10, 45, 18, 0)]


def test_slots_around_a_multi_day_event():
    events = [Event(starts_at=at(26, 15), ends_at=at(28, 11))]
    assert find_available_slots(events) == [slot(26, 9, 6, 15, 0), slot(28, 11, 0, 17, 10)]


def test_slots_give_a_full_day_inside_the_window_and_ignore_now():
    events = [
        Event(starts_at=at(24, 10), ends_at=at(24, 11)),
        Event(starts_at=at(26, 10), ends_at=at(26, 11)),
    ]
    assert find_available_slots(events) == [
        slot(24, 9, 6, 10, 0), slot(24, 11, 0, 17, 10),
        slot(25, 9, 6, 17, 10),
        slot(26, 9, 6, 10, 0), slot(26, 11, 0, 17, 10),
    ]  # fmt: skip


def test_slots_without_events_cover_today_to_friday():
    assert find_available_slots([]) == [slot(d, 9, 6, 17, 10) for d in (25, 26, 27, 28)]


def test_slots_without_events_on_a_date():
    assert find_available_slots([], date=datetime.date(2024, 7, 1)) == [slot(1, 9, 6, 17, 10, month=7)]


def test_slots_ignore_free_events():
    events = [Event(starts_at=at(26, 10), ends_at=at(26, 11), show_as_status=ShowAsStatus.Free)]
    assert find_available_slots(events) == [slot(d, 9, 6, 17, 10) for d in (25, 26, 27, 28)]


def test_slots_overlapping_events_are_merged():
    events = [
        Event(starts_at=at(26, 10), ends_at=at(26, 12)),
        Event(starts_at=at(26, 11), ends_at=at(26, 11, 30)),
    ]
    assert find_available_slots(events) == [slot(26, 9, 6, 10, 0), slot(26, 12, 0, 17, 10)]


# ---------------------------------------------------------------------------------------------
# share_calendar, summaries
# ---------------------------------------------------------------------------------------------


def test_share_calendar_appends_sorted_ids(world):
    share_calendar([world.charlie, world.alice])
    share_calendar([])
    share_calendar([world.bob])
    assert world.context.table("USER_METADATA") == [
        {"calendar_visible_to": ["id-a", "id-c"]},
        {"calendar_visible_to": []},
        {"calendar_visible_to": ["id-b"]},
    ]


@pytest.fixture
def a_and_b():
    a = Event(subject="a", starts_at=at(26, 10), ends_at=at(26, 11))
    b = Event(subject="b", starts_at=at(27, 8), ends_at=at(27, 9, 30))
    return a, b


def test_summarise_calendar(a_and_b):
    a, b = a_and_b
    assert summarise_calendar([a, b], name="Bob") == (
        "There are 2 events in Bob's calendar. Here are the details of the first: "
        "'a' starting at: 2024-06-26 10:00:00, ending at 2024-06-26 11:00:00"
    )
    assert summarise_calendar([b, a]) == (
        f"There are 2 events in your calendar. Here are the details of the first: {b}"
    )
    assert summarise_calendar([]) == "There are no events in your calendar."
    assert summarise_calendar([], name="Bob") == "There are no events in Bob's calendar."


def test_provide_event_details(a_and_b):
    a, b = a_and_b
    assert provide_event_details([b, a]) == (
        "0. 'a' starting at: 2024-06-26 10:00:00, ending at 2024-06-26 11:00:00\n"
        "1. 'b' starting at: 2024-06-27 08:00:00, ending at 2024-06-27 09:30:00"
    )
    assert provide_event_details([b]) == str(b)
    assert provide_event_details([]) == "There are no events that satisfy these criteria"


# ---------------------------------------------------------------------------------------------
# 7.4 implementation-only extras
# ---------------------------------------------------------------------------------------------


def test_extras(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=2)
    parent = Event(subject="s", starts_at=at(26, 10), ends_at=at(26, 11), repeats=spec)
    parent_id = add_event(parent)
    single_id = add_event(Event(subject="x", starts_at=at(26, 12)))
    ids = wc.get_event_ids()
    assert len(ids) == 4 and {parent_id, single_id} <= ids
    assert wc.get_event_ids("SHARED_CALENDARS") == set()
    instances = wc.get_event_instances(parent)
    assert [i.starts_at for i in instances] == [at(26, 10), at(27, 10)]
    assert wc.get_event_by_id(instances[1].event_id) == instances[1]
    assert wc.get_event_by_id(parent_id) == parent
    with pytest.raises(SearchError):
        wc.get_event_by_id("missing")
    with pytest.raises(SearchError):
        wc.get_event_instances(Event(event_id="missing"))
    assert wc.expand_to_instances(Event(subject="x")) is None
    with pytest.raises(EventDefinitionError):
        wc.expand_to_instances(Event(starts_at=at(26, 10), repeats=RepetitionSpec(EventFrequency.DAILY)))
    with pytest.raises(EventDefinitionError):
        wc.validate_starts_at(Event(repeats=RepetitionSpec(frequency=EventFrequency.DAILY)))
    assert wc.validate_starts_at(Event()) is None


def test_expand_to_instances_copies_the_event():
    parent = Event(
        subject="s", starts_at=at(26, 10), ends_at=at(26, 11), event_id="p", location="Room 1",
        repeats=RepetitionSpec(frequency=EventFrequency.WEEKLY, which_weekday=[4], max_repetitions=2),
    )  # fmt: skip
    instances = wc.expand_to_instances(parent)
    assert [(i.starts_at, i.ends_at) for i in instances] == [
        (at(28, 10), at(28, 11)), (at(5, 10, month=7), at(5, 11, month=7))
    ]
    assert all(i.recurrent_event_id == "p" and i.original_starts_at == at(26, 10) for i in instances)
    assert all(i.repeats is None for i in instances)
    assert all(i.location == "Room 1" and i.event_id not in (None, "p") for i in instances)
    assert parent.repeats is not None  # the parent itself is untouched apart from recurs_until


def test_library_is_silent(world, capfd):
    add_event(Event(subject="x", starts_at=at(26, 10)))
    find_events()
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


# ---------------------------------------------------------------------------------------------
# Time-zone-aware times: stored as the naive UTC instant, as the reference's storage does
# ---------------------------------------------------------------------------------------------


def test_aware_times_are_stored_as_naive_utc(world):
    cest = datetime.timezone(datetime.timedelta(hours=2))
    add_event(Event(subject="Sync", starts_at=D(2024, 6, 26, 10, tzinfo=cest), ends_at=D(2024, 6, 26, 11, tzinfo=cest)))
    add_event(Event(subject="Call", starts_at=D(2024, 6, 27, 10, tzinfo=datetime.timezone.utc)))
    found = {event.subject: event for event in find_events()}  # raised TypeError before (aware vs naive)
    assert (found["Sync"].starts_at, found["Sync"].ends_at) == (at(26, 8), at(26, 9))
    assert (found["Call"].starts_at, found["Call"].ends_at) == (at(27, 10), at(27, 10, 16))
    assert all(row["starts_at"].tzinfo is None and row["ends_at"].tzinfo is None for row in user_rows(world))
