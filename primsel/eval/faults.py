"""Faulty variants of a correct program, each with the line where its fault shows.

Used to measure failure attribution (``benchmarks/attribution_accuracy.py``): a fault is
injected into a task's reference program by editing its text (so every other line keeps its
number and its text), the faulty program is run, and the attribution is scored against what is
known of the fault. Kinds, in the style of mutation testing (mutation operators, DeMillo, Lipton
and Sayward, *Hints on test data selection*, 1978):

===================  ====================================================  ==============================
kind                 edit                                                  ``line``
===================  ====================================================  ==============================
``drop_call``        a statement that is only a call of a library          the first line executed after
                     function becomes ``pass``                             it (next statement; in a loop
                                                                           body's last place, the loop)
``change_constant``  an int or float constant gets + 1; a string           the constant's line
                     constant gets ``"_x"`` appended
``flip_comparison``  the first operator of a comparison is negated         the operator's line
                     (``<`` and ``>=``, ``==`` and ``!=``, ``in`` and
                     ``not in``, ``is`` and ``is not``)
``swap_calls``       two adjacent one-line statements that call the        the first of the two lines
                     library, neither reading what the other assigns,
                     change places
``change_argument``  one keyword argument of a library call is removed     the call's first line
===================  ====================================================  ==============================

Only the entry point's code is edited (nested functions included). Constants of docstrings,
f-strings and ``raise`` statements are left alone, and so is a dropped call after which the
entry point returns (no line follows it).
"""

from __future__ import annotations

import ast
import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from primsel.eval.source import called_name as _callee
from primsel.eval.source import entry_function

__all__ = ["KINDS", "Fault", "make_faults"]

#: Fault kinds, in the order :func:`make_faults` produces them.
KINDS = ("drop_call", "change_constant", "flip_comparison", "swap_calls", "change_argument")

_NEGATED = {
    ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=", ast.LtE: ">",
    ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is",
}
_SYMBOL = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.GtE: ">=", ast.Gt: ">", ast.LtE: "<=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}


@dataclass(frozen=True)
class Fault:
    """One faulty program.

    Parameters
    ----------
    task_id : the task whose reference program was edited.
    kind : one of :data:`KINDS`.
    program : the faulty program's source.
    line : 1-based line where the fault shows (see the module docstring).
    description : what was changed, e.g. ``"line 7: 14 -> 15"``.
    """

    task_id: str
    kind: str
    program: str
    line: int
    description: str


class _Source:
    """A program's lines, edited by AST positions (column offsets are UTF-8 byte offsets)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def offset(self, line: int, col: int) -> int:
        """Character offset in the whole text of (1-based line, byte column)."""
        before = sum(len(x) for x in self.lines[: line - 1])
        return before + len(self.lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

    def text(self) -> str:
        return "".join(self.lines)

    def replace(self, node: ast.AST | tuple[int, int, int, int], new: str) -> str:
        """The text with ``node``'s span (or ``(line, col, end_line, end_col)``) replaced."""
        if isinstance(node, tuple):
            line, col, end_line, end_col = node
        else:
            line, col, end_line, end_col = node.lineno, node.col_offset, node.end_lineno, node.end_col_offset
        text = self.text()
        return text[: self.offset(line, col)] + new + text[self.offset(end_line, end_col):]


def _excluded_constants(function: ast.AST) -> set[int]:
    """ids of constant nodes not to change: docstrings, f-string parts, raise statements."""
    out: set[int] = set()
    for node in ast.walk(function):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        if isinstance(node, (ast.JoinedStr, ast.Raise)):
            out.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))
    return out


def _constants(source: _Source, function: ast.AST) -> Iterable[tuple[str, int, str]]:
    skip = _excluded_constants(function)
    for node in ast.walk(function):
        if not isinstance(node, ast.Constant) or id(node) in skip or isinstance(node.value, bool):
            continue
        if isinstance(node.value, (int, float)):
            new = repr(node.value + 1)
        elif isinstance(node.value, str) and node.value:
            new = repr(node.value + "_x")
        else:
            continue
        yield source.replace(node, new), node.lineno, f"line {node.lineno}: {node.value!r} -> {new}"


def _comparisons(source: _Source, function: ast.AST) -> Iterable[tuple[str, int, str]]:
    for node in ast.walk(function):
        if not isinstance(node, ast.Compare) or type(node.ops[0]) not in _NEGATED:
            continue
        left, right = node.left, node.comparators[0]
        span = (left.end_lineno, left.end_col_offset, right.lineno, right.col_offset)
        gap = source.text()[source.offset(span[0], span[1]):source.offset(span[2], span[3])]
        symbol = _SYMBOL[type(node.ops[0])]
        words = gap.split()
        if " ".join(words) != symbol:  # comments or parentheses in between: leave it
            continue
        new_gap = gap.replace(symbol, _NEGATED[type(node.ops[0])], 1) if " " not in symbol else \
            gap[: len(gap) - len(gap.lstrip())] + _NEGATED[type(node.ops[0])] + gap[len(gap.rstrip()):]
        yield (source.replace(span, new_gap), left.end_lineno,
               f"line {left.end_lineno}: {symbol} -> {_NEGATED[type(node.ops[0])]}")


def _bodies(function: ast.AST) -> Iterable[tuple[ast.AST, list[ast.stmt]]]:
    """(owner, statement list) of every block inside ``function``, the function's own included."""
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield node, block
        for handler in getattr(node, "handlers", []) or []:
            yield handler, handler.body


