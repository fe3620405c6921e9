"""Find the program in a model's answer.

Rules (in this order)
---------------------
1. **Fenced blocks** are read as CommonMark does: an opening fence is a line of three or more
   backticks or tildes (any indentation; a backtick fence's info string may not contain a
   backtick), followed by an optional info string (``python``, ``py title="x"``, ...). The block
   ends at the first line that holds only a fence of the *same* character and *at least* the
   opening length, so a four-backtick block may contain three-backtick lines (nested fences).
   A block still open at the end of the answer is *unclosed*. The opening fence's indentation
   is removed from the block's lines.
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
5. **Entry point** (DESIGN.md, Programs): the requested name if defined at top level, else the
   first top-level ``def``.
"""

from __future__ import annotations

import ast
import codeop
import re
import warnings
from dataclasses import dataclass

from primsel.types import Program, entry_point

__all__ = ["Block", "extract_program", "find_blocks", "is_cut_off"]

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_CLOSE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*$")
_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)
_CODE_START = re.compile(r"^(?:async[ \t]+def|def|class|import|from)[ \t]|^@")
_CODE_LINE = re.compile(
    r"^(?:(?:async[ \t]+def|def|class|import|from|if|elif|else|for|while|try|except|finally|with|return|raise|assert|pass)\b"
    r"|@|#|\)|\]|\}|[A-Za-z_][\w.]*[ \t]*(?:=|\(|\[|:[ \t]*[A-Za-z_\[]|\+=|-=))"
)


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

    Falls back to one unfenced block when ``text`` has no fence and contains Python code.
    Returns an empty list when there is neither.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    saw_fence = False
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        saw_fence = True
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _defined_functions(code: str) -> list[str]:
    """Top-level function names, by ``ast`` when the code parses, else by a column-0 regex."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return [m["name"] for m in _DEF.finditer(code)]
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def is_cut_off(code: str) -> bool:
    """True when ``code`` has a SyntaxError at the end of the input.

    That is: ``codeop`` finds the source incomplete (an open bracket, block or string), or the
    SyntaxError is reported on the last non-blank line (a statement cut mid-line). Code that
    parses returns False.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(code)
            return False
        except (SyntaxError, ValueError) as exc:
            error = exc
        try:
            if codeop.compile_command(code, symbol="exec") is None:
                return True
        except (SyntaxError, ValueError, OverflowError):
            pass
    line = getattr(error, "lineno", None)
    numbered = [n for n, text in enumerate(code.splitlines(), start=1) if text.strip()]
    return line is not None and bool(numbered) and line >= numbered[-1]


def extract_program(
    text: str | None,
    task_id: str,
    function_name: str | None = None,
    finish_reason: str | None = None,
) -> Program:
    """The program of a model's answer, with its status (see the module docstring).

    Parameters
    ----------
    text : the raw completion (None counts as empty).
    task_id : the task, copied into the result.
    function_name : the function the prompt asked for (the reference entry point), or None.
    finish_reason : the endpoint's finish reason; ``"length"`` marks the answer truncated.

    Returns
    -------
    Program with ``status`` ``"ok"``, ``"truncated"`` or ``"no_program"``; ``code`` is None for
    ``"no_program"`` and the (possibly cut) code otherwise; ``raw`` is ``text``.
    """
    raw = text or ""
    blocks = find_blocks(raw)
    named = [b for b in blocks if function_name and function_name in _defined_functions(b.code)]
    with_def = [b for b in blocks if _defined_functions(b.code)]
    chosen = named[-1] if named else (with_def[-1] if with_def else None)
    length_cut = finish_reason == "length"
    if chosen is None:
        cut = length_cut or any(not b.closed for b in blocks)
        code = blocks[-1].code if (cut and blocks and blocks[-1].code.strip()) else None
        return Program(task_id=task_id, code=code, status="truncated" if cut else "no_program", raw=raw)
    code = chosen.code
    truncated = length_cut or not chosen.closed or is_cut_off(code)
    names = _defined_functions(code)
    entry = entry_point(code, function_name)
    if entry is None and names:
        entry = function_name if function_name in names else names[0]
    return Program(task_id=task_id, code=code, status="truncated" if truncated else "ok", raw=raw, entry_point=entry)
