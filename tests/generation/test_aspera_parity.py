"""``primsel extract --mode aspera`` gives the program ASPERA's agent would run.

The answers are built from reference programs with variations (fences with and without the
``python`` tag, prose around them, two blocks, a helper before the function, module-level calls,
a ``__main__`` tail, imports, a prefill, a cut-off); the expected programs come from
``aspera_oracle``, written apart from the implementation (ASPERA's own parser cannot be
installed: it is not published as a package). Programs are compared as syntax trees (ASPERA
formats its output with ``black``, which changes layout only).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from primsel.cli import main as cli_main
from primsel.datasets import load_builtin_tasks, load_tasks
from primsel.generation.extract import extract



def _load_oracle():
    """The helper module beside this file (tests are imported in importlib mode, without
    their directory on sys.path)."""
    spec = importlib.util.spec_from_file_location("aspera_oracle", Path(__file__).with_name("aspera_oracle.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("aspera_oracle", module)
    spec.loader.exec_module(module)
    return module


_oracle = _load_oracle()
PLACEHOLDER, Case, cases = _oracle.PLACEHOLDER, _oracle.Case, _oracle.cases


def expected(case: Case) -> tuple[str | None, str, str]:
    """(parse failure kind, tree of the program ASPERA runs, the function it calls)."""
    if case.program is None:
        return "answer", ast.dump(ast.parse(PLACEHOLDER)), "parser_failed_placeholder_bad_solution"
    if case.entry is None:
        return "entry_point", ast.dump(ast.parse(PLACEHOLDER)), "parser_failed_placeholder_bad_solution"
    return None, ast.dump(ast.parse(case.program)), case.entry


def got(row: dict) -> tuple[str | None, str, str]:
    return row["parse_failure"], ast.dump(ast.parse(row["program"])), row["entry_point"]


def all_cases(tasks) -> list[tuple[str, Case]]:
    return [(t.id, c) for t in tasks for c in cases(t.program)]


def test_every_variation_of_the_builtin_programs_matches_the_rules():
    built = all_cases(load_builtin_tasks())
    assert len(built) == 32 * 14
    wrong = []
    for task_id, case in built:
        found = extract(case.answer, "aspera")
        row = {"parse_failure": found.parse_failure, "program": found.program, "entry_point": found.entry_point}
        if got(row) != expected(case):
            wrong.append((task_id, case.variation))
    assert wrong == []


def test_the_variations_cover_each_outcome():
    kinds = {}
    for _, case in all_cases(load_builtin_tasks()):
        kinds.setdefault(case.variation, set()).add(expected(case)[0])
    assert kinds["fence_bare_with_prose"] == kinds["prefill_with_prose"] == kinds["prefill_line_break"] == {"answer"}
    assert kinds["fence_python"] == {None} and kinds["prefill"] == {None}
    assert kinds["cut_off"] >= {"answer"}


@pytest.mark.asper
def test_extract_cli_matches_aspera_on_at_least_99_percent_of_answers_from_all_250_programs(asper_path, tmp_path,
                                                                                           capsys):
    built = all_cases(load_tasks(asper_path))
    assert len(built) == 250 * 14
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"id": f"{task_id}/{case.variation}", "answer": case.answer}) + "\n"
                               for task_id, case in built))
    out = tmp_path / "programs.jsonl"
    assert cli_main(["extract", "--mode", "aspera", str(answers), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"extracted {sum(expected(c)[0] is None for _, c in built)}/{len(built)}\n"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"{task_id}/{case.variation}" for task_id, case in built]
    same_program = [got(r)[:2] == expected(c)[:2] for r, (_, c) in zip(rows, built)]
    same_entry = [got(r) == expected(c) for r, (_, c) in zip(rows, built)]
    share = sum(same_program) / len(built)
    print(f"\nAST-equal programs: {sum(same_program)}/{len(built)} = {100 * share:.2f}%; "
          f"with the same entry point too: {sum(same_entry)}/{len(built)}")
    assert share >= 0.99, [r["id"] for r, ok in zip(rows, same_program) if not ok][:20]
