"""Component specifications: everything about them in one place.

A specification names a retriever (or generator) class and its parameters:

* a registered name: ``"bm25"``;
* an importable class: ``"my_package.my_module:MyRetriever"``;
* a table: ``{"type": "hybrid", "members": ["bm25", "dense"], "method": "rrf"}``; every key
  other than ``type``, ``label`` and ``version`` (:data:`META_KEYS`) is a constructor
  parameter. A table may nest specifications under any key (a hybrid's ``members``, a
  composite's ``stages`` or ``base``): :func:`walk` finds them.

:func:`primsel.registry.build` turns a specification into an instance. This module holds what
is done with a specification without building it: its canonical form (:func:`canonical`, so
``"bm25"`` and ``{"type": "bm25"}`` are one cell), its readable :func:`label` and TREC
:func:`tag`, parsing from the command line (:func:`parse`), the nested specifications
(:func:`walk`, :func:`names`), a digest of the source of every class it names
(:func:`sources`), passing an experiment's seed (:func:`with_seed`) and checking it before
anything runs (:func:`check`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import sys
import sysconfig
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from primsel import registry

#: A component specification: a name, ``"module:Class"``, or a table with ``type``.
Spec = str | Mapping[str, Any]
#: Generator parameters documented in experiments/README.md (used when a class's signature cannot tell).
GENERATOR_KEYS = (
    "type", "model", "base_url", "api_key_env", "timeout_s", "max_retries", "temperature", "seed",
    "max_tokens", "concurrency", "examples", "template", "programs", "cache_namespace", "extraction",
    "reflect_template",
)

#: Keys of a table that name its component rather than configure it (never constructor
#: parameters): ``label`` (shown instead of the generated name; not part of a cell's id) and
#: ``version`` (the version of the component's code: part of a cell's id).
META_KEYS = registry.META_KEYS
#: The ``version`` that stands for the digest of the component's source (:func:`with_versions`).
SOURCE_VERSION = "source"

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class SpecError(ValueError):
    """A specification is invalid.

    Parameters
    ----------
    key : dotted key of the faulty part below the specification (``"members[1]"``,
        ``"members[0].k1"``), "" for the specification itself.
    problem : what is wrong.
    """

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem


# ---------------------------------------------------------------------------------------------
# Forms and names
# ---------------------------------------------------------------------------------------------
def canonical(spec: Any, *, table: bool = False) -> Any:
    """Canonical form of a specification: a table holding only ``type`` becomes the name;
    nested tables and lists are canonicalised too. With ``table``, the result stays a table
    (``{"type": ...}``), as a generator does in a cell's settings."""
    if table:
        if isinstance(spec, Mapping):
            return {str(k): canonical(v) for k, v in spec.items()}
        return {"type": spec}
    if isinstance(spec, Mapping):
        out = {str(k): canonical(v) for k, v in spec.items()}
        if set(out) == {"type"} and isinstance(out["type"], str):
            return out["type"]
        return out
    if isinstance(spec, (list, tuple)):
        return [canonical(v) for v in spec]
    return spec


