"""The organisation generator reproduces the reference implementation's directory snapshots exactly.

Each snapshot starts from a fresh ExecutionContext, which seeds ``random`` with 0. A row is
rendered as ``name | team | role | manager | assistant | reports | user | joined | born | mobile``
with names in place of ids and ``-`` for none.
"""

import datetime
import random

import pytest

from primsel.simulator.apps.company_directory import Employee, Team
from primsel.simulator.setup_tools.company_directory import (
    DEFAULT_ORG_NAMES,
    simulate_org_structure,
    simulate_vacation_schedule,
)
from primsel.simulator.state import ExecutionContext, new_context

DEFAULT_ORG = """
Danton | leadership | CEO | - | Ileana | Horace, Sweethearta | | 2023-07-23 | 1983-07-07 | +4088242194892
Horace | leadership | COO | Danton | Marat | Splendour, Jeeves | | 2023-07-23 | 1998-08-10 | +4095781565938
Splendour | salesmarketing | Manager | Horace | - | Elina | | 2024-05-28 | 1987-07-28 | +4080801609753
Elina | salesmarketing | Team Member | Splendour | - | - | | 2024-06-17 | 1984-08-06 | +4083287115871
Jeeves | engineering | Manager | Horace | - | Mafalda, Alex | | 2024-06-04 | 1987-07-01 | +4088398947196
Mafalda | engineering | Team Member | Jeeves | - | - | | 2024-06-24 | 2003-08-02 | +4062094711220
Alex | engineering | Team Member | Jeeves | - | - | yes | 2023-10-22 | 1982-08-11 | +4098483396947
Marat | assistants | Assistant | Horace | - | - | | 2023-09-04 | 1993-08-01 | +4079179533041
Sweethearta | leadership | CFO | Danton | Charm | Robespierre | | 2023-07-23 | 1987-07-16 | +4060123098910
Robespierre | finance | Manager | Sweethearta | - | Spookington | | 2023-08-07 | 1980-08-09 | +4096151090321
Spookington | finance | Team Member | Robespierre | - | - | | 2024-05-27 | 1983-08-12 | +4069141314562
Charm | assistants | Assistant | Sweethearta | - | - | | 2024-05-29 | 1998-07-03 | +4083457923022
Ileana | assistants | Assistant | Danton | - | - | | 2023-08-12 | 1994-07-25 | +4060769845642
"""

FOUR_NAMES = """
Splendour | leadership | CEO | - | Sweethearta | Jianpeng, Horace | | 2023-07-23 | 1983-07-07 | +4088242194892
Jianpeng | leadership | COO | Splendour | Charm | Bob, Marat | | 2023-07-23 | 1998-08-10 | +4095781565938
Bob | salesmarketing | Manager | Jianpeng | - | Robespierre | | 2024-05-28 | 1987-07-28 | +4080801609753
Robespierre | salesmarketing | Team Member | Bob | - | - | | 2024-06-17 | 1984-08-06 | +4083287115871
Marat | engineering | Manager | Jianpeng | - | Alice, Alex | | 2024-06-04 | 1987-07-01 | +4088398947196
Alice | engineering | Team Member | Marat | - | - | | 2024-06-24 | 2003-08-02 | +4062094711220
Alex | engineering | Team Member | Marat | - | - | yes | 2023-10-22 | 1982-08-11 | +4098483396947
Charm | assistants | Assistant | Jianpeng | - | - | | 2023-09-04 | 1993-08-01 | +4079179533041
Horace | leadership | CFO | Splendour | Charlie | Mafalda | | 2023-07-23 | 1987-07-16 | +4060123098910
Mafalda | finance | Manager | Horace | - | Danton | | 2023-08-07 | 1980-08-09 | +4096151090321
Danton | finance | Team Member | Mafalda | - | - | | 2024-05-27 | 1983-08-12 | +4069141314562
Charlie | assistants | Assistant | Horace | - | - | | 2024-05-29 | 1998-07-03 | +4083457923022
Sweethearta | assistants | Assistant | Splendour | - | - | | 2023-08-12 | 1994-07-25 | +4060769845642
"""

