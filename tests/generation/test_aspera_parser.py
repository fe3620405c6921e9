"""ASPERA's answer processing, rule by rule (primsel.generation.aspera_parser's docstring), with
the expected programs written out by hand from ASPERA's rules (apple/ml-aspera)."""

from __future__ import annotations

import ast

import pytest

from primsel.generation.aspera_parser import (
    PLACEHOLDER_ENTRY,
    PLACEHOLDER_PROGRAM,
    aspera_entry_point,
    aspera_parse,
    parse_answer,
    remove_call_lines,
    split_pieces,
)
from primsel.generation.extract import entry_point_error, extract_program

MAIN = "def main():\n    return 1\n"


def same(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))


def test_an_empty_answer_runs_the_placeholder():
    result = aspera_parse("")
    assert (result.program, result.entry_point, result.parse_failure) == (PLACEHOLDER_PROGRAM, PLACEHOLDER_ENTRY, "answer")
    assert aspera_parse(None).parse_failure == "answer"


def test_the_first_python_block_that_parses_wins_even_without_a_function():
    # ASPERA takes "x = main()" and then finds no function to call: the task is not run
    result = aspera_parse(f"```python\nx = main()\n```\n```python\n{MAIN}```")
    assert (result.parse_failure, result.program) == ("entry_point", PLACEHOLDER_PROGRAM)


def test_a_block_that_does_not_parse_is_skipped():
    result = aspera_parse(f"```python\ndef main(:\n```\nFixed:\n```python\n{MAIN}```")
    assert result.parse_failure is None and result.program == MAIN.strip()


def test_blocks_that_all_fail_to_parse_are_a_failure_without_fallback():
    # a block exists, so the whole answer is not tried
    result = aspera_parse("```python\ndef main(:\n```")
    assert result.parse_failure == "answer" and result.reason == "no ```python block parses"


@pytest.mark.parametrize("fence", ["```py", "```Python", "``` python"])
def test_only_the_exact_python_tag_opens_a_block(fence):
    # no block: the whole answer is tried, and the prose around the code does not parse
    assert aspera_parse(f"Here:\n{fence}\n{MAIN}```\n").parse_failure == "answer"


def test_a_bare_fenced_answer_without_prose_parses_whole():
    assert aspera_parse(f"```\n{MAIN}```").program == MAIN.strip("\n")


def test_the_tag_is_stripped_as_a_set_of_characters():
    # "```pythonhot = 1": the block starts "hot = 1"; stripping the characters of "```python"
    # leaves " = 1", which does not parse
    assert aspera_parse("```pythonhot = 1\ndef main():\n    return hot\n```").parse_failure == "answer"


def test_python3_tag_keeps_its_digit_as_a_statement_of_its_own():
    # the block is "3\ndef main()...": "3" is a piece (not an import), the function the last piece
    assert aspera_parse(f"```python3\n{MAIN}```").program == MAIN.strip()


def test_stray_closing_fence_at_the_end_keeps_the_code():
    assert aspera_parse(f"{MAIN}```").program == MAIN.strip("\n")
    assert aspera_parse(f"{MAIN}```\n").parse_failure == "answer"  # the line break keeps the fence


def test_column_zero_calls_are_removed_and_reported():
    text = f"{MAIN}\nprint(main())\nmain()\nsetup(\n    1,\n)\nresult = main()\nasyncio.run(main())\n"
    code, removed = remove_call_lines(text)
    assert removed == ("print(main())", "main()", "setup(", "    1,", ")")
    # each removed call leaves its line break (the whitespace it takes stops before the last one)
    assert code == f"{MAIN}\n" + "\n" * 3 + "result = main()\nasyncio.run(main())"


def test_a_column_zero_call_can_swallow_code_up_to_a_closing_parenthesis_at_a_line_end():
    # ".*?" crosses lines: from "log(x) + 1" to the first ")" that ends a line
    code, removed = remove_call_lines("log(x) + 1\ndef main():\n    return f()\nz = 2\n")
    assert code == "z = 2" and removed == ("log(x) + 1", "def main():", "    return f()")


