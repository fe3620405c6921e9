"""Bounds and trivial baselines: ``oracle``, ``all``, ``random``."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence

from primsel.registry import register
from primsel.checks import check_number
from primsel.retrieval.base import BaseRetriever


@register("oracle")
class OracleRetriever(BaseRetriever):
    """Upper bound: ranks each task's gold primitives first (score 1, by id), then the rest (0).

    It needs the gold sets of the tasks it is asked about, which a retriever never sees: it has
    the optional :class:`primsel.types.SeesGold` ability, and runners
    (:func:`primsel.retrieval.cv.cross_validated_run`) call
    ``set_gold({task_id: gold ids})`` after ``fit``. A task without gold ranks the library by id.
    """

    def __init__(self) -> None:
        pass

    def set_gold(self, gold: Mapping[str, Iterable[str]]) -> None:
        """Hand over the gold sets, ``{task_id: primitive ids}``."""
        self._gold = {str(t): frozenset(ids) for t, ids in gold.items()}

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        gold = getattr(self, "_gold", None)
        if gold is None:
            raise RuntimeError("oracle: call set_gold({task_id: gold ids}) before search")
        return {q: dict.fromkeys(gold.get(q, ()), 1.0) for q in queries}


@register("all")
class AllRetriever(BaseRetriever):
    """Every primitive, score 1, in id order: with ``k >= len(library)`` the selection is the
    whole library (recall 1, the documentation-in-full setting)."""

    def __init__(self) -> None:
        pass

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        return {q: [1.0] * len(self.ids) for q in queries}


@register("random")
class RandomRetriever(BaseRetriever):
    """A random ranking per task, reproducible: it depends on ``seed`` and the task id only.

    Parameters
    ----------
    seed : integer seed.

    Raises
    ------
    ValueError : seed is not an integer.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = check_number("seed", seed, integer=True)

    def score(self, queries: Mapping[str, str]) -> dict[str, Sequence[float]]:
        out = {}
        for q in queries:
            digest = hashlib.sha256(f"{self.seed}\0{q}".encode()).digest()
            rng = random.Random(int.from_bytes(digest[:8], "big"))
            out[q] = [rng.random() for _ in self.ids]
        return out
