"""Experiment declarations: base settings and one grid (``[grid]``) or several (``[[grid]]``) of
lists (keys: experiments/README.md); the cells are the union of each grid's Cartesian product (in
file order, the last key varying fastest) over the base settings, each a checked
:class:`CellSettings`. Errors name the key of the file that set the value (``k``, ``grid.k[1]``,
``grid.retriever.k1``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.datasets.pydoc import is_pydoc_spec
from primsel.experiments.agents import is_aspera, resolve_protocol
from primsel.experiments.dataset import LIBRARIES
from primsel.experiments.labels import (
    baseline_label,
    cell_label,
    folder_name,
    pair_key,
    varied_keys,
)
from primsel.experiments.settings import DEFAULTS, CellSettings, SettingError, check_setting
from primsel.files import NotUtf8Error, digest, read_utf8

#: Keys that define a cell (and can be varied by the grid).
CELL_KEYS = (
    "retriever",
    "k",
    "threshold",
    "closure",
    "folds",
    "seed",
    "generator",
    "reflection",
    "timeout",
    "metrics",
    "selector",
    "depth",
)
#: Every key accepted at the top level of an experiment file.
TOP_KEYS = (
    "name",
    "description",
    "data",
    "library",
    "aspera_src",
    "baseline",
    "pair_on",
    "grid",
) + CELL_KEYS
#: Tables the grid may reach into with dotted keys.
TABLE_KEYS = ("retriever", "generator", "selector", "reflection")
#: Length of a cell id (hex characters of the sha256).
CELL_ID_LENGTH = 12


class ConfigError(ValueError):
    """An experiment file is invalid; the message names the file and the key."""


@dataclass(frozen=True)
class Cell:
    """One configuration of an experiment grid: ``id`` (:func:`cell_id` of ``settings``), the
    checked ``settings`` (``settings.to_json()`` is what ``config.json`` holds), a short readable
    ``label`` (:func:`cell_label`) and ``folder``, the name of its directory
    (:func:`primsel.experiments.labels.folder_name`: ``<label-slug>-<id>`` when a component has a
    ``label``, else the id; "": the id)."""

    id: str
    settings: CellSettings
    label: str
    folder: str = ""

    @property
    def directory_name(self) -> str:
        """The name of the cell's directory in the experiment directory."""
        return self.folder or self.id


@dataclass(frozen=True)
class ExperimentConfig:
    """A parsed, checked experiment file (its keys: experiments/README.md).

    Parameters
    ----------
    path, base_dir : the TOML file and its directory, which relative paths are resolved against
        (None: the cwd).
    base : the top-level cell settings as written, with defaults filled.
    grids : each grid as dotted key -> list of values, in file order.
    data : the ``data`` path (a tuple for an array) resolved against ``base_dir``, or None.
    cells : every cell's settings (without a dataset) as (index of its grid, settings), in grid
        order.
    name, description, baseline, pair_on : as the file gives them (``pair_on`` as a tuple).
    library : the documentation tasks are ranked against and prompts show: ``"primsel"`` or
        ``"aspera"`` (:data:`primsel.experiments.dataset.LIBRARIES`).
    aspera_src : the checkout of apple/ml-aspera that ASPERA's protocol and library read, resolved
        against ``base_dir``; None: ``$PRIMSEL_ASPERA_SRC``.
    """

    name: str
    path: Path | None
    base: Mapping[str, Any]
    grids: tuple[Mapping[str, Sequence[Any]], ...] = ({},)
    data: Path | tuple[Path, ...] | None = None
    description: str = ""
    baseline: str | None = None
    base_dir: Path | None = None
    pair_on: tuple[str, ...] | None = None
    cells: tuple[tuple[int, CellSettings], ...] = ()
    library: str = "primsel"
    aspera_src: Path | None = None

    @property
    def uses_aspera(self) -> bool:
        """True when a cell renders ASPERA's requests or ranks ASPERA's documentation: the run
        needs ASPERA's checkout."""
        if self.library == "aspera":
            return True
        return any(is_aspera(settings.generator) for _, settings in self.cells)


def cell_id(settings: CellSettings | Mapping[str, Any]) -> str:
    """Stable id of a cell's settings: the first 12 hex characters of the sha256 of the canonical
    JSON of :meth:`CellSettings.to_json` (or of the mapping given) without the components'
    labels (:func:`primsel.spec.without_labels`): a label names a component, it does not change
    what is computed, so relabelling a finished cell reuses it."""
    data = settings.to_json() if isinstance(settings, CellSettings) else settings
    return digest(specs.without_labels(data))[:CELL_ID_LENGTH]