MANAGER_IN_FINANCE = """
Robespierre | leadership | CEO | - | Marat | Jianpeng, Charm | | 2023-07-23 | 1983-07-07 | +4088242194892
Jianpeng | leadership | COO | Robespierre | Danton | Mafalda, Spookington | | 2023-07-23 | 1998-08-10 | +4095781565938
Mafalda | salesmarketing | Manager | Jianpeng | - | Ileana | | 2024-05-28 | 1987-07-28 | +4080801609753
Ileana | salesmarketing | Team Member | Mafalda | - | - | | 2024-06-17 | 1984-08-06 | +4083287115871
Spookington | engineering | Manager | Jianpeng | - | Elina | | 2024-06-04 | 1987-07-01 | +4088398947196
Elina | engineering | Team Member | Spookington | - | - | | 2024-06-24 | 2003-08-02 | +4062094711220
Danton | assistants | Assistant | Jianpeng | - | - | | 2024-06-17 | 1995-07-12 | +4098483396947
Charm | leadership | CFO | Robespierre | Splendour | Sweethearta | | 2023-07-23 | 1988-08-21 | +4065917953304
Sweethearta | finance | Manager | Charm | - | Horace, Alex | | 2023-09-09 | 2004-07-01 | +4062560123098
Horace | finance | Team Member | Sweethearta | - | - | | 2023-08-07 | 1980-08-09 | +4096151090321
Alex | finance | Manager | Sweethearta | - | Rumplestinskin | yes | 2023-11-28 | 1999-07-15 | +4069141314562
Rumplestinskin | finance | Team Member | Alex | - | - | | 2024-05-31 | 1986-08-07 | +4069163457923
Splendour | assistants | Assistant | Charm | - | - | | 2024-06-07 | 1990-07-04 | +4088419720769
Marat | assistants | Assistant | Robespierre | - | - | | 2023-10-04 | 1995-07-11 | +4098071508423
"""

CEO_USER = """
Alex | leadership | CEO | - | Splendour | Sweethearta, A | yes | 2023-07-23 | 1983-07-07 | +4088242194892
Sweethearta | leadership | COO | Alex | Danton | Mafalda, Horace | | 2023-07-23 | 1998-08-10 | +4095781565938
Mafalda | salesmarketing | Manager | Sweethearta | - | Charm, B | | 2024-05-28 | 1987-07-28 | +4080801609753
Charm | salesmarketing | Team Member | Mafalda | - | - | | 2024-06-17 | 1984-08-06 | +4083287115871
B | salesmarketing | Team Member | Mafalda | - | - | | 2024-06-04 | 1987-07-01 | +4088398947196
Horace | engineering | Manager | Sweethearta | - | Marat | | 2024-06-24 | 2003-08-02 | +4062094711220
Marat | engineering | Team Member | Horace | - | - | | 2024-06-17 | 1995-07-12 | +4098483396947
Danton | assistants | Assistant | Sweethearta | - | - | | 2024-06-06 | 1986-08-25 | +4065917953304
A | leadership | CFO | Alex | Robespierre | Elina | | 2023-07-23 | 1984-07-31 | +4066012309891
Elina | finance | Manager | A | - | Ileana | | 2024-05-31 | 1984-08-22 | +4079916151090
Ileana | finance | Team Member | Elina | - | - | | 2024-06-06 | 1998-07-24 | +4063008691413
Robespierre | assistants | Assistant | A | - | - | | 2024-06-24 | 2004-07-23 | +4090870916345
Splendour | assistants | Assistant | Alex | - | - | | 2023-11-04 | 2004-08-12 | +4073022584197
"""

