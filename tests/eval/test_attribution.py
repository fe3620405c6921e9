"""Failure attribution: one test per rule of the decision order, on made-up programs."""

from __future__ import annotations

import pytest

from primsel.eval.attribution import attribute, count_categories, used_names
from primsel.library import Library
from primsel.types import ExecutionResult, Primitive, Program, Selection, Task


@pytest.fixture()
def library() -> Library:
    def prim(module: str, name: str, kind: str = "function") -> Primitive:
        return Primitive(id=f"{module}.{name}", name=name, module=module, kind=kind,
                         signature=f"def {name}()", doc="Made up.")

    return Library([
        prim("exceptions", "RequiresUserInput", "exception"),
        prim("time_utils", "now_"),
        prim("work_calendar", "Event", "class"),
        prim("work_calendar", "add_event"),
        prim("work_calendar", "find_events"),
    ])


def task(gold=("work_calendar.add_event", "work_calendar.Event")) -> Task:
    return Task(id="5", query="Add a meeting", program="def plan():\n    add_event(Event())\n",
                setup_programs=(), evaluation_programs=(), gold=frozenset(gold))


def selection(*ids: str) -> Selection:
    return Selection(task_id="5", retriever="test", ranked=tuple((i, 1.0) for i in ids), ids=tuple(ids))


SHOWN = selection("work_calendar.add_event", "work_calendar.Event")
GOOD = "def plan():\n    add_event(Event())\n"


def program(code: str | None = GOOD, status: str = "ok") -> Program:
    return Program(task_id="5", code=code, status=status)


def result(status: str, error_type: str | None = None, message: str | None = None, line: int | None = None):
    return ExecutionResult(task_id="5", status=status, error_type=error_type, message=message, line=line)


def test_a_passed_task_has_no_attribution(library):
    assert attribute(task(), SHOWN, program(), result("pass"), library) is None


def test_llm_error(library):
    row = attribute(task(), SHOWN, program(None, "llm_error"), None, library)
    assert (row["stage"], row["category"], row["line"], row["status"]) == ("llm", "llm_error", None, "llm_error")


def test_truncated_points_at_the_last_line(library):
    cut = "def plan():\n    x = add_event(\n"
    row = attribute(task(), SHOWN, program(cut, "truncated"), None, library)
    assert (row["stage"], row["category"], row["line"]) == ("llm", "truncated", 2)


def test_truncated_wins_even_if_the_cut_program_was_run(library):
    row = attribute(task(), SHOWN, program("def plan(:\n", "truncated"), result("error", "SyntaxError", line=1), library)
    assert row["category"] == "truncated"


@pytest.mark.parametrize(("prog", "res"), [(program(None, "no_program"), None), (program("x = 1\n"), result("no_program"))])
def test_no_program(library, prog, res):
    row = attribute(task(), SHOWN, prog, res, library)
    assert (row["stage"], row["category"]) == ("extraction", "no_program")


def test_timeout(library):
    row = attribute(task(), SHOWN, program(), result("timeout"), library)
    assert (row["stage"], row["category"]) == ("execution", "timeout")


def test_name_error_on_an_invented_name_is_a_hallucinated_primitive(library):
    code = "def plan():\n    when = now_()\n    book_meeting(when)\n"
    res = result("error", "NameError", "name 'book_meeting' is not defined", None)
    row = attribute(task(), SHOWN, program(code), res, library)
    assert (row["stage"], row["category"], row["line"]) == ("generation", "hallucinated_primitive", 3)
    assert row["hallucinated"] == ["book_meeting"]


def test_builtins_locals_and_library_exports_are_not_hallucinations(library):
    code = (
        "import collections\n"
        "def plan():\n"
        "    day = datetime.date.today()\n"
        "    seen = collections.Counter(len(e) for e in find_events())\n"
        "    for k, v in seen.items():\n"
        "        print(k, v, day)\n"
    )
    row = attribute(task(), SHOWN, program(code), result("fail", "SolutionError"), library)
    assert row["hallucinated"] == []


def test_retrieval_miss_when_a_gold_primitive_was_not_selected_nor_used(library):
    code = "def plan():\n    return Event()\n"
    row = attribute(task(), selection("work_calendar.Event"), program(code), result("fail", "SolutionError"), library)
    assert (row["stage"], row["category"]) == ("retrieval", "retrieval_miss")
    assert row["missing_gold"] == ["work_calendar.add_event"]
    assert row["error_type"] == "SolutionError"  # the symptom is kept


