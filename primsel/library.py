"""The assistant library as a retrieval corpus, and the gold primitives of a program.

:class:`Library` is an ordered, immutable mapping ``primitive id -> Primitive``. The standard
library holds exactly the 65 prompt-facing symbols of the five app modules of
:mod:`primsel.simulator.apps` (the names are fixed here, per module, in :data:`LIBRARY_NAMES`;
everything else about a primitive, its kind, signature, docstring and type dependencies, is read
from the module by introspection, :meth:`Library.from_modules`). The simulator builds it
(:func:`primsel.simulator.library.build_library`): this module imports no app module.

:func:`gold_primitives` derives the library primitives a program uses (the rule is stated in its
docstring) and :func:`with_gold` fills :attr:`Task.gold`.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import hashlib
import inspect
import re
import symtable
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence

from primsel.types import DOCUMENT_KIND, TEXT_VIEWS, Primitive, Task

#: The prompt-facing symbols of each app module, in the order a prompt lists them.
LIBRARY_NAMES: dict[str, tuple[str, ...]] = {
    "exceptions": ("RequiresUserInput",),
    "time_utils": (
        "ComparisonResult", "DateExpressions", "DateRange", "DateRanges", "DateTimeClauseOperators",
        "Duration", "EventFrequency", "RepetitionSpec", "TimeExpressions", "TimeInterval", "TimeUnits",
        "weekdays", "combine", "compare_with_fixed_duration", "convert", "date_by_mdy", "get_next_dow",
        "get_prev_dow", "get_weekday", "get_weekday_ordinal", "intervals_overlap", "modify", "now_",
        "parse_date_string", "parse_duration_to_calendar", "parse_durations_to_date_interval",
        "parse_time_string", "replace", "sum_time_units", "this_week_dates", "time_by_hm",
    ),
    "company_directory": (
        "Employee", "EmployeeDetails", "Team", "find_employee", "find_manager_of", "find_reports_of",
        "find_team_of", "get_all_employees", "get_assistant", "get_current_user",
        "get_employee_profile", "get_office_location", "get_vacation_schedule",
    ),
    "room_booking": (
        "ConferenceRoom", "RoomAvailability", "find_available_time_slots",
        "room_booking_default_time_window", "search_conference_room", "summarise_availability",
    ),
    "work_calendar": (
        "CalendarSearchSettings", "Event", "ShowAsStatus", "add_event", "delete_event",
        "find_available_slots", "find_events", "find_past_events", "get_calendar",
        "get_default_preparation_time", "get_search_settings", "provide_event_details",
        "share_calendar", "summarise_calendar",
    ),
}
#: Package holding the app modules (its name is left out of the signatures shown).
APPS_PACKAGE = "primsel.simulator.apps"
#: Kinds of primitives; the non-function kinds are "types" that other primitives depend on.
KINDS = ("function", "class", "enum", "exception", "alias", DOCUMENT_KIND)
#: Names that are never gold primitives (spec 12.1 step 3), besides the builtins.
NOT_GOLD = frozenset({"datetime"})

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Library(Mapping[str, Primitive]):
    """Ordered, immutable mapping ``primitive id -> Primitive``.

    Parameters
    ----------
    primitives : the primitives, in library order (the order prompts and tie-free listings use).
    unique_names : refuse two primitives with the same bare name (True for the assistant
        library, whose programs name primitives by bare name); corpora of documents (tools,
        APIs, the callables of installed packages) set it False, and :meth:`id_of` then gives
        the first primitive of a name.

    Raises
    ------
    ValueError : two primitives share an id, or a bare name when ``unique_names``, or a
        ``depends_on`` id is not in the library.
    """

    def __init__(self, primitives: Iterable[Primitive], unique_names: bool = True) -> None:
        items = tuple(primitives)
        by_id: dict[str, Primitive] = {}
        by_name: dict[str, str] = {}
        for p in items:
            if not isinstance(p, Primitive):
                raise TypeError(f"Library items must be Primitive, got {type(p).__name__}")
            if p.id in by_id:
                raise ValueError(f"duplicate primitive id {p.id!r}")
            if p.name in by_name:
                if unique_names:
                    raise ValueError(f"primitives {by_name[p.name]!r} and {p.id!r} share the name {p.name!r}")
            else:
                by_name[p.name] = p.id
            by_id[p.id] = p
        for p in items:
            unknown = [d for d in p.depends_on if d not in by_id]
            if unknown:
                raise ValueError(f"primitive {p.id!r} depends on ids not in the library: {unknown}")
        self._items = items
        self._by_id = by_id
        self._by_name = by_name

    # Mapping protocol -------------------------------------------------------------------------
    def __getitem__(self, primitive_id: str) -> Primitive:
        return self._by_id[primitive_id]

    def __iter__(self) -> Iterator[str]:
        return (p.id for p in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Library({len(self)} primitives)"

    # Convenience -----------------------------------------------------------------------------
    @property
    def ids(self) -> tuple[str, ...]:
        """Primitive ids in library order."""
        return tuple(p.id for p in self._items)

    @property
    def primitives(self) -> tuple[Primitive, ...]:
        """The primitives in library order."""
        return self._items

    def id_of(self, name: str) -> str | None:
        """Id of the (first) primitive with bare name ``name``, or None."""
        return self._by_name.get(name)

    def texts(self, view: str = "full") -> list[str]:
        """``Primitive.text(view)`` of every primitive, in library order.

        Raises
        ------
        ValueError : unknown view (see :data:`primsel.types.TEXT_VIEWS`).
        """
        if view not in TEXT_VIEWS:
            raise ValueError(f"unknown view {view!r}; expected one of {TEXT_VIEWS}")
        return [p.text(view) for p in self._items]

    def fingerprint(self) -> str:
        """sha256 (hex) of the ids and full texts; changes whenever a docstring or signature does."""
        h = hashlib.sha256()
        for p in self._items:
            h.update(p.id.encode() + b"\0" + p.text("full").encode() + b"\0")
        return h.hexdigest()

    @classmethod
    def from_modules(cls, modules: Mapping[str, types.ModuleType],
                     names: Mapping[str, Sequence[str]] | None = None) -> Library:
        """The library of the named symbols of some modules, read by introspection: each
        primitive's kind, signature, docstring and type dependencies come from its module.

        The standard library is this over the app modules of the simulator
        (:func:`primsel.simulator.library.build_library`); this module imports none of them.

        Parameters
        ----------
        modules : module short name -> the imported module.
        names : module short name -> symbol names, in library order; default
            :data:`LIBRARY_NAMES` (65 symbols).

        Raises
        ------
        KeyError : a module of ``names`` is not in ``modules``.
        AttributeError : a listed symbol is not defined by its module.
        """
        names = LIBRARY_NAMES if names is None else names
        objects: dict[str, tuple[str, str, object]] = {}
        for module_name, symbols in names.items():
            module = modules[module_name]
            for name in symbols:
                if not hasattr(module, name):
                    raise AttributeError(f"{module.__name__} does not define {name!r}")
                objects[f"{module_name}.{name}"] = (module_name, name, getattr(module, name))
        type_ids = {name: pid for pid, (_, name, obj) in objects.items() if _kind(obj) != "function"}
        prims = []
        for pid, (module_name, name, obj) in objects.items():
            kind = _kind(obj)
            signature, annotation_text = _describe(obj, name, kind)
            doc = _doc(modules[module_name], obj, name, kind)
            named = set(_IDENT.findall(annotation_text))
            deps = tuple(sorted(type_ids[n] for n in named if n in type_ids and type_ids[n] != pid))
            prims.append(Primitive(id=pid, name=name, module=module_name, kind=kind,
                                   signature=signature, doc=doc, depends_on=deps))
        return cls(prims)


# ---------------------------------------------------------------------------------------------
# Introspection helpers
# ---------------------------------------------------------------------------------------------
def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception"
        if issubclass(obj, enum.Enum):
            return "enum"
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    return "alias"


class _Raw:
    """Object whose repr is a given text (lets ``inspect.Signature`` print formatted annotations)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


