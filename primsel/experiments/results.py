"""An experiment's run folder: its files as typed records, the metric names, and its reader.

``experiment.json`` is an :class:`ExperimentManifest`, a cell's ``config.json`` a
:class:`CellConfig` and its ``report.json`` a :class:`CellReport` (one small record per stage).
Each record's ``to_json`` is the one writer of its file and ``from_json`` its one reader:
``from_json(x).to_json() == x``, keys a record does not know kept in ``extra``. The report and
the explorer read a folder through :func:`load_experiment` and never build a component or the
library. The names of the metrics every cell reports and the tables show live here only.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.files import digest, read_jsonl
from primsel.types import STATUSES, ranking

__all__ = [
    "ASPERA_FIGURES", "BASE_METRICS", "CURVE_KS", "EXPLORER_COLUMNS", "LEADER_COLUMNS", "RANKED_COLUMNS",
    "RANKING_METRICS", "REPORT_KS", "ROUND_FIGURES", "SELECTOR_USAGE", "SET_METRICS", "SUMMARY_COLUMNS",
    "SUMMARY_METRICS", "TABLE_COLUMNS", "TASK_METRICS", "TASK_STATUSES", "TIE_AWARE", "Aspera", "CellConfig",
    "CellEntry", "CellReport", "CellResult", "Experiment", "ExperimentManifest", "FrontierCurve",
    "FrontierFigures", "Generation", "Learning", "Ranking", "ReportError", "Round", "RunFacts", "RunFileError",
    "SelectionFigures", "SelectorUsage", "data_text", "dataset_groups", "frontier_figures",
    "learning_retrievers", "load_experiment", "per_task_values", "ranking_frontier", "retrieval_key",
]

#: Cut-offs of the recall@k curve every cell reports.
CURVE_KS = tuple(range(1, 21))
#: Cut-offs of complete@k, of the per-task metrics kept in tasks.jsonl and of the table of ties.
REPORT_KS = (5, 10, 15, 20)
#: Ranking metrics every cell reports (plus ``recall@k`` and ``complete@k`` of the cell's k).
BASE_METRICS = (*(f"recall@{k}" for k in CURVE_KS), *(f"complete@{k}" for k in REPORT_KS), "ndcg@10", "mrr")
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
#: Statuses of a task with a generator: the execution statuses, then those of a program not executed.
TASK_STATUSES = tuple(dict.fromkeys((*STATUSES, "truncated", "llm_error")))
#: Selector usage summed into report.json as ``selector_<name>`` (``cached`` as ``selector_cache_hits``).
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
#: The ranking metrics of :data:`TABLE_COLUMNS`, shown in primitive-id order and tie-aware.
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

#: A ranking metric's name (kept as one without a tie-aware partner).
_RANKING_NAME = re.compile(r"(recall|complete|ndcg|precision|map|mrr|hit_rate|r_precision)@\d+|mrr|map")
_ROUND_KEY = re.compile(r"(" + "|".join(ROUND_FIGURES) + r")@(\d+)")


def retrieval_key(dataset: str | None, retriever: Any, folds: int, seed: int, depth: int | None) -> str:
    """The one name of a retrieval: cells with the same key rank every task the same way.

    Returns the sha256 hex digest (:func:`primsel.files.digest`) of the dataset's fingerprint, the
    retriever's specification, the folds and seed of the cross-validation and the depth kept
    (None: the whole library).
    """
    return digest([dataset, retriever, folds, seed, depth])


class ReportError(ValueError):
    """A directory that is not a readable experiment directory (the message names the file)."""


class RunFileError(ReportError):
    """A config.json or experiment.json that is not valid JSON, not a JSON object, lacks a
    required key or holds a key of the wrong shape (the message names the file)."""


def _keys(prefix: str = "", names: tuple[str, ...] = (), **renamed: str) -> Any:
    """A mapping field written as one key per entry, ``prefix + name`` (or ``renamed[name]``), and
    read from the keys of ``names`` (when empty: from every key with ``prefix``)."""
    return field(default_factory=dict, metadata={"prefix": prefix, "names": names, "renamed": renamed})


_ALWAYS = {"always": True}  # a field written even when None


def _key(f: Any, name: Any) -> str:
    return f.metadata["renamed"].get(name, f"{f.metadata['prefix']}{name}")


class _Keys:
    """A record written as flat report.json keys (see :func:`_keys`)."""

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of this record: those it holds (a None value is not written)."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if "prefix" in f.metadata:
                out.update({_key(f, name): v for name, v in value.items()})
            elif value is not None or f.metadata.get("always"):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _pop(rest: dict[str, Any], test: Callable[[str], Any], name: Callable[[str], Any] = str) -> dict[Any, Any]:
    """``{name(key): value}`` of the keys of ``rest`` that pass ``test``, taken out of ``rest``."""
    return {name(key): rest.pop(key) for key in [key for key in rest if test(key)]}


def _take(cls: type, rest: dict[str, Any]) -> Any:
    """A record of ``cls`` from the keys of ``rest`` it knows, taken out of ``rest``."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        prefix, names = f.metadata.get("prefix"), f.metadata.get("names")
        if names:
            values[f.name] = {n: rest.pop(_key(f, n)) for n in names if _key(f, n) in rest}
        elif prefix is not None:
            values[f.name] = _pop(rest, lambda k, p=prefix: k.startswith(p), lambda k, p=prefix: k[len(p):])
        elif f.name in rest:
            values[f.name] = rest.pop(f.name)
    return cls(**values)


