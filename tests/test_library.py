"""The library (65 primitives, introspected) and the gold-primitive rule (spec 12.1)."""

from __future__ import annotations

import statistics
import textwrap
from collections import Counter

import pytest

from primsel.library import LIBRARY_NAMES, Library, free_global_names, gold_primitives, with_gold
from primsel.simulator.library import build_library
from primsel.types import Primitive, Task

DOCUMENTED_IDS = {
    "exceptions": "RequiresUserInput",
    "time_utils": "ComparisonResult DateExpressions DateRange DateRanges DateTimeClauseOperators Duration "
                  "EventFrequency RepetitionSpec TimeExpressions TimeInterval TimeUnits weekdays combine "
                  "compare_with_fixed_duration convert date_by_mdy get_next_dow get_prev_dow get_weekday "
                  "get_weekday_ordinal intervals_overlap modify now_ parse_date_string parse_duration_to_calendar "
                  "parse_durations_to_date_interval parse_time_string replace sum_time_units this_week_dates "
                  "time_by_hm",
    "company_directory": "Employee EmployeeDetails Team find_employee find_manager_of find_reports_of find_team_of "
                         "get_all_employees get_assistant get_current_user get_employee_profile "
                         "get_office_location get_vacation_schedule",
    "room_booking": "ConferenceRoom RoomAvailability find_available_time_slots room_booking_default_time_window "
                    "search_conference_room summarise_availability",
    "work_calendar": "CalendarSearchSettings Event ShowAsStatus add_event delete_event find_available_slots "
                     "find_events find_past_events get_calendar get_default_preparation_time get_search_settings "
                     "provide_event_details share_calendar summarise_calendar",
}


def _p(pid: str, kind: str = "function", depends_on: tuple[str, ...] = ()) -> Primitive:
    module, name = pid.split(".")
    return Primitive(id=pid, name=name, module=module, kind=kind, signature=f"def {name}()", doc=f"Doc of {name}.",
                     depends_on=depends_on)


SYNTH = Library([
    _p("cal.Event", "class"), _p("cal.add_event", depends_on=("cal.Event",)), _p("cal.find_events"),
    _p("time.TimeUnits", "enum"), _p("time.Duration", "class"), _p("time.DateExpressions", "enum"),
    _p("exc.RequiresUserInput", "exception"), _p("time.combine"),
])


# --- Library ---------------------------------------------------------------------------------

def test_library_is_an_ordered_mapping():
    assert list(SYNTH)[:3] == ["cal.Event", "cal.add_event", "cal.find_events"]
    assert SYNTH["cal.add_event"].depends_on == ("cal.Event",)
    assert len(SYNTH) == 8 and SYNTH.id_of("combine") == "time.combine" and SYNTH.id_of("nope") is None
    assert SYNTH.texts("name")[0] == "Event"


def test_library_rejects_duplicates_and_unknown_dependencies():
    with pytest.raises(ValueError, match="duplicate primitive id"):
        Library([_p("a.f"), _p("a.f")])
    with pytest.raises(ValueError, match="share the name"):
        Library([_p("a.f"), _p("b.f")])
    with pytest.raises(ValueError, match="not in the library"):
        Library([_p("a.f", depends_on=("a.G",))])


def test_fingerprint_changes_with_a_docstring():
    other = Library([*SYNTH.primitives[:-1], Primitive("time.combine", "combine", "time", "function",
                                                        "def combine()", "Changed.")])
    assert SYNTH.fingerprint() != other.fingerprint()
    assert SYNTH.fingerprint() == Library(SYNTH.primitives).fingerprint()


# --- gold primitives -------------------------------------------------------------------------

def _gold(src: str) -> set[str]:
    return set(gold_primitives(textwrap.dedent(src), SYNTH))


def test_calls_classes_enums_and_exceptions_count():
    assert _gold("""
        def f() -> None:
            e = Event(subject="x")
            add_event(e)
            d = Duration(1, TimeUnits.Hours)
            day = DateExpressions["Tomorrow"]
            if not find_events():
                raise RequiresUserInput("none")
    """) == {"cal.Event", "cal.add_event", "time.Duration", "time.TimeUnits", "time.DateExpressions",
             "cal.find_events", "exc.RequiresUserInput"}


def test_annotations_isinstance_and_except_count():
    assert _gold("""
        def f(x: Duration = None) -> list[Event]:
            try:
                return [y for y in x if isinstance(y, Event)]
            except RequiresUserInput:
                return []
    """) == {"time.Duration", "cal.Event", "exc.RequiresUserInput"}


def test_nested_scopes_lambdas_and_comprehensions_count():
    assert _gold("""
        def f():
            def inner():
                return sorted(find_events(), key=lambda e: combine(e, e))
            return {k: add_event(k) for k in inner()}
    """) == {"cal.find_events", "time.combine", "cal.add_event"}


def test_local_bindings_builtins_and_datetime_do_not_count():
    assert _gold("""
        def f(find_events):
            import datetime
            combine = len
            for Event in range(3):
                pass
            with open("x") as add_event:
                pass
            return find_events, combine, Event, add_event, datetime.date, print
    """) == set()


def test_unimported_datetime_is_dropped():
    src = "def f():\n    return datetime.date.today()\n"
    assert "datetime" in free_global_names(src)
    assert gold_primitives(src, SYNTH) == frozenset()


