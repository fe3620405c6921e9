"""A small synthetic library and tasks for retrieval tests (no simulator, no archive)."""

from __future__ import annotations

import pytest

from primsel.library import Library
from primsel.types import Primitive, Task


def _prim(module: str, name: str, kind: str, doc: str, depends_on: tuple[str, ...] = ()) -> Primitive:
    signature = f"def {name}()" if kind == "function" else f"class {name}"
    return Primitive(id=f"{module}.{name}", name=name, module=module, kind=kind, signature=signature,
                     doc=doc, depends_on=depends_on)


@pytest.fixture
def small_library() -> Library:
    """Six primitives in two modules; ``book_room`` depends on ``Room``, which depends on ``Slot``."""
    return Library([
        _prim("rooms", "Slot", "class", "A free time slot of a meeting room."),
        _prim("rooms", "Room", "class", "A meeting room with a capacity and free slots.", ("rooms.Slot",)),
        _prim("rooms", "book_room", "function", "Book a meeting room for a time slot.", ("rooms.Room",)),
        _prim("calendar", "Event", "class", "A calendar event: subject, attendees, start and end."),
        _prim("calendar", "add_event", "function", "Add an event to the user's calendar.", ("calendar.Event",)),
        _prim("calendar", "delete_event", "function", "Cancel and delete an event from the calendar.",
              ("calendar.Event",)),
    ])


def make_task(task_id: str, query: str, gold: set[str]) -> Task:
    return Task(id=task_id, query=query, program="def f():\n    pass\n", setup_programs=(),
                evaluation_programs=(), gold=frozenset(gold))


@pytest.fixture
def small_tasks() -> list[Task]:
    """Eight tasks over :func:`small_library` (ids "1".."8")."""
    return [
        make_task("1", "book a meeting room for tomorrow", {"rooms.book_room", "rooms.Room"}),
        make_task("2", "add a meeting with Alice to my calendar", {"calendar.add_event", "calendar.Event"}),
        make_task("3", "cancel my meeting with Bob", {"calendar.delete_event"}),
        make_task("4", "book the big room for the team meeting", {"rooms.book_room", "calendar.add_event"}),
        make_task("5", "schedule a call with Carol", {"calendar.add_event", "calendar.Event"}),
        make_task("6", "delete the standup event", {"calendar.delete_event"}),
        make_task("7", "find a free slot in a meeting room", {"rooms.Slot", "rooms.Room"}),
        make_task("8", "add an event for the review", {"calendar.add_event", "calendar.Event"}),
    ]
