"""The settings of one cell: a frozen, typed object, checked once where it is built.

A cell is one pipeline over every task: a retriever ranks the library, the selector keeps the
first ``k`` (with ``threshold`` and type ``closure``; or a ``selector`` class decides), learned retrievers are cross-validated
over ``folds`` with ``seed``, and an optional generator writes programs that the sandbox runs
within ``timeout`` seconds per task. ``primsel run`` builds one :class:`CellSettings` per grid
cell, ``primsel retrieve`` one from its flags.

Every value is checked on construction against the bounds of the component that uses it: ``k``
(:data:`primsel.checks.K_BOUNDS`; above the library size it selects the whole library),
``folds`` and ``seed`` (:data:`primsel.retrieval.cv.FOLDS_BOUNDS`, ``SEED_BOUNDS``), ``timeout``
(finite, > 0 and at most the sandbox's :data:`primsel.simulator.sandbox.MAX_TIMEOUT`),
``metrics`` (:func:`primsel.eval.metrics.parse_metric`). Specifications are checked in form
here; :func:`primsel.spec.check` checks them in depth.

:meth:`CellSettings.to_json` gives the resolved settings written to ``config.json``; their
canonical JSON hashes to the cell id (:func:`primsel.experiments.config.cell_id`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from primsel import spec as specs
from primsel.checks import K_BOUNDS, flag_problem, number_problem
from primsel.retrieval.cv import FOLDS_BOUNDS, SEED_BOUNDS
from primsel.simulator.sandbox import MAX_TIMEOUT

#: Default selection size, folds and sandbox seconds per task.
DEFAULT_K = 10
DEFAULT_FOLDS = 5
DEFAULT_TIMEOUT = 10.0
#: Smallest ranking depth: the report's curves and complete@k read the first 20 of a ranking.
DEPTH_MINIMUM = 20
#: Bounds of ``timeout`` (seconds per task in the sandbox).
TIMEOUT_BOUNDS: dict[str, Any] = {"above": 0, "maximum": MAX_TIMEOUT}


class SettingError(ValueError):
    """A cell setting has a bad value.

    Parameters
    ----------
    key : the setting (``"k"``, ``"timeout"``, ...).
    problem : what is wrong (``"must be an integer >= 1, got 0"``).
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def _spec_form(value: Any) -> str | None:
    if isinstance(value, str):
        return "must not be an empty name" if not value else None
    if isinstance(value, Mapping):
        return None if isinstance(value.get("type"), str) and value.get("type") else "needs a 'type' string"
    return f"must be a name or a table, got {specs.toml_type(value)} {value!r}"


def _metrics(value: Any) -> tuple[str | None, Any]:
    from primsel.eval.metrics import parse_metric

    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) and m for m in value):
        return f"must be an array of metric names, got {value!r}", value
    for metric in value:
        try:
            parse_metric(metric)
        except ValueError as exc:
            return str(exc), value
    return None, sorted(dict.fromkeys(value))


def check_setting(key: str, value: Any) -> Any:
    """Check one cell setting; returns it normalised (numbers of seconds and thresholds as
    floats, metric names sorted without repeats, tables as plain dicts).

    Raises
    ------
    SettingError : unknown key, or a value of the wrong type or out of its bounds.
    """
    problem: str | None
    if key in ("retriever", "generator", "selector"):
        if key in ("generator", "selector") and value is None:
            return None
        problem = _spec_form(value)
        value = dict(value) if isinstance(value, Mapping) else value
        if problem is None and key == "generator" and isinstance(value, Mapping):
            from primsel.experiments.reflection import reflection_problem

            found = reflection_problem(value)
            problem = f"{found[0]} {found[1]}" if found is not None else None
    elif key == "k":
        problem = number_problem(value, **K_BOUNDS)
    elif key == "folds":
        problem = number_problem(value, **FOLDS_BOUNDS)
    elif key == "seed":
        problem = number_problem(value, **SEED_BOUNDS)
    elif key == "closure":
        problem = flag_problem(value)
    elif key == "timeout":
        problem = number_problem(value, **TIMEOUT_BOUNDS)
        value = value if problem else float(value)
    elif key == "depth":
        if value is None:
            return None
        problem = number_problem(value, integer=True, minimum=DEPTH_MINIMUM)
    elif key == "threshold":
        if value is None:
            return None
        problem = number_problem(value)
        value = value if problem else float(value)
    elif key == "metrics":
        problem, value = _metrics(value)
    elif key == "dataset":
        problem = None if isinstance(value, str) else f"must be a string, got {value!r}"
    else:
        problem = f"is not a cell setting; expected one of {', '.join(SETTING_KEYS)}"
    if problem is not None:
        raise SettingError(key, problem)
    return value


