"""An experiment's run folder: ``experiment.json``, a cell's ``config.json`` and ``report.json`` as typed
records, one writer and one reader each (``from_json(x).to_json() == x``, unknown keys in ``extra``);
:func:`load_experiment`, the reader of a folder that builds no component; the names of every metric reported."""

from __future__ import annotations

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
from primsel.eval.frontier import depth_of, ranked_tasks, recall_by_k
from primsel.files import read_jsonl
from primsel.types import STATUSES

CURVE_KS = tuple(range(1, 21))  #: Cut-offs of the recall@k curve every cell reports.
REPORT_KS = (5, 10, 15, 20)  #: Cut-offs of complete@k, of the per-task metrics and of the table of ties.
#: Ranking metrics every cell reports (plus ``recall@k`` and ``complete@k`` of the cell's k).
BASE_METRICS = (*(f"recall@{k}" for k in CURVE_KS), *(f"complete@{k}" for k in REPORT_KS), "ndcg@10", "mrr")
#: Per-task ranking metrics kept in tasks.jsonl (the cell's ``recall@k`` / ``complete@k`` too).
TASK_METRICS = (*(f"recall@{k}" for k in REPORT_KS), *(f"complete@{k}" for k in REPORT_KS), "ndcg@10", "mrr")
#: Ranking metrics ``primsel retrieve`` prints.
RANKING_METRICS = (*(f"recall@{k}" for k in REPORT_KS), "ndcg@10", "mrr", "complete@10", "complete@15", "complete@20")
TIE_AWARE = "tie_aware_"  #: Prefix of the tie-aware value of a ranking metric (``tie_aware_recall@10``).
#: Set metrics of a selection (:data:`primsel.eval.metrics.SET_METRIC_KEYS`).
SET_METRICS = ("set_precision_micro", "set_recall_micro", "set_f1_micro",
               "set_precision_macro", "set_recall_macro", "set_f1_macro")
#: Statuses of a task with a generator: the execution statuses, then those of a program not executed.
TASK_STATUSES = tuple(dict.fromkeys((*STATUSES, "truncated", "llm_error")))
#: Selector usage summed into report.json as ``selector_<name>`` (``cached`` as ``selector_cache_hits``).
SELECTOR_USAGE = ("prompt_tokens", "completion_tokens", "seconds", "calls", "errors", "unknown_names", "cached")
#: ASPERA's figures of a generator run (:func:`primsel.eval.aspera.aspera_figures`).
ASPERA_FIGURES = ("score", "parse_failures", "parser_failure_rate", "solution_error_rate",
                  "handback_control_error_rate", "handback_control_error_rate_normalise", "execution_error_count",
                  "bad_import_error_rate", "import_lenient_score", "primitives_selection_macro_f1",
                  "primitives_selection_micro_f1", "primitives_selection_micro_precision",
                  "primitives_selection_micro_recall")
#: Figures of a reflection round r, written ``<figure>@r`` (:func:`primsel.experiments.reflection.round_figures`).
ROUND_FIGURES = ("success", "calls", "cache_hits", "requests", "prompt_tokens", "completion_tokens",
                 "cumulative_tokens", "selection_recall")
#: The report's table of cells: (metric, header).
TABLE_COLUMNS = (("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@15", "R@15"), ("recall@20", "R@20"),
                 ("complete@10", "C@10"), ("complete@15", "C@15"), ("complete@20", "C@20"), ("ndcg@10", "nDCG@10"),
                 ("mrr", "MRR"), ("set_precision_micro", "P mi"), ("set_recall_micro", "R mi"),
                 ("set_f1_micro", "F1 mi"), ("set_precision_macro", "P ma"), ("set_recall_macro", "R ma"),
                 ("set_f1_macro", "F1 ma"), ("docs_tokens", "tokens"))
