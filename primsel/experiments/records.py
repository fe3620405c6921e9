"""The files of a run folder as typed records: one dataclass per file (and per part of a file), each
with one writer, ``to_json``, and one reader, ``from_json``, written out key by key.

=====================  =====================================================================
file                   record
=====================  =====================================================================
``experiment.json``    :class:`ManifestFile`, its cells :class:`ManifestCell`
``config.json``        :class:`ConfigFile`
``report.json``        :class:`ReportFile`: :class:`RankingFigures`, :class:`SelectionFigures`,
                       :class:`SelectorUsage`, :class:`GenerationFigures`, :class:`RoundFigures`,
                       :class:`AsperaFigures`, :class:`RunFacts`, :class:`Learning`,
                       :class:`Frontier`
``tasks.jsonl``        :class:`TaskRow` per line: with a generator :class:`ProgramOutcome`, and
                       with reflection rounds a :class:`RoundEntry` per round
=====================  =====================================================================

The records hold data only; :mod:`primsel.experiments.results` reads and writes the files. The
files' names are the constants below, and no other module writes them.

Versions. The files carry no version number: each version so far only added keys, so one reader
reads them all. A key an older version did not write reads as the field's default (None, empty,
False); a key this version does not know is kept in the record's ``extra`` and written back, so
``from_json(data).to_json() == data`` for every experiment.json, config.json and report.json
primsel wrote. Two older formats are read by tests (``tests/experiments/test_records.py``): the
run folders written before the files had typed records (no ``learns``, ``frontier`` or
``retrieval_key`` in report.json: the report asks to run the cell again) and those of the first
typed records (the same keys as now). A task row of an older version lacks some keys of
:class:`ProgramOutcome` (``program_status``, ``extraction``, ...): they read as their defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from primsel.experiments.columns import (
    ASPERA_FIGURES,
    ROUND_FIGURES,
    SELECTOR_USAGE,
    SET_METRICS,
    TIE_AWARE,
)

EXPERIMENT_FILE = "experiment.json"  #: The experiment's manifest, :class:`ManifestFile`.
CONFIG_FILE = "config.json"  #: A cell's settings and provenance, :class:`ConfigFile`.
REPORT_FILE = "report.json"  #: A cell's means, :class:`ReportFile`, written last.
TASKS_FILE = "tasks.jsonl"  #: A cell's task rows, a :class:`TaskRow` per line.
RANKING_FILE = "run.trec"  #: A cell's ranking (TREC run format).
QRELS_FILE = "qrels.trec"  #: The gold primitives of a cell's tasks (TREC qrels format).
FAILURES_FILE = "failures.jsonl"  #: A cell's diagnoses of the tasks that did not pass.
MARKDOWN_FILE = "report.md"  #: The experiment's report.
COLOURS_FILE = "colours.json"  #: Each cell's colour in the figures.

#: A ranking metric's name (read as one even without a tie-aware partner).
_RANKING_NAME = re.compile(
    r"(recall|complete|ndcg|precision|map|mrr|hit_rate|r_precision)@\d+|mrr|map"
)
#: A figure of a reflection round in report.json: ``<figure>@<round>``.
_ROUND_KEY = re.compile(r"(" + "|".join(ROUND_FIGURES) + r")@(\d+)")
#: Prefix of the number of tasks with a tie across rank k (``tied_tasks@10``).
TIED_TASKS = "tied_tasks@"
#: What a cell id may be: one name of a folder, of letters, digits, ``_``, ``.`` and ``-``, that
#: starts with a letter or digit (never ``..``, an absolute path or a path of several parts).
_CELL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class ReportError(ValueError):
    """A directory that is not a readable experiment directory (the message names the file)."""


class RunFileError(ReportError):
    """A run file that is not valid JSON, not an object, or lacks or misshapes a key (the message
    names it)."""


# ------------------------------------------------------------------------------------------------
# Checked reads of one key
# ------------------------------------------------------------------------------------------------
def _table(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    """``data[key]`` as a dict ({} when absent or null); RunFileError naming ``source`` when not a
    table."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RunFileError(f"{source}: {key!r} must be a table, got {value!r}")
    return dict(value)


def _list(
    data: Mapping[str, Any], key: str, source: str, item: type, shape: str
) -> tuple[Any, ...] | None:
    """``data[key]`` as a tuple (None when absent or null); RunFileError naming ``source`` when it
    is not a list of ``item`` (``shape`` says what it must be)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(x, item) for x in value):
        raise RunFileError(f"{source}: {key!r} must be {shape}, got {value!r}")
    return tuple(value)


def _with_prefix(keys: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Take the keys that start with ``prefix`` out of ``keys``: {key without the prefix: value}."""
    found = [key for key in keys if key.startswith(prefix)]
    return {key[len(prefix) :]: keys.pop(key) for key in found}


