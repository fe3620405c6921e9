"""Tests of the calendar setup tools."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest

from primsel.simulator.apps.company_directory import Employee
from primsel.simulator.apps.exceptions import EventDefinitionError
from primsel.simulator.apps.time_utils import EventFrequency, RepetitionSpec
from primsel.simulator.apps.work_calendar import Event, find_events, get_calendar
from primsel.simulator.setup_tools.work_calendar import (
    RuntimeSetupError,
    simulate_employee_calendar,
    simulate_user_calendar,
)
from primsel.simulator.state import new_context


def at(day: int, hour: int, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(2024, 6, day, hour, minute)


@pytest.fixture
def world():
    """A fresh context whose directory holds Alex (the user), Alice and Bob."""
    with new_context() as context:
        people = {}
        for name, employee_id in [("Alex", "id-x"), ("Alice", "id-a"), ("Bob", "id-b")]:
            row = {"employee_id": employee_id, "name": name, "is_user": name == "Alex"}
            context.table("EMPLOYEES").append(row)
            people[name.lower()] = Employee(name=name, employee_id=employee_id)
        yield SimpleNamespace(context=context, **people)


def test_runtime_setup_error_is_an_exception():
    assert issubclass(RuntimeSetupError, Exception)


def test_simulate_user_calendar_is_add_event_per_event(world):
    events = [Event(subject="a", starts_at=at(26, 10)), Event(subject="b", starts_at=at(27, 10))]
    ids = simulate_user_calendar(events)
    assert ids == [e.event_id for e in events]
    assert events[0].ends_at == at(26, 10, 16)
    assert find_events() == events
    assert simulate_user_calendar([events[0]]) == [ids[0]]  # known id: update, not insert
    assert len(world.context.table("USER_CALENDAR")) == 2


def test_employee_calendar_event_gets_an_id_but_no_default_end(world):
    event = Event(subject="x", starts_at=at(26, 10), attendees=[world.bob])
    [event_id] = simulate_employee_calendar(world.alice, [event])
    assert event.event_id == event_id and event.ends_at is None
    [row] = world.context.table("SHARED_CALENDARS")
    assert row["calendar_id"] == "id-a" and row["ends_at"] is None
    assert get_calendar(world.alice) == [event]
    assert world.context.table("USER_CALENDAR") == []


def test_employee_calendar_stores_parent_before_expansion(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, recurs_until=datetime.date(2024, 6, 27))
    event = Event(subject="d", starts_at=at(26, 10), ends_at=at(26, 10, 30), repeats=spec)
    simulate_employee_calendar(world.bob, [event])
    events = get_calendar(world.bob)
    assert [e.starts_at for e in events] == [at(26, 10), at(26, 10), at(27, 10)]
    assert events[0].repeats.recurs_until == datetime.datetime(2024, 6, 27, 0, 0)
    assert spec.recurs_until == datetime.datetime(2024, 6, 27, 10, 0)  # the caller's spec was expanded
    assert all(e.recurrent_event_id == event.event_id for e in events[1:])
    assert all(row["calendar_id"] == "id-b" for row in world.context.table("SHARED_CALENDARS"))


def test_employee_calendar_recurring_event_needs_both_ends(world):
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=2)
    with pytest.raises(EventDefinitionError):
        simulate_employee_calendar(world.bob, [Event(subject="d", repeats=spec)])
    with pytest.raises(EventDefinitionError):
        simulate_employee_calendar(world.bob, [Event(subject="d", starts_at=at(26, 10), repeats=spec)])


def test_reused_event_is_copied_without_the_owner(world):
    event = Event(subject="x", starts_at=at(26, 10), attendees=[world.alice, world.bob])
    [user_id] = simulate_user_calendar([event])
    [alice_id] = simulate_employee_calendar(world.alice, [event])
    [bob_id] = simulate_employee_calendar(world.bob, [event])
    assert len({user_id, alice_id, bob_id}) == 3
    assert event.event_id == user_id and event.attendees == [world.alice, world.bob]
    [alice_copy] = get_calendar(world.alice)
    assert alice_copy.event_id == alice_id and alice_copy.attendees == [world.bob]
    assert get_calendar(world.bob)[0].attendees == [world.alice]


def test_reused_event_must_list_the_owner(world):
    event = Event(subject="x", starts_at=at(26, 10), attendees=[world.bob])
    simulate_user_calendar([event])
    with pytest.raises(ValueError):
        simulate_employee_calendar(world.alice, [event])
    no_attendees = Event(subject="y", starts_at=at(26, 11))
    simulate_user_calendar([no_attendees])
    with pytest.raises(AttributeError):
        simulate_employee_calendar(world.alice, [no_attendees])


def test_event_from_an_employee_calendar_keeps_its_id_in_the_user_calendar(world):
    event = Event(subject="x", starts_at=at(26, 10), attendees=[world.alice])
    [event_id] = simulate_employee_calendar(world.alice, [event])
    assert simulate_user_calendar([event]) == [event_id]
    [stored] = find_events()
    assert stored.event_id == event_id and stored.ends_at is None
