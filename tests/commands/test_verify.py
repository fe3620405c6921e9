"""The ``primsel verify`` subcommand: rows, summary line, exit statuses, and the full benchmark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from primsel.commands import verify
from primsel.datasets import ENV_VAR, load_builtin_tasks, load_tasks
from primsel.eval.explain import EXPLAIN_KEYS

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
    assert captured.out.splitlines()[-1] == f"passed {n}/{n}, strict {n}/{n}"
    assert "built-in tasks" in captured.err
    rows = read_rows(out)
    assert [r["task_id"] for r in rows] == [t.id for t in load_builtin_tasks()]
    assert all(list(r) == list(verify.ROW_KEYS) and r["status"] == "pass" for r in rows)
    assert {(r["collateral"], r["strict"]) for r in rows} == {(0, True)}


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
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "passed 1/5, strict 1/5"
    rows = [json.loads(line) for line in captured.out.splitlines()]
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
        ("{not json}\n", "line 1 column 2: not valid JSON"),
        ("[1, 2]\n", "line 1: expected a JSON object"),
        ('{"program": "def f(): pass"}\n', "line 1: 'task_id' must be a non-empty string"),
        ('{"task_id": "1"}\n', "line 1: missing 'program'"),
        ('{"task_id": "1", "program": 3}\n', "line 1: 'program' must be a string or null"),
    ],
)
def test_a_bad_programs_line_is_named_and_left_out_and_the_others_run(no_archive, tmp_path, capsys, content,
                                                                       message):
    from primsel.datasets import load_builtin_tasks

    task = load_builtin_tasks()[0]
    path = tmp_path / "bad.jsonl"
    path.write_text(content + json.dumps({"task_id": task.id, "program": task.program}) + "\n")
    assert verify.run(["--programs", str(path), "--timeout", "60"]) == 1
    captured = capsys.readouterr()
    assert f"primsel verify: {path} {message}" in captured.err and "line left out" in captured.err
    assert captured.err.splitlines()[-1] == "passed 1/1, strict 1/1 (1 bad lines left out)"
    lines = captured.out.splitlines()
    assert [(json.loads(x)["task_id"], json.loads(x)["status"]) for x in lines] == [(task.id, "pass")]


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


@pytest.mark.parametrize("value", ["inf", "1e300", "nan", "-1", "86401"])
def test_unusable_timeout_exits_2_with_a_message(no_archive, capsys, value):
    assert verify.run(["--timeout", value]) == 2
    err = capsys.readouterr().err
    assert "--timeout must be a finite number of seconds in (0, 86400]" in err
    assert "Traceback" not in err


def test_too_many_workers_are_capped_with_a_note(no_archive, tmp_path, capsys):
    builtin = load_builtin_tasks()[0]
    programs = write_jsonl(tmp_path / "one.jsonl", [{"task_id": builtin.id, "program": builtin.program}])
    assert verify.run(["--programs", programs, "--workers", "1000"]) == 0  # one job: one worker starts
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == "passed 1/1, strict 1/1"
    cpus = os.cpu_count() or 1
    assert f"--workers 1000 capped at {4 * cpus} (4 per CPU)" in captured.err


def test_rows_are_valid_utf8_json_with_lone_surrogates(no_archive, tmp_path, capsys):
    builtin = load_builtin_tasks()[0]
    programs = tmp_path / "surrogates.jsonl"
    programs.write_text(
        "\n".join(
            json.dumps(row)  # ASCII JSON with \ud800 escapes: lone surrogates once decoded
            for row in (
                {"task_id": builtin.id, "program": "def f():\n    raise ValueError('x' + chr(0xD800))\n"},
                {"task_id": builtin.id, "program": "def f():\n    return 1  # \ud800\n"},
                {"task_id": "no-such-\ud800", "program": NOOP},
            )
        )
    )
    assert verify.run(["--programs", str(programs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        json.dumps(row, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    assert [(r["status"], r["error_type"]) for r in rows] == [
        ("error", "ValueError"),
        ("error", "UnicodeEncodeError"),
        ("error", "UnknownTask"),
    ]
    assert (rows[0]["message"], rows[2]["task_id"]) == ("x?", "no-such-?")


INTERRUPTIBLE = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from primsel.commands import verify\n"
    "sys.exit(verify.run(sys.argv[1:]))\n"
)


def test_ctrl_c_exits_130_with_one_line_and_keeps_written_rows(no_archive, tmp_path):
    builtin = load_builtin_tasks()[0]
    programs = write_jsonl(
        tmp_path / "programs.jsonl",
        [
            {"task_id": builtin.id, "program": builtin.program},
            {"task_id": builtin.id, "program": "def wait():\n    import time\n    time.sleep(60)\n"},
        ],
    )
    out = tmp_path / "rows.jsonl"
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTIBLE, "--programs", programs, "--workers", "1", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "primsel verify: interrupted; the rows already written are kept"
    assert "Traceback" not in stderr
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["pass"]


def test_dispatch_through_the_primsel_command(no_archive, tmp_path, capsys):
    from primsel import cli

    try:
        cli.build_parser()
    except ModuleNotFoundError as exc:  # other subcommands not installed in this checkout
        pytest.skip(f"primsel command incomplete: {exc}")
    assert cli.main(["verify", "--programs", str(tmp_path / "missing.jsonl")]) == 2
    assert cli.main(["verify", "--workers", "1"]) == 0
    n = len(load_builtin_tasks())
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == f"passed {n}/{n}, strict {n}/{n}"
    assert [json.loads(line)["status"] for line in captured.out.splitlines()] == ["pass"] * n


@pytest.mark.asper
def test_all_reference_programs_pass(asper_path, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--data", str(asper_path), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "passed 250/250, strict 250/250"
    rows = read_rows(out)
    assert [r["task_id"] for r in rows] == [str(i) for i in range(1, 251)]
    assert {r["status"] for r in rows} == {"pass"}
    # the collateral audit: every reference program, compared with itself, removes or changes
    # nothing the reference does not
    assert {(r["collateral"], r["strict"]) for r in rows} == {(0, True)}


@pytest.mark.asper
def test_do_nothing_program_passes_only_tasks_that_accept_no_change(asper_path, tmp_path, capsys):
    ids = [task.id for task in load_tasks(asper_path)]
    programs = write_jsonl(tmp_path / "noop.jsonl", [{"task_id": i, "program": NOOP} for i in ids])
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--data", str(asper_path), "--programs", programs, "--out", str(out)]) == 0
    n = len(NOOP_PASSES)
    assert capsys.readouterr().out.splitlines()[-1] == f"passed {n}/250, strict {n}/250"
    rows = read_rows(out)
    assert [r["task_id"] for r in rows if r["status"] == "pass"] == NOOP_PASSES
    assert all(r["status"] in ("fail", "error") for r in rows if r["task_id"] not in NOOP_PASSES)


def test_explain_adds_the_divergence_to_rows_that_did_not_pass(no_archive, tmp_path, capsys):
    builtin = load_builtin_tasks()
    reference = builtin[0].program  # "... combine(day, time_by_hm(2, 0, "pm")) ..."
    assert 'time_by_hm(2, 0, "pm")' in reference
    wrong_hour = reference.replace('time_by_hm(2, 0, "pm")', 'time_by_hm(3, 0, "pm")')
    line = next(i for i, text in enumerate(wrong_hour.splitlines(), start=1) if "time_by_hm(3" in text)
    programs = write_jsonl(tmp_path / "programs.jsonl", [
        {"task_id": builtin[0].id, "program": wrong_hour},
        {"task_id": builtin[0].id, "program": reference},
        {"task_id": builtin[1].id, "program": None},
        {"task_id": "no-such-task", "program": NOOP},
    ])
    out = tmp_path / "rows.jsonl"
    assert verify.run(["--programs", programs, "--out", str(out), "--explain"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "passed 1/4, strict 1/4"
    wrong, right, missing, unknown = read_rows(out)
    assert list(wrong) == [*verify.ROW_KEYS, *EXPLAIN_KEYS]
    assert (wrong["status"], wrong["divergence_line"], wrong["category"]) == ("fail", line, "wrong_arguments")
    assert (wrong["expected_call"], wrong["actual_call"]) == (
        "time_utils.time_by_hm(2, 0, 'pm')", "time_utils.time_by_hm(3, 0, 'pm')")
    assert list(right) == list(verify.ROW_KEYS)  # pass rows are unchanged
    assert (missing["status"], missing["category"], missing["divergence_line"]) == ("no_program", "no_program", None)
    assert (unknown["error_type"], unknown["category"]) == ("UnknownTask", None)