def _named(keys: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Take the keys among ``names`` out of ``keys``: {name: value} of those present."""
    found = [name for name in names if name in keys]
    return {name: keys.pop(name) for name in found}


# ------------------------------------------------------------------------------------------------
# report.json
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankingFigures:
    """The ranking metrics of a cell, means over its tasks.

    Parameters
    ----------
    values : metric name (``recall@10``, ``ndcg@10``, ``mrr``) -> mean, tied scores in primitive-id
        order; written under the metric's name.
    tie_aware : metric name -> mean over every order of the tied scores; written
        ``tie_aware_<metric>``.
    tied_tasks : k -> number of tasks whose ranking has a tie across rank k; written
        ``tied_tasks@<k>``.
    """

    values: Mapping[str, float] = field(default_factory=dict)
    tie_aware: Mapping[str, float] = field(default_factory=dict)
    tied_tasks: Mapping[int, float] = field(default_factory=dict)

    def recall(self, k: int | None) -> float | None:
        """Mean recall@k, or None when the cell did not report it."""
        return self.values.get(f"recall@{k}")

    def recall_ks(self) -> list[int]:
        """The cut-offs k of every ``recall@k`` reported, ascending."""
        ks = []
        for name in self.values:
            cut = name.removeprefix("recall@")
            if cut != name and cut.isdigit():
                ks.append(int(cut))
        return sorted(ks)

    def tied(self, k: Any) -> float | None:
        """Tasks with a tie across rank k, None when not counted at that k (or k is not an
        integer)."""
        if not isinstance(k, int):
            return None
        return self.tied_tasks.get(k)

    def to_json(self) -> dict[str, float]:
        """The report.json keys of the ranking metrics."""
        out = dict(self.values)
        for name, value in self.tie_aware.items():
            out[TIE_AWARE + name] = value
        for k, count in self.tied_tasks.items():
            out[f"{TIED_TASKS}{k}"] = count
        return out

    @classmethod
    def take(cls, keys: dict[str, Any]) -> RankingFigures:
        """Take the ranking metrics out of ``keys`` (a report.json's keys not read yet): the names
        of ranking metrics and those with a tie-aware partner, the tie-aware values, the tied-task
        counts."""
        names = [key for key in keys if TIE_AWARE + key in keys or _RANKING_NAME.fullmatch(key)]
        values = _named(keys, names)
        tie_aware = _with_prefix(keys, TIE_AWARE)
        tied = [
            key for key in keys if key.startswith(TIED_TASKS) and key[len(TIED_TASKS) :].isdigit()
        ]
        tied_tasks = {int(key[len(TIED_TASKS) :]): keys.pop(key) for key in tied}
        return cls(values=values, tie_aware=tie_aware, tied_tasks=tied_tasks)


@dataclass(frozen=True)
class SelectionFigures:
    """The selections of a cell, means over its tasks (None: not recorded).

    Parameters
    ----------
    n_tasks : tasks of the cell.
    selected : primitives selected per task.
    closure_added : primitives the type closure added per task.
    docs_tokens : documentation tokens (characters / 4) of the selection per task.
    scores : the set metrics of :data:`~primsel.experiments.columns.SET_METRICS`, each under its
        name.
    """

    n_tasks: int | None = None
    selected: float | None = None
    closure_added: float | None = None
    docs_tokens: float | None = None
    scores: Mapping[str, float] = field(default_factory=dict)

    @property
    def recall_macro(self) -> float | None:
        """Mean over tasks of the share of gold primitives selected."""
        return self.scores.get("set_recall_macro")

    @property
    def f1_macro(self) -> float | None:
        """Mean over tasks of the selection's F1."""
        return self.scores.get("set_f1_macro")

    def to_json(self) -> dict[str, float]:
        """The report.json keys of the selection (those recorded)."""
        out: dict[str, Any] = {}
        for name in ("n_tasks", "selected", "closure_added", "docs_tokens"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.scores)
        return out

    @classmethod
    def take(cls, keys: dict[str, Any]) -> SelectionFigures:
        """Take the selection's keys out of ``keys``."""
        return cls(
            n_tasks=keys.pop("n_tasks", None),
            selected=keys.pop("selected", None),
            closure_added=keys.pop("closure_added", None),
            docs_tokens=keys.pop("docs_tokens", None),
            scores=_named(keys, SET_METRICS),
        )


@dataclass(frozen=True)
class SelectorUsage:
    """An LLM selector's usage summed over tasks: name of
    :data:`~primsel.experiments.columns.SELECTOR_USAGE` -> total, written ``selector_<name>``
    (``cached``, the answers from the cache: ``selector_cache_hits``)."""

    values: Mapping[str, float] = field(default_factory=dict)

    @staticmethod
    def key(name: str) -> str:
        """The report.json key of usage ``name``."""
        if name == "cached":
            return "selector_cache_hits"
        return f"selector_{name}"

    def to_json(self) -> dict[str, float]:
        """The report.json keys of the usage."""
        return {self.key(name): value for name, value in self.values.items()}

    @classmethod
    def take(cls, keys: dict[str, Any]) -> SelectorUsage | None:
        """Take the selector's usage out of ``keys``; None when none is recorded (no LLM
        selector)."""
        values = {name: keys.pop(cls.key(name)) for name in SELECTOR_USAGE if cls.key(name) in keys}
        if not values:
            return None
        return cls(values)


@dataclass(frozen=True)
class GenerationFigures:
    """What the generated programs of a cell did.

    Parameters
    ----------
    success : fraction of tasks passed (always written with a generator).
    status : status -> fraction of tasks (:data:`~primsel.experiments.columns.TASK_STATUSES`);
        ``status_<s>``.
    failures : failure category -> tasks (:func:`primsel.eval.attribution.count_categories`);
        ``failures_<c>``.
    usage : the generators' usage summed (``calls``, ``errors``, ``cache_hits``, tokens, ...);
        ``generator_<key>``.
    cache_hits : answers taken from the answer cache (None: not counted).
    strict_success : fraction of tasks passed without collateral (the collateral audit,
        :attr:`primsel.types.ExecutionResult.strict`); None: not audited (a report written before).
    """

    success: float
    status: Mapping[str, float] = field(default_factory=dict)
    failures: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[str, float] = field(default_factory=dict)
    cache_hits: float | None = None
    strict_success: float | None = None

    def to_json(self) -> dict[str, float]:
        """The report.json keys of the generation."""
        out: dict[str, Any] = {"success": self.success}
        if self.strict_success is not None:
            out["strict_success"] = self.strict_success
        out.update({f"status_{name}": value for name, value in self.status.items()})
        out.update({f"failures_{name}": value for name, value in self.failures.items()})
        out.update({f"generator_{name}": value for name, value in self.usage.items()})
        if self.cache_hits is not None:
            out["cache_hits"] = self.cache_hits
        return out

    @classmethod
    def take(cls, keys: dict[str, Any]) -> GenerationFigures | None:
        """Take the generation's keys out of ``keys``; None without ``success`` (no generator)."""
        if "success" not in keys:
            return None
        success = keys.pop("success")
        strict_success = keys.pop("strict_success", None)
        status = _with_prefix(keys, "status_")
        failures = _with_prefix(keys, "failures_")
        usage = _with_prefix(keys, "generator_")
        return cls(
            success=success,
            status=status,
            failures=failures,
            usage=usage,
            cache_hits=keys.pop("cache_hits", None),
            strict_success=strict_success,
        )


@dataclass(frozen=True)
class RoundFigures:
    """The figures of one reflection round (:func:`primsel.experiments.reflection.round_figures`),
    each written ``<figure>@<round>`` when not None.

    Parameters
    ----------
    success : fraction of tasks passed by the round.
    calls, cache_hits, requests : generation requests of the round, those answered from the cache,
        and the HTTP requests sent (retries included).
    prompt_tokens, completion_tokens, cumulative_tokens : tokens of the round, and of rounds 1 to
        this one.
    selection_recall : mean set recall of the selections of the round (None without ``reselect``).
    """

    success: float | None = None
    calls: float | None = None
    cache_hits: float | None = None
    requests: float | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    cumulative_tokens: float | None = None
    selection_recall: float | None = None

    def to_json(self, round_number: int) -> dict[str, float]:
        """The report.json keys of round ``round_number`` (1-based)."""
        out = {}
        for name in ROUND_FIGURES:
            value = getattr(self, name)
            if value is not None:
                out[f"{name}@{round_number}"] = value
        return out

    @classmethod
    def take_all(cls, keys: dict[str, Any]) -> tuple[RoundFigures, ...]:
        """Take the rounds 1, 2, ... out of ``keys``, up to the first round with no figure."""
        by_round: dict[int, dict[str, str]] = {}  # round -> figure -> its key
        for key, value in keys.items():
            match = _ROUND_KEY.fullmatch(key)
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if match and is_number:
                by_round.setdefault(int(match[2]), {})[match[1]] = key
        rounds: list[RoundFigures] = []
        while len(rounds) + 1 in by_round:
            figures = by_round[len(rounds) + 1]
            rounds.append(cls(**{name: keys.pop(key) for name, key in figures.items()}))
        return tuple(rounds)


@dataclass(frozen=True)
class AsperaFigures:
    """How the programs were taken from the answers and ASPERA's figures of the run.

    Parameters
    ----------
    extraction : ``"primsel"`` or ``"aspera"``, the extraction rules; None: the generator's own way
        (always written with a generator).
    figures : name of :data:`~primsel.experiments.columns.ASPERA_FIGURES` -> value (None:
        undefined).
    """

    extraction: str | None = None
    figures: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def score(self) -> float | None:
        """ASPERA's score (100 x passed / evaluated, minus refused / all)."""
        return self.figures.get("score")

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of ASPERA's figures."""
        return {"extraction": self.extraction, **self.figures}

    @classmethod
    def take(cls, keys: dict[str, Any]) -> AsperaFigures | None:
        """Take ASPERA's figures out of ``keys``; None without ``extraction`` (no generator)."""
        if "extraction" not in keys:
            return None
        extraction = keys.pop("extraction")
        return cls(extraction=extraction, figures=_named(keys, ASPERA_FIGURES))


@dataclass(frozen=True)
class RunFacts:
    """How the cell ran (None: not recorded).

    Parameters
    ----------
    retrieval_seconds : wall time of the retrieval (s); for a cached one, that of the run that
        computed it.
    retrieval_cached : 1.0 when the retrieval came from the disk cache, else 0.0.
    llm_answers, llm_answers_cached : LLM answers the cell rests on (selector's and generator's),
        and how many came from a cache (None: no LLM).
    incomplete_tasks : tasks whose LLM request failed after its retries.
    complete : False when some did: the next ``primsel run`` computes the cell again.
    seconds : the cell's wall time (s).
    """

    retrieval_seconds: float | None = None
    retrieval_cached: float | None = None
    llm_answers: float | None = None
    llm_answers_cached: float | None = None
    incomplete_tasks: float | None = None
    complete: bool | None = None
    seconds: float | None = None

    _KEYS = (
        "retrieval_seconds",
        "retrieval_cached",
        "llm_answers",
        "llm_answers_cached",
        "incomplete_tasks",
        "complete",
        "seconds",
    )

    def to_json(self) -> dict[str, Any]:
        """The report.json keys of the facts recorded."""
        out = {}
        for name in self._KEYS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def take(cls, keys: dict[str, Any]) -> RunFacts:
        """Take the facts out of ``keys``."""
        return cls(**_named(keys, cls._KEYS))


@dataclass(frozen=True)
class Learning:
    """Which components of the cell learn from tasks (each fitted per fold on the other folds);
    report.json's ``learns``: ``{"retriever": bool, "selector": bool, "generator": bool}``."""

    retriever: bool
    selector: bool = False
    generator: bool = False

    def to_json(self) -> dict[str, bool]:
        """The value of ``learns``."""
        return {"retriever": self.retriever, "selector": self.selector, "generator": self.generator}

    @classmethod
    def take(cls, keys: dict[str, Any], source: str) -> Learning | None:
        """Take ``learns`` out of ``keys`` (None when absent); RunFileError naming ``source`` when
        it is not a table with a boolean ``retriever``."""
        learns = keys.pop("learns", None)
        if learns is None:
            return None
        if not isinstance(learns, Mapping) or not isinstance(learns.get("retriever"), bool):
            raise RunFileError(
                f"{source}: learns must be a table with a boolean 'retriever', got {learns!r}"
            )
        return cls(
            retriever=learns["retriever"],
            selector=bool(learns.get("selector")),
            generator=bool(learns.get("generator")),
        )


@dataclass(frozen=True)
class Frontier:
    """The recall/tokens frontier of the cell's ranking: for k = 1 .. depth, the mean documentation
    ``tokens`` of each task's top k and the mean ``recall`` of it; report.json's ``frontier``.

    Raises
    ------
    ValueError : ``tokens`` and ``recall`` of different lengths.
    """

    tokens: tuple[float, ...]
    recall: tuple[float, ...]

    def __post_init__(self) -> None:
        """Check that the two lists have the same length."""
        if len(self.tokens) != len(self.recall):
            raise ValueError(
                f"frontier: {len(self.tokens)} token values but {len(self.recall)} recall values"
            )

    def to_json(self) -> dict[str, list[float]]:
        """The value of ``frontier``."""
        return {"tokens": list(self.tokens), "recall": list(self.recall)}

    @classmethod
    def take(cls, keys: dict[str, Any], source: str) -> Frontier | None:
        """Take ``frontier`` out of ``keys`` (None when absent); RunFileError naming ``source`` when
        it is not a table of two lists of the same length, ``tokens`` and ``recall``."""
        frontier = keys.pop("frontier", None)
        if frontier is None:
            return None
        lists = isinstance(frontier, Mapping) and all(
            isinstance(frontier.get(k), list) for k in ("tokens", "recall")
        )
        if not lists:
            raise RunFileError(
                f"{source}: frontier must be a table of 'tokens' and 'recall' lists, got {frontier!r}"
            )
        try:
            return cls(tokens=tuple(frontier["tokens"]), recall=tuple(frontier["recall"]))
        except ValueError as exc:
            raise RunFileError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class ReportFile:
    """A cell's ``report.json``: one record per stage (None or empty: the cell had no such stage),
    then what the report reads instead of building anything.

    Parameters
    ----------
    ranking, selection : the ranking and selection figures (every cell).
    selector_usage : an LLM selector's usage (None: no LLM selector).
    generation, rounds, aspera : with a generator, what its programs did, the reflection rounds
        (empty without reflection) and ASPERA's figures (None and empty without a generator).
    run : how the cell ran.
    learning : ``learns``, which components learn from tasks (None: not recorded by the version that
        wrote it).
    frontier : the recall/tokens frontier of the ranking (None: not recorded, or no task with gold
        primitives).
    retrieval_key : the name of the ranking the cell used
        (:func:`primsel.retrieval.store.retrieval_key`).
    extra : keys this version does not know, written back as they are.
    """

    ranking: RankingFigures = field(default_factory=RankingFigures)
    selection: SelectionFigures = field(default_factory=SelectionFigures)
    selector_usage: SelectorUsage | None = None
    generation: GenerationFigures | None = None
    rounds: tuple[RoundFigures, ...] = ()
    aspera: AsperaFigures | None = None
    run: RunFacts = field(default_factory=RunFacts)
    learning: Learning | None = None
    frontier: Frontier | None = None
    retrieval_key: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """False only when the file says ``"complete": false``."""
        return self.run.complete is not False

    @property
    def success(self) -> float | None:
        """Task success, or None without a generator."""
        if self.generation is None:
            return None
        return self.generation.success

    @property
    def docs_tokens(self) -> float | None:
        """Mean documentation tokens of the selection per task."""
        return self.selection.docs_tokens

    def with_seconds(self, seconds: float) -> ReportFile:
        """The same report with the cell's wall time ``seconds``."""
        return replace(self, run=replace(self.run, seconds=seconds))

    def metric(self, name: str) -> float | None:
        """A value a table shows: a ranking metric, a set metric, ``n_tasks``, ``selected``,
        ``closure_added``, ``docs_tokens``, ``success``, an ASPERA figure or a key of :attr:`extra`;
        None when the cell lacks it."""
        if name in self.ranking.values:
            return self.ranking.values[name]
        if name in self.selection.scores:
            return self.selection.scores[name]
        if name in ("n_tasks", "selected", "closure_added", "docs_tokens"):
            return getattr(self.selection, name)
        if name == "success":
            return self.success
        if name == "strict_success":
            if self.generation is None:
                return None
            return self.generation.strict_success
        if self.aspera is not None and name in self.aspera.figures:
            return self.aspera.figures[name]
        return self.extra.get(name)

    def to_json(self) -> dict[str, Any]:
        """The content of report.json."""
        out: dict[str, Any] = {**self.ranking.to_json(), **self.selection.to_json()}
        if self.selector_usage is not None:
            out.update(self.selector_usage.to_json())
        if self.generation is not None:
            out.update(self.generation.to_json())
        for round_number, figures in enumerate(self.rounds, start=1):
            out.update(figures.to_json(round_number))
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
    def from_json(cls, data: Mapping[str, Any], source: str = REPORT_FILE) -> ReportFile:
        """Read the content of a report.json; RunFileError naming ``source`` when ``learns`` or
        ``frontier`` is misshapen. Each stage takes its keys in turn; what no stage took is
        :attr:`extra`."""
        keys = dict(data)
        ranking = RankingFigures.take(keys)
        selection = SelectionFigures.take(keys)
        selector_usage = SelectorUsage.take(keys)
        generation = GenerationFigures.take(keys)
        rounds = RoundFigures.take_all(keys)
        aspera = AsperaFigures.take(keys)
        run = RunFacts.take(keys)
        learning = Learning.take(keys, source)
        frontier = Frontier.take(keys, source)
        retrieval_key = keys.pop("retrieval_key", None)
        return cls(
            ranking=ranking,
            selection=selection,
            selector_usage=selector_usage,
            generation=generation,
            rounds=rounds,
            aspera=aspera,
            run=run,
            learning=learning,
            frontier=frontier,
            retrieval_key=retrieval_key,
            extra=keys,
        )


# ------------------------------------------------------------------------------------------------
# config.json and experiment.json
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigFile:
    """A cell's ``config.json``: what the cell ran and with what.

    Parameters
    ----------
    id : the cell id (required).
    label : its readable label (None: the id).
    experiment : the experiment's name.
    settings : the resolved settings (:meth:`primsel.experiments.settings.CellSettings.to_json`).
    data : the data summary (:meth:`primsel.experiments.dataset.Dataset.summary`).
    effective_folds : the folds used (fewer than asked when there are fewer tasks).
    extraction : with a generator, the extraction rules of its answers (None: the generator's own);
        written only when ``settings`` has a generator.
    embedding : per dense retriever, how its documents fit the model's window
        (:func:`primsel.retrieval.windows.embedding_windows`); written when not empty.
    library : ``n_primitives`` and ``fingerprint`` of the library ranked.
    sources : the source digests of the components named (:meth:`CellSettings.sources`).
    versions : the versions of the packages (:func:`primsel.experiments.runner.package_versions`).
    extra : keys this version does not know.
    """

    id: str
    label: str | None = None
    experiment: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    effective_folds: int | None = None
    extraction: str | None = None
    embedding: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    library: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    versions: Mapping[str, str | None] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The content of config.json."""
        out: dict[str, Any] = {
            "id": self.id,
            "label": self.label,
            "experiment": self.experiment,
            "settings": dict(self.settings),
            "data": dict(self.data),
            "effective_folds": self.effective_folds,
        }
        if self.settings.get("generator"):
            out["extraction"] = self.extraction
        if self.embedding:
            out["embedding"] = dict(self.embedding)
        out.update(
            library=dict(self.library), sources=dict(self.sources), versions=dict(self.versions)
        )
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = CONFIG_FILE) -> ConfigFile:
        """Read the content of a config.json; RunFileError naming ``source`` without ``id`` or when
        a table key is not a table."""
        if "id" not in data:
            raise RunFileError(f"{source}: no 'id'")
        keys = dict(data)
        tables = {
            name: _table(keys, name, source)
            for name in ("settings", "data", "embedding", "library", "sources", "versions")
        }
        for name in (*tables, "id", "label", "experiment", "effective_folds", "extraction"):
            keys.pop(name, None)
        return cls(
            id=data["id"],
            label=data.get("label"),
            experiment=data.get("experiment"),
            effective_folds=data.get("effective_folds"),
            extraction=data.get("extraction"),
            **tables,
            extra=keys,
        )


@dataclass(frozen=True)
class ManifestCell:
    """A cell as ``experiment.json`` lists it: its ``id`` (required), ``label`` (None: the id),
    resolved ``settings``, ``folder`` (the name of its directory; None: the id, as every cell
    folder was named before components had labels; written only when it is not the id) and
    ``extra``, keys this version does not know."""

    id: str
    label: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    folder: str | None = None

    @property
    def directory_name(self) -> str:
        """The name of the cell's directory in the experiment directory."""
        return self.id if self.folder is None else self.folder

    def to_json(self) -> dict[str, Any]:
        """The entry as experiment.json's ``cells`` holds it."""
        out = {"id": self.id, "label": self.label, "settings": dict(self.settings)}
        if self.folder is not None and self.folder != self.id:
            out["folder"] = self.folder
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Any, source: str = EXPERIMENT_FILE) -> ManifestCell:
        """Read an entry of ``cells``; RunFileError naming ``source`` when it is not a table, has no
        ``id``, its ``id`` is not the name of one folder (letters, digits, ``_``, ``.`` and ``-``,
        starting with a letter or digit: the id names the cell's folder, so ``../x`` or an
        absolute path would lead outside the run) or its ``settings`` is not a table."""
        if not isinstance(data, Mapping):
            raise RunFileError(f"{source}: a cell entry must be a table, got {data!r}")
        if "id" not in data:
            raise RunFileError(f"{source}: a cell entry without 'id': {data!r}")
        cell_id = data["id"]
        if not isinstance(cell_id, str) or _CELL_ID.fullmatch(cell_id) is None:
            raise RunFileError(
                f"{source}: the cell id {cell_id!r} is not the name of a cell folder (letters, "
                "digits, '_', '.' and '-', starting with a letter or digit, at most 128)"
            )
        known = ("id", "label", "settings", "folder")
        extra = {key: value for key, value in data.items() if key not in known}
        folder = data.get("folder")
        if folder is not None and not _is_folder_name(folder):
            raise RunFileError(f"{source}: cell {cell_id!r}: 'folder' {folder!r} is not a name")
        return cls(
            id=data["id"],
            label=data.get("label"),
            settings=_table(data, "settings", source),
            extra=extra,
            folder=folder,
        )


def _is_folder_name(value: Any) -> bool:
    """True for a directory name of one part (no separator, not ``.`` or ``..``)."""
    if not isinstance(value, str) or value in ("", ".", ".."):
        return False
    return "/" not in value and "\\" not in value


@dataclass(frozen=True)
class ManifestFile:
    """An ``experiment.json``: the experiment as run.

    Parameters
    ----------
    cells : the cells in grid order (required).
    name : the experiment's name (None: the directory's).
    description, baseline : as the experiment file gives them.
    data : the data summary (several datasets: sources and fingerprints joined by ``+``, tasks
        summed).
    grids : each grid, dotted key -> values.
    datasets : with several datasets, each one's summary and notes; written when not empty.
    notes : with one dataset, what its loader merged or dropped; written when not empty.
    pair_on : the settings a cell shares with its baseline cell (None: all but the retriever);
        written when set.
    extra : keys this version does not know.
    """

    cells: tuple[ManifestCell, ...]
    name: str | None = None
    description: str | None = None
    baseline: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    grids: tuple[Mapping[str, Any], ...] = ()
    datasets: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    pair_on: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The content of experiment.json."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "baseline": self.baseline,
            "data": dict(self.data),
            "grids": [dict(grid) for grid in self.grids],
            "cells": [cell.to_json() for cell in self.cells],
        }
        if self.datasets:
            out["datasets"] = [dict(dataset) for dataset in self.datasets]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.pair_on is not None:
            out["pair_on"] = list(self.pair_on)
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = EXPERIMENT_FILE) -> ManifestFile:
        """Read the content of an experiment.json; RunFileError naming ``source`` without ``cells``
        or when a key has the wrong shape."""
        if "cells" not in data:
            raise RunFileError(f"{source}: no 'cells'")
        entries = _list(data, "cells", source, object, "a list")
        cells = tuple(ManifestCell.from_json(entry, source) for entry in entries or ())
        known = (
            "name",
            "description",
            "baseline",
            "data",
            "grids",
            "cells",
            "datasets",
            "notes",
            "pair_on",
        )
        return cls(
            cells=cells,
            name=data.get("name"),
            description=data.get("description"),
            baseline=data.get("baseline"),
            data=_table(data, "data", source),
            grids=_list(data, "grids", source, Mapping, "a list of tables") or (),
            datasets=_list(data, "datasets", source, Mapping, "a list of tables") or (),
            notes=_list(data, "notes", source, str, "a list of strings") or (),
            pair_on=_list(data, "pair_on", source, str, "a list of strings"),
            extra={key: value for key, value in data.items() if key not in known},
        )


