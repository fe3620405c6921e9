"""The settings of one cell: :class:`CellSettings`, the only checker of a cell's values (bounds,
metric names, component specifications in depth, a generator that can revise when ``rounds`` > 1),
once, on construction. A :class:`SettingError` names the setting (``"retriever.members[1]"``);
callers name it their way.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.checks import (
    DEPTH_BOUNDS,
    FOLDS_BOUNDS,
    K_BOUNDS,
    SEED_BOUNDS,
    TIMEOUT_BOUNDS,
    flag_problem,
    number_problem,
)
from primsel.eval.metrics import parse_metric
from primsel.experiments.reflection import REFLECTION_KEYS, Reflection
from primsel.types import Revises

#: The numeric settings and their bounds (:mod:`primsel.checks`); ``threshold`` is any number.
NUMBER_BOUNDS: dict[str, dict[str, Any]] = {
    "k": K_BOUNDS,
    "folds": FOLDS_BOUNDS,
    "seed": SEED_BOUNDS,
    "timeout": TIMEOUT_BOUNDS,
    "depth": DEPTH_BOUNDS,
    "threshold": {},
}
#: Settings that may be None (not set), and the numbers kept as floats.
_OPTIONAL = ("generator", "selector", "depth", "threshold")
_FLOATS = ("timeout", "threshold")
#: The settings that are component specifications, with their kind (:mod:`primsel.registry`).
COMPONENT_KEYS = ("retriever", "generator", "selector")


class SettingError(ValueError):
    """A cell setting has a bad value: ``key`` names the setting (``"k"``), ``problem`` says what is
    wrong (``"must be an integer >= 1, got 0"``)."""

    def __init__(self, key: str, problem: str) -> None:
        """The error of setting ``key``: ``problem`` says what is wrong with its value."""
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def _spec(key: str, value: Any) -> Any:
    """A specification whose form (and a generator table's reflection keys) is right, tables as
    plain dicts; raises ValueError saying what is wrong otherwise."""
    if isinstance(value, str) and not value:
        raise ValueError("must not be an empty name")
    if not isinstance(value, (str, Mapping)):
        raise ValueError(f"must be a name or a table, got {specs.toml_type(value)} {value!r}")
    if isinstance(value, Mapping) and not (
        isinstance(value.get("type"), str) and value.get("type")
    ):
        raise ValueError("needs a 'type' string")
    if key == "generator" and isinstance(value, Mapping):
        Reflection.from_table(value)  # raises "rounds must be an integer >= 1, got 0"
    return dict(value) if isinstance(value, Mapping) else value


def _metrics(value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) and m for m in value):
        raise ValueError(f"must be an array of metric names, got {value!r}")
    for metric in value:
        parse_metric(metric)  # raises for an unknown metric
    return sorted(dict.fromkeys(value))


def _reflection(value: Any) -> Reflection:
    if isinstance(value, Reflection):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(
            f"must be a table of {', '.join(REFLECTION_KEYS)}, got {specs.toml_type(value)} {value!r}"
        )
    unknown = [key for key in value if key not in REFLECTION_KEYS]
    if unknown:
        raise ValueError(
            f"{unknown[0]!r} is not a reflection setting; expected one of {', '.join(REFLECTION_KEYS)}"
        )
    return Reflection.from_table(value)


def check_setting(key: str, value: Any) -> Any:
    """Check the value of one cell setting on its own (specifications in form only); returns it
    normalised (seconds and thresholds as floats, metric names sorted without repeats, tables as
    plain dicts, a ``reflection`` table as a :class:`Reflection`).

    Raises
    ------
    SettingError : unknown key, or a value of the wrong type or out of its bounds.
    """
    if key in _OPTIONAL and value is None:
        return None
    problem: str | None = None
    try:
        if key in NUMBER_BOUNDS:
            problem = number_problem(value, **NUMBER_BOUNDS[key])
            value = float(value) if problem is None and key in _FLOATS else value
        elif key in COMPONENT_KEYS:
            value = _spec(key, value)
        elif key == "closure":
            problem = flag_problem(value)
        elif key == "reflection":
            value = _reflection(value)
        elif key == "metrics":
            value = _metrics(value)
        elif key == "dataset":
            problem = None if isinstance(value, str) else f"must be a string, got {value!r}"
        else:
            problem = f"is not a cell setting; expected one of {', '.join(SETTING_KEYS)}"
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        raise SettingError(key, problem)
    return value


@dataclass(frozen=True)
class CellSettings:
    """The resolved settings of one cell, all checked on construction.

    Parameters
    ----------
    retriever, selector : specifications (:mod:`primsel.spec`) in canonical form; selector None: the
        fixed rules of :func:`primsel.retrieval.selector.select`.
    k, threshold, closure : selection size (>= 1), minimum score (or None), add the types the
        selection needs.
    folds, seed : cross-validation folds (>= 2) and seed (>= 0).
    generator : generator table or None (retrieval only); reflection keys in it move to
        ``reflection``.
    reflection : a :class:`Reflection` or a table of its keys; only with a generator.
    timeout : seconds per task in the sandbox when a generator runs, in (0, MAX_TIMEOUT].
    metrics : extra ranx metric names reported, sorted.
    depth : primitives kept of each task's ranking (>= 20), or None for the whole library.
    dataset : fingerprint of the tasks the cell runs on.

    Raises
    ------
    SettingError : a bad value or specification, reflection without a generator or set twice, rounds
        > 1 for a generator that cannot revise (the message names the key).
    """

    retriever: Any
    k: int = 10
    closure: bool = False
    folds: int = 5
    seed: int = 0
    generator: Mapping[str, Any] | None = None
    reflection: Reflection = Reflection()
    timeout: float = 10.0
    metrics: tuple[str, ...] = ()
    threshold: float | None = None
    selector: Any = None
    depth: int | None = None
    dataset: str = ""

    def __post_init__(self) -> None:
        """Check and normalise every setting (see the class's Raises)."""

        def put(name: str, value: Any) -> None:
            """Set a field of the frozen instance."""
            object.__setattr__(self, name, value)

        for field in dataclasses.fields(self):
            put(field.name, check_setting(field.name, getattr(self, field.name)))
        put("retriever", specs.canonical(self.retriever))
        put("selector", None if self.selector is None else specs.canonical(self.selector))
        put("metrics", tuple(self.metrics))
        reflection_key = "reflection"
        if self.generator is not None:
            generator = specs.canonical(self.generator, table=True)
            inside = [key for key in REFLECTION_KEYS if key in generator]
            if inside and self.reflection.configured:
                raise SettingError(
                    "generator",
                    f"sets {', '.join(inside)}, and so does reflection; "
                    "set the reflection rounds in one place",
                )
            if inside:
                put("reflection", Reflection.from_table(generator))
                generator = {
                    key: value for key, value in generator.items() if key not in REFLECTION_KEYS
                }
                reflection_key = "generator"
            put("generator", generator)
        elif self.reflection.configured:
            raise SettingError(
                "reflection", "needs a generator: the rounds revise generated programs"
            )
        for key in [key for key in COMPONENT_KEYS if getattr(self, key) is not None]:
            try:
                specs.check(getattr(self, key), key)
                put(key, specs.with_versions(getattr(self, key), key))
            except specs.SpecError as exc:
                raise SettingError(".".join(k for k in (key, exc.key) if k), exc.problem) from None
        if self.reflection.rounds > 1 and not isinstance(
            registry.build(self.generator, "generator"), Revises
        ):
            raise SettingError(
                f"{reflection_key}.rounds",
                f"generator {specs.type_name(self.generator)!r} cannot revise a program; "
                "rounds > 1 needs a generator that can (e.g. openai)",
            )

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> CellSettings:
        """Settings from a mapping of setting keys (defaults filled for the missing ones); raises
        SettingError for an unknown key (naming it), a missing retriever, or a bad value."""
        for key in [key for key in settings if key not in SETTING_KEYS]:
            check_setting(key, settings[key])  # raises: not a cell setting
        if "retriever" not in settings:
            raise SettingError("retriever", "is missing")
        return cls(**dict(settings))

    def sources(self) -> dict[str, dict[str, str]]:
        """Digests of the source of every component class named (:func:`primsel.spec.sources`):
        ``{"retriever": {name: digest}, "generator": {...}}`` (no generator, no key); a cell whose
        recorded sources differ is stale."""
        generator = (
            {}
            if self.generator is None
            else {"generator": specs.sources(self.generator, "generator")}
        )
        return {"retriever": specs.sources(self.retriever, "retriever"), **generator}

    def to_json(self) -> dict[str, Any]:
        """The resolved settings as JSON data (``config.json``; its hash is the cell id):
        ``timeout`` only with a generator, ``metrics``, ``threshold``, ``selector`` and ``depth``
        only when set, the reflection keys that were set inside the generator table."""
        out: dict[str, Any] = {
            "retriever": self.retriever,
            "k": self.k,
            "closure": self.closure,
            "folds": self.folds,
            "seed": self.seed,
            "generator": None,
        }
        if self.generator is not None:
            out.update(
                generator={**self.generator, **self.reflection.to_table()}, timeout=self.timeout
            )
        if self.metrics:
            out["metrics"] = list(self.metrics)
        out.update(
            (key, getattr(self, key))
            for key in ("threshold", "selector", "depth")
            if getattr(self, key) is not None
        )
        out["dataset"] = self.dataset
        return out

    def for_dataset(self, dataset: str) -> CellSettings:
        """The same settings on the tasks of fingerprint ``dataset`` (the others not checked again);
        raises SettingError when ``dataset`` is not a string."""
        out = copy.copy(self)
        object.__setattr__(out, "dataset", check_setting("dataset", dataset))
        return out


#: Every setting a cell has (the keys of :class:`CellSettings`).
SETTING_KEYS = tuple(f.name for f in dataclasses.fields(CellSettings))
#: Default values of the settings an experiment file may leave out.
DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(CellSettings)
    if f.name in ("k", "closure", "folds", "seed", "timeout")
}
