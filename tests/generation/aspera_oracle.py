"""Answers built from a reference program, each with the program ASPERA's agent would run.

Written apart from ``primsel.generation.aspera_parser`` (nothing is imported from it): every
answer is made by a known variation, and its expected program follows from the way it was made
and ASPERA's rules (apple/ml-aspera, src/aspera/parser.py and agent/base_agent.py), stated here
by hand for each variation. Where a rule depends on the program, it is decided from the syntax
tree, not with ASPERA's regular expressions:

* ASPERA cuts the code before a column-0 ``def`` only when its parameters hold no ``)`` and its
  return annotation only word characters, brackets, commas and spaces (:func:`cut_before`);
* its evaluator calls the first ``def`` (any depth) whose parameters hold no ``)`` and whose
  annotation holds no ``:`` (:func:`called_function`);
* a block or answer is taken only if it parses.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

PLACEHOLDER = "def parser_failed_placeholder_bad_solution(): return None"
HELPER = "def helper_for_parity():\n    return 1\n"


@dataclass(frozen=True)
class Case:
    """One answer and what ASPERA makes of it: ``program`` (None: the placeholder), the function
    ASPERA calls (None: no function is found, the task is not run) and whether it is a parser
    failure."""

    variation: str
    answer: str
    program: str | None
    entry: str | None


def _signature_parts(fn: ast.FunctionDef) -> list[ast.AST]:
    args = fn.args
    parts: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None and arg.annotation is not None:
            parts.append(arg.annotation)
    return parts


def _params_without_paren(source: str, fn: ast.FunctionDef) -> bool:
    return all(")" not in (ast.get_source_segment(source, p) or "") for p in _signature_parts(fn))


def cut_before(source: str, fn: ast.FunctionDef) -> bool:
    """ASPERA's splitter starts a piece at this (column-0) function."""
    if isinstance(fn, ast.AsyncFunctionDef) or fn.col_offset != 0 or not _params_without_paren(source, fn):
        return False
    if fn.returns is None:
        return True
    annotation = ast.get_source_segment(source, fn.returns) or ""
    return all(ch.isalnum() or ch in "_[], " for ch in annotation)


def called_function(source: str) -> str | None:
    """The function ASPERA's evaluator calls: the first ``def`` in source order, at any depth,
    whose parameters hold no ``)`` and whose return annotation holds no ``:``."""
    tree = ast.parse(source)
    functions = sorted((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), key=lambda n: n.lineno)
    for fn in functions:
        annotation = ast.get_source_segment(source, fn.returns) if fn.returns is not None else ""
        if _params_without_paren(source, fn) and ":" not in (annotation or ""):
            return fn.name
    return None


def _parses(text: str) -> bool:
    try:
        ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return False
    return True


def _main(program: str) -> ast.FunctionDef:
    return ast.parse(program).body[0]


def _case(variation: str, answer: str, program: str | None) -> Case:
    if program is None:
        return Case(variation, answer, None, "parser_failed_placeholder_bad_solution")
    return Case(variation, answer, program, called_function(program))


def cases(program: str) -> list[Case]:
    """The answers built from one reference program (a single top-level function, ending with a
    line break) and their expected outcome."""
    fn = _main(program)
    name = fn.name
    recognised = cut_before(program, fn)
    out = [
        # a python block between prose: the block
        _case("fence_python", f"Here is the program.\n\n```python\n{program}```\n\nIt does the job.", program),
        # a bare fence with prose: no ```python block, and the whole answer is not Python
        _case("fence_bare_with_prose", f"Sure:\n```\n{program}```\nDone.", None),
        # a bare fence alone: the whole answer without its backticks parses
        _case("fence_bare_alone", f"```\n{program}```", program),
        # two python blocks that parse: the first one wins
        _case("two_blocks_draft_first",
              f"A first draft:\n```python\ndef {name}():\n    return None\n```\nThe final version:\n"
              f"```python\n{program}```", f"def {name}():\n    return None\n"),
        # the first block does not parse: the second one
        _case("two_blocks_broken_first", f"```python\ndef broken(:\n    pass\n```\n```python\n{program}```", program),
        # a helper before the function: dropped when ASPERA cuts before the function
        _case("helper_before", f"```python\n{HELPER}\n\n{program}```",
              program if recognised else f"{HELPER}\n\n{program}"),
        # module-level calls at column 0: removed
        _case("print_call", f"```python\n{program}\nprint({name}())\n```", program),
        _case("bare_call", f"```python\n{program}\n\n{name}()\n```", program),
        # a __main__ tail: kept (its call is indented)
        _case("main_tail", f'```python\n{program}\n\nif __name__ == "__main__":\n    print({name}())\n```',
              f'{program}\n\nif __name__ == "__main__":\n    print({name}())\n'),
        # imports before the function: kept in front of it
        _case("imports", f"```python\nimport datetime\nfrom aspera.apps_implementation.work_calendar import *\n\n"
                         f"{program}```",
              f"import datetime\nfrom aspera.apps_implementation.work_calendar import *\n\n{program}"),
        # a prefilled ```python: bare code and a stray closing fence, the answer's last characters
        _case("prefill", f"{program}```", program),
        # the same with a line break after the fence: ASPERA strips backticks at the very ends
        # only, so the fence stays and the answer does not parse
        _case("prefill_line_break", f"{program}```\n", None),
        # the same followed by prose: the answer does not parse
        _case("prefill_with_prose", f"{program}```\n\nThis function answers the request.", None),
    ]
    out.append(_cut_case(program, recognised))
    return out


def _cut_case(program: str, recognised: bool) -> Case:
    """An answer cut mid-way (no closing fence): there is no block, so ASPERA parses the whole
    answer without its backticks, ``python`` tag included."""
    lines = program.splitlines(keepends=True)
    half = "".join(lines[: max(2, len(lines) // 2)])
    answer = f"```python\n{half}"
    whole = answer.strip("`")
    if not _parses(whole):
        return _case("cut_off", answer, None)
    # the tag line "python" is a piece of its own (a name, not an import) when ASPERA cuts
    # before the function; the last piece is then the cut function
    return _case("cut_off", answer, half if recognised else whole)