def _fail(where: str, key: str, problem: str) -> ConfigError:
    """The error of ``key`` in the file ``where``."""
    return ConfigError(f"{where}: {key}: {problem}")


def _is_setting(key: str) -> bool:
    """A top-level cell key, or a dotted key into one of the tables."""
    return key in CELL_KEYS or (key.split(".", 1)[0] in TABLE_KEYS and "." in key)


def _set_dotted(settings: dict[str, Any], key: str, value: Any, where: str) -> None:
    """Set the dotted grid key ``key`` (``retriever.weights``, ``generator.model``) of ``settings``
    to ``value``, copying each table on the way (the base settings stay as they are); a
    specification named by a string becomes the table ``{"type": name}``.

    Raises
    ------
    ConfigError : no such table to reach into, or a value there that is not a table.
    """
    top, _, rest = key.partition(".")
    table = settings.get(top, {} if top == "reflection" else None)
    if table is None:
        raise _fail(where, f"grid.{key}", f"no {top!r} setting to reach into; add a [{top}] table")
    if isinstance(table, str):
        table = {"type": table}
    elif isinstance(table, Mapping):
        table = dict(table)
    else:
        try:
            check_setting(top, table)  # raises: not a table
        except SettingError as exc:
            raise _fail(where, top, exc.problem) from None
    settings[top] = table
    parts = rest.split(".")
    node = table
    for part in parts[:-1]:
        inner = node.get(part)
        inner = dict(inner) if isinstance(inner, Mapping) else {}
        node[part] = inner
        node = inner
    node[parts[-1]] = value


def _check_top(raw: Mapping[str, Any], where: str, default_name: str) -> str:
    """Check the keys that are not cell settings but ``pair_on``; returns the experiment's name."""
    for key in raw:
        if key not in TOP_KEYS:
            raise _fail(where, key, f"unknown key; expected one of {', '.join(TOP_KEYS)}")
    exp_name = raw.get("name", default_name)
    if (
        not isinstance(exp_name, str)
        or not exp_name
        or exp_name in (".", "..")
        or "/" in exp_name
        or "\\" in exp_name
    ):
        raise _fail(
            where, "name", f"expected a non-empty name without path separators, got {exp_name!r}"
        )
    data = raw.get("data")
    if data is not None and not (
        isinstance(data, str)
        or (isinstance(data, list) and data and all(isinstance(d, str) and d for d in data))
    ):
        raise _fail(
            where,
            "data",
            f"expected a path or an array of paths, got {specs.toml_type(data)} {data!r}",
        )
    for key in ("description", "baseline", "aspera_src"):
        if key in raw and not isinstance(raw[key], str):
            raise _fail(
                where, key, f"expected a string, got {specs.toml_type(raw[key])} {raw[key]!r}"
            )
    library = raw.get("library", "primsel")
    if library not in LIBRARIES:
        raise _fail(where, "library", f"expected one of {', '.join(LIBRARIES)}, got {library!r}")
    return exp_name


def _pair_on(raw: Mapping[str, Any], where: str) -> tuple[str, ...] | None:
    """The file's ``pair_on`` as a tuple without repeats (None when absent); ConfigError for a key
    that is not a setting a cell shares with its baseline cell."""
    pair_on = raw.get("pair_on")
    if pair_on is None:
        return None
    if not isinstance(pair_on, list) or not all(isinstance(k, str) and k for k in pair_on):
        raise _fail(where, "pair_on", f"expected an array of setting keys, got {pair_on!r}")
    for k in pair_on:
        if k == "retriever" or not _is_setting(k):
            raise _fail(
                where,
                "pair_on",
                f"{k!r} is not a setting a cell shares with its baseline; "
                f"expected keys among {', '.join(c for c in CELL_KEYS if c != 'retriever')} "
                "or dotted keys such as 'generator.seed'",
            )
    return tuple(dict.fromkeys(pair_on))


