"""Turn a ranking into a selection: top-k, score threshold or token budget, plus type closure.

The selector wraps any ranking (composition, not a retriever flag). :func:`select` applies the
fixed rules below; registered selector classes (kind ``"selector"``: ``topk``, ``calibrated``, ``positive``)
are chosen by a cell's ``selector`` setting and may learn from the training folds' rankings
(:class:`CalibratedSelector` chooses k per task). The rules of :func:`select` are applied in
this order, each optional:

1. ``threshold``: keep primitives whose score is >= threshold;
2. ``k``: keep the first k;
3. ``budget``: walk the ranking and keep each primitive while the running total of
   :func:`estimate_tokens` of the kept primitives' ``full`` text stays <= budget (a primitive
   that would overflow is skipped and later, shorter ones may still fit);
4. ``closure``: append the library types the kept primitives depend on
   (``Primitive.depends_on``, transitively) that are not kept yet. Closure additions are not
   limited by k or budget; :attr:`Selection.added_by_closure` lists them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from primsel.checks import check_choice, check_k, check_number
from primsel.registry import register
from primsel.types import Run, Selection, ranking

#: Characters per token of :func:`estimate_tokens` (the usual rule of thumb for English text and
#: code with GPT-style BPE vocabularies).
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated number of LLM tokens of a text: ``ceil(len(text) / 4)``.

    A tokenizer-free estimate (a BPE vocabulary would need a download); accurate to roughly
    +-20% for English prose and Python stubs.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _ranked_pairs(ranked: Mapping[str, float] | Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    if isinstance(ranked, Mapping):
        return [(p, float(ranked[p])) for p in ranking(ranked)]
    seen: set[str] = set()
    out = []
    for p, s in ranked:
        if p not in seen:
            seen.add(p)
            out.append((p, float(s)))
    return out


def select(
    ranked: Mapping[str, float] | Sequence[tuple[str, float]],
    library: Mapping[str, Any],
    *,
    k: int | None = None,
    threshold: float | None = None,
    budget: int | None = None,
    closure: bool = False,
    task_id: str = "",
    retriever: str = "",
    usage: Mapping[str, float] | None = None,
) -> Selection:
    """Select primitives from one task's ranking (rules in the module docstring).

    Parameters
    ----------
    ranked : ``{primitive_id: score}`` (ranked by score descending, ties by id) or a ranked
        sequence of ``(primitive_id, score)`` (order kept; repeated ids count once).
    library : the library (``primsel.library.Library``); ids not in it are dropped.
    k : keep at most k ranked primitives (>= 1), or None.
    threshold : minimum score, or None.
    budget : token budget of the kept primitives' ``full`` texts (>= 0), or None.
    closure : append the types the kept primitives depend on.
    task_id, retriever, usage : recorded in the selection.

    Returns
    -------
    :class:`primsel.types.Selection` with ``ranked`` the full ranking and ``ids`` the
    selection in rank order, closure additions last.

    Raises
    ------
    ValueError : k < 1 or budget < 0.
    """
    if k is not None:
        check_k(k)
    if budget is not None and budget < 0:
        raise ValueError(f"budget must be >= 0 tokens, got {budget}")
    pairs = [(p, s) for p, s in _ranked_pairs(ranked) if p in library]
    kept = [p for p, s in pairs if threshold is None or s >= threshold]
    if k is not None:
        kept = kept[:k]
    if budget is not None:
        used, within = 0, []
        for p in kept:
            cost = estimate_tokens(library[p].text("full"))
            if used + cost <= budget:
                within.append(p)
                used += cost
        kept = within
    added: list[str] = []
    if closure:
        added = _closure(kept, library)
    return Selection(task_id=str(task_id), retriever=retriever, ranked=tuple(pairs),
                     ids=tuple(kept + added), usage=dict(usage or {}), added_by_closure=tuple(added))


def _closure(ids: Sequence[str], library: Mapping[str, Any]) -> list[str]:
    have = set(ids)
    added: list[str] = []
    frontier = list(ids)
    while frontier:
        nxt = []
        for pid in frontier:
            for dep in library[pid].depends_on:
                if dep not in have and dep in library:
                    have.add(dep)
                    added.append(dep)
                    nxt.append(dep)
        frontier = nxt
    return added


def select_run(run: Run, library: Mapping[str, Any], *, retriever: str = "", **rules: Any) -> dict[str, Selection]:
    """:func:`select` for every task of a run; ``rules`` are ``k``, ``threshold``, ``budget``, ``closure``.

    Returns
    -------
    ``{task_id: Selection}`` in the run's task order.
    """
    return {t: select(scores, library, task_id=t, retriever=retriever, **rules) for t, scores in run.items()}


def tokens_of(selection: Selection, library: Mapping[str, Any]) -> int:
    """Estimated tokens of the selected primitives' ``full`` texts (closure additions included)."""
    return sum(estimate_tokens(library[p].text("full")) for p in selection.ids)


