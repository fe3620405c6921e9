"""Experiment declarations: read a TOML file, check it, expand its grid into cells.

An experiment file holds base settings and a ``[grid]`` of lists; the cells are the Cartesian
product of the grid lists (in file order, the last key varying fastest), applied to the base
settings. Keys (DESIGN.md, Interfaces, "Experiments"):

==============  ==========================================================================
``name``        experiment name (default: the file stem); the output directory ``<out>/<name>``
``description`` free text shown at the top of the report
``data``        path of the Asper-Bench archive, relative to the TOML file (default: the
                ``--data`` flag, else env ``PRIMSEL_ASPER_BENCH``, else the built-in tasks)
``retriever``   registered name, ``"package.module:Class"``, or a table with ``type``
``k``           selection size (int >= 1, default 10)
``threshold``   minimum retriever score of a selected primitive (number; default none). With
                ``k`` too, both limits apply: the primitives scoring >= threshold, at most the
                first k of them (k wins when more pass). The LLM selector scores its picks 1
                and the rest 0, so ``threshold = 0.5`` with ``k = 65`` selects exactly its picks
``closure``     add the library types the selection depends on (bool, default false)
``folds``       cross-validation folds for anything learned from tasks (int >= 2, default 5)
``seed``        seed of the folds and of randomised components (int, default 0)
``[generator]`` table with ``type`` = openai | reference | replay and its parameters; a relative
                ``programs`` path (replay) is relative to the TOML file, like ``data``;
                ``extraction`` = ``"primsel"`` (default) or ``"aspera"`` (openai, replay)
``timeout``     seconds per task in the sandbox when a generator runs (default 10)
``metrics``     extra ranx metric names added to every cell's report.json
``baseline``    the retriever every cell is tested against: its label (``hybrid(bm25+dense)``),
                its type when one retriever of the grid has it (``llm_selector``), or a cell
                id (default: the first retriever of the grid); see
                :func:`primsel.eval.report.write_report`
``pair_on``     the settings (top-level or dotted keys, e.g. ``["generator.seed"]``) that must
                be equal between a cell and the baseline cell it is tested against (default:
                every setting except the retriever). Each cell must then find at most one
                baseline cell
``[grid]``      lists of values; a key is a top-level key above (``k``, ``retriever``, ...) or
                a dotted key into a table (``"generator.model"``, ``"retriever.weights"``).
                Several grids (``[[grid]]``, an array of tables) give the union of their cells,
                e.g. one grid over k and another with ``retriever = ["all"]`` and ``k = [65]``
==============  ==========================================================================

Each cell's resolved settings (defaults filled, retriever specifications in canonical form,
plus the dataset fingerprint the runner adds) hash to a stable cell id: :func:`cell_id`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Default values of the per-cell settings.
DEFAULTS: dict[str, Any] = {"k": 10, "closure": False, "folds": 5, "seed": 0, "timeout": 10.0}
#: Keys that define a cell (and can be varied by the grid).
CELL_KEYS = ("retriever", "k", "threshold", "closure", "folds", "seed", "generator", "timeout", "metrics")
#: Every key accepted at the top level of an experiment file.
TOP_KEYS = ("name", "description", "data", "baseline", "pair_on", "grid") + CELL_KEYS
#: Tables the grid may reach into with dotted keys.
TABLE_KEYS = ("retriever", "generator")
#: Generator parameters documented in DESIGN.md (used when a class's signature cannot tell).
GENERATOR_KEYS = (
    "type", "model", "base_url", "api_key_env", "timeout_s", "max_retries", "temperature", "seed",
    "max_tokens", "concurrency", "examples", "template", "programs", "cache_namespace", "extraction",
)
#: Length of a cell id (hex characters of the sha256).
CELL_ID_LENGTH = 12


class ConfigError(ValueError):
    """An experiment file is invalid; the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One configuration of an experiment grid.

    Parameters
    ----------
    id : stable id, :func:`cell_id` of ``settings``.
    settings : resolved settings: ``retriever``, ``k``, ``closure``, ``folds``, ``seed``,
        ``generator`` (table or None), ``timeout``, ``metrics`` and ``threshold`` (only with a
        generator / when given), ``dataset`` (fingerprint, see the runner).
    label : short readable label (:func:`cell_label`).
    """

    id: str
    settings: Mapping[str, Any]
    label: str


@dataclass(frozen=True)
class ExperimentConfig:
    """A parsed, checked experiment file.

    Parameters
    ----------
    name : experiment name.
    path : the TOML file (None when built from a mapping).
    base : the top-level cell settings with defaults filled.
    grids : one or more grids (``[grid]`` or ``[[grid]]``), each dotted key -> list of values,
        in file order; the cells are the union of each grid's product.
    data : the ``data`` path resolved against the file's directory, or None.
    description : free text.
    baseline : retriever label, retriever type or cell id to test against, or None (first retriever).
    base_dir : the file's directory, against which the runner resolves a relative generator
        ``programs`` path (None: the working directory).
    pair_on : the setting keys a cell and its baseline cell must agree on, or None (every
        setting except the retriever).
    """

    name: str
    path: Path | None
    base: Mapping[str, Any]
    grids: tuple[Mapping[str, Sequence[Any]], ...] = ({},)
    data: Path | None = None
    description: str = ""
    baseline: str | None = None
    base_dir: Path | None = None
    pair_on: tuple[str, ...] | None = None


# ---------------------------------------------------------------------------------------------
# Canonical forms, ids, labels
# ---------------------------------------------------------------------------------------------
def canonical_spec(spec: Any) -> Any:
    """Canonical form of a component specification: a table holding only ``type`` becomes the
    name; nested tables and lists are canonicalised too. Used so ``"bm25"`` and
    ``{type = "bm25"}`` give the same cell id."""
    if isinstance(spec, Mapping):
        out = {str(k): canonical_spec(v) for k, v in spec.items()}
        if set(out) == {"type"} and isinstance(out["type"], str):
            return out["type"]
        return out
    if isinstance(spec, (list, tuple)):
        return [canonical_spec(v) for v in spec]
    return spec


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, UTF-8 characters kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cell_id(settings: Mapping[str, Any]) -> str:
    """Stable id of resolved cell settings: the first 12 hex characters of the sha256 of their
    canonical JSON (:func:`canonical_json`)."""
    return hashlib.sha256(canonical_json(settings).encode("utf-8", errors="surrogatepass")).hexdigest()[:CELL_ID_LENGTH]


def _short(value: Any) -> str:
    if isinstance(value, Mapping):
        return spec_label(value)
    if isinstance(value, (list, tuple)):
        return "+".join(_short(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def spec_label(spec: Any) -> str:
    """Readable label of a component specification.

    ``"bm25"`` -> ``bm25``; ``{type = "hybrid", members = ["bm25", "dense"]}`` ->
    ``hybrid(bm25+dense)``; other parameters follow as ``key=value``:
    ``hybrid(bm25+dense, method=wsum, weights=0.3+0.7)``.
    """
    spec = canonical_spec(spec)
    if not isinstance(spec, Mapping):
        return str(spec)
    params = {k: v for k, v in spec.items() if k != "type"}
    parts = []
    if "members" in params:
        parts.append(_short(params.pop("members")))
    parts.extend(f"{k}={_short(v)}" for k, v in sorted(params.items()))
    return f"{spec.get('type', '?')}({', '.join(parts)})"


def cell_label(settings: Mapping[str, Any], varied: Sequence[str] = ()) -> str:
    """Readable label of a cell: retriever (with all its parameters), ``k=..``, ``+closure``
    when on, the generator (type and model), then ``key=value`` for every other key in
    ``varied`` (top-level keys, or dotted keys such as ``generator.seed``) that the cell sets."""
    parts = [spec_label(settings["retriever"]), f"k={settings['k']}"]
    if settings.get("closure"):
        parts.append("+closure")
    gen = settings.get("generator")
    if gen:
        parts.append(generator_label(gen))
    for key in varied:
        if key.split(".", 1)[0] in ("retriever", "k", "closure", "dataset") or \
                key in ("generator", "generator.type", "generator.model"):
            continue  # shown above
        value = _get_dotted(settings, key)
        if value is not None:
            parts.append(f"{key}={_short(value)}")
    return " ".join(parts)


def varied_keys(settings: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """The keys among ``keys`` (top-level or dotted) whose values differ between ``settings``;
    when the whole ``generator`` table varies, also ``generator.<parameter>`` for each of its
    parameters that differs, so that a label or a table column can show it."""
    def differs(key: str) -> bool:
        return len({canonical_json(_get_dotted(s, key)) for s in settings}) > 1

    out: list[str] = []
    for key in keys:
        if differs(key):
            out.append(key)
            if key == "generator":  # its varying parameters follow it
                params = sorted({p for s in settings if isinstance(s.get(key), Mapping) for p in s[key]})
                out += [f"{key}.{p}" for p in params if f"{key}.{p}" not in keys and differs(f"{key}.{p}")]
    return out


def generator_label(gen: Mapping[str, Any] | None) -> str:
    """``type`` and, when given, ``model`` of a generator table (``openai:gpt-4o``); "" if None."""
    if not gen:
        return ""
    gen = dict(gen) if isinstance(gen, Mapping) else {"type": gen}
    return f"{gen.get('type')}:{gen['model']}" if gen.get("model") else str(gen.get("type"))


def _get_dotted(settings: Mapping[str, Any], key: str) -> Any:
    value: Any = settings
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def spec_type(spec: Any) -> str | None:
    """The class name of a component specification (the name, or a table's ``type``)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping) and isinstance(spec.get("type"), str):
        return spec["type"]
    return None


def baseline_label(wanted: str | None, cells: Sequence[tuple[str, Any]]) -> str:
    """The retriever label of an experiment's baseline.

    Parameters
    ----------
    wanted : the ``baseline`` setting: a retriever label, a cell id, or a retriever type that
        exactly one retriever label of the cells has (``"llm_selector"``); None: the first
        cell's retriever.
    cells : (cell id, retriever specification) of every cell, in grid order; non-empty.

    Raises
    ------
    ValueError : ``wanted`` matches nothing, or names a type several retrievers have; the
        message lists the labels.
    """
    labels = list(dict.fromkeys(spec_label(spec) for _, spec in cells))
    if wanted is None:
        return labels[0]
    if wanted in labels:
        return wanted
    by_id = {cid: spec_label(spec) for cid, spec in cells}
    if wanted in by_id:
        return by_id[wanted]
    typed = list(dict.fromkeys(spec_label(spec) for _, spec in cells if spec_type(spec) == wanted))
    if len(typed) == 1:
        return typed[0]
    if typed:
        raise ValueError(f"baseline {wanted!r} names several retrievers ({'; '.join(typed)}); "
                         "give the label of one of them")
    raise ValueError(f"baseline {wanted!r} is neither a retriever label, a retriever type nor a cell id; "
                     f"labels: {'; '.join(sorted(labels))}")


def pair_key(settings: Mapping[str, Any], pair_on: Sequence[str] | None) -> str:
    """What a cell and its baseline cell must share: every setting except the retriever
    (``pair_on`` None), else the dataset and the ``pair_on`` settings (missing ones as null)."""
    if pair_on is None:
        return canonical_json({k: v for k, v in settings.items() if k != "retriever"})
    return canonical_json({"dataset": settings.get("dataset"), **{k: _get_dotted(settings, k) for k in pair_on}})


# ---------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------
def _fail(where: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {key}: {problem}")


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array",
            dict: "table"}.get(type(value), type(value).__name__)


def _check_value(where: str, key: str, value: Any, name: str | None = None) -> Any:
    """Check one cell setting ``key`` (top-level or one grid value, called ``name`` in errors,
    default ``key``); returns it normalised."""
    shown = key if name is None else name
    if key == "threshold":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _fail(where, shown, f"expected a number (a retriever score), got {_type_name(value)} {value!r}")
        return float(value)
    if key in ("k", "folds", "seed"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(where, shown, f"expected an integer, got {_type_name(value)} {value!r}")
        minimum = {"k": 1, "folds": 2, "seed": 0}[key]
        if value < minimum:
            raise _fail(where, shown, f"must be >= {minimum}, got {value}")
        return value
    if key == "closure":
        if not isinstance(value, bool):
            raise _fail(where, shown, f"expected true or false, got {_type_name(value)} {value!r}")
        return value
    if key == "timeout":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise _fail(where, shown, f"expected a positive number of seconds, got {value!r}")
        return float(value)
    if key == "metrics":
        if not isinstance(value, list) or not all(isinstance(m, str) and m for m in value):
            raise _fail(where, shown, f"expected an array of metric names, got {value!r}")
        from primsel.eval.metrics import parse_metric

        for metric in value:
            try:
                parse_metric(metric)
            except ValueError as exc:
                raise _fail(where, shown, str(exc)) from None
        return sorted(dict.fromkeys(value))
    if key in TABLE_KEYS:
        if isinstance(value, str):
            if not value:
                raise _fail(where, shown, "empty name")
            return value
        if isinstance(value, Mapping):
            if not isinstance(value.get("type"), str) or not value.get("type"):
                raise _fail(where, shown, "a table needs a 'type' string")
            return dict(value)
        raise _fail(where, shown, f"expected a name or a table, got {_type_name(value)} {value!r}")
    raise _fail(where, shown, "unknown key")  # pragma: no cover - callers check the key first


def _accepted_parameters(cls: type) -> set[str] | None:
    """Constructor parameter names of ``cls``, or None when it takes ``**kwargs`` (cannot tell)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL}


def _annotations(cls: type) -> dict[str, Any]:
    """Constructor parameter annotations of ``cls`` as objects; string annotations are
    evaluated in the class's module, and those that cannot be are left out."""
    import sys

    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    init = getattr(cls, "__init__", None)
    module = sys.modules.get(getattr(init, "__module__", None) or cls.__module__)
    namespace = dict(vars(module)) if module is not None else {}
    out = {}
    for name, param in params.items():
        ann = param.annotation
        if ann is inspect.Parameter.empty:
            continue
        if isinstance(ann, str):
            try:
                ann = eval(ann, namespace)  # noqa: S307 - the class's own annotation text
            except Exception:  # noqa: BLE001 - e.g. a name imported only for type checkers
                continue
        out[name] = ann
    return out


def value_matches(value: Any, hint: Any) -> bool | None:
    """Whether a TOML value fits a type annotation: True, False, or None (cannot tell).

    Understood: ``Any``, ``None``, ``bool``, ``int`` (not a bool), ``float`` (an int too),
    ``str``, ``Literal[...]``, unions (``X | None``), sequences (``list``, ``tuple``,
    ``Sequence[X]``: an array, items checked) and mappings (a table). ``os.PathLike`` accepts a
    string. Anything else: None.
    """
    import collections.abc
    import os
    import types
    import typing

    if hint is typing.Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        results = [value_matches(value, a) for a in args]
        return True if True in results else (None if None in results else False)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is os.PathLike or origin is os.PathLike:
        return True if isinstance(value, str) else None
    container = origin or hint
    if container in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return None if args else True
        if not args:
            return True
        results = [value_matches(v, args[0]) for v in value]
        return False if False in results else (None if None in results else True)
    if container in (dict, collections.abc.Mapping):
        return isinstance(value, Mapping)
    if isinstance(hint, type) and isinstance(value, hint):
        return True
    return None


def _hint_text(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if isinstance(hint, type) else None
    return text or str(hint).replace("typing.", "").replace("collections.abc.", "")


def check_component(where: str, key: str, spec: Any, kind: str) -> None:
    """Check that a retriever / generator specification names a known class, that a table's keys
    are parameters of it (when its signature tells) with values of the annotated types (when
    :func:`value_matches` can tell), recursively for ``members``, and that it can be constructed
    (construction only stores parameters, DESIGN.md).

    Raises
    ------
    ConfigError : the message names ``where`` (the file) and ``key``.
    """
    from primsel import registry

    name = spec if isinstance(spec, str) else spec.get("type")
    try:
        cls = registry.resolve(name, kind)
    except registry.UnknownComponentError as exc:
        raise _fail(where, key, str(exc)) from None
    if isinstance(spec, Mapping):
        accepted = _accepted_parameters(cls)
        if accepted is None and kind == "generator":
            accepted = set(GENERATOR_KEYS)
        if accepted is not None:
            unknown = sorted(set(spec) - {"type"} - accepted)
            if unknown:
                raise _fail(where, f"{key}.{unknown[0]}",
                            f"unknown {kind} parameter for {name!r}; accepted: {', '.join(sorted(accepted))}")
        hints = _annotations(cls)
        for param, value in spec.items():
            if param != "type" and param in hints and value_matches(value, hints[param]) is False:
                raise _fail(where, f"{key}.{param}", f"{kind} {name!r} expects {_hint_text(hints[param])}, "
                                                     f"got {_type_name(value)} {value!r}")
        members = spec.get("members")
        if isinstance(members, list):
            for i, member in enumerate(members):
                if isinstance(member, (str, Mapping)):
                    sub = f"{key}.members[{i}]"
                    check_component(where, sub, _check_value(where, kind, member, sub), kind)
    try:
        registry.build(spec, kind)
    except Exception as exc:  # noqa: BLE001 - any constructor complaint is a config error here
        raise _fail(where, key, f"cannot build {kind} {spec_label(spec)!r}: {exc}") from None


def _set_dotted(settings: dict[str, Any], key: str, value: Any, where: str) -> None:
    top, _, rest = key.partition(".")
    table = settings.get(top)
    if table is None:
        raise _fail(where, f"grid.{key}", f"no {top!r} setting to reach into; add a [{top}] table")
    table = {"type": table} if isinstance(table, str) else dict(table)
    node = table
    parts = rest.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        child = dict(child) if isinstance(child, Mapping) else {}
        node[part] = child
        node = child
    node[parts[-1]] = value
    settings[top] = table


def parse_config(raw: Mapping[str, Any], where: str = "<config>", name: str | None = None,
                 base_dir: Path | None = None) -> ExperimentConfig:
    """Check a parsed TOML mapping and return the experiment it declares.

    Parameters
    ----------
    raw : the TOML document as a mapping.
    where : how errors name the source (the file path).
    name : default experiment name (the file stem) when ``raw`` has none; else "experiment".
    base_dir : directory a relative ``data`` path is resolved against.

    Raises
    ------
    ConfigError : unknown key (top level, in [grid], or a parameter a retriever or generator
        class does not accept), unknown retriever or generator, empty or non-list grid entry,
        wrong type or range, no retriever; the message names ``where`` and the key.
    """
    for key in raw:
        if key not in TOP_KEYS:
            raise _fail(where, key, f"unknown key; expected one of {', '.join(TOP_KEYS)}")
    exp_name = raw.get("name", name or "experiment")
    if not isinstance(exp_name, str) or not exp_name or exp_name in (".", "..") or "/" in exp_name or "\\" in exp_name:
        raise _fail(where, "name", f"expected a non-empty name without path separators, got {exp_name!r}")
    for key in ("description", "data", "baseline"):
        if key in raw and not isinstance(raw[key], str):
            raise _fail(where, key, f"expected a string, got {_type_name(raw[key])} {raw[key]!r}")
    pair_on = raw.get("pair_on")
    if pair_on is not None:
        if not isinstance(pair_on, list) or not all(isinstance(k, str) and k for k in pair_on):
            raise _fail(where, "pair_on", f"expected an array of setting keys, got {pair_on!r}")
        for k in pair_on:
            top = k.split(".", 1)[0]
            if k == "retriever" or not (k in CELL_KEYS or (top in TABLE_KEYS and "." in k)):
                raise _fail(where, "pair_on", f"{k!r} is not a setting a cell shares with its baseline; "
                                              f"expected keys among {', '.join(c for c in CELL_KEYS if c != 'retriever')} "
                                              "or dotted keys such as 'generator.seed'")
        pair_on = tuple(dict.fromkeys(pair_on))
    base: dict[str, Any] = dict(DEFAULTS)
    for key in CELL_KEYS:
        if key in raw:
            base[key] = _check_value(where, key, raw[key])
    grid_raw = raw.get("grid", {})
    if isinstance(grid_raw, Mapping):
        grids = [_check_grid(where, "grid", grid_raw)]
    elif isinstance(grid_raw, list) and grid_raw and all(isinstance(g, Mapping) for g in grid_raw):
        grids = [_check_grid(where, f"grid[{i}]", g) for i, g in enumerate(grid_raw)]
    else:
        raise _fail(where, "grid", f"expected a table or a non-empty array of tables, got {grid_raw!r}")
    for i, grid in enumerate(grids):
        if "retriever" not in base and "retriever" not in grid:
            name_ = "grid" if len(grids) == 1 else f"grid[{i}]"
            raise _fail(where, "retriever", f"no retriever: set 'retriever' or '{name_}.retriever'")
    config = ExperimentConfig(
        name=exp_name,
        path=None,
        base=base,
        grids=tuple(grids),
        data=_data_path(raw.get("data"), base_dir),
        description=raw.get("description", ""),
        baseline=raw.get("baseline"),
        base_dir=base_dir,
        pair_on=pair_on,
    )
    cells = expand(config, dataset="", where=where)
    _check_components(where, config, cells)
    _check_programs(where, config, cells)
    is_cell_id = config.baseline is not None and len(config.baseline) == CELL_ID_LENGTH and \
        all(ch in "0123456789abcdef" for ch in config.baseline)
    if not is_cell_id:  # a cell id depends on the dataset: the report checks it
        try:
            wanted = baseline_label(config.baseline, [(c.id, c.settings["retriever"]) for c in cells])
        except ValueError as exc:
            raise _fail(where, "baseline", str(exc)) from None
        _check_pairs(where, config, cells, wanted)
    return config


def _check_pairs(where: str, config: ExperimentConfig, cells: Sequence[Cell], wanted: str) -> None:
    """Every cell must find at most one baseline cell (with ``pair_on``, several could agree)."""
    if config.pair_on is None:
        return  # cells are unique, so at most one baseline cell has all their other settings
    bases: dict[str, list[Cell]] = {}
    for c in cells:
        if spec_label(c.settings["retriever"]) == wanted:
            bases.setdefault(pair_key(c.settings, config.pair_on), []).append(c)
    for c in cells:
        found = bases.get(pair_key(c.settings, config.pair_on), [])
        if len(found) > 1 and c not in found:
            raise _fail(where, "pair_on", f"cell {c.label!r} matches {len(found)} baseline cells "
                                          f"({'; '.join(b.label for b in found)}); add the settings "
                                          "that tell them apart to pair_on")


def _check_components(where: str, config: ExperimentConfig, cells: Sequence[Cell]) -> None:
    """Check every retriever and generator specification once, naming the key it came from."""
    checked: set[str] = set()

    def check(key: str, spec: Any, kind: str) -> None:
        text = kind + canonical_json(canonical_spec(spec))
        if text not in checked:
            checked.add(text)
            check_component(where, key, spec, kind)

    single = len(config.grids) == 1
    for kind in TABLE_KEYS:
        dotted = [g for g, grid in enumerate(config.grids) if any(k.startswith(kind + ".") for k in grid)]
        if dotted:
            # the tables are completed by the grid: check what every cell uses (a problem with a
            # parameter is named as the dotted grid key, "grid.retriever.k1")
            name = f"{'grid' if single else f'grid[{dotted[0]}]'}.{kind}"
            for cell in cells:
                if cell.settings.get(kind) is not None:
                    check(name, cell.settings[kind], kind)
            continue
        if config.base.get(kind) is not None:
            check(kind, config.base[kind], kind)
        for g, grid in enumerate(config.grids):
            for i, spec in enumerate(grid.get(kind, ())):
                check(f"{'grid' if single else f'grid[{g}]'}.{kind}[{i}]", spec, kind)


def generator_spec(spec: Any, base_dir: Path | None) -> Any:
    """A generator specification with a relative ``programs`` path (the replay generator's file)
    joined to ``base_dir`` (the experiment file's directory); other specifications unchanged."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("programs"), str):
        return spec
    return {**spec, "programs": str(_data_path(spec["programs"], base_dir))}


def _check_programs(where: str, config: ExperimentConfig, cells: Sequence[Cell]) -> None:
    """A generator's ``programs`` file must exist (relative to the experiment file)."""
    for cell in cells:
        spec = generator_spec(cell.settings.get("generator"), config.base_dir)
        if isinstance(spec, Mapping) and isinstance(spec.get("programs"), str) and not Path(spec["programs"]).is_file():
            raise _fail(where, "generator.programs", f"no such file: {spec['programs']}")


def _check_grid(where: str, name: str, grid_raw: Mapping[str, Any]) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for key, values in _flatten_grid(grid_raw):
        gkey = f"{name}.{key}"
        top = key.split(".", 1)[0]
        if key not in CELL_KEYS and not (top in TABLE_KEYS and "." in key):
            raise _fail(where, gkey, f"unknown grid key; expected one of {', '.join(CELL_KEYS)} "
                                     "or a dotted key into 'retriever' or 'generator'")
        if not isinstance(values, list):
            raise _fail(where, gkey, f"expected an array of values, got {_type_name(values)} {values!r}")
        if not values:
            raise _fail(where, gkey, "empty list: the grid would have no cells")
        if key in CELL_KEYS:
            values = [_check_value(where, key, v, f"{gkey}[{i}]") for i, v in enumerate(values)]
        grid[key] = values
    return grid


def _data_path(value: str | None, base_dir: Path | None) -> Path | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def _flatten_grid(grid: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) pairs; TOML ``generator.model = [...]`` arrives as a nested table."""
    out: list[tuple[str, Any]] = []
    for key, value in grid.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping) and full.split(".", 1)[0] in TABLE_KEYS:
            out.extend(_flatten_grid(value, full + "."))
        else:
            out.append((full, value))
    return out


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and check an experiment TOML file (see the module docstring for its keys).

    Raises
    ------
    ConfigError : unreadable file, TOML syntax error, or any problem of :func:`parse_config`;
        the message names the file and the key.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    config = parse_config(raw, where=str(path), name=path.stem, base_dir=path.parent)
    return dataclasses.replace(config, path=path)


# ---------------------------------------------------------------------------------------------
# Grid expansion
# ---------------------------------------------------------------------------------------------
def resolve_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Fill defaults and canonicalise a cell's settings: canonical retriever and generator
    specifications; ``timeout`` kept only with a generator, ``metrics`` only when non-empty,
    ``threshold`` only when set (so cells without it keep their ids)."""
    out = {**DEFAULTS, **settings}
    out["retriever"] = canonical_spec(out["retriever"])
    gen = out.get("generator")
    if gen is None:
        out["generator"] = None
        out.pop("timeout", None)
    else:
        # a generator stays a table (``{"type": ...}``) even with no parameters
        out["generator"] = ({str(k): canonical_spec(v) for k, v in gen.items()}
                            if isinstance(gen, Mapping) else {"type": gen})
    if not out.get("metrics"):
        out.pop("metrics", None)
    if out.get("threshold") is None:
        out.pop("threshold", None)
    return out


def expand(config: ExperimentConfig, dataset: str = "", where: str | None = None) -> list[Cell]:
    """The cells of an experiment: the Cartesian product of its grid lists over the base settings.

    Parameters
    ----------
    config : the experiment.
    dataset : fingerprint of the tasks the cells run on (part of every cell's settings, so of
        its id; the runner passes :func:`primsel.experiments.runner.dataset_fingerprint`).
    where : how errors name the source (default: the config's path).

    Returns
    -------
    Cells in grid order (the last grid key varies fastest; with several grids, the first
    grid's cells first); cells whose resolved settings coincide are kept once.

    Raises
    ------
    ConfigError : a dotted grid key reaches into a setting that is not a table.
    """
    where = where or str(config.path or "<config>")
    resolved: list[dict[str, Any]] = []
    seen: set[str] = set()
    for grid in config.grids:
        plain = [k for k in grid if "." not in k]
        dotted = [k for k in grid if "." in k]
        for combo in itertools.product(*(grid[k] for k in grid)):
            settings = dict(config.base)
            chosen = dict(zip(grid, combo))
            for key in plain:
                settings[key] = chosen[key]
            for key in dotted:
                _set_dotted(settings, key, chosen[key], where)
            settings = resolve_settings(settings)
            settings["dataset"] = dataset
            cid = cell_id(settings)
            if cid not in seen:
                seen.add(cid)
                resolved.append(settings)
    keys = list(dict.fromkeys(k for grid in config.grids for k in grid))
    varied = varied_keys(resolved, keys)
    return [Cell(id=cell_id(s), settings=s, label=cell_label(s, varied)) for s in resolved]
