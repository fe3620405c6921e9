"""How the judge compiles a task's setup, evaluation and reference programs and finds the
function it calls: the first top-level function definition, as the parsed tree has it."""

from __future__ import annotations

import ast

import pytest

from primsel.simulator.judge import _compiled


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("def setup():\n    pass\n", "setup"),
        ("async def later():\n    pass\n", "later"),
        ("x = '''\ndef in_a_string():\n'''\ndef real():\n    pass\n", "real"),
        ("@staticmethod\ndef decorated():\n    pass\ndef plain():\n    pass\n", "decorated"),
        ("class A:\n    def method(self):\n        pass\ndef after_the_class():\n    pass\n", "after_the_class"),
        ("if True:\n    def nested():\n        pass\ndef top():\n    pass\n", "top"),
        ("f = lambda: 0\ndef g():\n    pass\n", "g"),
        ("def\tspaced ():\n    pass\n", "spaced"),
        ("import os\r\n\r\ndef crlf():\r\n    return os.sep\r\n", "crlf"),
    ],
)
def test_the_entry_is_the_first_top_level_function_of_the_tree(source, name):
    code, found = _compiled(source, "<setup program 1>", "setup program")
    tree = ast.parse(source)
    expected = next(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    assert found == expected == name
    assert code == compile(tree, "<setup program 1>", "exec")
    namespace: dict = {}
    exec(code, namespace)
    assert callable(namespace[name])


@pytest.mark.parametrize("source", ["x = 1\n", "x = '''\ndef only_in_a_string():\n'''\n"])
def test_a_program_without_a_function_is_refused(source):
    with pytest.raises(ValueError, match="the task's evaluation program defines no top-level function"):
        _compiled(source, "<evaluation program 1>", "evaluation program")


def test_text_that_is_not_python_raises_its_syntax_error():
    with pytest.raises(SyntaxError):
        _compiled("def broken(:\n", "<setup program 1>", "setup program")
