"""Room-booking primitives and the room setup tools."""

import datetime
from datetime import date
from datetime import datetime as dt

import pytest

from primsel.simulator.apps import room_booking as rb
from primsel.simulator.apps.exceptions import SearchError
from primsel.simulator.apps.room_booking import (
    ConferenceRoom,
    RoomAvailability,
    find_available_time_slots,
    room_booking_default_time_window,
    search_conference_room,
    summarise_availability,
)
from primsel.simulator.apps.time_utils import TimeInterval
from primsel.simulator.setup_tools import room_booking as rb_setup
from primsel.simulator.setup_tools.room_booking import create_booking, create_room, simulate_conference_room
from primsel.simulator.state import ExecutionContext, new_context

DAY = date(2024, 6, 26)


def at(hour, minute=0, day=DAY):
    return dt.combine(day, datetime.time(hour, minute))


def slot(start, end):
    return TimeInterval(start, end)


@pytest.fixture
def world():
    with new_context(ExecutionContext()) as context:
        yield context


def test_bookings_out_of_order_are_swept_in_insertion_order(world):
    simulate_conference_room("Room 1", 10, {DAY: [slot(at(14), at(15)), slot(at(10), at(11))]})
    # The 10-11 booking comes second and lies before the cursor: it is ignored.
    assert find_available_time_slots("Room 1", [DAY]) == [slot(at(9, 6), at(14)), slot(at(15), at(17, 10))]


def test_bookings_in_order_split_the_working_day(world):
    simulate_conference_room("Room 1", 10, {DAY: [slot(at(10), at(11)), slot(at(14), at(15))]})
    assert find_available_time_slots("Room 1", [DAY]) == [
        slot(at(9, 6), at(10)),
        slot(at(11), at(14)),
        slot(at(15), at(17, 10)),
    ]


def test_touching_booking_takes_nothing_and_unbooked_interval_comes_back_whole(world):
    simulate_conference_room("Room 1", 10, {DAY: [slot(at(8), at(9, 6))]})
    other_day = date(2024, 6, 27)
    window = [slot(at(9, 6), at(12)), slot(at(9, 6, other_day), at(12, 0, other_day))]
    assert find_available_time_slots("Room 1", window) == window


def test_fully_booked_interval_gives_no_slot(world):
    simulate_conference_room("Room 1", 10, {DAY: [slot(at(9), at(18))]})
    assert find_available_time_slots("Room 1", [DAY]) == []


def test_interval_list_is_used_as_given_and_datetimes_count_as_dates(world):
    simulate_conference_room("Room 1", 10, {DAY: [slot(at(13), at(14))]})
    assert find_available_time_slots("Room 1", [slot(at(12), at(16))]) == [slot(at(12), at(13)), slot(at(14), at(16))]
    assert find_available_time_slots(time_window=[at(23, 59)], room_name="Room 1") == [
        slot(at(9, 6), at(13)),
        slot(at(14), at(17, 10)),
    ]


def test_room_name_is_a_case_insensitive_regex_search_first_match_wins(world):
    simulate_conference_room("Room 10", 4, {DAY: [slot(at(9, 6), at(17, 10))]})
    simulate_conference_room("Room 1", 10)
    assert find_available_time_slots("room 1", [DAY]) == []  # Room 10 was inserted first
    assert find_available_time_slots("ROOM 1$", [DAY]) == [slot(at(9, 6), at(17, 10))]


def test_unknown_room_raises_search_error(world):
    simulate_conference_room("Room 1", 10)
    with pytest.raises(SearchError, match="Room 'Boardroom' not found"):
        find_available_time_slots("Boardroom", [DAY])
    with pytest.raises(SearchError):
        find_available_time_slots("(", [DAY])  # invalid pattern matches nothing


def test_empty_time_window_raises_index_error_before_room_lookup(world):
    with pytest.raises(IndexError):
        find_available_time_slots("no such room", [])


def test_default_time_window(world):
    assert room_booking_default_time_window() == TimeInterval(dt(2024, 6, 25, 9, 6), dt(2024, 6, 28, 17, 10))


def test_search_lists_every_room_in_insertion_order_including_fully_booked(world):
    simulate_conference_room("Small", 4)
    simulate_conference_room("Big Room", 30, {DAY: [slot(at(9), at(18))]})
    assert search_conference_room([DAY]) == [
        RoomAvailability(room=ConferenceRoom(room_name="Small", capacity=4), free_slots=[slot(at(9, 6), at(17, 10))]),
        RoomAvailability(room=ConferenceRoom(room_name="Big Room", capacity=30), free_slots=[]),
    ]


def test_search_capacity_filter_keeps_rooms_at_least_that_big(world):
    simulate_conference_room("Small", 4)
    simulate_conference_room("Medium", 10)
    simulate_conference_room("Big Room", 30)
    found = search_conference_room([DAY], capacity=10)
    assert [entry.room.room_name for entry in found] == ["Medium", "Big Room"]
    assert search_conference_room(time_constraints=[DAY], capacity=31) == []


def test_search_with_no_room_big_enough_returns_empty_before_converting(world):
    simulate_conference_room("Small", 4)
    assert search_conference_room([], capacity=5) == []


