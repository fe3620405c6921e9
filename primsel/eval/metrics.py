"""Retrieval metrics of a ranking and ASPERA's set metrics of a selection.

Ranking metrics read a :data:`primsel.types.Run` (``{task_id: {primitive_id: score}}``) against
gold sets (a :data:`primsel.types.Qrels` or ``{task_id: iterable of primitive ids}``). Metric names
follow ranx: ``recall@k``, ``precision@k``, ``ndcg@k``, ``mrr`` (or ``mrr@k``), plus
``complete@k`` (1 when every gold primitive is in the first k, else 0; averaged it is the
fraction of tasks whose gold set is fully retrieved). Each base is one :class:`RankingMetric` of
:data:`METRICS` (its value, its tie-aware value, whether k may be left out): a new base is one
entry there, and is then accepted by :func:`parse_metric`, hence by an experiment's
``metrics = [...]``.

Conventions (the same for every function here)
-----------------------------------------------
* Every task of the gold sets is counted. A task missing from the run, or with an empty
  ranking, scores 0 on every ranking metric. Tasks of the run that have no gold entry are ignored.
* A ranking is the run entry sorted by score, descending, ties broken by primitive id
  (ascending, as strings): :func:`primsel.types.ranking`. A run is a dict per task, so a
  primitive appears once.
* Relevance is binary: any primitive id in the gold set with relevance > 0 is relevant.
* Ranking metrics are undefined for an empty gold set: a task with no gold primitive raises
  ``ValueError`` (Asper-Bench tasks have 2 to 18). The set metrics define that case (below).
* Task ids and primitive ids live in separate namespaces; they may coincide.

The values agree with ranx (``ranx.evaluate``) for runs without tied scores; this module does
not call ranx, so evaluating needs no JIT compilation and never mutates its inputs.

Ties
----
Breaking ties by primitive id is deterministic but not neutral: a retriever that gives many
primitives the same score (0 where it has no signal, 1 for every primitive of ``all``) is
scored on whichever of them sort first by name. ranx and trec_eval break ties in yet other
ways, so the same run gets other values there. With ``ties="expected"`` every ranking metric
is instead its *tie-aware* value: the mean of the metric over every order of the tied
primitives (McSherry and Najork, "Computing information retrieval performance measures
efficiently in the presence of tied scores", ECIR 2008), computed exactly in closed form per
group of tied scores (:func:`tie_aware`), so it does not depend on the primitive ids at all.
:func:`tied_tasks` counts the tasks whose ranking has a tie across a cut-off k (the tasks
where the two differ at k).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from primsel.types import check_run, ranking, tie_groups

#: Keys returned by :func:`set_metrics`.
SET_METRIC_KEYS = (
    "set_precision_micro", "set_recall_micro", "set_f1_micro",
    "set_precision_macro", "set_recall_macro", "set_f1_macro",
)
#: How :func:`per_task` orders tied scores: by primitive id, or the expectation over tie orders.
TIE_MODES = ("id", "expected")
#: A metric name: its base, then ``@k`` (whether k may be left out is the base's to say).
_METRIC = re.compile(r"^([a-z][a-z0-9_]*)(?:@(\d+))?$")


@dataclass(frozen=True)
class RankingMetric:
    """The definition of one ranking metric base: everything :func:`parse_metric`,
    :func:`per_task` and :func:`tie_aware` need to know about it.

    Parameters
    ----------
    name : the base, lower case letters, digits and ``_`` (``"recall"``); metric names are
        ``name@k``.
    value : ``value(top, k, gold) -> float``: the metric of one task, tied scores ranked by
        primitive id. ``top`` is the ranking cut at k (the whole ranking when k is None), a
        sequence of distinct primitive ids, best first; ``gold`` the non-empty frozenset of
        gold ids.
    expected : ``expected(groups, k, gold) -> float``: its tie-aware value, the mean over every
        order of the tied primitives. ``groups`` is the whole ranking cut into groups of equal
        score, best first (:func:`primsel.types.tie_groups`); equal to ``value`` when no group
        crosses the ranks that matter.
    k_optional : whether the bare ``name`` (k None, the whole ranking) is a metric too; else
        ``name@k`` is required and ``value`` and ``expected`` always get an integer k >= 1.

    Raises
    ------
    ValueError : a name that is not lower case letters, digits and ``_``, starting with a letter.
    """

    name: str
    value: Callable[[Sequence[str], int | None, frozenset[str]], float]
    expected: Callable[[Sequence[Sequence[str]], int | None, frozenset[str]], float]
    k_optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"a metric base is lower case letters, digits and _, got {self.name!r}")


def _hits(top: Sequence[str], gold: frozenset[str]) -> int:
    return sum(1 for p in top if p in gold)


def _ideal_dcg(k: int, gold: frozenset[str]) -> float:
    return sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), k) + 1))


def _cut(k: int | None) -> float:
    return math.inf if k is None else k


def _reciprocal_rank(top: Sequence[str], k: int | None, gold: frozenset[str]) -> float:
    for i, p in enumerate(top, start=1):
        if p in gold:
            return 1.0 / i
    return 0.0


def _ndcg(top: Sequence[str], k: int | None, gold: frozenset[str]) -> float:
    dcg = sum(1.0 / math.log2(i + 1) for i, p in enumerate(top, start=1) if p in gold)
    return dcg / _ideal_dcg(k, gold)  # type: ignore[arg-type]


def _expected_gains(groups: Sequence[Sequence[str]], k: int | None, gold: frozenset[str],
                    per_rank: bool) -> list[float]:
    """(probability a rank holds gold) x (gain of the rank), over the ranks within the cut-off:
    one term per rank with the DCG gain (``per_rank``), else one term per group, gain 1 a rank.

    For a group of ``n`` primitives of which ``r`` are gold, occupying ranks ``s + 1 .. s + n``,
    every one of those ranks holds a gold primitive with probability ``r / n``.
    """
    cut = _cut(k)
    gains = []
    start = found = 0
    for group in groups:
        if start >= cut or found == len(gold):
            break  # past the cut-off, or no gold primitive left below
        n, r = len(group), len(gold.intersection(group))
        if r:
            last = int(min(start + n, cut))
            if per_rank:
                gains.extend(r / n / math.log2(i + 1) for i in range(start + 1, last + 1))
            else:
                gains.append(r / n * (last - start))
            found += r
        start += n
    return gains


def _expected_reciprocal_rank(groups: Sequence[Sequence[str]], k: int | None, gold: frozenset[str]) -> float:
    # only the first group holding gold counts: the first gold primitive is at rank s + j with
    # probability C(n - j, r - 1) / C(n, r), j = 1 .. n - r + 1 (0 below the cut-off)
    cut, start = _cut(k), 0
    for group in groups:
        n, r = len(group), len(gold.intersection(group))
        if r:
            total = math.comb(n, r)
            return math.fsum(math.comb(n - j, r - 1) / total / (start + j)
                             for j in range(1, n - r + 2) if start + j <= cut)
        start += n
    return 0.0


def _expected_complete(groups: Sequence[Sequence[str]], k: int | None, gold: frozenset[str]) -> float:
    # 0 when a gold primitive is unranked or in a group starting at or below k, else
    # C(m, r) / C(n, r) for the group crossing the cut-off with m = k - s of its ranks inside
    cut, value, start, found = _cut(k), 1.0, 0, 0
    for group in groups:
        if found == len(gold):
            break  # the groups below hold no gold primitive
        n, r = len(group), len(gold.intersection(group))
        if r:
            value *= math.comb(int(max(0, min(n, cut - start))), r) / math.comb(n, r)
            found += r
        start += n
    return value if found == len(gold) else 0.0  # 0: a gold primitive is not ranked at all


#: The ranking metric bases, by name: a new base is one entry here.
METRICS: dict[str, RankingMetric] = {m.name: m for m in (
    RankingMetric("recall", value=lambda top, k, gold: _hits(top, gold) / len(gold),
                  expected=lambda groups, k, gold: math.fsum(_expected_gains(groups, k, gold, False)) / len(gold)),
    RankingMetric("precision", value=lambda top, k, gold: _hits(top, gold) / k,  # type: ignore[operator]
                  expected=lambda groups, k, gold: math.fsum(_expected_gains(groups, k, gold, False)) / k),
    RankingMetric("ndcg", value=_ndcg,
                  expected=lambda groups, k, gold: math.fsum(_expected_gains(groups, k, gold, True))
                  / _ideal_dcg(k, gold)),  # type: ignore[arg-type]
    RankingMetric("mrr", value=_reciprocal_rank, expected=_expected_reciprocal_rank, k_optional=True),
    RankingMetric("complete", value=lambda top, k, gold: 1.0 if gold.issubset(top) else 0.0,
                  expected=_expected_complete),
)}
#: The names of the ranking metric bases defined in :data:`METRICS`.
RANKING_METRICS = tuple(METRICS)


def parse_metric(name: str) -> tuple[str, int | None]:
    """Split a metric name into (base, cut-off).

    Parameters
    ----------
    name : a base of :data:`METRICS` and its cut-off: ``"recall@10"``, ``"precision@5"``,
        ``"ndcg@10"``, ``"mrr"``, ``"mrr@10"``, ``"complete@20"``; case and surrounding
        spaces are ignored.

    Returns
    -------
    (base name, k or None); only a base with ``k_optional`` (``mrr``) may omit k.

    Raises
    ------
    ValueError : unknown metric, missing cut-off, or k < 1.
    """
    m = _METRIC.match(name.strip().lower())
    if m is None or m.group(1) not in METRICS:
        known = ", ".join(b + "@k" for b in METRICS) + "".join(
            f" or {b!r}" for b, metric in METRICS.items() if metric.k_optional)
        raise ValueError(f"unknown metric {name!r}; expected one of {known}")
    base, k = m.group(1), m.group(2)
    if k is None:
        if not METRICS[base].k_optional:
            raise ValueError(f"metric {name!r} needs a cut-off, e.g. {base}@10")
        return base, None
    if int(k) < 1:
        raise ValueError(f"metric {name!r}: cut-off must be >= 1")
    return base, int(k)


def gold_sets(qrels: Mapping[str, Mapping[str, float] | Iterable[str]]) -> dict[str, frozenset[str]]:
    """Normalise qrels (``{task: {id: rel}}``) or gold sets (``{task: ids}``) to ``{task: frozenset}``.

    In a qrels mapping only ids with relevance > 0 are gold.
    """
    out: dict[str, frozenset[str]] = {}
    for task_id, gold in qrels.items():
        if isinstance(gold, Mapping):
            out[str(task_id)] = frozenset(str(p) for p, rel in gold.items() if rel > 0)
        elif isinstance(gold, str):
            raise TypeError(f"gold of task {task_id!r} is a string; give a set of primitive ids")
        else:
            out[str(task_id)] = frozenset(str(p) for p in gold)
    return out


def to_qrels(gold: Mapping[str, Iterable[str]]) -> dict[str, dict[str, int]]:
    """``{task: {primitive_id: 1}}`` from ``{task: gold ids}`` (the ranx / TREC qrels shape)."""
    return {str(t): {str(p): 1 for p in sorted(ids)} for t, ids in gold.items()}


def _dedupe(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _value(base: str, k: int | None, ranked: Sequence[str], gold: frozenset[str]) -> float:
    return METRICS[base].value(ranked if k is None else ranked[:k], k, gold)


def tie_aware(base: str, k: int | None, groups: Sequence[Sequence[str]], gold: frozenset[str]) -> float:
    """Expected value of a ranking metric over every order of the tied primitives.

    McSherry and Najork (ECIR 2008): each order of each group of tied scores is equally likely,
    independently of the other groups. For a group of ``n`` primitives of which ``r`` are gold,
    occupying ranks ``s + 1 .. s + n``, every one of those ranks holds a gold primitive with
    probability ``r / n``; so

    * recall@k, precision@k and DCG@k (hence nDCG@k, the ideal DCG not depending on the order)
      add ``r / n`` times the gain of each rank of the group within the cut-off;
    * complete@k is 0 when a gold primitive is unranked or in a group starting at or below k,
      else ``C(m, r) / C(n, r)`` for the group crossing the cut-off with ``m = k - s`` of its
      ranks inside (1 when no group crosses it);
    * the reciprocal rank depends on the first group holding gold only: the first gold
      primitive is at rank ``s + j`` with probability ``C(n - j, r - 1) / C(n, r)``,
      ``j = 1 .. n - r + 1`` (and contributes 0 below the cut-off of ``mrr@k``).

    Each base computes its own (``RankingMetric.expected`` of :data:`METRICS`).

    Parameters
    ----------
    base : a base of :data:`METRICS`: ``"recall"``, ``"precision"``, ``"ndcg"``, ``"mrr"``,
        ``"complete"``.
    k : cut-off (>= 1), or None for ``mrr`` over the whole ranking.
    groups : the ranking cut into groups of equal score, best first (:func:`primsel.types.tie_groups`).
    gold : the gold primitive ids, non-empty.

    Returns
    -------
    float in [0, 1]; equal to the id-order value when no group crosses the ranks that matter.

    Raises
    ------
    ValueError : an unknown base.
    """
    if base not in METRICS:
        raise ValueError(f"unknown metric {base!r}")
    return METRICS[base].expected(groups, k, gold)


def per_task(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, float] | Iterable[str]],
    metrics: Sequence[str],
    *,
    ties: str = "id",
) -> dict[str, dict[str, float]]:
    """Metric values of every task of ``qrels``.

    Parameters
    ----------
    run : ``{task_id: {primitive_id: score}}`` with string ids.
    qrels : ``{task_id: {primitive_id: relevance}}`` or ``{task_id: gold ids}``.
    metrics : metric names (see :func:`parse_metric`).
    ties : ``"id"``: tied scores ranked by primitive id (:func:`primsel.types.ranking`);
        ``"expected"``: the tie-aware value, the mean over every order of the tied primitives
        (:func:`tie_aware`).

    Returns
    -------
    ``{task_id: {metric name: value}}`` for every task of ``qrels``, in its order; the metric
    names are returned as given.

    Raises
    ------
    ValueError : unknown metric or tie mode, or a task with an empty gold set.
    TypeError : a run whose ids are not strings (:func:`primsel.types.check_run`).
    """
    if ties not in TIE_MODES:
        raise ValueError(f"ties must be one of {', '.join(TIE_MODES)}, got {ties!r}")
    check_run(run)
    parsed = [(name, *parse_metric(name)) for name in metrics]
    gold = gold_sets(qrels)
    empty = [t for t, g in gold.items() if not g]
    if empty:
        raise ValueError(
            f"ranking metrics are undefined for tasks without gold primitives: {empty[:10]} (tasks "
            "read by primsel.datasets.load_tasks have none yet: primsel.api.load_tasks fills them, "
            "as primsel.library.with_gold does)"
        )
    out: dict[str, dict[str, float]] = {}
    for task_id, g in gold.items():
        if ties == "id":
            ranked = ranking(run.get(task_id))
            out[task_id] = {name: _value(base, k, ranked, g) for name, base, k in parsed}
        else:
            groups = tie_groups(run.get(task_id))
            out[task_id] = {name: tie_aware(base, k, groups, g) for name, base, k in parsed}
    return out


def tied_tasks(run: Mapping[str, Mapping[str, float]], tasks: Iterable[str], k: int) -> int:
    """The number of ``tasks`` whose ranking has a tie across the cut-off ``k``: the primitives
    at ranks k and k + 1 have equal scores, so which of them the first k hold is decided by
    primitive id, not by the retriever.

    Parameters
    ----------
    run : ``{task_id: {primitive_id: score}}``.
    tasks : the task ids to count over (a task missing from the run has no tie).
    k : cut-off, >= 1.

    Raises
    ------
    ValueError : k < 1.
    TypeError : a run whose ids are not strings.
    """
    return tied_tasks_at(run, tasks, (k,))[k]


def tied_tasks_at(run: Mapping[str, Mapping[str, float]], tasks: Iterable[str], ks: Iterable[int]) -> dict[int, int]:
    """:func:`tied_tasks` at several cut-offs, each ranking cut into tie groups once.

    Returns
    -------
    ``{k: number of tasks with a tie across k}``, in the order of ``ks``.

    Raises
    ------
    ValueError : a k that is not an integer >= 1.
    TypeError : a run whose ids are not strings.
    """
    ks = list(dict.fromkeys(ks))
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
    check_run(run)
    counts = dict.fromkeys(ks, 0)
    deepest = max(ks, default=0)
    for task_id in tasks:
        start = 0
        for group in tie_groups(run.get(task_id)):
            for k in ks:
                counts[k] += start < k < start + len(group)
            start += len(group)
            if start >= deepest:
                break
    return counts


def evaluate(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, float] | Iterable[str]],
    metrics: Sequence[str],
    *,
    ties: str = "id",
) -> dict[str, float]:
    """Mean of each metric over every task of ``qrels`` (see :func:`per_task`, also for ``ties``).

    Returns
    -------
    ``{metric name: mean value}``; 0.0 for every metric when ``qrels`` is empty.

    Raises
    ------
    ValueError : unknown metric or tie mode, or a task with an empty gold set.
    TypeError : a run whose ids are not strings.
    """
    rows = per_task(run, qrels, metrics, ties=ties)
    n = len(rows)
    return {name: (sum(r[name] for r in rows.values()) / n if n else 0.0) for name in metrics}


def set_scores(selected: Iterable[str], gold: Iterable[str]) -> dict[str, float]:
    """ASPERA's precision, recall and F1 of one task's selection (Asper-Bench PS metric).

    Duplicates in ``selected`` count once. Edge cases: both empty -> 1, 1, 1; gold empty and
    selection non-empty -> precision 0, recall 1, F1 0; selection empty and gold non-empty ->
    0, 0, 0. F1 is 0 when precision + recall is 0.

    Returns
    -------
    ``{"precision", "recall", "f1", "tp", "n_selected", "n_gold"}``.
    """
    sel, g = set(_dedupe(selected)), set(gold)
    tp = len(sel & g)
    if not sel and not g:
        p = r = f1 = 1.0
    elif not g:
        p, r = 0.0, 1.0
        f1 = 0.0
    elif not sel:
        p = r = f1 = 0.0
    else:
        p, r = tp / len(sel), tp / len(g)
        f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return {"precision": p, "recall": r, "f1": f1, "tp": float(tp),
            "n_selected": float(len(sel)), "n_gold": float(len(g))}


def set_metrics_per_task(
    selections: Mapping[str, Sequence[str]],
    gold: Mapping[str, Mapping[str, float] | Iterable[str]],
) -> dict[str, dict[str, float]]:
    """:func:`set_scores` of every task of ``gold`` (a task missing from ``selections`` selected nothing)."""
    g = gold_sets(gold)
    return {t: set_scores(selections.get(t, ()), ids) for t, ids in g.items()}


def set_metrics(
    selections: Mapping[str, Sequence[str]],
    gold: Mapping[str, Mapping[str, float] | Iterable[str]],
) -> dict[str, float]:
    """ASPERA's set precision, recall and F1 of selections, micro and macro averaged.

    Parameters
    ----------
    selections : ``{task_id: selected primitive ids}``; duplicates count once; a task of
        ``gold`` missing here selected nothing.
    gold : ``{task_id: gold ids}`` or qrels. Every task of ``gold`` is counted.

    Returns
    -------
    ``{key: value}`` with the keys of :data:`SET_METRIC_KEYS`.

    * macro: the mean over tasks of the per-task precision, recall and F1 of
      :func:`set_scores` (F1 is the mean of per-task F1, as ASPERA computes it);
    * micro: precision = sum of true positives / sum of selection sizes, recall = sum of true
      positives / sum of gold sizes, F1 their harmonic mean; with no selected id at all
      precision is 0 (1 if there is no gold id either), with no gold id at all recall is 1.

    All values are 0.0 (micro and macro) when ``gold`` is empty.
    """
    rows = set_metrics_per_task(selections, gold)
    n = len(rows)
    if n == 0:
        return dict.fromkeys(SET_METRIC_KEYS, 0.0)
    tp = sum(r["tp"] for r in rows.values())
    n_sel = sum(r["n_selected"] for r in rows.values())
    n_gold = sum(r["n_gold"] for r in rows.values())
    if n_sel == 0 and n_gold == 0:
        p = r = 1.0
    else:
        p = tp / n_sel if n_sel else 0.0
        r = tp / n_gold if n_gold else 1.0
    return {
        "set_precision_micro": p,
        "set_recall_micro": r,
        "set_f1_micro": 2 * p * r / (p + r) if p + r > 0 else 0.0,
        "set_precision_macro": sum(x["precision"] for x in rows.values()) / n,
        "set_recall_macro": sum(x["recall"] for x in rows.values()) / n,
        "set_f1_macro": sum(x["f1"] for x in rows.values()) / n,
    }
