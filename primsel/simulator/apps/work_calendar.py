"""The device user's work calendar.

Events of the device user are rows of the USER_CALENDAR table; events of other employees are rows
of SHARED_CALENDARS (with a ``calendar_id``). A recurring event is stored as its *parent* row
followed by one row per expanded *instance*. Rows are plain copies: every reader builds new
``Event`` objects, with the five employee-list fields sorted by employee name (spec 2.5).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable
from copy import deepcopy
from enum import StrEnum, auto
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

from primsel.simulator.apps.company_directory import Employee, _employee_from_id
from primsel.simulator.apps.exceptions import EventDefinitionError, SearchError
from primsel.simulator.apps.time_utils import (
    Duration,
    EventFrequency,
    RepetitionSpec,
    TimeExpressions,
    TimeInterval,
    TimeUnits,
    _repetition_schedule,
    combine,
    get_next_dow,
    now_,
    parse_time_string,
)
from primsel.simulator.matching import fuzzy_match
from primsel.simulator.state import get_current_context

__all__ = [
    # defined here
    "ShowAsStatus",
    "CalendarSearchSettings",
    "Document",
    "Event",
    "DEFAULT_EVENT_DURATION_MINUTES",
    "EMPLOYEE_FIELDS",
    "ID_FIELDS",
    "STRUCT_FIELDS",
    "get_default_preparation_time",
    "get_search_settings",
    "add_event",
    "delete_event",
    "find_events",
    "find_past_events",
    "get_calendar",
    "find_available_slots",
    "share_calendar",
    "summarise_calendar",
    "provide_event_details",
    "get_event_ids",
    "get_event_instances",
    "get_event_by_id",
    "expand_to_instances",
    "validate_starts_at",
    # re-exports programs rely on
    "Any",
    "datetime",
    "deepcopy",
    "Duration",
    "Employee",
    "get_next_dow",
    "now_",
    "parse_time_string",
    "RepetitionSpec",
    "TimeExpressions",
    "TimeInterval",
    "TimeUnits",
]

#: Length in minutes given to an event added without an end time.
DEFAULT_EVENT_DURATION_MINUTES = 16

#: Event fields holding lists of employees (stored as name-sorted employee ids).
EMPLOYEE_FIELDS = (
    "attendees",
    "attendees_to_avoid",
    "optional_attendees",
    "declined_by",
    "tentative_attendees",
)
#: Event fields holding identifiers.
ID_FIELDS = ("event_id", "recurrent_event_id")
#: Event fields holding structured values.
STRUCT_FIELDS = ("repeats", "attachments")

_USER_CALENDAR = "USER_CALENDAR"
_SHARED_CALENDARS = "SHARED_CALENDARS"
_USER_METADATA = "USER_METADATA"


class ShowAsStatus(StrEnum):
    """How an event shows the attendee's availability in the calendar.

    Members (value in brackets):

    - ``Busy`` ("busy"): the time is taken; the default for new events.
    - ``OutOfOffice`` ("outofoffice"): the person is away (holiday, leave, travel).
    - ``Free`` ("free"): the event does not block the time; ``find_available_slots``
      ignores such events.

    Set it with ``Event(..., show_as_status=ShowAsStatus.OutOfOffice)``; read it from
    ``event.show_as_status``. A member equals its value string (``ShowAsStatus.Busy == "busy"``).
    """

    Busy = auto()
    OutOfOffice = auto()
    Free = auto()


class CalendarSearchSettings(NamedTuple):
    """Daily time window in which ``find_available_slots`` looks for free time.

    Obtain the user's settings with ``get_search_settings("work")`` (09:06 to 17:10), or build
    your own to search outside working hours, e.g.
    ``CalendarSearchSettings(earliest_free_slot_start=time_by_hm(8, 0, "am"),
    latest_free_slot_finish=time_by_hm(8, 0, "pm"))``.

    Attributes
    ----------
    earliest_free_slot_start : datetime.time
        Time of day at which a free slot may start at the earliest.
    latest_free_slot_finish : datetime.time
        Time of day at which a free slot on an otherwise free stretch ends.
    """

    earliest_free_slot_start: datetime.time
    latest_free_slot_finish: datetime.time


class Document(BaseModel):
    """A file attached to an event (type of ``Event.attachments``).

    Attributes
    ----------
    title, content : str or None.
    author : list of author names, or None.
    num_pages : int or None.
    last_modified, created_on : datetime.datetime or None.
    is_starred : bool, default False.
    folder : str, default "InternalStorage".
    """

    title: str | None = None
    content: str | None = None
    author: list[str] | None = None
    num_pages: int | None = None
    last_modified: datetime.datetime | None = None
    created_on: datetime.datetime | None = None
    is_starred: bool = False
    folder: str = "InternalStorage"


class Event(BaseModel):
    """A calendar event (meeting, appointment, holiday, reminder-like block of time).

    Build it with keyword arguments only; every field is optional. Create one to schedule
    something with ``add_event``; events returned by ``find_events``, ``find_past_events`` and
    ``get_calendar`` are new copies, so change their fields and call ``add_event`` again to save.

    Attributes
    ----------
    attendees : list[Employee] or None
        People invited (the user is not added implicitly). Stored and returned sorted by name.
    attendees_to_avoid, optional_attendees, declined_by, tentative_attendees : list[Employee] or None
        Other lists of employees (people who must not attend, optional invitees, people who
        declined, people who answered "maybe"); also returned sorted by name.
    subject, location, notes, video_link : str or None
        Title, place (e.g. a room name), free-text notes, video-conference link.
    starts_at, ends_at : datetime.datetime or None
        Start and end. ``add_event`` sets a missing end to start + 16 minutes.
    show_as_status : ShowAsStatus, default ``ShowAsStatus.Busy``.
    event_importance : "normal" (default) or "high".
    repeats : RepetitionSpec or None
        Recurrence rule; set it to make a recurring series (``starts_at`` is then required).
    attachments : list[Document] or None.
    event_id : str or None
        Assigned by ``add_event``; identifies the stored event (keep it to update or delete).
    recurrent_event_id, original_starts_at : str / datetime.datetime or None
        For one occurrence of a recurring series: the parent's id and start.

    ``event.duration`` is a ``Duration`` in minutes (needs both ends); ``str(event)`` is a
    readable one-line description. Two events are ``==`` when every field matches, ids
    included, so a new event never equals a stored one.

    Example: ``Event(subject="1:1", attendees=[alice], starts_at=start, ends_at=start_plus_30)``
    """

    attendees: list[Employee] | None = None
    attendees_to_avoid: list[Employee] | None = None
    optional_attendees: list[Employee] | None = None
    declined_by: list[Employee] | None = None
    tentative_attendees: list[Employee] | None = None
    subject: str | None = None
    location: str | None = None
    starts_at: datetime.datetime | None = None
    ends_at: datetime.datetime | None = None
    show_as_status: ShowAsStatus = ShowAsStatus.Busy
    event_importance: Literal["normal", "high"] = "normal"
    repeats: RepetitionSpec | None = None
    notes: str | None = None
    video_link: str | None = None
    attachments: list[Document] | None = None
    event_id: str | None = None
    recurrent_event_id: str | None = None
    original_starts_at: datetime.datetime | None = None

    @property
    def duration(self) -> Duration:
        """Length of the event, ``Duration(minutes as float, TimeUnits.Minutes)``.

        Raises
        ------
        TypeError : ``starts_at`` or ``ends_at`` is None.
        """
        if self.starts_at is None or self.ends_at is None:
            raise TypeError("Event.duration needs both starts_at and ends_at")
        return Duration((self.ends_at - self.starts_at).total_seconds() / 60, TimeUnits.Minutes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            raise TypeError(f"an Event can only be compared with an Event, not {type(other).__name__}")
        for name in type(self).model_fields:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name in EMPLOYEE_FIELDS:
                if mine is None or theirs is None:
                    if not (mine is None and theirs is None):
                        return False
                elif _by_name(mine) != _by_name(theirs):
                    return False
            elif mine != theirs:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        start = _format_moment(self.starts_at)
        if self.attendees:
            who = ", ".join(employee.name for employee in self.attendees)
        else:
            who = "None"
        if self.subject:
            if who == "None":
                text = f"'{self.subject}' starting at: {start}, ending at {_format_moment(self.ends_at)}"
            else:
                text = f"'{self.subject}' with {who} starting at: {start} for {self._duration_text()}"
        else:
            text = f"Meeting with {who} starting at: {start} for {self._duration_text()}"
        if self.location is not None:
            text += f" (location: {self.location})"
        return text

    def _duration_text(self) -> str:
        if self.starts_at is None or self.ends_at is None:
            return "N/A"
        minutes = int((self.ends_at - self.starts_at).total_seconds() // 60)
        hours, minutes = divmod(minutes, 60)
        if hours == 0 and minutes == 0:
            return "less than a minute"
        if hours == 0:
            return f"{minutes} minutes"
        if minutes == 0:
            return f"{hours} hours"
        return f"{hours} hours and {minutes} minutes"


def _format_moment(moment: datetime.datetime | None) -> str:
    return "N/A" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def _by_name(employees: list[Employee]) -> list[Employee]:
    return sorted(employees, key=lambda employee: employee.name)


# ---------------------------------------------------------------------------------------------
# Storage round trip (spec 2.5)
# ---------------------------------------------------------------------------------------------


def _as_datetime(value: Any) -> Any:
    """A plain date becomes that date at 00:00; anything else is kept."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return datetime.datetime.combine(value, datetime.time())
    return value


