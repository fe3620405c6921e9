"""Calendar tools for setup programs: filling calendars and their search settings.

Not part of the assistant library: only state-initialisation programs use them.
"""

from __future__ import annotations

import uuid
from copy import deepcopy

from primsel.simulator.apps.company_directory import Employee
from primsel.simulator.apps.work_calendar import (
    Event,
    _event_to_row,
    add_event,
    expand_to_instances,
    validate_starts_at,
)
from primsel.simulator.state import get_current_context

__all__ = [
    "RuntimeSetupError",
    "simulate_user_calendar",
    "simulate_employee_calendar",
    "add_event",
    "deepcopy",
    "Employee",
    "Event",
]


class RuntimeSetupError(Exception):
    """An event given to a calendar setup tool was already written somewhere."""


def simulate_user_calendar(events: list[Event]) -> list[str]:
    """Add each event to the user's calendar with ``add_event``; returns the event ids in order.

    All ``add_event`` semantics apply: ids and default end times are set on the given objects,
    and an object whose id is already stored updates that event.
    """
    return [add_event(event) for event in events]


def simulate_employee_calendar(employee: Employee, events: list[Event]) -> list[str]:
    """Write events into ``employee``'s calendar (read back with ``get_calendar``).

    A new event gets an ``event_id`` on the given object and is stored without a default end
    time; recurring events are stored as the parent row (written before expansion) followed by
    their instances. An event that already has an id (e.g. it was given to
    ``simulate_user_calendar`` first) is stored as a deep copy with a new id and without
    ``employee`` among its attendees; the given object is left unchanged.

    Returns
    -------
    list[str] : the ids stored, one per event.

    Raises
    ------
    EventDefinitionError : a recurring event lacks ``starts_at`` or ``ends_at``.
    ValueError : a reused event does not list ``employee`` among its attendees.
    AttributeError : a reused event has ``attendees=None``.
    """
    ids = []
    for event in events:
        validate_starts_at(event)
        try:
            ids.append(_write_new_event(employee, event))
        except RuntimeSetupError:
            copy = deepcopy(event)
            copy.attendees.remove(employee)
            copy.event_id = None
            ids.append(_write_new_event(employee, copy))
    return ids


def _write_new_event(employee: Employee, event: Event) -> str:
    """Store an id-less event (and its instances) in ``employee``'s calendar; returns its new id.

    Raises RuntimeSetupError when the event already carries an id.
    """
    if event.event_id is not None:
        raise RuntimeSetupError(f"event {event.event_id!r} was already written")
    event.event_id = str(uuid.uuid4())
    rows = [_event_to_row(event)]
    rows.extend(_event_to_row(instance) for instance in expand_to_instances(event) or [])
    for row in rows:
        row["calendar_id"] = employee.employee_id
    get_current_context().table("SHARED_CALENDARS").extend(rows)
    return event.event_id
