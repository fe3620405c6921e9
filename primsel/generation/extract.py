"""Find the program in a model's answer: ``primsel extract`` and the generators' extraction.

Two modes, chosen per generator (``extraction = "primsel" | "aspera"``) and by
``primsel extract --mode``: ``aspera`` reproduces ASPERA's agent exactly
(:mod:`primsel.generation.aspera_parser`, whose docstring lists its rules); ``primsel`` (the
default) follows the rules below. :func:`extract` applies either to one answer.

Rules of the ``primsel`` mode (in this order)
---------------------------------------------
1. **Fenced blocks** are read as CommonMark does: an opening fence is a line of three or more
   backticks or tildes (any indentation; a backtick fence's info string may not contain a
   backtick), followed by an optional info string (``python``, ``py title="x"``, ...). The block
   ends at the first line that holds only a fence of the *same* character and *at least* the
   opening length, so a four-backtick block may contain three-backtick lines (nested fences).
   A block still open at the end of the answer is *unclosed*. The opening fence's indentation
   is removed from the block's lines. A bare fence (no info string) that follows unfenced code
   defining a top-level function (rule 2, applied to the text since the previous block) closes
   that code instead of opening a block: bare code followed by a stray closing fence, as after
   a prompt or an assistant prefill that ends by opening a fence, is a closed block.
2. **Unfenced code**: with no fence at all, the code starts at the first column-0 line that
   opens Python (``def``, ``async def``, ``class``, ``import``, ``from``, ``@``) and runs to the
   first column-0 line of prose after it; trailing column-0 lines that stop it from parsing are
   dropped.
3. **Choice**: the last block that defines the requested function at top level; else the last
   block that defines any top-level function; else there is no program.
4. **Status**: ``"truncated"`` when ``finish_reason == "length"``, when the chosen block (or,
   with no program found, any block) is unclosed, or when the chosen code has a SyntaxError at
   the end of the input (Python's ``codeop`` finds it incomplete, or the error is reported on its
   last non-blank line). ``"no_program"`` when no block defines a top-level function. Otherwise
   ``"ok"`` -- a SyntaxError elsewhere is the program's own error and is left to execution.
5. **Module-level statements** (:func:`keep_definitions`): of the chosen code, only imports,
   definitions (``def``, ``async def``, ``class``), constant assignments, constant expressions
   (a docstring) and ``pass`` are kept, with ``if``/``try`` statements made only of those; any
   other statement at module level (``print(main())``, ``main()``, ``result = main()``, an
   ``if __name__ == "__main__":`` tail, a loop) is removed before execution and reported in
   ``dropped_lines``, so it never runs outside the task's world. An assignment is constant when
   every call in it (outside lambdas) is to a pure builtin (``int``, ``len``, ``range``, ...)
   or to a name the program imports from a module outside the assistant library
   (``timedelta(hours=1)`` after ``from datetime import timedelta``).
6. **Entry point** (docs/architecture.md, "Programs"): the requested name if defined at top level; when no
   name is requested, the top-level function the answer itself calls at module level (its
   first such call in the text: ``main()``, ``print(main())``, ``result = main()``, an ``if
   __name__ == "__main__":`` tail; the statement is removed by rule 5); else the first
   top-level ``def``. An ``async def`` entry point is flagged (``async_entry``): calling it
   returns a coroutine that is never awaited, so the sandbox gives ``error`` /
   ``AsyncEntryPoint`` without running it, in every mode.

Program text is parsed defensively everywhere (:func:`primsel.types.parse_program`): a
``RecursionError`` or ``MemoryError`` from a pathologically nested expression is treated like
code that does not parse, never raised.
"""

from __future__ import annotations

import ast
import codeop
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from primsel.generation.aspera_parser import aspera_parse, remove_app_imports
from primsel.types import ExecutionResult, Program, entry_point, parse_program

__all__ = [
    "MODES", "Block", "Extraction", "entry_point_error", "extract", "extract_program", "find_blocks",
    "is_cut_off", "keep_definitions", "program_extraction",
]

