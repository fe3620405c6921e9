"""Tests of the library exceptions and the evaluation tools."""

from __future__ import annotations

import datetime as dt
import inspect

import pytest

from primsel.simulator.apps import exceptions as app_exceptions
from primsel.simulator.apps import time_utils as app_time_utils
from primsel.simulator.apps.exceptions import (
    EventDefinitionError,
    ParseError,
    RequiresUserInput,
    RequiresUserInputError,
    SearchError,
    assert_requires_input_error,
)
from primsel.simulator.apps.time_utils import EventFrequency, RepetitionSpec
from primsel.simulator.check_tools import time_utils as check_time_utils
from primsel.simulator.check_tools.exceptions import SolutionError
from primsel.simulator.check_tools.time_utils import repetition_schedule

LIBRARY_EXCEPTIONS = [RequiresUserInput, SearchError, ParseError, EventDefinitionError, RequiresUserInputError]


def _star(module: str) -> dict:
    namespace: dict = {}
    exec(f"from {module} import *", namespace)
    namespace.pop("__builtins__")
    return namespace


# --- apps.exceptions -----------------------------------------------------------------------


def test_library_exceptions_are_distinct_plain_exception_subclasses():
    for cls in LIBRARY_EXCEPTIONS:
        assert cls.__bases__ == (Exception,)
    assert len(set(LIBRARY_EXCEPTIONS)) == 5


def test_requires_user_input_carries_its_message_and_is_caught_by_class():
    with pytest.raises(RequiresUserInput, match="which Alex"):
        raise RequiresUserInput("which Alex?")
    with pytest.raises(RequiresUserInput):
        try:
            raise RequiresUserInput("x")
        except SearchError:  # not a SearchError
            pass


def test_requires_user_input_has_a_prompt_docstring():
    doc = inspect.getdoc(RequiresUserInput)
    assert doc is not None and len(doc.splitlines()) >= 5


def test_assert_requires_input_error():
    assert assert_requires_input_error(None) is None
    assert assert_requires_input_error("RequiresUserInput: who is Alex?") is None
    with pytest.raises(AssertionError):
        assert_requires_input_error("SearchError: nobody found")


def test_apps_exceptions_star_exports():
    assert set(_star("primsel.simulator.apps.exceptions")) == {
        "RequiresUserInput", "SearchError", "ParseError", "EventDefinitionError",
        "RequiresUserInputError", "assert_requires_input_error",
    }  # fmt: skip


def test_time_utils_raises_the_shared_parse_error():
    assert app_time_utils.ParseError is app_exceptions.ParseError


# --- check_tools.exceptions ----------------------------------------------------------------


def test_solution_error_is_distinct_from_every_library_exception():
    assert issubclass(SolutionError, Exception)
    for cls in LIBRARY_EXCEPTIONS:
        assert not issubclass(SolutionError, cls)
        assert not issubclass(cls, SolutionError)
    assert not issubclass(SolutionError, AssertionError)


def test_check_exceptions_star_exports():
    assert _star("primsel.simulator.check_tools.exceptions") == {"SolutionError": SolutionError}


# --- check_tools.time_utils ----------------------------------------------------------------


def test_check_time_utils_exports_and_shared_objects():
    namespace = _star("primsel.simulator.check_tools.time_utils")
    assert set(namespace) == {"repetition_schedule", "MAX_EVENT_RECURRENCES", "RepetitionSpec", "now_", "datetime"}
    assert namespace["datetime"] is dt
    assert namespace["MAX_EVENT_RECURRENCES"] == 23
    assert namespace["RepetitionSpec"] is app_time_utils.RepetitionSpec
    assert namespace["now_"] is app_time_utils.now_
    assert check_time_utils.now_() == dt.datetime(2024, 6, 25, 9, 6)


def test_repetition_schedule_of_none_is_empty():
    assert repetition_schedule(dt.time(10), None) == []
    assert repetition_schedule(when=dt.time(10), spec=None, start_date=dt.date(2024, 7, 1)) == []


def test_repetition_schedule_keyword_call_and_cap():
    result = repetition_schedule(
        when=dt.time(10, 0), spec=RepetitionSpec(frequency=EventFrequency.WEEKLY), start_date=dt.date(2024, 6, 25)
    )
    assert len(result) == 23
    assert result[0] == dt.datetime(2024, 6, 25, 10) and result[-1] == dt.datetime(2024, 11, 26, 10)


def test_repetition_schedule_defaults_to_today():
    spec = RepetitionSpec(frequency=EventFrequency.DAILY, max_repetitions=2)
    assert repetition_schedule(dt.time(10), spec) == [dt.datetime(2024, 6, 25, 10), dt.datetime(2024, 6, 26, 10)]


def test_repetition_schedule_mutates_recurs_until():
    spec = RepetitionSpec(frequency=EventFrequency.WEEKLY, recurs_until=dt.date(2024, 7, 20))
    result = repetition_schedule(when=dt.time(10), spec=spec, start_date=dt.date(2024, 6, 26))
    assert result == [dt.datetime(2024, 6, 26, 10) + dt.timedelta(weeks=i) for i in range(4)]
    assert spec.recurs_until == dt.datetime(2024, 7, 20, 10, 0)


def test_repetition_schedule_agrees_with_the_calendar_helper():
    def make():
        return RepetitionSpec(EventFrequency.MONTHLY, which_weekday=[0, 1, 2, 3, 4], bysetpos=[-1], max_repetitions=3)

    expected = app_time_utils._repetition_schedule(dt.time(9), make(), dt.date(2024, 6, 25))
    assert repetition_schedule(dt.time(9), make(), dt.date(2024, 6, 25)) == expected
    assert [o.date() for o in expected] == [dt.date(2024, 6, 28), dt.date(2024, 7, 31), dt.date(2024, 8, 30)]