def _spec_to_record(spec: RepetitionSpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    record = {}
    for spec_field in dataclasses.fields(spec):
        value = getattr(spec, spec_field.name)
        if spec_field.name in ("recurs_until", "occurrence_on_date"):
            value = _as_datetime(value)
        elif spec_field.name == "exclude_occurrence" and value is not None:
            value = [_as_datetime(item) for item in value]
        elif isinstance(value, list):
            value = list(value)
        record[spec_field.name] = value
    return record


def _spec_from_record(record: dict[str, Any] | None) -> RepetitionSpec | None:
    if record is None or all(value is None for value in record.values()):
        return None
    values = {name: (list(value) if isinstance(value, list) else value) for name, value in record.items()}
    if values.get("frequency") is not None:
        values["frequency"] = EventFrequency(values["frequency"])
    return RepetitionSpec(**values)


def _naive_utc(value: Any) -> Any:
    """A time-zone-aware datetime as the naive datetime of the same instant in UTC; else unchanged.

    The calendar stores naive times only (the reference's storage converts aware ones this way:
    10:00+02:00 is stored as 08:00).
    """
    if isinstance(value, datetime.datetime) and value.tzinfo is not None and value.utcoffset() is not None:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


def _event_to_row(event: Event) -> dict[str, Any]:
    """A stored copy of ``event``: employee lists become name-sorted id lists, times naive."""
    row: dict[str, Any] = {}
    for name in Event.model_fields:
        value = getattr(event, name)
        if name in EMPLOYEE_FIELDS:
            value = None if value is None else [employee.employee_id for employee in _by_name(value)]
        elif name == "repeats":
            value = _spec_to_record(value)
            if value is not None:
                value = {key: ([_naive_utc(v) for v in item] if isinstance(item, list) else _naive_utc(item))
                         for key, item in value.items()}  # fmt: skip
        elif name == "attachments":
            value = deepcopy(value)
        row[name] = _naive_utc(value)
    return row


def _event_from_row(row: dict[str, Any]) -> Event:
    """A new ``Event`` built from a stored row (employees looked up in the directory)."""
    values: dict[str, Any] = {}
    for name in Event.model_fields:
        value = row[name]
        if name in EMPLOYEE_FIELDS:
            value = None if value is None else [_employee_from_id(employee_id) for employee_id in value]
        elif name == "repeats":
            value = _spec_from_record(value)
        elif name == "attachments":
            value = deepcopy(value)
        elif name == "show_as_status" and value is not None:
            value = ShowAsStatus(value)
        values[name] = value
    return Event.model_construct(**values)


def _table(name: str) -> list[dict[str, Any]]:
    return get_current_context().table(name)


def _remove_rows(table: list[dict[str, Any]], keep: Callable[[dict[str, Any]], bool]) -> None:
    """Drop, in place, the rows for which ``keep`` is false (the others keep their order)."""
    table[:] = [row for row in table if keep(row)]


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


def get_default_preparation_time() -> Duration:
    """The user's usual preparation time before a meeting: 30 minutes.

    Use it when a request asks to block "time to prepare" (or similar) without saying how much.

    Returns
    -------
    Duration
        ``Duration(30, TimeUnits.Minutes)``.
    """
    return Duration(30, TimeUnits.Minutes)


def get_search_settings(calendar_key: Literal["work", "default"]) -> CalendarSearchSettings:
    """The user's working-hours window used to search for free time.

    Pass the result to ``find_available_slots`` (which uses the same window when given none).

    Parameters
    ----------
    calendar_key : "work" or "default"
        Which settings to read; both give the same window.

    Returns
    -------
    CalendarSearchSettings
        earliest_free_slot_start 09:06 and latest_free_slot_finish 17:10.

    Raises
    ------
    ValueError : any other key.
    """
    if calendar_key.lower() not in ("work", "default"):
        raise ValueError(f"unknown calendar key {calendar_key!r}: expected 'work' or 'default'")
    return CalendarSearchSettings(
        parse_time_string(TimeExpressions.StartOfWorkDay), parse_time_string(TimeExpressions.EndOfWorkDay)
    )


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def validate_starts_at(event: Event) -> None:
    """Check that a recurring event has a start.

    Raises
    ------
    EventDefinitionError : ``event.repeats`` is set and ``event.starts_at`` is None.
    """
    if event.repeats is not None and event.starts_at is None:
        raise EventDefinitionError("a recurring event needs starts_at")


def expand_to_instances(event: Event) -> list[Event] | None:
    """The occurrences of a recurring event as new ``Event`` objects (nothing is written).

    Each instance is a deep copy with a new ``event_id``, ``repeats=None``, start = the
    occurrence, the parent's length, ``recurrent_event_id`` = the parent's id and
    ``original_starts_at`` = the parent's start. Unbounded rules give 23 occurrences.
    Normalises ``event.repeats.recurs_until`` in place (spec 4.12).

    Returns
    -------
    list[Event] in occurrence order, or None when ``event.repeats`` is None.

    Raises
    ------
    EventDefinitionError : the event lacks ``starts_at`` or ``ends_at``.
    """
    if event.repeats is None:
        return None
    if event.starts_at is None or event.ends_at is None:
        raise EventDefinitionError("a recurring event needs both starts_at and ends_at")
    length = event.ends_at - event.starts_at
    occurrences = _repetition_schedule(event.starts_at.time(), event.repeats, event.starts_at.date())
    instances = []
    for occurrence in occurrences:
        instance = deepcopy(event)
        instance.event_id = str(uuid.uuid4())
        instance.repeats = None
        instance.starts_at = occurrence
        instance.ends_at = occurrence + length
        instance.recurrent_event_id = event.event_id
        instance.original_starts_at = event.starts_at
        instances.append(instance)
    return instances


def add_event(event: Event) -> str:
    """Save an event in the user's calendar (create it, or update it if it is already saved).

    Use it to schedule, and also to save changes: an event read with ``find_events`` (or one
    you added before) keeps its ``event_id``, so adding it again replaces the stored version
    instead of creating a duplicate. Re-adding one object in a loop therefore leaves one event.
    An event with ``repeats`` set is stored with all its occurrences (23 when unbounded).

    Parameters
    ----------
    event : Event
        The event. The user is NOT added to ``attendees`` automatically.

    Returns
    -------
    str
        The event id.

    Raises
    ------
    EventDefinitionError : ``repeats`` is set but ``starts_at`` is missing.
    TypeError : a new event has neither ``starts_at`` nor ``ends_at``.

    Notes
    -----
    Changes the given object: a new event gets ``event_id`` and, when ``ends_at`` is None,
    ``ends_at = starts_at + 16 minutes`` (``DEFAULT_EVENT_DURATION_MINUTES``).

    Example: ``add_event(Event(subject="Review", attendees=[bob], starts_at=start, ends_at=end))``
    """
    validate_starts_at(event)
    known_ids = get_event_ids()
    if event.event_id is None:
        if event.ends_at is None:
            if event.starts_at is None:
                raise TypeError("add_event needs starts_at to set a default end time")
            event.ends_at = event.starts_at + datetime.timedelta(minutes=DEFAULT_EVENT_DURATION_MINUTES)
        event.event_id = str(uuid.uuid4())
    if event.event_id in known_ids:
        delete_event(event)
    instances = expand_to_instances(event) or []
    table = _table(_USER_CALENDAR)
    table.append(_event_to_row(event))
    table.extend(_event_to_row(instance) for instance in instances)
    return event.event_id


def delete_event(event: Event) -> None:
    """Remove an event from the user's calendar; for a recurring event, the whole series.

    Pass an event obtained from ``find_events`` / ``find_past_events`` (or one you added):
    it is identified by its ``event_id``. To change an event, modify it and call
    ``add_event`` instead of deleting and re-creating it.

    Parameters
    ----------
    event : Event
        A saved event of the user's calendar.

    Raises
    ------
    SearchError : the event has no ``event_id``, or no user-calendar event has that id
        (e.g. an event read from a colleague's calendar, or one already deleted).
    """
    if event.event_id is None:
        raise SearchError("cannot delete an event without event_id (it was never added)")
    table = _table(_USER_CALENDAR)
    if not any(row["event_id"] == event.event_id for row in table):
        raise SearchError(f"no event with id {event.event_id!r} in the user's calendar")
    _remove_rows(table, lambda row: row["event_id"] != event.event_id)
    _remove_rows(table, lambda row: row["recurrent_event_id"] != event.event_id)


def share_calendar(recipients: list[Employee]) -> None:
    """Give the listed employees access to the user's calendar.

    Parameters
    ----------
    recipients : list[Employee]
        The people to share with (e.g. from ``find_employee``); each call adds to earlier shares.

    Returns
    -------
    None
    """
    _table(_USER_METADATA).append(
        {"calendar_visible_to": sorted(employee.employee_id for employee in recipients)}
    )


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def get_event_ids(namespace: str | None = None) -> set[str]:
    """Ids of every row of USER_CALENDAR (or of the table named ``namespace``)."""
    return {row["event_id"] for row in _table(namespace or _USER_CALENDAR)}


def get_event_by_id(event_id: str) -> Event:
    """The user-calendar event with that id (a parent or an instance).

    Raises
    ------
    SearchError : no such event.
    """
    for row in _table(_USER_CALENDAR):
        if row["event_id"] == event_id:
            return _event_from_row(row)
    raise SearchError(f"no event with id {event_id!r} in the user's calendar")


def get_event_instances(event: Event) -> list[Event]:
    """The stored occurrences of a recurring user-calendar event, sorted by start.

    Raises
    ------
    SearchError : the event's id is not in the user's calendar.
    """
    table = _table(_USER_CALENDAR)
    if event.event_id is None or not any(row["event_id"] == event.event_id for row in table):
        raise SearchError(f"no event with id {event.event_id!r} in the user's calendar")
    instances = [_event_from_row(row) for row in table if row["recurrent_event_id"] == event.event_id]
    return sorted(instances, key=lambda instance: instance.starts_at)


def _search_user_calendar(attendees: list[Employee] | None, subject: str | None) -> list[Event]:
    """Parents and single events matching the filters, sorted by start (spec 7.3 steps 1-3)."""
    rows = [row for row in _table(_USER_CALENDAR) if row["recurrent_event_id"] is None]
    if attendees is not None or subject is not None:
        if attendees is not None:
            wanted = [employee.employee_id for employee in _by_name(attendees)]
            rows = [row for row in rows if row["attendees"] is not None and row["attendees"] == wanted]
        if subject:
            rows = [rows[i] for i in fuzzy_match(subject, [row["subject"] for row in rows])]
    events = [_event_from_row(row) for row in rows]
    return sorted(events, key=lambda event: event.starts_at)


def find_events(attendees: list[Employee] | None = None, subject: str | None = None) -> list[Event]:
    """Search the user's upcoming events (starting now or later) by attendees and/or subject.

    Use it to find meetings to reschedule, cancel, inspect or check for conflicts. For events
    that already started or ended use ``find_past_events``; for a colleague's calendar use
    ``get_calendar``. Without arguments it returns every upcoming event.

    Parameters
    ----------
    attendees : list[Employee], optional
        Keeps events whose attendee list is EXACTLY this set of people (order ignored), not
        events that merely include them: ``[alice]`` does not find a meeting with Alice and
        Bob. Include the user if the user was stored as an attendee.
    subject : str, optional
        Fuzzy, case-insensitive match on the subject ("sync" finds "Project sync").

    Returns
    -------
    list[Event]
        Sorted by ``starts_at``; ``[]`` if nothing matches. A recurring series is returned
        once, as its first event, and only if that first event is upcoming.
    """
    now = now_()
    return [event for event in _search_user_calendar(attendees, subject) if event.starts_at >= now]


def find_past_events(attendees: list[Employee] | None = None, subject: str | None = None) -> list[Event]:
    """Search the user's past events (started before now) by attendees and/or subject.

    The counterpart of ``find_events`` for history ("when did I last meet ...?"); events in
    progress count as past. Filters work exactly as in ``find_events``.

    Parameters
    ----------
    attendees : list[Employee], optional
        Exact attendee-set match (order ignored; ``[alice]`` does not find a meeting with
        Alice and Bob).
    subject : str, optional
        Fuzzy, case-insensitive match on the subject.

    Returns
    -------
    list[Event]
        Sorted by ``starts_at`` (oldest first, so the latest is ``[-1]``); ``[]`` if none.
    """
    now = now_()
    return [event for event in _search_user_calendar(attendees, subject) if event.starts_at < now]


def get_calendar(employee: Employee) -> list[Event]:
    """All events in another employee's calendar (to check a colleague's availability).

    Parameters
    ----------
    employee : Employee
        The calendar's owner. The user's own events are found with ``find_events``.

    Returns
    -------
    list[Event]
        Every event in storage order, unsorted and unfiltered: past and future, and each
        occurrence of a recurring event as its own entry. ``[]`` when the employee has no
        calendar. To find the colleague's free time on a day, pass the result to
        ``find_available_slots(events, date=day)``.
    """
    return [
        _event_from_row(row)
        for row in _table(_SHARED_CALENDARS)
        if row["calendar_id"] == employee.employee_id
    ]


# ---------------------------------------------------------------------------------------------
# Free time and text summaries
# ---------------------------------------------------------------------------------------------


def find_available_slots(
    events: list[Event],
    search_settings: CalendarSearchSettings | None = None,
    date: datetime.date | None = None,
) -> list[TimeInterval]:
    """Free time between the given events, day by day, within the daily search window.

    Use it to find when someone (or several people: pass their events together) is free.
    Events with ``show_as_status == ShowAsStatus.Free`` do not block time.

    Parameters
    ----------
    events : list[Event]
        Busy events, e.g. from ``find_events()`` and/or ``get_calendar(colleague)``.
    search_settings : CalendarSearchSettings, optional
        Daily window; default 09:06-17:10 (``get_search_settings("default")``).
    date : datetime.date, optional
        Restrict the answer to this day.

    Returns
    -------
    list[TimeInterval]
        Sorted by start. Only the days from the first event's start to the last event's end
        are covered (with ``date``: that day only); a day without events there is fully free.
        Slots are not checked against the current time, and a slot may end after the window
        when the next event starts after it. With no events (on ``date``) the result is the
        whole window of ``date``, or of every day from today to next Friday.
    """
    low, high = search_settings if search_settings is not None else get_search_settings("default")
    busy_events = [event for event in events if event.show_as_status != ShowAsStatus.Free]

    def on_day(event: Event, day: datetime.date) -> bool:
        return event.starts_at.date() <= day <= event.ends_at.date()

    def whole_days(first: datetime.date, last: datetime.date) -> list[datetime.date]:
        return [first + datetime.timedelta(days=k) for k in range((last - first).days + 1)]

    if not busy_events or (date is not None and not any(on_day(event, date) for event in busy_events)):
        days = [date] if date is not None else whole_days(now_().date(), get_next_dow("Friday"))
        return [TimeInterval(combine(day, low), combine(day, high)) for day in days]

    first = min(event.starts_at for event in busy_events).date()
    last = max(event.ends_at for event in busy_events).date()
    search_start = combine(first, low)
    slots = []
    for day in whole_days(first, last):
        if date is not None and day != date:
            continue
        day_start, day_end = combine(day, low), combine(day, high)
        busy = sorted((event.starts_at, event.ends_at) for event in busy_events if on_day(event, day))
        cursor = max(day_start, search_start)
        for start, end in busy:
            if cursor < start:
                slots.append(TimeInterval(cursor, start))
            cursor = max(cursor, end)
        if cursor < day_end:
            slots.append(TimeInterval(cursor, day_end))
    return sorted(slots, key=lambda slot: slot.start)


def summarise_calendar(events: list[Event], name: str | None = None) -> str:
    """A one-sentence summary of a list of events: how many, and the first one in detail.

    Parameters
    ----------
    events : list[Event]
        Events to summarise, in the order to report (the first one is described; not sorted).
    name : str, optional
        Owner's name for the text ("Bob's calendar"); None means the user ("your calendar").

    Returns
    -------
    str
        "There are no events in your calendar." or
        "There are 2 events in Bob's calendar. Here are the details of the first: <event>".
    """
    owner = "your calendar" if name is None else f"{name}'s calendar"
    if not events:
        return f"There are no events in {owner}."
    return f"There are {len(events)} events in {owner}. Here are the details of the first: {events[0]}"


def provide_event_details(events: list[Event]) -> str:
    """A text describing each event (subject, attendees, start, length, location) for the user.

    Use it to answer "what is on my calendar ...?" after finding the events.

    Parameters
    ----------
    events : list[Event]
        Events to describe; they are listed by start time.

    Returns
    -------
    str
        "There are no events that satisfy these criteria" when empty; the event's description
        for one event; otherwise one line per event numbered from 0 ("0. ...\\n1. ...").
    """
    if not events:
        return "There are no events that satisfy these criteria"
    ordered = sorted(events, key=lambda event: event.starts_at)
    if len(ordered) == 1:
        return str(ordered[0])
    return "\n".join(f"{index}. {event}" for index, event in enumerate(ordered))