@dataclass(frozen=True)
class CellSettings:
    """The resolved settings of one cell, checked on construction (:func:`check_setting`).

    Parameters
    ----------
    retriever : retriever specification (:mod:`primsel.spec`), kept in canonical form.
    k : selection size, >= 1 (above the library size: the whole library).
    closure : add the library types the selection depends on.
    folds : cross-validation folds for retrievers that learn from tasks, >= 2 (capped at the
        number of tasks).
    seed : seed of the folds and of randomised components, >= 0.
    generator : generator table (``{"type": ..., ...}``) or None (retrieval only); it may hold
        the reflection keys ``rounds``, ``feedback`` and ``reselect``
        (:mod:`primsel.experiments.reflection`), checked here.
    timeout : seconds per task in the sandbox when a generator runs, in (0, MAX_TIMEOUT].
    metrics : extra ranx metric names reported, sorted.
    threshold : minimum retriever score of a selected primitive, or None.
    selector : selector specification (kind ``"selector"``: ``"topk"``, ``{"type":
        "calibrated", "target_recall": 0.95}``, ...), or None for the fixed rules (threshold,
        top-k, closure) of :func:`primsel.retrieval.selector.select`.
    depth : how many primitives of each task's ranking are kept (run.trec, the retrieval
        cache, the metrics: ``mrr`` is then MRR at that depth), >= 20, or None for the whole
        library. For large corpora with many queries (20k MetaTool queries, a library of
        tens of thousands of callables), where whole rankings would take gigabytes.
    dataset : fingerprint of the tasks the cell runs on (part of its identity).

    Raises
    ------
    SettingError : a value of the wrong type or out of its bounds (the message names the key).
    """

    retriever: Any
    k: int = DEFAULT_K
    closure: bool = False
    folds: int = DEFAULT_FOLDS
    seed: int = 0
    generator: Mapping[str, Any] | None = None
    timeout: float = DEFAULT_TIMEOUT
    metrics: tuple[str, ...] = ()
    threshold: float | None = None
    selector: Any = None
    depth: int | None = None
    dataset: str = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, check_setting(field.name, getattr(self, field.name)))
        object.__setattr__(self, "retriever", specs.canonical(self.retriever))
        if self.generator is not None:
            object.__setattr__(self, "generator", specs.canonical(self.generator, table=True))
        if self.selector is not None:
            object.__setattr__(self, "selector", specs.canonical(self.selector))
        object.__setattr__(self, "metrics", tuple(self.metrics))

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> CellSettings:
        """Settings from a mapping of setting keys (defaults filled for the missing ones).

        Raises
        ------
        SettingError : an unknown key (naming it), a missing retriever, or a bad value.
        """
        for key in settings:
            if key not in SETTING_KEYS:
                check_setting(key, settings[key])  # raises: not a cell setting
        if "retriever" not in settings:
            raise SettingError("retriever", "is missing")
        return cls(**dict(settings))

    def sources(self) -> dict[str, dict[str, str]]:
        """Digests of the source of every component class the settings name, nested
        specifications included (:func:`primsel.spec.sources`): ``{"retriever": {name: digest},
        "generator": {name: digest}}`` (no ``generator`` key without one). Together with the
        cell id they identify what a cell computed: a finished cell whose recorded sources differ
        is stale (an edited plug-in retriever, say)."""
        out = {"retriever": specs.sources(self.retriever, "retriever")}
        if self.generator is not None:
            out["generator"] = specs.sources(self.generator, "generator")
        return out

    def to_json(self) -> dict[str, Any]:
        """The resolved settings as JSON data: ``timeout`` only with a generator, ``metrics``
        only when non-empty, ``threshold``, ``selector`` and ``depth`` only when set (so cells
        without them keep their ids)."""
        out: dict[str, Any] = {"retriever": self.retriever, "k": self.k, "closure": self.closure,
                               "folds": self.folds, "seed": self.seed,
                               "generator": dict(self.generator) if self.generator is not None else None}
        if self.generator is not None:
            out["timeout"] = self.timeout
        if self.metrics:
            out["metrics"] = list(self.metrics)
        if self.threshold is not None:
            out["threshold"] = self.threshold
        if self.selector is not None:
            out["selector"] = self.selector
        if self.depth is not None:
            out["depth"] = self.depth
        out["dataset"] = self.dataset
        return out


#: Every setting a cell has (the keys of :class:`CellSettings`).
SETTING_KEYS = tuple(f.name for f in dataclasses.fields(CellSettings))
#: Default values of the settings an experiment file may leave out.
DEFAULTS: dict[str, Any] = {"k": DEFAULT_K, "closure": False, "folds": DEFAULT_FOLDS, "seed": 0,
                            "timeout": DEFAULT_TIMEOUT}