RANKED_COLUMNS = tuple(c for c in TABLE_COLUMNS if c[0] in RANKING_METRICS)  #: Shown in id order and tie-aware.
#: Metrics of the summary tables of an experiment on several datasets: (metric, header).
SUMMARY_METRICS = (("recall@5", "recall@5"), ("ndcg@10", "nDCG@10"), ("complete@5", "complete@5"))
#: Columns of the summary ``primsel run`` prints: (metric, header).
SUMMARY_COLUMNS = (("recall@10", "R@10"), ("recall@15", "R@15"), ("complete@20", "C@20"), ("mrr", "MRR"),
                   ("set_f1_macro", "F1 ma"), ("docs_tokens", "tokens"))
#: Metrics of the leaderboard besides recall@15: (metric, header, decimals).
LEADER_COLUMNS = (("complete@20", "C@20", 3), ("ndcg@10", "nDCG@10", 3), ("set_recall_macro", "R sel", 3),
                  ("docs_tokens", "tokens", 1))
#: Metrics of the explorer's table of cells: (metric, header).
EXPLORER_COLUMNS = (("recall@5", "R@5"), ("recall@10", "R@10"), ("recall@15", "R@15"), ("recall@20", "R@20"),
                    ("complete@10", "C@10"), ("complete@20", "C@20"), ("ndcg@10", "nDCG@10"), ("mrr", "MRR"),
                    ("set_f1_macro", "set F1"), ("docs_tokens", "doc tokens"), ("success", "success"))

#: A ranking metric's name (kept as one without a tie-aware partner).
_RANKING_NAME = re.compile(r"(recall|complete|ndcg|precision|map|mrr|hit_rate|r_precision)@\d+|mrr|map")
_ROUND_KEY = re.compile(r"(" + "|".join(ROUND_FIGURES) + r")@(\d+)")


class ReportError(ValueError):
    """A directory that is not a readable experiment directory (the message names the file)."""


class RunFileError(ReportError):
    """A config.json or experiment.json not valid JSON, not an object, or lacking or misshaping a key."""


_ALWAYS, _SET, _FILLED = (lambda r, v: True), (lambda r, v: v is not None), (lambda r, v: bool(v))
#: What a run file's field must be when present: (type, type of its items or None), by name.
_SHAPES = {"a table": (Mapping, None), "a list": (list, object), "a list of tables": (list, Mapping),
           "a list of strings": (list, str)}


def _keys(prefix: str = "", names: tuple[str, ...] = (), **renamed: str) -> Any:
    """A mapping field written as keys ``prefix + name`` (or ``renamed[name]``), read from ``names`` or ``prefix``."""
    return field(default_factory=dict, metadata={"prefix": prefix, "names": names,
                                                 "key": lambda name: renamed.get(name, f"{prefix}{name}")})


