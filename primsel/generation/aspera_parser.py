"""The program ASPERA's agent runs for a model answer (``extraction = "aspera"``).

ASPERA (Coca et al., ACL 2025, "ASPERA: A Simulated Environment to Evaluate Planning for Complex
Action Execution") turns a generation answer into a program with its agent parser. This module
reproduces those rules, quirks included, from ASPERA's public repository ``apple/ml-aspera``:
``src/aspera/parser.py`` (``ProgramStringFinder``, ``RemoveModuleLevelFunctionCalls``,
``ProgramParserWithImportHandling``, ``ExtractFunctionName``), the parser pipeline the agents use
(``src/aspera/configs/agent/parser/default.yaml``), ``src/aspera/agent/base_agent.py``
(``BaseAgent.plan`` and ``submit_solution``), ``src/aspera/code_utils/utils.py``
(``is_python_code``, ``is_import``, ``remove_import_statements``, ``_has_aspera_filenames``) and
``src/aspera/evaluator.py`` (the evaluation script, which calls the entry point). The code is our
own; the rules are theirs.

Rules (in order)
----------------
1. **Empty answer.** An answer of length 0 is a parser failure (step 8).
2. **Dedent.** The whole answer is dedented (``textwrap.dedent``).
3. **Block.** The blocks are the non-overlapping matches, left to right, of ```` ```python ````
   followed by the shortest text (across lines) up to the next ```` ``` ````. The tag must follow
   the backticks at once and in lower case: ```` ```py ````, ```` ```Python ````, ```` ``` python ````
   and a bare ```` ``` ```` open no block; ```` ```python3 ```` does (its block starts with ``3``).
   From each block, leading characters among `` `pythno `` (a character set, not the word),
   trailing backticks and then leading line breaks are stripped; the **first** block whose
   dedented text parses (``ast.parse``) is taken, stripped of surrounding whitespace -- even if
   it defines no function and a later block does. If there are blocks but none parses: parser
   failure. If there is no block at all: the whole (dedented) answer with backticks stripped at
   both ends, if it parses once dedented (prose around code does not parse: parser failure).
   So bare code followed by a stray closing fence (a prefilled ```` ```python ````) is kept when
   the fence ends the answer; a line break after it keeps the fence, and the answer fails.
4. **Call lines.** Every column-0 call -- an identifier immediately followed by ``(``, then the
   shortest text (across lines) up to a ``)`` after which its line holds only whitespace -- is
   deleted, with the blank lines after it but not the last line break before the next text;
   then surrounding line breaks and spaces are stripped. ``main()``, ``print(main())`` and a column-0 call spread over
   several lines go; ``result = main()``, ``asyncio.run(main())`` and indented calls stay. An
   ``if __name__ == "__main__":`` tail therefore stays, whole and inert: ASPERA runs the program
   as module ``query_executable``.
5. **Split.** The text is cut before every column-0 line starting with
   ``def NAME(PARAMS) [-> ANNOTATION]:`` where PARAMS holds no ``)`` and ANNOTATION only word
   characters, ``[``, ``]``, ``,`` and spaces (so ``-> list[Event]`` is recognised, while
   ``-> Event | None``, ``-> datetime.date``, ``-> "Event"``, ``async def`` and a default such as
   ``x=f()`` are not: such a ``def`` stays in the piece before it); or with ``import WORD`` or
   ``from WORD import`` where WORD has no dot (``from aspera.apps... import *`` is no cut).
   Each piece is dedented and stripped of surrounding line breaks and spaces; blank pieces go.
6. **Imports.** A piece all of whose statements are imports (a piece of comments only counts)
   is an import piece. The program is the import pieces (consecutive ones joined by a line
   break, each followed by a line break, exact duplicates kept once, after the scenario's
   ``from aspera.apps_implementation.<app> import *`` lines), two line breaks, and the **last**
   other piece. Functions defined before it are dropped, so a program that needs them fails.
   Every piece (each merged run of import pieces, and each other piece) is first formatted by
   ``black`` as ASPERA's ``ProgramParser.parse`` does (``format_program_str``: target Python
   3.10, line length 80); the steps below see the formatted text. So black's rewrites matter:
   ``import  datetime`` and ``import datetime`` become duplicates, ``def main(a: (int) = 1):``
   becomes a signature step 7 recognises, a backslash continuation is joined, docstrings are
   re-indented and stripped. Formatting follows black's 2025 stable style (``black`` 25.x; ASPERA
   pins 25.1.0).
7. **Entry point.** The evaluator calls the first ``def NAME(PARAMS) [-> ANNOTATION]:`` of the
   program at any indentation, PARAMS without ``)`` and ANNOTATION without ``:``, as
   ``query_executable.NAME``: a nested function or a method found first gives an
   ``AttributeError``. With none, ASPERA counts a parser failure and does not run the task,
   which then counts neither in the score nor in the error rates (``parse_failure`` =
   ``"entry_point"``; primsel's status ``no_program``).
8. **Placeholder.** On a parser failure at steps 1-3 ASPERA counts a parser failure and runs
   ``def parser_failed_placeholder_bad_solution(): return None`` (``parse_failure`` =
   ``"answer"``); its verdict counts like any other.
9. **Import-lenient program** (for ASPERA's import-lenient score and bad-import rate). The
   import lines (step 6, scenario's included) that name an app module file of ASPERA
   (:data:`APP_FILE_NAMES`, as a substring) and hold no ``*`` are removed; from the last piece,
   with its backslashes doubled (ASPERA escapes it to embed it in a string literal), every
   ``import`` statement at any depth whose lines name such a file is removed line-wise, runs of
   3 or more line breaks become 2, and the text is stripped. If the escaped piece does not parse,
   or nothing is left, there is no import-lenient program.

Where ASPERA's agent would stop with an uncaught exception -- a piece that does not parse by
itself (a decorator line cut from its ``def``) or that ``black`` cannot format, an answer of
imports only (no last piece), a ``ValueError``, ``RecursionError`` or ``MemoryError`` while
parsing -- primsel counts a parser failure and runs the placeholder instead; ``reason`` says which. ASPERA also embeds the program in
a ``'''`` string, so a program containing ``'''`` breaks its evaluation script; primsel runs it.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from primsel.types import parse_program

__all__ = [
    "APP_FILE_NAMES", "PLACEHOLDER_ENTRY", "PLACEHOLDER_PROGRAM", "AsperaParse", "aspera_entry_point",
    "find_program_text", "parse_answer", "remove_call_lines", "split_pieces",
]

#: The program ASPERA runs when it cannot parse an answer (step 8), and its function.
PLACEHOLDER_PROGRAM = "def parser_failed_placeholder_bad_solution(): return None"
PLACEHOLDER_ENTRY = "parser_failed_placeholder_bad_solution"
#: File stems of ASPERA's ``src/aspera/apps`` package (its ``ASPERA_FILENAMES``, ``__init__``
#: included); an import naming one of them is a model-issued import of a library module.
APP_FILE_NAMES = (
    "__init__", "ai_assistant", "company_directory", "contacts", "exceptions", "files", "messaging",
    "navigation", "reminder", "room_booking", "time_utils", "user_device_settings", "work_calendar",
)

_OPEN_TAG = "```python"
_CLOSE_TAG = "```"
# step 3: the opening tag, the shortest text, the closing backticks
_BLOCK = re.compile(re.escape(_OPEN_TAG) + r"(.*?)" + re.escape(_CLOSE_TAG), re.DOTALL)
# step 4: a column-0 identifier call; ``.*?`` may cross lines (DOTALL); ``\s*$`` takes the
# whitespace after the closing parenthesis up to the last line end it can reach. ASPERA's
# pattern, kept as the specification; :func:`_call_line_spans` finds its matches in linear time
# (the regex engine backtracks from every ``a(`` line start to the end of the text: quadratic)
_CALL_LINE = re.compile(r"^[a-zA-Z_]\w*\(.*?\)\s*$", re.MULTILINE | re.DOTALL)
_CALL_START = re.compile(r"^[a-zA-Z_]\w*\(", re.MULTILINE)
# step 5: positions where a piece starts
_PIECE_START = re.compile(
    r"^(?=def\s+\w+\s*\([^)]*\)\s*(?:->\s*[\w\[\], ]+)?\s*:"
    r"|import\s+\w"
    r"|from\s+\w+\s+import\s)",
    re.MULTILINE,
)
# step 7: the function the evaluator calls
_ENTRY = re.compile(r"^\s*def\s+(\w+)\s*\([^)]*\)\s*(?:->\s*[^:]+)?\s*:", re.MULTILINE)


class _Failure(Exception):
    """A parser failure; ``kind`` is ``"answer"`` (placeholder run) or ``"entry_point"``."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class AsperaParse:
    """Outcome of ASPERA's rules on one answer (see the module docstring).

    Parameters
    ----------
    program : the program ASPERA runs: imports and the last piece, or :data:`PLACEHOLDER_PROGRAM`.
    entry_point : the function ASPERA calls (step 7), :data:`PLACEHOLDER_ENTRY` on a failure.
    parse_failure : None, ``"answer"`` (steps 1-3 failed, or ASPERA would have stopped; the
        placeholder runs and counts) or ``"entry_point"`` (step 7 found no function; ASPERA
        does not run the task).
    reason : why a parser failure happened, else None.
    dropped_lines : the lines step 4 removed, in order.
    program_no_imports : the import-lenient program (step 9), or None.
    """

    program: str
    entry_point: str
    parse_failure: str | None = None
    reason: str | None = None
    dropped_lines: tuple[str, ...] = ()
    program_no_imports: str | None = None


