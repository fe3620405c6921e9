"""Conference rooms: find rooms with enough seats and the times they are free.

Every function reads the CONFERENCE_ROOMS and CONFERENCE_ROOM_BOOKINGS tables of the current
execution context at call time.
"""

import datetime

from pydantic import BaseModel

from primsel.simulator.apps.exceptions import SearchError
from primsel.simulator.apps.time_utils import (
    TimeExpressions,
    TimeInterval,
    combine,
    get_next_dow,
    now_,
    parse_time_string,
)
from primsel.simulator.matching import regex_first_match
from primsel.simulator.state import get_current_context

__all__ = [
    "ConferenceRoom",
    "RoomAvailability",
    "find_available_time_slots",
    "room_booking_default_time_window",
    "search_conference_room",
    "summarise_availability",
    # re-exports that programs use without importing them
    "TimeExpressions",
    "TimeInterval",
    "combine",
    "datetime",
    "get_next_dow",
    "now_",
    "parse_time_string",
]


class ConferenceRoom(BaseModel):
    """A bookable meeting room.

    Attributes
    ----------
    room_name : str
        The room's name, e.g. ``"Room 1"``; pass it to ``find_available_time_slots``.
    capacity : int
        Number of people the room seats.

    Rooms come from ``search_conference_room`` (as ``RoomAvailability.room``); construct one with
    keyword arguments only, e.g. to compare: ``ConferenceRoom(room_name="Room 1", capacity=10)``.
    """

    room_name: str
    capacity: int


class RoomAvailability(BaseModel):
    """One room and the periods in which it is free, as returned by ``search_conference_room``.

    Attributes
    ----------
    room : ConferenceRoom
        The room (name and capacity).
    free_slots : list of TimeInterval
        The free periods inside the searched time window, in search order; ``[]`` when the room is
        fully booked.

    Read the fields by name (``availability.room.room_name``, ``availability.free_slots``); the
    object is not a tuple. Construct with keyword arguments only.
    """

    room: ConferenceRoom
    free_slots: list[TimeInterval]


def _working_day_intervals(
    time_window: list[TimeInterval] | list[datetime.date],
) -> list[TimeInterval]:
    """Turn a list of dates into their working-day intervals (09:06-17:10); intervals pass through.

    The type of the first element decides. Raises IndexError on an empty list.
    """
    if isinstance(time_window[0], datetime.date):
        day_start = parse_time_string(TimeExpressions.StartOfWorkDay)
        day_end = parse_time_string(TimeExpressions.EndOfWorkDay)
        return [TimeInterval(combine(day, day_start), combine(day, day_end)) for day in time_window]
    return list(time_window)


def _free_periods(room_id: str, intervals: list[TimeInterval]) -> list[TimeInterval]:
    """The parts of ``intervals`` not covered by the room's bookings (bookings swept in insertion order)."""
    table = get_current_context().table("CONFERENCE_ROOM_BOOKINGS")
    bookings = [row for row in table if row["room_id"] == room_id]
    free: list[TimeInterval] = []
    for start, end in intervals:
        overlapping = [row for row in bookings if row["start"] <= end and row["end"] >= start]
        if not overlapping:
            free.append(TimeInterval(start, end))
            continue
        cursor = start
        for booking in overlapping:
            if cursor < booking["start"]:
                free.append(TimeInterval(cursor, booking["start"]))
            cursor = max(cursor, booking["end"])
        if cursor < end:
            free.append(TimeInterval(cursor, end))
    return free


def find_available_time_slots(
    room_name: str, time_window: list[TimeInterval] | list[datetime.date]
) -> list[TimeInterval]:
    """The free periods of one named conference room within the given times.

    Use it when the request names a room ("is Room 2 free tomorrow afternoon?"); to find any
    suitable room use ``search_conference_room`` instead.

    Parameters
    ----------
    room_name : str
        The room's name, searched case-insensitively as a substring (``"room 1"`` finds
        "Room 1"; the text is used as a regular expression); the first room created that
        matches is used.
    time_window : list of TimeInterval, or list of datetime.date
        The periods to check. A list of dates stands for the working hours (09:06-17:10) of each
        date. Must not be empty.

    Returns
    -------
    list of TimeInterval
        The unbooked parts of each given period, in the order of the given periods (a period with
        no booking comes back whole). ``[]`` when fully booked.

    Raises
    ------
    SearchError
        No room has a matching name.
    IndexError
        ``time_window`` is empty.
    """
    intervals = _working_day_intervals(time_window)
    rooms = get_current_context().table("CONFERENCE_ROOMS")
    index = regex_first_match(room_name, [row["room_name"] for row in rooms])
    if index is None:
        raise SearchError(f"Room '{room_name}' not found")
    return _free_periods(rooms[index]["room_id"], intervals)


