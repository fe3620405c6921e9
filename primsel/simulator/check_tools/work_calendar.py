"""Calendar check for evaluation programs.

Not part of the assistant library: only evaluation programs use it.
"""

from __future__ import annotations

from primsel.simulator.apps.company_directory import Employee
from primsel.simulator.state import get_current_context

__all__ = ["assert_user_calendar_shared", "Employee"]


def assert_user_calendar_shared(employees: list[Employee]) -> None:
    """Check that the user's calendar was shared with exactly these employees.

    Every ``share_calendar`` call counts: the ids of all calls, concatenated, must equal the
    given employees' ids as multisets (an employee shared twice must be listed twice).

    Raises
    ------
    AssertionError : the shares differ from ``employees``.
    """
    shared = sorted(
        employee_id
        for row in get_current_context().table("USER_METADATA")
        for employee_id in row["calendar_visible_to"]
    )
    expected = sorted(employee.employee_id for employee in employees)
    if shared != expected:
        raise AssertionError(f"calendar shared with ids {shared}, expected {expected}")
