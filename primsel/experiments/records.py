"""A cell's ``report.json`` as a typed record, and the names of every metric it holds.

:class:`CellReport` is composed of one small frozen record per stage of a cell:

==================  ==========================================================================
record              report.json keys
==================  ==========================================================================
:class:`Ranking`    every ranking metric (``recall@k``, ``complete@k``, ``ndcg@10``, ``mrr``, and
                    the ``metrics`` a cell asks for), its tie-aware value ``tie_aware_<metric>``,
                    and ``tied_tasks@k``
:class:`SelectionFigures`  ``n_tasks``, ``selected``, ``closure_added``, ``docs_tokens`` and the set
                    metrics of the selection (``set_<precision|recall|f1>_<micro|macro>``)
:class:`SelectorUsage`  with an LLM selector: ``selector_<usage>`` and ``selector_cache_hits``
:class:`Generation` with a generator: ``success``, ``status_<status>``, ``failures_<category>``,
                    ``generator_<usage>`` and ``cache_hits``
:class:`Round`      with reflection rounds, one per round: ``success@r``, ``calls@r``, ...
:class:`Aspera`     with a generator: ``extraction`` and ASPERA's figures
:class:`RunFacts`   ``retrieval_seconds``, ``retrieval_cached``, ``llm_answers``,
                    ``llm_answers_cached``, ``incomplete_tasks``, ``complete``, ``seconds``
:class:`Learning`   ``learns``: which of the cell's components learn from tasks
:class:`FrontierFigures`  ``frontier``: mean tokens and mean recall of the top k, k = 1 .. depth
==================  ==========================================================================

plus ``retrieval_key`` (:func:`retrieval_key`). :meth:`CellReport.to_json` is the one writer of
report.json and :meth:`CellReport.from_json` its one reader: ``from_json(x).to_json() == x`` for
every report.json, keys it does not know included (kept in :attr:`CellReport.extra`). Files
written before ``learns``, ``frontier`` and ``retrieval_key`` existed read with those None.

The names of the metrics every cell reports and the fixed tables show live here only
(:data:`BASE_METRICS`, :data:`TABLE_COLUMNS`, ...): the cell, the report, the explorer and the
commands import them. What a ranking metric is (its value, its tie-aware value) is defined in
:data:`primsel.eval.metrics.METRICS`; a metric a cell's ``metrics`` asks for is recorded and
shown in the report's full table without being named here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from primsel.files import digest
from primsel.types import STATUSES

__all__ = [
    "ASPERA_FIGURES", "BASE_METRICS", "CURVE_KS", "EXPLORER_COLUMNS", "LEADER_COLUMNS", "RANKED_COLUMNS",
    "RANKING_METRICS", "REPORT_KS", "ROUND_FIGURES", "SELECTOR_USAGE", "SET_METRICS", "SUMMARY_COLUMNS",
    "SUMMARY_METRICS", "TABLE_COLUMNS", "TASK_METRICS", "TASK_STATUSES", "TIE_AWARE", "Aspera", "CellReport",
    "FrontierFigures", "Generation", "Learning", "Ranking", "Round", "RunFacts", "SelectionFigures",
    "SelectorUsage", "retrieval_key",
]

# ---------------------------------------------------------------------------------------------
# The metric names
# ---------------------------------------------------------------------------------------------
#: Cut-offs of the recall@k curve every cell reports.
CURVE_KS = tuple(range(1, 21))
#: Cut-offs of complete@k, of the per-task metrics kept in tasks.jsonl and of the table of ties.
REPORT_KS = (5, 10, 15, 20)
#: Ranking metrics every cell reports (plus ``recall@k`` and ``complete@k`` of the cell's k).
BASE_METRICS = (
    *(f"recall@{k}" for k in CURVE_KS),
    *(f"complete@{k}" for k in REPORT_KS),
    "ndcg@10",
    "mrr",
)
#: Per-task ranking metrics kept in tasks.jsonl (the cell's ``recall@k`` / ``complete@k`` too).
TASK_METRICS = (*(f"recall@{k}" for k in REPORT_KS), *(f"complete@{k}" for k in REPORT_KS), "ndcg@10", "mrr")
#: Ranking metrics ``primsel retrieve`` prints.
RANKING_METRICS = ("recall@5", "recall@10", "recall@15", "recall@20", "ndcg@10", "mrr",
                   "complete@10", "complete@15", "complete@20")
#: Prefix of the tie-aware value of a ranking metric in report.json (``tie_aware_recall@10``);
#: ``tied_tasks@k`` counts the tasks with a tie across the cut-off k.
TIE_AWARE = "tie_aware_"
#: Set metrics of a selection (:data:`primsel.eval.metrics.SET_METRIC_KEYS`).
SET_METRICS = ("set_precision_micro", "set_recall_micro", "set_f1_micro",
               "set_precision_macro", "set_recall_macro", "set_f1_macro")
#: Statuses of a task in a cell with a generator: the execution statuses
#: (:data:`primsel.types.STATUSES`), then those of a program that was not executed.
TASK_STATUSES = tuple(dict.fromkeys((*STATUSES, "truncated", "llm_error")))
#: Selector usage entries summed into report.json as ``selector_<name>`` (``cached`` as
#: ``selector_cache_hits``).
SELECTOR_USAGE = ("prompt_tokens", "completion_tokens", "seconds", "calls", "errors", "unknown_names", "cached")
#: ASPERA's figures of a generator run (:func:`primsel.eval.aspera.aspera_figures`).
ASPERA_FIGURES = (
    "score", "parse_failures", "parser_failure_rate", "solution_error_rate", "handback_control_error_rate",
    "handback_control_error_rate_normalise", "execution_error_count", "bad_import_error_rate",
    "import_lenient_score", "primitives_selection_macro_f1", "primitives_selection_micro_f1",
    "primitives_selection_micro_precision", "primitives_selection_micro_recall",
)
#: Figures of a reflection round r, written ``<figure>@r`` (:func:`primsel.experiments.reflection.round_figures`).
ROUND_FIGURES = ("success", "calls", "cache_hits", "requests", "prompt_tokens", "completion_tokens",
                 "cumulative_tokens", "selection_recall")
#: The report's table of cells: (metric, header).
TABLE_COLUMNS = (
    ("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@15", "R@15"), ("recall@20", "R@20"),
    ("complete@10", "C@10"), ("complete@15", "C@15"), ("complete@20", "C@20"),
    ("ndcg@10", "nDCG@10"), ("mrr", "MRR"),
    ("set_precision_micro", "P mi"), ("set_recall_micro", "R mi"), ("set_f1_micro", "F1 mi"),
    ("set_precision_macro", "P ma"), ("set_recall_macro", "R ma"), ("set_f1_macro", "F1 ma"),
    ("docs_tokens", "tokens"),
)
#: The ranking metrics of :data:`TABLE_COLUMNS` (those of :data:`RANKING_METRICS`), shown in
#: primitive-id order and tie-aware.
RANKED_COLUMNS = tuple(column for column in TABLE_COLUMNS if column[0] in RANKING_METRICS)
#: Metrics of the summary tables of an experiment on several datasets: (metric, header).
SUMMARY_METRICS = (("recall@5", "recall@5"), ("ndcg@10", "nDCG@10"), ("complete@5", "complete@5"))
#: Columns of the summary ``primsel run`` prints: (metric, header).
SUMMARY_COLUMNS = (("recall@10", "R@10"), ("recall@15", "R@15"), ("complete@20", "C@20"), ("mrr", "MRR"),
                   ("set_f1_macro", "F1 ma"), ("docs_tokens", "tokens"))
#: Metrics of the leaderboard besides recall@15: (metric, header, decimals).
LEADER_COLUMNS = (("complete@20", "C@20", 3), ("ndcg@10", "nDCG@10", 3), ("set_recall_macro", "R sel", 3),
                  ("docs_tokens", "tokens", 1))
#: Metrics of the explorer's table of cells: (metric, header).
EXPLORER_COLUMNS = (
    ("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@15", "R@15"), ("recall@20", "R@20"),
    ("complete@10", "C@10"), ("complete@20", "C@20"), ("ndcg@10", "nDCG@10"), ("mrr", "MRR"),
    ("set_f1_macro", "set F1"), ("docs_tokens", "doc tokens"), ("success", "success"),
)

#: A ranking metric's name without a tie-aware partner (files written before tie-aware values).
_RANKING_NAME = re.compile(r"(recall|complete|ndcg|precision|map|mrr|hit_rate|r_precision)@\d+|mrr|map")
_ROUND_KEY = re.compile(r"(" + "|".join(ROUND_FIGURES) + r")@(\d+)")


def retrieval_key(dataset: str | None, retriever: Any, folds: int, seed: int, depth: int | None) -> str:
    """The one name of a retrieval: cells with the same key rank every task the same way.

    Parameters
    ----------
    dataset : the dataset's fingerprint.
    retriever : the retriever's specification (a name or a table).
    folds, seed : of the cross-validation.
    depth : how deep the ranking is kept (None: the whole library).

    Returns
    -------
    A sha256 hex digest of those five values (:func:`primsel.files.digest`).
    """
    return digest([dataset, retriever, folds, seed, depth])


# ---------------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Ranking:
    """The ranking metrics of a cell's retrieval, means over tasks.

    Parameters
    ----------
    values : metric name (``recall@10``, ``ndcg@10``, ``mrr``, ...) -> mean, tied scores in
        primitive-id order.
    tie_aware : metric name -> mean over every order of tied scores (absent in files written
        before tie-aware values existed).
    tied_tasks : cut-off k -> number of tasks whose ranking has a tie across rank k.
    """

    values: Mapping[str, float] = field(default_factory=dict)
    tie_aware: Mapping[str, float] = field(default_factory=dict)
    tied_tasks: Mapping[int, float] = field(default_factory=dict)

    def recall(self, k: int) -> float | None:
        """Mean recall@k, or None when the cell did not report it."""
        return self.values.get(f"recall@{k}")

    def recall_ks(self) -> list[int]:
        """The cut-offs k of every ``recall@k`` reported, ascending."""
        return sorted(int(name[7:]) for name in self.values if name.startswith("recall@") and name[7:].isdigit())

    def tied(self, k: Any) -> float | None:
        """Tasks with a tie across rank k (None when not counted at that k)."""
        return self.tied_tasks.get(k) if isinstance(k, int) else None

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record."""
        return {**self.values, **{TIE_AWARE + name: v for name, v in self.tie_aware.items()},
                **{f"tied_tasks@{k}": v for k, v in self.tied_tasks.items()}}


