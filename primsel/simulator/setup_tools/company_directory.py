"""Setup tools that populate the company directory: a random organisation and holiday bookings.

``simulate_org_structure`` draws from Python's global ``random`` stream (seeded with 0 by every
fresh execution context) in one fixed order, so each call builds the same organisation every time
(the reference implementation's draw order, in the three steps A to C below).
"""

import datetime
import random
import uuid
from copy import deepcopy
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from primsel.simulator.apps.company_directory import Employee, Team
from primsel.simulator.apps.time_utils import TimeInterval, now_
from primsel.simulator.state import get_current_context

__all__ = [
    "DEFAULT_ORG_MIN_MEMBERS",
    "DEFAULT_ORG_NAMES",
    "DEFAULT_TEAM_EXTENSION_NAMES",
    "EXTENDED_TEAM_MIN_MEMBERS",
    "FIXED_HIRE_DATE",
    "LEADERSHIP_ROLES",
    "LEADERSHIP_START_DATE",
    "MAX_HIRED_ON_FIXED_DATE",
    "NEW_HIRE_PROBABILITY",
    "OTHER_ROLES",
    "OrgStructure",
    "UserRole",
    "simulate_org_structure",
    "simulate_vacation_schedule",
    # re-exports that setup programs use without importing them
    "Any",
    "Employee",
    "Team",
    "TimeInterval",
    "datetime",
    "deepcopy",
    "now_",
]

UserRole = Literal["CEO", "COO", "CFO", "Manager", "Team Member"]

#: Names used to pad the organisation to DEFAULT_ORG_MIN_MEMBERS, in this order.
DEFAULT_ORG_NAMES = (
    "Horace",
    "Mafalda",
    "Splendour",
    "Charm",
    "Sweethearta",
    "Robespierre",
    "Danton",
    "Marat",
    "Ileana",
    "Elina",
    "Spookington",
    "Jeeves",
)
#: Names used to pad a team extension to EXTENDED_TEAM_MIN_MEMBERS, in this order.
DEFAULT_TEAM_EXTENSION_NAMES = ("Songoku", "Frodopop")
DEFAULT_ORG_MIN_MEMBERS = 12
EXTENDED_TEAM_MIN_MEMBERS = 2
LEADERSHIP_ROLES = ["CEO", "COO", "CFO"]
OTHER_ROLES = ["Manager", "Team Member"]
#: Joining date of every executive.
LEADERSHIP_START_DATE = datetime.date(2023, 7, 23)
#: Probability that an ordinary employee joined recently (in the last 30 days).
NEW_HIRE_PROBABILITY = 0.5
#: A hire date shared by up to MAX_HIRED_ON_FIXED_DATE members of an extended team.
FIXED_HIRE_DATE = datetime.date(2024, 5, 22)
MAX_HIRED_ON_FIXED_DATE = 2

_VETERAN_JOINED_RANGE = (datetime.date(2023, 7, 23), datetime.date(2023, 12, 1))
_BIRTH_DATE_RANGE = (datetime.date(1979, 1, 1), datetime.date(2005, 1, 1))
_BIRTH_MONTHS = [7, 8]
_MOBILE_FIRST_DIGITS = ["6", "7", "8", "9"]
_EXTENSION_MANAGER_PROBABILITY = 0.2
_MANAGER_USER_REPORT_NAME = "Rumplestinskin"
_EMAIL_DOMAIN = "company.co.ro"
_VIDEO_LINK_PREFIX = "https://company.xweb.com/"
_PHONE_PREFIX = "+40"
_TEAMS = (Team.SalesMarketing, Team.Engineering, Team.Finance)


def _range_draw(bounds: tuple[datetime.date, datetime.date]) -> datetime.date:
    """A uniformly drawn date in ``[start, end]`` (one ``random.randint`` call)."""
    start, end = bounds
    return start + datetime.timedelta(days=random.randint(0, (end - start).days))


def _new_hire_range() -> tuple[datetime.date, datetime.date]:
    """Joining dates of recent hires: from 30 days to 1 day before today."""
    today = now_().date()
    return today - datetime.timedelta(days=30), today - datetime.timedelta(days=1)