# ------------------------------------------------------------------------------------------------
# tasks.jsonl
# ------------------------------------------------------------------------------------------------
def answer_tokens(usage: Mapping[str, Any]) -> dict[str, int]:
    """The ``prompt``, ``completion`` and ``prompt_cached`` tokens of an answer as a task row holds
    them, from its generator's usage (:attr:`primsel.types.Program.usage`; 0 for what it lacks)."""
    return {
        "prompt": usage.get("prompt_tokens", 0),
        "completion": usage.get("completion_tokens", 0),
        "prompt_cached": usage.get("prompt_tokens_cached", 0),
    }


@dataclass(frozen=True)
class RoundEntry:
    """One reflection round of a task (:func:`primsel.experiments.reflection.run_rounds`).

    Parameters
    ----------
    round : the round, from 1.
    status, error_type, message, line : the round's status (the execution's, else the program's),
        and the error's class, message and line in the program.
    program_status, program : the program's status (``ok``, ``truncated``, ``llm_error``, ...) and
        text.
    tokens : ``prompt``, ``completion`` and ``prompt_cached`` tokens of the round's answer.
    cached : the answer came from the answer cache.
    category, feedback : the diagnosis of the round's failure and the feedback sent for the next
        round (None when none was sent).
    selection, set_recall : with ``reselect``, the round's selection and its set recall (else None:
        not written).
    """

    round: int
    status: str | None
    error_type: str | None = None
    message: str | None = None
    line: int | None = None
    program_status: str | None = None
    program: str | None = None
    tokens: Mapping[str, int] = field(default_factory=dict)
    cached: bool = False
    category: str | None = None
    feedback: str | None = None
    selection: tuple[str, ...] | None = None
    set_recall: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry as a task row's ``rounds`` holds it."""
        out: dict[str, Any] = {
            "round": self.round,
            "status": self.status,
            "error_type": self.error_type,
            "message": self.message,
            "line": self.line,
            "program_status": self.program_status,
            "program": self.program,
            "tokens": dict(self.tokens),
            "cached": self.cached,
            "category": self.category,
            "feedback": self.feedback,
        }
        if self.selection is not None:
            out["selection"] = list(self.selection)
            out["set_recall"] = self.set_recall
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundEntry:
        """Read an entry of a task row's ``rounds`` (missing keys as their defaults)."""
        selection = data.get("selection")
        return cls(
            round=int(data.get("round", 1)),
            status=data.get("status"),
            error_type=data.get("error_type"),
            message=data.get("message"),
            line=data.get("line"),
            program_status=data.get("program_status"),
            program=data.get("program"),
            tokens=dict(data.get("tokens") or {}),
            cached=bool(data.get("cached", False)),
            category=data.get("category"),
            feedback=data.get("feedback"),
            selection=None if selection is None else tuple(selection),
            set_recall=data.get("set_recall"),
        )


