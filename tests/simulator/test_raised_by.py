"""Who raised what ended a task (``ExecutionResult.raised_by``): the program, the sandbox, or the
task's own setup or evaluation program. Feedback to a model may show the message of the first
two only (primsel.eval.feedback), so the evaluation program's messages, which can name what it
expected, must be told apart."""

from __future__ import annotations

import pytest

from primsel.simulator.sandbox import Sandbox

from .test_sandbox import CHECK_42, make_task

CHECK_FAILS_FIRST = CHECK_42.replace("setup_function()", "setup_function()\n    {}['expected key']")
CHECK_BREAKS_ON_THE_ANSWER = CHECK_42.replace("if answer != 42:", "if len(answer) != 42:")


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=1, timeout=1.0) as box:
        yield box


@pytest.mark.parametrize(("program", "check", "status", "error_type", "line", "raised_by"), [
    ("def f():\n    return 42\n", CHECK_42, "pass", None, None, None),
    ("def f():\n    return 41\n", CHECK_42, "fail", "SolutionError", None, "task"),
    ("def f():\n    return 42\n", CHECK_BREAKS_ON_THE_ANSWER, "error", "TypeError", None, "task"),
    ("def f():\n    return 42\n", CHECK_FAILS_FIRST, "error", "EvaluatorError", None, "task"),
    ("def f():\n    x = 1\n    raise ValueError('mine')\n", CHECK_42, "error", "ValueError", 3, "program"),
    ("def f():\n    assert 1 == 2, 'my own check'\n", CHECK_42, "fail", "AssertionError", 2, "program"),
    ("def f():\n    while True:\n        pass\n", CHECK_42, "timeout", None, None, "sandbox"),
    # the account of an unsupported type comes from the program's process, which the program could have written
    ("class Widget:\n    pass\n\ndef f():\n    return Widget()\n", CHECK_42, "error", "UnsupportedReturn", None,
     "program"),
    ("def f(:\n", CHECK_42, "error", "SyntaxError", 1, "program"),
    ("x = 1\n", CHECK_42, "no_program", None, None, "program"),
])
def test_who_raised_what_ended_the_task(sandbox, program, check, status, error_type, line, raised_by):
    result = sandbox.execute(make_task(check), program)
    assert (result.status, result.error_type, result.line, result.raised_by) == (status, error_type, line, raised_by)


def test_an_exception_raised_before_the_program_ran_is_the_task_s(sandbox):
    setup = "def setup_env():\n    raise RuntimeError('the setup expected something')\n"
    result = sandbox.execute(make_task(setup=setup), "def f():\n    return 42\n")
    assert (result.status, result.error_type, result.raised_by) == ("error", "EvaluatorError", "task")