def test_main_tail_is_kept_whole():
    answer = f'```python\n{MAIN}\nif __name__ == "__main__":\n    print(main())\n```'
    result = aspera_parse(answer)
    assert same(result.program, MAIN + 'if __name__ == "__main__":\n    print(main())\n')
    assert result.dropped_lines == ()


def test_helpers_before_a_recognised_function_are_dropped():
    answer = f"```python\ndef helper():\n    return 2\n\n{MAIN}```"
    assert aspera_parse(answer).program == MAIN.strip()


@pytest.mark.parametrize("annotation", ["-> Event | None", "-> datetime.date", '-> "Event"'])
def test_a_function_the_splitter_does_not_recognise_stays_with_the_piece_before_it(annotation):
    main = f"def main() {annotation}:\n    return None\n"
    result = aspera_parse(f"```python\ndef helper():\n    return 2\n\n{main}```")
    assert same(result.program, "def helper():\n    return 2\n\n" + main)
    assert result.entry_point == "helper"  # the evaluator calls the first signature


def test_a_list_annotation_is_recognised():
    main = "def main() -> list[Event]:\n    return []\n"
    assert aspera_parse(f"```python\ndef helper():\n    pass\n\n{main}```").program == main.strip()


def test_a_default_with_parentheses_hides_the_function_from_the_splitter_and_the_evaluator():
    main = "def main(when=now_()):\n    def inner():\n        return when\n    return inner()\n"
    result = aspera_parse(f"```python\n{main}```")
    # the evaluator calls the first signature without ")" in its parameters: the nested one
    assert result.entry_point == "inner"
    verdict = entry_point_error(extract_program(f"```python\n{main}```", "9", mode="aspera"))
    assert verdict.status == "error" and verdict.error_type == "AttributeError"


def test_pieces_start_at_imports_of_single_word_modules_only():
    text = "import datetime\nfrom aspera.apps_implementation.work_calendar import *\nfrom datetime import date\n" + MAIN
    assert split_pieces(text) == [
        "import datetime\nfrom aspera.apps_implementation.work_calendar import *",
        "from datetime import date",
        MAIN.strip(),
    ]


def test_imports_are_deduplicated_and_kept_before_the_last_piece():
    answer = f"```python\nimport datetime\n\ndef helper():\n    pass\n\nimport datetime\n\n{MAIN}```"
    imports, others, _ = parse_answer(answer)
    assert imports == ["import datetime", "import datetime"]
    assert others == ["def helper():\n    pass", MAIN.strip()]
    assert aspera_parse(answer).program == "import datetime\n\n" + MAIN.strip()


def test_consecutive_import_pieces_merge_and_a_comment_piece_counts_as_an_import():
    answer = f"```python\n# my solution\nimport datetime\nimport json\n\n{MAIN}```"
    imports, others, _ = parse_answer(answer)
    assert imports == ["# my solution\nimport datetime\nimport json"] and others == [MAIN.strip()]


def test_the_scenario_star_imports_head_the_program_when_apps_are_given():
    program = aspera_parse(f"```python\n{MAIN}```", apps=["time_utils", "work_calendar"]).program
    assert program == ("from aspera.apps_implementation.time_utils import *\n"
                       "from aspera.apps_implementation.work_calendar import *\n\n" + MAIN.strip())


def test_a_decorator_cut_from_its_function_would_stop_aspera_and_counts_as_a_parser_failure():
    answer = f"```python\nfrom functools import cache\n\n@cache\ndef helper():\n    pass\n\n{MAIN}```"
    result = aspera_parse(answer)
    assert result.parse_failure == "answer" and "does not parse by itself" in result.reason


def test_imports_only_would_stop_aspera_and_counts_as_a_parser_failure():
    result = aspera_parse("```python\nimport datetime\n```")
    assert result.parse_failure == "answer" and "imports only" in result.reason


def test_async_def_is_neither_cut_nor_called():
    result = aspera_parse("```python\nasync def main():\n    return 1\n```")
    assert result.parse_failure == "entry_point"