@dataclass(frozen=True)
class SelectionFigures:
    """What the cell selected: means over tasks (``n_tasks`` excepted).

    Parameters
    ----------
    n_tasks : the number of tasks scored.
    selected : mean primitives selected per task.
    closure_added : mean primitives added by the type closure per task.
    docs_tokens : mean documentation tokens of the selection per task (characters / 4).
    scores : set metric (:data:`SET_METRICS`) -> value.
    """

    n_tasks: int | None = None
    selected: float | None = None
    closure_added: float | None = None
    docs_tokens: float | None = None
    scores: Mapping[str, float] = field(default_factory=dict)

    KEYS = ("n_tasks", "selected", "closure_added", "docs_tokens")

    @property
    def recall_macro(self) -> float | None:
        """Mean over tasks of the share of gold primitives selected."""
        return self.scores.get("set_recall_macro")

    @property
    def f1_macro(self) -> float | None:
        """Mean over tasks of the selection's F1."""
        return self.scores.get("set_f1_macro")

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record (those it holds)."""
        own = {key: getattr(self, key) for key in self.KEYS if getattr(self, key) is not None}
        return {**own, **self.scores}


@dataclass(frozen=True)
class SelectorUsage:
    """The LLM cost of the ranking the cell selects from, summed over tasks (an LLM selector).

    Parameters
    ----------
    values : usage name (:data:`SELECTOR_USAGE`: tokens, seconds, calls, errors, unknown names,
        ``cached``: answers from the cache) -> total.
    """

    values: Mapping[str, float] = field(default_factory=dict)

    @staticmethod
    def key(name: str) -> str:
        """The report.json key of a usage name (``calls`` -> ``selector_calls``)."""
        return "selector_cache_hits" if name == "cached" else f"selector_{name}"

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record."""
        return {self.key(name): v for name, v in self.values.items()}


