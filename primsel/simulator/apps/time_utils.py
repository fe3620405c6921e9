"""Dates, times, durations and recurrence rules of the assistant library.

The simulated clock is fixed: :func:`now_` is always Tuesday 2024-06-25 09:06 (naive, no time
zone), and every "today" below means ``now_().date()``. The wall clock is never read.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum, StrEnum, auto
from itertools import islice
from typing import Literal, NamedTuple

from dateutil import rrule
from dateutil.relativedelta import relativedelta

from primsel.simulator.apps.exceptions import ParseError

__all__ = [
    # enums and the weekday alias
    "TimeExpressions",
    "DateRanges",
    "DateExpressions",
    "TimeUnits",
    "DateTimeClauseOperators",
    "ComparisonResult",
    "EventFrequency",
    "weekdays",
    # value types
    "Duration",
    "TimeInterval",
    "DateRange",
    "RepetitionSpec",
    # functions
    "now_",
    "get_weekday",
    "get_weekday_ordinal",
    "this_week_dates",
    "parse_time_string",
    "parse_date_string",
    "time_by_hm",
    "date_by_mdy",
    "combine",
    "replace",
    "get_next_dow",
    "get_prev_dow",
    "parse_duration_to_calendar",
    "parse_durations_to_date_interval",
    "convert",
    "sum_time_units",
    "compare_with_fixed_duration",
    "modify",
    "intervals_overlap",
    "cast_to_timedelta",
    # constants and re-exports programs rely on
    "MAX_EVENT_RECURRENCES",
    "datetime",
]

#: The fixed "now" of every simulated world.
_NOW = datetime.datetime(2024, 6, 25, 9, 6)

#: Most occurrences stored for a recurrence rule with neither an end date nor a count.
MAX_EVENT_RECURRENCES = 23

_WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

weekdays = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

#: Documentation of the type aliases (an alias cannot carry a docstring).
_ALIAS_DOCS = {
    "weekdays": """Name of a day of the week: a capitalised English string.

