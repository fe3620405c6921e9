"""Program extraction from model answers: fences, choice of block, statuses, entry points."""

from __future__ import annotations

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.generation.extract import (
    Block,
    entry_point_error,
    extract,
    extract_program,
    find_blocks,
    is_cut_off,
    keep_definitions,
)
from primsel.simulator.sandbox import Sandbox

F = "def plan():\n    return 1\n"


def test_backtick_fence_with_info_string():
    p = extract_program(f"Here you go:\n```python\n{F}```\nThat is all.", "7", "plan")
    assert (p.status, p.code, p.entry_point, p.task_id) == ("ok", F, "plan", "7")


def test_tilde_fence():
    p = extract_program(f"~~~\n{F}~~~\n", "1", "plan")
    assert p.status == "ok" and p.code == F


def test_info_string_with_attributes():
    blocks = find_blocks(f'```py title="solution.py"\n{F}```')
    assert blocks[0].info == 'py title="solution.py"' and blocks[0].code == F


def test_longer_fence_contains_shorter_fences():
    inner = "```python\ndef example():\n    pass\n```\n"
    text = f"````markdown\nUse it like this:\n{inner}````\n"
    blocks = find_blocks(text)
    assert len(blocks) == 1
    assert blocks[0].code == "Use it like this:\n" + inner


def test_closing_fence_must_use_the_same_character():
    text = f"```python\n{F}~~~\nmore = 2\n```\n"
    blocks = find_blocks(text)
    assert len(blocks) == 1 and blocks[0].code == F + "~~~\nmore = 2\n"


def test_closing_fence_may_be_longer_but_not_shorter():
    assert find_blocks(f"~~~~\n{F}~~~~~~\n")[0].closed is True
    blocks = find_blocks(f"~~~~\n{F}~~~\n")
    assert blocks[0].closed is False and blocks[0].code == F + "~~~\n"


def test_closing_fence_line_holds_only_the_fence():
    # "``` more" is not a closing fence, so the block stays open to the end
    blocks = find_blocks(f"```\n{F}``` more\n")
    assert blocks[0].closed is False


def test_backticks_in_info_string_make_no_fence():
    assert find_blocks("Wrap code in ```python``` blocks, please.") == []


def test_indented_fence_strips_its_indentation():
    text = "1. The program:\n   ```python\n   def plan():\n       return 1\n   ```\n"
    p = extract_program(text, "1", "plan")
    assert p.status == "ok" and p.code == F


def test_requested_function_wins_over_later_blocks():
    text = f"```python\n{F}```\nCall it:\n```python\nresult = plan()\n```\n"
    p = extract_program(text, "1", "plan")
    assert p.code == F


def test_block_defining_the_requested_name_is_chosen_over_other_functions():
    other = "def other():\n    return 0\n"
    text = f"```python\n{F}```\n```python\n{other}```"
    assert extract_program(text, "1", "plan").code == F
    assert extract_program(text, "1", "something_else").code == other  # last block with a def


def test_last_block_defining_the_requested_function_is_chosen():
    second = "def plan():\n    return 2\n"
    text = f"```python\n{F}```\nCorrected:\n```python\n{second}```"
    assert extract_program(text, "1", "plan").code == second


def test_entry_point_falls_back_to_the_first_function():
    code = "def first():\n    pass\n\ndef second():\n    pass\n"
    assert extract_program(f"```\n{code}```", "1", "plan").entry_point == "first"
    assert extract_program(f"```\n{code}```", "1", "second").entry_point == "second"


def test_unfenced_code_between_prose():
    text = f"Sure! Here is the program.\n{F}This returns one."
    p = extract_program(text, "1", "plan")
    assert p.status == "ok" and p.code == F


def test_unfenced_code_keeps_imports_and_decorators():
    code = "import datetime\n\n@staticmethod\ndef plan():\n    return datetime.date.today()\n"
    p = extract_program("The answer:\n" + code, "1", "plan")
    assert p.code == code


def test_no_code_is_no_program():
    p = extract_program("I am sorry, I cannot do that.", "1", "plan")
    assert (p.status, p.code) == ("no_program", None)
    assert p.raw == "I am sorry, I cannot do that."


def test_empty_or_missing_answer_is_no_program():
    assert extract_program("", "1").status == "no_program"
    assert extract_program(None, "1").status == "no_program"


def test_code_without_a_function_is_no_program():
    p = extract_program("```python\nx = find_events()\nprint(x)\n```", "1", "plan")
    assert p.status == "no_program"


def test_finish_reason_length_is_truncated():
    p = extract_program(f"```python\n{F}```", "1", "plan", finish_reason="length")
    assert p.status == "truncated" and p.code == F


def test_unclosed_fence_is_truncated_even_when_the_code_parses():
    p = extract_program("```python\ndef plan():\n    x = 1\n", "1", "plan")
    assert p.status == "truncated" and p.entry_point == "plan"


def test_unclosed_fence_before_any_function_is_truncated_not_no_program():
    p = extract_program("```python\nimport datetime\n", "1", "plan")
    assert p.status == "truncated"


def test_syntax_error_at_end_of_input_is_truncated():
    p = extract_program("def plan():\n    events = find_events(\n", "1", "plan")
    assert p.status == "truncated"


def test_syntax_error_elsewhere_is_a_program_error_not_truncation():
    code = "def plan():\n    x = = 1\n    return x\n"
    p = extract_program(f"```python\n{code}```", "1", "plan")
    assert p.status == "ok" and p.code == code


def test_truncated_and_stop_are_distinct_for_the_same_text():
    text = f"```python\n{F}```"
    assert extract_program(text, "1", "plan", "stop").status == "ok"
    assert extract_program(text, "1", "plan", "length").status == "truncated"


