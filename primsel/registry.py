"""Open registries of retrievers and generators.

A class registers itself with ``@register("bm25")``; :func:`build` turns a specification into an
instance. A specification is

* a registered name: ``"bm25"``;
* an importable class: ``"my_package.my_module:MyRetriever"`` (nothing to register);
* a table: ``{"type": "hybrid", "members": ["bm25", "dense"], "method": "rrf"}``; every key other
  than ``type`` is passed to the constructor. Nested member specifications are built by the
  class itself (``build`` is public for that).

Built-in classes are registered when their package is first needed, so listing or building a
retriever never imports torch, faiss or openai.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

KINDS = ("retriever", "generator")
_BUILTIN_PACKAGES = {"retriever": "primsel.retrieval", "generator": "primsel.generation"}
_REGISTRY: dict[str, dict[str, type]] = {kind: {} for kind in KINDS}


class UnknownComponentError(ValueError):
    """A specification names no registered or importable class."""


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown component kind {kind!r}; expected one of {KINDS}")


def register(name: str, kind: str = "retriever") -> Callable[[type], type]:
    """Class decorator that registers ``cls`` under ``name``.

    Raises
    ------
    ValueError : unknown kind, or ``name`` already taken by another class.
    """
    _check_kind(kind)

    def decorator(cls: type) -> type:
        taken = _REGISTRY[kind].get(name)
        if taken is not None and taken is not cls and taken.__qualname__ != cls.__qualname__:
            raise ValueError(f"{kind} name {name!r} is already registered by {taken.__module__}.{taken.__qualname__}")
        _REGISTRY[kind][name] = cls
        if not hasattr(cls, "registered_name") or cls.__dict__.get("registered_name") is None:
            cls.registered_name = name
        return cls

    return decorator


def _load_builtins(kind: str) -> None:
    importlib.import_module(_BUILTIN_PACKAGES[kind])


def available(kind: str = "retriever") -> list[str]:
    """Sorted names of the registered classes of ``kind`` (built-ins included)."""
    _check_kind(kind)
    _load_builtins(kind)
    return sorted(_REGISTRY[kind])


def resolve(name: str, kind: str = "retriever") -> type:
    """The class for a registered name or a ``"package.module:Class"`` path.

    Raises
    ------
    UnknownComponentError : the name is not registered and not importable; the message lists
        the registered names.
    """
    _check_kind(kind)
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownComponentError(f"cannot import {kind} {name!r}: {exc}") from exc
    if name not in _REGISTRY[kind]:
        _load_builtins(kind)
    if name not in _REGISTRY[kind]:
        known = ", ".join(sorted(_REGISTRY[kind]))
        raise UnknownComponentError(f"unknown {kind} {name!r}; known: {known} (or give 'package.module:Class')")
    return _REGISTRY[kind][name]


def build(spec: str | Mapping[str, Any], kind: str = "retriever", **overrides: Any) -> Any:
    """Instantiate a component from a specification (see module docstring).

    Parameters
    ----------
    spec : name, ``"module:Class"`` path, or table with a ``type`` key.
    kind : ``"retriever"`` or ``"generator"``.
    overrides : extra constructor arguments (override the table's).

    Raises
    ------
    UnknownComponentError : unknown name.
    ValueError : a table without ``type``.
    TypeError : the constructor rejected the parameters (message names the class).
    """
    if isinstance(spec, str):
        name, params = spec, {}
    elif isinstance(spec, Mapping):
        if "type" not in spec:
            raise ValueError(f"{kind} table {dict(spec)!r} has no 'type' key")
        name = spec["type"]
        params = {k: v for k, v in spec.items() if k != "type"}
    else:
        raise TypeError(f"{kind} specification must be a name or a table, got {type(spec).__name__}")
    cls = resolve(name, kind)
    params.update(overrides)
    try:
        return cls(**params)
    except TypeError as exc:
        raise TypeError(f"{kind} {name!r}: bad parameters {sorted(params)}: {exc}") from exc