One of "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday". It is
the type of the ``day_of_week`` argument of ``get_next_dow`` and ``get_prev_dow`` and of the
result of ``get_weekday``. Lower-case or abbreviated names ("friday", "Fri") are rejected.
Weekday indexes (``date.weekday()``, ``RepetitionSpec.which_weekday``) follow the same
order: "Monday" is 0 and "Sunday" is 6.
""",
}


# ---------------------------------------------------------------------------------------------
# Enumerations
# ---------------------------------------------------------------------------------------------


class TimeExpressions(Enum):
    """Named times of day that a request may use instead of a clock time.

    Convert a member to a ``datetime.time`` with ``parse_time_string``; select one by name
    with ``TimeExpressions["Lunch"]`` or as an attribute ``TimeExpressions.Lunch``.

    Members
    -------
    Morning, LateMorning, Noon, Afternoon, LateAfternoon, Evening, Night, Midnight :
        parts of the day.
    Breakfast, Brunch, Lunch, Dinner : meal times.
    StartOfWorkDay, EndOfWorkDay : start and end of the working day (the bounds used
        when the library searches for free time during working hours).
    """

    Afternoon = 1
    Breakfast = 2
    Brunch = 3
    Dinner = 4
    StartOfWorkDay = 5
    EndOfWorkDay = 6
    Evening = 7
    Night = 8
    LateAfternoon = 9
    LateMorning = 10
    Lunch = 11
    Morning = 12
    Noon = 13
    Midnight = 14


class DateRanges(Enum):
    """Named multi-day periods relative to today (or to a given date).

    Resolve a member to its first and last date with ``parse_durations_to_date_interval``
    (returns a ``DateRange``). ``parse_duration_to_calendar`` takes the *name* of one of the
    last three (the string "NextWeek", "ThisMonth" or "NextMonth"), not the member.

    Members
    -------
    ThisWeekend : the coming Saturday and Sunday.
    NextWeek : Monday to Sunday of the following week.
    ThisMonth : first to last day of the current month.
    NextMonth : first to last day of the following month.
    """

    ThisWeekend = 1
    NextWeek = 2
    ThisMonth = 3
    NextMonth = 4


class DateExpressions(Enum):
    """Named single days relative to today; resolve one with ``parse_date_string``.

    Members
    -------
    Today, Tomorrow, Yesterday : today, the day after, the day before.
    FirstDayNextYear : 1 January of next year.
    ChristmasDay : 25 December of the current year.
    LastMonth : the last calendar day of the previous month (e.g. 31 May when today is in June).
    """

    Today = 1
    Tomorrow = 2
    Yesterday = 3
    FirstDayNextYear = 4
    ChristmasDay = 5
    LastMonth = 6


class TimeUnits(Enum):
    """Unit of a ``Duration``.

    Members
    -------
    Minutes, Hours, Days : fixed lengths (1 day = 24 hours = 1440 minutes).
    Months : calendar months; only ``modify`` accepts it (it moves a date by whole months).
        Comparing, converting, summing or overlap-testing a Months duration raises.
    """

    Hours = 1
    Minutes = 2
    Days = 3
    Months = 4


class DateTimeClauseOperators(Enum):
    """Direction of a shift in ``modify``.

    Members
    -------
    add : move later in time (e.g. "in 2 hours", "3 days after").
    subtract : move earlier in time (e.g. "30 minutes before", "a month ago").
    """

    add = 1
    subtract = 2


class ComparisonResult(Enum):
    """Outcome of ``compare_with_fixed_duration``: how an interval's length compares to a duration.

    Members
    -------
    GREATER : the interval is longer than the duration.
    SMALLER : the interval is shorter than the duration.
    EQUAL : both have the same length.
    """

    GREATER = "Greater"
    SMALLER = "Smaller"
    EQUAL = "Equal"


class EventFrequency(StrEnum):
    """How often a recurring event repeats; the ``frequency`` of a ``RepetitionSpec``.

    Members are strings equal to their lower-cased name.

    Members
    -------
    DAILY : every day (or every ``period`` days).
    WEEKLY : every week (or every ``period`` weeks).
    MONTHLY : every month (or every ``period`` months).
    YEARLY : every year (or every ``period`` years).
    """

    DAILY = auto()
    WEEKLY = auto()
    MONTHLY = auto()
    YEARLY = auto()


# ---------------------------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------------------------

_MINUTES_PER_UNIT = {TimeUnits.Hours: 60, TimeUnits.Minutes: 1, TimeUnits.Days: 1440}


class Duration(NamedTuple):
    """An amount of time: a number of minutes, hours, days or months.

    Use it for event lengths (``Event.duration``), for shifting datetimes with ``modify``,
    and for length tests (``compare_with_fixed_duration``, ``intervals_overlap``).

    Fields
    ------
    number : int | float, the amount (fractions allowed, e.g. 1.5 hours).
    unit : TimeUnits.

    Notes
    -----
    ``==``, ``<``, ``<=``, ``>``, ``>=`` compare the lengths in minutes, so
    ``Duration(60, TimeUnits.Minutes) == Duration(1, TimeUnits.Hours)`` is True. ``!=``
    compares the raw (number, unit) pairs instead, so those two are also ``!=``; write
    ``not a == b`` to test for different lengths. Comparing with a Months duration raises
    TypeError; comparing with anything that is not a Duration raises AttributeError.

    Example: ``Duration(30, TimeUnits.Minutes)`` or ``Duration(number=2, unit=TimeUnits.Hours)``.
    """

    number: int | float
    unit: TimeUnits

    def to_minutes(self) -> float:
        """Length in minutes as a float.

        Raises
        ------
        TypeError : the unit is Months (a month has no fixed length).
        """
        if self.unit not in _MINUTES_PER_UNIT:
            raise TypeError(f"cannot express a duration in {self.unit!r} as minutes")
        return float(self.number * _MINUTES_PER_UNIT[self.unit])

    def __eq__(self, other: object) -> bool:  # type: ignore[override]
        return self.to_minutes() == other.to_minutes()  # type: ignore[attr-defined]

    def __lt__(self, other: Duration) -> bool:  # type: ignore[override]
        return self.to_minutes() < other.to_minutes()

    def __le__(self, other: Duration) -> bool:  # type: ignore[override]
        return self.to_minutes() <= other.to_minutes()

    def __gt__(self, other: Duration) -> bool:  # type: ignore[override]
        return self.to_minutes() > other.to_minutes()

    def __ge__(self, other: Duration) -> bool:  # type: ignore[override]
        return self.to_minutes() >= other.to_minutes()

    # ``!=`` stays tuple inequality and the hash stays the tuple hash (spec 4.2).
    __ne__ = tuple.__ne__
    __hash__ = tuple.__hash__


class TimeInterval(NamedTuple):
    """A span of time between two datetimes, both ends included.

    Used for free slots, vacations, room bookings and search windows. Build one with
    ``TimeInterval(start=combine(d, t1), end=combine(d, t2))``. Equality is field by field (an
    interval also equals the plain tuple ``(start, end)``); ``start <= end`` is not checked.
    Measure it with ``convert`` and test overlaps with ``intervals_overlap``.

    Fields
    ------
    start : datetime.datetime, naive.
    end : datetime.datetime, naive.
    """

    start: datetime.datetime
    end: datetime.datetime

    def contains(self, dt: datetime.datetime) -> bool:
        """True if the datetime ``dt`` lies in the interval: ``start <= dt <= end``."""
        return self.start <= dt <= self.end

    def contains_date(self, d: datetime.date) -> bool:
        """True if the calendar day ``d`` is touched by the interval: ``start.date() <= d <= end.date()``."""
        return self.start.date() <= d <= self.end.date()

    def includes(self, other: TimeInterval) -> bool:
        """True if ``other`` lies entirely inside this interval (shared ends count as inside)."""
        return self.start <= other.start and self.end >= other.end


class DateRange(NamedTuple):
    """A period of whole days, from ``start`` to ``end`` inclusive.

    Returned by ``parse_durations_to_date_interval`` (e.g. for "next week" or "this weekend").
    To get a ``TimeInterval`` use ``TimeInterval(combine(r.start, t1), combine(r.end, t2))``.

    Fields
    ------
    start : datetime.date, first day.
    end : datetime.date, last day (inclusive).
    """

    start: datetime.date
    end: datetime.date


_RRULE_FREQUENCIES = {
    EventFrequency.DAILY: rrule.DAILY,
    EventFrequency.WEEKLY: rrule.WEEKLY,
    EventFrequency.MONTHLY: rrule.MONTHLY,
    EventFrequency.YEARLY: rrule.YEARLY,
}


@dataclass
class RepetitionSpec:
    """How an event repeats: the ``repeats`` field of an ``Event`` (a recurrence rule).

    Occurrences start at the event's start and follow ``frequency`` every ``period`` units,
    optionally restricted to some weekdays, month days or months. Give at most one of
    ``max_repetitions`` and ``recurs_until``; with neither, the calendar keeps only the
    first 23 occurrences.

    Fields
    ------
    frequency : EventFrequency, DAILY / WEEKLY / MONTHLY / YEARLY.
    period : int, repeat every ``period`` frequency units (2 with WEEKLY = every other week).
    recurs_until : date or datetime | None, last day an occurrence may fall on (inclusive).
        When occurrences are generated it is rewritten in place to that day at the event's
        start time.
    max_repetitions : int | None, total number of occurrences, the first one included.
    which_weekday : list[int] | None, weekdays to use, 0 = Monday ... 6 = Sunday.
    which_month_day : list[int] | None, days of the month, 1-based; -1 = last day.
    which_year_month : list[int] | None, months of the year, 1-12.
    bysetpos : list[int] | None, keep only the n-th match within each period (-1 = last),
        e.g. MONTHLY with which_weekday=[0, 1, 2, 3, 4], bysetpos=[-1] = last working day.
    exclude_occurrence : list[datetime] | None, occurrences to skip.
    occurrence_on_date : datetime | None, one more occurrence to skip (it removes, never adds).

    Example (every other Monday and Wednesday, 4 times):
    ``RepetitionSpec(frequency=EventFrequency.WEEKLY, period=2, which_weekday=[0, 2], max_repetitions=4)``
    """

    frequency: EventFrequency
    period: int = 1
    recurs_until: datetime.date | datetime.datetime | None = None
    max_repetitions: int | None = None
    which_weekday: list[int] | None = None
    which_month_day: list[int] | None = None
    which_year_month: list[int] | None = None
    bysetpos: list[int] | None = None
    exclude_occurrence: list[datetime.datetime] | None = None
    occurrence_on_date: datetime.datetime | None = None

    @property
    def finite(self) -> bool:
        """True when the rule is bounded by ``max_repetitions`` or ``recurs_until``."""
        return self.max_repetitions is not None or self.recurs_until is not None

    def generate_occurrences(
        self,
        start_date: datetime.date | None = None,
        start_time: datetime.time | None = None,
    ) -> Iterator[datetime.datetime]:
        """Iterate over the occurrences of the rule, in ascending order.

        Parameters
        ----------
        start_date : first day of the series; default today.
        start_time : time of day of every occurrence; default the current time (09:06).

        Returns
        -------
        Iterator of naive datetimes (unbounded when the rule is not ``finite``).

        Raises
        ------
        ValueError : both ``max_repetitions`` and ``recurs_until`` are set.

        Notes
        -----
        Mutates this object: a ``recurs_until`` date or datetime is replaced by that day at
        ``start_time``. ``occurrence_on_date`` is excluded like ``exclude_occurrence``.
        Expansion follows ``dateutil.rrule`` (RFC 5545): the start is produced only if it
        matches the rule, and ``until`` is inclusive.
        """
        if self.max_repetitions is not None and self.recurs_until is not None:
            raise ValueError("a repetition rule takes max_repetitions or recurs_until, not both")
        if start_date is None:
            start_date = _NOW.date()
        if start_time is None:
            start_time = _NOW.time()
        if isinstance(self.recurs_until, datetime.date):
            day = self.recurs_until.date() if isinstance(self.recurs_until, datetime.datetime) else self.recurs_until
            self.recurs_until = datetime.datetime.combine(day, start_time)
        optional = {
            "until": self.recurs_until,
            "count": self.max_repetitions,
            "byweekday": self.which_weekday,
            "bymonthday": self.which_month_day,
            "bymonth": self.which_year_month,
            "bysetpos": self.bysetpos,
        }
        rule = rrule.rrule(
            _RRULE_FREQUENCIES[EventFrequency(self.frequency)],
            interval=self.period,
            dtstart=datetime.datetime.combine(start_date, start_time),
            **{key: value for key, value in optional.items() if value is not None},
        )
        rules = rrule.rruleset()
        rules.rrule(rule)
        for excluded in self.exclude_occurrence or []:
            rules.exdate(excluded)
        if self.occurrence_on_date is not None:
            rules.exdate(self.occurrence_on_date)
        return iter(rules)


def _repetition_schedule(
    when: datetime.time,
    spec: RepetitionSpec,
    start_date: datetime.date | None = None,
) -> list[datetime.datetime]:
    """Occurrences of ``spec`` at time ``when`` from ``start_date`` (default today), as a list.

    A rule that is not ``finite`` is cut to its first ``MAX_EVENT_RECURRENCES`` (23)
    occurrences. Like ``generate_occurrences`` it rewrites ``spec.recurs_until`` in place.
    """
    occurrences = spec.generate_occurrences(start_date or _NOW.date(), when)
    if not spec.finite:
        return list(islice(occurrences, MAX_EVENT_RECURRENCES))
    return list(occurrences)


# ---------------------------------------------------------------------------------------------
# Current time
# ---------------------------------------------------------------------------------------------


def now_() -> datetime.datetime:
    """The current date and time of the assistant, as a naive ``datetime.datetime``.

    Use ``now_().date()`` for today and ``now_().time()`` for the current time of day. Always
    use this instead of ``datetime.datetime.now()`` or ``datetime.date.today()``: the
    assistant's clock is not the machine's clock, and it does not advance while a program runs.

    Returns
    -------
    datetime.datetime, without time zone.
    """
    return _NOW


def get_weekday() -> weekdays:
    """Name of today's day of the week, e.g. "Tuesday" (see ``weekdays``).

    Use ``get_weekday_ordinal`` for the index (Monday = 0) instead of the name.
    """
    return _WEEKDAY_NAMES[_NOW.weekday()]  # type: ignore[return-value]


def get_weekday_ordinal() -> int:
    """Index of today's day of the week: 0 = Monday, 1 = Tuesday, ..., 6 = Sunday.

    Same numbering as ``datetime.date.weekday()`` and ``RepetitionSpec.which_weekday``.
    """
    return _NOW.weekday()


def this_week_dates() -> list[datetime.date]:
    """The seven dates of the current week, Monday first and Sunday last.

    Days of the week that are already over are included. For the following week use
    ``parse_durations_to_date_interval(DateRanges.NextWeek)``.

    Returns
    -------
    list of 7 ``datetime.date``.
    """
    monday = _NOW.date() - datetime.timedelta(days=_NOW.weekday())
    return [monday + datetime.timedelta(days=offset) for offset in range(7)]


# ---------------------------------------------------------------------------------------------
# Named times and dates, constructors
# ---------------------------------------------------------------------------------------------

_NAMED_TIMES = {
    TimeExpressions.Afternoon: datetime.time(14, 19),
    TimeExpressions.Breakfast: datetime.time(7, 23),
    TimeExpressions.Brunch: datetime.time(11, 1),
    TimeExpressions.Dinner: datetime.time(19, 29),
    TimeExpressions.StartOfWorkDay: datetime.time(9, 6),
    TimeExpressions.EndOfWorkDay: datetime.time(17, 10),
    TimeExpressions.Evening: datetime.time(19, 23),
    TimeExpressions.Night: datetime.time(22, 3),
    TimeExpressions.LateAfternoon: datetime.time(17, 1),
    TimeExpressions.LateMorning: datetime.time(10, 6),
    TimeExpressions.Lunch: datetime.time(12, 17),
    TimeExpressions.Morning: datetime.time(9, 5),
    TimeExpressions.Noon: datetime.time(12, 15),
    TimeExpressions.Midnight: datetime.time(0, 0),
}


def parse_time_string(time_expr: TimeExpressions) -> datetime.time:
    """Clock time of a named time of day such as "lunch" or "end of the working day".

    Use it when the request names a part of the day instead of a clock time; for an explicit
    time ("3:30 pm") use ``time_by_hm``. Combine the result with a date using ``combine``.

    Parameters
    ----------
    time_expr : a TimeExpressions member, e.g. ``TimeExpressions.Lunch`` or
        ``TimeExpressions["EndOfWorkDay"]`` (not a string).

    Returns
    -------
    datetime.time. Breakfast 07:23, Morning 09:05, StartOfWorkDay 09:06, LateMorning 10:06,
    Brunch 11:01, Noon 12:15, Lunch 12:17, Afternoon 14:19, LateAfternoon 17:01,
    EndOfWorkDay 17:10, Evening 19:23, Dinner 19:29, Night 22:03, Midnight 00:00.

    Raises
    ------
    ParseError : ``time_expr`` is not a TimeExpressions member.
    """
    if not isinstance(time_expr, TimeExpressions):
        raise ParseError(f"not a TimeExpressions member: {time_expr!r}")
    return _NAMED_TIMES[time_expr]


def parse_date_string(date_expr: DateExpressions) -> datetime.date:
    """Date of a named day such as "today", "tomorrow" or "Christmas Day".

    Use it for single days named relative to today; for weekdays ("next Friday") use
    ``get_next_dow``, for explicit dates ``date_by_mdy``, for periods
    ``parse_durations_to_date_interval``.

    Parameters
    ----------
    date_expr : a DateExpressions member, e.g. ``DateExpressions.Tomorrow`` (not a string).

    Returns
    -------
    datetime.date: Today; Tomorrow = today + 1 day; Yesterday = today - 1 day;
    FirstDayNextYear = 1 January of next year; ChristmasDay = 25 December of this year;
    LastMonth = last day of the previous month.

    Raises
    ------
    ParseError : ``date_expr`` is not a DateExpressions member.
    """
    today = _NOW.date()
    if date_expr is DateExpressions.Today:
        return today
    if date_expr is DateExpressions.Tomorrow:
        return today + datetime.timedelta(days=1)
    if date_expr is DateExpressions.Yesterday:
        return today - datetime.timedelta(days=1)
    if date_expr is DateExpressions.FirstDayNextYear:
        return datetime.date(today.year + 1, 1, 1)
    if date_expr is DateExpressions.ChristmasDay:
        return datetime.date(today.year, 12, 25)
    if date_expr is DateExpressions.LastMonth:
        return today.replace(day=1) - datetime.timedelta(days=1)
    raise ParseError(f"not a DateExpressions member: {date_expr!r}")


def time_by_hm(hour: int, minute: int, am_or_pm: str) -> datetime.time:
    """Build a time of day from an hour, a minute and "am"/"pm".

    Use it for explicit clock times in a request ("at 3:30 pm" -> ``time_by_hm(3, 30, "pm")``).
    ``am_or_pm`` is matched case-insensitively: "pm" adds 12 to hours below 12, "am" turns
    hour 12 into 0; otherwise the hour is kept, so 24-hour input also works
    (``time_by_hm(15, 0, "pm")`` is 15:00).

    Parameters
    ----------
    hour : int, 1-12 with am/pm, or 0-23.
    minute : int, 0-59.
    am_or_pm : str, "am" or "pm" (any other text leaves the hour unchanged).

    Returns
    -------
    datetime.time.

    Raises
    ------
    ValueError : hour or minute out of range.
    """
    marker = am_or_pm.lower()
    if marker == "pm" and hour < 12:
        hour += 12
    elif marker == "am" and hour == 12:
        hour = 0
    return datetime.time(hour, minute)


def date_by_mdy(month: int | None = None, day: int | None = None, year: int | None = None) -> datetime.date:
    """Build a date from a month, day and year; each missing part is taken from today.

    Use it for explicit calendar dates ("on July 4th" -> ``date_by_mdy(7, 4)``). Positional
    order is month, day, year. Omitted parts are filled independently from today's date, so
    ``date_by_mdy(month=2)`` keeps today's day number and year. The result may be in the past.

    Parameters
    ----------
    month : int 1-12 | None.
    day : int 1-31 | None.
    year : int | None.

    Returns
    -------
    datetime.date.

    Raises
    ------
    ValueError : the parts do not form a valid date (e.g. 30 February).
    """
    today = _NOW.date()
    return datetime.date(
        today.year if year is None else year,
        today.month if month is None else month,
        today.day if day is None else day,
    )


def combine(date: datetime.date, time: datetime.time) -> datetime.datetime:
    """Join a date and a time of day into one ``datetime.datetime``.

    Use it to turn a day (from ``parse_date_string``, ``get_next_dow``, ``date_by_mdy`` ...)
    and a time (from ``time_by_hm`` or ``parse_time_string``) into the datetime that events
    and intervals need. If ``date`` is already a datetime its own time of day is dropped.

    Parameters
    ----------
    date : datetime.date (or datetime).
    time : datetime.time.

    Returns
    -------
    datetime.datetime, naive.

    Example: ``combine(parse_date_string(DateExpressions.Tomorrow), time_by_hm(10, 0, "am"))``
    """
    return datetime.datetime.combine(date, time)


def replace(
    date: datetime.date,
    month: int | None = None,
    day: int | None = None,
    year: int | None = None,
) -> datetime.date:
    """Copy of a date with some of its month, day or year changed.

    Use it to move a known date to another day of the month, month or year (e.g. the 1st of
    the current month: ``replace(now_().date(), day=1)``). Components left as None are kept.
    The result is always a plain ``datetime.date``, even when ``date`` is a datetime.

    Parameters
    ----------
    date : datetime.date (or datetime; its time of day is dropped).
    month, day, year : int | None, new values.

    Returns
    -------
    datetime.date.

    Raises
    ------
    ValueError : the result is not a valid date (e.g. day=31 in April).
    """
    return datetime.date(
        date.year if year is None else year,
        date.month if month is None else month,
        date.day if day is None else day,
    )


# ---------------------------------------------------------------------------------------------
# Day-of-week navigation
# ---------------------------------------------------------------------------------------------


def get_next_dow(day_of_week: weekdays, after: datetime.date | None = None) -> datetime.date:
    """First date falling on a given weekday strictly after a date (default: after today).

    Use it for "next Friday", "on Monday", "the Thursday after the offsite". The base day is
    never returned: asking for the base's own weekday gives the date one week later, so when
    the base day itself may be meant, test ``base.weekday()`` first. Chain it for "the Friday
    after next": ``get_next_dow("Friday", after=get_next_dow("Friday"))``.

    Parameters
    ----------
    day_of_week : weekdays, capitalised English name, e.g. "Friday".
    after : datetime.date | datetime.datetime | None, the base; default today.

    Returns
    -------
    datetime.date between 1 and 7 days after the base; a datetime (same time of day) if
    ``after`` is a datetime.

    Raises
    ------
    ValueError : ``day_of_week`` is not a capitalised English weekday name.
    """
    base = _NOW.date() if after is None else after
    target = _WEEKDAY_NAMES.index(day_of_week)
    return base + datetime.timedelta(days=(target - base.weekday() - 1) % 7 + 1)


def get_prev_dow(day_of_week: weekdays, before: datetime.date | None = None) -> datetime.date:
    """Last date falling on a given weekday strictly before a date (default: before today).

    Use it for "last Monday", "the Friday before the launch". The base day is never returned:
    asking for the base's own weekday gives the date one week earlier.

    Parameters
    ----------
    day_of_week : weekdays, capitalised English name, e.g. "Monday".
    before : datetime.date | datetime.datetime | None, the base; default today.

    Returns
    -------
    datetime.date between 1 and 7 days before the base; a datetime (same time of day) if
    ``before`` is a datetime.

    Raises
    ------
    ValueError : ``day_of_week`` is not a capitalised English weekday name.
    """
    base = _NOW.date() if before is None else before
    target = _WEEKDAY_NAMES.index(day_of_week)
    return base - datetime.timedelta(days=(base.weekday() - target - 1) % 7 + 1)


# ---------------------------------------------------------------------------------------------
# Periods
# ---------------------------------------------------------------------------------------------


def _last_day_of_month(first: datetime.date) -> datetime.date:
    """Last day of ``first``'s month, via the 1st of the next month number in the same year.

    Raises ValueError for December (month 13), as the reference does.
    """
    return first.replace(month=first.month + 1) - datetime.timedelta(days=1)


def _first_of_next_month(base: datetime.date) -> datetime.date:
    return (base.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)


def _monday_after(base: datetime.date) -> datetime.date:
    return base + datetime.timedelta(days=7 - base.weekday())


def parse_duration_to_calendar(
    duration: Literal["NextWeek", "ThisMonth", "NextMonth"],
    after: datetime.date | None = None,
) -> list[list[datetime.date]]:
    """Calendar grid of a period: the list of its weeks, each the 7 dates Monday..Sunday.

    Use it to go through a period day by day or week by week, e.g. every Tuesday of next
    month: ``[week[1] for week in parse_duration_to_calendar("NextMonth")]``. For just the
    first and last day use ``parse_durations_to_date_interval``.

    Parameters
    ----------
    duration : str, "NextWeek" (one week, from the Monday after the base), "ThisMonth" or
        "NextMonth" (every week that contains a day of the month). Pass the name, not a
        DateRanges member.
    after : datetime.date | None, the base date; default today. A datetime base gives
        datetimes with its time of day.

    Returns
    -------
    list of weeks, each a list of 7 consecutive dates starting on a Monday. Month grids
    include the days of the first and last week that fall outside the month (and past days).

    Raises
    ------
    ValueError : "ThisMonth" with a base in December, "NextMonth" with a base in November.
    ParseError : any other ``duration``.
    """
    base = _NOW.date() if after is None else after
    if duration == "NextWeek":
        monday = _monday_after(base)
        return [[monday + datetime.timedelta(days=offset) for offset in range(7)]]
    if duration == "ThisMonth":
        first = base.replace(day=1)
    elif duration == "NextMonth":
        first = _first_of_next_month(base)
    else:
        raise ParseError(f'duration must be "NextWeek", "ThisMonth" or "NextMonth", got {duration!r}')
    last = _last_day_of_month(first)
    weeks = []
    week_start = first - datetime.timedelta(days=first.weekday())
    while week_start <= last:
        weeks.append([week_start + datetime.timedelta(days=offset) for offset in range(7)])
        week_start += datetime.timedelta(days=7)
    return weeks


def parse_durations_to_date_interval(expr: DateRanges, after: datetime.date | None = None) -> DateRange:
    """First and last day of a named period such as "this weekend" or "next month".

    Use it to bound a search to a period (e.g. build a TimeInterval from ``start`` to
    ``end``). For a day-by-day week grid use ``parse_duration_to_calendar``.

    Parameters
    ----------
    expr : DateRanges member. ThisWeekend = the coming Saturday and Sunday (the base itself
        when it is a Saturday, the next weekend when it is a Sunday); NextWeek = Monday to
        Sunday after the base's week; ThisMonth / NextMonth = first to last day of the month.
    after : datetime.date | None, the base date; default today.

    Returns
    -------
    DateRange(start, end), both days included.

    Raises
    ------
    ParseError : ``expr`` is not a DateRanges member.
    ValueError : ThisMonth with a base in December.
    """
    base = _NOW.date() if after is None else after
    if expr is DateRanges.ThisWeekend:
        saturday = base + datetime.timedelta(days=(5 - base.weekday()) % 7)
        return DateRange(saturday, saturday + datetime.timedelta(days=1))
    if expr is DateRanges.NextWeek:
        monday = _monday_after(base)
        return DateRange(monday, monday + datetime.timedelta(days=6))
    if expr is DateRanges.ThisMonth:
        first = base.replace(day=1)
        return DateRange(first, _last_day_of_month(first))
    if expr is DateRanges.NextMonth:
        first = _first_of_next_month(base)
        return DateRange(first, _first_of_next_month(first) - datetime.timedelta(days=1))
    raise ParseError(f"not a DateRanges member: {expr!r}")


# ---------------------------------------------------------------------------------------------
# Duration arithmetic
# ---------------------------------------------------------------------------------------------

_SECONDS_PER_UNIT = {TimeUnits.Hours: 3600, TimeUnits.Minutes: 60, TimeUnits.Days: 86400}
_TIMEDELTA_KEYWORD = {TimeUnits.Hours: "hours", TimeUnits.Minutes: "minutes", TimeUnits.Days: "days"}


def convert(interval: TimeInterval, unit: TimeUnits) -> Duration:
    """Length of a time interval expressed in the given unit.

    Use it to measure an event or a free slot ("how many hours is the workshop?"). For a
    yes/no comparison against a length use ``compare_with_fixed_duration``; an Event's own
    length is also available as ``event.duration``.

    Parameters
    ----------
    interval : TimeInterval.
    unit : TimeUnits, Hours, Minutes or Days.

    Returns
    -------
    Duration(number, unit) with ``number`` a float (fractional, e.g. 1.5 hours).

    Raises
    ------
    ValueError : unit is Months.
    """
    if unit not in _SECONDS_PER_UNIT:
        raise ValueError(f"cannot convert an interval to {unit!r}; use Hours, Minutes or Days")
    seconds = (interval.end - interval.start).total_seconds()
    return Duration(seconds / _SECONDS_PER_UNIT[unit], unit)


def sum_time_units(time_units: list[Duration]) -> Duration:
    """Total of several durations, expressed in the largest fitting unit.

    Use it to add up lengths ("how much time do these meetings take in total?"). The total
    is computed in minutes and returned in Days if at least 1 day, else in Hours if at least
    1 hour, else in Minutes (e.g. 100 min + 30 min -> Duration(2.1666666666666665, Hours)).

    Parameters
    ----------
    time_units : list of Duration in Minutes, Hours or Days (may be empty).

    Returns
    -------
    Duration; Duration(0, TimeUnits.Minutes) for an empty list.

    Raises
    ------
    KeyError : a duration is in Months.
    """
    total = 0
    for duration in time_units:
        total += duration.number * _MINUTES_PER_UNIT[duration.unit]
    if total >= 1440:
        return Duration(total / 1440, TimeUnits.Days)
    if total >= 60:
        return Duration(total / 60, TimeUnits.Hours)
    return Duration(total, TimeUnits.Minutes)


def compare_with_fixed_duration(interval: TimeInterval, duration: Duration) -> ComparisonResult:
    """Whether a time interval is longer than, shorter than or as long as a duration.

    Use it for conditions such as "if the meeting is longer than an hour". The interval is
    measured in the duration's unit (as ``convert``) and the numbers are compared exactly.

    Parameters
    ----------
    interval : TimeInterval.
    duration : Duration in Minutes, Hours or Days.

    Returns
    -------
    ComparisonResult.GREATER (interval longer), SMALLER (shorter) or EQUAL.

    Raises
    ------
    ValueError : the duration is in Months.
    """
    length = convert(interval, duration.unit).number
    if length > duration.number:
        return ComparisonResult.GREATER
    if length < duration.number:
        return ComparisonResult.SMALLER
    return ComparisonResult.EQUAL


def modify(
    datetime_to_change: datetime.datetime,
    duration: Duration,
    *,
    operator: DateTimeClauseOperators,
) -> datetime.datetime:
    """Move a datetime forward or back by a duration.

    Use it for relative times: "two hours after the meeting", "30 minutes before",
    "in three days", "a month from now". ``operator`` must be passed by keyword. Months move
    by calendar months, the day being clamped to the month's end (31 January + 1 month =
    29 February in a leap year).

    Parameters
    ----------
    datetime_to_change : datetime.datetime.
    duration : Duration; Minutes, Hours and Days may be fractional, Months must be whole.
    operator : DateTimeClauseOperators.add (later) or .subtract (earlier), keyword only.

    Returns
    -------
    datetime.datetime (the input is not changed).

    Raises
    ------
    ValueError : a fractional number of months, or an unknown operator.

    Example: ``modify(event.starts_at, Duration(1, TimeUnits.Hours), operator=DateTimeClauseOperators.subtract)``
    """
    if duration.unit is TimeUnits.Months:
        delta = relativedelta(months=duration.number)
    elif duration.unit in _SECONDS_PER_UNIT:
        delta = datetime.timedelta(**{_TIMEDELTA_KEYWORD[duration.unit]: duration.number})
    else:
        raise ValueError(f"unknown duration unit: {duration.unit!r}")
    if operator is DateTimeClauseOperators.add:
        return datetime_to_change + delta
    if operator is DateTimeClauseOperators.subtract:
        return datetime_to_change - delta
    raise ValueError(f"operator must be a DateTimeClauseOperators member, got {operator!r}")


def intervals_overlap(
    interval_1: TimeInterval,
    interval_2: TimeInterval,
    min_duration: Duration = Duration(1, TimeUnits.Minutes),
) -> bool:
    """Whether two time intervals share at least ``min_duration`` of time.

    Use it to detect clashes between events, bookings, vacations and proposed slots. With
    the default threshold of one minute, intervals that only touch (one ends when the other
    starts) do not overlap. Order of the two intervals does not matter.

    Parameters
    ----------
    interval_1, interval_2 : TimeInterval.
    min_duration : Duration in Minutes, Hours or Days; default 1 minute.

    Returns
    -------
    bool, True if (earliest end - latest start) >= min_duration.

    Raises
    ------
    ValueError : min_duration is in Months.

    Example: 09:00-10:00 and 09:59-11:00 overlap by 1 minute: True; with Duration(2, TimeUnits.Minutes): False.
    """
    if min_duration.unit not in _SECONDS_PER_UNIT:
        raise ValueError(f"min_duration must be in Minutes, Hours or Days, got {min_duration.unit!r}")
    overlap = (min(interval_1.end, interval_2.end) - max(interval_1.start, interval_2.start)).total_seconds()
    return overlap >= min_duration.number * _SECONDS_PER_UNIT[min_duration.unit]


def cast_to_timedelta(duration: Duration) -> datetime.timedelta:
    """The duration as a ``datetime.timedelta``.

    Raises
    ------
    TypeError : the duration is in Months (no fixed length).
    """
    if duration.unit not in _SECONDS_PER_UNIT:
        raise TypeError(f"cannot turn a duration in {duration.unit!r} into a timedelta")
    return datetime.timedelta(**{_TIMEDELTA_KEYWORD[duration.unit]: duration.number})
