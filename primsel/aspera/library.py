"""ASPERA's documentation as a retrieval corpus: the definitions of the modules of ``aspera.apps``, each shown as
ASPERA's PS generation prompt shows it.

``library = "aspera"`` (an experiment key; ``primsel retrieve --library aspera``) ranks these instead of primsel's
65 primitives, whose documentation primsel wrote for retrieval. The twelve modules hold 97 definitions; the five
that Asper-Bench programs use (``exceptions``, ``time_utils``, ``company_directory``, ``room_booking``,
``work_calendar``) define the same 65 names as primsel's library, so a task's gold primitives keep their ids.
"""

from __future__ import annotations

import ast

from primsel.aspera.protocol import AsperaProtocol
from primsel.types import Primitive

__all__ = ["aspera_primitives"]


def aspera_primitives(protocol: AsperaProtocol) -> tuple[Primitive, ...]:
    """The primitives of ASPERA's library, in module order (ASPERA's: alphabetical) and source order.

    Each primitive's ``shown`` text (what ``text("full")`` gives, what retrievers index and prompts show) is the
    definition's source as ASPERA's prompts show it; ``doc`` its docstring; ``signature`` its header line
    (``def name(...) -> T``, ``class Name(Base)``, or the assignment of an alias or functional enum);
    ``depends_on`` the other definitions its text names, by ASPERA's substring rule (the one-pass closure of the
    PS generation prompt), limited to the library.

    Raises
    ------
    primsel.aspera.source.AsperaSourceError : ASPERA's code cannot be loaded from the checkout.
    """
    rows = protocol.library_rows()
    ids = {row["name"]: f"{row['module']}.{row['name']}" for row in rows}
    primitives = []
    for row in rows:
        depends = sorted(ids[name] for name in row["uses"] if name in ids)
        primitives.append(Primitive(id=ids[row["name"]], name=row["name"], module=row["module"], kind=row["kind"],
                                    signature=_header(row["shown"]), doc=row["doc"], depends_on=tuple(depends),
                                    shown=row["shown"]))
    return tuple(primitives)


def _header(source: str) -> str:
    """The one-line header of a definition's source: a function's ``def`` line without its body, a class's
    ``class`` line, else the first line (an assignment)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source.splitlines()[0] if source else ""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.body = [ast.Pass()]
            node.decorator_list = []
            return ast.unparse(node).split("\n", 1)[0].rstrip(":")
    return source.splitlines()[0]
