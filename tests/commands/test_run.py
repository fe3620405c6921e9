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


@pytest.mark.slow
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
    # a row per cell, one per ranking in the table of ties and one in the recall/tokens frontier
    # table; the leaderboard has one row per configuration (the baseline's named "bm25 (baseline)")
    assert report.count("| bm25 |") == 4 + 2 and report.count("| prior |") == 4 + 2 + 1
    assert report.count("| bm25 (baseline) |") == 1
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


@pytest.mark.slow
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
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.registry import register
    from primsel.retrieval import fold_assignment

    register("test_broken", kind="generator")(_BrokenGenerator)
    FITTED.clear()
    library = build_library()
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
    from primsel.testing.fake_server import FakeOpenAIServer, Reply

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


@pytest.mark.slow
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


def _closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["generator", "retriever"])
def test_an_unreachable_endpoint_stops_the_run_and_the_fixed_endpoint_resumes_it(tmp_path, capsys, monkeypatch, stage):
    from primsel.testing.fake_server import FakeOpenAIServer

    llm = 'model = "m", max_retries = 1, backoff_s = 0.01'
    if stage == "generator":
        grid = f'retriever = "bm25"\n[grid]\ngenerator = [{{type = "reference"}}, {{type = "openai", {llm}}}]\n'
    else:
        grid = f'[generator]\ntype = "reference"\n[grid]\nretriever = ["bm25", {{type = "llm_selector", {llm}}}]\n'
    cfg = tmp_path / "down.toml"
    cfg.write_text('name = "down"\nk = 3\n' + grid)
    url = _closed_port_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    args = ["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"]
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    assert f"the LLM endpoint cannot be reached, stopping: cannot connect to the LLM endpoint at {url}" in err
    assert "1 cells computed before it stay in" in err and "run the same command again to resume" in err
    exp = tmp_path / "runs" / "down"
    first, second = json.loads((exp / "experiment.json").read_text())["cells"]
    assert (exp / first["id"] / "report.json").is_file() and not (exp / second["id"] / "report.json").exists()
    with FakeOpenAIServer() as srv:     # the endpoint is back: the same command finishes the run
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        assert cli_main(args) == 0
        assert srv.request_count > 0
    assert "1 of 2 cells already finished" in capsys.readouterr().err
    assert json.loads((exp / second["id"] / "report.json").read_text())["complete"] is True


@pytest.mark.slow
def test_llm_errors_leave_the_cell_incomplete_until_a_run_gets_every_answer(tmp_path, capsys, monkeypatch):
    from primsel.testing.fake_server import FakeOpenAIServer, Reply

    cfg = tmp_path / "flaky.toml"
    cfg.write_text('name = "flaky"\nretriever = "bm25"\nk = 3\n'
                   '[generator]\ntype = "openai"\nmodel = "m"\nmax_retries = 0\nexamples = 0\n')
    args = ["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"]
    fail_first = {"n": 0}

    def responder(request):       # the first 5 requests fail, the others get an answer
        fail_first["n"] += 1
        return Reply(status=503) if fail_first["n"] <= 5 else Reply(content="no code here")

    with FakeOpenAIServer(responder=responder) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        assert cli_main(args) == 0
        err = capsys.readouterr().err
        (cell,) = json.loads((tmp_path / "runs" / "flaky" / "experiment.json").read_text())["cells"]
        d = tmp_path / "runs" / "flaky" / cell["id"]
        report = json.loads((d / "report.json").read_text())
        assert report["complete"] is False and report["incomplete_tasks"] == 5.0
        assert f"1 cells are incomplete (LLM requests failed after their retries: {cell['id']})" in err
        assert "*incomplete*" in (tmp_path / "runs" / "flaky" / "report.md").read_text()
        sent = srv.request_count
        assert cli_main(args) == 0       # recomputed: only the 5 failed requests are sent again
        assert srv.request_count == sent + 5
        assert "recomputing 1 incomplete cells" in capsys.readouterr().err
        report = json.loads((d / "report.json").read_text())
        assert report["complete"] is True and report["status_no_program"] == 1.0
        assert cli_main(args) == 0       # finished: nothing is sent
        assert srv.request_count == sent + 5


