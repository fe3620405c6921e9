"""Small readings of program text shared by localisation, fault injection and task cards."""

from __future__ import annotations

import ast

from primsel.types import parse_program as parse  # one rule for parsing program text

__all__ = ["called_name", "entry_function", "parse"]


def entry_function(tree: ast.Module | None) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first top-level function of a module (the reference's entry-point rule), or None."""
    if tree is None:
        return None
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def called_name(node: ast.AST) -> str | None:
    """The name a call calls: ``f`` for ``f(...)`` and ``obj.f(...)``; None for anything else."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name):
            return node.func.id
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
    return None