@dataclass(frozen=True)
class Ranking(_Keys):
    """The ranking metrics of a cell's retrieval, means over tasks.

    Parameters
    ----------
    values : metric name (``recall@10``, ``ndcg@10``, ``mrr``, ...) -> mean, tied scores in
        primitive-id order.
    tie_aware : metric name -> mean over every order of tied scores.
    tied_tasks : cut-off k -> number of tasks whose ranking has a tie across rank k.
    """

    values: Mapping[str, float] = _keys()
    tie_aware: Mapping[str, float] = _keys(TIE_AWARE)
    tied_tasks: Mapping[int, float] = _keys("tied_tasks@")

    def recall(self, k: int) -> float | None:
        """Mean recall@k, or None when the cell did not report it."""
        return self.values.get(f"recall@{k}")

    def recall_ks(self) -> list[int]:
        """The cut-offs k of every ``recall@k`` reported, ascending."""
        return sorted(int(name[7:]) for name in self.values if name.startswith("recall@") and name[7:].isdigit())

    def tied(self, k: Any) -> float | None:
        """Tasks with a tie across rank k (None when not counted at that k)."""
        return self.tied_tasks.get(k) if isinstance(k, int) else None


@dataclass(frozen=True)
class SelectionFigures(_Keys):
    """What the cell selected: means over tasks (``n_tasks`` excepted).

    Parameters
    ----------
    n_tasks : the number of tasks scored.
    selected, closure_added : mean primitives selected, and added by the type closure, per task.
    docs_tokens : mean documentation tokens of the selection per task (characters / 4).
    scores : set metric (:data:`SET_METRICS`) -> value.
    """

    n_tasks: int | None = None
    selected: float | None = None
    closure_added: float | None = None
    docs_tokens: float | None = None
    scores: Mapping[str, float] = _keys(names=SET_METRICS)

    KEYS = ("n_tasks", "selected", "closure_added", "docs_tokens")

    @property
    def recall_macro(self) -> float | None:
        """Mean over tasks of the share of gold primitives selected."""
        return self.scores.get("set_recall_macro")

    @property
    def f1_macro(self) -> float | None:
        """Mean over tasks of the selection's F1."""
        return self.scores.get("set_f1_macro")


@dataclass(frozen=True)
class SelectorUsage(_Keys):
    """The LLM cost of the ranking the cell selects from, summed over tasks (an LLM selector).

    Parameters
    ----------
    values : usage name (:data:`SELECTOR_USAGE`; ``cached``: answers from the cache) -> total.
    """

    values: Mapping[str, float] = _keys("selector_", SELECTOR_USAGE, cached="selector_cache_hits")


@dataclass(frozen=True)
class Generation(_Keys):
    """Task success of a cell with a generator.

    Parameters
    ----------
    success : fraction of tasks whose program passed.
    status : status (:data:`TASK_STATUSES`) -> fraction of tasks.
    failures : failure category -> number of tasks.
    usage : the generators' usage summed (``calls``, ``prompt_tokens``, ...).
    cache_hits : answers from the answer cache (None when the generator does not count them).
    """

    success: float = field(metadata=_ALWAYS)
    status: Mapping[str, float] = _keys("status_")
    failures: Mapping[str, float] = _keys("failures_")
    usage: Mapping[str, float] = _keys("generator_")
    cache_hits: float | None = None


