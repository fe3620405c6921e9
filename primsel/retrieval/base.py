"""Shared machinery of the built-in retrievers: the base class and tokenisation.

Every built-in retriever derives from :class:`BaseRetriever`, which implements the
:class:`primsel.types.Retriever` protocol's ``search`` from one method, ``score``, that maps a
query to a score per library primitive. ``search`` then ranks the *whole* library for every
query (primitives without signal score 0), sorts by score descending with ties broken by
primitive id, and keeps the first ``k`` (:func:`primsel.types.top_k`). A retriever that learns
from tasks sets ``learns_from_tasks = True`` (:class:`primsel.types.LearnsFromTasks`); its
parameters are checked with :mod:`primsel.checks`.
"""

from __future__ import annotations

import inspect
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from primsel.checks import check_k
from primsel.files import encodable_text
from primsel.registry import build, error_context
from primsel.types import LearnsFromTasks, Run, SeesGold, Task, top_k

_WORD = re.compile(r"\w+")


def normalise_text(text: str) -> str:
    """Text as the tokeniser sees it: Unicode NFKC (full-width and compatibility forms become
    their plain letters and digits, ``"ｆｉｎｄ"`` -> ``"find"``), then without combining marks
    (accents: ``"résumé"`` -> ``"resume"``), so accented and ASCII spellings of a word match.
    Case is kept (CamelCase splitting needs it)."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    stripped = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", stripped)


def _kind(c: str) -> str:
    return "digit" if c.isdigit() else "upper" if c.isupper() else "lower"


def split_identifier(token: str) -> list[str]:
    """Parts of an identifier: ``snake_case`` and ``CamelCase`` split, case-folded.

    ``"find_available_slots"`` -> ``["find", "available", "slots"]``;
    ``"DateTimeClauseOperators"`` -> ``["date", "time", "clause", "operators"]``;
    ``"HTTPServer"`` -> ``["http", "server"]``; ``"now_"`` -> ``["now"]``. Letters of any script
    count (``"Ärger"`` -> ``["ärger"]``); a part starts where a lower-case letter meets an
    upper-case one, before the last capital of a run of capitals followed by a lower-case
    letter, and where digits start or end.
    """
    parts: list[str] = []
    for piece in token.split("_"):
        if not piece:
            continue
        start = 0
        for i in range(1, len(piece)):
            before, here = _kind(piece[i - 1]), _kind(piece[i])
            after = _kind(piece[i + 1]) if i + 1 < len(piece) else None
            if (before != here and "digit" in (before, here)) or (before == "lower" and here == "upper") \
                    or (before == here == "upper" and after == "lower"):
                parts.append(piece[start:i].casefold())
                start = i
        parts.append(piece[start:].casefold())
    return parts


def code_tokens(text: str, stopwords: Iterable[str] = ()) -> list[str]:
    """Code-aware tokens of a text, for lexical retrieval.

    The text is normalised first (:func:`normalise_text`: NFKC, accents removed). Every word or
    identifier (a run of Unicode word characters, ``\\w+``) yields its snake_case / CamelCase
    parts, case-folded, and, when it has more than one part, the whole identifier case-folded
    (with surrounding underscores stripped) as well. So ``find_events`` gives ``find``,
    ``events``, ``find_events``; ``TimeUnits`` gives ``time``, ``units``, ``timeunits``;
    ``"Café naïve"`` gives ``cafe``, ``naive``; ``"ＦＩＮＤ"`` gives ``find``.

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
    for m in _WORD.finditer(normalise_text(text)):
        word = m.group(0)
        parts = split_identifier(word)
        out.extend(p for p in parts if p not in stop)
        whole = word.strip("_").casefold()
        if len(parts) > 1 and whole not in stop:
            out.append(whole)
    return out


