"""Why a task failed: the pipeline stage, a failure category and the program line.

:func:`attribute` examines one failed task. The first rule that applies decides:

====  ======================================  ===============  ==============================
step  condition                               stage            category
====  ======================================  ===============  ==============================
1     the task passed                         --               (returns None)
2     no program, or status ``llm_error``     ``llm``          ``llm_error``
3     program status ``truncated``            ``llm``          ``truncated``
4     program or execution ``no_program``,    ``extraction``   ``no_program``
      or a parser failure of ASPERA's rules
      (its placeholder program ran)
5     execution ``timeout``                   ``execution``    ``timeout``
6     execution ``error`` ``SyntaxError``     ``generation``   ``runtime_error:SyntaxError``
7     ``NameError`` on a name the program     ``generation``   ``hallucinated_primitive``
      uses but neither defines, imports, nor
      finds among builtins and library exports
8     execution ``error`` (any other type:    ``execution``    ``runtime_error:<Type>``
      the program raised at run time,
      including operations the sandbox blocks)
9     (``fail`` or ``requires_user_input``)   ``retrieval``    ``retrieval_miss``
      a gold primitive was not selected and
      the program does not use it
10    the program uses a library primitive    ``generation``   ``unselected_primitive``
      that was not shown (not selected)
11    execution ``requires_user_input``       ``execution``    ``runtime_error:RequiresUserInput``
      (the program handed the task back)
12    execution ``fail`` (the EP rejected     ``verification`` ``wrong_effect``
      the effect or the return value)
====  ======================================  ===============  ==============================

Rules 2-8 name the proximate cause: a program that raised is a run-time error at its line,
whatever was selected. Rules 9 and 10 explain a program that ran to the end but did the wrong
thing or handed the task back by a selection problem. The retrieval signals are kept in every
row whatever the category: ``missing_gold`` (gold ids not selected), ``missed_gold`` (those of
them the program does not use either: what rule 9 looks at), ``hallucinated`` (unknown names
used) and ``unselected`` (library ids used but not shown).

``line`` is the 1-based program line: where the execution error was raised when the sandbox
knows it; for ``hallucinated_primitive`` and ``unselected_primitive`` without such a line, the
first use of the name; for ``truncated``, the last line of the cut program; else None.
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

from primsel.types import ExecutionResult, Primitive, Program, Selection, Task, parse_program

__all__ = ["CATEGORIES", "STAGES", "attribute", "count_categories", "used_names"]

#: Pipeline stages, in pipeline order.
STAGES = ("llm", "extraction", "retrieval", "generation", "execution", "verification")
#: Failure categories (``runtime_error`` is followed by ``:<exception class name>``).
CATEGORIES = (
    "llm_error", "truncated", "no_program", "timeout", "hallucinated_primitive", "retrieval_miss",
    "unselected_primitive", "runtime_error", "wrong_effect",
)

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
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if node.id not in loaded or node.lineno < loaded[node.id]:
                    loaded[node.id] = node.lineno
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs) and node.name:
            bound.add(node.name)
    return loaded, bound


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


def attribute(
    task: Task,
    selection: Selection | None,
    program: Program | None,
    result: ExecutionResult | None,
    library: Mapping[str, Primitive],
) -> dict[str, Any] | None:
    """Attribute the failure of one task (see the module docstring for the decision order).

    Parameters
    ----------
    task : the task (its ``gold`` primitive ids are used).
    selection : the primitives shown to the generator (``selection.ids``), or None when the
        run had no selection step (then rules 9 and 10 do not apply).
    program : the generated program, or None when generation did not happen.
    result : the execution verdict, or None when the program was not executed (truncated,
        ``llm_error``, ``no_program``).
    library : the library (ids -> primitives).

    Returns
    -------
    None when the task passed; else a dict with ``task_id``, ``stage`` (one of
    :data:`STAGES`), ``category`` (one of :data:`CATEGORIES`, ``runtime_error:<Type>`` with the
    exception class), ``line`` (int or None), ``status`` (execution status, or the program's
    status when it was not executed), ``error_type``, ``message``, ``missing_gold``,
    ``missed_gold``, ``hallucinated`` and ``unselected`` (sorted lists).

    Raises
    ------
    ValueError : neither a program nor a result was given, or ``result`` is for another task.
    """
    if program is None and result is None:
        raise ValueError(f"task {task.id}: attribute() needs the program or the execution result")
    if result is not None and result.task_id != task.id:
        raise ValueError(f"task {task.id}: the execution result is for task {result.task_id}")
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
    }

    def verdict(stage: str, category: str, line: int | None = None) -> dict[str, Any]:
        row["stage"], row["category"] = stage, category
        if line is not None and row["line"] is None:
            row["line"] = line
        return row

    program_status = program.status if program is not None else "ok"
    if program is None or program_status == "llm_error":
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
        return verdict("generation", "runtime_error:SyntaxError")
    if result.status == "error" and result.error_type == "NameError" and hallucinated:
        match = _NAME_IN_MESSAGE.search(result.message or "")
        name = match.group(1) if match else None
        if name is None or name in hallucinated:
            first = hallucinated[name] if name else min(hallucinated.values())
            return verdict("generation", "hallucinated_primitive", first)
    if result.status == "error":
        return verdict("execution", f"runtime_error:{result.error_type or 'Exception'}")
    if missed:
        return verdict("retrieval", "retrieval_miss")
    if unselected:
        return verdict("generation", "unselected_primitive", min(unselected.values()))
    if result.status == "requires_user_input":
        return verdict("execution", f"runtime_error:{result.error_type or 'RequiresUserInput'}")
    return verdict("verification", "wrong_effect")


def count_categories(rows: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Number of failures per category (``None`` rows, i.e. passed tasks, are skipped),
    most frequent first, ties by name."""
    counts = Counter(row["category"] for row in rows if row)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
