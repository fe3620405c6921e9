"""The simulated world of one task execution.

All state lives in one :class:`ExecutionContext`: a set of tables, each a ``list`` of row dicts
kept in insertion order. Library functions read and write the *current* context at call time.
A fresh context is created for every (SIP, EP) pair, so nothing leaks between executions.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

#: Table names and the columns of their rows.
TABLES = (
    "USER_CALENDAR",  # events of the device user (parents of recurring series and their instances)
    "SHARED_CALENDARS",  # events of other employees' calendars (row has a ``calendar_id``)
    "EMPLOYEES",  # company directory
    "EMPLOYEE_VACATIONS",  # employee_id, starts, ends
    "CONFERENCE_ROOMS",  # room_id, capacity, room_name
    "CONFERENCE_ROOM_BOOKINGS",  # room_id, booking_id, start, end
    "USER_METADATA",  # calendar_visible_to: list of employee ids
)


class ExecutionContext:
    """Tables of one simulated world.

    Creating a context seeds Python's global ``random`` with 0 (the organisation generator draws
    from it) and creates every table empty. ``query`` holds the user's request text.

    Attributes
    ----------
    tables : ``{table_name: [row_dict, ...]}`` in insertion order.
    query : str.
    """

    def __init__(self) -> None:
        random.seed(0)
        self.tables: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        self.query = ""

    def table(self, name: str) -> list[dict[str, Any]]:
        """The rows of table ``name`` (the live list; append/delete in place).

        Raises
        ------
        KeyError : unknown table name.
        """
        return self.tables[name]


_current: ExecutionContext | None = None


def get_current_context() -> ExecutionContext:
    """The current context; creates (and thereby seeds ``random``) a default one if none exists."""
    global _current
    if _current is None:
        _current = ExecutionContext()
    return _current


def set_current_context(context: ExecutionContext | None) -> None:
    """Make ``context`` the current one (None: a default is created lazily on next use)."""
    global _current
    _current = context


@contextlib.contextmanager
def new_context(context: ExecutionContext | None = None) -> Iterator[ExecutionContext]:
    """Make ``context`` (or a fresh one) current inside the ``with`` block; restore the previous one on exit."""
    global _current
    previous = _current
    _current = context if context is not None else ExecutionContext()
    try:
        yield _current
    finally:
        _current = previous