def test_an_unwritable_output_directory_exits_2(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli_main(["run", str(cfg), "--out", str(blocker / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"primsel run: error: {blocker} is a file, not a directory: cannot create " \
           f"{blocker / 'runs' / 'small'} under it" in err
    assert "Traceback" not in err and "built-in tasks" not in err  # checked before loading data


def test_an_output_path_that_is_a_file_is_named_plainly(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "small").write_text("keep\n")
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"primsel run: error: {tmp_path / 'runs' / 'small'} is a file, not a directory" in err
    assert "File exists" not in err and (tmp_path / "runs" / "small").read_text() == "keep\n"


def test_a_bad_data_path_of_the_experiment_file_names_the_file_not_the_flag(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text('data = "no.tgz"\n' + SMALL)
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"Asper-Bench archive not found: {tmp_path / 'no.tgz'} (from the 'data' key of {cfg})" in err
    assert "--data" not in err and not (tmp_path / "runs").exists()
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--data", str(tmp_path / "other.tgz")]) == 2
    assert f"{tmp_path / 'other.tgz'} (from --data)" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    from primsel.experiments import runner

    def interrupted(*args, **kwargs):
        from types import SimpleNamespace

        kwargs["on_cell"](SimpleNamespace(id="c1"), {})     # one cell finished before the interrupt
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_experiment", interrupted)
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"primsel run: interrupted; 1 cells computed before it stay in {tmp_path / 'runs' / 'small'}; "
                   "run the same command again to resume")


HOSTILE = {
    "builtin-01": "def plan():\n    import os\n    os.system('true')\n",
    "builtin-02": "def plan():\n    x = 1\n    open('out.txt', 'w').write('x')\n",
    "builtin-03": "def plan():\n    raise ValueError(chr(0xd800))\n",
    # nesting too deep for Python's parser: MemoryError from ast.parse, not a crash of the run
    "builtin-04": "def plan():\n    return " + "-" * 100_000 + "1\n",
    "builtin-05": "def plan():\n    return " + "1+" * 100_000 + "1\n",
}


def test_blocked_operations_and_lone_surrogates_in_replayed_programs(tmp_path, capsys):
    lines = [json.dumps({"task_id": t, "program": p}) for t, p in HOSTILE.items()]
    (tmp_path / "hostile.jsonl").write_text("\n".join(lines) + "\n")
    cfg = tmp_path / "hostile.toml"
    cfg.write_text('name = "hostile"\nretriever = "bm25"\nk = 5\n'
                   '[generator]\ntype = "replay"\nprograms = "hostile.jsonl"\n')
    args = ["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet", "--workers", "1"]
    assert cli_main(args) == 0
    exp = tmp_path / "runs" / "hostile"
    (cell,) = json.loads((exp / "experiment.json").read_text())["cells"]
    d = exp / cell["id"]
    assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    failures = {f["task_id"]: f for f in map(json.loads, (d / "failures.jsonl").read_text().splitlines())}
    # a program that raised is a run-time error at its line, whatever the retrieval missed
    for task_id, line in (("builtin-01", 3), ("builtin-02", 3)):
        f = failures[task_id]
        assert (f["stage"], f["category"], f["error_type"], f["line"]) == ("execution", "runtime_error", "PermissionError", line), f
        assert "missed_gold" in f and "missing_gold" in f
    f = failures["builtin-03"]
    assert (f["category"], f["error_type"], f["line"]) == ("runtime_error", "ValueError", 2)
    # the message (a lone surrogate, or what the sandbox made of it) is written and read back
    rows = {r["task_id"]: r for r in map(json.loads, (d / "tasks.jsonl").read_text(encoding="utf-8").splitlines())}
    assert (rows["builtin-04"]["status"], rows["builtin-04"]["error_type"]) == ("error", "MemoryError")
    assert (rows["builtin-05"]["status"], rows["builtin-05"]["error_type"]) == ("error", "RecursionError")
    assert rows["builtin-03"]["message"] == f["message"] and f["message"]
    assert cli_main(args) == 0
    assert "1 of 1 cells already finished" in capsys.readouterr().err


PLUGIN = '''
from primsel.retrieval.base import BaseRetriever


class Keyword(BaseRetriever):
    """Ranks one primitive first."""

    def __init__(self):
        pass

    def score(self, queries):
        return {q: {"%s": 1.0} for q in queries}
'''


@pytest.mark.slow
def test_editing_a_plug_in_retriever_invalidates_its_cached_rankings(tmp_path):
    (tmp_path / "plug_mod_cli.py").write_text(PLUGIN % "work_calendar.add_event")
    cfg = tmp_path / "plug.toml"
    cfg.write_text('name = "plug"\nretriever = "plug_mod_cli:Keyword"\nk = 1\n')
    env = {k: v for k, v in os.environ.items() if k != "PRIMSEL_ASPER_BENCH"}
    env.update(PYTHONPATH=str(tmp_path))

    def first_ranked(out: str) -> set[str]:
        cmd = [sys.executable, "-m", "primsel.cli", "run", str(cfg), "--out", str(tmp_path / out), "--quiet",
               "--no-report"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        (trec,) = (tmp_path / out / "plug").glob("*/run.trec")
        return {line.split()[2] for line in trec.read_text().splitlines() if line.split()[3] == "1"}

    assert first_ranked("a") == {"work_calendar.add_event"}
    (tmp_path / "plug_mod_cli.py").write_text(PLUGIN % "time_utils.now_")
    assert first_ranked("b") == {"time_utils.now_"}


@pytest.mark.slow
def test_answers_from_the_cache_are_counted_and_a_cell_that_contacted_no_endpoint_is_warned_about(
        tmp_path, capsys, monkeypatch):
    from primsel.datasets import load_builtin_tasks
    from primsel.testing.fake_server import FakeOpenAIServer, pipeline_responder

    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    llm = 'model = "m", max_retries = 0'
    cfg = tmp_path / "cached.toml"
    cfg.write_text(f'name = "cached"\nk = 20\nretriever = {{type = "llm_selector", {llm}}}\n'
                   f'[generator]\ntype = "openai"\n{llm.replace(", ", chr(10))}\nexamples = 0\n')
    with FakeOpenAIServer(responder=pipeline_responder(load_builtin_tasks())) as srv:  # a perfect model
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        assert cli_main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet", "--workers", "1"]) == 0
        assert srv.request_count == 32 * 5 + 32
    err = capsys.readouterr().err
    # 32 built-in tasks: one selection request per module (5) and one program each
    assert "primsel run: 0 of 192 LLM answers from the cache" in err and "no LLM endpoint" not in err

    # the same model name at an endpoint that is down: every answer comes from the cache
    monkeypatch.setenv("OPENAI_BASE_URL", _closed_port_url())
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "primsel run: 192 of 192 LLM answers from the cache" in err
    (cell,) = json.loads((tmp_path / "b" / "cached" / "experiment.json").read_text())["cells"]
    assert f"primsel run: warning: no LLM endpoint was contacted for {cell['label']} ({cell['id']}): every " \
           "answer came from the cache" in err
    report = json.loads((tmp_path / "b" / "cached" / cell["id"] / "report.json").read_text())
    assert (report["success"], report["llm_answers"], report["llm_answers_cached"]) == (1.0, 192, 192)
    text = (tmp_path / "b" / "cached" / "report.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| configuration"))
    row = next(line for line in text.splitlines() if line.startswith("| llm_selector"))
    columns = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    assert columns["cached"] == "192/192"
    assert "192 of 192 answers from the cache in all; 1 cells contacted no endpoint at all" in text


def test_run_ends_with_the_best_cell_of_each_ranking_on_stdout(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    assert cli_main(["run", str(cfg), "--out", str(tmp_path / "runs"), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    exp = tmp_path / "runs" / "small"
    assert out[0] == "== the built-in tasks (32 tasks)"
    assert out[1] == "best cell of each ranking (at k = 15 where run), by R@15:"
    assert out[2].split() == ["configuration", "k", "closure", "R@10", "R@15", "C@20", "MRR", "F1", "ma", "tokens"]
    assert out[-1] == str(exp / "report.md") and len(out) == 3 + 2 + 1
    reports = {}
    for c in json.loads((exp / "experiment.json").read_text())["cells"]:
        reports.setdefault(c["settings"]["retriever"], []).append(
            (json.loads((exp / c["id"] / "report.json").read_text()), c["settings"]))
    printed = {line.split()[0]: line.split() for line in out[3:5]}
    for retriever, cells in reports.items():
        # no cell at k = 15 in this grid (k 1 and 2): the cell of the best set F1
        report, settings = max(cells, key=lambda rs: (rs[0]["set_f1_macro"], -rs[0]["docs_tokens"]))
        assert printed[retriever][1:3] == [str(settings["k"]), "yes" if settings["closure"] else "no"]
        assert printed[retriever][-2] == f"{report['set_f1_macro']:.3f}"
    # best R@15 first
    assert [float(line.split()[4]) for line in out[3:5]] == sorted((float(l.split()[4]) for l in out[3:5]), reverse=True)


def test_set_overrides_keys_of_the_file_as_the_toml_would(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\nretriever = "bm25"\nk = 2\n')
    out = tmp_path / "runs"
    args = ["run", str(cfg), "--out", str(out), "--quiet", "--no-report"]
    overrides = ["--set", "k=3", "--set", "retriever.k1=1.2", "--set", "grid.closure=[false, true]"]
    assert cli_main(args + overrides) == 0
    cells = json.loads((out / "small" / "experiment.json").read_text())["cells"]
    assert [c["settings"]["k"] for c in cells] == [3, 3]
    assert [c["settings"]["closure"] for c in cells] == [False, True]
    assert cells[0]["settings"]["retriever"] == {"type": "bm25", "k1": 1.2}
    assert cfg.read_text() == 'name = "small"\nretriever = "bm25"\nk = 2\n'  # the file is as it was


@pytest.mark.parametrize("override,named", [
    ("retrievl.k1=1.2", "unknown key 'retrievl'"),
    ("k=ten", "--set k: 'ten' is not a TOML value"),
    ("k", "expected KEY=VALUE"),
    ("k.x=1", "--set k.x: k is integer 2, not a table"),
    ("retriever.nope=1", "nope"),
])
def test_a_bad_set_exits_2_naming_the_key_and_writes_nothing(tmp_path, capsys, override, named):
    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\nretriever = "bm25"\nk = 2\n')
    out = tmp_path / "runs"
    assert cli_main(["run", str(cfg), "--out", str(out), "--quiet", "--set", override]) == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


def test_dry_run_lists_cells_to_compute_or_reuse_and_writes_nothing(tmp_path, capsys):
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL)
    out = tmp_path / "runs"
    assert cli_main(["run", str(cfg), "--out", str(out), "--dry-run", "--set", "grid.k=[1]"]) == 0
    assert not out.exists()
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "small: 4 cells, 4 to compute, 0 finished and reused (dry run: nothing written)"
    assert [line.split("  ")[0] for line in printed[1::2]] == ["compute"] * 4
    assert printed[1].endswith("  bm25 k=1") and printed[3].endswith("  bm25 k=1 +closure")
    assert json.loads(printed[2]) == {
        "closure": False, "folds": 5, "generator": None, "k": 1, "retriever": "bm25", "seed": 0,
    }
    # after a run of the k = 1 cells, the dry run of the whole grid reuses them
    assert cli_main(["run", str(cfg), "--out", str(out), "--quiet", "--set", "grid.k=[1]"]) == 0
    before = snapshot(out)
    capsys.readouterr()
    assert cli_main(["run", str(cfg), "--out", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("small: 8 cells, 4 to compute, 4 finished and reused")
    states = [line.split("  ")[0] for line in printed[1::2]]
    assert states == ["reuse", "reuse", "compute", "compute"] * 2
    assert snapshot(out) == before


def test_ranx_on_a_cells_run_and_qrels_gives_its_report(tmp_path):
    # bm25 ties on the built-in tasks; qrels.trec and run.trec are written so that ranx ranks
    # the ties as primsel does and finds the cell's own figures
    import ranx

    cfg = tmp_path / "small.toml"
    cfg.write_text('name = "small"\nretriever = "bm25"\nk = 15\n')
    out = tmp_path / "runs"
    assert cli_main(["run", str(cfg), "--out", str(out), "--quiet", "--no-report"]) == 0
    (cell,) = [p for p in (out / "small").iterdir() if p.is_dir()]
    report = json.loads((cell / "report.json").read_text())
    assert report["tie_aware_recall@15"] != report["recall@15"]  # there are ties to break
    metrics = ["recall@5", "recall@15", "ndcg@10", "mrr"]
    qrels = ranx.Qrels.from_file(str(cell / "qrels.trec"), kind="trec")
    by_ranx = ranx.evaluate(qrels, ranx.Run.from_file(str(cell / "run.trec"), kind="trec"), metrics)
    assert by_ranx == pytest.approx({m: report[m] for m in metrics}, abs=1e-12)


def _run_plug_in(cfg: Path, cwd: Path, out: Path) -> subprocess.CompletedProcess:
    """``primsel run`` in a fresh process from ``cwd``, without the archive or PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PRIMSEL_ASPER_BENCH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # primsel itself, not the plug-in
    cmd = [sys.executable, "-m", "primsel.cli", "run", str(cfg), "--out", str(out), "--quiet"]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_plug_in_module_is_found_next_to_the_experiment_file(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "exp" / "plug_next.py").write_text(PLUGIN % "work_calendar.add_event")
    cfg = tmp_path / "exp" / "plug.toml"
    cfg.write_text('name = "plug"\nretriever = "plug_next:Keyword"\nk = 1\n')
    done = _run_plug_in(cfg, tmp_path / "elsewhere", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    (trec,) = (tmp_path / "runs" / "plug").glob("*/run.trec")
    assert trec.read_text().split()[2] == "work_calendar.add_event"


@pytest.mark.parametrize("versions", [("1", "2"), ("source", "source")])
def test_two_versions_of_a_plug_in_sit_side_by_side_in_one_run_folder(tmp_path, versions):
    (tmp_path / "plug_ver.py").write_text(PLUGIN % "work_calendar.add_event")
    cfg = tmp_path / "plug.toml"
    spec = '{type = "plug_ver:Keyword", label = "kw", version = "%s"}'
    labels = []
    for version, first in zip(versions, ["work_calendar.add_event", "time_utils.now_"]):
        (tmp_path / "plug_ver.py").write_text(PLUGIN % first)
        cfg.write_text(f'name = "plug"\nretriever = {spec % version}\nk = 1\n')
        done = _run_plug_in(cfg, tmp_path, tmp_path / "runs")
        assert done.returncode == 0, done.stderr
        assert "recomputing" not in done.stderr  # the first version's cell is left as it was
        (cell,) = json.loads((tmp_path / "runs" / "plug" / "experiment.json").read_text())["cells"]
        labels.append(cell["label"])
    folders = sorted((tmp_path / "runs" / "plug").glob("kw-*"))
    assert len(folders) == 2
    firsts = {json.loads((f / "config.json").read_text())["label"]: (f / "run.trec").read_text().split()[2]
              for f in folders}
    assert firsts == {labels[0]: "work_calendar.add_event", labels[1]: "time_utils.now_"}
    if versions == ("1", "2"):
        assert labels == ["kw@1 k=1", "kw@2 k=1"]
    else:  # the first 8 hex characters of the source digest
        assert labels[0] != labels[1] and all(len(label.split("@")[1]) == len("12345678 k=1") for label in labels)