@dataclass(frozen=True)
class ProgramOutcome:
    """What became of a task's generated program: the generation part of a task row.

    Parameters
    ----------
    status : the task's status: the execution's (``pass``, ``fail``, ``error``, ...) or, for a
        program not executed, the program's (``truncated``, ``llm_error``, ``no_program``).
    error_type, message : the error's class and message (the failed request's text for
        ``llm_error``).
    program_status, program : the program's status and text.
    tokens : ``prompt``, ``completion``, ``prompt_cached`` tokens of the answer (over every round
        with rounds).
    generation_seconds, seconds : time to get the answer and to execute the program.
    called_primitives : the library primitives the program called.
    attribution : the diagnosis of a task that did not pass
        (:func:`primsel.eval.attribution.attribute`).
    extraction, dropped_lines, parse_failure : how the program was taken from the answer (the mode,
        the module-level lines removed, ASPERA's parser failure).
    import_lenient_status : the status of the program re-run with lenient imports (ASPERA's figure).
    prompt_digest : the answer-cache key of the request the answer came from (a chat generator's;
        "": none, not written), what exported answers are filed under (:mod:`primsel.llm.answers`).
    collateral : the collateral audit of the executed program (:attr:`primsel.types.ExecutionResult.collateral`:
        rows of the task's world it removed or changed that the reference program left alone); None: not
        executed, or a row written before the audit (not written). ``strict`` (passed and collateral 0) is
        written beside it.
    aspera_selection, aspera_gold : under ASPERA's protocol, the symbol names ASPERA's
        primitive-selection metric compares (:mod:`primsel.eval.aspera`): the selected symbols'
        (none for the CCK agent) and those its substring rule finds in the reference program (None:
        not under the protocol, not written).
    """

    status: str
    error_type: str | None = None
    message: str | None = None
    program_status: str | None = None
    program: str | None = None
    tokens: Mapping[str, int] = field(default_factory=dict)
    generation_seconds: float = 0.0
    seconds: float = 0.0
    called_primitives: tuple[str, ...] = ()
    attribution: Mapping[str, Any] | None = None
    extraction: str | None = None
    dropped_lines: tuple[Any, ...] = ()
    parse_failure: str | None = None
    import_lenient_status: str | None = None
    prompt_digest: str = ""
    collateral: int | None = None
    aspera_selection: tuple[str, ...] | None = None
    aspera_gold: tuple[str, ...] | None = None

    @property
    def passed(self) -> bool:
        """True when the task passed."""
        return self.status == "pass"

    @property
    def strict(self) -> bool | None:
        """Passed without collateral (None when the audit did not run)."""
        if self.collateral is None:
            return None
        return self.passed and self.collateral == 0

    def to_json(self) -> dict[str, Any]:
        """The row's keys of the program (``prompt_digest``, ``aspera_selection`` and
        ``aspera_gold`` only when set)."""
        out: dict[str, Any] = {
            "status": self.status,
            "error_type": self.error_type,
            "message": self.message,
            "program_status": self.program_status,
            "program": self.program,
            "tokens": dict(self.tokens),
            "generation_seconds": self.generation_seconds,
            "seconds": self.seconds,
            "called_primitives": list(self.called_primitives),
            "attribution": None if self.attribution is None else dict(self.attribution),
            "extraction": self.extraction,
            "dropped_lines": list(self.dropped_lines),
            "parse_failure": self.parse_failure,
            "import_lenient_status": self.import_lenient_status,
        }
        if self.prompt_digest:
            out["prompt_digest"] = self.prompt_digest
        if self.collateral is not None:
            out["collateral"] = self.collateral
            out["strict"] = self.strict
        if self.aspera_selection is not None:
            out["aspera_selection"] = list(self.aspera_selection)
        if self.aspera_gold is not None:
            out["aspera_gold"] = list(self.aspera_gold)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProgramOutcome:
        """Read the program's keys of a row (missing keys as their defaults)."""
        return cls(
            status=data["status"],
            error_type=data.get("error_type"),
            message=data.get("message"),
            program_status=data.get("program_status"),
            program=data.get("program"),
            tokens=dict(data.get("tokens") or {}),
            generation_seconds=data.get("generation_seconds", 0.0),
            seconds=data.get("seconds", 0.0),
            called_primitives=tuple(data.get("called_primitives") or ()),
            attribution=data.get("attribution"),
            extraction=data.get("extraction"),
            dropped_lines=tuple(data.get("dropped_lines") or ()),
            parse_failure=data.get("parse_failure"),
            import_lenient_status=data.get("import_lenient_status"),
            prompt_digest=data.get("prompt_digest") or "",
            collateral=data.get("collateral"),
            aspera_selection=_optional_names(data.get("aspera_selection")),
            aspera_gold=_optional_names(data.get("aspera_gold")),
        )