def type_name(spec: Any) -> str | None:
    """The class name of a specification (the name, or a table's ``type``), else None."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping) and isinstance(spec.get("type"), str):
        return spec["type"]
    return None


def short(value: Any) -> str:
    """A setting value in a label: specifications by :func:`label`, other tables as
    ``{key=value, ...}``, lists joined by ``+`` (a nested list in parentheses), floats in ``%g``
    form."""
    if isinstance(value, Mapping):
        if not isinstance(value.get("type"), str):
            return "{" + ", ".join(f"{k}={short(v)}" for k, v in sorted(value.items())) + "}"
        return label(value)
    if isinstance(value, (list, tuple)):
        return "+".join(f"({short(v)})" if isinstance(v, (list, tuple)) else short(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def label(spec: Any) -> str:
    """Readable label of a specification: its ``label`` when the table gives one, else built
    from its type and parameters.

    ``"bm25"`` -> ``bm25``; ``{type = "hybrid", members = ["bm25", "dense"]}`` ->
    ``hybrid(bm25+dense)``; other parameters follow as ``key=value``:
    ``hybrid(bm25+dense, method=wsum, weights=0.3+0.7)``; a nested specification by its own
    label; ``{type = "hybrid", label = "fused", ...}`` -> ``fused``.
    """
    spec = canonical(spec)
    if not isinstance(spec, Mapping):
        return str(spec)
    version = f"@{spec['version']}" if isinstance(spec.get("version"), str) else ""
    if isinstance(spec.get("label"), str) and spec["label"]:
        return spec["label"] + version
    params = {k: v for k, v in spec.items() if k not in ("type", *META_KEYS)}
    if not params:
        return f"{spec.get('type', '?')}{version}"
    parts = []
    if "members" in params:
        parts.append(short(params.pop("members")))
    parts.extend(f"{k}={short(v)}" for k, v in sorted(params.items()))
    return f"{spec.get('type', '?')}({', '.join(parts)}){version}"


def with_versions(spec: Any, kind: str = "retriever") -> Any:
    """``spec`` with every ``version = "source"`` (:data:`SOURCE_VERSION`, at any depth)
    replaced by the first 8 hex characters of the digest of the source of the class that table
    names (:func:`sources`): a version that changes whenever the code does, so a cell computed
    with the edited code gets a new id (and folder) beside the old one instead of replacing it.

    Raises
    ------
    SpecError : the class cannot be resolved, or has no source file to take a digest of.
    """
    if isinstance(spec, (list, tuple)):
        return [with_versions(item, kind) for item in spec]
    if not isinstance(spec, Mapping):
        return spec
    out = {key: with_versions(value, kind) for key, value in spec.items()}
    if out.get("version") == SOURCE_VERSION and isinstance(out.get("type"), str):
        digest = sources(out["type"], kind).get(out["type"], "?")
        if digest == "?":
            raise SpecError("version", f"no source to take a version from for {out['type']!r}")
        out["version"] = digest[:8]
    return out


def without_labels(value: Any) -> Any:
    """``value`` (a specification, or settings holding specifications at any depth) with the
    ``label`` of every component table removed: what is computed, which a label does not
    change (cell ids and retrieval keys are digests of it)."""
    if isinstance(value, Mapping):
        drop = "label" if isinstance(value.get("type"), str) else None
        return {k: without_labels(v) for k, v in value.items() if k != drop}
    if isinstance(value, (list, tuple)):
        return [without_labels(v) for v in value]
    return value


def labelled(value: Any) -> bool:
    """True when a specification, or settings holding specifications, gives a component a
    ``label`` at any depth."""
    return without_labels(value) != canonical_data(value)


def canonical_data(value: Any) -> Any:
    """``value`` with tuples as lists (as :func:`without_labels` returns them)."""
    if isinstance(value, Mapping):
        return {k: canonical_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_data(v) for v in value]
    return value


def slug(text: str, width: int = 40) -> str:
    """``text`` as a folder name: lower case, each run of characters other than letters, digits,
    ``.`` and ``_`` a ``-``, at most ``width`` characters, no ``-`` or ``.`` at either end
    (``"Keyword v2 k=15"`` -> ``"keyword-v2-k-15"``; "" when nothing is left)."""
    text = re.sub(r"[^a-z0-9._]+", "-", text.lower())
    return text[:width].strip("-.")


def tag(spec: Any) -> str:
    """Short name of a specification for the tag column of a TREC run (no whitespace)."""
    name = type_name(spec) or "retriever"
    return "".join(c if not c.isspace() else "_" for c in name) or "retriever"


def parse(text: str) -> Spec:
    """A specification from command-line text: a JSON table, a name or ``module:Class``.

    Raises
    ------
    SpecError : malformed JSON, a JSON value that is not a table with ``type``, or empty text.
    """
    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError("", f"invalid JSON table: {exc}") from exc
        if not isinstance(spec, dict) or "type" not in spec:
            raise SpecError("", "a JSON table needs a 'type' key")
        return spec
    if not text:
        raise SpecError("", "empty specification")
    return text


# ---------------------------------------------------------------------------------------------
# Nested specifications
# ---------------------------------------------------------------------------------------------
def _names_a_class(text: str, kind: str) -> bool:
    return bool(_CLASS_PATH.match(text)) or text in registry.available(kind)


def walk(spec: Any, kind: str = "retriever") -> Iterator[tuple[str, Spec]]:
    """The specification and every specification nested in it, depth first.

    A nested specification is a table with a ``type`` string, or a string that names a class
    of ``kind`` (a registered name or a ``module:Class`` path), found under any key of a table,
    directly or inside lists and plain tables. So a parameter whose value merely happens to be
    a registered name counts too; that is harmless, since a name always names a valid class.

    Yields
    ------
    (key, specification): ``key`` is the dotted path below ``spec`` ("" for ``spec`` itself,
    ``"members[1]"``, ``"stages[0].base"``).
    """
    if isinstance(spec, str) or (isinstance(spec, Mapping) and isinstance(spec.get("type"), str)):
        yield "", spec
    if isinstance(spec, Mapping):
        for key, value in spec.items():
            if key != "type" and key not in META_KEYS:
                yield from _nested(str(key), value, kind)


def _nested(key: str, value: Any, kind: str) -> Iterator[tuple[str, Spec]]:
    if isinstance(value, str):
        if _names_a_class(value, kind):
            yield key, value
    elif isinstance(value, Mapping):
        if isinstance(value.get("type"), str):
            yield from ((f"{key}.{k}" if k else key, s) for k, s in walk(value, kind))
        else:
            for k, v in value.items():
                yield from _nested(f"{key}.{k}", v, kind)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _nested(f"{key}[{i}]", item, kind)


def names(spec: Any, kind: str = "retriever") -> list[str]:
    """The class names a specification uses, its own first, without repeats (:func:`walk`)."""
    return list(dict.fromkeys(n for _, s in walk(spec, kind) if (n := type_name(s)) is not None))


def sources(spec: Any, kind: str = "retriever") -> dict[str, str]:
    """Content digests of the source files behind the classes a specification names.

    Each name (:func:`names`, nested specifications included) is resolved with
    :func:`primsel.registry.resolve`. The files hashed are those of the modules defining the
    class and its base classes (the standard library aside), and of every module they use, at
    any depth, from the same package (for a module outside any package, such as a plug-in
    ``my_retrievers.py``, from the same directory): so editing a plug-in retriever, or a helper
    module it imports, changes the result (:func:`module_files`).

    Returns
    -------
    ``{name as written: sha256 prefix of those files}``; ``"?"`` for a class without a source
    file (defined interactively) or that cannot be resolved.
    """
    out: dict[str, str] = {}
    for name in names(spec, kind):
        try:
            cls = registry.resolve(name, kind)
        except (ValueError, TypeError):
            out[name] = "?"
            continue
        files = module_files(cls)
        if not files:
            out[name] = "?"
            continue
        h = hashlib.sha256()
        for path in files:
            try:
                h.update(path.name.encode() + b"\0" + path.read_bytes())
            except OSError:
                h.update(path.name.encode() + b"\0?")
        out[name] = h.hexdigest()[:16]
    return out


def module_files(cls: type) -> list[Path]:
    """The source files a class's behaviour depends on, as far as it can be told without
    running it: the modules defining the class and its base classes (not the standard
    library's), then, breadth first, the modules those use (imported as modules, or as
    functions and classes defined there) that lie under the same root: the top-level package
    directory of the using module, or its directory for a module outside any package.

    Returns
    -------
    resolved paths, without repeats, in the order found (empty for a class defined
    interactively).
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    files: list[Path] = []
    queue: list[Any] = []
    for klass in getattr(cls, "__mro__", (cls,)):
        module = sys.modules.get(getattr(klass, "__module__", "") or "")
        path = _module_path(module)
        if path is not None and (stdlib not in path.parents or "site-packages" in path.parts) \
                and path not in files:
            files.append(path)
            queue.append(module)
    while queue:
        module = queue.pop(0)
        root = _module_root(module)
        if root is None:
            continue
        for value in list(vars(module).values()):
            used = value if isinstance(value, types.ModuleType) else \
                sys.modules.get(getattr(value, "__module__", None) or "") if callable(value) else None
            path = _module_path(used)
            if path is not None and path not in files and root in path.parents:
                files.append(path)
                queue.append(used)
    return files