@pytest.mark.parametrize(
    ("code", "cut"),
    [
        ("def f():\n    return 1\n", False),
        ("def f():\n    x = (1,\n", True),
        ("def f():\n", True),
        ("def f():\n    if x:", True),
        ("def f():\n    s = '''abc\n", True),
        ("def f():\n    for a in b", True),
        ("def f(:\n    pass\n    return 2\n", False),
    ],
)
def test_is_cut_off(code, cut):
    assert is_cut_off(code) is cut


# -- faults fixed in the primsel mode ---------------------------------------------------------
def test_bare_code_with_a_stray_closing_fence_is_ok():
    p = extract_program("def add(a, b):\n    return a + b\n```", "1", "add")
    assert p.status == "ok" and p.code.startswith("def add") and p.code == "def add(a, b):\n    return a + b\n"


def test_a_stray_closing_fence_then_prose_then_a_later_block():
    text = f"{F}```\nLater I found a better one:\n```python\ndef plan():\n    return 2\n```\n"
    blocks = find_blocks(text)
    assert [(b.code, b.fenced, b.closed) for b in blocks] == [(F, False, True), ("def plan():\n    return 2\n", True, True)]
    assert extract_program(text, "1", "plan").code == "def plan():\n    return 2\n"


def test_a_bare_fence_after_prose_still_opens_a_block():
    assert find_blocks(f"Here it is:\n```\n{F}```\n") == [Block(code=F, info="", closed=True)]


def test_module_level_calls_are_dropped_and_listed():
    text = f"```python\nimport datetime\n\n{F}\nprint(plan())\nplan()\nresult = plan()\n```"
    p = extract_program(text, "1", "plan")
    assert p.status == "ok" and p.code == f"import datetime\n\n{F}\n"
    assert p.extraction["dropped_lines"] == ["print(plan())", "plan()", "result = plan()"]


def test_a_main_tail_is_dropped():
    text = f'```python\n{F}\nif __name__ == "__main__":\n    print(plan())\n```'
    p = extract_program(text, "1", "plan")
    assert p.code == F + "\n"
    assert p.extraction["dropped_lines"] == ['if __name__ == "__main__":', "    print(plan())"]


def test_constant_assignments_are_kept_and_world_dependent_ones_dropped():
    code = ("from datetime import timedelta\nimport work_calendar\nLIMIT = 3\nNAMES = ['a', 'b']\n"
            "ONE_HOUR = timedelta(hours=1)\nWEEK = range(7)\nME = get_current_user()\nEVENTS = work_calendar.find_events()\n"
            "KEY = lambda e: e.name.lower()\n" + F)
    kept, dropped = keep_definitions(code)
    assert dropped == ("ME = get_current_user()", "EVENTS = work_calendar.find_events()")
    assert kept == code.replace("ME = get_current_user()\n", "").replace("EVENTS = work_calendar.find_events()\n", "")


def test_a_dropped_statement_sharing_a_line_becomes_pass():
    kept, dropped = keep_definitions("x = 1; print(x)\nplan(); plan()\n" + F)
    assert kept == "x = 1; pass\n" + F and dropped == ("print(x)", "plan(); plan()")


def test_if_and_try_made_of_definitions_are_kept():
    code = "try:\n    import zoneinfo\nexcept ImportError:\n    zoneinfo = None\nif True:\n    X = 1\n" + F
    assert keep_definitions(code) == (code, ())


def test_an_async_entry_point_is_flagged_and_the_sandbox_never_runs_it():
    text = "```python\nasync def plan():\n    return 1\n```"
    p = extract_program(text, "4", "plan")
    assert p.status == "ok" and p.extraction["async_entry"] is True
    task = load_builtin_tasks()[0]
    verdict = Sandbox(workers=1).execute(task, p.code, p.entry_point)  # decided before any process starts
    assert (verdict.status, verdict.error_type, verdict.line) == ("error", "AsyncEntryPoint", 1)


def test_entry_point_error_lets_ordinary_programs_run():
    assert entry_point_error(extract_program(f"```python\n{F}```", "1", "plan")) is None
    assert entry_point_error(extract_program("nothing", "1", "plan")) is None


@pytest.mark.parametrize("nested", ["x = " + "1+" * 100_000 + "1", "x = " + "-" * 100_000 + "1"])
def test_a_pathologically_nested_program_gets_a_status_not_an_exception(nested):
    # ast.parse raises RecursionError (the sum) or MemoryError (the unary minus) on these
    p = extract_program(f"```python\n{F}{nested}\n```", "1", "plan")
    assert (p.status, p.entry_point) == ("ok", "plan") and p.code == f"{F}{nested}\n"
    assert entry_point_error(p) is None  # left to the sandbox, which reports the error
    assert extract_program(f"```python\n{nested}\n```", "1", "plan").status == "no_program"
    assert is_cut_off(nested) is False


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown extraction mode 'fast'"):
        extract("x", mode="fast")


def test_builtin_programs_with_what_models_add_pass_after_extraction():
    from primsel.datasets import load_builtin_tasks
    from primsel.simulator.sandbox import Sandbox

    tasks = load_builtin_tasks()
    jobs = []
    for task in tasks:
        name = task.entry_point
        for answer in (f"```python\n{task.program}\nprint({name}())\n```",
                       f'```python\n{task.program}\nif __name__ == "__main__":\n    {name}()\n```',
                       f"{task.program}```"):
            program = extract_program(answer, task.id, name)
            jobs.append((task, program.code, program.entry_point))
    with Sandbox(workers=2) as sandbox:
        assert [r.status for r in sandbox.execute_many(jobs)] == ["pass"] * (3 * len(tasks))