_PREFIX = re.compile(r"\b(?:primsel\.simulator\.apps\.\w+|typing|collections\.abc|builtins)\.")
_ENUM_REPR = re.compile(r"<(\w+\.\w+): [^>]*>")


def _format_annotation(annotation: object) -> str:
    """Source-like text of an annotation, without module prefixes of library or typing names."""
    if isinstance(annotation, str):
        return annotation
    if annotation is type(None) or annotation is None:
        return "None"
    if inspect.isclass(annotation) and not typing.get_args(annotation):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        if annotation.__module__ == "datetime":
            return f"datetime.{annotation.__qualname__}"
        return annotation.__qualname__
    return _PREFIX.sub("", repr(annotation)).replace("NoneType", "None")


def _format_default(value: object) -> str:
    return _ENUM_REPR.sub(r"\1", _PREFIX.sub("", repr(value)))


def _function_signature(fn: object, name: str, prefix: str = "def ") -> tuple[str, str]:
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        empty = inspect.Parameter.empty
        ann = empty if p.annotation is empty else _Raw(_format_annotation(p.annotation))
        default = empty if p.default is empty else _Raw(_format_default(p.default))
        params.append(p.replace(annotation=ann, default=default))
    ret = sig.return_annotation
    ret = inspect.Signature.empty if ret is inspect.Signature.empty else _Raw(_format_annotation(ret))
    text = f"{prefix}{name}{sig.replace(parameters=params, return_annotation=ret)}"
    return text, text