def _parses(text: str) -> bool:
    """``ast.parse`` succeeds (ASPERA's ``is_python_code`` without its dedent)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError:
        return False
    except (ValueError, RecursionError, MemoryError) as exc:
        raise _Failure("answer", f"ASPERA's agent would stop: {type(exc).__name__} while parsing") from None
    return True


def find_program_text(answer: str) -> str:
    """Steps 2-3: the code ASPERA takes from an answer.

    Raises
    ------
    ValueError : no code is found (ASPERA's ``ProgramFinderError``).
    """
    try:
        return _find(answer)
    except _Failure as exc:
        raise ValueError(exc.reason) from None


def _find(answer: str) -> str:
    text = textwrap.dedent(answer)
    blocks = [m.group(1) for m in _BLOCK.finditer(text)]
    for block in blocks:
        code = block.lstrip(_OPEN_TAG).rstrip(_CLOSE_TAG).lstrip("\n")
        if _parses(textwrap.dedent(code)):
            return code.strip()
    if blocks:
        raise _Failure("answer", "no ```python block parses")
    whole = text.strip("`")
    if _parses(textwrap.dedent(whole)):
        return whole
    raise _Failure("answer", "no ```python block, and the answer does not parse as Python")


def remove_call_lines(text: str) -> tuple[str, tuple[str, ...]]:
    """Step 4: delete column-0 call statements.

    Returns
    -------
    (the text without them, stripped of surrounding line breaks and spaces; the removed lines).
    """
    removed: list[str] = []
    kept: list[str] = []
    last = 0
    for start, end in _call_line_spans(text):
        removed.extend(text[start:end].rstrip().splitlines())
        kept.append(text[last:start])
        last = end
    kept.append(text[last:])
    return "".join(kept).strip("\n "), tuple(removed)


def _call_line_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of every match of ``_CALL_LINE`` that ``finditer`` gives, in O(n).

    A match starts at a line start with ``identifier(`` and ends at the first ``)`` after it
    whose following white space reaches a line end or the end of the text (what ``\\s*$``
    needs); it then takes that white space up to its last line end (before the ``\\n``), or to
    the end of the text when the white space reaches it (``\\s*`` is greedy). One pass from
    the right gives, for every position, the first such ``)`` at or after it; matches do not
    overlap, as with ``finditer``.
    """
    n = len(text)
    close_at = [-1] * (n + 1)  # the first usable ")" at or after each position, -1 if none
    end_of = [-1] * (n + 1)    # the end of the match that ")" closes
    close, close_end = -1, -1
    run_end, run_newline = n, -1  # the white-space run starting after position i
    for i in range(n - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            if run_end == n:
                close, close_end = i, n
            elif run_newline >= 0:
                close, close_end = i, run_newline
        close_at[i], end_of[i] = close, close_end
        if ch.isspace():  # the regex engine's \s is str.isspace
            if run_newline < 0 and ch == "\n":
                run_newline = i
        else:
            run_end, run_newline = i, -1
    spans = []
    position = 0
    for match in _CALL_START.finditer(text):
        start = match.start()
        if start < position or close_at[match.end()] < 0:
            continue
        position = end_of[match.end()]
        spans.append((start, position))
    return spans


def split_pieces(text: str) -> list[str]:
    """Step 5: the pieces of the code, each dedented and stripped; blank pieces dropped."""
    starts = sorted({0, *(m.start() for m in _PIECE_START.finditer(text))})
    bounds = [*starts, len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    return [textwrap.dedent(p).strip("\n ") for p in pieces if p.strip()]


def _is_import_piece(piece: str) -> bool:
    """Every statement of the piece is an import (True for comments only).

    Raises
    ------
    _Failure : the piece does not parse by itself (ASPERA's agent stops with a SyntaxError).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(piece.strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise _Failure("answer", f"ASPERA's agent would stop: a piece does not parse by itself "
                                 f"({type(exc).__name__})") from None
    return all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in tree.body)


def parse_answer(answer: str) -> tuple[list[str], list[str], tuple[str, ...]]:
    """Steps 1-6 without composing: ``(import pieces, other pieces, lines removed by step 4)``.

    Consecutive import pieces come merged (joined by a line break), as ASPERA's parser returns
    them.

    Raises
    ------
    ValueError : a parser failure (the message says why).
    """
    try:
        return _parse(answer)
    except _Failure as exc:
        raise ValueError(exc.reason) from None


def _parse(answer: str) -> tuple[list[str], list[str], tuple[str, ...]]:
    if len(answer) == 0:
        raise _Failure("answer", "empty answer")
    code, removed = remove_call_lines(_find(answer))
    imports: list[str] = []
    others: list[str] = []
    pending: list[str] = []
    for piece in split_pieces(code):
        if _is_import_piece(piece):
            pending.append(piece)
            continue
        if pending:
            imports.append("\n".join(pending))
            pending = []
        others.append(piece)
    if pending:
        imports.append("\n".join(pending))
    return [_black(p) for p in imports], [_black(p) for p in others], removed


def _black(piece: str) -> str:
    """``piece`` formatted as ASPERA's ``format_program_str`` does, without black's final line break.

    Raises
    ------
    _Failure : black cannot format it (ASPERA's agent stops there).
    """
    formatted, error = _black_or_error(piece)
    if error is not None:
        raise _Failure("answer", f"ASPERA's agent would stop: black cannot format a piece ({error})")
    return formatted


@functools.lru_cache(maxsize=4096)
def _black_or_error(piece: str) -> tuple[str, str | None]:
    """``(black's output, None)`` or ``("", the error's class name)``; cached, as answers to one
    task repeat the same pieces."""
    import black

    mode = black.Mode(target_versions={black.TargetVersion.PY310}, line_length=80)
    try:
        return black.format_str(piece, mode=mode).rstrip("\n"), None
    except Exception as exc:  # black.InvalidInput, or an error inside black
        return "", type(exc).__name__


def aspera_entry_point(program: str) -> str | None:
    """Step 7: the name of the function ASPERA's evaluator calls, or None when there is none."""
    match = _ENTRY.search(program)
    return match.group(1) if match else None


def _names_app_file(text: str) -> bool:
    return any(name in text for name in APP_FILE_NAMES)


def remove_app_imports(code: str) -> str | None:
    """Delete, line-wise, every import statement (at any depth) whose lines name an app module
    file (:data:`APP_FILE_NAMES`); runs of 3 or more line breaks become 2; stripped.

    Returns None when ``code`` does not parse.
    """
    tree = parse_program(code)
    if tree is None:
        return None
    lines = code.splitlines()
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            span = (node.lineno, node.end_lineno or node.lineno)
            if _names_app_file("\n".join(lines[span[0] - 1:span[1]])) and span not in spans:
                spans.append(span)
    for start, end in sorted(spans, reverse=True):
        del lines[start - 1:end]
    cleaned = "\n".join(lines) if spans else code
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip()


def _import_lines(imports: Sequence[str], apps: Sequence[str]) -> list[str]:
    """Step 6's import entries, deduplicated in order: the scenario's star-imports, a blank
    separator, then each model import piece followed by a line break (``black`` ends every piece
    with one, so a model piece never equals a scenario line)."""
    entries = [f"from aspera.apps_implementation.{app} import *\n" for app in apps]
    entries.append("\n\n")
    entries += [f"{piece}\n\n" for piece in imports]
    return list(dict.fromkeys(entries))


def aspera_parse(answer: str | None, apps: Sequence[str] = ()) -> AsperaParse:
    """Apply ASPERA's rules (module docstring) to one answer.

    Parameters
    ----------
    answer : the model's answer (None counts as empty).
    apps : the task's app modules; their star-imports head the program as in ASPERA. Empty
        (the default) leaves them out: primsel's sandbox provides the same names.

    Returns
    -------
    :class:`AsperaParse`. Never raises on any answer text.
    """
    try:
        imports, others, removed = _parse(answer or "")
        if not others:
            raise _Failure("answer", "ASPERA's agent would stop: the code holds imports only")
        entries = _import_lines(imports, apps)
        head = "".join(entries).strip()
        last = others[-1]
        program = f"{head}\n\n{last}" if head else last
        entry = aspera_entry_point(program)
        lenient = _lenient(entries, last)
        if entry is None:
            raise _Failure("entry_point", "no function signature ASPERA's evaluator recognises")
    except _Failure as exc:
        return AsperaParse(program=PLACEHOLDER_PROGRAM, entry_point=PLACEHOLDER_ENTRY,
                           parse_failure=exc.kind, reason=exc.reason)
    return AsperaParse(program=program, entry_point=entry, dropped_lines=removed, program_no_imports=lenient)


def _lenient(entries: Sequence[str], last: str) -> str | None:
    """Step 9: the import-lenient program, or None."""
    kept = "".join(e for e in entries if not (_names_app_file(e) and "*" not in e)).strip()
    # ASPERA doubles the backslashes of the piece (to embed it in a string literal), filters it,
    # and the literal undoes the doubling when the program runs
    filtered = remove_app_imports(last.replace("\\", "\\\\"))
    if not filtered:
        return None
    body = filtered.replace("\\\\", "\\")
    return f"{kept}\n\n{body}" if kept else body