def parse_config(
    raw: Mapping[str, Any],
    where: str = "<config>",
    name: str | None = None,
    base_dir: Path | None = None,
) -> ExperimentConfig:
    """The experiment a parsed TOML mapping ``raw`` declares, its grid expanded into checked cell
    settings; ``where`` names the source in errors, ``name`` is the default name (None:
    "experiment"), ``base_dir`` the directory relative paths are resolved against and where
    ``"module:Class"`` modules are also looked for (:func:`primsel.registry.add_plugin_directory`).

    Raises
    ------
    ConfigError : an unknown key, a bad value, an empty or non-list grid entry, no retriever, a
        missing ``programs`` file, a ``baseline`` or ``pair_on`` that finds no single baseline cell
        (naming ``where`` and the key).
    """
    exp_name = _check_top(raw, where, name or "experiment")
    if base_dir is not None:  # plug-in modules next to the file
        registry.add_plugin_directory(base_dir)
    base: dict[str, Any] = {**DEFAULTS, **{key: raw[key] for key in CELL_KEYS if key in raw}}
    grid_raw = raw.get("grid", {})
    if isinstance(grid_raw, Mapping):
        grids = [_check_grid(where, "grid", grid_raw, base_dir)]
    elif isinstance(grid_raw, list) and grid_raw and all(isinstance(g, Mapping) for g in grid_raw):
        grids = [_check_grid(where, f"grid[{i}]", g, base_dir) for i, g in enumerate(grid_raw)]
    else:
        raise _fail(
            where, "grid", f"expected a table or a non-empty array of tables, got {grid_raw!r}"
        )
    for i, grid in enumerate(grids):
        if "retriever" not in base and "retriever" not in grid:
            grid_name = "grid" if len(grids) == 1 else f"grid[{i}]"
            raise _fail(
                where, "retriever", f"no retriever: set 'retriever' or '{grid_name}.retriever'"
            )
    data = raw.get("data")
    paths = (
        tuple(_data_path(d, base_dir) for d in data)
        if isinstance(data, list)
        else _data_path(data, base_dir)
    )
    library = raw.get("library", "primsel")
    aspera_src = _data_path(raw.get("aspera_src"), base_dir)
    config = ExperimentConfig(
        name=exp_name,
        path=None,
        base=base,
        grids=tuple(grids),
        data=paths,
        description=raw.get("description", ""),
        baseline=raw.get("baseline"),
        base_dir=base_dir,
        pair_on=_pair_on(raw, where),
        cells=tuple(_grid_cells(where, base, grids, library)),
        library=library,
        aspera_src=aspera_src,
    )
    cells = expand(config)
    for cell in cells:
        spec = generator_spec(cell.settings.generator, base_dir)
        if (
            isinstance(spec, Mapping)
            and isinstance(spec.get("programs"), str)
            and not Path(spec["programs"]).is_file()
        ):
            raise _fail(where, "generator.programs", f"no such file: {spec['programs']}")
    baseline = config.baseline  # a cell id depends on the dataset: the report checks it
    if not (
        baseline and len(baseline) == CELL_ID_LENGTH and set(baseline) <= set("0123456789abcdef")
    ):
        try:
            wanted = baseline_label(baseline, [(c.id, c.settings.retriever) for c in cells])
        except ValueError as exc:
            raise _fail(where, "baseline", str(exc)) from None
        _check_pairs(where, config.pair_on, cells, wanted)
    return config


def _grid_cells(
    where: str,
    base: Mapping[str, Any],
    grids: Sequence[Mapping[str, Sequence[Any]]],
    library: str = "primsel",
) -> list[tuple[int, CellSettings]]:
    """Every cell of the grids as (index of its grid, its checked settings), in grid order (the last
    key of a grid varying fastest), each resolved under ASPERA's protocol when its generator says so
    (:func:`primsel.experiments.agents.resolve_protocol`, with the experiment's ``library``);
    ConfigError naming the file's key that set a bad value."""
    out: list[tuple[int, CellSettings]] = []
    for g, grid in enumerate(grids):
        keys = [k for k in grid if k != "data"]
        for combo in itertools.product(*(range(len(grid[k])) for k in keys)):
            settings = dict(base)
            chosen = dict(zip(keys, combo))
            for key in sorted(keys, key=lambda k: "." in k):  # whole values first, then dotted keys
                if "." in key:
                    _set_dotted(settings, key, grid[key][chosen[key]], where)
                else:
                    settings[key] = grid[key][chosen[key]]
            try:
                resolved = resolve_protocol(settings, library)
                out.append((g, CellSettings.from_mapping(resolved)))
            except SettingError as exc:
                name = "grid" if len(grids) == 1 else f"grid[{g}]"
                raise _fail(where, _source(exc.key, name, chosen), exc.problem) from None
    return out