@dataclass(frozen=True)
class Round(_Keys):
    """The figures of one reflection round r (:mod:`primsel.experiments.reflection`).

    Parameters
    ----------
    success : fraction of tasks passed by round r.
    calls : generation requests of the round (cache hits included); ``cache_hits`` of those.
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

    def to_json(self, r: int) -> dict[str, Any]:  # type: ignore[override]
        """The report.json keys of round ``r`` (``success@r``, ...), those it holds."""
        return {f"{name}@{r}": value for name, value in super().to_json().items()}


@dataclass(frozen=True)
class Aspera(_Keys):
    """The generator's extraction mode and ASPERA's figures (:mod:`primsel.eval.aspera`).

    Parameters
    ----------
    extraction : how programs were taken from the answers (None: the generator's own way).
    figures : figure name (:data:`ASPERA_FIGURES`) -> value (None when undefined).
    """

    extraction: str | None = field(default=None, metadata=_ALWAYS)
    figures: Mapping[str, float | None] = _keys(names=ASPERA_FIGURES)

    @property
    def score(self) -> float | None:
        """ASPERA's score (100 x passed / evaluated, minus refused / all)."""
        return self.figures.get("score")


@dataclass(frozen=True)
class RunFacts(_Keys):
    """How the cell ran: its cost in time and LLM answers, and whether it is complete.

    Parameters
    ----------
    retrieval_seconds : wall time of the retrieval (s); ``retrieval_cached`` 1.0 when cached.
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


@dataclass(frozen=True)
class Learning(_Keys):
    """Which of the cell's components learn from tasks (fitted per fold on the other folds):
    the retriever (:class:`primsel.types.LearnsFromTasks`), the selector, the generator
    (:class:`primsel.types.FitsOnTasks`); False for a component the cell lacks."""

    retriever: bool
    selector: bool = False
    generator: bool = False


@dataclass(frozen=True)
class FrontierFigures(_Keys):
    """The recall/tokens frontier of the cell's ranking: for k = 1 .. depth, the mean
    documentation ``tokens`` of the top k and the mean ``recall`` of the top k over the tasks
    with gold primitives (two sequences of length depth).

    Raises
    ------
    ValueError : the two sequences differ in length.
    """

    tokens: tuple[float, ...]
    recall: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.recall):
            raise ValueError(f"frontier: {len(self.tokens)} token values but {len(self.recall)} recall values")


@dataclass(frozen=True)
class CellReport:
    """A cell's report.json, one record per stage.

    Parameters
    ----------
    ranking, selection, run : always present (empty in an empty report).
    selector_usage : with an LLM selector, else None.
    generation, aspera : with a generator, else None.
    rounds : with reflection rounds, one :class:`Round` per round (round 1 first), else empty.
    learning : ``learns``, which components learn from tasks (None when not recorded).
    frontier : the recall/tokens frontier (None when not recorded).
    retrieval_key : :func:`retrieval_key` of the cell's retrieval (None when not recorded).
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
        """The value of a metric of the tables (a ranking or set metric, ``docs_tokens``,
        ``success``, an ASPERA figure, or a key of :attr:`extra`), or None when the cell lacks it."""
        if name in SelectionFigures.KEYS:
            return getattr(self.selection, name)
        if name == "success":
            return self.success
        figures = self.aspera.figures if self.aspera is not None else {}
        for table in (self.ranking.values, self.selection.scores, figures, self.extra):
            if name in table:
                return table[name]
        return None

    def to_json(self) -> dict[str, Any]:
        """report.json: every record's keys, ``learns``, ``frontier``, ``retrieval_key``, then :attr:`extra`."""
        out: dict[str, Any] = {}
        for part in (self.ranking, self.selection, self.selector_usage, self.generation):
            out.update(part.to_json() if part is not None else {})
        for r, figures in enumerate(self.rounds, start=1):
            out.update(figures.to_json(r))
        for part in (self.aspera, self.run):
            out.update(part.to_json() if part is not None else {})
        nested = {"learns": self.learning, "frontier": self.frontier}
        out.update({key: part.to_json() for key, part in nested.items() if part is not None})
        if self.retrieval_key is not None:
            out["retrieval_key"] = self.retrieval_key
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CellReport:
        """Read a report.json (None or empty: an empty record).

        Raises
        ------
        ValueError : ``learns`` or ``frontier`` of the wrong shape.
        """
        rest = dict(data or {})
        return cls(ranking=_ranking(rest), selection=_take(SelectionFigures, rest),
                   selector_usage=usage if (usage := _take(SelectorUsage, rest)).values else None,
                   generation=_take(Generation, rest) if "success" in rest else None, rounds=_rounds(rest),
                   aspera=_take(Aspera, rest) if "extraction" in rest else None, run=_take(RunFacts, rest),
                   learning=_learning(rest.pop("learns", None)), frontier=_frontier(rest.pop("frontier", None)),
                   retrieval_key=rest.pop("retrieval_key", None), extra=rest)


def _ranking(rest: dict[str, Any]) -> Ranking:
    """The ranking metrics of a report, taken out of it."""
    values = _pop(rest, lambda k: TIE_AWARE + k in rest or _RANKING_NAME.fullmatch(k))
    tie_aware = _pop(rest, lambda k: k.startswith(TIE_AWARE), lambda k: k[len(TIE_AWARE):])
    tied = _pop(rest, lambda k: k.startswith("tied_tasks@") and k[11:].isdigit(), lambda k: int(k[11:]))
    return Ranking(values=values, tie_aware=tie_aware, tied_tasks=tied)


def _rounds(rest: dict[str, Any]) -> tuple[Round, ...]:
    """The rounds 1, 2, ... of a report (up to the first missing one), taken out of it."""
    found: dict[int, dict[str, str]] = {}
    for key, value in rest.items():
        match = _ROUND_KEY.fullmatch(key)
        if match and isinstance(value, (int, float)) and not isinstance(value, bool):
            found.setdefault(int(match.group(2)), {})[match.group(1)] = key
    rounds: list[Round] = []
    while len(rounds) + 1 in found:
        rounds.append(Round(**{name: rest.pop(key) for name, key in found[len(rounds) + 1].items()}))
    return tuple(rounds)


def _learning(value: Any) -> Learning | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("retriever"), bool):
        raise ValueError(f"learns must be a table with a boolean 'retriever', got {value!r}")
    return Learning(value["retriever"], bool(value.get("selector", False)), bool(value.get("generator", False)))


