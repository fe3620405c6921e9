"""Company directory: who works here, in which team, who manages whom, and who is on holiday.

Every function reads the EMPLOYEES (and EMPLOYEE_VACATIONS) table of the current execution
context at call time and returns new objects built from the stored rows.
"""

import datetime
from copy import deepcopy
from enum import StrEnum, auto
from typing import Any

from pydantic import BaseModel, ConfigDict

from primsel.simulator.apps.exceptions import SearchError
from primsel.simulator.apps.time_utils import TimeInterval
from primsel.simulator.matching import fuzzy_match
from primsel.simulator.state import get_current_context

__all__ = [
    "Employee",
    "EmployeeDetails",
    "Team",
    "find_employee",
    "find_manager_of",
    "find_reports_of",
    "find_team_of",
    "get_all_employees",
    "get_assistant",
    "get_current_user",
    "get_employee_profile",
    "get_office_location",
    "get_vacation_schedule",
    # re-exports that programs use without importing them
    "Any",
    "TimeInterval",
    "datetime",
    "deepcopy",
]

#: The address returned by :func:`get_office_location` for every employee.
_OFFICE_LOCATION = "30 Station Road, Cambridge, CV3 2AL"
#: Roles whose holders have a personal assistant.
_ROLES_WITH_ASSISTANT = ("CEO", "CFO", "COO")


class Team(StrEnum):
    """The team (department) an employee belongs to.

    Members (the value is the lower-cased name, e.g. ``str(Team.Engineering) == "engineering"``):

    - ``SalesMarketing``: sales and marketing.
    - ``Engineering``: engineering.
    - ``Finance``: finance.
    - ``Leadership``: the executives (CEO, COO, CFO).
    - ``Assistants``: the executives' personal assistants.

    Read an employee's team from ``get_employee_profile(employee).team`` and compare it with a
    member, e.g. ``get_employee_profile(e).team == Team.Finance``.
    """

    SalesMarketing = auto()
    Engineering = auto()
    Finance = auto()
    Leadership = auto()
    Assistants = auto()


class Employee(BaseModel):
    """A person in the company directory: the handle every other primitive takes.

    Obtain employees from the directory (``find_employee``, ``get_current_user``,
    ``find_team_of``, ...); do not build them by hand, because ``employee_id`` must be the id
    stored in the directory. Pass them as event attendees or to the other directory functions.
    For more facts about a person (team, e-mail, birthday, ...) use ``get_employee_profile``.

    Attributes
    ----------
    name : str
        The person's name as stored in the directory, e.g. ``"Alice"``.
    employee_id : str
        Unique directory id.

    Notes
    -----
    Immutable and hashable (usable in sets and as dict keys); two employees are equal when name
    and id are equal. Employees have no natural order: sort with ``key=lambda e: e.name``.
    Construction is keyword-only and both fields are required.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    employee_id: str


class EmployeeDetails(BaseModel):
    """The full directory record (profile) of one employee, as returned by ``get_employee_profile``.

    Attributes
    ----------
    name, email_address : str
    mobile : str
        Phone number in international form, e.g. ``"+4071234567890"``.
    team : Team
        The department; executives are in ``Team.Leadership``, their assistants in ``Team.Assistants``.
    role : str
        ``"CEO"``, ``"COO"``, ``"CFO"``, ``"Manager"``, ``"Team Member"`` or ``"Assistant"``.
    video_conference_link : str
        The employee's personal video-call URL.
    joined_date, birth_date : datetime.date
        The day the employee joined the company; the employee's date of birth.
    manager : str or None
        Employee id of the line manager (None for the CEO); ``find_manager_of`` gives an ``Employee``.
    assistant : str or None
        Employee id of the personal assistant (executives only).
    reports : list of str or None
        Employee ids of the direct reports (``[]`` when none).
    employee_id : str or None
    is_user : bool
        True for the device user.

    ``str(details)`` is ``"<name> (<employee_id>)"``.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    email_address: str
    mobile: str
    team: Team
    role: str
    video_conference_link: str
    joined_date: datetime.date
    birth_date: datetime.date
    manager: str | None
    assistant: str | None = None
    reports: list[str] | None = None
    employee_id: str | None = None
    is_user: bool = False

    def __str__(self) -> str:
        return f"{self.name} ({self.employee_id})"


