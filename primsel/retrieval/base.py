"""Shared machinery of the built-in retrievers: ranking, tokenisation, the gold ability.

Every built-in retriever derives from :class:`BaseRetriever`, which implements the
:class:`primsel.types.Retriever` protocol's ``search`` from one method, ``score``, that maps a
query to a score per library primitive. ``search`` then ranks the *whole* library for every
query (primitives without signal score 0), sorts by score descending with ties broken by
primitive id, and keeps the first ``k``.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from primsel.types import Run, Task

_WORD = re.compile(r"[A-Za-z0-9_]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def check_k(k: Any) -> int:
    """Validate a cut-off.

    Raises
    ------
    ValueError : k is not an integer >= 1.
    """
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if k <= 0:
        raise ValueError(f"k must be >= 1, got {k}")
    return k


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 above: float | None = None, integer: bool = False) -> Any:
    """Validate a numeric constructor parameter.

    Parameters
    ----------
    name : parameter name, used in the message.
    value : the value given (``bool`` is refused: ``True`` is not a number here).
    minimum, maximum : inclusive bounds, or None.
    above : exclusive lower bound, or None.
    integer : require an ``int``.

    Returns
    -------
    ``value`` unchanged.

    Raises
    ------
    ValueError : not a (finite) number, not an integer when one is needed, or out of bounds;
        the message names the parameter.
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if above is not None and not value > above:
        raise ValueError(f"{name} must be {kind} > {above}, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be {kind} >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be {kind} <= {maximum}, got {value!r}")
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
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
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


def top_k(ids: Sequence[str], scores: Sequence[float] | Mapping[str, float], k: int) -> dict[str, float]:
    """Rank ``ids`` by score (descending, ties by id) and keep the first ``k``.

    Parameters
    ----------
    ids : every primitive id to rank (the library), unique.
    scores : one score per id (a sequence aligned with ``ids``) or ``{id: score}`` (missing -> 0).
    k : cut-off, >= 1.

    Returns
    -------
    ``{primitive_id: score}`` in rank order, ``min(k, len(ids))`` entries. Non-finite scores are
    treated as 0.

    Raises
    ------
    ValueError : bad k, or a score sequence of the wrong length.
    """
    check_k(k)
    if isinstance(scores, Mapping):
        values = [float(scores.get(i, 0.0)) for i in ids]
    else:
        values = [float(s) for s in scores]
        if len(values) != len(ids):
            raise ValueError(f"{len(values)} scores for {len(ids)} ids")
    values = [v if math.isfinite(v) else 0.0 for v in values]
    order = sorted(range(len(ids)), key=lambda i: (-values[i], ids[i]))
    return {ids[i]: values[i] for i in order[:k]}


def split_identifier(token: str) -> list[str]:
    """Parts of an identifier: ``snake_case`` and ``CamelCase`` split, lower-cased.

    ``"find_available_slots"`` -> ``["find", "available", "slots"]``;
    ``"DateTimeClauseOperators"`` -> ``["date", "time", "clause", "operators"]``;
    ``"now_"`` -> ``["now"]``.
    """
    parts: list[str] = []
    for piece in token.split("_"):
        parts.extend(m.group(0).lower() for m in _CAMEL.finditer(piece))
    return parts


def code_tokens(text: str, stopwords: Iterable[str] = ()) -> list[str]:
    """Code-aware tokens of a text, for lexical retrieval.

    Every word or identifier (``[A-Za-z0-9_]+``) yields its snake_case / CamelCase parts,
    lower-cased, and, when it has more than one part, the whole identifier lower-cased (with
    surrounding underscores stripped) as well. So ``find_events`` gives ``find``, ``events``,
    ``find_events``; ``TimeUnits`` gives ``time``, ``units``, ``timeunits``.

    Parameters
    ----------
    text : any text.
    stopwords : lower-case tokens to drop.

    Returns
    -------
    tokens in text order (a list; repeats kept).
    """
    stop = frozenset(stopwords)
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        parts = split_identifier(word)
        out.extend(p for p in parts if p not in stop)
        whole = word.strip("_").lower()
        if len(parts) > 1 and whole not in stop:
            out.append(whole)
    return out


def english_stopwords() -> frozenset[str]:
    """scikit-learn's English stop-word list plus the words every Asper-Bench-style request opens with."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"hey", "assistant"}


@runtime_checkable
class SeesGold(Protocol):
    """Optional ability of bound retrievers (``oracle``): they are handed the gold sets.

    A runner that finds this ability calls ``set_gold({task_id: gold ids})`` after ``fit`` and
    before ``search``. Only upper bounds use it; no real retriever may.
    """

    def set_gold(self, gold: Mapping[str, Iterable[str]]) -> None: ...


def learns_from_tasks(retriever: Any) -> bool:
    """True when ``retriever`` declares the :class:`primsel.types.LearnsFromTasks` ability."""
    return bool(getattr(retriever, "learns_from_tasks", False))


class BaseRetriever:
    """Base of the built-in retrievers.

    Subclasses store their (JSON-serialisable) parameters in ``__init__``, do heavy work in
    :meth:`fit` (calling ``super().fit``) and implement :meth:`score`.
    """

    #: Set by :func:`primsel.registry.register`.
    registered_name: str | None = None
    learns_from_tasks: bool = False

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> BaseRetriever:
        """Remember the library (its ids in library order). Returns ``self``.

        Raises
        ------
        ValueError : empty library.
        """
        if len(library) == 0:
            raise ValueError("cannot fit a retriever on an empty library")
        self.library = library
        self.ids: tuple[str, ...] = tuple(library)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "ids"):
            raise RuntimeError(f"{type(self).__name__}: call fit(library) before search")

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float] | Mapping[str, float]]:
        """Scores of every library primitive for every query (higher is better).

        Returns
        -------
        ``{query_id: scores}``; scores aligned with ``self.ids`` or ``{primitive_id: score}``
        (missing ids score 0).
        """
        raise NotImplementedError

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        """Rank the library for every query.

        Parameters
        ----------
        queries : ``{task_id: query text}``; an empty text ranks the library by id, scores 0.
        k : cut-off, >= 1; ``k >= len(library)`` ranks the whole library.

        Returns
        -------
        ``{task_id: {primitive_id: score}}``: every query id, ``min(k, len(library))`` unique
        ids each, scores descending, ties broken by primitive id.

        Raises
        ------
        ValueError : k < 1.
        RuntimeError : not fitted.
        """
        check_k(k)
        self._check_fitted()
        queries = {str(q): ("" if text is None else str(text)) for q, text in queries.items()}
        nonempty = {q: t for q, t in queries.items() if t.strip()}
        scored = self.score(nonempty) if nonempty else {}
        return {q: top_k(self.ids, scored.get(q, {}) if q in nonempty else {}, k) for q in queries}

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable), as given or defaulted."""
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name in sig.parameters if name != "self" and hasattr(self, name)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
