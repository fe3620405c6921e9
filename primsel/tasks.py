"""Task cards: what a task asks, what it needs and how it is checked (``primsel tasks`` shows them).

A card is computed from a task whenever it is shown (never stored): the query, the library
modules and gold primitives its reference program uses, the program's features, the number of
(SIP, EP) pairs, the reference program's length, and short summaries of what each setup program
(SIP) creates and what each evaluation program (EP) checks. Features are read from the reference
program's syntax tree:

========================  ==========================================================================
feature                   the reference program ...
========================  ==========================================================================
``loop``                  has a ``for`` or ``while`` loop or a comprehension
``branch``                has an ``if`` (statement, ``elif``, conditional expression or
                          comprehension filter) or a ``match``
``raises``                raises ``RequiresUserInput`` (hands the task back to the user)
``returns``               returns a value (a ``return`` with a value other than ``None`` in the entry
                          point's own body)
``datetime_arithmetic``   computes with dates: names ``timedelta``, or calls ``modify`` or
                          ``sum_time_units``
``multi_module``          uses gold primitives of two or more library modules besides ``exceptions``
========================  ==========================================================================

``primsel tasks`` (:mod:`primsel.commands.tasks`) lists and shows the cards.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from primsel.eval.source import called_name as _callee
from primsel.eval.source import entry_function, parse
from primsel.library import gold_primitives
from primsel.types import Primitive, Task

__all__ = ["FEATURES", "card", "features", "filter_cards", "format_card"]

#: Feature names, in the order cards list them.
FEATURES = ("loop", "branch", "raises", "returns", "datetime_arithmetic", "multi_module")
#: time_utils primitives that compute with dates and durations (feature ``datetime_arithmetic``).
_ARITHMETIC = frozenset({"modify", "sum_time_units"})
#: Calls of a setup program that create or change the world (summarised in ``setup``).
_CREATORS = ("simulate_org_structure", "simulate_vacation_schedule", "simulate_conference_room",
             "simulate_user_calendar", "simulate_employee_calendar", "add_event", "delete_event",
             "share_calendar", "Event")


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """Nodes of a function's body, not descending into nested functions, classes or lambdas."""
    out, stack = [], list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def features(program: str, gold: Sequence[str] = ()) -> list[str]:
    """Features of a reference program (see the module docstring), in :data:`FEATURES` order.

    Parameters
    ----------
    program : Python source of the program.
    gold : its gold primitive ids (``module.name``), for ``multi_module``.

    Returns
    -------
    list of feature names; ``[]`` for a program that does not parse.
    """
    tree = parse(program)
    if tree is None:
        return []
    nodes = list(ast.walk(tree))
    found = set()
    if any(isinstance(n, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)) for n in nodes):
        found.add("loop")
    if any(isinstance(n, (ast.If, ast.IfExp, ast.Match)) or (isinstance(n, ast.comprehension) and n.ifs)
           for n in nodes):
        found.add("branch")
    for n in nodes:
        if isinstance(n, ast.Raise) and n.exc is not None:
            target = n.exc.func if isinstance(n.exc, ast.Call) else n.exc
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
            if name == "RequiresUserInput":
                found.add("raises")
    entry = entry_function(tree)
    if entry is not None and any(
        isinstance(n, ast.Return) and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
        for n in _own_nodes(entry)
    ):
        found.add("returns")
    names = {n.id for n in nodes if isinstance(n, ast.Name)} | {n.attr for n in nodes if isinstance(n, ast.Attribute)}
    if "timedelta" in names or any(_callee(n) in _ARITHMETIC for n in nodes):
        found.add("datetime_arithmetic")
    if len({g.split(".", 1)[0] for g in gold} - {"exceptions"}) >= 2:
        found.add("multi_module")
    return [f for f in FEATURES if f in found]


def _literal_strings(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def setup_summary(program: str) -> str:
    """What a setup program (SIP) creates, in one line, from its calls (static, not executed).

    Names the people given to ``simulate_org_structure`` and counts the call sites of the
    functions that create or change the world (``add_event``, ``simulate_conference_room``,
    ``Event``, ...); a call site inside a loop is marked ``in a loop``.
    """
    tree = parse(program)
    if tree is None:
        return "(does not parse)"
    in_loop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.ListComp, ast.GeneratorExp)):
            in_loop.update(id(n) for n in ast.walk(node))
    parts, counts, looped = [], Counter(), set()
    for node in ast.walk(tree):
        name = _callee(node)
        if name == "simulate_org_structure" and isinstance(node, ast.Call):
            people = _literal_strings(node.args[0]) if node.args else []
            parts.append(f"organisation ({', '.join(people)} and default staff)" if people
                         else "organisation (default staff)")
        elif name in _CREATORS:
            counts[name] += 1
            if id(node) in in_loop:
                looped.add(name)
    for name in _CREATORS:
        if counts[name]:
            parts.append(f"{name} x{counts[name]}" + (" (in a loop)" if name in looped else ""))
    return "; ".join(parts) if parts else "nothing beyond the default world"


