"""A run folder's ``config.json`` (one per cell) and ``experiment.json`` as typed records.

==========================  ===================================================================
record                      file
==========================  ===================================================================
:class:`CellConfig`         ``<out>/<name>/<cell id>/config.json``: written by
                            :func:`primsel.experiments.cell.write_cell`
:class:`ExperimentManifest` ``<out>/<name>/experiment.json``: written by
                            :func:`primsel.experiments.runner.run_experiment`; its ``cells``
                            are :class:`CellEntry` records
==========================  ===================================================================

Each record's ``to_json`` is the one writer of its file (through :func:`primsel.files.dumps_json`)
and its ``from_json`` (``read`` for a file) the one reader: ``from_json(x).to_json() == x`` for
every file the runner writes, keys a record does not know included (kept in ``extra``). Keys that
older versions did not write read as None or empty; a missing required key (``id`` of a
config.json or of a cell entry, ``cells`` of an experiment.json) or a key of the wrong shape is
a :class:`RunFileError` naming the file. The cell's ``report.json`` is
:class:`primsel.experiments.records.CellReport`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CellConfig", "CellEntry", "ExperimentManifest", "RunFileError"]


class RunFileError(ValueError):
    """A config.json or experiment.json that is not valid JSON, not a JSON object, lacks a
    required key or holds a key of the wrong shape (the message names the file)."""


def _read_object(path: str | Path) -> dict[str, Any]:
    """The JSON object of a file.

    Raises
    ------
    OSError : the file cannot be read (FileNotFoundError when it does not exist).
    RunFileError : not valid JSON, or not a JSON object.
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:  # invalid JSON or UTF-8
        raise RunFileError(f"{path}: unreadable: {exc}") from None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: unreadable: not a JSON object")
    return value


def _required(rest: dict[str, Any], key: str, source: str) -> Any:
    if key not in rest:
        raise RunFileError(f"{source}: no {key!r}")
    return rest.pop(key)


def _mapping(rest: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    """``rest[key]`` taken out: a table (missing or null: empty)."""
    value = rest.pop(key, None)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RunFileError(f"{source}: {key!r} must be a table, got {value!r}")
    return dict(value)


def _tables(rest: dict[str, Any], key: str, source: str) -> tuple[dict[str, Any], ...]:
    """``rest[key]`` taken out: a list of tables (missing or null: empty)."""
    value = rest.pop(key, None)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, Mapping) for x in value):
        raise RunFileError(f"{source}: {key!r} must be a list of tables, got {value!r}")
    return tuple(dict(x) for x in value)


def _strings(rest: dict[str, Any], key: str, source: str) -> tuple[str, ...] | None:
    """``rest[key]`` taken out: a list of strings (missing or null: None)."""
    value = rest.pop(key, None)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise RunFileError(f"{source}: {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class CellConfig:
    """A cell's ``config.json``: what the cell was computed from.

    Parameters
    ----------
    id : the cell id (its directory name).
    label : its readable label (None in files that lack it: readers use the id).
    experiment : the name of the experiment that computed it.
    settings : the resolved settings (:meth:`primsel.experiments.settings.CellSettings.to_json`).
    data : the dataset's summary (:meth:`primsel.experiments.dataset.Dataset.summary`:
        ``source``, ``n_tasks``, ``fingerprint``, ...).
    effective_folds : the folds the cross-validation used (fewer than asked with few tasks).
    generated : the cell ran a generator; ``extraction`` is then written (even when None).
    extraction : with a generator, how programs were taken from the answers (None: the
        generator's own way).
    embedding : key of each ``dense`` specification in the retriever -> how it embeds the
        library (:func:`primsel.experiments.cell.embedding_windows`); empty without one.
    library : ``{"n_primitives", "fingerprint"}`` of the library ranked.
    sources : component kind -> name -> digest of its source (:func:`primsel.spec.sources`), by
        which a later run tells a stale cell (empty in files written before they were recorded).
    versions : package -> installed version (:func:`primsel.experiments.runner.package_versions`).
    extra : the keys of the file no field knows, kept as read.
    """

    id: str
    label: str | None = None
    experiment: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    effective_folds: int | None = None
    generated: bool = False
    extraction: str | None = None
    embedding: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    library: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    versions: Mapping[str, str | None] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """config.json: ``id``, ``label``, ``experiment``, ``settings``, ``data``,
        ``effective_folds``, ``extraction`` (with a generator), ``embedding`` (when not empty),
        ``library``, ``sources``, ``versions``, then :attr:`extra`."""
        out: dict[str, Any] = {"id": self.id, "label": self.label, "experiment": self.experiment,
                               "settings": dict(self.settings), "data": dict(self.data),
                               "effective_folds": self.effective_folds}
        if self.generated:
            out["extraction"] = self.extraction
        if self.embedding:
            out["embedding"] = dict(self.embedding)
        out.update({"library": dict(self.library), "sources": dict(self.sources), "versions": dict(self.versions)})
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "config.json") -> CellConfig:
        """Read a config.json's object (any written so far; ``source`` names it in errors).

        Raises
        ------
        RunFileError : no ``id``, or ``settings``, ``data``, ``embedding``, ``library``,
            ``sources`` or ``versions`` not a table.
        """
        rest = dict(data)
        out = {"id": _required(rest, "id", source), "label": rest.pop("label", None),
               "experiment": rest.pop("experiment", None),
               "effective_folds": rest.pop("effective_folds", None), "generated": "extraction" in rest,
               "extraction": rest.pop("extraction", None)}
        for key in ("settings", "data", "embedding", "library", "sources", "versions"):
            out[key] = _mapping(rest, key, source)
        return cls(**out, extra=rest)

    @classmethod
    def read(cls, path: str | Path) -> CellConfig:
        """Read a cell's config.json.

        Raises
        ------
        OSError : the file cannot be read (FileNotFoundError when there is none).
        RunFileError : see :meth:`from_json`; or not valid JSON, or not a JSON object.
        """
        return cls.from_json(_read_object(path), source=str(path))