def test_search_with_empty_constraints_raises_index_error(world):
    simulate_conference_room("Small", 4)
    with pytest.raises(IndexError):
        search_conference_room([])
    with pytest.raises(IndexError):
        search_conference_room([], capacity=4)


def test_search_looks_each_room_up_again_by_name(world):
    simulate_conference_room("Room 10", 4, {DAY: [slot(at(9, 6), at(17, 10))]})
    simulate_conference_room("Room 1", 10)
    found = search_conference_room([DAY])
    assert found[1].room == ConferenceRoom(room_name="Room 1", capacity=10)
    assert found[1].free_slots == []  # Room 10's slots: "Room 1" matches "Room 10" first


def test_summarise_availability_exact_text():
    schedule = [
        RoomAvailability(room=ConferenceRoom(room_name="Room 1", capacity=10), free_slots=[slot(at(9), at(10))]),
        RoomAvailability(room=ConferenceRoom(room_name="Big Room", capacity=30), free_slots=[]),
    ]
    assert summarise_availability(schedule) == (
        "Room: Room 1 (Capacity: 10)\n"
        "  Available: 2024-06-26 09:00 to 2024-06-26 10:00\n"
        "\n"
        "Room: Big Room (Capacity: 30)\n"
        "   Fully booked!\n"
    )


def test_summarise_availability_one_line_per_slot():
    schedule = [
        RoomAvailability(
            room=ConferenceRoom(room_name="R", capacity=2),
            free_slots=[slot(at(9, 6), at(10)), slot(at(11), at(12, 30))],
        )
    ]
    assert summarise_availability(schedule) == (
        "Room: R (Capacity: 2)\n"
        "  Available: 2024-06-26 09:06 to 2024-06-26 10:00\n"
        "  Available: 2024-06-26 11:00 to 2024-06-26 12:30\n"
    )


def test_summarise_availability_empty_and_room_name_quirk():
    assert summarise_availability([]) == "No rooms found!"
    assert summarise_availability([], room_name="Room 1") == "No rooms found!"
    schedule = [RoomAvailability(room=ConferenceRoom(room_name="Room 1", capacity=10), free_slots=[])]
    with pytest.raises(TypeError):
        summarise_availability(schedule, room_name="Room 1")


def test_model_text_and_construction():
    room = ConferenceRoom(room_name="Room 1", capacity=10)
    assert str(room) == "room_name='Room 1' capacity=10"
    assert repr(room) == "ConferenceRoom(room_name='Room 1', capacity=10)"
    availability = RoomAvailability(room=room, free_slots=[slot(at(9, 6), at(10))])
    assert repr(availability) == (
        "RoomAvailability(room=ConferenceRoom(room_name='Room 1', capacity=10), free_slots=[TimeInterval("
        "start=datetime.datetime(2024, 6, 26, 9, 6), end=datetime.datetime(2024, 6, 26, 10, 0))])"
    )
    assert str(availability).startswith("room=ConferenceRoom(room_name='Room 1', capacity=10) free_slots=[")
    assert type(availability.free_slots[0]) is TimeInterval
    with pytest.raises(TypeError):
        ConferenceRoom("Room 1", 10)
    with pytest.raises(TypeError):
        availability[0]


def test_setup_tools_write_rows_and_ignore_booking_keys(world):
    simulate_conference_room("Room 1", 10, {date(2030, 1, 1): [slot(at(10), at(11))], DAY: [slot(at(12), at(13))]})
    simulate_conference_room("Room 2", 6, bookings=None)
    rooms = world.table("CONFERENCE_ROOMS")
    bookings = world.table("CONFERENCE_ROOM_BOOKINGS")
    assert [(r["room_name"], r["capacity"]) for r in rooms] == [("Room 1", 10), ("Room 2", 6)]
    assert [(b["room_id"], b["start"], b["end"]) for b in bookings] == [
        (rooms[0]["room_id"], at(10), at(11)),
        (rooms[0]["room_id"], at(12), at(13)),
    ]
    assert len({b["booking_id"] for b in bookings}) == 2


def test_create_room_and_booking_return_ids(world):
    room_id = create_room("Room 3", 8)
    booking_id = create_booking(room_id, at(10), at(11))
    assert world.table("CONFERENCE_ROOMS") == [{"room_id": room_id, "capacity": 8, "room_name": "Room 3"}]
    assert world.table("CONFERENCE_ROOM_BOOKINGS") == [
        {"room_id": room_id, "booking_id": booking_id, "start": at(10), "end": at(11)}
    ]
    assert find_available_time_slots("Room 3", [DAY]) == [slot(at(9, 6), at(10)), slot(at(11), at(17, 10))]


def test_star_exports_bind_the_datetime_module():
    assert rb.datetime is datetime
    assert rb_setup.datetime is datetime
    for name in ("combine", "get_next_dow", "now_", "parse_time_string", "TimeExpressions", "TimeInterval"):
        assert name in rb.__all__
    assert all(hasattr(rb, name) for name in rb.__all__)
    assert all(hasattr(rb_setup, name) for name in rb_setup.__all__)