def test_unselected_primitive_used_by_the_program(library):
    code = "def plan():\n    event = Event()\n    if find_events():\n        add_event(event)\n"
    row = attribute(task(), SHOWN, program(code), result("fail", "SolutionError"), library)
    assert (row["stage"], row["category"], row["line"]) == ("generation", "unselected_primitive", 3)
    assert row["unselected"] == ["work_calendar.find_events"]


def test_a_missed_gold_primitive_the_program_used_anyway_is_not_a_retrieval_miss(library):
    row = attribute(task(), selection("work_calendar.Event"), program(GOOD), result("fail", "AssertionError"), library)
    assert row["category"] == "unselected_primitive"
    assert row["missing_gold"] == row["unselected"] == ["work_calendar.add_event"]


def test_imports_of_library_modules_count_as_use(library):
    code = "from aspera.apps_implementation.work_calendar import find_events\ndef plan():\n    return find_events()\n"
    row = attribute(task(), SHOWN, program(code), result("fail", "SolutionError"), library)
    assert row["unselected"] == ["work_calendar.find_events"] and row["line"] == 1


@pytest.mark.parametrize(("code", "error_type", "line"), [
    ("def plan():\n    import os\n    os.system('true')\n", "PermissionError", 3),
    ("def plan():\n    Event()\n    open('x', 'w')\n", "PermissionError", 3),
    ("def plan():\n    return Event().nope\n", "AttributeError", 2),
])
def test_a_program_that_raised_is_a_runtime_error_even_with_a_retrieval_miss(library, code, error_type, line):
    # add_event (gold) was neither selected nor used: the retrieval information stays in the row
    res = result("error", error_type, "blocked", line)
    row = attribute(task(), selection("work_calendar.Event"), program(code), res, library)
    assert (row["stage"], row["category"], row["line"], row["error_type"]) == ("execution", "runtime_error", line, error_type)
    assert row["missing_gold"] == row["missed_gold"] == ["work_calendar.add_event"]


def test_a_program_that_raised_using_an_unselected_primitive_is_a_runtime_error(library):
    code = "def plan():\n    event = Event()\n    return find_events()[0]\n"
    row = attribute(task(), SHOWN, program(code), result("error", "IndexError", "list index out of range", 3), library)
    assert (row["stage"], row["category"], row["line"]) == ("execution", "runtime_error", 3)
    assert row["unselected"] == ["work_calendar.find_events"]


def test_a_hand_back_with_a_retrieval_miss_is_a_retrieval_miss(library):
    code = "def plan():\n    raise RequiresUserInput('which day?')\n"
    res = result("requires_user_input", "RequiresUserInput", "which day?", 2)
    row = attribute(task(), selection("work_calendar.Event"), program(code), res, library)
    assert (row["stage"], row["category"]) == ("retrieval", "retrieval_miss")


def test_missed_gold_leaves_out_gold_primitives_the_program_used_anyway(library):
    code = "def plan():\n    add_event(None)\n"
    row = attribute(task(), selection("time_utils.now_"), program(code), result("fail", "SolutionError"), library)
    assert row["missing_gold"] == ["work_calendar.Event", "work_calendar.add_event"]
    assert row["missed_gold"] == ["work_calendar.Event"]
    assert row["category"] == "retrieval_miss"


def test_runtime_error_keeps_the_type_and_line(library):
    row = attribute(task(), SHOWN, program(), result("error", "KeyError", "'x'", 2), library)
    assert (row["stage"], row["category"], row["line"], row["error_type"]) == ("execution", "runtime_error", 2, "KeyError")


def test_syntax_error_is_a_generation_problem_even_with_a_retrieval_miss(library):
    res = result("error", "SyntaxError", "invalid syntax", 1)
    row = attribute(task(), selection("work_calendar.Event"), program("def plan(:\n    pass\n"), res, library)
    assert (row["stage"], row["category"], row["line"]) == ("generation", "runtime_error", 1)
    assert row["missing_gold"] == ["work_calendar.add_event"]


def test_name_error_on_a_library_name_is_a_runtime_error(library):
    res = result("error", "NameError", "name 'find_events' is not defined", 2)
    code = "def plan():\n    return find_events()\n"
    row = attribute(task(), selection("work_calendar.add_event", "work_calendar.Event", "work_calendar.find_events"),
                    program(code), res, library)
    assert (row["category"], row["error_type"]) == ("runtime_error", "NameError")


def test_uncaught_requires_user_input(library):
    res = result("requires_user_input", "RequiresUserInput", "which one?", 2)
    row = attribute(task(), SHOWN, program(), res, library)
    assert (row["stage"], row["category"]) == ("generation", "requires_user_input_misuse")


