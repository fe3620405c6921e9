"""Why a task failed: the pipeline stage, one diagnosis category and the program line.

:func:`attribute` examines one failed task and gives it exactly one category of the diagnosis
table documented in docs/user-guide.md ("Failure diagnosis"): the first rule of that table that applies
decides. Rules 1-6 name the proximate cause (a program that raised is a run-time error at its
line, whatever was selected). Rules 7 and 8 explain a program that ran to the end but did the
wrong thing, or handed the task back, by a selection problem. Rules 9-15 compare the program's
execution with the reference program's on the same initial state
(:func:`primsel.eval.localise.localise`) and need the reference's execution result; without it
a program that ran to the end and failed is ``wrong_effect``.

The retrieval signals are kept in every row whatever the category: ``missing_gold`` (gold ids
not selected), ``missed_gold`` (those of them the program does not use either: what rule 9 looks
at), ``hallucinated`` (unknown names used) and ``unselected`` (library ids used but not shown).
With the reference's execution, every row of an executed program also has ``difference``,
``divergence_line``, ``expected_call`` and ``actual_call`` (:class:`primsel.eval.localise.Localisation`;
None without it).

``line`` is the 1-based program line: where the execution error was raised when the sandbox
knows it; for ``hallucinated_primitive`` and ``unselected_primitive`` without such a line, the
first use of the name; for ``truncated``, the last line of the cut program; for the categories of
rules 9-14, the ``divergence_line``; else None.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from primsel.eval.localise import Localisation, localise
from primsel.types import ExecutionResult, Primitive, Program, Selection, Task, parse_program

__all__ = ["CATEGORIES", "STAGES", "attribute", "count_categories", "used_names"]

#: Pipeline stages, in pipeline order.
STAGES = ("llm", "extraction", "retrieval", "generation", "execution", "verification")
#: Diagnosis categories, in the order of the rules that give them (docs/user-guide.md, "Failure diagnosis").
CATEGORIES = (
    "llm_error", "truncated", "no_program", "timeout", "hallucinated_primitive", "runtime_error",
    "retrieval_miss", "unselected_primitive", "requires_user_input_misuse", "wrong_arguments",
    "wrong_order", "missing_call", "extra_call", "wrong_return", "wrong_effect",
)
#: Category of each difference from the reference's execution (rules 6 and 10-15).
_BY_DIFFERENCE = {
    "arguments": "wrong_arguments", "order": "wrong_order", "missing_call": "missing_call",
    "extra_call": "extra_call", "return": "wrong_return", "exception": "runtime_error", "none": "wrong_effect",
}
_REQUIRES_INPUT = ("exceptions.RequiresUserInput(", "raise RequiresUserInput:")

_BUILTINS = frozenset(dir(builtins))
_NAME_IN_MESSAGE = re.compile(r"name '([A-Za-z_]\w*)' is not defined")
#: Names the app modules export besides the primitives (spec 1.2), used when they cannot be imported.
_FALLBACK_EXPORTS = frozenset({"datetime", "deepcopy", "DEFAULT_EVENT_DURATION_MINUTES", "Any"})


@lru_cache(maxsize=8)
def _module_exports(modules: tuple[str, ...]) -> frozenset[str]:
    names: set[str] = set(_FALLBACK_EXPORTS)
    for module in modules:
        try:
            mod = importlib.import_module(f"primsel.simulator.apps.{module}")
        except ImportError:
            continue
        exported = getattr(mod, "__all__", None)
        names.update(exported if exported is not None else (n for n in vars(mod) if not n.startswith("_")))
    return frozenset(names)


def used_names(code: str) -> tuple[dict[str, int], set[str]]:
    """Global names a program loads and the names it binds.

    Parameters
    ----------
    code : Python source.

    Returns
    -------
    (``{name: first line}`` of every name loaded anywhere, ``{names bound anywhere}``:
    assignments, parameters, loop and ``with``/``except`` targets, imports, ``def``/``class``
    names, comprehension and ``global`` names). A name bound anywhere is treated as defined
    (a conservative reading: no false "unknown name" reports). Empty for code that does not parse.
    """
    tree = parse_program(code)
    if tree is None:
        return {}, set()
    loaded: dict[str, int] = {}
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in loaded or node.lineno < loaded[node.id]:
                loaded[node.id] = node.lineno
        else:
            bound.update(_bound_by(node))
    return loaded, bound


def _bound_by(node: ast.AST) -> list[str]:
    """The names one node of a program binds (an assigned name, a parameter, an import, a ``def`` or
    ``class``, an ``except`` or ``match`` target, a ``global`` or ``nonlocal`` name)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs)) and node.name:
        return [node.name]
    return []


def _imported_library_names(code: str, modules: Iterable[str]) -> dict[str, int]:
    """Names imported by ``from <...>.<library module> import name`` (ASPERA's or our paths)."""
    tree = parse_program(code)
    if tree is None:
        return {}
    wanted = set(modules)
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.rsplit(".", 1)[-1] in wanted:
            for alias in node.names:
                if alias.name != "*":
                    out.setdefault(alias.name, node.lineno)
    return out


