"""Task success as a proportion: its interval, and success against the completeness of a selection.

:func:`wilson_interval` gives the 95% interval of a success rate (Wilson, 1927, "Probable
inference, the law of succession, and statistical inference", JASA 22), which stays inside
[0, 1] and is sensible at 0 and n successes, unlike the normal approximation.

:func:`success_by_coverage` splits the tasks of a cell by whether their selection held every
gold primitive (set recall 1) and compares the success rates of the two groups with Fisher's
exact test (``scipy.stats.fisher_exact``, two-sided): does a task whose gold set was complete
succeed more often?
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Z_95", "success_by_coverage", "wilson_interval"]

#: The standard normal quantile of 0.975.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n``.

    Parameters
    ----------
    successes : number of successes, 0 <= successes <= n.
    n : number of trials, >= 1.
    z : normal quantile (default: 95% two-sided).

    Returns
    -------
    (low, high), both in [0, 1].

    Raises
    ------
    ValueError : n < 1 or successes outside [0, n].
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def success_by_coverage(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Success of the tasks whose selection covered every gold primitive against the others.

    Parameters
    ----------
    rows : task rows of a cell with a generator (tasks.jsonl): ``status`` and
        ``metrics["set_recall"]`` (the fraction of gold primitives selected; a row without it is
        left out).

    Returns
    -------
    ``{"complete": (tasks, passed), "incomplete": (tasks, passed), "p_fisher": p or None}``:
    ``p_fisher`` is the two-sided p-value of Fisher's exact test on the 2x2 table, None when
    one group is empty.
    """
    from scipy.stats import fisher_exact

    counts = {"complete": [0, 0], "incomplete": [0, 0]}
    for row in rows:
        recall = (row.get("metrics") or {}).get("set_recall")
        if recall is None:  # a row without its selection's recall counts in neither group
            continue
        group = "complete" if float(recall) >= 1.0 else "incomplete"
        counts[group][0] += 1
        counts[group][1] += int(row.get("status") == "pass")
    (nc, sc), (ni, si) = counts["complete"], counts["incomplete"]
    p = None
    if nc and ni:
        p = float(fisher_exact([[sc, nc - sc], [si, ni - si]], alternative="two-sided")[1])
    return {"complete": (nc, sc), "incomplete": (ni, si), "p_fisher": p}
