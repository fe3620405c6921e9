"""Small made-up tasks and a made-up library for the generation tests (no benchmark data)."""

from __future__ import annotations

import pytest

from primsel.library import Library
from primsel.types import Primitive, Task


def make_task(task_id: str, query: str, program: str, guidelines: tuple[str, ...] = ("Be brief.",)) -> Task:
    return Task(
        id=task_id,
        query=query,
        program=program,
        setup_programs=(),
        evaluation_programs=(),
        scenario={"apps": ["time_utils", "work_calendar"], "guidelines": {"generation_labelling": list(guidelines)}},
    )


@pytest.fixture()
def toy_library() -> Library:
    def prim(module: str, name: str, kind: str, signature: str, doc: str, deps: tuple[str, ...] = ()) -> Primitive:
        return Primitive(id=f"{module}.{name}", name=name, module=module, kind=kind, signature=signature, doc=doc,
                         depends_on=deps)

    return Library([
        prim("exceptions", "RequiresUserInput", "exception", "class RequiresUserInput(Exception)", "Ask the user."),
        prim("time_utils", "Duration", "class", "class Duration", "A length of time."),
        prim("time_utils", "now_", "function", "def now_() -> datetime.datetime", "The current time."),
        prim("company_directory", "find_employee", "function", "def find_employee(name: str) -> list",
             "Employees whose name matches."),
        prim("room_booking", "search_conference_room", "function", "def search_conference_room(name: str) -> list",
             "Rooms by name."),
        prim("work_calendar", "Event", "class", "class Event", "A calendar event."),
        prim("work_calendar", "add_event", "function", "def add_event(event: Event) -> str",
             "Put an event in the calendar.", ("work_calendar.Event",)),
        prim("work_calendar", "find_events", "function", "def find_events() -> list[Event]",
             "Events of the calendar.", ("work_calendar.Event",)),
    ])


@pytest.fixture()
def toy_tasks() -> list[Task]:
    return [
        make_task("1", "Book lunch with Ana tomorrow", "def book_lunch():\n    add_event(Event())\n"),
        make_task("2", "How many meetings do I have today?", "def count_meetings() -> int:\n    return len(find_events())\n"),
        make_task("3", "Cancel my lunch tomorrow", "def cancel_lunch():\n    pass\n"),
        make_task("10", "Book a room for the review", "def book_room():\n    pass\n"),
    ]
