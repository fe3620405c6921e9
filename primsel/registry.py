"""Open registries of retrievers, generators and selectors.

A class registers itself with ``@register("bm25")``; :func:`build` turns a specification into an
instance. A specification is

* a registered name: ``"bm25"``;
* an importable class: ``"my_package.my_module:MyRetriever"`` (nothing to register);
* a table: ``{"type": "hybrid", "members": ["bm25", "dense"], "method": "rrf"}``; every key other
  than ``type`` and the :data:`META_KEYS` (``label``, ``version``) is passed to the
  constructor. Nested member specifications are built by the
  class itself (``build`` is public for that).

Built-in classes are registered when first needed: a package of built-in components may name
the module of each class in a table ``COMPONENT_MODULES`` (kind -> name -> module of the
package, as :mod:`primsel.retrieval` does), and then only the module of the name asked for is
imported; a package without the table is imported whole. Listing the names imports nothing
heavy, and no component imports torch, faiss or openai before it is fitted.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import os
import sys
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

KINDS = ("retriever", "generator", "selector")
#: Keys of a component table that name the component rather than configure it: ``label`` (how
#: tables, figures and messages name it) and ``version`` (which version of its code; part of a
#: cell's id). They are never passed to the constructor.
META_KEYS = ("label", "version")
_BUILTIN_PACKAGES = {"retriever": "primsel.retrieval", "generator": "primsel.generation",
                     "selector": "primsel.retrieval"}
_REGISTRY: dict[str, dict[str, type]] = {kind: {} for kind in KINDS}
#: Methods a class of each kind must have (the required protocols of :mod:`primsel.types`).
_REQUIRED_METHODS = {"retriever": ("fit", "search"), "generator": ("generate",), "selector": ("select",)}


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
    TypeError : (when decorating) ``cls`` is not a class.
    """
    _check_kind(kind)

    def decorator(cls: type) -> type:
        if not isinstance(cls, type):
            raise TypeError(f"register({name!r}) decorates a class, got {type(cls).__name__}")
        taken = _REGISTRY[kind].get(name)
        if taken is not None and taken is not cls and taken.__qualname__ != cls.__qualname__:
            raise ValueError(f"{kind} name {name!r} is already registered by {taken.__module__}.{taken.__qualname__}")
        _REGISTRY[kind][name] = cls
        if not hasattr(cls, "registered_name") or cls.__dict__.get("registered_name") is None:
            cls.registered_name = name
        return cls

    return decorator


def unregister(name: str, kind: str = "retriever") -> None:
    """Remove a registration (tests register classes for their own duration only).

    Raises
    ------
    ValueError : unknown kind.
    KeyError : ``name`` is not registered.
    """
    _check_kind(kind)
    del _REGISTRY[kind][name]


@contextlib.contextmanager
def temporary() -> Iterator[None]:
    """Registrations made inside the block are undone when it exits (tests register their
    classes this way, so no other test sees them). The built-in classes are registered first,
    so they survive."""
    for kind in KINDS:
        _load_builtins(kind)
    saved = {kind: dict(table) for kind, table in _REGISTRY.items()}
    try:
        yield
    finally:
        for kind, table in _REGISTRY.items():
            table.clear()
            table.update(saved[kind])


def _builtin_modules(kind: str) -> dict[str, str]:
    """Name -> module of the built-in classes of ``kind`` that their package's ``COMPONENT_MODULES``
    table names (empty for a package without the table)."""
    package = importlib.import_module(_BUILTIN_PACKAGES[kind])
    table = getattr(package, "COMPONENT_MODULES", {}).get(kind, {})
    return {name: f"{package.__name__}.{module}" for name, module in table.items()}


def _load_builtins(kind: str, name: str | None = None) -> None:
    """Register the built-in class ``name`` of ``kind`` by importing its module (its package
    alone when the package has no table, or names no such class); every built-in of ``kind``
    when ``name`` is None."""
    modules = _builtin_modules(kind)
    if name is not None and name in modules:
        importlib.import_module(modules[name])
        return
    if name is None:
        for module in sorted(set(modules.values())):
            importlib.import_module(module)


def available(kind: str = "retriever") -> list[str]:
    """Sorted names of the registered classes of ``kind``, built-ins included (their modules
    are not imported to list them)."""
    _check_kind(kind)
    return sorted({*_REGISTRY[kind], *_builtin_modules(kind)})


def _check_component_class(obj: Any, name: str, kind: str) -> type:
    """``obj`` if it is a class with the methods of ``kind``'s protocol, else UnknownComponentError."""
    if not isinstance(obj, type):
        raise UnknownComponentError(
            f"{kind} {name!r} is not a class (it is a {type(obj).__name__}); give 'package.module:Class'")
    missing = [m for m in _REQUIRED_METHODS[kind] if not callable(getattr(obj, m, None))]
    if missing:
        needed = " and ".join(_REQUIRED_METHODS[kind])
        raise UnknownComponentError(
            f"{name!r} ({obj.__module__}.{obj.__qualname__}) is not a {kind}: it lacks "
            f"{' and '.join(missing)} (a {kind} has {needed})")
    return obj