def _source(key: str, grid_name: str, chosen: Mapping[str, int]) -> str:
    """The file's key that set the setting ``key``: ``grid.retriever.k1``, ``grid.k[1]`` or
    ``k``."""
    top, dot, rest = key.partition(".")
    if any(k.startswith(top + ".") for k in chosen):
        return f"{grid_name}.{key}"
    if top in chosen:
        return f"{grid_name}.{top}[{chosen[top]}]{dot}{rest}"
    return key


def _check_pairs(
    where: str, pair_on: tuple[str, ...] | None, cells: Sequence[Cell], wanted: str
) -> None:
    """Every cell must find at most one baseline cell (with ``pair_on``, several could agree)."""
    if pair_on is None:
        return  # cells are unique, so at most one baseline cell has all their other settings
    bases: dict[str, list[Cell]] = {}
    for c in cells:
        if specs.label(c.settings.retriever) == wanted:
            bases.setdefault(pair_key(c.settings.to_json(), pair_on), []).append(c)
    for c in cells:
        found = bases.get(pair_key(c.settings.to_json(), pair_on), [])
        if len(found) > 1 and c not in found:
            raise _fail(
                where,
                "pair_on",
                f"cell {c.label!r} matches {len(found)} baseline cells "
                f"({'; '.join(b.label for b in found)}); add the settings "
                "that tell them apart to pair_on",
            )


def generator_spec(spec: Any, base_dir: Path | None) -> Any:
    """A generator specification with a relative ``programs`` (replay) or ``gguf`` (local) path
    joined to ``base_dir``; other specifications unchanged."""
    if not isinstance(spec, Mapping):
        return spec
    paths = {
        key: str(_data_path(spec[key], base_dir))
        for key in ("programs", "gguf")
        if isinstance(spec.get(key), str)
    }
    return {**spec, **paths} if paths else spec


def _check_grid(
    where: str, name: str, grid_raw: Mapping[str, Any], base_dir: Path | None = None
) -> dict[str, list[Any]]:
    """The grid as dotted key -> list of values (the cells check the values); ``data`` as paths."""
    grid: dict[str, list[Any]] = {}
    for key, values in _flatten_grid(grid_raw):
        gkey = f"{name}.{key}"
        if key == "data":
            if (
                not isinstance(values, list)
                or not values
                or not all(isinstance(v, str) and v for v in values)
            ):
                raise _fail(where, gkey, f"expected a non-empty array of paths, got {values!r}")
        elif not _is_setting(key):
            raise _fail(
                where,
                gkey,
                f"unknown grid key; expected one of {', '.join(CELL_KEYS)} "
                "or a dotted key into 'retriever', 'generator' or 'selector'",
            )
        elif not isinstance(values, list):
            raise _fail(
                where,
                gkey,
                f"expected an array of values, got {specs.toml_type(values)} {values!r}",
            )
        elif not values:
            raise _fail(where, gkey, "empty list: the grid would have no cells")
        grid[key] = [_data_path(v, base_dir) for v in values] if key == "data" else values
    return grid