def _employee_rows() -> list[dict[str, Any]]:
    """The live EMPLOYEES table of the current context, in insertion order."""
    return get_current_context().table("EMPLOYEES")


def _employee_row(employee_id: str) -> dict[str, Any]:
    """The single EMPLOYEES row whose ``employee_id`` is ``employee_id`` (the stored dict; do not mutate).

    Raises
    ------
    AssertionError : not exactly one row has that id.
    """
    rows = [row for row in _employee_rows() if row["employee_id"] == employee_id]
    if len(rows) != 1:
        raise AssertionError(f"expected exactly one employee with id {employee_id!r}, found {len(rows)}")
    return rows[0]


def _employee_from_id(employee_id: str) -> Employee:
    """The :class:`Employee` stored under ``employee_id``.

    Raises
    ------
    AssertionError : not exactly one row has that id.
    """
    row = _employee_row(employee_id)
    return Employee(name=row["name"], employee_id=row["employee_id"])


def _as_employee(row: dict[str, Any]) -> Employee:
    return Employee(name=row["name"], employee_id=row["employee_id"])


def _sorted_by_name(employees: list[Employee]) -> list[Employee]:
    return sorted(employees, key=lambda employee: employee.name)


def get_current_user() -> Employee:
    """The device user: the person on whose behalf the program acts ("me", "my", "I").

    Use it whenever the request refers to the user, e.g. to find the user's manager or team, or to
    exclude the user from a list of colleagues.

    Returns
    -------
    Employee

    Raises
    ------
    SearchError
        The directory does not contain exactly one user.
    """
    users = [row for row in _employee_rows() if row["is_user"]]
    if len(users) != 1:
        raise SearchError(f"expected exactly one current user in the directory, found {len(users)}")
    return _as_employee(users[0])


def find_employee(name: str) -> list[Employee]:
    """Look up employees by (approximate) name; the way to turn a person's name into an ``Employee``.

    Matching is fuzzy: it ignores case and punctuation and tolerates partial names and small
    typos ("jian" finds "Jianpeng", "Chrlie" finds "Charlie", "Smith" finds "Alice Smith"), so
    similar names can match too (searching "Alice" may return "Alice", "Al" and "Alice Smith").
    Check the length of the result: it may be empty (nobody matched) or hold several candidates
    (ambiguous; ask the user rather than guessing).

    Parameters
    ----------
    name : str
        Full or partial name. An empty string matches nobody.

    Returns
    -------
    list of Employee
        At most 50 matches, best match first. ``[]`` when nobody matches (never raises).

    Examples
    --------
    >>> alice = find_employee("Alice")[0]
    """
    rows = _employee_rows()
    indexes = fuzzy_match(name, [row["name"] for row in rows])
    return [_as_employee(rows[index]) for index in indexes]


def find_team_of(employee: Employee) -> list[Employee]:
    """The colleagues in the same team as ``employee`` (the employee excluded).

    Team membership comes from the directory's ``team`` field: a team manager's team includes the
    team's sub-managers and members; an executive's team (``Team.Leadership``) is the other
    executives. Use ``find_reports_of`` instead for only the people who report to someone.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    list of Employee
        Sorted by name; ``[]`` if the employee is alone in the team.

    Raises
    ------
    AssertionError
        ``employee`` is not in the directory.
    """
    row = _employee_row(employee.employee_id)
    team = [
        _as_employee(other)
        for other in _employee_rows()
        if other["team"] == row["team"] and other["employee_id"] != employee.employee_id
    ]
    return _sorted_by_name(team)