def _frontier(value: Any) -> FrontierFigures | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(value.get(k), Sequence) for k in ("tokens", "recall")):
        raise ValueError(f"frontier must be a table of 'tokens' and 'recall' lists, got {value!r}")
    return FrontierFigures(tokens=tuple(value["tokens"]), recall=tuple(value["recall"]))


#: What a run file's field must be when present: (type, type of its items or None), by name.
_SHAPES = {"a table": (Mapping, None), "a list": (list, object), "a list of tables": (list, Mapping),
           "a list of strings": (list, str)}


def _file(shape: str | None = None, when: Callable[[Any], bool] | None = None, default: Any = None,
          kw_only: bool = False, **more: Any) -> Any:
    """A field of a run file: its ``shape`` (:data:`_SHAPES`), when it is written (None:
    always), its default (a table's: empty), and ``required`` or ``each`` (the record of its items)."""
    given = {} if more.get("required") else {"default_factory": dict} if shape == "a table" else {"default": default}
    return field(**given, kw_only=kw_only, metadata={"shape": shape, "when": when, **more})


class _File:
    """A record of a run file: one field per key in the order written, then ``extra``."""

    extra: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The file's object: every field written (see :func:`_file`), then :attr:`extra`."""
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            when, value = f.metadata.get("when"), getattr(self, f.name)
            if f.name != "extra" and (when is None or when(self)):
                out[f.name] = _plain(value)
        return {**out, **self.extra}

    @classmethod
    def _read(cls, data: Mapping[str, Any], source: str, **given: Any) -> Any:
        """The record of a file's object (``source`` names it in errors), ``given`` fields set.

        Raises
        ------
        RunFileError : a required key is missing, or a key of the wrong shape.
        """
        rest, values = dict(data), dict(given)
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name == "extra" or f.name in given:
                continue
            if f.metadata.get("required") and f.name not in rest:
                raise RunFileError(f"{source}: no {f.name!r}")
            value, shape = rest.pop(f.name, None), f.metadata.get("shape")
            if value is not None and shape is not None:
                kind, item = _SHAPES[shape]
                if not isinstance(value, kind) or not all(isinstance(x, item) for x in value if item is not None):
                    raise RunFileError(f"{source}: {f.name!r} must be {shape}, got {value!r}")
                value = dict(value) if item is None else tuple(dict(x) if item is Mapping else x for x in value)
                if "each" in f.metadata:
                    value = tuple(f.metadata["each"].from_json(x, source) for x in value)
            if value is not None:
                values[f.name] = value
        return cls(**values, extra=rest)