#: Extraction modes: ``primsel`` (this module's rules) and ``aspera`` (ASPERA's agent).
MODES = ("primsel", "aspera")
#: Error type of a task whose entry point is a coroutine function (rule 6).

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")
_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)
_CODE_START = re.compile(r"^(?:async[ \t]+def|def|class|import|from)[ \t]|^@")
_CODE_LINE = re.compile(
    r"^(?:(?:async[ \t]+def|def|class|import|from|if|elif|else|for|while|try|except|finally|with|return|raise|assert|pass)\b"
    r"|@|#|\)|\]|\}|[A-Za-z_][\w.]*[ \t]*(?:=|\(|\[|:[ \t]*[A-Za-z_\[]|\+=|-=))"
)
#: Builtins a constant assignment may call (rule 5): pure, no input or output.
_PURE_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate", "filter",
    "float", "frozenset", "hash", "int", "isinstance", "issubclass", "len", "list", "map", "max", "min",
    "ord", "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple",
    "type", "zip", "datetime",
})
#: Modules of the assistant library, by any path (``work_calendar``, ``aspera.apps_implementation...``).
_LIBRARY_PARTS = frozenset({"aspera", "primsel", "exceptions", "time_utils", "room_booking",
                            "company_directory", "work_calendar"})


@dataclass(frozen=True)
class Block:
    """One code candidate of an answer.

    Parameters
    ----------
    code : the block's text (fence indentation removed), without the fence lines.
    info : the fence's info string (``"python"``), "" for none or unfenced code.
    closed : False when the answer ended inside the block.
    fenced : False for code found without fences.
    """

    code: str
    info: str = ""
    closed: bool = True
    fenced: bool = True


def find_blocks(text: str) -> list[Block]:
    """Fenced blocks of ``text`` in order (CommonMark rules, see the module docstring).

    Bare code before a bare fence that closes it (rule 1) is a closed, unfenced block. Falls
    back to one unfenced block when ``text`` has no fence and contains Python code. Returns an
    empty list when there is neither.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    saw_fence = False
    segment = 0  # first line after the last block
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        saw_fence = True
        if not match["info"].strip():
            before = _unfenced_code(lines[segment:i])
            if before is not None and _defined_functions(before):
                blocks.append(Block(code=before, fenced=False))  # the fence closes bare code
                i += 1
                segment = i
                continue
        char, length = match["fence"][0], len(match["fence"])
        indent = len(match["indent"].expandtabs(4))
        body: list[str] = []
        closed = False
        i += 1
        while i < len(lines):
            end = _CLOSE.match(lines[i])
            if end is not None and end["fence"][0] == char and len(end["fence"]) >= length:
                closed = True
                i += 1
                break
            body.append(_strip_indent(lines[i], indent))
            i += 1
        blocks.append(Block(code="\n".join(body) + ("\n" if body else ""), info=match["info"].strip(), closed=closed))
        segment = i
    if not saw_fence:
        unfenced = _unfenced_code(lines)
        if unfenced is not None:
            blocks.append(Block(code=unfenced, fenced=False))
    return blocks


def _strip_indent(line: str, width: int) -> str:
    removed = 0
    pos = 0
    while pos < len(line) and removed < width and line[pos] in " \t":
        removed += 4 - removed % 4 if line[pos] == "\t" else 1
        pos += 1
    return line[pos:]


def _unfenced_code(lines: list[str]) -> str | None:
    start = next((n for n, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    end = len(lines)
    for n in range(start + 1, len(lines)):
        line = lines[n]
        if line.strip() and not line[0].isspace() and not _CODE_LINE.match(line):
            end = n
            break
    chunk = lines[start:end]
    while chunk and not chunk[-1].strip():
        chunk.pop()
    code = "\n".join(chunk) + "\n"
    # drop trailing column-0 lines (a sentence of prose that looks like code) until it parses
    trial = list(chunk)
    for _ in range(3):
        if _parses(code) or len(trial) < 2 or trial[-1][:1].isspace():
            break
        trial.pop()
        while trial and not trial[-1].strip():
            trial.pop()
        candidate = "\n".join(trial) + "\n"
        if _parses(candidate):
            code = candidate
            break
    return code


def _parses(code: str) -> bool:
    return parse_program(code) is not None


def _defined_functions(code: str) -> list[str]:
    """Top-level function names, by ``ast`` when the code parses, else by a column-0 regex."""
    tree = parse_program(code)
    if tree is None:
        return [m["name"] for m in _DEF.finditer(code)]
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def is_cut_off(code: str) -> bool:
    """True when ``code`` has a SyntaxError at the end of the input.

    That is: ``codeop`` finds the source incomplete (an open bracket, block or string), or the
    SyntaxError is reported on the last non-blank line (a statement cut mid-line). Code that
    parses, and code too deeply nested to parse at all, return False.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(code)
            return False
        except (SyntaxError, ValueError) as exc:
            error = exc
        except (RecursionError, MemoryError):
            return False
        try:
            if codeop.compile_command(code, symbol="exec") is None:
                return True
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
            pass
    line = getattr(error, "lineno", None)
    numbered = [n for n, text in enumerate(code.splitlines(), start=1) if text.strip()]
    return line is not None and bool(numbered) and line >= numbered[-1]