@dataclass(frozen=True)
class Generation:
    """Task success of a cell with a generator.

    Parameters
    ----------
    success : fraction of tasks whose program passed.
    status : status (:data:`TASK_STATUSES`) -> fraction of tasks.
    failures : failure category -> number of tasks.
    usage : the generators' usage summed (``calls``, ``prompt_tokens``, ...; written
        ``generator_<name>``).
    cache_hits : answers from the answer cache (None when the generator does not count them).
    """

    success: float
    status: Mapping[str, float] = field(default_factory=dict)
    failures: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[str, float] = field(default_factory=dict)
    cache_hits: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record."""
        return {"success": self.success, **{f"status_{k}": v for k, v in self.status.items()},
                **{f"failures_{k}": v for k, v in self.failures.items()},
                **{f"generator_{k}": v for k, v in self.usage.items()},
                **({} if self.cache_hits is None else {"cache_hits": self.cache_hits})}


@dataclass(frozen=True)
class Round:
    """The figures of one reflection round r (:mod:`primsel.experiments.reflection`).

    Parameters
    ----------
    success : fraction of tasks passed by round r.
    calls : generation requests of the round (cache hits included).
    cache_hits : of those, answered from the cache.
    requests : HTTP requests the generator sent in the round (retries included).
    prompt_tokens, completion_tokens : of the round.
    cumulative_tokens : prompt + completion tokens of rounds 1..r (and of re-selection).
    selection_recall : with ``reselect``, mean set recall of the round's selection; else None.
    """

    success: float | None = None
    calls: float | None = None
    cache_hits: float | None = None
    requests: float | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    cumulative_tokens: float | None = None
    selection_recall: float | None = None

    def to_json(self, r: int) -> dict[str, Any]:
        """The report.json keys of round ``r`` (``success@r``, ...), those it holds."""
        return {f"{name}@{r}": getattr(self, name) for name in ROUND_FIGURES if getattr(self, name) is not None}


@dataclass(frozen=True)
class Aspera:
    """The generator's extraction mode and ASPERA's figures (:mod:`primsel.eval.aspera`).

    Parameters
    ----------
    extraction : how programs were taken from the answers (None: the generator's own way).
    figures : figure name (:data:`ASPERA_FIGURES`) -> value (None when undefined).
    """

    extraction: str | None = None
    figures: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        """ASPERA's score (100 x passed / evaluated, minus refused / all)."""
        return self.figures.get("score")

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record."""
        return {"extraction": self.extraction, **self.figures}


@dataclass(frozen=True)
class RunFacts:
    """How the cell ran: its cost in time and LLM answers, and whether it is complete.

    Parameters
    ----------
    retrieval_seconds : wall time of the retrieval (s).
    retrieval_cached : 1.0 when the ranking came from the retrieval cache.
    llm_answers, llm_answers_cached : LLM answers the results rest on, and of those from a
        cache (None when the cell used no LLM).
    incomplete_tasks : tasks whose LLM request failed after its retries.
    complete : False when there is such a task (the next run recomputes the cell).
    seconds : the cell's wall time (s).
    """

    retrieval_seconds: float | None = None
    retrieval_cached: float | None = None
    llm_answers: float | None = None
    llm_answers_cached: float | None = None
    incomplete_tasks: float | None = None
    complete: bool | None = None
    seconds: float | None = None

    KEYS = ("retrieval_seconds", "retrieval_cached", "llm_answers", "llm_answers_cached", "incomplete_tasks",
            "complete", "seconds")

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record (those it holds)."""
        return {key: getattr(self, key) for key in self.KEYS if getattr(self, key) is not None}


@dataclass(frozen=True)
class Learning:
    """Which of the cell's components learn from tasks (fitted per fold on the other folds).

    Parameters
    ----------
    retriever : the retriever learns (:class:`primsel.types.LearnsFromTasks`).
    selector : the selector learns (False without a selector).
    generator : the generator is fitted on tasks (:class:`primsel.types.FitsOnTasks`; False
        without a generator).
    """

    retriever: bool
    selector: bool = False
    generator: bool = False

    def to_json(self) -> dict[str, bool]:
        """``{"retriever": ..., "selector": ..., "generator": ...}``."""
        return {"retriever": self.retriever, "selector": self.selector, "generator": self.generator}


@dataclass(frozen=True)
class FrontierFigures:
    """The recall/tokens frontier of the cell's ranking: for k = 1 .. depth, the mean
    documentation tokens of the top k and the mean recall of the top k over the tasks with gold
    primitives.

    Parameters
    ----------
    tokens : mean tokens per k, length depth.
    recall : mean recall per k, length depth.

    Raises
    ------
    ValueError : the two sequences differ in length.
    """

    tokens: tuple[float, ...]
    recall: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.recall):
            raise ValueError(f"frontier: {len(self.tokens)} token values but {len(self.recall)} recall values")

    def to_json(self) -> dict[str, list[float]]:
        """``{"tokens": [...], "recall": [...]}``."""
        return {"tokens": list(self.tokens), "recall": list(self.recall)}