def _plain(value: Any) -> Any:
    """A field's value as JSON: tables as dicts, sequences as lists, records by their to_json."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, list)):
        return [x.to_json() if isinstance(x, _File) else _plain(x) for x in value]
    return value


def _read_object(path: str | Path, missing: bool = False) -> dict[str, Any] | None:
    """The JSON object of a file (with ``missing``: None when the file does not exist).

    Raises
    ------
    OSError : the file cannot be read (with ``missing``: ReportError instead).
    RunFileError : not valid JSON, or not a JSON object.
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing:
            return None
        raise
    except OSError as exc:
        if missing:
            raise ReportError(f"{path}: unreadable: {exc}") from None
        raise
    except ValueError as exc:  # invalid JSON or UTF-8
        raise RunFileError(f"{path}: unreadable: {exc}") from None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: unreadable: not a JSON object")
    return value


@dataclass(frozen=True)
class CellConfig(_File):
    """A cell's ``config.json``: what the cell was computed from.

    Parameters
    ----------
    id : the cell id (its directory name).
    label : its readable label (None: readers use the id).
    experiment : the name of the experiment that computed it.
    settings : the resolved settings (:meth:`primsel.experiments.settings.CellSettings.to_json`).
    data : the dataset's summary (:meth:`primsel.experiments.dataset.Dataset.summary`).
    effective_folds : the folds the cross-validation used (fewer than asked with few tasks).
    generated : the cell ran a generator; ``extraction`` is then written (even when None).
    extraction : with a generator, how programs were taken from the answers.
    embedding : key of each ``dense`` specification in the retriever -> how it embeds the
        library (:func:`primsel.experiments.cell.embedding_windows`); written when not empty.
    library : ``{"n_primitives", "fingerprint"}`` of the library ranked.
    sources : component kind -> name -> digest of its source (:func:`primsel.spec.sources`).
    versions : package -> installed version (:func:`primsel.experiments.runner.package_versions`).
    extra : the keys of the file no field knows, kept as read.
    """

    id: str = _file(required=True)
    label: str | None = None
    experiment: str | None = None
    settings: Mapping[str, Any] = _file("a table")
    data: Mapping[str, Any] = _file("a table")
    effective_folds: int | None = None
    generated: bool = field(default=False, metadata={"when": lambda r: False})
    extraction: str | None = _file(when=lambda r: r.generated)
    embedding: Mapping[str, Mapping[str, Any]] = _file("a table", when=lambda r: bool(r.embedding))
    library: Mapping[str, Any] = _file("a table")
    sources: Mapping[str, Mapping[str, str]] = _file("a table")
    versions: Mapping[str, str | None] = _file("a table")
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "config.json") -> CellConfig:
        """Read a config.json's object (``source`` names it in errors).

        Raises
        ------
        RunFileError : no ``id``, or ``settings``, ``data``, ``embedding``, ``library``,
            ``sources`` or ``versions`` not a table.
        """
        return cls._read(data, source, generated="extraction" in data)

    @classmethod
    def read(cls, path: str | Path) -> CellConfig:
        """Read a cell's config.json.

        Raises
        ------
        OSError : the file cannot be read (FileNotFoundError when there is none).
        RunFileError : see :meth:`from_json`; or not valid JSON, or not a JSON object.
        """
        return cls.from_json(_read_object(path), source=str(path))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CellEntry(_File):
    """A cell as experiment.json lists it: its ``id``, ``label`` (None: readers use the id),
    resolved ``settings``, and ``extra``, the keys of the entry no field knows."""

    id: str = _file(required=True)
    label: str | None = None
    settings: Mapping[str, Any] = _file("a table")
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, source: str = "experiment.json") -> CellEntry:
        """Read an entry of ``cells``.

        Raises
        ------
        RunFileError : not a table, no ``id``, or ``settings`` not a table.
        """
        if not isinstance(data, Mapping):
            raise RunFileError(f"{source}: a cell entry must be a table, got {data!r}")
        if "id" not in data:
            raise RunFileError(f"{source}: a cell entry without 'id': {data!r}")
        return cls._read(data, source)


