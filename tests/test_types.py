"""Core types: entry points of program texts and the stub rendering of primitives."""

from __future__ import annotations

import ast

import pytest

from primsel.types import Primitive, Task, entry_point, to_json


def test_entry_point_is_the_first_top_level_function():
    source = "x = 1\ndef helper():\n    pass\ndef main():\n    return helper()\n"
    assert entry_point(source) == "helper"


def test_entry_point_prefers_the_requested_name_when_defined_at_top_level():
    source = "def helper():\n    pass\ndef main():\n    def inner():\n        pass\n"
    assert entry_point(source, preferred="main") == "main"
    assert entry_point(source, preferred="inner") == "helper"  # nested: not an entry point


@pytest.mark.parametrize(
    "source",
    ["", "x = 1\n", "class A:\n    def f(self):\n        pass\n", "def f(:\n", "def f():\n    return '\ud800'\n"],
)
def test_entry_point_is_none_without_a_parsable_top_level_function(source):
    assert entry_point(source) is None


def _primitive(signature: str, kind: str = "function") -> Primitive:
    return Primitive(id="m.x", name="x", module="m", kind=kind, signature=signature, doc="First line.\n\nMore.")


def test_full_text_of_a_function_is_a_stub_with_an_indented_docstring():
    text = _primitive("def x(a: int) -> str").text("full")
    assert text == 'def x(a: int) -> str:\n    """\n    First line.\n\n    More.\n    """'
    assert isinstance(ast.parse(text).body[0], ast.FunctionDef)


def test_full_text_of_an_alias_is_an_assignment_followed_by_its_docstring():
    text = _primitive("x = Literal['a', 'b']", kind="alias").text("full")
    assert text == 'x = Literal[\'a\', \'b\']\n"""\nFirst line.\n\nMore.\n"""'
    body = ast.parse(text).body
    assert isinstance(body[0], ast.Assign) and isinstance(body[1], ast.Expr)


def test_name_and_signature_views_and_an_unknown_view():
    p = _primitive("def x()")
    assert (p.text("name"), p.text("signature")) == ("x", "def x()")
    with pytest.raises(ValueError, match="unknown view 'stub'"):
        p.text("stub")


def test_task_entry_point_and_return_annotation_come_from_the_reference_program():
    task = Task(id="t", query="q", program="def answer() -> list[str]:\n    return []\n",
                setup_programs=(), evaluation_programs=())
    assert (task.entry_point, task.return_annotation) == ("answer", "list[str]")


def test_to_json_sorts_sets_and_recurses_into_dataclasses():
    task = Task(id="t", query="q", program="", setup_programs=("s",), evaluation_programs=("e",),
                gold=frozenset({"b.y", "a.x"}))
    data = to_json(task)
    assert data["gold"] == ["a.x", "b.y"] and data["setup_programs"] == ["s"]
