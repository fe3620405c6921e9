"""Task cards (``primsel tasks``): fields, features and filters against independent readings."""

from __future__ import annotations

import io
import json
import tokenize

import pytest

from primsel.cli import main
from primsel.datasets import load_builtin_tasks, load_tasks
from primsel.library import Library
from primsel.simulator.library import build_library
from primsel.tasks import FEATURES, card, evaluation_summary, features, filter_cards, setup_summary

REQUIRED = {"id", "query", "modules", "gold", "features", "pairs", "lines"}


@pytest.fixture(scope="module")
def library() -> Library:
    return build_library()


def names(program: str) -> set[str]:
    """NAME tokens of a program (keywords included): a reading independent of the syntax tree."""
    return {t.string for t in tokenize.generate_tokens(io.StringIO(program).readline) if t.type == tokenize.NAME}


def run_json(capsys, *argv: str):
    assert main(["tasks", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("program", "expected"), [
    ("def f():\n    return 1\n", ["returns"]),
    ("def f():\n    return None\n", []),
    ("def f():\n    def g():\n        return 1\n    g()\n", []),  # a nested function's return is not the program's
    ("def f():\n    for x in find_events():\n        pass\n", ["loop"]),
    ("def f():\n    return [e for e in find_events() if e]\n", ["loop", "branch", "returns"]),
    ("def f():\n    x = 1 if now_() else 2\n", ["branch"]),
    ("def f():\n    raise RequiresUserInput('which?')\n", ["raises"]),
    ("def f():\n    raise ValueError('no')\n", []),
    ("def f():\n    return now_() + datetime.timedelta(days=1)\n", ["returns", "datetime_arithmetic"]),
    ("def f():\n    modify(now_(), Duration(1, TimeUnits.Days))\n", ["datetime_arithmetic"]),
])
def test_features_of_small_programs(program, expected):
    assert features(program) == expected


def test_multi_module_ignores_exceptions():
    assert features("def f():\n    pass\n", ["exceptions.RequiresUserInput", "work_calendar.add_event"]) == []
    assert features("def f():\n    pass\n", ["time_utils.now_", "work_calendar.add_event"]) == ["multi_module"]


def test_builtin_cards_have_the_fields_and_agree_with_the_tasks(library):
    tasks = load_builtin_tasks()
    for task in tasks:
        c = card(task, library)
        assert REQUIRED <= set(c)
        assert c["pairs"] == len(task.setup_programs) == len(task.evaluation_programs)
        assert c["lines"] == len(task.program.rstrip("\n").split("\n"))
        assert c["modules"] == sorted({g.split(".")[0] for g in c["gold"]},
                                      key=lambda m: [p.module for p in library.values()].index(m))
        assert set(c["features"]) <= set(FEATURES)
        assert ("loop" in c["features"]) == bool(names(task.program) & {"for", "while"})


def test_summaries_of_a_setup_and_an_evaluation_program():
    setup = ("def s():\n    simulate_org_structure(['Ann', 'Bo'])\n"
             "    for d in range(3):\n        add_event(Event(subject='x'))\n")
    assert setup_summary(setup) == "organisation (Ann, Bo and default staff); add_event x1 (in a loop); Event x1 (in a loop)"
    check = ("def e(query, executable, setup_function):\n    setup_function()\n    result = executable()\n"
             "    assert result == len(find_events())\n    if not result:\n        raise SolutionError('no')\n")
    assert evaluation_summary(check, {"find_events"}) == \
        "checks the return value; calls find_events; 2 checks (assert or raise SolutionError)"


def test_filters_combine(library):
    cards = [{"id": "a", "query": "Book a room", "modules": ["room_booking"], "gold": ["room_booking.x"], "features": ["loop"]},
             {"id": "b", "query": "book nothing", "modules": ["work_calendar"], "gold": ["work_calendar.y"], "features": []}]
    assert [c["id"] for c in filter_cards(cards, search="BOOK")] == ["a", "b"]
    assert [c["id"] for c in filter_cards(cards, search="book", feature="loop")] == ["a"]
    assert [c["id"] for c in filter_cards(cards, module="work_calendar")] == ["b"]
    assert [c["id"] for c in filter_cards(cards, primitive="room_booking.x", module="work_calendar")] == []


def test_cli_lists_filters_and_shows_builtin_tasks(capsys, monkeypatch, library):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    tasks = load_builtin_tasks()
    cards = run_json(capsys)
    assert [c["id"] for c in cards] == [t.id for t in tasks]
    chosen = run_json(capsys, "--primitive", "work_calendar.delete_event")
    assert [c["id"] for c in chosen] == [t.id for t in tasks if "delete_event" in names(t.program)]
    assert main(["tasks", "show", "builtin-03"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("task builtin-03\nquery: ") and tasks[2].program.splitlines()[0] in shown
    assert "setup 1: " in shown and "evaluation 1: " in shown


@pytest.mark.parametrize("argv", [
    ["tasks", "--feature", "recursion"], ["tasks", "--module", "email"], ["tasks", "--primitive", "add_event"],
    ["tasks", "show"], ["tasks", "show", "no-such-task"], ["tasks", "builtin-01"],
])
def test_bad_arguments_exit_2(argv, capsys, monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    assert status == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.asper
def test_archive_cards_and_filters_match_the_reference_programs(asper_path, capsys):
    tasks = load_tasks(asper_path)
    cards = run_json(capsys, "--data", str(asper_path))
    assert len(cards) == 250 and all(REQUIRED <= set(c) for c in cards)
    assert [c["id"] for c in cards] == [t.id for t in tasks]
    add_event = run_json(capsys, "--data", str(asper_path), "--primitive", "work_calendar.add_event")
    assert {c["id"] for c in add_event} == {t.id for t in tasks if "add_event" in names(t.program)}
    loop = run_json(capsys, "--data", str(asper_path), "--feature", "loop")
    assert {c["id"] for c in loop} == {t.id for t in tasks if names(t.program) & {"for", "while"}}
    assert 0 < len(loop) < 250 and 0 < len(add_event) < 250