@dataclass(frozen=True)
class CellReport:
    """A cell's report.json, one record per stage (see the module docstring).

    Parameters
    ----------
    ranking, selection : always present (empty in an empty report).
    selector_usage : with an LLM selector, else None.
    generation, aspera : with a generator, else None.
    rounds : with reflection rounds, one :class:`Round` per round (round 1 first), else empty.
    run : time, LLM answers, completeness.
    learning : which components learn from tasks (None in files written before it was recorded).
    frontier : the recall/tokens frontier (None in older files, or when not computed).
    retrieval_key : :func:`retrieval_key` of the cell's retrieval (None in older files).
    extra : the keys of the file no record knows, kept as read.
    """

    ranking: Ranking = field(default_factory=Ranking)
    selection: SelectionFigures = field(default_factory=SelectionFigures)
    selector_usage: SelectorUsage | None = None
    generation: Generation | None = None
    rounds: tuple[Round, ...] = ()
    aspera: Aspera | None = None
    run: RunFacts = field(default_factory=RunFacts)
    learning: Learning | None = None
    frontier: FrontierFigures | None = None
    retrieval_key: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """True when the record holds anything (a cell without report.json reads as empty)."""
        return bool(self.to_json())

    @property
    def complete(self) -> bool:
        """False only when the file says ``"complete": false``."""
        return self.run.complete is not False

    @property
    def success(self) -> float | None:
        """Task success, or None without a generator."""
        return None if self.generation is None else self.generation.success

    @property
    def docs_tokens(self) -> float | None:
        """Mean documentation tokens of the selection per task."""
        return self.selection.docs_tokens

    def metric(self, name: str) -> float | None:
        """The value of a metric of the tables (:data:`TABLE_COLUMNS`, :data:`EXPLORER_COLUMNS`,
        a ranking metric, a set metric, ``docs_tokens``, ``success``, an ASPERA figure, or a
        key of :attr:`extra`), or None when the cell does not have it."""
        if name in self.ranking.values:
            return self.ranking.values[name]
        if name in self.selection.scores:
            return self.selection.scores[name]
        if name in SelectionFigures.KEYS:
            return getattr(self.selection, name)
        if name == "success":
            return self.success
        if self.aspera is not None and name in self.aspera.figures:
            return self.aspera.figures[name]
        return self.extra.get(name)

    def to_json(self) -> dict[str, Any]:
        """report.json: every record's keys (see the module docstring), then :attr:`extra`."""
        out: dict[str, Any] = {**self.ranking.to_json(), **self.selection.to_json()}
        if self.selector_usage is not None:
            out.update(self.selector_usage.to_json())
        if self.generation is not None:
            out.update(self.generation.to_json())
        for r, figures in enumerate(self.rounds, start=1):
            out.update(figures.to_json(r))
        if self.aspera is not None:
            out.update(self.aspera.to_json())
        out.update(self.run.to_json())
        if self.learning is not None:
            out["learns"] = self.learning.to_json()
        if self.frontier is not None:
            out["frontier"] = self.frontier.to_json()
        if self.retrieval_key is not None:
            out["retrieval_key"] = self.retrieval_key
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CellReport:
        """Read a report.json (any written so far; None or empty: an empty record).

        Raises
        ------
        ValueError : ``learns`` or ``frontier`` of the wrong shape.
        """
        rest = dict(data or {})
        return cls(ranking=_ranking(rest), selection=_selection(rest), selector_usage=_selector_usage(rest),
                   generation=_generation(rest), rounds=_rounds(rest), aspera=_aspera(rest), run=_run(rest),
                   learning=_learning(rest.pop("learns", None)), frontier=_frontier(rest.pop("frontier", None)),
                   retrieval_key=rest.pop("retrieval_key", None), extra=rest)