def _next_line(parents: dict[int, tuple[ast.AST, list[ast.stmt]]], statement: ast.stmt,
               function: ast.AST) -> int | None:
    """Line executed after ``statement`` completes normally (None: the function returns)."""
    owner, block = parents[id(statement)]
    position = next(i for i, s in enumerate(block) if s is statement)
    if position + 1 < len(block):
        return block[position + 1].lineno
    if owner is function:
        return None
    if isinstance(owner, (ast.For, ast.AsyncFor, ast.While)) and block is owner.body:
        return owner.lineno
    if isinstance(owner, ast.stmt) and id(owner) in parents:
        return _next_line(parents, owner, function)
    return None


def _drops(source: _Source, function: ast.AST, library: Collection[str]) -> Iterable[tuple[str, int, str]]:
    parents = {id(s): (owner, block) for owner, block in _bodies(function) for s in block}
    for owner, block in _bodies(function):
        if isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)) and owner is not function:
            continue  # a nested function's body runs when it is called: no static next line
        for statement in block:
            if not (isinstance(statement, ast.Expr) and _callee(statement.value) in library):
                continue
            after = _next_line(parents, statement, function)
            if after is None:
                continue
            filler = "pass" + "\n" * (statement.end_lineno - statement.lineno)
            yield (source.replace(statement, filler), after,
                   f"line {statement.lineno}: {_callee(statement.value)}(...) dropped")


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _swaps(source: _Source, function: ast.AST, library: Collection[str]) -> Iterable[tuple[str, int, str]]:
    simple = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)
    for _, block in _bodies(function):
        for first, second in zip(block, block[1:]):
            if not (isinstance(first, simple) and isinstance(second, simple)):
                continue
            if first.lineno != first.end_lineno or second.lineno != second.end_lineno:
                continue
            calls = [any(_callee(n) in library for n in ast.walk(s)) for s in (first, second)]
            if not all(calls):
                continue
            one, two = _names(first, ast.Store), _names(second, ast.Store)
            if one & _names(second, ast.Load) or two & _names(first, ast.Load) or one & two:
                continue
            lines = list(source.lines)
            a, b = lines[first.lineno - 1], lines[second.lineno - 1]
            if a.rstrip("\n").lstrip() == b.rstrip("\n").lstrip():
                continue
            lines[first.lineno - 1] = b if b.endswith("\n") else b + "\n"
            lines[second.lineno - 1] = a if a.endswith("\n") or second.lineno == len(lines) else a + "\n"
            yield "".join(lines), first.lineno, f"lines {first.lineno} and {second.lineno} swapped"


def _argument_changes(source: _Source, function: ast.AST, library: Collection[str]) -> Iterable[tuple[str, int, str]]:
    for node in ast.walk(function):
        if _callee(node) not in library or not isinstance(node, ast.Call):
            continue
        keywords = [k for k in node.keywords if k.arg is not None]
        if not keywords:
            continue
        keyword = keywords[-1]
        everything = node.args + node.keywords
        position = everything.index(keyword) if keyword in everything else -1
        if position > 0:  # remove ", keyword=value" from the end of the previous argument
            previous = everything[position - 1]
            start = (previous.end_lineno, previous.end_col_offset)
            span = (*start, keyword.end_lineno, keyword.end_col_offset)
        else:  # the only argument: remove it and a trailing comma, if any
            span = (keyword.lineno, keyword.col_offset, keyword.end_lineno, keyword.end_col_offset)
        removed = source.text()[source.offset(span[0], span[1]):source.offset(span[2], span[3])]
        yield (source.replace(span, "\n" * removed.count("\n")), node.lineno,
               f"line {node.lineno}: {_callee(node)}(..., {keyword.arg}=...) removed")


def make_faults(
    task_id: str,
    program: str,
    library: Collection[str],
    kinds: Iterable[str] = KINDS,
    per_kind: int = 1,
    seed: int = 0,
) -> list[Fault]:
    """Faulty variants of ``program``, at most ``per_kind`` of each kind.

    Parameters
    ----------
    task_id : the task (kept in each fault).
    program : a correct program (Python source; its first top-level function is edited).
    library : names of library functions and classes (a call of one of these is a library call).
    kinds : fault kinds to make (see :data:`KINDS`).
    per_kind : most faults of each kind; candidates are drawn without replacement with
        ``random.Random(f"{seed}:{task_id}:{kind}")``.
    seed : seed of the draw.

    Returns
    -------
    list of :class:`Fault`, by kind then by draw; every faulty program parses and differs from
    ``program``.

    Raises
    ------
    ValueError : an unknown kind, or ``per_kind`` < 1.
    SyntaxError : ``program`` does not parse.
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; expected some of {KINDS}")
    if per_kind < 1:
        raise ValueError(f"per_kind must be >= 1, got {per_kind}")
    tree = ast.parse(program)
    function = entry_function(tree)
    if function is None:
        return []
    source = _Source(program)
    makers = {
        "drop_call": lambda: _drops(source, function, library),
        "change_constant": lambda: _constants(source, function),
        "flip_comparison": lambda: _comparisons(source, function),
        "swap_calls": lambda: _swaps(source, function, library),
        "change_argument": lambda: _argument_changes(source, function, library),
    }
    faults = []
    for kind in kinds:
        candidates = []
        for text, line, description in makers[kind]():
            if text == program:
                continue
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            candidates.append(Fault(task_id, kind, text, line, description))
        rng = random.Random(f"{seed}:{task_id}:{kind}")
        faults.extend(rng.sample(candidates, min(per_kind, len(candidates))))
    return faults
