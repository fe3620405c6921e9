"""Pipes and encodings: a closed stdout ends a command quietly with status 141 (the shell's
128 + SIGPIPE), summaries go to stderr while stdout carries data, and a file that is not UTF-8
exits 2 naming the file and the byte offset."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from primsel.cli import main

FIXTURES = Path(__file__).parents[1] / "experiments" / "fixtures"


class ClosedPipe:
    """A stdout whose reader has gone: every write raises BrokenPipeError."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_stdout_ends_the_command_quietly(monkeypatch, capsys):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["tasks", "--json"]) == 141
    err = capsys.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err


def run_with_stdout_closed(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m primsel ARGS`` with its stdout a pipe whose reader closed it at once, as
    ``| head`` does once it has its lines."""
    env = {k: v for k, v in os.environ.items() if k != "PRIMSEL_ASPER_BENCH"}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    process = subprocess.Popen([sys.executable, "-m", "primsel", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    process.stdout.close()
    err = process.stderr.read().decode()
    process.wait(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, "", err)


@pytest.mark.parametrize("args", [("tasks", "--json"), ("verify", "--workers", "1")])
def test_a_reader_that_closes_the_pipe_gets_no_traceback(args):
    done = run_with_stdout_closed(*args)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "Broken pipe" not in done.stderr


def test_a_toml_file_that_is_not_utf8_exits_2_naming_the_file_and_the_byte(tmp_path, capsys):
    config = tmp_path / "exp.toml"
    config.write_bytes(b'name = "x"\nnote = "\xff"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    # line 2 starts at byte 11; 'note = "' is 8 bytes: the 0xff is byte 19
    assert capsys.readouterr().err == (
        f"primsel run: error: {config}: not UTF-8 text: invalid start byte at byte 19 (line 2)\n")


def test_a_programs_file_that_is_not_utf8_exits_2_naming_the_byte(tmp_path, capsys):
    programs = tmp_path / "p.jsonl"
    programs.write_bytes(b'{"task_id": "builtin-01", "program": "\xc3"}\n')
    assert main(["verify", "--programs", str(programs)]) == 2
    assert capsys.readouterr().err.endswith(
        f"error: --programs {programs}: not UTF-8 text: invalid continuation byte at byte 38 "
        "(line 1)\n")


def test_a_run_folder_whose_task_rows_are_not_utf8_exits_2_naming_the_file(tmp_path, capsys):
    run = tmp_path / "typed_records"
    shutil.copytree(FIXTURES / "typed_records", run)
    rows = run / "1f6fe9114bc7" / "tasks.jsonl"
    text = rows.read_bytes()
    rows.write_bytes(text + b'{"task_id": "\x80"}\n')
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{rows}: not UTF-8 text: invalid start byte at byte {len(text) + 13} " in err
    assert "Traceback" not in err


def test_a_report_json_that_is_not_utf8_is_named_with_its_byte(tmp_path, capsys):
    run = tmp_path / "typed_records"
    shutil.copytree(FIXTURES / "typed_records", run)
    report = run / "1f6fe9114bc7" / "report.json"
    data = json.loads(report.read_text(encoding="utf-8"))
    data["note"] = "\N{LATIN SMALL LETTER E WITH ACUTE}"
    text = json.dumps(data, ensure_ascii=False).encode("latin-1")
    report.write_bytes(text)
    assert main(["report", str(run), "--format", "csv"]) == 2
    offset = text.index(b"\xe9")
    assert f"{report}: not UTF-8 text: invalid continuation byte at byte {offset} (line 1)" in (
        capsys.readouterr().err)
