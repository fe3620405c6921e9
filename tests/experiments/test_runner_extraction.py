"""The runner with an extraction mode: recorded per cell, ASPERA's figures, async entry points,
ASPERA's import-lenient re-run, parser failures (built-in tasks, replay generator)."""

from __future__ import annotations

import json

import pytest

from primsel.datasets import load_builtin_tasks
from primsel.reporting import write_report
from primsel.experiments.config import ConfigError, parse_config
from primsel.experiments.runner import run_experiment
from primsel.library import with_gold
from primsel.simulator.library import build_library

LIBRARY = build_library()
TASKS = with_gold(load_builtin_tasks()[:4], LIBRARY)


def answers(tmp_path, texts):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"task_id": t.id, "program": text}) + "\n" for t, text in zip(TASKS, texts)))
    return path


def run(tmp_path, texts, extraction):
    cfg = parse_config({"name": "x", "retriever": "bm25", "k": 5, "folds": 2,
                        "generator": {"type": "replay", "programs": str(answers(tmp_path, texts)),
                                      "extraction": extraction}})
    result = run_experiment(cfg, tmp_path / "runs", tasks=TASKS, library=LIBRARY, progress=False,
                            use_cache=False, workers=1)
    cell = result.directory / result.cells[0].id
    rows = {r["task_id"]: r for r in map(json.loads, (cell / "tasks.jsonl").read_text().splitlines())}
    return result, cell, rows


def fenced(text):
    return f"Here you go.\n```python\n{text}```\n"


@pytest.mark.parametrize("extraction", ["primsel", "aspera"])
def test_mode_is_recorded_and_aspera_s_figures_reported(tmp_path, extraction):
    p = [t.program for t in TASKS]
    texts = [
        fenced(p[0] + f"\nprint({TASKS[0].entry_point}())\n"),                           # a module-level call
        fenced("from work_calendar import find_events\n\n" + p[1]),                      # a bad import
        fenced(p[2].replace(f"def {TASKS[2].entry_point}(", f"async def {TASKS[2].entry_point}(", 1)),
        "```\nI cannot do that.\n```\n",                                                # no code
    ]
    result, cell, rows = run(tmp_path, texts, extraction)
    config = json.loads((cell / "config.json").read_text())
    report = json.loads((cell / "report.json").read_text())
    assert config["extraction"] == report["extraction"] == extraction
    assert {r["extraction"] for r in rows.values()} == {extraction}
    first, second, third, fourth = (rows[t.id] for t in TASKS)

    assert first["status"] == "pass"
    assert first["dropped_lines"] == [f"print({TASKS[0].entry_point}())"]

    assert (second["status"], second["error_type"], second["import_lenient_status"]) == (
        "error", "ModuleNotFoundError", "pass")

    if extraction == "primsel":
        assert (third["status"], third["error_type"]) == ("error", "AsyncEntryPoint")
        assert (third["attribution"]["category"], third["error_type"]) == ("runtime_error", "AsyncEntryPoint")
        assert (fourth["status"], fourth["parse_failure"]) == ("no_program", None)
        # 4 tasks, 1 passed; 3 errors: none a solution error or a hand-back, 1 bad import
        parser_failures, evaluated, errors = 1, 4, 3
    else:
        # ASPERA cuts no "async def" and finds no function to call: not run, not evaluated
        assert (third["parse_failure"], third["status"]) == ("entry_point", "no_program")
        assert fourth["parse_failure"] == "answer" and fourth["status"] != "pass"
        assert fourth["attribution"]["stage"] == "extraction"
        parser_failures, evaluated, errors = 2, 3, 2
    assert report["success"] == 0.25
    assert report["parser_failure_rate"] == 100 * parser_failures / 4
    assert report["score"] == pytest.approx(100 * 1 / evaluated)
    assert report["import_lenient_score"] == pytest.approx(100 * 2 / evaluated)
    assert report["bad_import_error_rate"] == pytest.approx(100 * 1 / errors)
    assert report["primitives_selection_macro_f1"] is not None

    write_report(result.directory)
    text = (result.directory / "report.md").read_text()
    assert "## ASPERA's figures" in text and f"| {extraction} |" in text


def test_reference_generator_records_no_extraction(tmp_path):
    cfg = parse_config({"name": "r", "retriever": "bm25", "k": 5, "folds": 2, "generator": {"type": "reference"}})
    result = run_experiment(cfg, tmp_path / "runs", tasks=TASKS, library=LIBRARY, progress=False,
                            use_cache=False, workers=1)
    report = json.loads((result.directory / result.cells[0].id / "report.json").read_text())
    assert report["extraction"] is None and report["score"] == 100.0


def test_an_unknown_extraction_mode_is_a_config_error(tmp_path):
    path = answers(tmp_path, ["x"] * 4)
    with pytest.raises(ConfigError, match=r"generator: cannot build generator .*extraction must be one of"):
        parse_config({"name": "x", "retriever": "bm25",
                      "generator": {"type": "replay", "programs": str(path), "extraction": "fast"}})
    with pytest.raises(ConfigError, match="generator: cannot build generator"):
        parse_config({"name": "x", "retriever": "bm25",
                      "generator": {"type": "openai", "model": "m", "extraction": "ASPERA"}})


def test_the_aspera_reproduction_uses_aspera_s_extraction():
    from pathlib import Path

    from primsel.experiments.config import load_config
    from primsel.registry import build

    path = Path(__file__).resolve().parents[2] / "experiments" / "aspera_reproduction.toml"
    generator = load_config(path).base["generator"]
    assert "extraction" not in generator and build(generator, "generator").extraction == "aspera"
