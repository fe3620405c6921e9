"""Company directory primitives over organisations built by simulate_org_structure.

The default organisation (fresh context, ``simulate_org_structure([])``) is, in table order:
CEO Danton (assistant Ileana; reports Horace, Sweethearta), COO Horace (assistant Marat; reports
Splendour, Jeeves), SalesMarketing manager Splendour (report Elina), Engineering manager Jeeves
(reports Mafalda, Alex), Marat, CFO Sweethearta (assistant Charm; report Robespierre), Finance
manager Robespierre (report Spookington), Charm, Ileana. The user is Alex (Engineering member).
"""

import copy
import datetime

import pydantic
import pytest

from primsel.simulator.apps import company_directory as cd
from primsel.simulator.apps.company_directory import (
    Employee,
    EmployeeDetails,
    Team,
    _employee_from_id,
    _employee_row,
    find_employee,
    find_manager_of,
    find_reports_of,
    find_team_of,
    get_all_employees,
    get_assistant,
    get_current_user,
    get_employee_profile,
    get_office_location,
    get_vacation_schedule,
)
from primsel.simulator.apps.exceptions import SearchError
from primsel.simulator.apps.time_utils import TimeInterval
from primsel.simulator.setup_tools.company_directory import simulate_org_structure, simulate_vacation_schedule
from primsel.simulator.state import ExecutionContext, new_context

#: Input whose shuffled table order puts Alice before Al before Alice Smith, and Bobby before Bob.
FUZZY_NAMES = ["Jianpeng", "Alice", "Bob", "Charlie", "Al", "Alice Smith", "Bobby"]


@pytest.fixture
def org():
    """The default organisation in a fresh current context; yields ``{name: Employee}``."""
    with new_context(ExecutionContext()) as context:
        simulate_org_structure([])
        rows = context.table("EMPLOYEES")
        yield {row["name"]: Employee(name=row["name"], employee_id=row["employee_id"]) for row in rows}


def names(employees):
    return [employee.name for employee in employees]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Jian", ["Jianpeng"]),
        ("jianpeng", ["Jianpeng"]),
        ("Bob", ["Bob", "Bobby"]),
        ("Bo", ["Bobby", "Bob"]),  # both score 90: table order decides
        ("Alice", ["Alice", "Al", "Alice Smith"]),
        ("Alex", ["Alex", "Al"]),
        ("alice smith", ["Alice Smith", "Alice", "Al"]),
        ("Smith", ["Alice Smith"]),
        ("Chrlie", ["Charlie"]),
        ("Charlie Brown", ["Charlie"]),
        ("Zed", []),
        ("", []),
    ],
)
def test_find_employee_fuzzy_examples(query, expected):
    with new_context(ExecutionContext()) as context:
        simulate_org_structure(FUZZY_NAMES)
        order = [row["name"] for row in context.table("EMPLOYEES")]
        assert order.index("Alice") < order.index("Al") < order.index("Alice Smith")
        assert order.index("Bobby") < order.index("Bob")
        assert names(find_employee(query)) == expected


def test_find_employee_returns_directory_ids(org):
    assert find_employee("Jeeves") == [org["Jeeves"]]


def test_get_current_user_is_the_user_row(org):
    assert get_current_user() == org["Alex"]


def test_get_current_user_without_directory_raises_search_error():
    with new_context(ExecutionContext()):
        with pytest.raises(SearchError):
            get_current_user()


def test_find_team_of_excludes_the_employee_and_sorts_by_name(org):
    assert names(find_team_of(org["Alex"])) == ["Jeeves", "Mafalda"]
    assert names(find_team_of(org["Jeeves"])) == ["Alex", "Mafalda"]


def test_find_team_of_leader_is_the_other_leaders_and_assistants_are_a_team(org):
    assert names(find_team_of(org["Danton"])) == ["Horace", "Sweethearta"]
    assert names(find_team_of(org["Marat"])) == ["Charm", "Ileana"]


def test_find_reports_of_sorts_by_name_and_is_empty_for_members(org):
    assert names(find_reports_of(org["Jeeves"])) == ["Alex", "Mafalda"]  # stored as Mafalda, Alex
    assert names(find_reports_of(org["Horace"])) == ["Jeeves", "Splendour"]
    assert find_reports_of(org["Alex"]) == []


def test_find_manager_of(org):
    assert find_manager_of(org["Alex"]) == org["Jeeves"]
    assert find_manager_of(org["Jeeves"]) == org["Horace"]
    assert find_manager_of(org["Danton"]) is None


def test_get_assistant_only_for_executives(org):
    assert get_assistant(org["Danton"]) == org["Ileana"]
    assert get_assistant(org["Horace"]) == org["Marat"]
    assert get_assistant(org["Sweethearta"]) == org["Charm"]
    assert get_assistant(org["Jeeves"]) is None
    assert get_assistant(org["Alex"]) is None
    assert get_assistant(org["Marat"]) is None


def test_get_vacation_schedule_is_none_without_holidays(org):
    assert get_vacation_schedule(org["Alex"]) is None
    simulate_vacation_schedule(org["Alex"], [])
    assert get_vacation_schedule(org["Alex"]) is None


