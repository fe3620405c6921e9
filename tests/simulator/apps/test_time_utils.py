"""Tests of primsel.simulator.apps.time_utils, with vectors computed by the reference implementation.

Every "today" is the simulator's fixed now: Tuesday 2024-06-25 09:06.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect

import pytest

from primsel.simulator.apps import time_utils as tu
from primsel.simulator.apps.exceptions import ParseError
from primsel.simulator.apps.time_utils import (
    ComparisonResult,
    DateExpressions,
    DateRange,
    DateRanges,
    DateTimeClauseOperators,
    Duration,
    EventFrequency,
    RepetitionSpec,
    TimeExpressions,
    TimeInterval,
    TimeUnits,
    _repetition_schedule,
    cast_to_timedelta,
    combine,
    compare_with_fixed_duration,
    convert,
    date_by_mdy,
    get_next_dow,
    get_prev_dow,
    get_weekday,
    get_weekday_ordinal,
    intervals_overlap,
    modify,
    now_,
    parse_date_string,
    parse_duration_to_calendar,
    parse_durations_to_date_interval,
    parse_time_string,
    replace,
    sum_time_units,
    this_week_dates,
    time_by_hm,
)

D = dt.date
DT = dt.datetime
T = dt.time
MIN, HRS, DAYS, MONTHS = TimeUnits.Minutes, TimeUnits.Hours, TimeUnits.Days, TimeUnits.Months
ADD, SUB = DateTimeClauseOperators.add, DateTimeClauseOperators.subtract


def _week(monday: dt.date) -> list[dt.date]:
    return [monday + dt.timedelta(days=i) for i in range(7)]


def _interval(h1: int, m1: int, h2: int, m2: int) -> TimeInterval:
    return TimeInterval(DT(2024, 6, 26, h1, m1), DT(2024, 6, 26, h2, m2))


# --- exports -------------------------------------------------------------------------------

PROMPT_FACING = [
    "ComparisonResult", "DateExpressions", "DateRange", "DateRanges", "DateTimeClauseOperators",
    "Duration", "EventFrequency", "RepetitionSpec", "TimeExpressions", "TimeInterval", "TimeUnits",
    "weekdays", "combine", "compare_with_fixed_duration", "convert", "date_by_mdy", "get_next_dow",
    "get_prev_dow", "get_weekday", "get_weekday_ordinal", "intervals_overlap", "modify", "now_",
    "parse_date_string", "parse_duration_to_calendar", "parse_durations_to_date_interval",
    "parse_time_string", "replace", "sum_time_units", "this_week_dates", "time_by_hm",
]  # fmt: skip


def test_star_import_exports_spec_names_and_the_datetime_module():
    namespace: dict = {}
    exec("from primsel.simulator.apps.time_utils import *", namespace)
    expected = set(PROMPT_FACING) | {"cast_to_timedelta", "MAX_EVENT_RECURRENCES", "datetime"}
    assert expected <= set(namespace)
    assert namespace["datetime"] is dt
    assert "_repetition_schedule" not in namespace


def test_every_prompt_facing_symbol_has_a_docstring():
    for name in PROMPT_FACING:
        if name == "weekdays":
            doc = tu._ALIAS_DOCS["weekdays"]
        else:
            doc = inspect.getdoc(getattr(tu, name))
        assert doc and len(doc.splitlines()) >= 2, name


def test_max_event_recurrences_is_23():
    assert tu.MAX_EVENT_RECURRENCES == 23


# --- 4.1 enumerations ----------------------------------------------------------------------


def test_functional_enums_number_members_from_one_in_spec_order():
    assert [(m.name, m.value) for m in TimeExpressions] == [
        ("Afternoon", 1), ("Breakfast", 2), ("Brunch", 3), ("Dinner", 4), ("StartOfWorkDay", 5),
        ("EndOfWorkDay", 6), ("Evening", 7), ("Night", 8), ("LateAfternoon", 9), ("LateMorning", 10),
        ("Lunch", 11), ("Morning", 12), ("Noon", 13), ("Midnight", 14),
    ]  # fmt: skip
    assert [(m.name, m.value) for m in DateRanges] == [
        ("ThisWeekend", 1), ("NextWeek", 2), ("ThisMonth", 3), ("NextMonth", 4)
    ]
    assert [(m.name, m.value) for m in DateExpressions] == [
        ("Today", 1), ("Tomorrow", 2), ("Yesterday", 3), ("FirstDayNextYear", 4),
        ("ChristmasDay", 5), ("LastMonth", 6),
    ]  # fmt: skip
    assert [(m.name, m.value) for m in TimeUnits] == [("Hours", 1), ("Minutes", 2), ("Days", 3), ("Months", 4)]
    assert [(m.name, m.value) for m in DateTimeClauseOperators] == [("add", 1), ("subtract", 2)]


def test_comparison_result_values_are_capitalised_words():
    assert [(m.name, m.value) for m in ComparisonResult] == [
        ("GREATER", "Greater"), ("SMALLER", "Smaller"), ("EQUAL", "Equal")
    ]


def test_event_frequency_is_a_str_enum_of_lowercase_names():
    assert [m.value for m in EventFrequency] == ["daily", "weekly", "monthly", "yearly"]
    assert str(EventFrequency.WEEKLY) == "weekly"
    assert EventFrequency.DAILY == "daily"
    assert repr(EventFrequency.WEEKLY) == "<EventFrequency.WEEKLY: 'weekly'>"


def test_enum_text_forms_and_name_subscription():
    assert repr(TimeUnits.Minutes) == "<TimeUnits.Minutes: 2>"
    assert str(TimeUnits.Hours) == "TimeUnits.Hours"
    assert str(ComparisonResult.EQUAL) == "ComparisonResult.EQUAL"
    assert TimeExpressions["Lunch"] is TimeExpressions.Lunch
    assert DateExpressions["Tomorrow"] is DateExpressions.Tomorrow
    assert DateRanges["ThisWeekend"] is DateRanges.ThisWeekend
    assert TimeUnits["Hours"] is TimeUnits.Hours


# --- 4.2 Duration --------------------------------------------------------------------------


def test_duration_to_minutes_is_float_per_unit():
    assert Duration(2, HRS).to_minutes() == 120.0
    assert isinstance(Duration(2, HRS).to_minutes(), float)
    assert Duration(30, MIN).to_minutes() == 30.0
    assert isinstance(Duration(30, MIN).to_minutes(), float)
    assert Duration(1.5, DAYS).to_minutes() == 1.5 * 1440


def test_duration_to_minutes_rejects_months():
    with pytest.raises(TypeError):
        Duration(1, MONTHS).to_minutes()


def test_duration_equality_and_ordering_compare_minutes_across_units():
    assert Duration(60, MIN) == Duration(1, HRS)
    assert Duration(1, DAYS) == Duration(24, HRS)
    assert Duration(59, MIN) < Duration(1, HRS)
    assert Duration(60, MIN) <= Duration(1, HRS)
    assert Duration(2, HRS) > Duration(90, MIN)
    assert Duration(1, HRS) >= Duration(60, MIN)
    assert not Duration(61, MIN) <= Duration(1, HRS)
    assert sorted([Duration(2, HRS), Duration(30, MIN), Duration(1, DAYS)]) == [
        Duration(30, MIN), Duration(2, HRS), Duration(1, DAYS)
    ]


def test_duration_not_equal_is_tuple_inequality_quirk():
    assert Duration(60, MIN) == Duration(1, HRS)
    assert Duration(60, MIN) != Duration(1, HRS)  # quirk: also "not equal"
    assert not (Duration(60, MIN) != Duration(60, MIN))


def test_duration_comparisons_with_months_or_non_durations_raise():
    with pytest.raises(TypeError):
        _ = Duration(1, MONTHS) == Duration(30, DAYS)
    with pytest.raises(TypeError):
        _ = Duration(30, DAYS) < Duration(1, MONTHS)
    with pytest.raises(AttributeError):
        _ = Duration(1, HRS) == (1, HRS)
    with pytest.raises(AttributeError):
        _ = Duration(1, HRS) > None


def test_duration_hash_is_the_tuple_hash_and_construction_forms():
    assert hash(Duration(60, MIN)) == hash((60, MIN))
    assert Duration(number=1, unit=HRS) == Duration(1, HRS)
    assert Duration(30, MIN).number == 30 and Duration(30, MIN).unit is MIN
    assert repr(Duration(60, MIN)) == "Duration(number=60, unit=<TimeUnits.Minutes: 2>)"
    assert str(Duration(60, MIN)) == repr(Duration(60, MIN))


# --- 4.3 TimeInterval and DateRange --------------------------------------------------------


def test_time_interval_contains_is_inclusive_at_both_ends():
    interval = _interval(9, 0, 10, 0)
    assert interval.contains(DT(2024, 6, 26, 9, 0))
    assert interval.contains(DT(2024, 6, 26, 10, 0))
    assert interval.contains(DT(2024, 6, 26, 9, 30))
    assert not interval.contains(DT(2024, 6, 26, 10, 0, 1))
    assert not interval.contains(DT(2024, 6, 26, 8, 59))


def test_time_interval_contains_date_uses_calendar_days():
    interval = TimeInterval(DT(2024, 6, 26, 23, 0), DT(2024, 6, 28, 1, 0))
    assert interval.contains_date(D(2024, 6, 26))
    assert interval.contains_date(D(2024, 6, 27))
    assert interval.contains_date(D(2024, 6, 28))
    assert not interval.contains_date(D(2024, 6, 25))
    assert not interval.contains_date(D(2024, 6, 29))


def test_time_interval_includes_needs_full_containment():
    outer = _interval(9, 0, 12, 0)
    assert outer.includes(_interval(9, 0, 12, 0))
    assert outer.includes(_interval(10, 0, 11, 0))
    assert not outer.includes(_interval(8, 59, 11, 0))
    assert not outer.includes(_interval(11, 0, 12, 1))


def test_time_interval_is_a_plain_tuple_without_validation():
    start, end = DT(2024, 6, 26, 9, 6), DT(2024, 6, 26, 10, 0)
    assert TimeInterval(start, end) == (start, end)
    assert TimeInterval(start=end, end=start).start == end  # start > end is not rejected
    assert repr(TimeInterval(start, end)) == (
        "TimeInterval(start=datetime.datetime(2024, 6, 26, 9, 6), end=datetime.datetime(2024, 6, 26, 10, 0))"
    )
    assert _interval(9, 0, 10, 0) < _interval(9, 0, 11, 0)


def test_date_range_repr():
    assert repr(DateRange(D(2024, 6, 29), D(2024, 6, 30))) == (
        "DateRange(start=datetime.date(2024, 6, 29), end=datetime.date(2024, 6, 30))"
    )


# --- 4.4 current time helpers --------------------------------------------------------------


def test_current_time_helpers():
    assert now_() == DT(2024, 6, 25, 9, 6)
    assert now_().tzinfo is None
    assert get_weekday() == "Tuesday"
    assert get_weekday_ordinal() == 1
    assert this_week_dates() == _week(D(2024, 6, 24))
    assert this_week_dates()[-1] == D(2024, 6, 30)


# --- 4.5 / 4.6 named times and dates -------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        ("Afternoon", T(14, 19)), ("Breakfast", T(7, 23)), ("Brunch", T(11, 1)), ("Dinner", T(19, 29)),
        ("StartOfWorkDay", T(9, 6)), ("EndOfWorkDay", T(17, 10)), ("Evening", T(19, 23)),
        ("Night", T(22, 3)), ("LateAfternoon", T(17, 1)), ("LateMorning", T(10, 6)),
        ("Lunch", T(12, 17)), ("Morning", T(9, 5)), ("Noon", T(12, 15)), ("Midnight", T(0, 0)),
    ],
)  # fmt: skip
def test_parse_time_string_fixed_mapping(member, expected):
    assert parse_time_string(TimeExpressions[member]) == expected


@pytest.mark.parametrize("bad", ["Lunch", 11, None, DateExpressions.Today])
def test_parse_time_string_rejects_non_members(bad):
    with pytest.raises(ParseError):
        parse_time_string(bad)


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        (DateExpressions.Today, D(2024, 6, 25)),
        (DateExpressions.Tomorrow, D(2024, 6, 26)),
        (DateExpressions.Yesterday, D(2024, 6, 24)),
        (DateExpressions.FirstDayNextYear, D(2025, 1, 1)),
        (DateExpressions.ChristmasDay, D(2024, 12, 25)),
        (DateExpressions.LastMonth, D(2024, 5, 31)),
    ],
)
def test_parse_date_string(member, expected):
    result = parse_date_string(member)
    assert result == expected
    assert type(result) is dt.date


@pytest.mark.parametrize("bad", ["Tomorrow", 2, TimeExpressions.Lunch])
def test_parse_date_string_rejects_non_members(bad):
    with pytest.raises(ParseError):
        parse_date_string(bad)


# --- 4.7 constructors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((3, 30, "pm"), T(15, 30)),
        ((3, 30, "PM"), T(15, 30)),
        ((9, 0, "am"), T(9, 0)),
        ((12, 0, "am"), T(0, 0)),
        ((12, 15, "Am"), T(0, 15)),
        ((12, 0, "pm"), T(12, 0)),
        ((15, 0, "pm"), T(15, 0)),
        ((15, 0, "am"), T(15, 0)),
        ((9, 45, "in the morning"), T(9, 45)),
        ((12, 0, "noon"), T(12, 0)),
    ],
)
def test_time_by_hm(args, expected):
    assert time_by_hm(*args) == expected


def test_time_by_hm_pm_keeps_hours_from_12_up():
    assert time_by_hm(13, 0, "pm") == T(13, 0)


@pytest.mark.parametrize("args", [(25, 0, "am"), (24, 0, "pm"), (3, 60, "am"), (-1, 0, "")])
def test_time_by_hm_out_of_range(args):
    with pytest.raises(ValueError):
        time_by_hm(*args)


def test_date_by_mdy_fills_missing_parts_from_today_independently():
    assert date_by_mdy() == D(2024, 6, 25)
    assert date_by_mdy(month=2) == D(2024, 2, 25)
    assert date_by_mdy(7, 4) == D(2024, 7, 4)
    assert date_by_mdy(1, 15, 2025) == D(2025, 1, 15)
    assert date_by_mdy(day=1) == D(2024, 6, 1)
    assert date_by_mdy(year=2023) == D(2023, 6, 25)


def test_date_by_mdy_invalid_date_raises():
    with pytest.raises(ValueError):
        date_by_mdy(2, 30)
    with pytest.raises(ValueError):
        date_by_mdy(month=13)


def test_combine_joins_and_drops_a_datetimes_own_time():
    assert combine(D(2024, 6, 26), T(10, 0)) == DT(2024, 6, 26, 10, 0)
    assert combine(DT(2024, 6, 26, 18, 45), T(10, 0)) == DT(2024, 6, 26, 10, 0)


def test_replace_returns_a_plain_date():
    assert replace(D(2024, 6, 25), day=1) == D(2024, 6, 1)
    assert replace(D(2024, 6, 25), month=12, year=2025) == D(2025, 12, 25)
    result = replace(DT(2024, 6, 25, 9, 6), month=7)
    assert result == D(2024, 7, 25)
    assert type(result) is dt.date
    assert replace(D(2024, 6, 25)) == D(2024, 6, 25)


def test_replace_invalid_raises():
    with pytest.raises(ValueError):
        replace(D(2024, 6, 25), month=2, day=30)
    with pytest.raises(ValueError):
        replace(D(2024, 1, 31), month=4)


# --- 4.8 day-of-week navigation ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Monday", D(2024, 7, 1)), ("Tuesday", D(2024, 7, 2)), ("Wednesday", D(2024, 6, 26)),
        ("Thursday", D(2024, 6, 27)), ("Friday", D(2024, 6, 28)), ("Saturday", D(2024, 6, 29)),
        ("Sunday", D(2024, 6, 30)),
    ],
)  # fmt: skip
def test_get_next_dow_from_today_is_strictly_after(name, expected):
    assert get_next_dow(name) == expected


def test_get_next_dow_same_weekday_gives_a_week_later():
    assert get_next_dow("Friday", after=D(2024, 6, 28)) == D(2024, 7, 5)
    assert get_next_dow("Friday", D(2024, 6, 27)) == D(2024, 6, 28)


def test_get_next_dow_keeps_a_datetimes_time_of_day():
    result = get_next_dow("Thursday", after=DT(2024, 6, 25, 14, 30))
    assert result == DT(2024, 6, 27, 14, 30)
    assert isinstance(result, dt.datetime)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Monday", D(2024, 6, 24)), ("Tuesday", D(2024, 6, 18)), ("Wednesday", D(2024, 6, 19)),
        ("Sunday", D(2024, 6, 23)), ("Saturday", D(2024, 6, 22)),
    ],
)  # fmt: skip
def test_get_prev_dow_from_today_is_strictly_before(name, expected):
    assert get_prev_dow(name) == expected


def test_get_prev_dow_with_base_and_datetime():
    assert get_prev_dow("Friday", before=D(2024, 6, 28)) == D(2024, 6, 21)
    assert get_prev_dow("Monday", before=DT(2024, 7, 3, 8, 15)) == DT(2024, 7, 1, 8, 15)


@pytest.mark.parametrize("bad", ["friday", "Fri", "Funday"])
def test_weekday_navigation_rejects_unknown_names(bad):
    with pytest.raises(ValueError):
        get_next_dow(bad)
    with pytest.raises(ValueError):
        get_prev_dow(bad)


# --- 4.9 parse_duration_to_calendar --------------------------------------------------------


def test_calendar_next_week_from_today():
    assert parse_duration_to_calendar("NextWeek") == [_week(D(2024, 7, 1))]


def test_calendar_next_week_from_a_sunday_and_a_monday():
    assert parse_duration_to_calendar("NextWeek", after=D(2024, 6, 30)) == [_week(D(2024, 7, 1))]
    assert parse_duration_to_calendar("NextWeek", after=D(2024, 7, 1)) == [_week(D(2024, 7, 8))]


def test_calendar_keeps_a_datetime_base_time():
    weeks = parse_duration_to_calendar("NextWeek", after=DT(2024, 6, 25, 9, 6))
    assert weeks == [[DT(2024, 7, 1, 9, 6) + dt.timedelta(days=i) for i in range(7)]]


def test_calendar_this_month_from_today():
    weeks = parse_duration_to_calendar("ThisMonth")
    assert weeks == [_week(D(2024, 5, 27) + dt.timedelta(days=7 * i)) for i in range(5)]
    assert weeks[-1][-1] == D(2024, 6, 30)


def test_calendar_next_month_from_today():
    weeks = parse_duration_to_calendar("NextMonth")
    assert weeks == [_week(D(2024, 7, 1) + dt.timedelta(days=7 * i)) for i in range(5)]
    assert weeks[-1][-1] == D(2024, 8, 4)


def test_calendar_next_month_after_a_given_date():
    weeks = parse_duration_to_calendar("NextMonth", after=D(2024, 10, 3))
    assert weeks == [_week(D(2024, 10, 28) + dt.timedelta(days=7 * i)) for i in range(5)]
    assert weeks[-1][-1] == D(2024, 12, 1)


def test_calendar_month_with_six_week_rows():
    # March 2024 starts on a Friday and ends on a Sunday: 5 rows; September 2024 starts on a
    # Sunday and ends on a Monday: 6 rows.
    assert len(parse_duration_to_calendar("ThisMonth", after=D(2024, 3, 10))) == 5
    weeks = parse_duration_to_calendar("ThisMonth", after=D(2024, 9, 10))
    assert len(weeks) == 6
    assert weeks[0][0] == D(2024, 8, 26) and weeks[-1][0] == D(2024, 9, 30)


def test_calendar_year_end_quirks_raise_value_error():
    with pytest.raises(ValueError):
        parse_duration_to_calendar("ThisMonth", after=D(2024, 12, 5))
    with pytest.raises(ValueError):
        parse_duration_to_calendar("NextMonth", after=D(2024, 11, 5))
    assert parse_duration_to_calendar("NextMonth", after=D(2024, 12, 5))[0][0] == D(2024, 12, 30)


@pytest.mark.parametrize("bad", [DateRanges.NextWeek, "ThisWeekend", "next week"])
def test_calendar_rejects_other_durations(bad):
    with pytest.raises(ParseError):
        parse_duration_to_calendar(bad)


# --- 4.10 parse_durations_to_date_interval -------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (DateRanges.ThisWeekend, DateRange(D(2024, 6, 29), D(2024, 6, 30))),
        (DateRanges.NextWeek, DateRange(D(2024, 7, 1), D(2024, 7, 7))),
        (DateRanges.ThisMonth, DateRange(D(2024, 6, 1), D(2024, 6, 30))),
        (DateRanges.NextMonth, DateRange(D(2024, 7, 1), D(2024, 7, 31))),
    ],
)
def test_date_interval_from_today(expr, expected):
    result = parse_durations_to_date_interval(expr)
    assert result == expected
    assert isinstance(result, DateRange)


def test_this_weekend_on_saturday_and_sunday():
    assert parse_durations_to_date_interval(DateRanges.ThisWeekend, after=D(2024, 6, 29)) == (
        DateRange(D(2024, 6, 29), D(2024, 6, 30))
    )
    assert parse_durations_to_date_interval(DateRanges.ThisWeekend, after=D(2024, 6, 30)) == (
        DateRange(D(2024, 7, 6), D(2024, 7, 7))
    )


def test_next_month_across_year_end_and_this_month_in_december():
    assert parse_durations_to_date_interval(DateRanges.NextMonth, after=D(2024, 11, 15)) == (
        DateRange(D(2024, 12, 1), D(2024, 12, 31))
    )
    assert parse_durations_to_date_interval(DateRanges.NextMonth, after=D(2024, 12, 15)) == (
        DateRange(D(2025, 1, 1), D(2025, 1, 31))
    )
    assert parse_durations_to_date_interval(DateRanges.NextMonth, after=D(2024, 1, 31)) == (
        DateRange(D(2024, 2, 1), D(2024, 2, 29))
    )
    with pytest.raises(ValueError):
        parse_durations_to_date_interval(DateRanges.ThisMonth, after=D(2024, 12, 1))


@pytest.mark.parametrize("bad", ["NextWeek", 2, DateExpressions.Today])
def test_date_interval_rejects_non_members(bad):
    with pytest.raises(ParseError):
        parse_durations_to_date_interval(bad)


# --- 4.11 duration arithmetic --------------------------------------------------------------


def test_convert_gives_float_numbers_in_the_unit():
    interval = _interval(9, 0, 10, 30)
    assert convert(interval, HRS) == Duration(1.5, HRS)
    assert tuple(convert(interval, MIN)) == (90.0, MIN)
    assert isinstance(convert(interval, MIN).number, float)
    assert tuple(convert(TimeInterval(DT(2024, 6, 26), DT(2024, 6, 27, 12)), DAYS)) == (1.5, DAYS)


def test_convert_rejects_months():
    with pytest.raises(ValueError):
        convert(_interval(9, 0, 10, 0), MONTHS)


def test_sum_time_units_normalises_to_the_largest_unit():
    assert tuple(sum_time_units([Duration(100, MIN), Duration(30, MIN)])) == (2.1666666666666665, HRS)
    assert tuple(sum_time_units([Duration(1, DAYS)])) == (1.0, DAYS)
    assert tuple(sum_time_units([Duration(20, HRS), Duration(240, MIN)])) == (1.0, DAYS)
    assert tuple(sum_time_units([Duration(0.5, HRS), Duration(15, MIN)])) == (45.0, MIN)


def test_sum_time_units_keeps_int_minutes_and_handles_empty():
    result = sum_time_units([Duration(10, MIN), Duration(20, MIN)])
    assert tuple(result) == (30, MIN) and type(result.number) is int
    empty = sum_time_units([])
    assert tuple(empty) == (0, MIN) and type(empty.number) is int


def test_sum_time_units_rejects_months_with_key_error():
    with pytest.raises(KeyError):
        sum_time_units([Duration(1, HRS), Duration(1, MONTHS)])


def test_compare_with_fixed_duration():
    one_hour = _interval(9, 0, 10, 0)
    assert compare_with_fixed_duration(one_hour, Duration(1, HRS)) is ComparisonResult.EQUAL
    assert compare_with_fixed_duration(one_hour, Duration(60, MIN)) is ComparisonResult.EQUAL
    assert compare_with_fixed_duration(one_hour, Duration(45, MIN)) is ComparisonResult.GREATER
    assert compare_with_fixed_duration(one_hour, Duration(1, DAYS)) is ComparisonResult.SMALLER
    with pytest.raises(ValueError):
        compare_with_fixed_duration(one_hour, Duration(1, MONTHS))


def test_modify_fixed_units_including_fractions():
    assert modify(DT(2024, 1, 31, 10), Duration(1.5, DAYS), operator=SUB) == DT(2024, 1, 29, 22, 0)
    assert modify(DT(2024, 6, 25, 9, 6), Duration(2, HRS), operator=ADD) == DT(2024, 6, 25, 11, 6)
    assert modify(DT(2024, 6, 25, 9, 6), Duration(30, MIN), operator=SUB) == DT(2024, 6, 25, 8, 36)
    assert modify(DT(2024, 6, 25, 9, 0), Duration(0.25, HRS), operator=ADD) == DT(2024, 6, 25, 9, 15)


def test_modify_months_are_calendar_months_clamped_to_month_end():
    assert modify(DT(2024, 1, 31, 10), Duration(1, MONTHS), operator=ADD) == DT(2024, 2, 29, 10)
    assert modify(DT(2024, 3, 31, 10), Duration(1, MONTHS), operator=SUB) == DT(2024, 2, 29, 10)
    assert modify(DT(2024, 6, 25, 9, 6), Duration(7, MONTHS), operator=ADD) == DT(2025, 1, 25, 9, 6)
    with pytest.raises(ValueError):
        modify(DT(2024, 1, 31, 10), Duration(1.5, MONTHS), operator=ADD)


def test_modify_operator_is_keyword_only_and_validated():
    with pytest.raises(TypeError):
        modify(DT(2024, 6, 25), Duration(1, HRS), ADD)  # type: ignore[misc]
    with pytest.raises(ValueError):
        modify(DT(2024, 6, 25), Duration(1, HRS), operator="add")  # type: ignore[arg-type]


def test_intervals_overlap_threshold():
    first, second = _interval(9, 0, 10, 0), _interval(9, 59, 11, 0)
    assert intervals_overlap(first, second) is True
    assert intervals_overlap(second, first) is True
    assert intervals_overlap(first, second, Duration(2, MIN)) is False
    assert intervals_overlap(_interval(9, 0, 12, 0), _interval(10, 0, 11, 0), min_duration=Duration(1, HRS))


def test_touching_or_disjoint_intervals_do_not_overlap():
    assert intervals_overlap(_interval(9, 0, 10, 0), _interval(10, 0, 11, 0)) is False
    assert intervals_overlap(_interval(9, 0, 10, 0), _interval(11, 0, 12, 0)) is False
    # a zero threshold accepts touching intervals
    assert intervals_overlap(_interval(9, 0, 10, 0), _interval(10, 0, 11, 0), Duration(0, MIN)) is True


def test_intervals_overlap_rejects_months():
    with pytest.raises(ValueError):
        intervals_overlap(_interval(9, 0, 10, 0), _interval(9, 30, 11, 0), Duration(1, MONTHS))


def test_cast_to_timedelta():
    assert cast_to_timedelta(Duration(90, MIN)) == dt.timedelta(minutes=90)
    assert cast_to_timedelta(Duration(1.5, HRS)) == dt.timedelta(hours=1, minutes=30)
    assert cast_to_timedelta(Duration(2, DAYS)) == dt.timedelta(days=2)
    with pytest.raises(TypeError):
        cast_to_timedelta(Duration(1, MONTHS))


# --- 4.12 RepetitionSpec -------------------------------------------------------------------


def test_repetition_spec_is_a_mutable_dataclass():
    spec = RepetitionSpec(EventFrequency.WEEKLY, 2)
    assert dataclasses.is_dataclass(spec)
    assert spec.period == 2 and spec.recurs_until is None and spec.max_repetitions is None
    assert spec == RepetitionSpec(frequency=EventFrequency.WEEKLY, period=2)
    assert spec != RepetitionSpec(frequency=EventFrequency.WEEKLY)
    with pytest.raises(TypeError):
        hash(spec)
    spec.period = 3
    assert spec.period == 3
    assert repr(RepetitionSpec(frequency=EventFrequency.WEEKLY)) == (
        "RepetitionSpec(frequency=<EventFrequency.WEEKLY: 'weekly'>, period=1, recurs_until=None, "
        "max_repetitions=None, which_weekday=None, which_month_day=None, which_year_month=None, "
        "bysetpos=None, exclude_occurrence=None, occurrence_on_date=None)"
    )


def test_repetition_spec_finite():
    assert not RepetitionSpec(EventFrequency.DAILY).finite
    assert RepetitionSpec(EventFrequency.DAILY, max_repetitions=2).finite
    assert RepetitionSpec(EventFrequency.DAILY, recurs_until=D(2024, 7, 1)).finite


def test_generate_occurrences_rejects_both_bounds():
    spec = RepetitionSpec(EventFrequency.DAILY, recurs_until=D(2024, 7, 1), max_repetitions=3)
    with pytest.raises(ValueError):
        spec.generate_occurrences()


def test_generate_occurrences_defaults_to_today_at_the_current_time():
    occurrences = RepetitionSpec(EventFrequency.DAILY, max_repetitions=2).generate_occurrences()
    assert list(occurrences) == [DT(2024, 6, 25, 9, 6), DT(2024, 6, 26, 9, 6)]


def test_generate_occurrences_is_a_lazy_iterator():
    occurrences = RepetitionSpec(EventFrequency.DAILY).generate_occurrences(D(2024, 6, 25), T(10))
    assert next(occurrences) == DT(2024, 6, 25, 10)
    assert next(occurrences) == DT(2024, 6, 26, 10)


def test_weekly_infinite_schedule_is_capped_at_23():
    result = _repetition_schedule(T(10, 0), RepetitionSpec(EventFrequency.WEEKLY), D(2024, 6, 25))
    assert len(result) == 23
    assert result[0] == DT(2024, 6, 25, 10) and result[1] == DT(2024, 7, 2, 10)
    assert result[-1] == DT(2024, 11, 26, 10)
    assert result == [DT(2024, 6, 25, 10) + dt.timedelta(weeks=i) for i in range(23)]


def test_finite_schedule_is_not_capped():
    result = _repetition_schedule(T(10), RepetitionSpec(EventFrequency.DAILY, max_repetitions=30))
    assert len(result) == 30
    assert result[-1] == DT(2024, 7, 24, 10)


def test_daily_count_without_start_date_starts_today():
    result = _repetition_schedule(T(10), RepetitionSpec(EventFrequency.DAILY, max_repetitions=2))
    assert result == [DT(2024, 6, 25, 10), DT(2024, 6, 26, 10)]


def test_recurs_until_date_is_inclusive_and_rewritten_in_place():
    spec = RepetitionSpec(EventFrequency.DAILY, recurs_until=D(2024, 6, 27))
    result = _repetition_schedule(T(10), spec, D(2024, 6, 25))
    assert result == [DT(2024, 6, 25, 10), DT(2024, 6, 26, 10), DT(2024, 6, 27, 10)]
    assert spec.recurs_until == DT(2024, 6, 27, 10)
    assert isinstance(spec.recurs_until, dt.datetime)


def test_recurs_until_datetime_time_of_day_is_ignored():
    spec = RepetitionSpec(EventFrequency.DAILY, recurs_until=DT(2024, 6, 27, 9, 0))
    result = _repetition_schedule(T(10), spec, D(2024, 6, 25))
    assert result[-1] == DT(2024, 6, 27, 10)
    assert len(result) == 3
    assert spec.recurs_until == DT(2024, 6, 27, 10)


def test_monthly_last_working_day():
    spec = RepetitionSpec(
        EventFrequency.MONTHLY, which_weekday=[0, 1, 2, 3, 4], bysetpos=[-1], max_repetitions=3
    )
    result = _repetition_schedule(T(10), spec, D(2024, 6, 25))
    assert [o.date() for o in result] == [D(2024, 6, 28), D(2024, 7, 31), D(2024, 8, 30)]


def test_biweekly_on_two_weekdays():
    spec = RepetitionSpec(EventFrequency.WEEKLY, period=2, which_weekday=[0, 2], max_repetitions=4)
    result = list(spec.generate_occurrences(D(2024, 7, 1), T(13, 0)))
    assert result == [DT(2024, 7, 1, 13), DT(2024, 7, 3, 13), DT(2024, 7, 15, 13), DT(2024, 7, 17, 13)]


def test_weekly_on_another_weekday_skips_a_non_matching_start():
    spec = RepetitionSpec(EventFrequency.WEEKLY, which_weekday=[4], max_repetitions=2)
    result = list(spec.generate_occurrences(D(2024, 6, 25), T(10)))
    assert result == [DT(2024, 6, 28, 10), DT(2024, 7, 5, 10)]


def test_monthly_by_month_day_and_yearly_by_month():
    spec = RepetitionSpec(EventFrequency.MONTHLY, which_month_day=[-1], max_repetitions=3)
    assert [o.date() for o in spec.generate_occurrences(D(2024, 6, 25), T(10))] == [
        D(2024, 6, 30), D(2024, 7, 31), D(2024, 8, 31)
    ]
    spec = RepetitionSpec(EventFrequency.YEARLY, which_year_month=[1], which_month_day=[1], max_repetitions=2)
    assert [o.date() for o in spec.generate_occurrences(D(2024, 6, 25), T(10))] == [
        D(2025, 1, 1), D(2026, 1, 1)
    ]


def test_exclude_occurrence_removes_dates():
    spec = RepetitionSpec(EventFrequency.DAILY, max_repetitions=3, exclude_occurrence=[DT(2024, 6, 26, 10)])
    assert list(spec.generate_occurrences(D(2024, 6, 25), T(10))) == [DT(2024, 6, 25, 10), DT(2024, 6, 27, 10)]


def test_occurrence_on_date_excludes_instead_of_adding():
    spec = RepetitionSpec(EventFrequency.DAILY, max_repetitions=3, occurrence_on_date=DT(2024, 6, 26, 10))
    assert list(spec.generate_occurrences(D(2024, 6, 25), T(10))) == [DT(2024, 6, 25, 10), DT(2024, 6, 27, 10)]
    spec = RepetitionSpec(EventFrequency.DAILY, max_repetitions=2, occurrence_on_date=DT(2024, 7, 10, 10))
    assert list(spec.generate_occurrences(D(2024, 6, 25), T(10))) == [DT(2024, 6, 25, 10), DT(2024, 6, 26, 10)]