def english_stopwords() -> frozenset[str]:
    """scikit-learn's English stop-word list plus the words every Asper-Bench-style request opens with."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"hey", "assistant"}


def id_ranks(ids: Sequence[str]) -> np.ndarray:
    """``(n,) int64``: the position of each id in the ids sorted as strings (the tie order of
    :func:`primsel.types.top_k`)."""
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return ranks


def top_k_array(ids: Sequence[str], id_rank: np.ndarray, scores: np.ndarray, k: int) -> dict[str, float]:
    """:func:`primsel.types.top_k` for scores in a NumPy array, in O(n + m log m) time (m: the
    ids scoring at least the k-th best score) instead of sorting all n ids.

    Parameters
    ----------
    ids : every primitive id, unique, ``(n,)``.
    id_rank : :func:`id_ranks` of ``ids``.
    scores : ``(n,)`` scores aligned with ``ids`` (any float dtype; non-finite count as 0).
    k : cut-off, >= 1.

    Returns
    -------
    ``{primitive_id: score}`` in rank order (score descending, ties by id), ``min(k, n)``
    entries, equal to ``top_k(ids, scores.tolist(), k)``.
    """
    check_k(k)
    values = np.asarray(scores, dtype=np.float64)
    values = np.where(np.isfinite(values), values, 0.0)
    n = len(values)
    if k < n:
        kth = np.partition(values, n - k)[n - k]
        candidates = np.flatnonzero(values >= kth)
    else:
        candidates = np.arange(n)
    order = candidates[np.lexsort((id_rank[candidates], -values[candidates]))][:k]
    return {ids[i]: float(values[i]) for i in order}


class BaseRetriever:
    """Base of the built-in retrievers.

    Subclasses store their (JSON-serialisable) parameters in ``__init__``, do heavy work in
    :meth:`fit` (calling ``super().fit``) and implement :meth:`score`.
    """

    #: Set by :func:`primsel.registry.register`.
    registered_name: str | None = None

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

    def _top(self, scores: Sequence[float] | Mapping[str, float], k: int) -> dict[str, float]:
        """:func:`primsel.types.top_k` of one query's scores; a NumPy array of scores takes
        :func:`top_k_array` (the same ranking, without sorting the whole library)."""
        if isinstance(scores, np.ndarray) and scores.shape == (len(self.ids),):
            if getattr(self, "_id_rank", None) is None or len(self._id_rank) != len(self.ids):
                self._id_rank = id_ranks(self.ids)
            return top_k_array(self.ids, self._id_rank, scores, k)
        return top_k(self.ids, scores, k)

    def search(self, queries: Mapping[str, str], k: int) -> Run:
        """Rank the library for every query.

        Parameters
        ----------
        queries : ``{task_id: query text}``; an empty text ranks the library by id, scores 0; a
            lone surrogate in a text is read as the text of its ``\\udXXXX`` escape.
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
        # a lone surrogate (UTF-8 cannot encode it: tokenizers, encoders and digests of a text
        # fail on it) is read as the text of its escape, by every retriever alike
        queries = {str(q): encodable_text("" if text is None else str(text)) for q, text in queries.items()}
        nonempty = {q: t for q, t in queries.items() if t.strip()}
        scored = self.score(nonempty) if nonempty else {}
        return {q: self._top(scored.get(q, {}) if q in nonempty else {}, k) for q in queries}

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable), as given or defaulted."""
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name in sig.parameters if name != "self" and hasattr(self, name)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def fit_nested(spec: Any, key: str, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> Any:
    """Build the retriever specification nested under ``key`` of a composite (``"base"``,
    ``"first_stage"``) and fit it, on ``train_tasks`` when it learns from tasks.

    Raises
    ------
    ValueError, TypeError : the specification is rejected; the message and ``key_path`` name ``key``.
    """
    with error_context(key, key=True):
        retriever = build(spec, "retriever")
    return retriever.fit(library, train_tasks if isinstance(retriever, LearnsFromTasks) else ())


def pass_gold(retriever: Any, gold: Mapping[str, Any]) -> None:
    """Hand the gold sets to a nested retriever that sees gold (only bounds do)."""
    if isinstance(retriever, SeesGold):
        retriever.set_gold(gold)