def room_booking_default_time_window() -> TimeInterval:
    """The default period to search for rooms when the request gives no time: now to the end of the work week.

    Returns
    -------
    TimeInterval
        From now (2024-06-25 09:06 in the simulation) to 17:10 on the next Friday. Wrap it in a
        list to pass it on: ``search_conference_room([room_booking_default_time_window()])``.
    """
    end_of_day = parse_time_string(TimeExpressions.EndOfWorkDay)
    return TimeInterval(now_(), combine(get_next_dow("Friday"), end_of_day))


def search_conference_room(
    time_constraints: list[TimeInterval] | list[datetime.date], capacity: int | None = None
) -> list[RoomAvailability]:
    """Find conference rooms and when each is free, optionally only rooms with enough seats.

    Use it to pick a meeting room for a time or a number of people; inspect ``free_slots`` of
    each result (e.g. with ``TimeInterval.includes``) to choose one that is free when needed.

    Parameters
    ----------
    time_constraints : list of TimeInterval, or list of datetime.date
        The periods to check. A list of dates stands for the working hours (09:06-17:10) of each
        date. Must not be empty.
    capacity : int, optional
        Minimum number of seats; rooms with fewer seats are left out. None: all rooms.

    Returns
    -------
    list of RoomAvailability
        One entry per room (in the order rooms were created), fully booked rooms included with
        ``free_slots == []``. ``[]`` when no room has the capacity.

    Raises
    ------
    IndexError
        ``time_constraints`` is empty (and some room has the capacity).
    """
    rooms = list(get_current_context().table("CONFERENCE_ROOMS"))
    if capacity is not None:
        rooms = [row for row in rooms if row["capacity"] >= capacity]
        if not rooms:
            return []
    intervals = _working_day_intervals(time_constraints)
    # Each room is looked up again by its name, exactly as a program would do it.
    return [
        RoomAvailability(
            room=ConferenceRoom(room_name=row["room_name"], capacity=row["capacity"]),
            free_slots=find_available_time_slots(row["room_name"], intervals),
        )
        for row in rooms
    ]


def summarise_availability(schedule: list[RoomAvailability], room_name: str | None = None) -> str:
    """Describe room availabilities (from ``search_conference_room``) as text for the user.

    Parameters
    ----------
    schedule : list of RoomAvailability
    room_name : str or None, optional
        Not supported: leave it None and filter ``schedule`` yourself (a name together with a
        non-empty schedule raises TypeError).

    Returns
    -------
    str
        ``"No rooms found!"`` for an empty schedule; otherwise one block per room, separated by a
        blank line: ``"Room: Room 1 (Capacity: 10)\\n"`` followed by one line
        ``"  Available: 2024-06-26 09:00 to 2024-06-26 10:00\\n"`` per free slot, or
        ``"   Fully booked!\\n"`` when it has none.

    Raises
    ------
    TypeError
        ``room_name`` is given and ``schedule`` is not empty.
    """
    if room_name is not None and schedule:
        raise TypeError("summarise_availability cannot filter by room_name; filter the schedule list instead")
    if not schedule:
        return "No rooms found!"
    blocks = []
    for entry in schedule:
        block = f"Room: {entry.room.room_name} (Capacity: {entry.room.capacity})\n"
        if entry.free_slots:
            for slot in entry.free_slots:
                block += f"  Available: {slot.start:%Y-%m-%d %H:%M} to {slot.end:%Y-%m-%d %H:%M}\n"
        else:
            block += "   Fully booked!\n"
        blocks.append(block)
    return "\n".join(blocks)
