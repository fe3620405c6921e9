"""The exception that only the evaluation programs raise (``SolutionError``: the world is wrong)."""

from __future__ import annotations

__all__ = ["SolutionError"]


class SolutionError(Exception):
    """Raised by an evaluation program when the action program's effect or answer is wrong.

    Distinct from every library exception, so a failed check is never mistaken for an error
    the library raised while the program ran.
    """