EXTENDED_ENGINEERING = """
Sweethearta | leadership | CEO | - | Danton | A, Splendour | | 2023-07-23 | 2003-07-12 | +4065659387784
A | leadership | COO | Sweethearta | Robespierre | Horace, Elina | | 2023-07-23 | 1989-07-14 | +4071609753513
Horace | salesmarketing | Manager | A | - | Marat | | 2024-06-12 | 1993-07-04 | +4088711587148
Marat | salesmarketing | Team Member | Horace | - | - | | 2023-09-09 | 1987-07-18 | +4079894719659
Elina | engineering | Manager | A | - | B, Alex, W, Y, X | | 2024-06-03 | 2002-08-13 | +4099471122018
B | engineering | Team Member | Elina | - | - | | 2024-06-12 | 1993-07-19 | +4068339694775
Alex | engineering | Team Member | Elina | - | - | yes | 2023-08-29 | 1993-08-01 | +4077953304135
W | engineering | Manager | Elina | - | Z | | 2023-08-10 | 1987-07-16 | +4060123098910
Z | engineering | Team Member | W | - | - | | 2024-06-16 | 1988-07-12 | +4096151090321
Y | engineering | Team Member | Elina | - | - | | 2024-05-22 | 1998-07-24 | +4080869141314
X | engineering | Team Member | Elina | - | - | | 2024-05-22 | 2004-07-23 | +4090870916345
Robespierre | assistants | Assistant | A | - | - | | 2023-11-04 | 2004-08-12 | +4073022584197
Splendour | leadership | CFO | Sweethearta | Mafalda | Charm | | 2023-07-23 | 1985-07-18 | +4085642807150
Charm | finance | Manager | Splendour | - | Ileana | | 2024-05-28 | 1979-07-25 | +4097594599246
Ileana | finance | Team Member | Charm | - | - | | 2024-06-17 | 1981-07-05 | +4095233769606
Mafalda | assistants | Assistant | Splendour | - | - | | 2023-10-10 | 1999-07-11 | +4067142787890
Danton | assistants | Assistant | Sweethearta | - | - | | 2023-07-23 | 2002-07-13 | +4076381206650
"""

CASES = {
    "default": (([],), {}, DEFAULT_ORG),
    "four_names": ((["Jianpeng", "Alice", "Bob", "Charlie"],), {}, FOUR_NAMES),
    "manager_in_finance": ((["Jianpeng"],), {"user_role": "Manager", "user_team": Team.Finance}, MANAGER_IN_FINANCE),
    "ceo_user": ((["A", "B"],), {"user_role": "CEO", "user_team": Team.Leadership}, CEO_USER),
    "extended_engineering": (
        (["A", "B"],),
        {"teams_to_extend": {Team.Engineering: ["X", "Y", "Z", "W"]}},
        EXTENDED_ENGINEERING,
    ),
}


def render(rows: list[dict]) -> list[str]:
    names = {row["employee_id"]: row["name"] for row in rows}
    lines = []
    for row in rows:
        cells = [
            row["name"],
            str(row["team"]),
            row["role"],
            names[row["manager"]] if row["manager"] is not None else "-",
            names[row["assistant"]] if row["assistant"] is not None else "-",
            ", ".join(names[i] for i in row["reports"]) or "-",
            "yes" if row["is_user"] else "",
            row["joined_date"].isoformat(),
            row["birth_date"].isoformat(),
            row["mobile"],
        ]
        lines.append(" | ".join(cells).replace("|  |", "| |"))
    return lines