# ---------------------------------------------------------------------------------------------
# Rule 5: module-level statements
# ---------------------------------------------------------------------------------------------
def _callable_roots(tree: ast.Module) -> frozenset[str]:
    """Names a constant assignment may call: pure builtins, and names bound by top-level
    imports from modules outside the assistant library."""
    names = set(_PURE_BUILTINS)
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names
                         if _LIBRARY_PARTS.isdisjoint(a.name.split(".")))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and _LIBRARY_PARTS.isdisjoint(node.module.split(".")):
            names.update(a.asname or a.name for a in node.names if a.name != "*")
    return frozenset(names)


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _constant(node: ast.AST, roots: frozenset[str]) -> bool:
    """No call (outside lambdas) but to ``roots`` or on a literal; no await, yield or walrus."""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Lambda):
            continue  # its body runs only when called
        if isinstance(current, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if isinstance(current, ast.Call):
            root = _root(current.func)
            if not (isinstance(root, ast.Constant) or (isinstance(root, ast.Name) and root.id in roots)):
                return False
        stack.extend(ast.iter_child_nodes(current))
    return True


def _kept(stmt: ast.stmt, roots: frozenset[str]) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return _constant(stmt, roots)
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.If):
        return _constant(stmt.test, roots) and all(_kept(s, roots) for s in (*stmt.body, *stmt.orelse))
    if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return all(_kept(s, roots) for s in (*stmt.body, *stmt.orelse, *stmt.finalbody)) and all(
            (h.type is None or _constant(h.type, roots)) and all(_kept(s, roots) for s in h.body)
            for h in stmt.handlers)
    return False


def _char_col(line: str, byte_col: int) -> int:
    """Character index of a UTF-8 byte offset (``ast`` columns are byte offsets)."""
    return len(line.encode("utf-8", "surrogatepass")[:byte_col].decode("utf-8", "ignore"))