def add_plugin_directory(path: str | os.PathLike[str]) -> None:
    """Let ``"module:Class"`` specifications name modules of the directory ``path`` (that of an
    experiment file): it is put on ``sys.path`` after the current directory and the
    ``PYTHONPATH`` entries, which therefore win over it, and before the installed packages. A
    directory already there is left where it is."""
    folder = str(Path(path).resolve())
    if folder in sys.path:
        return
    entries = ["", *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    first = {os.path.realpath(entry or ".") for entry in entries}
    index = 0
    while index < len(sys.path) and os.path.realpath(sys.path[index] or ".") in first:
        index += 1
    sys.path.insert(index, folder)
    importlib.invalidate_caches()


def resolve(name: str, kind: str = "retriever") -> type:
    """The class for a registered name or a ``"package.module:Class"`` path.

    A ``"module:Class"`` path is imported as Python would import ``module`` (``sys.path``; the
    ``primsel`` command puts the current directory first, and an experiment file adds its own
    directory, :func:`add_plugin_directory`).

    Raises
    ------
    UnknownComponentError : the name is not registered and not importable (the message lists
        the registered names), or it names something that is not a class, or a class without
        the methods of ``kind`` (``fit`` and ``search`` for a retriever, ``generate`` for a
        generator).
    """
    _check_kind(kind)
    if not isinstance(name, str) or not name.strip():
        raise UnknownComponentError(f"{kind} name must be a non-empty string, got {name!r}")
    if ":" in name:
        module_name, _, attr = name.partition(":")
        if not module_name or not attr:
            raise UnknownComponentError(f"cannot import {kind} {name!r}: expected 'package.module:Class'")
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, SyntaxError) as exc:
            raise UnknownComponentError(f"cannot import {kind} {name!r}: {exc}") from exc
        return _check_component_class(obj, name, kind)
    if name not in _REGISTRY[kind]:
        _load_builtins(kind, name)
    if name not in _REGISTRY[kind]:
        known = available(kind)
        raise UnknownComponentError(f"unknown {kind} {name!r}{did_you_mean(name, known)}; known: {', '.join(known)} "
                                    "(or give 'package.module:Class')")
    return _check_component_class(_REGISTRY[kind][name], name, kind)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'bm25'?"`` naming up to three of ``known`` nearest to ``name``
    (``difflib.get_close_matches``, similarity >= 0.5, case ignored), or "" when none is near."""
    choices = {k.lower(): k for k in known}
    near = [choices[m] for m in difflib.get_close_matches(name.lower(), list(choices), n=3, cutoff=0.5)]
    return f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def build(spec: str | Mapping[str, Any], kind: str = "retriever", **overrides: Any) -> Any:
    """Instantiate a component from a specification (see module docstring).

    Parameters
    ----------
    spec : name, ``"module:Class"`` path, or table with a ``type`` key.
    kind : ``"retriever"``, ``"generator"`` or ``"selector"``.
    overrides : extra constructor arguments (override the table's).

    Raises
    ------
    UnknownComponentError : unknown name, or not a class of ``kind`` (also for a nested member
        specification; the message is prefixed with the outer name).
    ValueError : a table without ``type``, or a parameter value the constructor rejected (the
        message is prefixed with the component name).
    TypeError : a parameter the class does not take (the message lists those it takes).
    """
    if isinstance(spec, str):
        name, params = spec, {}
    elif isinstance(spec, Mapping):
        if "type" not in spec:
            raise ValueError(f"{kind} table {dict(spec)!r} has no 'type' key")
        name = spec["type"]
        params = {k: v for k, v in spec.items() if k != "type" and k not in META_KEYS}
    else:
        raise TypeError(f"{kind} specification must be a name or a table, got {type(spec).__name__}")
    cls = resolve(name, kind)
    params.update(overrides)
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no introspectable signature: let the call decide
        signature = None
    if signature is not None:
        try:
            signature.bind(**params)
        except TypeError as exc:
            taken = [p for p, v in signature.parameters.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
            wrong = next((p for p in params if p not in taken), None)
            near = did_you_mean(wrong, taken) if wrong is not None else ""
            raise TypeError(f"{kind} {name!r}: {exc}{near} (it takes: {', '.join(taken) or 'no parameters'})") from exc
    with error_context(f"{kind} {name!r}"):
        return cls(**params)


@contextlib.contextmanager
def error_context(prefix: str, *, key: bool = False) -> Iterator[None]:
    """Re-raise a ValueError or TypeError (UnknownComponentError included) as the same type with
    ``"<prefix>: "`` in front of its message, so nested specifications say where they failed.

    With ``key``, ``prefix`` is also the key of a nested specification (``"members[1]"``): it
    is put in front of the exception's ``key_path`` (a tuple of such keys, outermost first),
    which :func:`primsel.spec.check` joins to name the faulty key.
    """
    try:
        yield
    except (TypeError, ValueError) as exc:
        new = type(exc)(f"{prefix}: {exc}")
        new.key_path = ((prefix,) if key else ()) + getattr(exc, "key_path", ())  # type: ignore[attr-defined]
        raise new from exc
