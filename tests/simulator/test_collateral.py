"""The collateral audit: rows of the world a program was given that it removed or changed and the
task's reference program, run by the judge on the same world, did not.

ASPERA's status stays what it was; ``collateral`` and ``strict`` (passed with no collateral) sit
beside it in every :class:`primsel.types.ExecutionResult` and every ``primsel verify`` row.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from primsel.commands import verify
from primsel.datasets import load_builtin_tasks, load_tasks
from primsel.simulator.library import app_modules
from primsel.simulator.sandbox import Sandbox
from primsel.simulator.state import TABLES, new_context

#: A program that empties every table of the world it is given, then returns ``value``.
WIPE = textwrap.dedent('''\
    def wipe():
        from aspera.simulation.execution_context import get_current_context
        for rows in get_current_context().tables.values():
            rows.clear()
        return {value}
    ''')
#: Asper-Bench tasks whose checks a world-wiping program returning "" passes.
WIPED_PASSES = ("72", "147", "172")


def _delete(*subjects: str) -> str:
    """A program for builtin-03 that deletes the user's events with these subjects."""
    return textwrap.dedent(f'''\
        def cancel():
            for event in find_events():
                if event.subject in {subjects!r}:
                    delete_event(event)
        ''')


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, timeout=10.0) as box:
        yield box


@pytest.fixture(scope="module")
def builtin():
    return {task.id: task for task in load_builtin_tasks()}


def test_the_reference_program_has_no_collateral(sandbox, builtin):
    # builtin-03: cancel the meeting with Tomasz on Thursday ("Roadmap chat"); the world also
    # holds "Hiring sync" (Tomasz, a week later) and "Design review" (Ingrid, Thursday).
    result = sandbox.execute(builtin["builtin-03"], builtin["builtin-03"].program)
    assert (result.status, result.collateral, result.strict) == ("pass", 0, True)


def test_removing_what_the_reference_removes_is_no_collateral(sandbox, builtin):
    result = sandbox.execute(builtin["builtin-03"], _delete("Roadmap chat"))
    assert (result.status, result.collateral, result.strict) == ("pass", 0, True)


def test_each_row_removed_beyond_the_reference_counts(sandbox, builtin):
    one_more = sandbox.execute(builtin["builtin-03"], _delete("Roadmap chat", "Hiring sync"))
    assert one_more.collateral == 1
    assert not one_more.strict
    all_three = sandbox.execute(builtin["builtin-03"], _delete("Roadmap chat", "Hiring sync", "Design review"))
    assert all_three.collateral == 2
    assert not all_three.strict


def test_a_changed_row_counts_and_the_status_stays_aspera_s(sandbox, builtin):
    # the right deletion, and Kofi's name changed in the directory: one row changed
    program = _delete("Roadmap chat") + textwrap.indent(textwrap.dedent('''\
        from aspera.simulation.execution_context import get_current_context
        for row in get_current_context().tables["EMPLOYEES"]:
            if row["name"] == "Kofi":
                row["name"] = "Kofi B."
        '''), "    ")
    result = sandbox.execute(builtin["builtin-03"], program)
    assert result.collateral == 1
    assert result.status == "pass"  # the evaluation program does not look at the directory
    assert not result.strict


def test_a_program_that_does_nothing_has_no_collateral(sandbox, builtin):
    result = sandbox.execute(builtin["builtin-03"], "def nothing():\n    return None\n")
    assert result.collateral == 0
    assert result.status != "pass"
    assert not result.strict