def evaluation_summary(program: str, known: Collection[str] | None = None) -> str:
    """What an evaluation program (EP) checks, in one line, from its syntax (not executed).

    Says whether it checks the program's return value (the value of ``executable()`` is read
    afterwards) or expects ``RequiresUserInput``, which functions it calls (library functions to
    read the world with, evaluation tools), and how many checks it has (``assert`` statements and
    ``raise SolutionError``). ``known``: the function names worth listing (library primitives
    and evaluation tools); None lists every function called by name.
    """
    tree = parse(program)
    if tree is None:
        return "(does not parse)"
    results: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _callee(node.value) == "executable":
            results.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id != "_")
    loads = Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    calls = sorted({_callee(n) for n in ast.walk(tree) if isinstance(n, ast.Call)} - {None, "executable", "setup_function"})
    handles = any(isinstance(n, ast.ExceptHandler) and n.type is not None and "RequiresUserInput" in ast.unparse(n.type)
                  for n in ast.walk(tree))
    asserts = sum(isinstance(n, ast.Assert) or (isinstance(n, ast.Raise) and n.exc is not None
                                                 and "SolutionError" in ast.unparse(n.exc)) for n in ast.walk(tree))
    parts = []
    if handles or "assert_requires_input_error" in calls:
        parts.append("expects RequiresUserInput")
    parts.append("checks the return value" if any(loads[r] for r in results) else "checks the effect on the world")
    reads = [c for c in calls if (c in known if known is not None else c[:1].islower())]
    if reads:
        parts.append("calls " + ", ".join(reads))
    parts.append(f"{asserts} check{'s' if asserts != 1 else ''} (assert or raise SolutionError)")
    return "; ".join(parts)


def card(task: Task, library: Mapping[str, Primitive], details: bool = False) -> dict[str, Any]:
    """The card of one task.

    Parameters
    ----------
    task : the task (``gold`` is recomputed from its reference program when empty).
    library : the library, for the gold primitives and their modules.
    details : also give ``program`` (the reference program), ``setup`` and ``evaluation``
        (one summary per (SIP, EP) pair; :func:`setup_summary`, :func:`evaluation_summary`).

    Returns
    -------
    dict with ``id``, ``query``, ``modules`` (library modules of the gold primitives, in library
    order), ``gold`` (sorted ids), ``features``, ``pairs`` (number of (SIP, EP) pairs) and
    ``lines`` (lines of the reference program, trailing blank lines left out).
    """
    gold = set(task.gold)
    if not gold:
        try:
            gold = set(gold_primitives(task.program, library))
        except SyntaxError:
            gold = set()
    order = list(dict.fromkeys(p.module for p in library.values()))
    modules = sorted({g.split(".", 1)[0] for g in gold}, key=lambda m: order.index(m) if m in order else len(order))
    out: dict[str, Any] = {
        "id": task.id,
        "query": task.query,
        "modules": modules,
        "gold": sorted(gold),
        "features": features(task.program, sorted(gold)),
        "pairs": len(task.setup_programs),
        "lines": len(task.program.rstrip().splitlines()),
    }
    if details:
        out["program"] = task.program
        out["setup"] = [setup_summary(p) for p in task.setup_programs]
        known = {p.name for p in library.values()}
        known.update(str(t).rpartition("::")[2] for t in task.scenario.get("evaluation_tools", ()))
        out["evaluation"] = [evaluation_summary(p, known) for p in task.evaluation_programs]
    return out


def filter_cards(cards: Sequence[Mapping[str, Any]], module: str | None = None, primitive: str | None = None,
                 feature: str | None = None, search: str | None = None) -> list[Mapping[str, Any]]:
    """The cards that match every filter given (None: no filter).

    ``module``: among the card's modules; ``primitive``: among its gold ids; ``feature``: among its
    features; ``search``: a case-insensitive substring of the query or the id.
    """
    needle = search.casefold() if search else None
    return [
        c for c in cards
        if (module is None or module in c["modules"])
        and (primitive is None or primitive in c["gold"])
        and (feature is None or feature in c["features"])
        and (needle is None or needle in c["query"].casefold() or needle in str(c["id"]).casefold())
    ]


def format_card(c: Mapping[str, Any]) -> str:
    """A whole card (with details) as text."""
    lines = [
        f"task {c['id']}",
        f"query: {c['query']}",
        f"modules: {', '.join(c['modules'])}",
        f"gold ({len(c['gold'])}): {', '.join(c['gold'])}",
        f"features: {', '.join(c['features']) or '-'}",
        f"pairs: {c['pairs']}; reference program: {c['lines']} lines",
        "",
        "reference program:",
        *("    " + line for line in c.get("program", "").rstrip().splitlines()),
        "",
    ]
    for i, (setup, check) in enumerate(zip(c.get("setup", []), c.get("evaluation", [])), start=1):
        lines.append(f"setup {i}: {setup}")
        lines.append(f"evaluation {i}: {check}")
    return "\n".join(lines)