def keep_definitions(code: str) -> tuple[str, tuple[str, ...]]:
    """Rule 5: remove the module-level statements that are not imports, definitions, constant
    assignments or constant expressions.

    A removed statement's lines are deleted; one sharing a line with a kept statement
    (``x = 1; main()``) is replaced by ``pass`` (line numbers of the kept code are unchanged
    then). Code that does not parse is returned unchanged.

    Returns
    -------
    (the kept code, the removed source lines in order).
    """
    tree = parse_program(code)
    if tree is None:
        return code, ()
    roots = _callable_roots(tree)
    dropped = [s for s in tree.body if not _kept(s, roots)]
    if not dropped:
        return code, ()
    lines = code.splitlines(keepends=True)
    used: set[int] = set()
    for stmt in tree.body:
        if stmt not in dropped:
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
            used.update(range(first, (stmt.end_lineno or stmt.lineno) + 1))
    removed: list[str] = []
    whole: set[int] = set()
    for stmt in sorted(dropped, key=lambda s: (s.lineno, s.col_offset), reverse=True):
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        if used.isdisjoint(range(first, last + 1)):
            fresh = [n for n in range(first, last + 1) if n not in whole]  # f(); g() share a line
            whole.update(fresh)
            removed[:0] = [lines[n - 1].rstrip("\r\n") for n in fresh]
            continue
        start = _char_col(lines[first - 1], stmt.col_offset)
        end = _char_col(lines[last - 1], stmt.end_col_offset or 0)
        segment = "".join(lines[first - 1:last])
        removed[:0] = segment[start:len(segment) - len(lines[last - 1]) + end].splitlines()
        tail = lines[last - 1][end:]
        lines[first - 1] = lines[first - 1][:start] + "pass" + tail.rstrip("\r\n") + "\n"
        for n in range(first + 1, last + 1):
            lines[n - 1] = "\n"
    kept = "".join(line for n, line in enumerate(lines, start=1) if n not in whole)
    return kept, tuple(removed)


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extraction:
    """The program found in one answer.

    Parameters
    ----------
    status : ``"ok"``, ``"truncated"`` or ``"no_program"``. In ``aspera`` mode ``"ok"`` (a parser
        failure of the answer gives ASPERA's placeholder program, which runs), or
        ``"no_program"`` when ASPERA's evaluator finds no function to call and runs nothing.
    program : the program text; None for ``no_program`` (``aspera`` mode: the placeholder).
    entry_point : the function to call, or None.
    dropped_lines : source lines removed before execution (rule 5; in ``aspera`` mode the
        column-0 call lines ASPERA removes).
    mode : ``"primsel"`` or ``"aspera"``.
    parse_failure : ``aspera`` mode only: None, ``"answer"`` (the placeholder runs and counts)
        or ``"entry_point"`` (ASPERA would not run the task); see
        :mod:`primsel.generation.aspera_parser`.
    reason : why a parser failure happened, else None.
    program_no_imports : the program without its imports of library modules (for ASPERA's
        import-lenient score), or None.
    async_entry : the entry point is an ``async def`` (rule 6).
    """

    status: str
    program: str | None
    entry_point: str | None
    dropped_lines: tuple[str, ...] = ()
    mode: str = "primsel"
    parse_failure: str | None = None
    reason: str | None = None
    program_no_imports: str | None = None
    async_entry: bool = False

    def details(self) -> dict[str, Any]:
        """What :attr:`primsel.types.Program.extraction` keeps: everything but status,
        program and entry point."""
        return {"mode": self.mode, "dropped_lines": list(self.dropped_lines), "parse_failure": self.parse_failure,
                "reason": self.reason, "program_no_imports": self.program_no_imports,
                "async_entry": self.async_entry}


def _entry_node(tree: ast.Module | None, name: str | None) -> ast.stmt | None:
    if tree is None or name is None:
        return None
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)