# ---------------------------------------------------------------------------------------------
# Selector classes (registry kind "selector")
# ---------------------------------------------------------------------------------------------
#: One training example of a learned selector: a task's full ranking (best first, as
#: ``((primitive_id, score), ...)`` or ``{primitive_id: score}``) and its gold primitive ids.
Example = tuple[Mapping[str, float] | Sequence[tuple[str, float]], Iterable[str]]


class BaseSelector:
    """Base of the selector classes: ``select`` turns one task's ranking into a
    :class:`primsel.types.Selection`, given the cell's ``k``, ``threshold`` and ``closure``.

    A selector that learns sets ``learns_from_tasks = True`` and implements
    ``fit(library, examples)``; the cell pipeline then fits one per cross-validation fold on the
    rankings and gold sets of the other folds' tasks (rankings made by models that never saw
    those tasks) and selects for the fold's own tasks with it.
    """

    registered_name: str | None = None
    learns_from_tasks = False

    def fit(self, library: Mapping[str, Any], examples: Sequence[Example] = ()) -> BaseSelector:
        """Learn from ``examples`` (nothing to learn here). Returns ``self``."""
        return self

    def select(self, ranked: Mapping[str, float] | Sequence[tuple[str, float]], library: Mapping[str, Any], *,
               k: int | None = None, threshold: float | None = None, closure: bool = False,
               task_id: str = "", retriever: str = "", usage: Mapping[str, float] | None = None) -> Selection:
        """The selection of one task (see the class)."""
        raise NotImplementedError

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters (JSON-serialisable)."""
        sig = inspect.signature(type(self).__init__)
        return {name: getattr(self, name) for name in sig.parameters if name != "self" and hasattr(self, name)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"


@register("topk", "selector")
class TopKSelector(BaseSelector):
    """The fixed rules of :func:`select`: the cell's threshold, k and closure, plus an optional
    token ``budget``.

    Parameters
    ----------
    budget : token budget of the selected primitives' documentation (>= 0), or None.

    Raises
    ------
    ValueError : a negative or non-integer budget.
    """

    def __init__(self, budget: int | None = None) -> None:
        self.budget = None if budget is None else check_number("budget", budget, minimum=0, integer=True)

    def select(self, ranked: Mapping[str, float] | Sequence[tuple[str, float]], library: Mapping[str, Any], *,
               k: int | None = None, threshold: float | None = None, closure: bool = False,
               task_id: str = "", retriever: str = "", usage: Mapping[str, float] | None = None) -> Selection:
        return select(ranked, library, k=k, threshold=threshold, budget=self.budget, closure=closure,
                      task_id=task_id, retriever=retriever, usage=usage)


@register("positive", "selector")
class PositiveSelector(BaseSelector):
    """Every primitive the retriever scored above 0, in rank order, whatever the cell's k and threshold (closure
    as the cell says): the choice of a retriever that selects rather than ranks, such as ASPERA's PS agent
    (``aspera_selector``), whose selection no k cuts."""

    def __init__(self) -> None:
        pass

    def select(self, ranked: Mapping[str, float] | Sequence[tuple[str, float]], library: Mapping[str, Any], *,
               k: int | None = None, threshold: float | None = None, closure: bool = False,
               task_id: str = "", retriever: str = "", usage: Mapping[str, float] | None = None) -> Selection:
        # the least float above 0: the threshold keeps exactly the positive scores
        return select(ranked, library, threshold=math.nextafter(0.0, 1.0), closure=closure, task_id=task_id,
                      retriever=retriever, usage=usage)


@register("calibrated", "selector")
class CalibratedSelector(BaseSelector):
    """Chooses the number of primitives per task from calibrated scores, to reach a target
    recall with as little documentation as it can.

    ``fit`` learns the probability that a primitive is gold given its retriever score: isotonic
    regression (Zadrozny & Elkan, KDD 2002) of the gold indicator on the score, over every
    (task, primitive) pair of the training rankings. For a task, with ``p_j`` the calibrated
    probability of primitive j, the expected recall of a set S is estimated as
    ``sum_{j in S} p_j / sum_j p_j``; the selector keeps primitives, best first, until that
    estimate reaches ``target_recall``. ``order = "rank"`` keeps them in ranking order (a prefix:
    k chosen per task); ``order = "density"`` in order of ``p_j`` per documentation token, the
    greedy answer to the fewest tokens for the expected recall. At least ``min_k`` primitives
    are kept; the cell's ``k`` is a cap and its ``threshold`` a floor on the raw score; closure,
    when on, is added afterwards.

    Without training examples (or when they hold no gold primitive) scores are taken as
    probabilities, clipped to [0, 1].

    Parameters
    ----------
    target_recall : estimated recall to reach, in (0, 1].
    order : ``"rank"`` or ``"density"``.
    min_k : primitives kept at least, >= 1.

    Raises
    ------
    ValueError : target_recall outside (0, 1], unknown order, or min_k not an integer >= 1.
    """

    learns_from_tasks = True

    def __init__(self, target_recall: float = 0.95, order: str = "rank", min_k: int = 1) -> None:
        self.target_recall = check_number("target_recall", target_recall, above=0, maximum=1)
        self.order = check_choice("order", order, ("rank", "density"))
        self.min_k = check_number("min_k", min_k, minimum=1, integer=True)

    def fit(self, library: Mapping[str, Any], examples: Sequence[Example] = ()) -> CalibratedSelector:
        from sklearn.isotonic import IsotonicRegression

        scores: list[float] = []
        labels: list[float] = []
        for ranked, gold in examples:
            wanted = set(gold)
            for p, s in _ranked_pairs(ranked):
                if p in library:
                    scores.append(s)
                    labels.append(1.0 if p in wanted else 0.0)
        self._calibrator = None
        if scores and any(labels):
            self._calibrator = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, labels)
        return self

    def probabilities(self, scores: Sequence[float]) -> np.ndarray:
        """Calibrated probability of each score, ``(n,) float64`` in [0, 1]."""
        values = np.asarray(scores, dtype=np.float64)
        if getattr(self, "_calibrator", None) is None:
            return np.clip(values, 0.0, 1.0)
        return np.clip(self._calibrator.predict(values), 0.0, 1.0)

    def select(self, ranked: Mapping[str, float] | Sequence[tuple[str, float]], library: Mapping[str, Any], *,
               k: int | None = None, threshold: float | None = None, closure: bool = False,
               task_id: str = "", retriever: str = "", usage: Mapping[str, float] | None = None) -> Selection:
        if k is not None:
            check_k(k)
        pairs = [(p, s) for p, s in _ranked_pairs(ranked) if p in library]
        prob = self.probabilities([s for _, s in pairs])
        total = prob.sum()
        order = list(range(len(pairs)))
        if self.order == "density":
            cost = [max(1, estimate_tokens(library[p].text("full"))) for p, _ in pairs]
            order.sort(key=lambda i: (-prob[i] / cost[i], i))
        eligible = [i for i in order if threshold is None or pairs[i][1] >= threshold]
        cap = len(eligible) if k is None else min(k, len(eligible))
        chosen: list[int] = []
        reached = 0.0
        for i in eligible[:cap]:
            if len(chosen) >= self.min_k and reached >= self.target_recall * total - 1e-12:
                break
            chosen.append(i)
            reached += prob[i]
        kept = [pairs[i][0] for i in sorted(chosen)]
        added = _closure(kept, library) if closure else []
        return Selection(task_id=str(task_id), retriever=retriever, ranked=tuple(pairs),
                         ids=tuple(kept + added), usage=dict(usage or {}), added_by_closure=tuple(added))