def _file(shape: str | None = None, when: Callable[[Any, Any], bool] = _ALWAYS, default: Any = None,
          kw_only: bool = False, **more: Any) -> Any:
    """A field of a run file: its shape, when written, default, and ``required``, ``each`` or ``derived``."""
    given = {} if more.get("required") else {"default_factory": dict} if shape == "a table" else {"default": default}
    return field(**given, kw_only=kw_only, metadata={"shape": shape, "when": when, **more})


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: a record its keys, a mapping a dict, a tuple or list a list."""
    return value.to_json() if isinstance(value, _Record) else dict(value) if isinstance(value, Mapping) else [
        _plain(x) for x in value] if isinstance(value, (tuple, list)) else value


class _Record:
    """A record written as the keys of a JSON object: a :func:`_keys` field as its keys, another under its
    name when its ``when`` holds (default :attr:`_WHEN`), then ``extra`` if it has one."""
    _WHEN = _SET

    def to_json(self) -> dict[str, Any]:
        """The record as the keys of its file's JSON object, in field order, then ``extra``."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if "key" in f.metadata:
                out.update({f.metadata["key"](name): v for name, v in value.items()})
            elif f.name != "extra" and f.metadata.get("when", type(self)._WHEN)(self, value):
                out[f.name] = _plain(value)
        return {**out, **getattr(self, "extra", {})}

    @classmethod
    def _take(cls, rest: dict[str, Any], source: str | None = None) -> Any:
        """The record of the keys of ``rest`` it knows, taken out of it (``extra``: the rest); RunFileError
        naming ``source`` when a ``required`` key is missing or one has the wrong shape."""
        values: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            meta, required, shape = f.metadata, f.metadata.get("required"), f.metadata.get("shape")
            if "key" in meta:
                prefix, key = meta["prefix"], meta["key"]
                names = meta["names"] or [k[len(prefix):] for k in rest if k.startswith(prefix)]
                values[f.name] = {n: rest.pop(key(n)) for n in names if key(n) in rest}
            elif f.name == "extra" or "derived" in meta:
                values[f.name] = rest if f.name == "extra" else meta["derived"](rest)
            elif required and f.name not in rest:
                raise RunFileError(f"{source}: no {f.name!r}")
            elif (value := rest.pop(f.name, None)) is not None or required:
                if shape is not None:
                    kind, item = _SHAPES[shape]
                    if not isinstance(value, kind) or not (item is None or all(isinstance(x, item) for x in value)):
                        raise RunFileError(f"{source}: {f.name!r} must be {shape}, got {value!r}")
                    value = dict(value) if item is None else tuple(
                        meta["each"].from_json(x, source) if "each" in meta else _plain(x) for x in value)
                values[f.name] = value
        return cls(**values)


@dataclass(frozen=True)
class Ranking(_Record):
    """Ranking metrics, means over tasks (tied scores in primitive-id order, and ``tie_aware``: over
    every order), and ``tied_tasks``: k -> tasks with a tie across rank k."""
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
class SelectionFigures(_Record):
    """Means over ``n_tasks`` tasks of primitives selected and added by the type closure, documentation
    tokens (characters / 4), and :data:`SET_METRICS` (``scores``)."""
    n_tasks: int | None = None
    selected: float | None = None
    closure_added: float | None = None
    docs_tokens: float | None = None
    scores: Mapping[str, float] = _keys(names=SET_METRICS)

    @property
    def recall_macro(self) -> float | None:
        """Mean over tasks of the share of gold primitives selected."""
        return self.scores.get("set_recall_macro")

    @property
    def f1_macro(self) -> float | None:
        """Mean over tasks of the selection's F1."""
        return self.scores.get("set_f1_macro")


@dataclass(frozen=True)
class SelectorUsage(_Record):
    """An LLM selector's usage summed over tasks (:data:`SELECTOR_USAGE`; ``cached``: cache answers)."""
    values: Mapping[str, float] = _keys("selector_", SELECTOR_USAGE, cached="selector_cache_hits")


@dataclass(frozen=True)
class Generation(_Record):
    """Fraction of tasks passed, per ``status`` (:data:`TASK_STATUSES`), tasks per failure category, the
    generators' ``usage`` summed, and answers from the answer cache (None: not counted)."""
    success: float = field(metadata={"when": _ALWAYS, "required": True})
    status: Mapping[str, float] = _keys("status_")
    failures: Mapping[str, float] = _keys("failures_")
    usage: Mapping[str, float] = _keys("generator_")
    cache_hits: float | None = None


@dataclass(frozen=True)
class Round(_Record):
    """The figures of a reflection round (:func:`primsel.experiments.reflection.round_figures`)."""
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

    @classmethod
    def _take_all(cls, rest: dict[str, Any]) -> tuple[Round, ...]:
        """The rounds 1, 2, ... of a report (up to the first missing one), taken out of ``rest``."""
        found: dict[int, dict[str, str]] = {}  # round -> figure -> its key
        for key, value in rest.items():
            match = _ROUND_KEY.fullmatch(key)
            if match and isinstance(value, (int, float)) and not isinstance(value, bool):
                found.setdefault(int(match[2]), {})[match[1]] = key
        rounds: list[Round] = []
        while len(rounds) + 1 in found:
            rounds.append(cls(**{name: rest.pop(key) for name, key in found[len(rounds) + 1].items()}))
        return tuple(rounds)


