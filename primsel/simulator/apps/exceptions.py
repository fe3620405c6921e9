"""Exceptions of the assistant library.

``RequiresUserInput`` is the one a program raises itself; the others are raised by the library.
All are plain ``Exception`` subclasses without extra behaviour.
"""

from __future__ import annotations

__all__ = [
    "RequiresUserInput",
    "SearchError",
    "ParseError",
    "EventDefinitionError",
    "RequiresUserInputError",
    "assert_requires_input_error",
]


class RequiresUserInput(Exception):
    """Raise this to stop and hand the request back to the user.

    Use it when the request cannot be completed without the user's help: a search found no
    match or several plausible matches (e.g. two employees called "Alex"), required details
    are missing, or the action is impossible (e.g. no free slot, nobody to invite). The
    message should say what the user must clarify or decide. Do not raise it for ordinary
    results such as an empty calendar that fully answers the request.

    Example: ``raise RequiresUserInput("Two people are called Alex; which one did you mean?")``
    """


class SearchError(Exception):
    """A lookup found nothing where the library needed a match (e.g. an unknown employee)."""


class ParseError(Exception):
    """A time, date or date-range expression could not be resolved (e.g. not an enum member)."""


class EventDefinitionError(Exception):
    """An event lacks the details an operation needs (e.g. deleting an event without an id)."""


class RequiresUserInputError(Exception):
    """Kept for compatibility with the reference library; nothing raises it."""


def assert_requires_input_error(tool_exception: str | None) -> None:
    """Check that an error text mentions ``RequiresUserInput``.

    Parameters
    ----------
    tool_exception : error text, or None (nothing to check).

    Raises
    ------
    AssertionError : the text does not contain ``"RequiresUserInput"``.
    """
    if tool_exception is None:
        return None
    if "RequiresUserInput" not in tool_exception:
        raise AssertionError(f"expected a RequiresUserInput error, got: {tool_exception!r}")
    return None