# ---------------------------------------------------------------------------------------------
# Reading: each function takes its keys out of ``rest``
# ---------------------------------------------------------------------------------------------
def _ranking(rest: dict[str, Any]) -> Ranking:
    names = [key for key in rest if (TIE_AWARE + key) in rest or _RANKING_NAME.fullmatch(key)]
    values = {name: rest.pop(name) for name in names}
    tie_aware = {key[len(TIE_AWARE):]: rest.pop(key) for key in [k for k in rest if k.startswith(TIE_AWARE)]}
    tied = {}
    for key in [k for k in rest if k.startswith("tied_tasks@") and k[11:].isdigit()]:
        tied[int(key[11:])] = rest.pop(key)
    return Ranking(values=values, tie_aware=tie_aware, tied_tasks=tied)


def _selection(rest: dict[str, Any]) -> SelectionFigures:
    own = {key: rest.pop(key) for key in SelectionFigures.KEYS if key in rest}
    scores = {key: rest.pop(key) for key in SET_METRICS if key in rest}
    return SelectionFigures(**own, scores=scores)


def _selector_usage(rest: dict[str, Any]) -> SelectorUsage | None:
    found = {name: rest.pop(SelectorUsage.key(name)) for name in SELECTOR_USAGE if SelectorUsage.key(name) in rest}
    return SelectorUsage(found) if found else None