@dataclass(frozen=True)
class Aspera(_Record):
    """How programs were taken from the answers (None: the generator's own way) and ASPERA's ``figures``."""
    extraction: str | None = field(default=None, metadata={"when": _ALWAYS})
    figures: Mapping[str, float | None] = _keys(names=ASPERA_FIGURES)

    @property
    def score(self) -> float | None:
        """ASPERA's score (100 x passed / evaluated, minus refused / all)."""
        return self.figures.get("score")


@dataclass(frozen=True)
class RunFacts(_Record):
    """How the cell ran: wall times (s) of the retrieval (1.0 ``retrieval_cached``) and of the cell, LLM
    answers used and cached (None: no LLM), tasks whose LLM request failed, and ``complete`` (False then)."""
    retrieval_seconds: float | None = None
    retrieval_cached: float | None = None
    llm_answers: float | None = None
    llm_answers_cached: float | None = None
    incomplete_tasks: float | None = None
    complete: bool | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Learning(_Record):
    """Which components learn from tasks, fitted per fold on the other folds (``learns``)."""
    retriever: bool
    selector: bool = False
    generator: bool = False


@dataclass(frozen=True)
class FrontierFigures(_Record):
    """Mean documentation ``tokens`` and ``recall`` of the ranking's top k, for k = 1 .. depth."""
    tokens: tuple[float, ...]
    recall: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.recall):
            raise ValueError(f"frontier: {len(self.tokens)} token values but {len(self.recall)} recall values")