def test_entry_point_regex_finds_methods_first():
    assert aspera_entry_point("class A:\n    def method(self):\n        pass\n\ndef main():\n    pass\n") == "method"
    assert aspera_entry_point("x = 1\n") is None


def test_import_lenient_program_drops_library_imports_but_keeps_star_imports_at_the_top():
    answer = ("```python\nfrom aspera.apps_implementation.work_calendar import *\nimport datetime\n\n"
              "def main():\n    from work_calendar import find_events\n    import json\n    return find_events()\n```")
    result = aspera_parse(answer)
    assert same(result.program_no_imports, "from aspera.apps_implementation.work_calendar import *\nimport datetime\n"
                                           "def main():\n    import json\n    return find_events()\n")


def test_an_import_piece_naming_a_library_file_is_dropped_whole_without_a_star():
    answer = f"```python\nimport datetime\nfrom company_directory import find_employee\n\n{MAIN}```"
    assert same(aspera_parse(answer).program_no_imports, MAIN)


def test_no_import_lenient_program_when_the_escaped_code_does_not_parse():
    # ASPERA doubles backslashes before filtering: '\"' becomes '\\"', which ends the string.
    # (Both quote kinds inside, so black keeps the escape; '"a\\"b"' alone black rewrites to
    # 'a"b' without a backslash, and the import-lenient program exists.)
    answer = '```python\ndef main():\n    return "a\\"b\'c"\n```'
    result = aspera_parse(answer)
    assert result.parse_failure is None and result.program_no_imports is None
    rewritten = aspera_parse('```python\ndef main():\n    return "a\\"b"\n```')
    assert same(rewritten.program_no_imports, "def main():\n    return 'a\"b'\n")


def test_backslashes_survive_in_the_import_lenient_program():
    answer = '```python\ndef main():\n    return "a\\nb"\n```'
    assert aspera_parse(answer).program_no_imports == 'def main():\n    return "a\\nb"'


@pytest.mark.parametrize("nested", ["x = " + "1+" * 100_000 + "1", "x = " + "-" * 100_000 + "1"])
def test_a_pathologically_nested_answer_is_a_parser_failure_not_a_crash(nested):
    result = aspera_parse(f"```python\n{nested}\n{MAIN}```")
    assert result.parse_failure == "answer" and result.program == PLACEHOLDER_PROGRAM


def test_call_lines_are_the_matches_of_asperas_pattern_on_random_texts():
    # ASPERA's own regex is the specification; the linear scan must find exactly its matches
    import random

    from primsel.generation.aspera_parser import _CALL_LINE, _call_line_spans

    rng = random.Random(0)
    alphabet = ["a", "b(", "(", ")", " ", "\n", "x", "_1", "\t", ")\n", "\u00a0", "é", "f(x)\n", "  ", "\r\n",
                "\x0b", "#", "1(", '"""']
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert _call_line_spans(text) == [(m.start(), m.end()) for m in _CALL_LINE.finditer(text)], text
        removed = tuple(line for m in _CALL_LINE.finditer(text) for line in m.group(0).rstrip().splitlines())
        assert remove_call_lines(text) == (_CALL_LINE.sub("", text).strip("\n "), removed), text


def test_a_docstring_of_many_unclosed_call_lines_is_extracted_in_linear_time():
    # the case: with the backtracking regex 0.39 s at 8 KB, 6.1 s at 32 KB, 112 s at
    # 128 KB; linear, 128 KB takes a few hundredths of a second (the bound holds at load 15)
    import time

    body = "a(b\n" * (128 * 1024 // 4)
    answer = f'```python\ndef main():\n    """Steps:\n{body}    """\n    return 1\n```'
    start = time.perf_counter()
    code, removed = remove_call_lines(answer)
    assert time.perf_counter() - start < 10.0
    assert removed == () and code == answer.strip("\n ")
    start = time.perf_counter()
    parsed = aspera_parse(answer)
    assert time.perf_counter() - start < 30.0
    assert parsed.entry_point == "main"