def test_closure_variable_of_an_enclosing_function_does_not_count():
    assert _gold("""
        def f():
            combine = 1
            def g():
                return combine
            return g
    """) == set()


def test_module_level_names_of_the_program_do_not_count():
    assert _gold("""
        def combine():
            return 1
        def f():
            return combine()
    """) == set()


def test_syntax_error_propagates_and_with_gold_names_the_task():
    with pytest.raises(SyntaxError):
        gold_primitives("def f(:\n", SYNTH)
    task = Task(id="9", query="q", program="def f(:\n", setup_programs=(), evaluation_programs=())
    with pytest.raises(ValueError, match="task 9"):
        with_gold([task], SYNTH)


def test_with_gold_returns_copies():
    task = Task(id="1", query="q", program="def f():\n    add_event(Event())\n", setup_programs=(),
                evaluation_programs=())
    (filled,) = with_gold([task], SYNTH)
    assert filled.gold == {"cal.add_event", "cal.Event"} and task.gold == frozenset()


# --- the real library --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library() -> Library:
    return build_library()


def test_library_has_exactly_the_65_design_ids(library):
    expected = [f"{m}.{n}" for m, names in DOCUMENTED_IDS.items() for n in names.split()]
    assert len(expected) == 65
    assert list(library) == expected
    assert {m: tuple(n.split()) for m, n in DOCUMENTED_IDS.items()} == LIBRARY_NAMES


def test_kinds(library):
    kinds = {p.name: p.kind for p in library.values()}
    assert kinds["RequiresUserInput"] == "exception"
    assert kinds["TimeUnits"] == kinds["Team"] == kinds["ShowAsStatus"] == kinds["EventFrequency"] == "enum"
    assert kinds["Event"] == kinds["Duration"] == kinds["RepetitionSpec"] == kinds["Employee"] == "class"
    assert kinds["weekdays"] == "alias"
    assert kinds["add_event"] == kinds["now_"] == "function"
    assert Counter(kinds.values()) == {"function": 44, "class": 10, "enum": 9, "exception": 1, "alias": 1}


def test_signatures_and_dependencies(library):
    add_event = library["work_calendar.add_event"]
    assert add_event.signature == "def add_event(event: Event) -> str"
    assert add_event.depends_on == ("work_calendar.Event",)
    assert library["time_utils.modify"].signature.startswith(
        "def modify(datetime_to_change: datetime.datetime, duration: Duration, *, operator: DateTimeClauseOperators)")
    assert "time_utils.weekdays" in library["time_utils.get_next_dow"].depends_on
    assert library["work_calendar.Event"].signature == "class Event(BaseModel)"
    assert {"company_directory.Employee", "time_utils.RepetitionSpec",
            "work_calendar.ShowAsStatus"} <= set(library["work_calendar.Event"].depends_on)


def test_every_primitive_is_documented(library):
    from primsel.simulator.apps import time_utils

    assert all(p.doc.strip() for p in library.values())
    assert library["time_utils.weekdays"].doc.split()[:3] == time_utils._ALIAS_DOCS["weekdays"].split()[:3]
    assert library["work_calendar.add_event"].text("full").startswith('def add_event(event: Event) -> str:\n    """')


# --- the archive -------------------------------------------------------------------------------

@pytest.mark.asper
def test_gold_statistics_on_the_archive(asper_path, library):
    from primsel.datasets import load_tasks

    tasks = with_gold(load_tasks(asper_path), library)
    sizes = [len(t.gold) for t in tasks]
    assert len(tasks) == 250
    assert (min(sizes), statistics.median(sizes), max(sizes)) == (2, 9, 18)
    assert round(statistics.mean(sizes), 2) == 9.07
    assert len(set().union(*(t.gold for t in tasks))) == 60
    counts = Counter(p for t in tasks for p in t.gold)
    assert counts.most_common(1) == [("work_calendar.add_event", 163)]


def test_a_library_of_given_modules_is_read_by_introspection():
    import types

    module = types.ModuleType("plugin.tools")
    exec('class Item:\n    """A thing."""\n\n'
         'def make(name: str) -> Item:\n    """Make an item."""\n    return Item()\n', module.__dict__)
    made = Library.from_modules({"tools": module}, {"tools": ("Item", "make")})
    assert list(made) == ["tools.Item", "tools.make"]
    assert made["tools.make"].signature == "def make(name: str) -> Item"
    assert made["tools.make"].depends_on == ("tools.Item",)
    assert made["tools.Item"].doc == "A thing."
    with pytest.raises(AttributeError, match=r"plugin.tools does not define 'gone'"):
        Library.from_modules({"tools": module}, {"tools": ("gone",)})
    with pytest.raises(KeyError):
        Library.from_modules({"tools": module}, {"other": ("x",)})


def test_build_library_takes_a_subset_and_refuses_a_module_the_simulator_lacks():
    subset = build_library({"exceptions": ("RequiresUserInput",), "work_calendar": ("add_event", "Event")})
    assert list(subset) == ["exceptions.RequiresUserInput", "work_calendar.add_event", "work_calendar.Event"]
    assert subset["work_calendar.add_event"].depends_on == ("work_calendar.Event",)
    with pytest.raises(ImportError, match=r"no app module 'payroll'"):
        build_library({"payroll": ("pay",)})