@dataclass(frozen=True)
class CellReport:
    """A cell's report.json, a record per stage (None or empty: no such stage), ``learning``, ``frontier``
    and ``retrieval_key`` (None: not recorded) and ``extra``, unknown keys."""
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
        """A metric of the tables: a ranking, set or selection figure, ``success``, an ASPERA figure, or
        a key of :attr:`extra` (None when the cell lacks it)."""
        figures = {**self.extra, **(self.aspera.figures if self.aspera is not None else {}), "success": self.success,
                   **{n: getattr(self.selection, n) for n in ("n_tasks", "selected", "closure_added", "docs_tokens")}}
        return {**figures, **self.ranking.values, **self.selection.scores}.get(name)

    def to_json(self) -> dict[str, Any]:
        """report.json: every record's keys, ``learns``, ``frontier``, ``retrieval_key``, then :attr:`extra`."""
        rounds = [figures.to_json(r) for r, figures in enumerate(self.rounds, start=1)]
        stages = (self.ranking, self.selection, self.selector_usage, self.generation, *rounds, self.aspera, self.run)
        recorded = {"learns": self.learning, "frontier": self.frontier, "retrieval_key": self.retrieval_key}
        out = {key: value for part in stages if part is not None for key, value in _plain(part).items()}
        return {**out, **{key: _plain(value) for key, value in recorded.items() if value is not None}, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CellReport:
        """Read a report.json (None: empty); ValueError when ``learns`` or ``frontier`` is misshapen."""
        rest = dict(data or {})
        learns, frontier = rest.pop("learns", None), rest.pop("frontier", None)
        if learns is not None and not (isinstance(learns, Mapping) and isinstance(learns.get("retriever"), bool)):
            raise ValueError(f"learns must be a table with a boolean 'retriever', got {learns!r}")
        if frontier is not None and not (isinstance(frontier, Mapping) and all(
                isinstance(frontier.get(k), Sequence) for k in ("tokens", "recall"))):
            raise ValueError(f"frontier must be a table of 'tokens' and 'recall' lists, got {frontier!r}")
        values = {k: rest.pop(k) for k in [k for k in rest if TIE_AWARE + k in rest or _RANKING_NAME.fullmatch(k)]}
        tie_aware = {k[len(TIE_AWARE):]: rest.pop(k) for k in [k for k in rest if k.startswith(TIE_AWARE)]}
        tied = {int(k[11:]): rest.pop(k) for k in [k for k in rest if k.startswith("tied_tasks@") and k[11:].isdigit()]}
        return cls(ranking=Ranking(values, tie_aware, tied), selection=SelectionFigures._take(rest),
                   selector_usage=usage if (usage := SelectorUsage._take(rest)).values else None,
                   generation=Generation._take(rest) if "success" in rest else None, rounds=Round._take_all(rest),
                   aspera=Aspera._take(rest) if "extraction" in rest else None, run=RunFacts._take(rest),
                   learning=learns and Learning(*(bool(learns.get(k)) for k in ("retriever", "selector", "generator"))),
                   frontier=frontier and FrontierFigures(tuple(frontier["tokens"]), tuple(frontier["recall"])),
                   retrieval_key=rest.pop("retrieval_key", None), extra=rest)


def _read_object(path: str | Path, missing: bool = False) -> dict[str, Any] | None:
    """The JSON object of a file (``missing``: None when absent, ReportError instead of OSError)."""
    try:
        if not isinstance(value := json.loads(Path(path).read_text(encoding="utf-8")), dict):
            raise ValueError("not a JSON object")
    except OSError as exc:
        if not missing:
            raise
        if isinstance(exc, FileNotFoundError):
            return None
        raise ReportError(f"{path}: unreadable: {exc}") from None
    except ValueError as exc:  # invalid JSON or UTF-8, or not an object
        raise RunFileError(f"{path}: unreadable: {exc}") from None
    return value


class _File(_Record):
    """The record of a run file: one field per key in the order written, then ``extra`` (unknown keys)."""
    _NAME = "experiment.json"
    _WHEN = _ALWAYS

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str | None = None) -> Any:
        """Read the file's object; RunFileError naming ``source`` (default: the file) for a bad key."""
        return cls._take(dict(data), source or cls._NAME)

    @classmethod
    def read(cls, path: str | Path) -> Any:
        """Read the file at ``path``: OSError, or RunFileError when it holds no JSON object or a bad key."""
        return cls.from_json(_read_object(path), source=str(path))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CellConfig(_File):
    """A cell's ``config.json``: id, label (None: the id), experiment, resolved settings, data summary,
    effective folds, with a generator the extraction, each dense retriever's ``embedding``
    (:func:`primsel.retrieval.windows.embedding_windows`), the library, ``sources`` and package versions."""
    _NAME = "config.json"
    id: str = _file(required=True)
    label: str | None = None
    experiment: str | None = None
    settings: Mapping[str, Any] = _file("a table")
    data: Mapping[str, Any] = _file("a table")
    effective_folds: int | None = None
    generated: bool = _file(when=lambda r, v: False, default=False, derived=lambda data: "extraction" in data)
    extraction: str | None = _file(when=lambda r, v: r.generated)
    embedding: Mapping[str, Mapping[str, Any]] = _file("a table", _FILLED)
    library: Mapping[str, Any] = _file("a table")
    sources: Mapping[str, Mapping[str, str]] = _file("a table")
    versions: Mapping[str, str | None] = _file("a table")
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CellEntry(_File):
    """A cell as experiment.json lists it: its id, label (None: the id) and resolved settings."""
    id: str = _file(required=True)
    label: str | None = None
    settings: Mapping[str, Any] = _file("a table")
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, source: str | None = None) -> CellEntry:
        """Read an entry of ``cells``: RunFileError when not a table, without ``id``, or bad ``settings``."""
        if not isinstance(data, Mapping) or "id" not in data:
            what = "without 'id':" if isinstance(data, Mapping) else "must be a table, got"
            raise RunFileError(f"{source or cls._NAME}: a cell entry {what} {data!r}")
        return super().from_json(data, source)