class _Person:
    """One person of the organisation being built.

    The random attributes are drawn at first access and cached, so the moment of first access
    decides which random numbers a person gets.
    """

    def __init__(
        self,
        name: str,
        team: Team,
        role: str,
        manager: "_Person | None" = None,
        is_user: bool = False,
        fixed_hire_date: bool = False,
    ) -> None:
        self.name = name
        self.team = team
        self.role = role
        self.manager = manager
        self.reports: list[_Person] = []
        self.assistant: _Person | None = None
        self.is_user = is_user
        self.fixed_hire_date = fixed_hire_date

    @cached_property
    def email_address(self) -> str:
        return f"{self.name}@{_EMAIL_DOMAIN}".lower()

    @cached_property
    def video_conference_link(self) -> str:
        return f"{_VIDEO_LINK_PREFIX}{self.name}".lower()

    @cached_property
    def mobile(self) -> str:
        digits = "".join(str(random.randint(0, 9)) for _ in range(10))
        return _PHONE_PREFIX + random.choice(_MOBILE_FIRST_DIGITS) + digits

    @cached_property
    def joined_date(self) -> datetime.date:
        if self.role in LEADERSHIP_ROLES:
            return LEADERSHIP_START_DATE
        if self.is_user:
            return _range_draw(_VETERAN_JOINED_RANGE)
        if self.fixed_hire_date:
            return FIXED_HIRE_DATE
        if random.random() > NEW_HIRE_PROBABILITY:
            return _range_draw(_new_hire_range())
        return _range_draw(_VETERAN_JOINED_RANGE)

    @cached_property
    def birth_date(self) -> datetime.date:
        return _range_draw(_BIRTH_DATE_RANGE).replace(month=random.choice(_BIRTH_MONTHS))

    @cached_property
    def employee_id(self) -> str:
        return str(uuid.uuid4())

    def add_report(self, person: "_Person") -> None:
        person.manager = self
        self.reports.append(person)


@dataclass(frozen=True)
class OrgStructure:
    """What ``simulate_org_structure`` wrote: every employee in table order, and the user."""

    employees: tuple[Employee, ...]
    user: Employee


def _take(names: list[str], user_name: str) -> str:
    """Pop a name from the end of ``names``; if it is the user's, pop another and put the user's first."""
    name = names.pop()
    if name == user_name:
        name = names.pop()
        names.insert(0, user_name)
    return name


def _build_base_org(
    names: list[str], user_name: str, user_role: str, user_team: Team
) -> tuple[_Person, dict[Team, list[_Person]], _Person]:
    """Step A of the draw order: leaders, assistants, team managers, members and the user."""
    ceo, coo, cfo, user = _appoint_leaders(names, user_name, user_role)
    team_lists: dict[Team, list[_Person]] = {}
    for team in _TEAMS:
        manager = _Person(_take(names, user_name), team, "Manager")
        (cfo if team == Team.Finance else coo).add_report(manager)
        team_lists[team] = [manager]
    _place_members(names, user_name, user_team, team_lists)
    if user is None:
        user = _place_user(user_name, user_role, user_team, team_lists[user_team])
    return ceo, team_lists, user


def _appoint_leaders(
    names: list[str], user_name: str, user_role: str
) -> tuple[_Person, _Person, _Person, _Person | None]:
    """The CEO, COO and CFO (the COO and CFO reporting to the CEO), each with an assistant, and
    the user when the user is one of them (else None).

    Leaders and assistants are taken from the end of ``names``, never the user's name, which
    stays (or is put back) first in ``names`` when the user is not a leader.
    """
    leaders: dict[str, _Person] = {}
    user: _Person | None = None
    if user_role in LEADERSHIP_ROLES:
        user = _Person(user_name, Team.Leadership, user_role, is_user=True)
        leaders[user_role] = user
        names.remove(user_name)
    reinsert_user = user_name in names
    if reinsert_user:
        names.remove(user_name)
    for role in LEADERSHIP_ROLES:
        if role not in leaders:
            leaders[role] = _Person(names.pop(), Team.Leadership, role)
    ceo, coo, cfo = (leaders[role] for role in LEADERSHIP_ROLES)
    ceo.add_report(coo)
    ceo.add_report(cfo)
    for leader in (ceo, coo, cfo):
        leader.assistant = _Person(names.pop(), Team.Assistants, "Assistant", manager=leader)
    if reinsert_user:
        names.insert(0, user_name)
    return ceo, coo, cfo, user


def _place_members(
    names: list[str], user_name: str, user_team: Team, team_lists: dict[Team, list[_Person]]
) -> None:
    """Deal the names left (all but the user's) to the teams in turn as members reporting to the
    team's manager, the user's own team last (skipped for a leader)."""
    order = [team for team in _TEAMS if team != user_team]
    if user_team != Team.Leadership:
        order.append(user_team)
    placing = True
    while placing:
        for team in order:
            if not names or names == [user_name]:
                placing = False
                break
            member = _Person(_take(names, user_name), team, "Team Member")
            team_lists[team][0].add_report(member)
            team_lists[team].append(member)


def _place_user(user_name: str, user_role: str, team: Team, team_list: list[_Person]) -> _Person:
    """The user who is not a leader, in ``team`` (whose people are ``team_list``, its manager
    first), reporting to its manager; a user who is a manager gets a report of their own."""
    user = _Person(user_name, team, user_role, is_user=True)
    team_list[0].add_report(user)
    team_list.append(user)
    if user_role == "Manager":
        report = _Person(_MANAGER_USER_REPORT_NAME, team, "Team Member")
        user.add_report(report)
        team_list.append(report)
    return user