def _module_path(module: Any) -> Path | None:
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return None
    return Path(file).resolve()


def _module_root(module: Any) -> Path | None:
    """The directory under which the modules a module uses count as its own code."""
    path = _module_path(module)
    if path is None:
        return None
    top = sys.modules.get(module.__name__.partition(".")[0])
    if top is not module and getattr(top, "__path__", None):
        return Path(list(top.__path__)[0]).resolve()
    if getattr(module, "__path__", None):  # a top-level package's __init__
        return path.parent
    return path.parent


def with_seed(spec: Any, seed: int, kind: str = "retriever") -> Any:
    """``spec`` with ``seed`` passed to a class whose constructor takes a ``seed`` parameter.

    The seed is added only when the specification does not set one itself (a table with a
    ``seed`` key keeps it); a name becomes a table. Nested specifications are left as they
    are. Anything else (a class without ``seed``, an instance) is returned unchanged.

    Parameters
    ----------
    spec : name, ``"module:Class"`` path, table with ``type``, or an instance.
    seed : the experiment's seed.
    kind : ``"retriever"``, ``"generator"`` or ``"selector"``.

    Returns
    -------
    the specification to build (a new table when the seed was added; ``spec`` is not modified).

    Raises
    ------
    primsel.registry.UnknownComponentError : see :func:`primsel.registry.resolve`.
    ValueError : a table without ``type``.
    """
    if isinstance(spec, Mapping):
        if "type" not in spec:
            raise ValueError(f"{kind} table {dict(spec)!r} has no 'type' key")
        if "seed" in spec:
            return spec
    elif not isinstance(spec, str):
        return spec
    parameters = parameters_of(registry.resolve(type_name(spec), kind))
    if parameters is None or "seed" not in parameters:
        return spec
    return {**({"type": spec} if isinstance(spec, str) else dict(spec)), "seed": seed}