def test_wrong_effect(library):
    row = attribute(task(), SHOWN, program(), result("fail", "SolutionError", "Incorrect Solution", None), library)
    assert (row["stage"], row["category"], row["line"]) == ("verification", "wrong_effect", None)


def test_without_a_selection_the_retrieval_rules_are_skipped(library):
    row = attribute(task(), None, program("def plan():\n    return 1\n"), result("fail", "SolutionError"), library)
    assert row["category"] == "wrong_effect" and row["missing_gold"] == [] and row["unselected"] == []
    assert row["missed_gold"] == []


def test_bad_calls_are_rejected(library):
    with pytest.raises(ValueError, match="program or the execution result"):
        attribute(task(), SHOWN, None, None, library)
    with pytest.raises(ValueError, match="task 9"):
        attribute(task(), SHOWN, program(), ExecutionResult(task_id="9", status="fail"), library)
    with pytest.raises(ValueError, match="needs its execution result"):
        attribute(task(), SHOWN, program(), None, library)


def test_count_categories_most_frequent_first():
    rows = [{"category": "wrong_effect"}, None, {"category": "truncated"}, {"category": "wrong_effect"}]
    assert count_categories(rows) == {"wrong_effect": 2, "truncated": 1}


def test_used_names_first_lines_and_bindings():
    loaded, bound = used_names("def f(a):\n    b = a + g()\n    return g(b)\n")
    assert loaded == {"a": 2, "g": 2, "b": 3}
    assert bound == {"f", "a", "b"}
    assert used_names("def f(:\n") == ({}, set())


# -- diagnosis against the reference's execution ------------------------------------------------
REF_TRACE = (("time_utils.now_", 2, ""), ("work_calendar.add_event", 3, "Event(subject='a')"))


def traced(trace, outcomes, status="fail", error_type="SolutionError"):
    return ExecutionResult(task_id="5", status=status, error_type=error_type, trace=tuple(trace),
                           outcomes=tuple(outcomes))


REF_RUN = traced(REF_TRACE, [(2, "return", "None")], status="pass", error_type=None)
CODE = "def plan():\n    now_()\n    add_event(Event(subject='b'))\n    delete_event('x')\n    return None\n"


@pytest.mark.parametrize(("trace", "outcomes", "category", "line"), [
    ([REF_TRACE[0], ("work_calendar.add_event", 3, "Event(subject='b')")], [(2, "return", "None")], "wrong_arguments", 3),
    ([REF_TRACE[1], REF_TRACE[0]], [(2, "return", "None")], "wrong_order", 3),
    ([REF_TRACE[0]], [(1, "return", "None")], "missing_call", 5),  # the calls end: the return
    ([*REF_TRACE, ("work_calendar.delete_event", 4, "'x'")], [(3, "return", "None")], "extra_call", 4),
    (REF_TRACE, [(2, "return", "1")], "wrong_return", 5),
    (REF_TRACE, [(2, "return", "None")], "wrong_effect", None),
    ([REF_TRACE[0], ("exceptions.RequiresUserInput", 3, "'which?'")], [(2, "raise", "RequiresUserInput: which?")],
     "requires_user_input_misuse", 3),
])
def test_categories_from_the_comparison_with_the_reference(library, trace, outcomes, category, line):
    row = attribute(task(), None, program(CODE), traced(trace, outcomes), library, reference=REF_RUN)
    assert (row["category"], row["divergence_line"]) == (category, line)
    assert row["stage"] == ("verification" if category == "wrong_effect" else "generation")


def test_without_the_reference_a_program_that_ran_is_a_wrong_effect(library):
    row = attribute(task(), None, program(CODE), traced(REF_TRACE, [(2, "return", "1")]), library)
    assert (row["category"], row["difference"], row["divergence_line"], row["expected_call"]) == \
        ("wrong_effect", None, None, None)


def test_a_reference_for_another_task_is_rejected(library):
    other = ExecutionResult(task_id="6", status="pass")
    with pytest.raises(ValueError, match="reference"):
        attribute(task(), SHOWN, program(CODE), traced(REF_TRACE, [(2, "return", "1")]), library, reference=other)


def test_the_user_guide_documents_every_category_once_in_rule_order():
    import re
    from pathlib import Path

    from primsel.eval.attribution import CATEGORIES

    readme = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text(encoding="utf-8")
    section = readme.split("## Failure diagnosis", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", section, re.M)
    assert [int(n) for n, _ in rows] == list(range(1, len(CATEGORIES) + 1))
    assert tuple(name for _, name in rows) == CATEGORIES