@dataclass(frozen=True)
class ExperimentManifest(_File):
    """An ``experiment.json``: name (None: the directory's), description, baseline, data (several datasets
    joined by ``+``), grids, cells in grid order, ``datasets`` (several) or ``notes`` (one), ``pair_on``."""
    name: str | None = None
    description: str | None = None
    baseline: str | None = None
    data: Mapping[str, Any] = _file("a table")
    grids: tuple[Mapping[str, Any], ...] = _file("a list of tables", default=())
    cells: tuple[CellEntry, ...] = _file("a list", required=True, each=CellEntry, kw_only=True)
    datasets: tuple[Mapping[str, Any], ...] = _file("a list of tables", _FILLED, ())
    notes: tuple[str, ...] = _file("a list of strings", _FILLED, ())
    pair_on: tuple[str, ...] | None = _file("a list of strings", _SET)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CellResult:
    """A cell as read from disk: id (directory name), label, settings, report.json (none: empty), directory."""
    id: str
    label: str
    settings: Mapping[str, Any]
    report: Mapping[str, float]
    directory: Path

    @cached_property
    def record(self) -> CellReport:
        """report.json as a typed record (ValueError: ``learns`` or ``frontier`` of the wrong shape)."""
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

    def _unrecorded(self, key: str) -> ReportError:
        return ReportError(f"cell {self.id}: {self.directory / 'report.json'} does not record {key!r}; delete it "
                           "and run `primsel run` on the experiment again to record it")


@dataclass(frozen=True)
class Experiment:
    """An experiment directory as :class:`ExperimentManifest` describes it (``pair_on`` None: all settings but
    the retriever), and ``other_data``: ``{"<source> (<n> tasks)": cells}`` of cell directories not listed."""
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
    """Read an experiment directory: the cells of ``experiment.json``, or without it every sub-directory
    with a ``config.json``, by label. ReportError: no such directory, no cell, or a bad JSON file."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    if (data := _read_object(directory / "experiment.json", missing=True)) is not None:
        manifest = ExperimentManifest.from_json(data, str(directory / "experiment.json"))
    else:
        found = [(p.parent.name, CellConfig.from_json(_read_object(p, missing=True) or {"id": p.parent.name}, str(p)))
                 for p in sorted(sub / "config.json" for sub in directory.iterdir() if (sub / "config.json").is_file())]
        entries = [CellEntry(id=name, label=name if c.label is None else c.label, settings=c.settings)
                   for name, c in found]
        manifest = ExperimentManifest(cells=tuple(sorted(entries, key=lambda e: e.label)), name=directory.name)
    if not manifest.cells:
        raise ReportError(f"{directory}: not an experiment directory (no experiment.json and no cells)")
    cells = tuple(CellResult(id=e.id, label=e.id if e.label is None else e.label, settings=e.settings,
                             report=_read_object(directory / e.id / "report.json", missing=True) or {},
                             directory=directory / e.id) for e in manifest.cells)
    fingerprints = {d.get("fingerprint") for d in manifest.datasets} or {manifest.data.get("fingerprint")}
    other: dict[str, int] = {}  # cell directories not listed, of other data, per data description
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in {c.id for c in cells}):
        try:
            cell_data = CellConfig.read(sub / "config.json").data
        except (OSError, ValueError):  # no config.json, or RunFileError
            continue
        if cell_data.get("fingerprint") not in fingerprints:
            other[data_text(cell_data)] = other.get(data_text(cell_data), 0) + 1
    return Experiment(name=directory.name if manifest.name is None else manifest.name, directory=directory,
                      cells=cells, description=manifest.description or "", baseline=manifest.baseline,
                      data=manifest.data, pair_on=manifest.pair_on, other_data=other, datasets=manifest.datasets)


def data_text(data: Mapping[str, Any]) -> str:
    """A data summary (``source``, ``n_tasks``, optional ``n_documents`` and ``subset``) as a reader
    names it: ``"Asper-Bench (250 tasks)"``, ``"Asper-Bench (20 of 250 tasks: a sample drawn with seed 0)"``."""
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    if not isinstance(subset := data.get("subset"), Mapping):
        return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"
    how = (f"a sample drawn with seed {subset.get('seed')}" if "sample" in subset
           else f"cross-validation fold {subset.get('fold')} of {subset.get('folds')}, seed {subset.get('seed')}"
           if "fold" in subset else "the tasks listed")
    return f"{name} ({data.get('n_tasks', '?')} of {subset.get('of', '?')} tasks: {how}{documents})"


def per_task_values(cell: CellResult, metric: str) -> dict[str, float]:
    """``{task_id: value}`` of a ``metrics`` entry of tasks.jsonl, ``docs_tokens``, or ``success`` (1.0 when
    ``status`` is ``pass``); ReportError when tasks.jsonl is missing or lacks the metric for a task."""
    path = cell.directory / "tasks.jsonl"
    try:
        return {str(row["task_id"]): float(row.get("status") == "pass" if metric == "success" else row[metric]
                                           if metric == "docs_tokens" else row["metrics"][metric])
                for _, row in read_jsonl(path)}
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ReportError(f"{path}: no per-task {metric!r}: {exc}") from None


def prompt_digests(cell: CellResult) -> list[tuple[str, str]]:
    """``[(task_id, prompt digest)]`` of a cell's generated programs (tasks.jsonl's ``prompt_digest``: the answer-cache
    key of each task's generation request); empty for a cell without a generator or written before digests were
    recorded."""
    path = cell.directory / "tasks.jsonl"
    if not path.is_file():
        return []
    return [(str(row["task_id"]), str(row["prompt_digest"])) for _, row in read_jsonl(path)
            if isinstance(row, dict) and row.get("prompt_digest")]


def dataset_groups(experiment: Experiment) -> list[tuple[Mapping[str, Any], list[CellResult]]]:
    """``[(dataset summary, cells)]`` in the manifest's order (one dataset: one group of every cell)."""
    if len(experiment.datasets) <= 1:
        return [(experiment.data, list(experiment.cells))]
    index = {d.get("fingerprint"): i for i, d in enumerate(experiment.datasets)}
    return [(d, [c for c in experiment.cells if index.get(c.settings.get("dataset")) == i])
            for i, d in enumerate(experiment.datasets)]


