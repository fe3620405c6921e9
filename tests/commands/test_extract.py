"""``primsel extract``: rows in input order, the summary line, both modes, bad input."""

from __future__ import annotations

import json

import pytest

from primsel.cli import main as cli_main

F = "def plan():\n    return 1\n"


def write(path, *records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_rows_follow_the_input_and_the_summary_on_stderr_counts_programs(tmp_path, capsys):
    answers = write(tmp_path / "a.jsonl",
                    {"id": "b", "answer": f"```python\n{F}```\nprint(plan())", "finish_reason": "stop"},
                    "",
                    {"id": 7, "answer": "I cannot help."},
                    {"id": "c", "answer": f"```python\n{F}", "finish_reason": "length"},
                    {"id": "d", "answer": f"```python\n{F}\nplan()\n```"})
    assert cli_main(["extract", str(answers)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "extracted 2/4"
    rows = [json.loads(line) for line in captured.out.splitlines()]   # stdout holds the rows alone
    assert [r["id"] for r in rows] == ["b", 7, "c", "d"]
    assert [r["status"] for r in rows] == ["ok", "no_program", "truncated", "ok"]
    assert list(rows[0]) == ["id", "task_id", "status", "program", "entry_point", "dropped_lines", "parse_failure",
                             "async_entry"]
    assert [r["task_id"] for r in rows] == ["b", "7", "c", "d"]
    assert rows[0]["program"] == F and rows[0]["entry_point"] == "plan" and rows[0]["dropped_lines"] == []
    assert rows[3]["program"] == F + "\n" and rows[3]["dropped_lines"] == ["plan()"]
    assert rows[1]["program"] is None


def test_aspera_mode_gives_the_placeholder_and_counts_it_as_not_extracted(tmp_path, capsys):
    answers = write(tmp_path / "a.jsonl", {"id": "1", "answer": "Sorry."},
                    {"id": "2", "answer": f"```python\ndef helper():\n    pass\n\n{F}\nplan()\n```"})
    out = tmp_path / "out.jsonl"
    assert cli_main(["extract", "--mode", "aspera", str(answers), "--out", str(out)]) == 0
    assert capsys.readouterr().out == "extracted 1/2\n"
    first, second = (json.loads(line) for line in out.read_text().splitlines())
    assert (first["status"], first["parse_failure"], first["entry_point"]) == (
        "ok", "answer", "parser_failed_placeholder_bad_solution")
    assert (second["program"], second["dropped_lines"], second["parse_failure"]) == (F.strip(), ["plan()"], None)


def test_entry_chooses_the_block(tmp_path, capsys):
    other = "def other():\n    return 0\n"
    answers = write(tmp_path / "a.jsonl", {"id": "1", "answer": f"```python\n{F}```\n```python\n{other}```"})
    assert cli_main(["extract", "--entry", "plan", str(answers)]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["program"] == F


@pytest.mark.parametrize(("line", "problem"), [
    ("{not json", "line 2 column 2: not valid JSON (Expecting property name enclosed in double quotes)"),
    ('["a"]', "line 2: expected a JSON object"),
    ('{"answer": "x"}', "line 2: 'id' must be"),
    ('{"id": "1"}', "line 2: missing 'answer'"),
    ('{"id": "1", "answer": 3}', "line 2: 'answer' must be a string or null"),
    ('{"id": "1", "answer": "x", "finish_reason": 1}', "line 2: 'finish_reason' must be"),
])
def test_a_bad_line_is_named_and_left_out_and_the_good_lines_get_their_rows(tmp_path, capsys, line, problem):
    answers = write(tmp_path / "a.jsonl", {"id": "0", "answer": F}, line, {"id": "2", "answer": "no code"})
    assert cli_main(["extract", str(answers)]) == 1
    captured = capsys.readouterr()
    assert f"primsel extract: {answers} {problem}" in captured.err and "line left out" in captured.err
    assert captured.err.splitlines()[-1] == "extracted 1/2 (1 bad lines left out)"
    assert [json.loads(x)["task_id"] for x in captured.out.splitlines()] == ["0", "2"]


def test_missing_input_and_bad_mode_exit_2(tmp_path, capsys):
    assert cli_main(["extract", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["extract", "--mode", "fast", str(tmp_path / "x.jsonl")])
    assert exc.value.code == 2


def test_without_entry_the_function_the_answer_calls_is_the_entry_point(tmp_path, capsys):
    code = "def helper():\n    return 1\n\n\ndef main():\n    return helper()\n\n\nprint(main())\n"
    tail = code.replace("print(main())", 'if __name__ == "__main__":\n    main()')
    answers = write(tmp_path / "a.jsonl", {"id": "1", "answer": f"```python\n{code}```"},
                    {"id": "2", "answer": f"```python\n{tail}```"},
                    {"id": "3", "answer": "```python\ndef helper():\n    return 1\n\n\ndef main():\n    return 2\n```"})
    assert cli_main(["extract", str(answers)]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    # the answer calls main(): main is the entry point (the first def, helper, was picked before)
    assert [r["entry_point"] for r in rows] == ["main", "main", "helper"]
    assert rows[0]["dropped_lines"] == ["print(main())"]
    assert cli_main(["extract", "--entry", "helper", str(answers)]) == 0   # a requested name wins
    assert [json.loads(x)["entry_point"] for x in capsys.readouterr().out.splitlines()] == ["helper"] * 3


def test_extract_output_pipes_into_verify(tmp_path, capsys, monkeypatch):
    from primsel.datasets import load_builtin_tasks
    from primsel.types import entry_point

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    first, second, third = load_builtin_tasks()[:3]
    name = entry_point(first.program)
    helper = "def helper():\n    return None\n\n\n"
    answers = write(tmp_path / "answers.jsonl",
                    {"id": first.id, "answer": f"```python\n{helper}{first.program}\n\nprint({name}())\n```"},
                    {"id": second.id, "answer": f"```python\n{second.program}", "finish_reason": "length"},
                    {"id": int(third.id) if third.id.isdecimal() else third.id, "answer": "I cannot do that."})
    extracted = tmp_path / "programs.jsonl"
    assert cli_main(["extract", str(answers), "--out", str(extracted)]) == 0
    rows = [json.loads(x) for x in extracted.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "truncated", "no_program"]
    assert rows[0]["entry_point"] == name          # the function the answer calls, not helper
    capsys.readouterr()
    assert cli_main(["verify", "--programs", str(extracted), "--timeout", "60"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "passed 1/3, strict 1/3"
    verdicts = [json.loads(x) for x in captured.out.splitlines()]
    assert [(v["task_id"], v["status"], v["error_type"]) for v in verdicts] == [
        (first.id, "pass", None), (second.id, "error", "TruncatedAnswer"), (third.id, "no_program", None)]


def test_the_rows_redirected_to_a_file_are_a_programs_file_as_they_are(tmp_path, capsys):
    # `primsel extract a.jsonl > p.jsonl`: the summary must not end up in the file as a last line
    answers = write(tmp_path / "a.jsonl", {"id": "1", "answer": F}, {"id": "2", "answer": "no code"})
    assert cli_main(["extract", str(answers)]) == 0
    captured = capsys.readouterr()
    assert [json.loads(x)["task_id"] for x in captured.out.splitlines()] == ["1", "2"]
    assert captured.err == "extracted 1/2\n"


def test_an_input_that_is_not_utf8_exits_2_naming_the_file_and_the_byte(tmp_path, capsys):
    answers = tmp_path / "a.jsonl"
    answers.write_bytes(b'{"id": "1", "answer": "x"}\n{"id": "2", "answer": "caf\xe9"}\n')
    assert cli_main(["extract", str(answers)]) == 2
    # line 2 starts at byte 27; '{"id": "2", "answer": "caf' before the 0xe9 is 26 bytes: 27 + 26
    assert capsys.readouterr().err == (
        f"primsel extract: error: {answers}: not UTF-8 text: invalid continuation byte at byte 53 "
        "(line 2)\n")
