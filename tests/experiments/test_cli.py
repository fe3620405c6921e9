"""``primsel run`` end to end on the built-in tasks: output, bad input, a killed run resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from primsel.cli import main as cli_main

SMALL = """
name = "small"
baseline = "bm25"
[grid]
retriever = ["bm25", "prior"]
k = [1, 2]
closure = [false, true]
"""


@pytest.fixture(autouse=True)
def _builtin_tasks(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_writes_cells_and_report_on_builtin_tasks(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "running on the built-in tasks" in err
    exp = tmp_path / "runs" / "small"
    manifest = json.loads((exp / "experiment.json").read_text())
    assert len(manifest["cells"]) == 8 and manifest["data"]["source"] == "builtin"
    assert all((exp / c["id"] / "report.json").is_file() for c in manifest["cells"])
    report = (exp / "report.md").read_text()
    assert report.count("| bm25 |") == 4 and report.count("| prior |") == 4
    assert "Data: the built-in tasks" in report


@pytest.mark.parametrize("text,key", [
    (SMALL + "bogus = [1]\n", "grid.bogus"),
    (SMALL.replace('"prior"]', '"prior", "nope"]'), "grid.retriever[2]"),
    (SMALL.replace("k = [1, 2]", "k = []"), "grid.k"),
    ("colour = 1\n" + SMALL, "colour"),
])
def test_bad_input_exits_2_and_leaves_existing_outputs_alone(tmp_path, capsys, text, key):
    good = tmp_path / "small.toml"
    good.write_text(SMALL)
    out = tmp_path / "runs"
    assert cli_main(["run", str(good), "--out", str(out), "--quiet", "--no-report"]) == 0
    before = snapshot(out)
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    capsys.readouterr()
    assert cli_main(["run", str(bad), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: {key}:" in err
    assert snapshot(out) == before


def test_missing_archive_exits_2(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--data", str(tmp_path / "no.tgz")]) == 2
    assert "no.tgz" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


KILLER = '''
import os
import signal

from primsel.retrieval.base import BaseRetriever


class Killer(BaseRetriever):
    """Kills its own process in fit while the marker file exists; else ranks by id."""

    def __init__(self):
        pass

    def fit(self, library, train_tasks=()):
        if os.path.exists(os.environ["KILLER_MARKER"]):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().fit(library, train_tasks)

    def score(self, queries):
        return {q: {} for q in queries}
'''


def test_killed_process_resumes_without_recomputing(tmp_path):
    (tmp_path / "killer_mod.py").write_text(textwrap.dedent(KILLER))
    marker = tmp_path / "marker"
    marker.write_text("")
    cfg = tmp_path / "kill.toml"
    cfg.write_text('name = "kill"\n[grid]\nretriever = ["bm25", "killer_mod:Killer"]\nk = [1, 2]\n')
    env = {k: v for k, v in os.environ.items() if k != "PRIMSEL_ASPER_BENCH"}
    env.update(PYTHONPATH=str(tmp_path), KILLER_MARKER=str(marker))
    cmd = [sys.executable, "-m", "primsel.cli", "run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == -9
    exp = tmp_path / "runs" / "kill"
    done = {p.parent.name: p.stat().st_mtime_ns for p in exp.glob("*/report.json")}
    assert len(done) == 2                          # the bm25 cells; the killer's were in flight
    marker.unlink()
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "2 of 4 cells already finished" in second.stderr
    assert {name: (exp / name / "report.json").stat().st_mtime_ns for name in done} == done
    assert len(list(exp.glob("*/report.json"))) == 4 and (exp / "report.md").is_file()


def test_reference_generator_cells_execute_in_the_sandbox(tmp_path):
    cfg = tmp_path / "gen.toml"
    cfg.write_text('name = "gen"\nretriever = "bm25"\nk = 3\n[generator]\ntype = "reference"\n')
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"]) == 0
    exp = tmp_path / "runs" / "gen"
    (cell,) = json.loads((exp / "experiment.json").read_text())["cells"]
    report = json.loads((exp / cell["id"] / "report.json").read_text())
    # the reference programs pass every built-in task, whatever was selected
    assert report["success"] == 1.0 and report["status_pass"] == 1.0
    rows = [json.loads(line) for line in (exp / cell["id"] / "tasks.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} == {"pass"} and all(r["program"] for r in rows)
    assert all(r["attribution"] is None for r in rows)
    assert (exp / cell["id"] / "failures.jsonl").read_text() == ""
    assert "success" in (exp / "report.md").read_text()


FITTED: list[tuple[str, ...]] = []


class _BrokenGenerator:
    """Writes a program that raises ValueError; records the training task ids of every fit."""

    def fit(self, library, train_tasks=()):
        FITTED.append(tuple(sorted(t.id for t in train_tasks)))
        return self

    def generate(self, task, docs):
        from primsel.types import Program

        return Program(task_id=task.id, code="def solve():\n    x = 1\n    raise ValueError('no')\n")


def test_failures_are_attributed_and_generators_fit_per_fold(tmp_path):
    from primsel.datasets import load_builtin_tasks
    from primsel.experiments.config import parse_config
    from primsel.experiments.runner import run_experiment
    from primsel.library import Library, with_gold
    from primsel.registry import register
    from primsel.retrieval import fold_assignment

    register("test_broken", kind="generator")(_BrokenGenerator)
    FITTED.clear()
    library = Library.from_simulator()
    tasks = with_gold(load_builtin_tasks(), library)
    cfg = parse_config({"name": "broken", "retriever": "bm25", "k": 2, "folds": 2,
                        "generator": {"type": "test_broken"}})
    result = run_experiment(cfg, tmp_path, tasks=tasks, library=library, workers=1, progress=False)
    d = tmp_path / "broken" / result.cells[0].id
    # one fit per fold, each on the other fold's tasks only
    fold_of = fold_assignment([t.id for t in tasks], 2, 0)
    expected = [tuple(sorted(t for t, f in fold_of.items() if f != fold)) for fold in (0, 1)]
    assert sorted(FITTED) == sorted(expected)
    failures = [json.loads(line) for line in (d / "failures.jsonl").read_text().splitlines()]
    assert [f["task_id"] for f in failures] == [t.id for t in tasks]
    assert {f["error_type"] for f in failures} == {"ValueError"}
    assert {f["line"] for f in failures} == {3}
    report = json.loads((d / "report.json").read_text())
    assert report["success"] == 0.0 and report["status_error"] == 1.0
    assert sum(v for k, v in report.items() if k.startswith("failures_")) == len(tasks)


@pytest.mark.parametrize("reply,error", [
    ({"status": 429, "error_code": "insufficient_quota"}, "QuotaExceededError"),
    ({"status": 401}, "LLMFatalError"),
])
@pytest.mark.parametrize("stage", ["generator", "retriever"])
def test_fatal_llm_errors_stop_the_run_and_keep_finished_cells(tmp_path, capsys, monkeypatch, reply, error, stage):
    from primsel.generation.fake_server import FakeOpenAIServer, Reply

    monkeypatch.setenv("PRIMSEL_TEST_KEY", "k")
    llm = 'model = "m", api_key_env = "PRIMSEL_TEST_KEY", max_retries = 0'
    if stage == "generator":
        grid = f'retriever = "bm25"\n[grid]\ngenerator = [{{type = "reference"}}, {{type = "openai", {llm}}}]\n'
    else:
        grid = f'[generator]\ntype = "reference"\n[grid]\nretriever = ["bm25", {{type = "llm_selector", {llm}}}]\n'
    cfg = tmp_path / "fatal.toml"
    cfg.write_text('name = "fatal"\nk = 3\n' + grid)
    with FakeOpenAIServer(responder=lambda request: Reply(**reply)) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        status = cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"])
        requests = srv.request_count
    assert status == 1
    err = capsys.readouterr().err
    assert f"the LLM endpoint refuses the requests, stopping: {error}" in err
    assert "1 cells computed before it stay in" in err
    exp = tmp_path / "runs" / "fatal"
    first, second = json.loads((exp / "experiment.json").read_text())["cells"]
    assert (exp / first["id"] / "report.json").is_file() and not (exp / second["id"] / "report.json").exists()
    # the client stops at the first fatal answer instead of sending a request per task
    assert 1 <= requests <= 8
    assert not (exp / "report.md").exists()


def test_replay_programs_are_found_next_to_the_experiment_file(tmp_path, monkeypatch):
    from primsel.datasets import load_builtin_tasks

    (tmp_path / "exp").mkdir()
    (tmp_path / "elsewhere").mkdir()
    lines = [json.dumps({"task_id": t.id, "program": t.program}) for t in load_builtin_tasks()]
    (tmp_path / "exp" / "programs.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp_path / "exp" / "replay.toml"
    cfg.write_text('name = "replay"\nretriever = "bm25"\nk = 3\n'
                   '[generator]\ntype = "replay"\nprograms = "programs.jsonl"\n')
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli_main(["run", "../exp/replay.toml", "--out", "runs", "--quiet", "--workers", "1", "--no-report"]) == 0
    (cell,) = json.loads((tmp_path / "elsewhere" / "runs" / "replay" / "experiment.json").read_text())["cells"]
    report = json.loads((tmp_path / "elsewhere" / "runs" / "replay" / cell["id"] / "report.json").read_text())
    assert report["success"] == 1.0 and report["n_tasks"] == len(lines)