def _extend_team(team_list: list[_Person], team: Team, new_names: list[str]) -> None:
    """Step B of the draw order: add ``new_names`` (and sub-managers) to one team."""
    new_names = list(new_names)
    current_managers = [person for person in team_list if person.role == "Manager"]
    if not current_managers:
        raise ValueError(f"team {team} has no manager to extend from")
    for padding in DEFAULT_TEAM_EXTENSION_NAMES:
        if len(new_names) < EXTENDED_TEAM_MIN_MEMBERS:
            new_names.append(padding)

    if not any(report.role == "Manager" for manager in current_managers for report in manager.reports):
        manager = _Person(new_names.pop(), team, "Manager")
        random.choice(current_managers).add_report(manager)
        current_managers.append(manager)
        member = _Person(new_names.pop(), team, "Team Member")
        manager.add_report(member)
        team_list.extend([manager, member])

    while new_names:
        name = new_names.pop()
        role = "Manager" if random.random() < _EXTENSION_MANAGER_PROBABILITY else "Team Member"
        if not new_names:
            role = "Team Member"
        idle_managers = [manager for manager in current_managers if not manager.reports]
        boss = random.choice(idle_managers or current_managers)
        # Reads joined_date of every team member in order: this draws for those not drawn yet.
        joined = [person.joined_date for person in team_list]
        fixed = joined.count(FIXED_HIRE_DATE) < MAX_HIRED_ON_FIXED_DATE
        person = _Person(name, team, role, fixed_hire_date=fixed)
        boss.add_report(person)
        if role == "Manager":
            current_managers.append(person)
        team_list.append(person)


def _write(person: _Person, rows: list[dict[str, Any]], written: list[_Person]) -> None:
    """Step C of the draw order: append ``person``'s row, then their reports' subtrees, then their assistant's."""
    # The lazy attributes are evaluated in this order (it decides the random draws).
    email_address = person.email_address
    mobile = person.mobile
    video_conference_link = person.video_conference_link
    joined_date = person.joined_date
    birth_date = person.birth_date
    manager = None if person.manager is None else person.manager.employee_id
    assistant = None if person.assistant is None else person.assistant.employee_id
    reports = [report.employee_id for report in person.reports]
    rows.append(
        {
            "employee_id": person.employee_id,
            "name": person.name,
            "email_address": email_address,
            "mobile": mobile,
            "team": person.team,
            "role": person.role,
            "video_conference_link": video_conference_link,
            "joined_date": joined_date,
            "birth_date": birth_date,
            "manager": manager,
            "assistant": assistant,
            "reports": reports,
            "is_user": person.is_user,
        }
    )
    written.append(person)
    for report in person.reports:
        _write(report, rows, written)
    if person.assistant is not None:
        _write(person.assistant, rows, written)


def simulate_org_structure(
    default_employee_names: list[str],
    user_name: str = "Alex",
    user_role: UserRole = "Team Member",
    user_team: Team = Team.Engineering,
    teams_to_extend: dict[Team, list[str]] | None = None,
) -> OrgStructure:
    """Build a company organisation and write it to the directory (EMPLOYEES table).

    The organisation has a CEO, COO and CFO (each with an assistant), one manager per team
    (SalesMarketing and Engineering report to the COO, Finance to the CFO) and team members;
    names, dates and phone numbers are drawn from the global ``random`` stream in a fixed order.

    Parameters
    ----------
    default_employee_names : names to place in the organisation (not modified); padded with
        ``DEFAULT_ORG_NAMES`` to at least 12 names.
    user_name : the device user's name (added if missing).
    user_role : the user's role; "Manager" also creates a report "Rumplestinskin" for the user.
    user_team : the user's team (ignored for a leadership role except for member ordering).
    teams_to_extend : ``{team: names}`` to add to a team, with sub-managers drawn at random.

    Returns
    -------
    OrgStructure : the written employees in table order and the user.

    Raises
    ------
    ValueError : unknown ``user_role``, or a team to extend that has no manager.
    """
    if user_role not in LEADERSHIP_ROLES + OTHER_ROLES:
        raise ValueError(f"user_role must be one of {LEADERSHIP_ROLES + OTHER_ROLES}, got {user_role!r}")
    names = list(default_employee_names)
    padding = iter(DEFAULT_ORG_NAMES)
    while len(names) < DEFAULT_ORG_MIN_MEMBERS:
        names.append(next(padding))
    if user_name not in names:
        names.append(user_name)
    random.shuffle(names)

    ceo, team_lists, user = _build_base_org(names, user_name, user_role, user_team)
    for team, new_names in (teams_to_extend or {}).items():
        _extend_team(team_lists[team], team, new_names)

    written: list[_Person] = []
    _write(ceo, get_current_context().table("EMPLOYEES"), written)
    employees = tuple(Employee(name=p.name, employee_id=p.employee_id) for p in written)
    return OrgStructure(employees=employees, user=Employee(name=user.name, employee_id=user.employee_id))


def simulate_vacation_schedule(employee: Employee, time_off: list[TimeInterval]) -> None:
    """Book holidays for ``employee``: one EMPLOYEE_VACATIONS row per interval, in order (no checks)."""
    rows = get_current_context().table("EMPLOYEE_VACATIONS")
    for start, end in time_off:
        rows.append({"employee_id": employee.employee_id, "starts": start, "ends": end})
