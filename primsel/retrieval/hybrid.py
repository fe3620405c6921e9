"""Fusion of member retrievers' rankings: reciprocal rank fusion or a weighted score sum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from primsel.checks import check_choice, check_number
from primsel.registry import build, error_context, register
from primsel.retrieval.base import BaseRetriever
from primsel.types import LearnsFromTasks, SeesGold, Task

METHODS = ("rrf", "wsum")


def competition_ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Rank of each id: 1 + the number of ids with a strictly higher score (ties share a rank)."""
    values = sorted(scores.values(), reverse=True)
    first: dict[float, int] = {}
    for pos, v in enumerate(values, start=1):
        first.setdefault(v, pos)
    return {p: first[s] for p, s in scores.items()}


def rrf(rankings: Sequence[Mapping[str, float]], weights: Sequence[float], k: int = 60) -> dict[str, float]:
    """Weighted reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009).

    ``score(p) = sum_i w_i / (k + rank_i(p))``; ``rank_i`` is the competition rank of ``p`` in
    member i's scores (tied scores share the best rank, so the arbitrary order of ties adds no
    signal); a primitive missing from a member's scores gets nothing from it.
    """
    fused: dict[str, float] = {}
    for scores, w in zip(rankings, weights):
        for p, r in competition_ranks(scores).items():
            fused[p] = fused.get(p, 0.0) + w / (k + r)
    return fused


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores scaled to [0, 1] per query (all equal -> all 0)."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi <= lo:
        return dict.fromkeys(scores, 0.0)
    return {p: (s - lo) / (hi - lo) for p, s in scores.items()}


def wsum(rankings: Sequence[Mapping[str, float]], weights: Sequence[float]) -> dict[str, float]:
    """Weighted sum of min-max normalised scores (CombSUM, Fox & Shaw, TREC-2 1994)."""
    fused: dict[str, float] = {}
    for scores, w in zip(rankings, weights):
        for p, s in min_max(scores).items():
            fused[p] = fused.get(p, 0.0) + w * s
    return fused


@register("hybrid")
class HybridRetriever(BaseRetriever):
    """Fuses the full rankings of member retrievers.

    Parameters
    ----------
    members : member specifications (names, ``"module:Class"`` or tables), built with
        :func:`primsel.registry.build` (once in ``__init__`` to check them, afresh in ``fit``).
    method : ``"rrf"`` (reciprocal rank fusion) or ``"wsum"`` (weighted sum of min-max
        normalised scores).
    weights : one weight per member (default all 1).
    rrf_k : the RRF constant (60 in Cormack et al.), >= 0.

    Notes
    -----
    The hybrid learns from tasks when any member does; members receive the same training tasks.

    Raises
    ------
    ValueError : no members, unknown method, weights of the wrong length or not numbers, a
        negative rrf_k, or a member whose parameters its class rejects (the message says which
        member, ``members[i]``).
    primsel.registry.UnknownComponentError : a member names no retriever class.
    TypeError : a member specification is neither a name nor a table, or its class does not
        take the parameters given.
    """

    #: Parameters that change scoring only (no refit needed; :class:`primsel.retrieval.tuned.TunedRetriever`).
    score_parameters = ("weights", "method", "rrf_k")

    def __init__(self, members: Sequence[Any] = ("bm25", "dense"), method: str = "rrf",
                 weights: Sequence[float] | None = None, rrf_k: float = 60) -> None:
        if isinstance(members, (str, Mapping)) or not isinstance(members, Sequence):
            raise ValueError(f"members must be a list of retriever specifications, got {members!r}")
        members = list(members)
        if not members:
            raise ValueError("hybrid needs at least one member")
        check_choice("method", method, METHODS)
        if weights is not None:
            if isinstance(weights, (str, Mapping)) or not isinstance(weights, Sequence):
                raise ValueError(f"weights must be a list of numbers, got {weights!r}")
            if len(weights) != len(members):
                raise ValueError(f"{len(weights)} weights for {len(members)} members")
            weights = [float(check_number(f"weights[{i}]", w)) for i, w in enumerate(weights)]
        self.members = [dict(m) if isinstance(m, Mapping) else m for m in members]
        self.method = method
        self.weights = weights
        self.rrf_k = check_number("rrf_k", rrf_k, minimum=0)
        self._probes = self._build_members()

    def _build_members(self) -> list[Any]:
        built = []
        for i, spec in enumerate(self.members):
            with error_context(f"members[{i}]", key=True):
                built.append(build(spec, "retriever"))
        return built

    @property
    def learns_from_tasks(self) -> bool:
        """True when a member learns from tasks."""
        built = getattr(self, "_members", None) or self._probes
        return any(isinstance(m, LearnsFromTasks) for m in built)

    def set_gold(self, gold: Mapping[str, Any]) -> None:
        """Pass the gold sets on to members that see gold (only bounds do)."""
        for m in self._members:
            if isinstance(m, SeesGold):
                m.set_gold(gold)

    def fit(self, library: Mapping[str, Any], train_tasks: Sequence[Task] = ()) -> HybridRetriever:
        super().fit(library, train_tasks)
        self._members = [m.fit(library, train_tasks) for m in self._build_members()]
        return self

    def score(self, queries: Mapping[str, str]) -> dict[str, Mapping[str, float]]:
        n = len(self.ids)
        runs = [m.search(queries, n) for m in self._members]
        weights = self.weights or [1.0] * len(runs)
        out = {}
        for q in queries:
            member_scores = [r.get(q, {}) for r in runs]
            if self.method == "rrf":
                out[q] = rrf(member_scores, weights, self.rrf_k)
            else:
                out[q] = wsum(member_scores, weights)
        return out