@dataclass(frozen=True)
class ExperimentManifest(_File):
    """An experiment's ``experiment.json``: the experiment as declared, and its cells.

    Parameters
    ----------
    name : the experiment's name (None: readers use the directory's).
    description : its free text.
    baseline : the baseline it declares (None: the first cell's retriever).
    data : the summary of its dataset (of one), or ``{"source", "n_tasks", "fingerprint"}`` of
        several joined by ``+``.
    grids : its grids, each dotted key -> list of values (paths written as strings).
    cells : the cells of the declaration, in grid order.
    datasets : with several datasets, each one's summary and ``notes``; else empty (not written).
    notes : with one dataset, what its loader noted (empty: not written).
    pair_on : the settings a cell and its baseline cell must agree on (None: not written).
    extra : the keys of the file no field knows, kept as read.
    """

    name: str | None = None
    description: str | None = None
    baseline: str | None = None
    data: Mapping[str, Any] = _file("a table")
    grids: tuple[Mapping[str, Any], ...] = _file("a list of tables", default=())
    cells: tuple[CellEntry, ...] = _file("a list", required=True, each=CellEntry, kw_only=True)
    datasets: tuple[Mapping[str, Any], ...] = _file("a list of tables", lambda r: bool(r.datasets), ())
    notes: tuple[str, ...] = _file("a list of strings", lambda r: bool(r.notes), ())
    pair_on: tuple[str, ...] | None = _file("a list of strings", when=lambda r: r.pair_on is not None)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "experiment.json") -> ExperimentManifest:
        """Read an experiment.json's object (``source`` names it in errors).

        Raises
        ------
        RunFileError : no ``cells`` or not a list of cell entries (:meth:`CellEntry.from_json`),
            or ``data`` not a table, ``grids`` or ``datasets`` not a list of tables, ``notes`` or
            ``pair_on`` not a list of strings.
        """
        return cls._read(data, source)

    @classmethod
    def read(cls, path: str | Path) -> ExperimentManifest:
        """Read an experiment.json.

        Raises
        ------
        OSError : the file cannot be read (FileNotFoundError when there is none).
        RunFileError : see :meth:`from_json`; or not valid JSON, or not a JSON object.
        """
        return cls.from_json(_read_object(path), source=str(path))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CellResult:
    """One cell of an experiment as read from disk.

    Parameters
    ----------
    id : cell id (its directory name).
    label : readable label.
    settings : resolved settings (``retriever``, ``k``, ``closure``, ...).
    report : report.json (empty when the cell has none).
    directory : the cell's directory.
    """

    id: str
    label: str
    settings: Mapping[str, Any]
    report: Mapping[str, float]
    directory: Path

    @cached_property
    def record(self) -> CellReport:
        """report.json as a typed record (empty when the cell has none).

        Raises
        ------
        ValueError : report.json holds ``learns`` or ``frontier`` of the wrong shape.
        """
        return CellReport.from_json(self.report)

    @property
    def finished(self) -> bool:
        """True when the cell's report.json exists (complete or not)."""
        return bool(self.report)

    @property
    def complete(self) -> bool:
        """False when report.json says ``"complete": false`` (the next ``primsel run`` recomputes it)."""
        return self.record.complete

    @property
    def retriever(self) -> str:
        """Readable label of the cell's retriever."""
        return specs.label(self.settings.get("retriever", "?"))

    def unrecorded(self, key: str) -> ReportError:
        """The error of a report.json that does not record ``key`` (``learns``, ``frontier``)."""
        return ReportError(f"cell {self.id}: {self.directory / 'report.json'} does not record {key!r}; delete it and "
                           f"run `primsel run` on the experiment again to record it")


@dataclass(frozen=True)
class Experiment:
    """An experiment directory: its name, description, baseline, dataset summary and cells.

    ``pair_on`` is the experiment's ``pair_on`` (None: every setting except the retriever);
    ``other_data`` counts the cell directories of other data (not in ``experiment.json``),
    ``{"<source> (<n> tasks)": cells}``; ``datasets`` lists the datasets of an experiment run on
    several (``source``, ``n_tasks``, ``fingerprint``, ``n_documents``, ``notes``), empty for one.
    """

    name: str
    directory: Path
    cells: tuple[CellResult, ...]
    description: str = ""
    baseline: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    pair_on: tuple[str, ...] | None = None
    other_data: Mapping[str, int] = field(default_factory=dict)
    datasets: tuple[Mapping[str, Any], ...] = ()