@dataclass(frozen=True)
class CellEntry:
    """A cell as experiment.json lists it.

    Parameters
    ----------
    id : the cell id (its directory name).
    label : its readable label (None when the entry lacks it: readers use the id).
    settings : its resolved settings.
    extra : the keys of the entry no field knows, kept as read.
    """

    id: str
    label: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"id", "label", "settings"}``, then :attr:`extra`."""
        return {"id": self.id, "label": self.label, "settings": dict(self.settings), **self.extra}

    @classmethod
    def from_json(cls, data: Any, source: str = "experiment.json") -> CellEntry:
        """Read an entry of ``cells``.

        Raises
        ------
        RunFileError : not a table, no ``id``, or ``settings`` not a table.
        """
        if not isinstance(data, Mapping):
            raise RunFileError(f"{source}: a cell entry must be a table, got {data!r}")
        rest = dict(data)
        if "id" not in rest:
            raise RunFileError(f"{source}: a cell entry without 'id': {data!r}")
        return cls(id=rest.pop("id"), label=rest.pop("label", None),
                   settings=_mapping(rest, "settings", source), extra=rest)


@dataclass(frozen=True)
class ExperimentManifest:
    """An experiment's ``experiment.json``: the experiment as declared, and its cells.

    Parameters
    ----------
    name : the experiment's name (None in files that lack it: readers use the directory's).
    description : its free text.
    baseline : the baseline it declares (None: the first cell's retriever).
    data : the summary of its dataset (of one), or ``{"source", "n_tasks", "fingerprint"}`` of
        several joined by ``+``.
    grids : its grids, each dotted key -> list of values (paths written as strings).
    cells : the cells of the declaration, in grid order.
    datasets : with several datasets, each one's summary and ``notes``; else empty (not written).
    notes : with one dataset, what its loader noted (empty: not written).
    pair_on : the settings a cell and its baseline cell must agree on (None: not declared, not
        written).
    extra : the keys of the file no field knows, kept as read.
    """

    cells: tuple[CellEntry, ...]
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
        """experiment.json: ``name``, ``description``, ``baseline``, ``data``, ``grids``,
        ``cells``, then ``datasets``, ``notes`` and ``pair_on`` when set, then :attr:`extra`."""
        out: dict[str, Any] = {
            "name": self.name, "description": self.description, "baseline": self.baseline,
            "data": dict(self.data), "grids": [dict(g) for g in self.grids],
            "cells": [c.to_json() for c in self.cells],
        }
        if self.datasets:
            out["datasets"] = [dict(d) for d in self.datasets]
        if self.notes:
            out["notes"] = list(self.notes)
        if self.pair_on is not None:
            out["pair_on"] = list(self.pair_on)
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "experiment.json") -> ExperimentManifest:
        """Read an experiment.json's object (any written so far; ``source`` names it in errors).

        Raises
        ------
        RunFileError : no ``cells`` or not a list of cell entries (:meth:`CellEntry.from_json`),
            or ``data`` not a table, ``grids`` or ``datasets`` not a list of tables, ``notes`` or
            ``pair_on`` not a list of strings.
        """
        rest = dict(data)
        cells = _required(rest, "cells", source)
        if not isinstance(cells, list):
            raise RunFileError(f"{source}: 'cells' must be a list, got {cells!r}")
        return cls(cells=tuple(CellEntry.from_json(c, source) for c in cells), name=rest.pop("name", None),
                   description=rest.pop("description", None), baseline=rest.pop("baseline", None),
                   data=_mapping(rest, "data", source), grids=_tables(rest, "grids", source),
                   datasets=_tables(rest, "datasets", source), notes=_strings(rest, "notes", source) or (),
                   pair_on=_strings(rest, "pair_on", source), extra=rest)

    @classmethod
    def read(cls, path: str | Path) -> ExperimentManifest:
        """Read an experiment.json.

        Raises
        ------
        OSError : the file cannot be read (FileNotFoundError when there is none).
        RunFileError : see :meth:`from_json`; or not valid JSON, or not a JSON object.
        """
        return cls.from_json(_read_object(path), source=str(path))
