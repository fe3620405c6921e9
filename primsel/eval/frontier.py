"""The recall/tokens frontier of a ranking: for every cut-off k = 1 .. depth, what reading the top k
primitives' documentation costs (mean tokens per task) and what it finds (recall@k per task), so a
report can show how much documentation a retriever needs for a given recall. Only tasks with gold
primitives count; a ranking shorter than the deepest counts whole at the deeper k, an empty one
as nothing spent and nothing found.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping

from primsel.types import ranking


def ranked_tasks(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Task id -> its ranking (:func:`primsel.types.ranking`), for the tasks of ``gold`` with gold
    primitives that ``run`` holds, in the order of ``gold``."""
    return {t: ranking(run[t]) for t in gold if gold[t] and t in run}


def depth_of(orders: Mapping[str, list[str]]) -> int:
    """The frontier's depth: the length of the longest ranking (0 for none)."""
    return max((len(o) for o in orders.values()), default=0)


def frontier(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Iterable[str]],
             tokens: Mapping[str, int]) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Mean documentation tokens and mean recall of the top k, over the tasks with gold primitives.

    Parameters
    ----------
    run : ``{task_id: {primitive_id: score}}``.
    gold : ``{task_id: gold primitive ids}``; tasks without gold are left out.
    tokens : documentation tokens of every primitive the run ranks (whole numbers, so the running
        sums are exact).

    Returns
    -------
    ``(tokens, recall)``, two tuples of length depth (:func:`depth_of`), k = 1 first; None when no
    task has gold or a ranked primitive has no ``tokens``.
    """
    orders = ranked_tasks(run, gold)
    if not orders or any(p not in tokens for order in orders.values() for p in order):
        return None
    spent = [list(itertools.accumulate(tokens[p] for p in order)) for order in orders.values()]
    found = [[x / len(frozenset(gold[t])) for x in itertools.accumulate(int(p in gold[t]) for p in order)]
             for t, order in orders.items()]
    ks = range(1, depth_of(orders) + 1)

    def mean(rows: list[list[float]]) -> tuple[float, ...]:
        return tuple(math.fsum(row[min(k, len(row)) - 1] if row else 0 for row in rows) / len(rows) for k in ks)
    return mean(spent), mean(found)


def recall_by_k(orders: Mapping[str, list[str]], gold: Mapping[str, Iterable[str]]) -> tuple[tuple[float, ...], ...]:
    """Each task's recall@k for k = 1 .. depth (:func:`depth_of`), a row per task of ``orders``
    (:func:`ranked_tasks`), for the bootstrap bands of a figure."""
    ks = range(1, depth_of(orders) + 1)
    sets = {t: frozenset(gold[t]) for t in orders}
    return tuple(tuple(len(sets[t] & set(order[:k])) / len(sets[t]) for k in ks) for t, order in orders.items())