def _take_prefixed(rest: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {key[len(prefix):]: rest.pop(key) for key in [k for k in rest if k.startswith(prefix)]}


def _generation(rest: dict[str, Any]) -> Generation | None:
    if "success" not in rest:
        return None
    return Generation(success=rest.pop("success"), status=_take_prefixed(rest, "status_"),
                      failures=_take_prefixed(rest, "failures_"), usage=_take_prefixed(rest, "generator_"),
                      cache_hits=rest.pop("cache_hits", None))


def _rounds(rest: dict[str, Any]) -> tuple[Round, ...]:
    found: dict[int, dict[str, Any]] = {}
    for key in list(rest):
        match = _ROUND_KEY.fullmatch(key)
        if match and _number(rest[key]) is not None:
            found.setdefault(int(match.group(2)), {})[match.group(1)] = rest[key]
    n = 0
    while n + 1 in found:
        n += 1
    for r in range(1, n + 1):
        for name in found[r]:
            rest.pop(f"{name}@{r}")
    return tuple(Round(**found[r]) for r in range(1, n + 1))


def _aspera(rest: dict[str, Any]) -> Aspera | None:
    if "extraction" not in rest:
        return None
    return Aspera(extraction=rest.pop("extraction"),
                  figures={name: rest.pop(name) for name in ASPERA_FIGURES if name in rest})


def _run(rest: dict[str, Any]) -> RunFacts:
    return RunFacts(**{key: rest.pop(key) for key in RunFacts.KEYS if key in rest})


def _learning(value: Any) -> Learning | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("retriever"), bool):
        raise ValueError(f"learns must be a table with a boolean 'retriever', got {value!r}")
    return Learning(retriever=value["retriever"], selector=bool(value.get("selector", False)),
                    generator=bool(value.get("generator", False)))


def _frontier(value: Any) -> FrontierFigures | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("tokens"), Sequence) \
            or not isinstance(value.get("recall"), Sequence):
        raise ValueError(f"frontier must be a table of 'tokens' and 'recall' lists, got {value!r}")
    return FrontierFigures(tokens=tuple(value["tokens"]), recall=tuple(value["recall"]))