def _optional_names(value: Any) -> tuple[str, ...] | None:
    """A list of names as a tuple; None stays None."""
    if value is None:
        return None
    return tuple(value)


_PROGRAM_KEYS = tuple(ProgramOutcome.__dataclass_fields__)


@dataclass(frozen=True)
class TaskRow:
    """One line of ``tasks.jsonl``: a task of a cell.

    Parameters
    ----------
    task_id : the task.
    fold : its cross-validation fold (None: not recorded).
    selection : the primitives selected (the first round's, with rounds).
    closure_added : those the type closure added.
    gold : the task's gold primitives, sorted.
    metrics : per-task ranking metrics (:data:`~primsel.experiments.columns.TASK_METRICS`, the
        cell's ``recall@k``, ``complete@k`` and ``metrics``) and ``set_precision``, ``set_recall``,
        ``set_f1`` of the selection.
    docs_tokens : documentation tokens of the selection.
    selection_usage : an LLM selector's usage for the task (None: no LLM selector; not written).
    program : with a generator, what became of the task's program (None: no generator; not written).
    rounds : with reflection rounds, one entry per round the task ran (None: not written).
    extra : keys this version does not know.
    """

    task_id: str
    fold: int | None = None
    selection: tuple[str, ...] = ()
    closure_added: tuple[str, ...] = ()
    gold: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    docs_tokens: float = 0
    selection_usage: Mapping[str, float] | None = None
    program: ProgramOutcome | None = None
    rounds: tuple[RoundEntry, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        """The task's value of a per-task ``metric`` (a key of :attr:`metrics`), ``docs_tokens``, or
        ``success`` (1.0 when the task passed, 0.0 when not); None when the row lacks it
        (``success`` without a generator)."""
        if metric == "success":
            if self.program is None:
                return None
            return float(self.program.passed)
        if metric == "docs_tokens":
            return float(self.docs_tokens)
        value = self.metrics.get(metric)
        if value is None:
            return None
        return float(value)

    def passed_by_round(self, last: int) -> bool:
        """True when the task passed in a round up to ``last`` (without rounds: when it passed)."""
        if self.rounds is None:
            return self.program is not None and self.program.passed
        return any(entry.status == "pass" for entry in self.rounds if entry.round <= last)

    def to_json(self) -> dict[str, Any]:
        """The line's object, keys in the order the cell has always written them."""
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "fold": self.fold,
            "selection": list(self.selection),
            "closure_added": list(self.closure_added),
            "gold": list(self.gold),
            "metrics": dict(self.metrics),
            "docs_tokens": self.docs_tokens,
        }
        if self.selection_usage is not None:
            out["selection_usage"] = dict(self.selection_usage)
        if self.program is not None:
            out.update(self.program.to_json())
        if self.rounds is not None:
            out["rounds"] = [entry.to_json() for entry in self.rounds]
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Any, source: str = TASKS_FILE) -> TaskRow:
        """Read a line's object (keys an older version did not write as their defaults);
        RunFileError naming ``source`` when it is not an object with a ``task_id``, or ``metrics``
        is not a table."""
        if not isinstance(data, Mapping) or "task_id" not in data:
            raise RunFileError(
                f"{source}: a task row must be an object with a 'task_id', got {data!r}"[:300]
            )
        program = ProgramOutcome.from_json(data) if "status" in data else None
        rounds = data.get("rounds")
        usage = data.get("selection_usage")
        extra = {
            key: value
            for key, value in data.items()
            if key not in _row_keys() and key not in _PROGRAM_KEYS
        }
        return cls(
            task_id=str(data["task_id"]),
            fold=data.get("fold"),
            selection=tuple(data.get("selection") or ()),
            closure_added=tuple(data.get("closure_added") or ()),
            gold=tuple(data.get("gold") or ()),
            metrics=_table(data, "metrics", source),
            docs_tokens=data.get("docs_tokens", 0),
            selection_usage=None if usage is None else dict(usage),
            program=program,
            rounds=None
            if rounds is None
            else tuple(RoundEntry.from_json(entry) for entry in rounds),
            extra=extra,
        )


def _row_keys() -> tuple[str, ...]:
    """The keys of a task row besides those of its program: :class:`TaskRow`'s fields, but the
    program (its keys are the row's own) and ``extra``."""
    return tuple(name for name in TaskRow.__dataclass_fields__ if name not in ("program", "extra"))