# ---------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------
def parameters_of(cls: type) -> dict[str, inspect.Parameter] | None:
    """The constructor parameters of ``cls`` by name, or None when it has no introspectable
    signature."""
    try:
        return dict(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return None


def accepted_parameters(cls: type) -> set[str] | None:
    """Constructor parameter names of ``cls``, or None when it takes ``**kwargs`` (or its
    signature cannot be read): then any name may be right."""
    params = parameters_of(cls)
    if params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return {name for name, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL}


def parameter_types(cls: type) -> dict[str, Any]:
    """Constructor parameter annotations of ``cls`` as type objects.

    Text annotations (``from __future__ import annotations``) are resolved by
    :func:`typing.get_type_hints`; a class whose annotations cannot all be resolved (a name
    imported only for type checkers) gets no text annotation resolved.
    """
    params = parameters_of(cls) or {}
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - any unresolvable annotation: cannot tell
        hints = {}
    out = {}
    for name, param in params.items():
        if name in hints:
            out[name] = hints[name]
        elif param.annotation is not inspect.Parameter.empty and not isinstance(param.annotation, str):
            out[name] = param.annotation
    return out


def fits(value: Any, hint: Any) -> bool | None:
    """Whether a configuration value (TOML or JSON data) fits a type annotation: True, False,
    or None when pydantic cannot check that type.

    The check is pydantic's strict mode (no conversion: ``"5"`` is not an int, ``True`` not a
    float, a string not a sequence); an array also fits a tuple type.
    """
    import pydantic

    try:
        adapter = pydantic.TypeAdapter(hint)
    except Exception:  # noqa: BLE001 - e.g. a class pydantic has no schema for
        return None
    for candidate in (value, _tuples(value)):
        try:
            adapter.validate_python(candidate, strict=True)
            return True
        except pydantic.ValidationError:
            continue
    return False


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def toml_type(value: Any) -> str:
    """The name a configuration file gives the type of ``value`` (``integer``, ``array``, ...)."""
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array",
            dict: "table"}.get(type(value), type(value).__name__)


