"""Turn a ranking into a selection: top-k, score threshold or token budget, plus type closure.

The selector wraps any ranking (composition, not a retriever flag). Rules are applied in this
order, each optional:

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

import math
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.checks import check_k
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