def test_get_vacation_schedule_sorted_by_start(org):
    later = TimeInterval(datetime.datetime(2024, 7, 8, 9, 0), datetime.datetime(2024, 7, 12, 17, 0))
    earlier = TimeInterval(datetime.datetime(2024, 6, 27, 0, 0), datetime.datetime(2024, 6, 28, 0, 0))
    simulate_vacation_schedule(org["Alex"], [later, earlier])
    simulate_vacation_schedule(org["Jeeves"], [later])
    schedule = get_vacation_schedule(org["Alex"])
    assert schedule == [earlier, later]
    assert all(type(interval) is TimeInterval for interval in schedule)
    assert get_vacation_schedule(org["Jeeves"]) == [later]
    assert get_vacation_schedule(org["Mafalda"]) is None


def test_get_vacation_schedule_does_not_check_existence(org):
    assert get_vacation_schedule(Employee(name="Ghost", employee_id="no-such-id")) is None


def test_get_employee_profile_matches_snapshot_row(org):
    profile = get_employee_profile(org["Jeeves"])
    assert isinstance(profile, EmployeeDetails)
    assert profile.name == "Jeeves"
    assert profile.email_address == "jeeves@company.co.ro"
    assert profile.mobile == "+4088398947196"
    assert profile.team is Team.Engineering
    assert profile.role == "Manager"
    assert profile.video_conference_link == "https://company.xweb.com/jeeves"
    assert profile.joined_date == datetime.date(2024, 6, 4)
    assert profile.birth_date == datetime.date(1987, 7, 1)
    assert profile.manager == org["Horace"].employee_id
    assert profile.assistant is None
    assert profile.reports == [org["Mafalda"].employee_id, org["Alex"].employee_id]
    assert profile.employee_id == org["Jeeves"].employee_id
    assert profile.is_user is False
    assert str(profile) == f"Jeeves ({org['Jeeves'].employee_id})"
    assert get_employee_profile(org["Alex"]).is_user is True
    assert get_employee_profile(org["Danton"]).assistant == org["Ileana"].employee_id


def test_profile_is_a_copy_of_the_row(org):
    profile = get_employee_profile(org["Jeeves"])
    profile.reports.append("x")
    assert get_employee_profile(org["Jeeves"]).reports == [org["Mafalda"].employee_id, org["Alex"].employee_id]


def test_get_all_employees_sorted_by_name(org):
    assert names(get_all_employees()) == sorted(org)
    assert len(get_all_employees()) == 13


def test_get_all_employees_keeps_table_order_for_equal_names():
    with new_context(ExecutionContext()) as context:
        simulate_org_structure(["Horace"])  # padding adds a second Horace
        horaces = [row["employee_id"] for row in context.table("EMPLOYEES") if row["name"] == "Horace"]
        listed = [e.employee_id for e in get_all_employees() if e.name == "Horace"]
    assert len(horaces) == 2
    assert listed == horaces


def test_get_office_location_is_constant(org):
    assert get_office_location(org["Alex"]) == "30 Station Road, Cambridge, CV3 2AL"
    ghost = Employee(name="Ghost", employee_id="no-such-id")
    assert get_office_location(ghost) == "30 Station Road, Cambridge, CV3 2AL"


@pytest.mark.parametrize(
    "function", [find_team_of, find_reports_of, find_manager_of, get_assistant, get_employee_profile]
)
def test_unknown_employee_raises_assertion_error(org, function):
    with pytest.raises(AssertionError):
        function(Employee(name="Ghost", employee_id="no-such-id"))


def test_employee_row_helpers(org):
    alex_id = org["Alex"].employee_id
    assert _employee_row(alex_id)["name"] == "Alex"
    assert _employee_from_id(alex_id) == org["Alex"]
    with pytest.raises(AssertionError):
        _employee_row("no-such-id")


def test_employee_row_requires_a_unique_id(org):
    from primsel.simulator.state import get_current_context

    rows = get_current_context().table("EMPLOYEES")
    rows.append(dict(rows[0]))
    with pytest.raises(AssertionError):
        _employee_from_id(rows[0]["employee_id"])


def test_employee_model_semantics():
    alex = Employee(name="Alex", employee_id="e1")
    assert alex == Employee(name="Alex", employee_id="e1")
    assert alex != Employee(name="Alex", employee_id="e2")
    assert {alex, Employee(name="Alex", employee_id="e1")} == {alex}
    assert repr(alex) == "Employee(name='Alex', employee_id='e1')"
    assert str(alex) == "name='Alex' employee_id='e1'"
    assert copy.deepcopy(alex) == alex
    with pytest.raises(pydantic.ValidationError):
        alex.name = "Bob"
    with pytest.raises(TypeError):
        Employee("Alex", "e1")
    with pytest.raises(pydantic.ValidationError):
        Employee(name="Alex")
    with pytest.raises(TypeError):
        sorted([alex, Employee(name="Bob", employee_id="e2")])


def test_team_members_and_values():
    assert [member.name for member in Team] == ["SalesMarketing", "Engineering", "Finance", "Leadership", "Assistants"]
    assert str(Team.SalesMarketing) == "salesmarketing"
    assert repr(Team.Engineering) == "<Team.Engineering: 'engineering'>"
    assert Team("finance") is Team.Finance


def test_star_exports():
    assert cd.datetime is datetime
    assert cd.deepcopy is copy.deepcopy
    expected = {"Employee", "EmployeeDetails", "Team", "find_employee", "get_vacation_schedule", "Any", "TimeInterval"}
    assert expected <= set(cd.__all__)
    assert all(hasattr(cd, name) for name in cd.__all__)