def _hint_text(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if isinstance(hint, type) else None
    return text or str(hint).replace("typing.", "").replace("collections.abc.", "")


def _check_parameters(spec: Spec, kind: str) -> None:
    """Check that a specification names a known class of ``kind`` and that a table's keys are
    parameters of it (when its signature tells) with values of the annotated types (when
    :func:`fits` can tell)."""
    name = type_name(spec)
    try:
        cls = registry.resolve(name, kind)
    except registry.UnknownComponentError as exc:
        raise SpecError("", str(exc)) from None
    if not isinstance(spec, Mapping):
        return
    for key in META_KEYS:
        if key in spec and not (isinstance(spec[key], str) and spec[key].strip()):
            raise SpecError(key, f"must be a non-empty string, got {toml_type(spec[key])} "
                                 f"{spec[key]!r}")
    accepted = accepted_parameters(cls)
    if accepted is None and kind == "generator":
        accepted = set(GENERATOR_KEYS)
    if accepted is not None:
        unknown = sorted(set(spec) - {"type", *META_KEYS} - accepted)
        if unknown:
            raise SpecError(unknown[0], f"unknown {kind} parameter for {name!r}"
                                        f"{registry.did_you_mean(unknown[0], accepted)}; accepted: "
                                        f"{', '.join(sorted(accepted))}")
    hints = parameter_types(cls)
    parameters = {k: v for k, v in spec.items() if k != "type" and k not in META_KEYS}
    checked = {param: value for param, value in parameters.items() if param in hints}
    for param, value in checked.items():
        if fits(value, hints[param]) is False:
            raise SpecError(param, f"{kind} {name!r} expects {_hint_text(hints[param])}, "
                                   f"got {toml_type(value)} {value!r}")


def check(spec: Any, kind: str = "retriever") -> None:
    """Check a specification before anything runs: it and every nested specification
    (:func:`walk`) names a known class of ``kind``, a table's keys are parameters of that class
    with values of the annotated types, and the whole can be constructed (construction only
    stores and checks parameters).

    Raises
    ------
    SpecError : naming the faulty key below ``spec`` (``"members[0].k1"``) and the problem.
    """
    if isinstance(spec, str):
        if not spec:
            raise SpecError("", "empty name")
    elif isinstance(spec, Mapping):
        if not isinstance(spec.get("type"), str) or not spec.get("type"):
            raise SpecError("", "a table needs a 'type' string")
    else:
        raise SpecError("", f"expected a name or a table, got {toml_type(spec)} {spec!r}")
    for key, nested in walk(spec, kind):
        try:
            _check_parameters(nested, kind)
        except SpecError as exc:
            raise SpecError(".".join(k for k in (key, exc.key) if k), exc.problem) from None
    try:
        registry.build(spec, kind)
    except Exception as exc:  # noqa: BLE001 - any constructor complaint is a problem of the specification
        raise SpecError(".".join(getattr(exc, "key_path", ())), f"cannot build {kind} {label(spec)!r}: {exc}") from None
