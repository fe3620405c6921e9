"""Tests of the calendar check for evaluation programs."""

from __future__ import annotations

import pytest

from primsel.simulator.apps.company_directory import Employee
from primsel.simulator.apps.work_calendar import share_calendar
from primsel.simulator.check_tools.work_calendar import assert_user_calendar_shared
from primsel.simulator.state import new_context

ALICE = Employee(name="Alice", employee_id="id-a")
BOB = Employee(name="Bob", employee_id="id-b")


@pytest.fixture
def context():
    with new_context() as ctx:
        yield ctx


def test_nothing_shared_matches_no_employees(context):
    assert assert_user_calendar_shared([]) is None
    with pytest.raises(AssertionError):
        assert_user_calendar_shared([ALICE])


def test_shares_accumulate_and_order_does_not_matter(context):
    share_calendar([BOB])
    share_calendar([ALICE])
    assert_user_calendar_shared([ALICE, BOB])
    with pytest.raises(AssertionError):
        assert_user_calendar_shared([ALICE])


def test_repeated_shares_count_twice(context):
    share_calendar([ALICE, BOB])
    share_calendar([ALICE])
    assert_user_calendar_shared([ALICE, ALICE, BOB])
    with pytest.raises(AssertionError):
        assert_user_calendar_shared([ALICE, BOB])
