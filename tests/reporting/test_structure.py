"""The reporting package reads as five small jobs: no import circle, no long function."""

from __future__ import annotations

import ast
from pathlib import Path

import primsel.reporting

PACKAGE = Path(primsel.reporting.__file__).parent
#: The longest function body allowed, in lines of code (no blank lines, comments or docstrings).
MAX_CODE_LINES = 60


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, source: list[str]) -> int:
    """Lines of a function that hold code: not blank, not only a comment, not its docstring."""
    body = node.body
    first = body[0]
    skip = set()
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        skip = set(range(first.lineno, first.end_lineno + 1))
    lines = range(node.lineno, node.end_lineno + 1)
    return sum(1 for i in lines if i not in skip and source[i - 1].strip() and not source[i - 1].strip().startswith("#"))


def long_functions(path: Path, limit: int = MAX_CODE_LINES) -> list[str]:
    text = path.read_text(encoding="utf-8")
    source = text.splitlines()
    return [f"{path.name}:{node.lineno} {node.name} has {n} lines of code"
            for node in ast.walk(ast.parse(text)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (n := code_lines(node, source)) > limit]


def imports_within(path: Path) -> set[str]:
    """The modules of the package a module imports (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("primsel.reporting."):
            out.add(node.module.split(".")[2])
    return out


def test_no_function_of_the_reporting_package_is_over_the_limit():
    assert [f for path in sorted(PACKAGE.glob("*.py")) for f in long_functions(path)] == []


def test_the_line_count_skips_docstrings_comments_and_blank_lines(tmp_path):
    path = tmp_path / "m.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(61))
    path.write_text(f'def f():\n    """Doc.\n\n    More.\n    """\n    # note\n\n{body}')
    # the def line and 61 assignments
    assert long_functions(path) == ["m.py:1 f has 62 lines of code"]
    assert long_functions(path, limit=62) == []


def test_the_reporting_modules_import_each_other_without_a_circle():
    graph = {p.stem: imports_within(p) - {p.stem} for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())
    assert graph["style"] == set()  # the bottom of the package