def extract(
    answer: str | None,
    mode: str = "primsel",
    entry: str | None = None,
    finish_reason: str | None = None,
    apps: Sequence[str] = (),
) -> Extraction:
    """The program of one model answer, by the rules of ``mode`` (the module docstring).

    Parameters
    ----------
    answer : the raw completion (None counts as empty).
    mode : ``"primsel"`` or ``"aspera"``.
    entry : ``primsel`` mode: the function the prompt asked for (preferred entry point and
        choice of block). ASPERA ignores it.
    finish_reason : ``primsel`` mode: the endpoint's finish reason; ``"length"`` marks the
        answer truncated. ASPERA ignores it.
    apps : ``aspera`` mode: the task's app modules, whose star-imports then head the program
        as in ASPERA (default none: primsel's sandbox provides the same names).

    Returns
    -------
    :class:`Extraction`. Never raises on any answer text.

    Raises
    ------
    ValueError : unknown ``mode``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown extraction mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "aspera":
        parsed = aspera_parse(answer, apps)
        node = _entry_node(parse_program(parsed.program), parsed.entry_point)
        # ASPERA's evaluator runs no task whose program has no function it recognises
        status = "no_program" if parsed.parse_failure == "entry_point" else "ok"
        return Extraction(status=status, program=parsed.program, entry_point=parsed.entry_point,
                          dropped_lines=parsed.dropped_lines, mode=mode, parse_failure=parsed.parse_failure,
                          reason=parsed.reason, program_no_imports=parsed.program_no_imports,
                          async_entry=isinstance(node, ast.AsyncFunctionDef))
    return _extract_primsel(answer or "", entry, finish_reason)


def _extract_primsel(raw: str, function_name: str | None, finish_reason: str | None) -> Extraction:
    blocks = find_blocks(raw)
    named = [b for b in blocks if function_name and function_name in _defined_functions(b.code)]
    with_def = [b for b in blocks if _defined_functions(b.code)]
    chosen = named[-1] if named else (with_def[-1] if with_def else None)
    length_cut = finish_reason == "length"
    if chosen is None:
        cut = length_cut or any(not b.closed for b in blocks)
        code = blocks[-1].code if (cut and blocks and blocks[-1].code.strip()) else None
        return Extraction(status="truncated" if cut else "no_program", program=code, entry_point=None)
    truncated = length_cut or not chosen.closed or is_cut_off(chosen.code)
    return program_extraction(chosen.code, function_name, truncated)


def _called_function(code: str) -> str | None:
    """The top-level function that the module-level statements of ``code`` call first (in the
    order of the text), or None: ``main`` for ``print(main())`` after ``def helper`` and
    ``def main``. Calls inside definitions do not count; code that does not parse has none."""
    tree = parse_program(code)
    if tree is None:
        return None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    calls = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
                calls.append((node.lineno, node.col_offset, node.func.id))
            stack.extend(ast.iter_child_nodes(node))
    return min(calls)[2] if calls else None


def program_extraction(code: str, entry: str | None = None, truncated: bool = False) -> Extraction:
    """A program given as program text (not an answer), by rules 5 and 6 of the ``primsel`` mode.

    Parameters
    ----------
    code : the program.
    entry : preferred entry point; None: the top-level function the code calls at module level
        (rule 6), else the first top-level ``def``.
    truncated : the code was cut (status ``"truncated"``; rule 5 is then not applied).
    """
    dropped: tuple[str, ...] = ()
    called = _called_function(code)
    if not truncated:
        code, dropped = keep_definitions(code)
    names = _defined_functions(code)
    if entry is None and called in names:
        entry = called
    name = entry_point(code, entry)
    if name is None and names:
        name = entry if entry in names else names[0]
    node = _entry_node(parse_program(code), name)
    return Extraction(status="truncated" if truncated else "ok", program=code, entry_point=name,
                      dropped_lines=dropped, program_no_imports=remove_app_imports(code) or None,
                      async_entry=isinstance(node, ast.AsyncFunctionDef))


def extract_program(
    text: str | None,
    task_id: str,
    function_name: str | None = None,
    finish_reason: str | None = None,
    mode: str = "primsel",
    apps: Sequence[str] = (),
) -> Program:
    """The program of a model's answer as a :class:`primsel.types.Program` (see :func:`extract`).

    Parameters
    ----------
    text : the raw completion (None counts as empty).
    task_id : the task, copied into the result.
    function_name : the function the prompt asked for (the reference entry point), or None.
    finish_reason : the endpoint's finish reason; ``"length"`` marks the answer truncated
        (``primsel`` mode).
    mode : ``"primsel"`` or ``"aspera"``.
    apps : ``aspera`` mode: the task's apps (see :func:`extract`).

    Returns
    -------
    Program with ``status`` ``"ok"``, ``"truncated"`` or ``"no_program"``; ``code`` is None for
    ``"no_program"`` and the (possibly cut) code otherwise; ``raw`` is ``text``;
    ``extraction`` holds :meth:`Extraction.details`.

    Raises
    ------
    ValueError : unknown ``mode``.
    """
    found = extract(text, mode, function_name, finish_reason, apps)
    return Program(task_id=task_id, code=found.program, status=found.status, raw=text or "",
                   entry_point=found.entry_point, extraction=found.details())


def entry_point_error(program: Program) -> ExecutionResult | None:
    """The verdict of an ``ok`` program that ASPERA would not run as primsel does, or None.

    In ``aspera`` mode, an entry point that is not a top-level function (ASPERA's evaluator
    found a nested function or a method first) is ``error`` / ``AttributeError``, as in ASPERA.
    (An ``async def`` entry point, in any mode, is refused by the sandbox itself.) Code that does
    not parse returns None (the sandbox reports it).
    """
    if program.code is None or program.status != "ok":
        return None
    extraction: Mapping[str, Any] = program.extraction or {}
    wanted = program.entry_point
    if extraction.get("mode") != "aspera" or wanted is None:
        return None
    tree = parse_program(program.code)
    if tree is None:
        return None
    if wanted not in {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}:
        return ExecutionResult(program.task_id, "error", "AttributeError",
                               f"module 'query_executable' has no attribute '{wanted}' (ASPERA calls the "
                               "first function signature of the program, here not a top-level function)",
                               raised_by="program")
    return None