def attribute(  # noqa: C901, PLR0912, PLR0915 (the 14 rules of the docstring, tried in their order: one branch each)
    task: Task,
    selection: Selection | None,
    program: Program | None,
    result: ExecutionResult | None,
    library: Mapping[str, Primitive],
    reference: ExecutionResult | None = None,
) -> dict[str, Any] | None:
    """Attribute the failure of one task to exactly one diagnosis category.

    Parameters
    ----------
    task : the task (its ``gold`` primitive ids are used).
    selection : the primitives shown to the generator (``selection.ids``), or None when the
        run had no selection step (then rules 7 and 8 do not apply).
    program : the generated program, or None when generation did not happen.
    result : the execution verdict, or None when the program was not executed (truncated,
        ``llm_error``, ``no_program``).
    library : the library (ids -> primitives).
    reference : the execution of the task's reference program on the same task (its
        ``trace``, ``outcomes`` and ``paths``), or None (then rules 9-14 do not apply, except the
        ``requires_user_input`` status of rule 9).

    Returns
    -------
    None when the task passed; else a dict with ``task_id``, ``stage`` (one of
    :data:`STAGES`), ``category`` (one of :data:`CATEGORIES`), ``line`` (int or None),
    ``status`` (execution status, or the program's status when it was not executed),
    ``error_type``, ``message``, ``missing_gold``, ``missed_gold``, ``hallucinated`` and
    ``unselected`` (sorted lists), and ``difference``, ``divergence_line``, ``expected_call``,
    ``actual_call`` (None without a reference or an execution).

    Raises
    ------
    ValueError : neither a program nor a result was given, or ``result`` or ``reference`` is for
        another task.
    """
    if program is None and result is None:
        raise ValueError(f"task {task.id}: attribute() needs the program or the execution result")
    if result is not None and result.task_id != task.id:
        raise ValueError(f"task {task.id}: the execution result is for task {result.task_id}")
    if reference is not None and reference.task_id != task.id:
        raise ValueError(f"task {task.id}: the reference's execution result is for task {reference.task_id}")
    if result is not None and result.status == "pass":
        return None

    code = program.code if program is not None and program.code else ""
    by_name = {p.name: p.id for p in library.values()}
    modules = tuple(dict.fromkeys(p.module for p in library.values()))
    loaded, bound = used_names(code)
    imported = _imported_library_names(code, modules)
    known = _BUILTINS | _module_exports(modules) | set(by_name)
    hallucinated = {n: line for n, line in loaded.items() if n not in bound and n not in known}
    uses = {by_name[n]: line for n, line in loaded.items() if n in by_name and n not in bound}
    for name, line in imported.items():
        if name in by_name:
            uses.setdefault(by_name[name], line)
    selected = set(selection.ids) if selection is not None else None
    missing = sorted(set(task.gold) - selected) if selected is not None else []
    missed = [pid for pid in missing if pid not in uses]
    unselected = {pid: line for pid, line in uses.items() if selected is not None and pid not in selected}
    place: Localisation | None = None
    if reference is not None and result is not None and result.status not in ("no_program",):
        place = localise(code, result, reference, task.program)

    status = result.status if result is not None else (program.status if program is not None else "")
    row: dict[str, Any] = {
        "task_id": task.id,
        "stage": "",
        "category": "",
        "line": result.line if result is not None else None,
        "status": status,
        "error_type": result.error_type if result is not None else None,
        "message": result.message if result is not None else None,
        "missing_gold": missing,
        "missed_gold": missed,
        "hallucinated": sorted(hallucinated),
        "unselected": sorted(unselected),
        "difference": place.difference if place else None,
        "divergence_line": place.divergence_line if place else None,
        "expected_call": place.expected_call if place else None,
        "actual_call": place.actual_call if place else None,
    }

    def verdict(stage: str, category: str, line: int | None = None) -> dict[str, Any]:
        row["stage"], row["category"] = stage, category
        if line is not None and row["line"] is None:
            row["line"] = line
        return row

    program_status = program.status if program is not None else "ok"
    if program is None or program_status in ("llm_error", "prompt_too_long"):
        return verdict("llm", "llm_error")
    if program_status == "truncated":
        return verdict("llm", "truncated", len(code.splitlines()) or None)
    if program_status == "no_program" or (result is not None and result.status == "no_program") \
            or (program is not None and program.extraction.get("parse_failure")):
        return verdict("extraction", "no_program")
    if result is None:
        raise ValueError(f"task {task.id}: a program with status 'ok' needs its execution result")
    if result.status == "timeout":
        return verdict("execution", "timeout")
    if result.status == "error" and result.error_type == "SyntaxError":
        return verdict("generation", "runtime_error")
    if result.status == "error" and result.error_type == "NameError" and hallucinated:
        match = _NAME_IN_MESSAGE.search(result.message or "")
        name = match.group(1) if match else None
        if name is None or name in hallucinated:
            first = hallucinated[name] if name else min(hallucinated.values())
            return verdict("generation", "hallucinated_primitive", first)
    if result.status == "error":
        return verdict("execution", "runtime_error")
    if missed:
        return verdict("retrieval", "retrieval_miss")
    if unselected:
        return verdict("generation", "unselected_primitive", min(unselected.values()))
    if result.status == "requires_user_input" or (place is not None and _about_requires_input(place)):
        return verdict("generation", "requires_user_input_misuse", place.divergence_line if place else None)
    if place is not None:
        category = _BY_DIFFERENCE[place.difference]
        stage = "verification" if category == "wrong_effect" else "generation"
        return verdict(stage, category, place.divergence_line)
    return verdict("verification", "wrong_effect")


def _about_requires_input(place: Localisation) -> bool:
    """True when exactly one side of the first difference hands the task back (RequiresUserInput)."""
    sides = [any(text and text.startswith(_REQUIRES_INPUT) for text in [call]) for call in
             (place.expected_call, place.actual_call)]
    return place.difference != "arguments" and sides[0] != sides[1]


def count_categories(rows: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Number of failures per category (``None`` rows, i.e. passed tasks, are skipped),
    most frequent first, ties by name."""
    counts = Counter(row["category"] for row in rows if row)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