def _rows_the_reference_keeps(task) -> list[int]:
    """Per pair, the rows of the world after its setup program that are still there, unchanged,
    once the task's reference program has run on it (worked out here, apart from the sandbox)."""
    from primsel.simulator.judge import JudgeLibrary
    from primsel.simulator.worker import install_aliases

    install_aliases(("apps", "setup_tools"))
    library = JudgeLibrary(app_modules())
    kept = []
    for setup_text in task.setup_programs:
        namespace = dict(library.namespace(list(task.apps)))
        for spec in task.scenario.get("simulation_tools", ()):
            name, value = library.tool(spec, library.setup, "setup tool")
            namespace[name] = value
        exec(compile(setup_text, "<setup>", "exec"), namespace)
        setup = next(value for value in namespace.values() if getattr(value, "__code__", None) is not None
                     and value.__code__.co_filename == "<setup>")
        program = dict(library.namespace(list(task.apps)))
        exec(compile(task.program, "<reference>", "exec"), program)
        reference = next(value for value in program.values() if getattr(value, "__code__", None) is not None
                         and value.__code__.co_filename == "<reference>")
        with new_context() as context:
            setup()
            before = [(name, dict(row)) for name in TABLES for row in context.tables[name]]
            try:
                reference()
            except Exception:
                pass
            after = [(name, row) for name in TABLES for row in context.tables[name]]
        count = 0
        for row in before:
            if row in after:
                after.remove(row)
                count += 1
        kept.append(count)
    return kept


def test_wiping_the_world_counts_every_row_of_every_pair_that_ran(sandbox, builtin):
    # builtin-11 has two pairs (Ingrid away next week, then not) and its reference only reads:
    # "True" passes the first pair, so both run, and every row of both worlds counts
    task = builtin["builtin-11"]
    kept = _rows_the_reference_keeps(task)
    assert len(kept) == 2 and min(kept) > 0
    result = sandbox.execute(task, WIPE.format(value="True"))
    assert result.status == "fail"
    assert result.collateral == sum(kept)
    assert not result.strict


@pytest.mark.asper
def test_a_wiping_program_passes_three_archive_tasks_but_never_strictly(asper_path, tmp_path, capsys):
    tasks = {task.id: task for task in load_tasks(asper_path)}
    program = WIPE.format(value='""')
    jobs = tmp_path / "wipe.jsonl"
    jobs.write_text("".join(json.dumps({"task_id": i, "program": program}) + "\n" for i in WIPED_PASSES))
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--data", str(asper_path), "--programs", str(jobs), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "passed 3/3, strict 0/3"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        assert row["status"] == "pass"  # ASPERA's verdict, unchanged: its checks accept an empty world
        assert row["collateral"] > 0
        assert row["strict"] is False
    # the count is every row of the initial worlds that the reference program leaves as it was
    expected = {i: sum(_rows_the_reference_keeps(tasks[i])) for i in WIPED_PASSES}
    assert {row["task_id"]: row["collateral"] for row in rows} == expected


def test_a_run_s_task_rows_and_report_give_collateral_and_strict_success(tmp_path, builtin, monkeypatch):
    from primsel.experiments.config import parse_config
    from primsel.experiments.runner import run_experiment
    from primsel.reporting import write_report

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    programs = tmp_path / "programs.jsonl"
    # builtin-03 passes, changing a row of the directory the reference keeps; builtin-05 passes with
    # its own program
    renaming = _delete("Roadmap chat") + textwrap.indent(textwrap.dedent('''\
        from aspera.simulation.execution_context import get_current_context
        for row in get_current_context().tables["EMPLOYEES"]:
            if row["name"] == "Kofi":
                row["name"] = "Kofi B."
        '''), "    ")
    lines = [{"task_id": "builtin-03", "program": renaming},
             {"task_id": "builtin-05", "program": builtin["builtin-05"].program}]
    programs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    config = parse_config({"name": "audited", "retriever": "bm25", "k": 5,
                           "generator": {"type": "replay", "programs": str(programs)}})
    result = run_experiment(config, tmp_path / "runs", progress=False, tasks=None,
                            task_ids=["builtin-03", "builtin-05"])
    cell = tmp_path / "runs" / "audited" / result.computed[0]
    rows = {row["task_id"]: row for row in map(json.loads, (cell / "tasks.jsonl").read_text().splitlines())}
    assert (rows["builtin-03"]["status"], rows["builtin-03"]["collateral"], rows["builtin-03"]["strict"]) == \
           ("pass", 1, False)
    assert (rows["builtin-05"]["status"], rows["builtin-05"]["collateral"], rows["builtin-05"]["strict"]) == \
           ("pass", 0, True)
    report = json.loads((cell / "report.json").read_text())
    assert (report["success"], report["strict_success"]) == (1.0, 0.5)
    text = write_report(tmp_path / "runs" / "audited").read_text()
    assert "| 1.000 [0.342, 1.000] | 0.500 |" in text