def load_experiment(directory: str | os.PathLike[str]) -> Experiment:
    """Read an experiment directory: its cells and their order from ``experiment.json``
    (:class:`ExperimentManifest`), or without it every sub-directory holding a ``config.json``
    (:class:`CellConfig`), sorted by label.

    Raises
    ------
    ReportError : no such directory, or neither ``experiment.json`` nor any cell in it, or an
        unreadable JSON file, one lacking a required key or holding one of the wrong shape (the
        message names the file; :class:`RunFileError` is a ReportError).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    data = _read_object(directory / "experiment.json", missing=True)
    if data is not None:
        manifest = ExperimentManifest.from_json(data, str(directory / "experiment.json"))
    else:
        entries = []
        for sub in sorted(p for p in directory.iterdir() if (p / "config.json").is_file()):
            config = CellConfig.from_json(_read_object(sub / "config.json", missing=True) or {"id": sub.name},
                                          str(sub / "config.json"))
            entries.append(CellEntry(id=sub.name, label=config.label or sub.name, settings=config.settings))
        manifest = ExperimentManifest(cells=tuple(sorted(entries, key=lambda e: e.label)), name=directory.name)
    if not manifest.cells:
        raise ReportError(f"{directory}: not an experiment directory (no experiment.json and no cells)")
    cells = tuple(CellResult(id=e.id, label=e.id if e.label is None else e.label, settings=e.settings,
                             report=_read_object(directory / e.id / "report.json", missing=True) or {},
                             directory=directory / e.id) for e in manifest.cells)
    fingerprints = {d.get("fingerprint") for d in manifest.datasets} or {manifest.data.get("fingerprint")}
    return Experiment(name=directory.name if manifest.name is None else manifest.name, directory=directory,
                      cells=cells, description=manifest.description or "", baseline=manifest.baseline,
                      data=manifest.data, pair_on=manifest.pair_on,
                      other_data=_other_data(directory, {c.id for c in cells}, fingerprints),
                      datasets=manifest.datasets)


def data_text(data: Mapping[str, Any]) -> str:
    """``"Asper-Bench (250 tasks)"``: the data of a summary (``source``, ``n_tasks``, optional
    ``n_documents`` and ``subset``: ``"Asper-Bench (20 of 250 tasks: a sample drawn with seed
    0)"``) as a reader names it."""
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    subset = data.get("subset")
    if isinstance(subset, Mapping):
        how = (f"a sample drawn with seed {subset.get('seed')}" if "sample" in subset
               else f"cross-validation fold {subset.get('fold')} of {subset.get('folds')}, seed {subset.get('seed')}"
               if "fold" in subset else "the tasks listed")
        return f"{name} ({data.get('n_tasks', '?')} of {subset.get('of', '?')} tasks: {how}{documents})"
    return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"


def _other_data(directory: Path, known: set[str], fingerprints: set[Any]) -> dict[str, int]:
    """Cell directories the manifest does not list that ran on other data than ``fingerprints``,
    counted per data description."""
    counts: dict[str, int] = {}
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in known):
        try:
            cell_data = CellConfig.read(sub / "config.json").data
        except (OSError, ValueError):  # no config.json, or RunFileError
            continue
        if cell_data.get("fingerprint") not in fingerprints:
            counts[data_text(cell_data)] = counts.get(data_text(cell_data), 0) + 1
    return counts


def per_task_values(cell: CellResult, metric: str) -> dict[str, float]:
    """``{task_id: value}`` of a per-task metric from the cell's tasks.jsonl: a ``metrics``
    entry (``recall@10``, ``set_recall``, ...), ``docs_tokens``, or ``success`` (1.0 when the
    task's ``status`` is ``pass``, else 0.0).

    Raises
    ------
    ReportError : tasks.jsonl is missing or lacks the metric for a task.
    """
    path = cell.directory / "tasks.jsonl"
    out: dict[str, float] = {}
    try:
        for _, row in read_jsonl(path):
            if metric == "success":
                out[str(row["task_id"])] = 1.0 if row.get("status") == "pass" else 0.0
            else:
                out[str(row["task_id"])] = float(row[metric] if metric == "docs_tokens" else row["metrics"][metric])
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ReportError(f"{path}: no per-task {metric!r}: {exc}") from None
    return out


def dataset_groups(experiment: Experiment) -> list[tuple[Mapping[str, Any], list[CellResult]]]:
    """The experiment's cells grouped by dataset, in the manifest's dataset order:
    ``[(dataset summary, cells)]``; one group of every cell for an experiment on one dataset."""
    if len(experiment.datasets) <= 1:
        return [(experiment.data, list(experiment.cells))]
    groups: list[tuple[Mapping[str, Any], list[CellResult]]] = [(d, []) for d in experiment.datasets]
    index = {d.get("fingerprint"): i for i, d in enumerate(experiment.datasets)}
    for c in experiment.cells:
        i = index.get(c.settings.get("dataset"))
        if i is not None:
            groups[i][1].append(c)
    return groups