def _class_header(cls: type, name: str) -> str:
    bases = getattr(cls, "__orig_bases__", None) or cls.__bases__
    shown = []
    for b in bases:
        base_name = getattr(b, "__name__", None) or _format_annotation(b)
        if base_name not in ("object", "Generic"):
            shown.append(base_name)
    return f"class {name}({', '.join(shown)})" if shown else f"class {name}"


def _class_annotation_text(cls: type) -> str:
    """Annotations of the class's own fields and public methods, as text (for dependencies)."""
    parts: list[str] = []
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith(APPS_PACKAGE):
            parts.extend(_format_annotation(a) for a in inspect.get_annotations(klass).values())
    for attr_name, attr in vars(cls).items():
        if attr_name.startswith("_"):
            continue
        target = attr.fget if isinstance(attr, property) else attr
        if inspect.isfunction(target):
            try:
                parts.append(_function_signature(target, attr_name)[1])
            except (TypeError, ValueError):
                continue
    return " ".join(parts)


def _describe(obj: object, name: str, kind: str) -> tuple[str, str]:
    """(one-line signature, text whose identifiers are scanned for type dependencies)."""
    if kind == "function":
        return _function_signature(obj, name)
    if kind == "alias":
        text = f"{name} = {_format_annotation(obj)}"
        return text, text
    header = _class_header(obj, name)  # type: ignore[arg-type]
    if kind in ("enum", "exception"):
        return header, header
    return header, header + " " + _class_annotation_text(obj)  # type: ignore[arg-type]


def _doc(module: object, obj: object, name: str, kind: str) -> str:
    if kind == "alias":
        docs = getattr(module, "_ALIAS_DOCS", {})
        return inspect.cleandoc(docs.get(name, ""))
    return inspect.getdoc(obj) or ""


# ---------------------------------------------------------------------------------------------
# Gold primitives
# ---------------------------------------------------------------------------------------------
_BUILTINS = frozenset(dir(builtins))


def _module_bound(table: symtable.SymbolTable) -> set[str]:
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}


def free_global_names(program: str) -> set[str]:
    """Global names a program loads without binding them (spec 12.1 steps 1-2).

    Every scope is visited: the module level (where a function's annotations and defaults are
    evaluated), function bodies, nested functions, lambdas, comprehensions and class bodies. A
    name counts when it is referenced in a scope and resolves to the global namespace there
    (not bound in that scope or an enclosing function) and the program does not bind it at
    module level (its own ``def`` names, module-level imports or assignments).

    Raises
    ------
    SyntaxError : the program does not parse.
    """
    top = symtable.symtable(program, "<program>", "exec")
    bound = _module_bound(top)
    names: set[str] = set()
    stack = [top]
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        for sym in table.get_symbols():
            if not sym.is_referenced():
                continue
            if table.get_type() == "module":
                if not (sym.is_assigned() or sym.is_imported()):
                    names.add(sym.get_name())
            elif sym.is_global() and not sym.is_local():
                names.add(sym.get_name())
    return names - bound


def gold_primitives(program: str | Task, library: Mapping[str, Primitive]) -> frozenset[str]:
    """Ids of the library primitives a program uses: its gold set.

    The rule: take the program's free global names (:func:`free_global_names`: names loaded
    anywhere in the program, signature annotations and nested scopes included, and bound
    neither locally nor at module level), drop Python builtins and ``datetime`` (the stdlib
    module the app modules re-export), and keep the names that are the bare name of a library
    primitive. So a function called, a class instantiated or only named in an annotation or
    ``isinstance``, an enum used through an attribute (``TimeUnits.Minutes``) or subscription
    (``DateExpressions["Tomorrow"]``) and an exception raised or caught all count; enum members
    are not counted separately.

    Parameters
    ----------
    program : Python source (an AEP: one top-level function), or a task, whose reference
        program is read.
    library : the library (names must be unique, as in :class:`Library`).

    Returns
    -------
    frozenset of primitive ids.

    Raises
    ------
    SyntaxError : the program does not parse.
    TypeError : ``program`` is neither text nor a task.
    """
    if isinstance(program, Task):
        program = program.program
    if not isinstance(program, str):
        raise TypeError(f"gold_primitives takes a program's source or a Task, got {type(program).__name__}")
    by_name = {p.name: p.id for p in library.values()}
    names = free_global_names(program) - _BUILTINS - NOT_GOLD
    return frozenset(by_name[n] for n in names if n in by_name)


def with_gold(tasks: Iterable[Task], library: Mapping[str, Primitive]) -> list[Task]:
    """Copies of ``tasks`` with ``gold`` set by :func:`gold_primitives` of their reference program.

    Raises
    ------
    ValueError : a reference program does not parse (the message names the task).
    """
    out = []
    for task in tasks:
        try:
            gold = gold_primitives(task.program, library)
        except SyntaxError as exc:
            raise ValueError(f"task {task.id}: reference program does not parse: {exc}") from exc
        out.append(dataclasses.replace(task, gold=gold))
    return out
