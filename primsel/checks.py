"""Checks of parameter and setting values, with one message style: ``<name> must be <what>, got <value>``.

Constructors of components (retrievers, generators, LLM endpoints) call the ``check_*``
functions, which raise ``ValueError`` naming the parameter. Code that names a value its own way
(an experiment file's key, a command-line flag) asks the ``*_problem`` functions, which return
the part after the name (``"must be an integer >= 1, got 0"``), or None when the value is fine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


# ---------------------------------------------------------------------------------------------
# Bounds of every setting, in one place (:func:`number_problem` keywords). The components and the
# cell settings (:class:`primsel.experiments.settings.CellSettings`) check against these.
# ---------------------------------------------------------------------------------------------
#: A cut-off or selection size: an integer >= 1; above the library size it means the whole library.
K_BOUNDS: dict[str, Any] = {"integer": True, "minimum": 1}
#: Cross-validation folds: an integer >= 2 (capped at the number of tasks where they are used).
FOLDS_BOUNDS: dict[str, Any] = {"integer": True, "minimum": 2}
#: A seed: scikit-learn's ``random_state``, which numpy takes in [0, 2**32 - 1].
SEED_BOUNDS: dict[str, Any] = {"integer": True, "minimum": 0, "maximum": 2**32 - 1}
#: Longest time limit of a program in the sandbox, in seconds (one day).
MAX_TIMEOUT = 86400.0
#: A time limit in seconds: finite, > 0 and at most :data:`MAX_TIMEOUT`.
TIMEOUT_BOUNDS: dict[str, Any] = {"above": 0, "maximum": MAX_TIMEOUT}
#: Primitives kept of each task's ranking: at least 20, since the report's curves and
#: complete@k read the first 20 of a ranking.
DEPTH_BOUNDS: dict[str, Any] = {"integer": True, "minimum": 20}
#: Reflection rounds: most programs per task, an integer >= 1.
ROUNDS_BOUNDS: dict[str, Any] = {"integer": True, "minimum": 1}


def number_problem(value: Any, *, minimum: float | None = None, maximum: float | None = None,
                   above: float | None = None, integer: bool = False) -> str | None:
    """What is wrong with ``value`` as a (finite) number within bounds, or None.

    Parameters
    ----------
    value : the value (``bool`` is refused: ``True`` is not a number here).
    minimum, maximum : inclusive bounds, or None.
    above : exclusive lower bound, or None.
    integer : require an ``int``.

    Returns
    -------
    ``"must be <what>, got <value>"`` naming the first rule broken, or None.
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return f"must be {kind}, got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if above is not None and not value > above:
        return f"must be {kind} > {_bound(above)}, got {value!r}"
    if minimum is not None and value < minimum:
        return f"must be {kind} >= {_bound(minimum)}, got {value!r}"
    if maximum is not None and value > maximum:
        return f"must be {kind} <= {_bound(maximum)}, got {value!r}"
    return None


def _bound(value: float) -> str:
    """A bound as written in a message: integers in full (``4294967295``, ``86400``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def flag_problem(value: Any) -> str | None:
    """``"must be true or false, got <value>"`` unless ``value`` is a bool; else None."""
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


def _raise(name: str, problem: str | None) -> None:
    if problem is not None:
        raise ValueError(f"{name} {problem}")


def check_k(k: Any) -> int:
    """Validate a cut-off or selection size: an integer >= 1 (above the library size means
    the whole library). Returns ``k``.

    Raises
    ------
    ValueError : k is not an integer >= 1.
    """
    _raise("k", number_problem(k, **K_BOUNDS))
    return k


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None, integer: bool = False) -> Any:
    """Validate a numeric parameter (see :func:`number_problem` for the rules).

    Returns
    -------
    ``value`` unchanged.

    Raises
    ------
    ValueError : not a (finite) number, not an integer when one is needed, or out of bounds;
        the message names the parameter.
    """
    _raise(name, number_problem(value, minimum=minimum, maximum=maximum, above=above, integer=integer))
    return value


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """Validate a parameter that takes one of ``choices``; returns ``value``.

    Raises
    ------
    ValueError : ``value`` is not one of ``choices`` (the message names the parameter and lists them).
    """
    if isinstance(value, bool) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_flag(name: str, value: Any) -> bool:
    """Validate a boolean parameter; returns ``value``.

    Raises
    ------
    ValueError : ``value`` is not ``True`` or ``False``.
    """
    _raise(name, flag_problem(value))
    return value


def check_text(name: str, value: Any, *, empty: bool = True) -> str:
    """Validate a string parameter (non-empty unless ``empty``); returns ``value``.

    Raises
    ------
    ValueError : not a string, or empty when ``empty`` is False.
    """
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise ValueError(f"{name} must be a {'' if empty else 'non-empty '}string, got {value!r}")
    return value