def learning_retrievers(cells: Sequence[CellResult]) -> list[str]:
    """Labels of the retrievers that learn from tasks; ReportError when a report lacks ``learns``."""
    last = {c.retriever: c for c in cells}  # the last cell of each label
    if unrecorded := [c for c in last.values() if c.record.learning is None]:
        raise unrecorded[0]._unrecorded("learns")
    return [label for label, c in last.items() if c.record.learning.retriever]


@dataclass(frozen=True)
class FrontierCurve:
    """For k = 1 .. depth, the mean documentation ``tokens`` of a ranking's top k and each task's ``recall``."""
    tokens: tuple[float, ...]
    recall: tuple[tuple[float, ...], ...]

    @property
    def mean_recall(self) -> list[float]:
        """Mean recall over tasks per k, length depth."""
        return [math.fsum(col) / len(col) for col in zip(*self.recall)]


def ranking_frontier(cell: CellResult) -> FrontierCurve | None:
    """A cell's frontier: recall from run.trec and tasks.jsonl, tokens from the report (None: no such file,
    gold or ``frontier`` of the ranking's depth); ReportError when it records neither ``frontier`` nor ``learns``."""
    from primsel.retrieval.trec import read_run  # local: primsel.retrieval loads every retriever
    try:
        run = read_run(cell.directory / "run.trec")
        gold = {str(row["task_id"]): set(row["gold"]) for _, row in read_jsonl(cell.directory / "tasks.jsonl")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (orders := ranked_tasks(run, gold)):
        return None
    if (recorded := cell.record.frontier) is None and cell.record.learning is None:
        raise cell._unrecorded("frontier")
    if recorded is None or len(recorded.tokens) != depth_of(orders):
        return None
    return FrontierCurve(tokens=tuple(float(x) for x in recorded.tokens), recall=recall_by_k(orders, gold))
