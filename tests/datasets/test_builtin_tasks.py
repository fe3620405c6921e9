"""The built-in tasks shipped with primsel: schema, program shapes, coverage, and verdicts in the sandbox."""

from __future__ import annotations

import ast
import io

import nestedtext
import pytest

from primsel.datasets import BUILTIN_DIR, load_builtin_tasks
from primsel.library import Library, gold_primitives
from primsel.simulator.library import build_library
from primsel.simulator.sandbox import Sandbox

MODULES = ("exceptions", "time_utils", "room_booking", "company_directory", "work_calendar")
NOOP = "def noop():\n    return None\n"
TASK_KEYS = {
    "query_id",
    "query",
    "program",
    "scenario",
    "state_generation_programs",
    "evaluation_programs",
    "timestamp",
}
SCENARIO_KEYS = {
    "apps",
    "query_solution",
    "runtime_setup",
    "evaluation",
    "guidelines",
    "simulation_tools",
    "evaluation_tools",
}
SIMULATION_TOOLS = [
    "room_booking::simulate_conference_room",
    "company_directory::simulate_org_structure",
    "company_directory::simulate_vacation_schedule",
    "work_calendar::simulate_user_calendar",
    "work_calendar::simulate_employee_calendar",
]
EVALUATION_TOOLS = [
    "exceptions::SolutionError",
    "work_calendar::assert_user_calendar_shared",
    "time_utils::repetition_schedule",
]

TASKS = load_builtin_tasks()
IDS = [task.id for task in TASKS]


@pytest.fixture(scope="module")
def library() -> Library:
    return build_library()


@pytest.fixture(scope="module")
def verdicts():
    """Sandbox results of the reference program and of a do-nothing program, per task id."""
    jobs = [(task, task.program, None) for task in TASKS] + [(task, NOOP, None) for task in TASKS]
    with Sandbox(workers=2, timeout=30) as sandbox:
        results = list(sandbox.execute_many(jobs))
    n = len(TASKS)
    return dict(zip(IDS, results[:n])), dict(zip(IDS, results[n:]))


def functions(source: str) -> list[ast.FunctionDef]:
    return [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]


def test_at_least_twenty_tasks_with_consecutive_ids():
    assert len(TASKS) >= 20
    assert IDS == [f"builtin-{i:02d}" for i in range(1, len(TASKS) + 1)]
    assert all(task.source == "builtin" for task in TASKS)


def test_queries_are_distinct():
    assert len({task.query for task in TASKS}) == len(TASKS)


def test_shards_follow_the_archive_schema():
    for shard in sorted(BUILTIN_DIR.glob("*.nt")):
        records = nestedtext.load(io.StringIO(shard.read_text(encoding="utf-8")), top="any")
        assert isinstance(records, list)
        for record in records:
            assert set(record) == TASK_KEYS, record["query_id"]
            scenario = record["scenario"]
            assert set(scenario) == SCENARIO_KEYS, record["query_id"]
            assert set(scenario["guidelines"]) == {"generation_labelling", "runtime_setup", "evaluation"}
            assert all(scenario["guidelines"][key] for key in scenario["guidelines"])
            assert scenario["simulation_tools"] == SIMULATION_TOOLS
            assert scenario["evaluation_tools"] == EVALUATION_TOOLS
            assert record["query"].startswith("Hey, [Assistant], ")


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_reference_program_is_one_function_without_parameters(task):
    tree = ast.parse(task.program)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
    args = tree.body[0].args
    assert not (args.posonlyargs or args.args or args.kwonlyargs or args.vararg or args.kwarg)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_return_annotation_exactly_when_a_value_is_returned(task):
    (function,) = functions(task.program)
    returns_value = any(
        isinstance(node, ast.Return)
        and node.value is not None
        and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        for node in ast.walk(function)
    )
    assert returns_value == (function.returns is not None)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_setup_programs_are_one_function_that_builds_the_organisation_first(task):
    assert 1 <= len(task.setup_programs) == len(task.evaluation_programs)
    for source in task.setup_programs:
        tree = ast.parse(source)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
        function = tree.body[0]
        assert function.name.startswith("setup_env_") and not function.args.args
        body = [s for s in function.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # docstring
        first = body[0]
        assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)
        assert isinstance(first.value.func, ast.Name) and first.value.func.id == "simulate_org_structure"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_evaluation_programs_call_setup_then_executable_once(task):
    for source in task.evaluation_programs:
        tree = ast.parse(source)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
        function = tree.body[0]
        assert function.name.startswith("evaluate_")
        assert [a.arg for a in function.args.args] == ["query", "executable", "setup_function"]
        calls = {"setup_function": [], "executable": []}
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls:
                calls[node.func.id].append(node.lineno)
        assert len(calls["setup_function"]) == 1 and len(calls["executable"]) == 1
        assert calls["setup_function"][0] < calls["executable"][0]


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_apps_are_library_modules_and_include_every_module_the_reference_uses(task, library):
    assert set(task.apps) <= set(MODULES)
    used = {primitive_id.split(".")[0] for primitive_id in gold_primitives(task.program, library)}
    assert used, task.id
    assert used <= set(task.apps)


def test_every_module_is_used_by_some_reference_program(library):
    used = set()
    for task in TASKS:
        used |= {primitive_id.split(".")[0] for primitive_id in gold_primitives(task.program, library)}
    assert used == set(MODULES)


def test_reference_programs_use_at_least_forty_primitives(library):
    used = set()
    for task in TASKS:
        used |= gold_primitives(task.program, library)
    assert len(used) >= 40
    assert "exceptions.RequiresUserInput" in used


@pytest.mark.parametrize("task_id", IDS)
def test_reference_program_passes(verdicts, task_id):
    result = verdicts[0][task_id]
    assert result.status == "pass", (result.error_type, result.message)


@pytest.mark.parametrize("task_id", IDS)
def test_do_nothing_program_is_judged_wrong(verdicts, task_id):
    result = verdicts[1][task_id]
    assert (result.status, result.error_type) == ("fail", "SolutionError"), result.message


def test_builtin_tasks_share_no_text_with_the_archive(asper_path):
    from primsel.datasets import load_asper_bench

    archive = load_asper_bench(asper_path)
    queries = {task.query.strip().lower() for task in archive}
    programs = {task.program.strip() for task in archive}
    for task in TASKS:
        assert task.query.strip().lower() not in queries
        assert task.program.strip() not in programs
