"""The ``primsel verify`` subcommand: rows, summary line, exit statuses, and the full benchmark."""

from __future__ import annotations

import json

import pytest

from primsel.datasets import ENV_VAR, load_builtin_tasks, load_tasks
from primsel.simulator import verify

NOOP = "def noop():\n    return None"
#: Asper-Bench tasks that a program doing nothing passes (their EPs accept an unchanged world).
NOOP_PASSES = ["106", "110", "146", "179", "185", "217", "232"]


def write_jsonl(path, rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def no_archive(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_builtin_reference_programs_pass(no_archive, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--out", str(out)]) == 0
    captured = capsys.readouterr()
    n = len(load_builtin_tasks())
    assert captured.out.splitlines()[-1] == f"passed {n}/{n}"
    assert "built-in tasks" in captured.err
    rows = read_rows(out)
    assert [r["task_id"] for r in rows] == [t.id for t in load_builtin_tasks()]
    assert all(list(r) == list(verify.ROW_KEYS) and r["status"] == "pass" for r in rows)


def test_programs_file_rows_in_input_order(no_archive, tmp_path, capsys):
    builtin = load_builtin_tasks()
    programs = write_jsonl(
        tmp_path / "programs.jsonl",
        [
            {"task_id": builtin[1].id, "program": "def give_up():\n    assert False, 'no'"},
            {"task_id": "no-such-task", "program": NOOP},
            "",
            {"task_id": builtin[0].id, "program": builtin[0].program},
            {"task_id": builtin[0].id, "program": None},
            {"task_id": builtin[0].id, "program": "def broken(:\n    pass"},
        ],
    )
    assert verify.run(["--programs", programs, "--timeout", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "passed 1/5"
    rows = [json.loads(line) for line in lines[:-1]]
    assert [(r["task_id"], r["status"], r["error_type"]) for r in rows] == [
        (builtin[1].id, "fail", "AssertionError"),
        ("no-such-task", "error", "UnknownTask"),
        (builtin[0].id, "pass", None),
        (builtin[0].id, "no_program", None),
        (builtin[0].id, "error", "SyntaxError"),
    ]
    assert (rows[0]["message"], rows[0]["line"]) == ("no", 2)
    assert rows[4]["line"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json}\n", "line 1: not valid JSON"),
        ('{"task_id": "1", "program": "x"}\n[1, 2]\n', "line 2: expected a JSON object"),
        ('{"program": "def f(): pass"}\n', "line 1: 'task_id' must be a non-empty string"),
        ('{"task_id": "1"}\n', "line 1: missing 'program'"),
        ('{"task_id": "1", "program": 3}\n', "line 1: 'program' must be a string or null"),
    ],
)
def test_bad_programs_file_exits_2(no_archive, tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert verify.run(["--programs", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_bad_arguments_exit_2(no_archive, tmp_path, capsys):
    assert verify.run(["--programs", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read --programs" in capsys.readouterr().err
    assert verify.run(["--data", str(tmp_path / "missing.tgz")]) == 2
    assert "Asper-Bench archive not found" in capsys.readouterr().err
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"junk")
    assert verify.run(["--data", str(junk)]) == 2
    assert "sha256" in capsys.readouterr().err
    assert verify.run(["--workers", "0"]) == 2
    assert verify.run(["--timeout", "0"]) == 2


def test_dispatch_through_the_primsel_command(no_archive, tmp_path, capsys):
    from primsel import cli

    try:
        cli.build_parser()
    except ModuleNotFoundError as exc:  # other subcommands not installed in this checkout
        pytest.skip(f"primsel command incomplete: {exc}")
    assert cli.main(["verify", "--programs", str(tmp_path / "missing.jsonl")]) == 2
    assert cli.main(["verify", "--workers", "1"]) == 0
    n = len(load_builtin_tasks())
    assert capsys.readouterr().out.splitlines()[-1] == f"passed {n}/{n}"


@pytest.mark.asper
def test_all_reference_programs_pass(asper_path, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--data", str(asper_path), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "passed 250/250"
    rows = read_rows(out)
    assert [r["task_id"] for r in rows] == [str(i) for i in range(1, 251)]
    assert {r["status"] for r in rows} == {"pass"}


@pytest.mark.asper
def test_do_nothing_program_passes_only_tasks_that_accept_no_change(asper_path, tmp_path, capsys):
    ids = [task.id for task in load_tasks(asper_path)]
    programs = write_jsonl(tmp_path / "noop.jsonl", [{"task_id": i, "program": NOOP} for i in ids])
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--data", str(asper_path), "--programs", programs, "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"passed {len(NOOP_PASSES)}/250"
    rows = read_rows(out)
    assert [r["task_id"] for r in rows if r["status"] == "pass"] == NOOP_PASSES
    assert all(r["status"] in ("fail", "error") for r in rows if r["task_id"] not in NOOP_PASSES)