def find_reports_of(employee: Employee) -> list[Employee]:
    """The direct reports of ``employee``: the people whose line manager they are.

    Only one level down (not the reports' own reports). Differs from ``find_team_of``, which
    returns everybody in the same team.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    list of Employee
        Sorted by name; ``[]`` when the employee manages nobody.

    Raises
    ------
    AssertionError
        ``employee`` is not in the directory.
    """
    row = _employee_row(employee.employee_id)
    return _sorted_by_name([_employee_from_id(report_id) for report_id in row["reports"] or []])


def find_manager_of(employee: Employee) -> Employee | None:
    """The line manager (boss) of ``employee``.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    Employee or None
        The manager; ``None`` for the CEO, who has no manager.

    Raises
    ------
    AssertionError
        ``employee`` is not in the directory.
    """
    manager_id = _employee_row(employee.employee_id)["manager"]
    return None if manager_id is None else _employee_from_id(manager_id)


def get_assistant(employee: Employee) -> Employee | None:
    """The personal assistant of an executive (CEO, COO or CFO).

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    Employee or None
        The executive's assistant; ``None`` for anyone who is not CEO, COO or CFO (managers and
        team members have no assistant).

    Raises
    ------
    AssertionError
        ``employee`` is not in the directory.
    """
    row = _employee_row(employee.employee_id)
    if row["role"] not in _ROLES_WITH_ASSISTANT or row["assistant"] is None:
        return None
    return _employee_from_id(row["assistant"])


def get_vacation_schedule(employee: Employee) -> list[TimeInterval] | None:
    """The booked holidays (time off) of ``employee``.

    Use it to check whether someone is away on a date, e.g. before inviting them:
    ``any(v.contains_date(day) for v in schedule)``.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    list of TimeInterval or None
        One interval per holiday period, sorted by start. ``None`` (not ``[]``) when the employee
        has no holidays booked, so test ``if not schedule`` or ``schedule is None`` before iterating.
    """
    intervals = [
        TimeInterval(start=row["starts"], end=row["ends"])
        for row in get_current_context().table("EMPLOYEE_VACATIONS")
        if row["employee_id"] == employee.employee_id
    ]
    if not intervals:
        return None
    return sorted(intervals, key=lambda interval: interval.start)


def get_employee_profile(employee: Employee) -> EmployeeDetails:
    """The full directory record of ``employee``: team, role, e-mail, phone, dates and more.

    Use it to read facts that ``Employee`` does not carry, e.g. ``.team`` (which department),
    ``.joined_date`` (start date), ``.birth_date``, ``.email_address``, ``.mobile``,
    ``.video_conference_link`` or ``.role``.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    EmployeeDetails

    Raises
    ------
    AssertionError
        ``employee`` is not in the directory.
    """
    row = _employee_row(employee.employee_id)
    return EmployeeDetails(
        name=row["name"],
        email_address=row["email_address"],
        mobile=row["mobile"],
        team=row["team"],
        role=row["role"],
        video_conference_link=row["video_conference_link"],
        joined_date=row["joined_date"],
        birth_date=row["birth_date"],
        manager=row["manager"],
        assistant=row["assistant"],
        reports=list(row["reports"]) if row["reports"] is not None else None,
        employee_id=row["employee_id"],
        is_user=row["is_user"],
    )


def get_all_employees() -> list[Employee]:
    """Every person in the company directory, the device user included.

    Use it for company-wide questions (everybody, all managers, whoever joined recently, ...),
    typically combined with ``get_employee_profile`` to filter.

    Returns
    -------
    list of Employee
        Sorted by name.
    """
    return _sorted_by_name([_as_employee(row) for row in _employee_rows()])


def get_office_location(employee: Employee) -> str:
    """The postal address of the office where ``employee`` works.

    Every employee works at the same office.

    Parameters
    ----------
    employee : Employee

    Returns
    -------
    str
        The address, e.g. ``"30 Station Road, Cambridge, CV3 2AL"``.
    """
    return _OFFICE_LOCATION
