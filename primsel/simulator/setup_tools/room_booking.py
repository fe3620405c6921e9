"""Setup tools that create conference rooms and their bookings."""

import datetime
import uuid

from primsel.simulator.apps.time_utils import TimeInterval
from primsel.simulator.state import get_current_context

__all__ = [
    "create_booking",
    "create_room",
    "simulate_conference_room",
    # re-exports that setup programs use without importing them (datetime is the module)
    "TimeInterval",
    "datetime",
]


def create_room(room_name: str, capacity: int) -> str:
    """Append a CONFERENCE_ROOMS row and return its new room id."""
    room_id = str(uuid.uuid4())
    get_current_context().table("CONFERENCE_ROOMS").append(
        {"room_id": room_id, "capacity": capacity, "room_name": room_name}
    )
    return room_id


def create_booking(room_id: str, start: datetime.datetime, end: datetime.datetime) -> str:
    """Book room ``room_id`` from ``start`` to ``end`` (a CONFERENCE_ROOM_BOOKINGS row); return the booking id."""
    booking_id = str(uuid.uuid4())
    get_current_context().table("CONFERENCE_ROOM_BOOKINGS").append(
        {"room_id": room_id, "booking_id": booking_id, "start": start, "end": end}
    )
    return booking_id


def simulate_conference_room(
    room_name: str,
    capacity: int,
    bookings: dict[datetime.date, list[TimeInterval]] | None = None,
) -> None:
    """Create a room and book it for every interval of ``bookings``.

    Parameters
    ----------
    room_name : the room's name.
    capacity : number of seats.
    bookings : ``{date: [TimeInterval, ...]}``; the keys are ignored, every interval (in dict
        order, then list order) becomes one booking. None: no bookings.
    """
    room_id = create_room(room_name, capacity)
    if bookings is None:
        return
    for intervals in bookings.values():
        for start, end in intervals:
            create_booking(room_id, start, end)