def learning_retrievers(cells: Sequence[CellResult]) -> list[str]:
    """Labels of the cells' retrievers that learn from tasks (``learns`` of their reports), in
    order of first appearance.

    Raises
    ------
    ReportError : a cell's report.json does not record ``learns``.
    """
    last = {c.retriever: c for c in cells}  # one cell per label, labels in order of first appearance
    out = []
    for label, c in last.items():
        if c.record.learning is None:
            raise c.unrecorded("learns")
        if c.record.learning.retriever:
            out.append(label)
    return out


@dataclass(frozen=True)
class FrontierCurve:
    """The recall/tokens frontier of one ranking: for k = 1 .. depth, the mean documentation
    ``tokens`` of the top k (length depth) and every task's ``recall`` of its top k (one row of
    length depth per task with gold primitives)."""

    tokens: tuple[float, ...]
    recall: tuple[tuple[float, ...], ...]

    @property
    def mean_recall(self) -> list[float]:
        """Mean recall over tasks per k, length depth."""
        return [math.fsum(col) / len(col) for col in zip(*self.recall)]


def _orders(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Any]) -> dict[str, list[str]]:
    """Task id -> its ranking (best first), for the tasks of ``gold`` with gold primitives that
    ``run`` ranks, in ``gold``'s order."""
    return {t: ranking(run[t]) for t in gold if gold[t] and t in run}


def frontier_figures(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Any],
                     tokens: Mapping[str, int]) -> FrontierFigures | None:
    """The recall/tokens frontier of a ranking: for k = 1 .. depth (the longest ranking), the
    mean documentation tokens of the top k and the mean recall of the top k, over the tasks with
    gold primitives (a ranking shorter than depth counts whole at every deeper k).

    Parameters
    ----------
    run : task id -> {primitive id: score}.
    gold : task id -> its gold primitive ids.
    tokens : primitive id -> estimated documentation tokens (a whole number).

    Returns
    -------
    :class:`FrontierFigures`, or None when no task has gold primitives or a ranked id has no
    token count.
    """
    orders = _orders(run, gold)
    if not orders or any(p not in tokens for order in orders.values() for p in order):
        return None
    depth = max(len(o) for o in orders.values())
    # running sums of whole numbers (tokens, gold primitives found) per task: exact
    spent, found = [], []
    for t, order in orders.items():
        own = frozenset(gold[t])
        spent.append(list(itertools.accumulate(tokens[p] for p in order)))
        found.append(list(itertools.accumulate(int(p in own) for p in order)))
    n, sizes = len(orders), [len(frozenset(gold[t])) for t in orders]
    mean_tokens = [math.fsum(row[min(k, len(row)) - 1] for row in spent) / n for k in range(1, depth + 1)]
    recall = [math.fsum(row[min(k, len(row)) - 1] / size for row, size in zip(found, sizes)) / n
              for k in range(1, depth + 1)]
    return FrontierFigures(tokens=tuple(mean_tokens), recall=tuple(recall))


def ranking_frontier(cell: CellResult) -> FrontierCurve | None:
    """The recall/tokens frontier of a finished cell's ranking: the per-task recall from its
    run.trec and the gold sets of its tasks.jsonl, the mean tokens per k from its report's
    ``frontier``.

    Returns
    -------
    :class:`FrontierCurve`, or None when run.trec or tasks.jsonl is missing or unreadable, no
    task has gold primitives, or the report's ``frontier`` is not of the ranking's depth.

    Raises
    ------
    ReportError : the report records neither ``frontier`` nor ``learns`` (written before both were).
    """
    from primsel.retrieval.trec import read_run  # local: primsel.retrieval loads every retriever

    try:
        run = read_run(cell.directory / "run.trec")
        gold = {str(row["task_id"]): set(row["gold"]) for _, row in read_jsonl(cell.directory / "tasks.jsonl")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    orders = _orders(run, gold)
    if not orders:
        return None
    recorded, ks = cell.record.frontier, range(1, max(len(o) for o in orders.values()) + 1)
    if recorded is None and cell.record.learning is None:
        raise cell.unrecorded("frontier")
    if recorded is None or len(recorded.tokens) != len(ks):
        return None
    recall = tuple(tuple(len(gold[t] & set(order[:k])) / len(gold[t]) for k in ks) for t, order in orders.items())
    return FrontierCurve(tokens=tuple(float(x) for x in recorded.tokens), recall=recall)