def _data_path(value: str | None, base_dir: Path | None) -> Path | None:
    """A data path of the file, relative to ``base_dir`` (a ``pydoc`` specification as it is; None
    for None)."""
    if value is None:
        return None
    if is_pydoc_spec(value):  # a dataset specification, not a path
        return Path(value)
    path = Path(value).expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def _flatten_grid(grid: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) pairs; TOML ``generator.model = [...]`` arrives as a nested table."""
    for key, value in grid.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping) and full.split(".", 1)[0] in TABLE_KEYS:
            yield from _flatten_grid(value, full + ".")
        else:
            yield full, value


class OverrideError(ConfigError):
    """A ``--set KEY=VALUE`` override is malformed or names an unknown key (the message names
    it)."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """The dotted key and the value of an override ``KEY=VALUE``, the value read as TOML
    (``k=10``, ``generator.model="gpt-4o"``, ``grid.k=[5, 10]``, ``closure=true``).

    Raises
    ------
    OverrideError : no ``=``, an empty key part, or a value that is not a TOML value.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not sep or not all(part.strip() for part in parts):
        raise OverrideError(f"--set {text!r}: expected KEY=VALUE with a dotted KEY (k=10)")
    try:
        parsed = tomllib.loads(f"value = {value.strip()}")["value"]
    except tomllib.TOMLDecodeError as exc:
        raise OverrideError(
            f"--set {key}: {value.strip()!r} is not a TOML value ({exc}); "
            'strings need quotes: --set generator.model=\'"gpt-4o"\''
        ) from None
    return [part.strip() for part in parts], parsed


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """The parsed TOML mapping ``raw`` with each ``KEY=VALUE`` of ``overrides`` set, in order
    (:func:`parse_override`), as if the file said ``KEY = VALUE``: ``k=10`` sets ``k``,
    ``retriever.k1=1.2`` a parameter of the retriever (a retriever named by a string becomes
    the table ``{type = name}``), ``grid.k=[5, 10]`` a grid list. ``raw`` is not modified.

    Raises
    ------
    OverrideError : see :func:`parse_override`; a first key part that is not a key of an
        experiment file (:data:`TOP_KEYS`), a dotted key below a value that is not a table
        (naming the key), or a dotted key into ``grid`` when the file has several grids.
    """
    out = copy.deepcopy(dict(raw))
    for text in overrides:
        parts, value = parse_override(text)
        key = ".".join(parts)
        if parts[0] not in TOP_KEYS:
            raise OverrideError(
                f"--set {key}: unknown key {parts[0]!r}"
                f"{registry.did_you_mean(parts[0], TOP_KEYS)}; expected one of "
                f"{', '.join(TOP_KEYS)}"
            )
        node = out
        for depth, part in enumerate(parts[:-1]):
            inner = node.get(part)
            if isinstance(inner, str) and depth == 0 and part in TABLE_KEYS:
                inner = {"type": inner}
            elif inner is None:
                inner = {}
            if not isinstance(inner, dict):
                where = ".".join(parts[: depth + 1])
                raise OverrideError(
                    f"--set {key}: {where} is {specs.toml_type(inner)} {inner!r}, not a table "
                    "to set a key in"
                )
            node[part] = inner
            node = inner
        node[parts[-1]] = value
    return out


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read and check an experiment TOML file (:func:`parse_config`), with the ``KEY=VALUE``
    ``overrides`` of ``primsel run --set`` applied first (:func:`apply_overrides`).

    Raises
    ------
    ConfigError : an unreadable file, one that is not UTF-8 (the message names the byte
        offset), a TOML syntax error, or any problem of
        :func:`parse_config`; :class:`OverrideError` for a bad override.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(read_utf8(path))
    except NotUtf8Error as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    raw = apply_overrides(raw, overrides)
    return dataclasses.replace(
        parse_config(raw, where=str(path), name=path.stem, base_dir=path.parent), path=path
    )


def _data_key(path: Any) -> str:
    """A data path as it is compared: absolute and resolved (a ``pydoc`` specification as it is)."""
    text = str(path)
    return text if text.startswith("pydoc") else str(Path(text).expanduser().resolve())


def expand(config: ExperimentConfig, dataset: str = "", data: Any = None) -> list[Cell]:
    """The cells of an experiment on the tasks of fingerprint ``dataset``, in grid order.

    The fingerprint is part of every cell's settings, and so of its id. Two grid cells whose
    resolved settings are the same (the same cell id) are one cell, at the place of the first. A
    grid whose ``data`` list does not name ``data`` (the dataset's path; None: every grid) gives no
    cell. The settings were checked by :func:`parse_config` and are not checked again.
    """
    resolved: dict[str, CellSettings] = {}
    for g, settings in config.cells:
        grid = config.grids[g]
        if (
            data is not None
            and "data" in grid
            and _data_key(data) not in {_data_key(p) for p in grid["data"]}
        ):
            continue
        cell_settings = settings.for_dataset(dataset)
        resolved.setdefault(cell_id(cell_settings), cell_settings)
    jsons = [s.to_json() for s in resolved.values()]
    varied = varied_keys(
        jsons, list(dict.fromkeys(k for grid in config.grids for k in grid if k != "data"))
    )
    cells = []
    for (cid, s), d in zip(resolved.items(), jsons):
        label = cell_label(d, varied)
        cells.append(Cell(id=cid, settings=s, label=label, folder=folder_name(cid, label, d)))
    return cells
