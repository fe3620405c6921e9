"""The settings of one cell: a frozen, typed object, and the only checker of a cell's values.

A cell is one pipeline over every task: a retriever ranks the library, the selector keeps the
first ``k`` (with ``threshold`` and type ``closure``; or a ``selector`` class decides), learned
retrievers are cross-validated over ``folds`` with ``seed``, and an optional generator writes
programs that the sandbox runs within ``timeout`` seconds per task, with ``reflection`` rounds
after a failed program. ``primsel run`` builds one :class:`CellSettings` per grid cell,
``primsel retrieve`` one from its flags.

Everything about a cell is checked on construction, once: the values against their bounds (all
in :mod:`primsel.checks`: ``K_BOUNDS``, ``FOLDS_BOUNDS``, ``SEED_BOUNDS``, ``TIMEOUT_BOUNDS``,
``DEPTH_BOUNDS``, ``ROUNDS_BOUNDS``), ``metrics`` (:func:`primsel.eval.metrics.parse_metric`),
the specifications in depth (:func:`primsel.spec.check`), and that the generator can revise
when ``rounds`` > 1. A :class:`SettingError` names the setting (``"k"``,
``"retriever.members[1]"``, ``"generator.rounds"``); callers name it their way (an
experiment file's key, a flag).

:meth:`CellSettings.to_json` gives the resolved settings written to ``config.json``; their
canonical JSON hashes to the cell id (:func:`primsel.experiments.config.cell_id`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.checks import (DEPTH_BOUNDS, FOLDS_BOUNDS, K_BOUNDS, SEED_BOUNDS, TIMEOUT_BOUNDS, flag_problem,
                            number_problem)
from primsel.eval.metrics import parse_metric
from primsel.experiments.reflection import REFLECTION_KEYS, Reflection, reflection_problem
from primsel.types import Revises

#: Default selection size, folds and sandbox seconds per task.
DEFAULT_K = 10
DEFAULT_FOLDS = 5
DEFAULT_TIMEOUT = 10.0
#: The numeric settings and their bounds (:mod:`primsel.checks`); ``threshold`` is any number.
NUMBER_BOUNDS: dict[str, dict[str, Any]] = {"k": K_BOUNDS, "folds": FOLDS_BOUNDS, "seed": SEED_BOUNDS,
                                            "timeout": TIMEOUT_BOUNDS, "depth": DEPTH_BOUNDS, "threshold": {}}
#: Settings that may be None (not set), and the numbers kept as floats.
_OPTIONAL = ("generator", "selector", "depth", "threshold")
_FLOATS = ("timeout", "threshold")
#: The settings that are component specifications, with their kind (:mod:`primsel.registry`).
COMPONENT_KEYS = ("retriever", "generator", "selector")


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
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) and m for m in value):
        return f"must be an array of metric names, got {value!r}", value
    for metric in value:
        try:
            parse_metric(metric)
        except ValueError as exc:
            return str(exc), value
    return None, sorted(dict.fromkeys(value))


def _reflection(value: Any) -> tuple[str | None, Any]:
    if isinstance(value, Reflection):
        return None, value
    if not isinstance(value, Mapping):
        return f"must be a table of {', '.join(REFLECTION_KEYS)}, got {specs.toml_type(value)} {value!r}", value
    unknown = [key for key in value if key not in REFLECTION_KEYS]
    if unknown:
        return f"{unknown[0]!r} is not a reflection setting; expected one of {', '.join(REFLECTION_KEYS)}", value
    try:
        return None, Reflection.from_table(value)
    except ValueError as exc:  # "rounds must be an integer >= 1, got 0"
        return str(exc), value


def _spec_problem(key: str, value: Any) -> str | None:
    problem = _spec_form(value)
    if problem is None and key == "generator" and isinstance(value, Mapping):
        found = reflection_problem(value)  # the reflection keys a generator table may hold
        problem = f"{found[0]} {found[1]}" if found is not None else None
    return problem


def check_setting(key: str, value: Any) -> Any:
    """Check the value of one cell setting on its own (the specifications in form only: the
    whole cell is checked by :class:`CellSettings`); returns it normalised (numbers of seconds
    and thresholds as floats, metric names sorted without repeats, tables as plain dicts, a
    ``reflection`` table as a :class:`primsel.experiments.reflection.Reflection`).

    Raises
    ------
    SettingError : unknown key, or a value of the wrong type or out of its bounds.
    """
    if key in _OPTIONAL and value is None:
        return None
    problem: str | None
    if key in NUMBER_BOUNDS:
        problem = number_problem(value, **NUMBER_BOUNDS[key])
        value = float(value) if problem is None and key in _FLOATS else value
    elif key in COMPONENT_KEYS:
        problem = _spec_problem(key, value)
        value = dict(value) if isinstance(value, Mapping) else value
    elif key == "closure":
        problem = flag_problem(value)
    elif key == "reflection":
        problem, value = _reflection(value)
    elif key == "metrics":
        problem, value = _metrics(value)
    elif key == "dataset":
        problem = None if isinstance(value, str) else f"must be a string, got {value!r}"
    else:
        problem = f"is not a cell setting; expected one of {', '.join(SETTING_KEYS)}"
    if problem is not None:
        raise SettingError(key, problem)
    return value


def _check_components(settings: CellSettings, reflection_key: str) -> None:
    """Check the cell's specifications in depth and that its generator can revise when it has
    more than one round (``reflection_key``: where the rounds were set, for the message)."""
    for key in COMPONENT_KEYS:
        spec = getattr(settings, key)
        if spec is None:
            continue
        try:
            specs.check(spec, key)
        except specs.SpecError as exc:
            raise SettingError(".".join(k for k in (key, exc.key) if k), exc.problem) from None
    if settings.reflection.rounds > 1 and not isinstance(registry.build(settings.generator, "generator"), Revises):
        raise SettingError(f"{reflection_key}.rounds",
                           f"generator {specs.type_name(settings.generator)!r} cannot revise a program; "
                           "rounds > 1 needs a generator that can (e.g. openai)")


@dataclass(frozen=True)
class CellSettings:
    """The resolved settings of one cell, all checked on construction (see the module docstring).

    Parameters
    ----------
    retriever : retriever specification (:mod:`primsel.spec`), kept in canonical form.
    k : selection size, >= 1 (above the library size: the whole library).
    closure : add the library types the selection depends on.
    folds : cross-validation folds for retrievers that learn from tasks, >= 2 (capped at the
        number of tasks).
    seed : seed of the folds and of randomised components, >= 0.
    generator : generator table (``{"type": ..., ...}``) or None (retrieval only). The
        reflection keys ``rounds``, ``feedback`` and ``reselect`` may be given in it: they are
        taken out into ``reflection``.
    reflection : the reflection rounds (:class:`primsel.experiments.reflection.Reflection`, or
        a table of its keys); set only with a generator, and not also in the generator table.
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
    SettingError : a value of the wrong type or out of its bounds, a specification that names
        an unknown class or parameter or cannot be built, reflection without a generator or
        set twice, rounds > 1 for a generator that cannot revise (the message names the key).
    """

    retriever: Any
    k: int = DEFAULT_K
    closure: bool = False
    folds: int = DEFAULT_FOLDS
    seed: int = 0
    generator: Mapping[str, Any] | None = None
    reflection: Reflection = Reflection()
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
        if self.selector is not None:
            object.__setattr__(self, "selector", specs.canonical(self.selector))
        object.__setattr__(self, "metrics", tuple(self.metrics))
        reflection_key = "reflection"
        if self.generator is not None:
            generator = specs.canonical(self.generator, table=True)
            inside = [key for key in REFLECTION_KEYS if key in generator]
            if inside and self.reflection.configured:
                raise SettingError("generator", f"sets {', '.join(inside)}, and so does reflection; "
                                                "set the reflection rounds in one place")
            if inside:
                object.__setattr__(self, "reflection", Reflection.from_table(generator))
                generator = {key: value for key, value in generator.items() if key not in REFLECTION_KEYS}
                reflection_key = "generator"
            object.__setattr__(self, "generator", generator)
        elif self.reflection.configured:
            raise SettingError("reflection", "needs a generator: the rounds revise generated programs")
        _check_components(self, reflection_key)

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
        without them keep their ids); the reflection keys that were set, in the generator
        table (so the cell's id is the same wherever the experiment file wrote them)."""
        out: dict[str, Any] = {"retriever": self.retriever, "k": self.k, "closure": self.closure,
                               "folds": self.folds, "seed": self.seed, "generator": None}
        if self.generator is not None:
            out["generator"] = {**self.generator, **self.reflection.to_table()}
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

    def for_dataset(self, dataset: str) -> CellSettings:
        """The same settings on the tasks of fingerprint ``dataset`` (the other values are not
        checked again).

        Raises
        ------
        SettingError : ``dataset`` is not a string.
        """
        out = copy.copy(self)
        object.__setattr__(out, "dataset", check_setting("dataset", dataset))
        return out


#: Every setting a cell has (the keys of :class:`CellSettings`).
SETTING_KEYS = tuple(f.name for f in dataclasses.fields(CellSettings))
#: Default values of the settings an experiment file may leave out.
DEFAULTS: dict[str, Any] = {"k": DEFAULT_K, "closure": False, "folds": DEFAULT_FOLDS, "seed": 0,
                            "timeout": DEFAULT_TIMEOUT}