def build(args, kwargs) -> list[dict]:
    with new_context(ExecutionContext()) as context:
        simulate_org_structure(*args, **kwargs)
        return list(context.table("EMPLOYEES"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_snapshot_matches_reference_directory(case):
    args, kwargs, expected = CASES[case]
    assert render(build(args, kwargs)) == expected.strip().splitlines()


@pytest.mark.parametrize("case", sorted(CASES))
def test_email_and_video_link_follow_from_name(case):
    args, kwargs, _ = CASES[case]
    for row in build(args, kwargs):
        assert row["email_address"] == row["name"].lower() + "@company.co.ro"
        assert row["video_conference_link"] == "https://company.xweb.com/" + row["name"].lower()


def test_row_columns_and_types():
    rows = build(([],), {})
    assert list(rows[0]) == [
        "employee_id", "name", "email_address", "mobile", "team", "role", "video_conference_link",
        "joined_date", "birth_date", "manager", "assistant", "reports", "is_user",
    ]  # fmt: skip
    assert all(isinstance(row["team"], Team) for row in rows)
    assert all(type(row["joined_date"]) is datetime.date for row in rows)
    assert len({row["employee_id"] for row in rows}) == len(rows) == 13
    assert [row["employee_id"] for row in rows if row["is_user"]] == [rows[6]["employee_id"]]


def test_same_call_gives_same_directory_in_each_fresh_context():
    assert render(build((["A", "B"],), {})) == render(build((["A", "B"],), {}))


def test_later_draws_continue_the_seeded_stream():
    # The generator consumes a fixed number of draws; what a setup program draws next is fixed too.
    with new_context(ExecutionContext()):
        simulate_org_structure([])
        first = random.random()
    with new_context(ExecutionContext()):
        simulate_org_structure([])
        assert random.random() == first


def test_caller_names_list_is_not_modified():
    names = ["Jianpeng", "Alice"]
    build((names,), {"teams_to_extend": {Team.Finance: ["Q"]}})
    assert names == ["Jianpeng", "Alice"]


def test_padding_uses_default_names_without_deduplication():
    rows = build((["Horace"],), {})
    assert sorted(row["name"] for row in rows) == sorted(["Horace", *DEFAULT_ORG_NAMES[:11], "Alex"])


def test_twelve_given_names_plus_user_gives_thirteen_rows_without_padding():
    given = [f"P{i}" for i in range(12)]
    rows = build((given,), {})
    assert sorted(row["name"] for row in rows) == sorted([*given, "Alex"])


def test_short_extension_is_padded_with_extension_names():
    rows = build(([],), {"teams_to_extend": {Team.Finance: []}})
    added = {row["name"]: row for row in rows if row["name"] in ("Songoku", "Frodopop")}
    assert set(added) == {"Songoku", "Frodopop"}
    assert all(row["team"] == Team.Finance for row in added.values())
    # The finance team had no sub-manager: the last padding name becomes one, with the other as report.
    assert added["Frodopop"]["role"] == "Manager"
    assert added["Frodopop"]["reports"] == [added["Songoku"]["employee_id"]]


def test_unknown_user_role_is_rejected():
    with new_context(ExecutionContext()):
        with pytest.raises(ValueError, match="user_role"):
            simulate_org_structure([], user_role="Intern")
        with pytest.raises(ValueError):
            simulate_org_structure([], user_role=None)


def test_extending_leadership_fails():
    with new_context(ExecutionContext()):
        with pytest.raises(KeyError):
            simulate_org_structure([], teams_to_extend={Team.Leadership: ["Q"]})


def test_return_value_lists_written_employees_in_table_order():
    with new_context(ExecutionContext()) as context:
        org = simulate_org_structure([])
        rows = context.table("EMPLOYEES")
    assert [e.employee_id for e in org.employees] == [row["employee_id"] for row in rows]
    assert org.user == Employee(name="Alex", employee_id=rows[6]["employee_id"])


def test_vacation_schedule_appends_one_row_per_interval_in_order():
    employee = Employee(name="Nobody", employee_id="id-1")
    first = (datetime.datetime(2024, 7, 1, 9, 0), datetime.datetime(2024, 7, 5, 17, 0))
    second = (datetime.datetime(2024, 6, 26, 0, 0), datetime.datetime(2024, 6, 27, 0, 0))
    with new_context(ExecutionContext()) as context:
        simulate_vacation_schedule(employee, [first, second])
        simulate_vacation_schedule(employee, [])
        rows = context.table("EMPLOYEE_VACATIONS")
    assert rows == [
        {"employee_id": "id-1", "starts": first[0], "ends": first[1]},
        {"employee_id": "id-1", "starts": second[0], "ends": second[1]},
    ]