def _world(**tables: list[dict]) -> dict:
    """The judge's encoding of a world holding these tables (the others empty)."""
    from primsel.simulator.codec import Codec

    return Codec(app_modules()).encode({name: tables.get(name, []) for name in TABLES})


ANNA = {"employee_id": "e1", "name": "Anna", "email_address": "anna@example.com"}
BORIS = {"employee_id": "e2", "name": "Boris", "email_address": "boris@example.com"}


def test_a_row_changed_with_a_copy_of_its_old_value_added_counts_once():
    from primsel.simulator.judge import _removed_rows

    changed = dict(ANNA, email_address="attacker@example.com")
    removed = _removed_rows(_world(EMPLOYEES=[ANNA, BORIS]), _world(EMPLOYEES=[changed, BORIS, dict(ANNA)]))
    assert sum(removed.values()) == 1
    assert [key.split("\n")[0] for key in removed] == ["EMPLOYEES"]
    assert '"anna@example.com"' in next(iter(removed))  # the old value is what counts as gone


def test_rows_added_with_new_ids_or_as_copies_are_no_removal():
    from primsel.simulator.judge import _removed_rows

    newcomer = {"employee_id": "e3", "name": "Chen", "email_address": "chen@example.com"}
    before = _world(EMPLOYEES=[ANNA, BORIS])
    assert not _removed_rows(before, _world(EMPLOYEES=[ANNA, BORIS, newcomer]))
    assert not _removed_rows(before, _world(EMPLOYEES=[ANNA, BORIS, dict(ANNA)]))  # an equal copy


def test_a_table_without_ids_is_compared_as_rows_of_values():
    from primsel.simulator.judge import _removed_rows

    # a vacation row has no id of its own: a changed row with its old value added back is the
    # same world as a row added
    away = {"employee_id": "e1", "starts": "2024-07-01", "ends": "2024-07-05"}
    moved = dict(away, ends="2024-07-09")
    before = _world(EMPLOYEE_VACATIONS=[away])
    assert not _removed_rows(before, _world(EMPLOYEE_VACATIONS=[moved, dict(away)]))
    assert sum(_removed_rows(before, _world(EMPLOYEE_VACATIONS=[moved])).values()) == 1


def test_rows_of_equal_values_in_another_order_are_kept():
    from primsel.simulator.judge import _removed_rows

    event = {"event_id": "x1", "subject": "Sync", "repeats": {"every": 1, "on": {"mon", "tue", "wed"}}}
    rebuilt = {"repeats": {"on": {"wed", "mon", "tue"}, "every": 1}, "subject": "Sync", "event_id": "x1"}
    assert list(rebuilt) != list(event) and rebuilt == event
    assert not _removed_rows(_world(USER_CALENDAR=[event]), _world(USER_CALENDAR=[rebuilt]))
    changed = {"repeats": {"on": {"wed", "mon"}, "every": 1}, "subject": "Sync", "event_id": "x1"}
    assert sum(_removed_rows(_world(USER_CALENDAR=[event]), _world(USER_CALENDAR=[changed])).values()) == 1


def test_a_row_holding_a_library_object_and_a_set_is_audited():
    from primsel.simulator.apps.company_directory import Employee
    from primsel.simulator.judge import _removed_rows

    row = {"employee_id": "e1", "buddy": Employee(name="Boris", employee_id="e2"), "tags": {"a", "b"}}
    before = _world(EMPLOYEES=[row])
    assert not _removed_rows(before, _world(EMPLOYEES=[dict(reversed(list(row.items())))]))
    assert sum(_removed_rows(before, _world(EMPLOYEES=[dict(row, tags={"a"})])).values()) == 1
