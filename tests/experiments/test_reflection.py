"""Reflection rounds end to end against the scripted endpoint: a wrong program first, the
reference program once feedback is present. Success by round, requests counted at the server,
resumption from the answer cache, re-selection, the report and experiments/reflection.toml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primsel.datasets import load_builtin_tasks, load_tasks
from primsel.experiments.config import ConfigError, load_config, parse_config
from primsel.experiments.runner import run_experiment
from primsel.library import with_gold
from primsel.simulator.library import build_library
from primsel.retrieval.cv import cross_validated_run
from primsel.retrieval.selector import select
from primsel.simulator.sandbox import Sandbox
from primsel.testing.fake_server import FakeOpenAIServer, Reply, pipeline_responder, wrong_program
from primsel.types import ranking

LIBRARY = build_library()
NAMES = frozenset(p.name for p in LIBRARY.values())
TASKS = with_gold(load_builtin_tasks(), LIBRARY)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _builtin_tasks(monkeypatch):
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)


def wrong_statuses(tasks) -> dict[str, str]:
    """The status of every task's wrong program, run directly in the sandbox."""
    with Sandbox(workers=2) as sandbox:
        return {r.task_id: r.status for r in sandbox.execute_many((t, wrong_program(t, NAMES), None) for t in tasks)}


def config(name: str, retriever="oracle", k: int = 20, grid=None, **generator):
    raw = {"name": name, "retriever": retriever, "k": k,
           "generator": {"type": "openai", "model": "m", "concurrency": 4, "max_retries": 0, **generator}}
    if grid:
        raw["grid"] = grid
    return parse_config(raw)


def run(cfg, out, tasks=TASKS):
    return run_experiment(cfg, out, tasks=tasks, library=LIBRARY, progress=False, workers=2)


def cell_files(result, i: int = 0):
    cell = result.directory / result.cells[i].id
    rows = [json.loads(line) for line in (cell / "tasks.jsonl").read_text().splitlines()]
    return json.loads((cell / "report.json").read_text()), {r["task_id"]: r for r in rows}


@pytest.mark.slow
def test_success_by_round_and_requests_counted_at_the_server(tmp_path, monkeypatch):
    expected = wrong_statuses(TASKS)
    failed = sum(status != "pass" for status in expected.values())
    assert 0 < failed < len(TASKS)  # some faulty variants pass: success@1 is not 0
    cfg = config("reflect", grid={"generator.feedback": ["verdict", "error", "trace"]}, rounds=3)
    with FakeOpenAIServer(pipeline_responder(TASKS, "reflect")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(cfg, tmp_path / "runs")
        first_run = srv.request_count
        again = run(cfg, tmp_path / "again")  # same cells, new directory: every answer from the cache
        assert srv.request_count == first_run
    # round 1 is the same request in the three cells: sent once, then answered from the cache
    assert first_run == len(TASKS) + 3 * failed
    n = len(TASKS)
    for i, level in enumerate(("verdict", "error", "trace")):
        report, rows = cell_files(result, i)
        assert report["success@1"] == (n - failed) / n
        assert report["success@2"] == report["success@3"] == report["success"] == 1.0
        assert (report["calls@1"], report["calls@2"], report["calls@3"]) == (n, failed, 0)
        assert report["requests@1"] == (n if i == 0 else 0) and report["requests@2"] == failed
        assert report["cache_hits@1"] == (0 if i == 0 else n)
        assert report["prompt_tokens@2"] == 10 * failed and report["completion_tokens@2"] == 5 * failed
        assert report["cumulative_tokens@3"] == report["cumulative_tokens@2"] == 15 * (n + failed)
        for task in TASKS:
            entries = rows[task.id]["rounds"]
            assert entries[0]["status"] == expected[task.id]
            assert entries[0]["program"].strip() == wrong_program(task, NAMES).strip()
            assert rows[task.id]["status"] == entries[-1]["status"] == "pass"
            if expected[task.id] == "pass":
                assert len(entries) == 1 and entries[0]["feedback"] is None
            else:
                assert len(entries) == 2 and entries[1]["program"] == task.program
                assert entries[0]["feedback"].startswith("Your program did not pass")
                assert (entries[0]["feedback"].count("\n") == 0) == (level == "verdict")
        rerun_report, rerun_rows = cell_files(again, i)
        assert rerun_report["cache_hits@1"] == n and rerun_report["cache_hits@2"] == failed
        assert rerun_report["requests@1"] == rerun_report["requests@2"] == 0
        assert {k: v for k, v in rerun_report.items() if k.startswith("success")} == \
            {k: v for k, v in report.items() if k.startswith("success")}
        def without_cached(rows):
            return [[{k: v for k, v in e.items() if k != "cached"} for e in r["rounds"]] for r in rows.values()]

        assert without_cached(rerun_rows) == without_cached(rows)
        assert all(e["cached"] for r in rerun_rows.values() for e in r["rounds"])


def test_the_feedback_sent_is_the_conversation_so_far_and_holds_no_evaluation_text(tmp_path, monkeypatch):
    tasks = TASKS[:8]
    cfg = config("talk", rounds=2, feedback="trace")
    with FakeOpenAIServer(pipeline_responder(tasks, "reflect")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(cfg, tmp_path / "runs", tasks)
        sent = [r["messages"] for r in srv.requests]
    _, rows = cell_files(result)
    second = [m for m in sent if len(m) > 2]
    assert len(second) == sum(len(r["rounds"]) == 2 for r in rows.values()) > 0
    for messages in second:
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        task = next(t for t in tasks if f"Request: {t.query.strip()}" in messages[1]["content"])
        opening = next(m for m in sent if len(m) == 2 and m[1] == messages[1])
        assert messages[:2] == opening
        feedback = messages[3]["content"]
        assert feedback.startswith(rows[task.id]["rounds"][0]["feedback"])
        for source in (*task.evaluation_programs, task.program):
            own = rows[task.id]["rounds"][0]["program"]
            lines = {line.strip() for line in source.splitlines() if len(line.strip()) >= 8} - \
                {line.strip() for line in own.splitlines()}
            assert not [line for line in lines if line in feedback]


def test_an_interrupted_run_resends_only_the_unanswered_rounds(tmp_path, monkeypatch):
    tasks = TASKS[:10]
    failed = sum(status != "pass" for status in wrong_statuses(tasks).values())
    scripted = pipeline_responder(tasks, "reflect")

    def refuse_feedback(request):  # round 2 fails: the endpoint goes away after round 1
        return Reply(status=400) if len(request["messages"]) > 2 else scripted(request)

    cfg = config("resume", rounds=2)
    with FakeOpenAIServer(refuse_feedback) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(cfg, tmp_path / "runs", tasks)
        assert srv.request_count == len(tasks) + failed
    report, rows = cell_files(result)
    assert report["complete"] is False and report["incomplete_tasks"] == failed
    assert sum(r["status"] == "llm_error" for r in rows.values()) == failed
    with FakeOpenAIServer(scripted) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(cfg, tmp_path / "runs", tasks)
        assert srv.request_count == failed  # round 1 answered from the cache
    report, _ = cell_files(result)
    assert report["complete"] is True and report["success@2"] == 1.0


def test_reselect_ranks_again_with_the_query_and_the_error(tmp_path, monkeypatch):
    tasks = TASKS[:12]
    scripted = pipeline_responder(tasks, "reflect")
    # entry points parsed here, not in the server's threads (CPython 3.11's ast.parse is not
    # thread-safe: gh-106905)
    broken = {t.query.strip(): f"```python\ndef {t.entry_point}():\n    return schedule_meeting_room()\n```\n"
              for t in tasks}

    def responder(request):
        if len(request["messages"]) > 2:
            return scripted(request)
        query = next(q for q in broken if f"Request: {q}" in request["messages"][-1]["content"])
        return Reply(content=broken[query])

    error = "NameError: name 'schedule_meeting_room' is not defined"
    ranked, _ = cross_validated_run("bm25", LIBRARY, tasks, k=len(LIBRARY), folds=5, seed=0,
                                    queries={t.id: f"{t.query}\n{error}" for t in tasks})
    changed = 0
    for level in ("error", "verdict"):
        cfg = config(f"reselect-{level}", retriever="bm25", k=8, rounds=2, feedback=level, reselect=True)
        with FakeOpenAIServer(responder) as srv:
            monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
            result = run(cfg, tmp_path / "runs", tasks)
        report, rows = cell_files(result)
        for t in tasks:
            first, second = rows[t.id]["rounds"]
            assert first["error_type"] == "NameError" and first["selection"] == rows[t.id]["selection"]
            if level == "error":
                scores = ranked[t.id]
                again = select(tuple((p, scores[p]) for p in ranking(scores)), LIBRARY, k=8)
                assert second["selection"] == list(again.ids)
                changed += second["selection"] != first["selection"]
            else:  # the verdict tells no error: the selection stays
                assert second["selection"] == first["selection"]
            assert second["set_recall"] == len(set(second["selection"]) & t.gold) / len(t.gold)
        assert report["selection_recall@2"] == pytest.approx(
            sum(rows[t.id]["rounds"][1]["set_recall"] for t in tasks) / len(tasks))
        assert report["selection_recall@1"] == pytest.approx(report["set_recall_macro"])
    assert changed > 0


@pytest.mark.slow
def test_the_report_has_success_by_round_with_the_gain_of_each_round(tmp_path, monkeypatch):
    from primsel.eval.significance import compare
    from primsel.reporting import write_report

    tasks = TASKS[:12]
    statuses = wrong_statuses(tasks)
    with FakeOpenAIServer(pipeline_responder(tasks, "reflect")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(config("rep", rounds=2, feedback="error"), tmp_path / "runs", tasks)
    text = write_report(result.directory).read_text()
    assert (result.directory / "rep_success_by_round.png").is_file()
    table = text[text.index("## Reflection rounds"):]
    gain = compare({t: 1.0 for t in statuses}, {t: float(s == "pass") for t, s in statuses.items()})
    failed = sum(s != "pass" for s in statuses.values())
    row2 = next(line for line in table.splitlines() if line.startswith("|  | 2 |"))
    cells = [c.strip() for c in row2.strip("|").split("|")]
    def p(value):
        return "<0.001" if value < 0.001 else f"{value:.3f}"

    assert cells[2:7] == ["1.000", f"{gain['mean_diff']:+.3f}", p(gain["p_t"]), p(gain["p_randomisation"]), str(failed)]


@pytest.mark.parametrize(("generator", "message"), [
    ({"rounds": 0}, "generator: rounds must be an integer >= 1, got 0"),
    ({"rounds": 2.5}, "generator: rounds must be an integer"),
    ({"feedback": "everything"}, "generator: feedback must be one of 'verdict', 'error', 'trace'"),
    ({"reselect": "yes"}, "generator: reselect must be true or false"),
])
def test_bad_reflection_settings_are_refused(generator, message):
    with pytest.raises(ConfigError, match=message):
        config("bad", **generator)


@pytest.mark.parametrize("generator", [{"type": "reference"}, {"type": "replay", "programs": "x.jsonl"}])
def test_a_generator_that_cannot_revise_is_refused_with_rounds(tmp_path, generator):
    (tmp_path / "x.jsonl").write_text("")
    raw = {"name": "bad", "retriever": "bm25", "generator": {**generator, "rounds": 2}}
    with pytest.raises(ConfigError, match=f"generator.rounds: generator '{generator['type']}' cannot revise"):
        parse_config(raw, base_dir=tmp_path)
    parse_config({**raw, "generator": {**generator, "rounds": 1}}, base_dir=tmp_path)  # one round: fine


@pytest.mark.slow
def test_reflection_toml_runs_end_to_end_against_the_scripted_endpoint(tmp_path, monkeypatch):
    from primsel.reporting import write_report

    cfg = load_config(ROOT / "experiments" / "reflection.toml")
    failed = sum(status != "pass" for status in wrong_statuses(TASKS).values())
    with FakeOpenAIServer(pipeline_responder(TASKS, "reflect")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(cfg, tmp_path / "runs")
        requests = srv.request_count
    assert [c.settings.reflection.feedback for c in result.cells] == ["verdict", "error", "trace"]
    # the LLM selector: 5 requests per task, shared by the cells; round 1 once; round 2 per cell
    assert requests == 5 * len(TASKS) + len(TASKS) + 3 * failed
    for i in range(3):
        report, _ = cell_files(result, i)
        assert report["success@1"] == (len(TASKS) - failed) / len(TASKS)
        assert report["success@2"] == report["success@3"] == 1.0 and report["complete"] is True
    assert "## Reflection rounds" in write_report(result.directory).read_text()


def test_archive_success_by_round_against_the_scripted_endpoint(asper_path, tmp_path, monkeypatch):
    tasks = with_gold(load_tasks(asper_path), LIBRARY)
    expected = wrong_statuses(tasks)
    failed = sum(status != "pass" for status in expected.values())
    with FakeOpenAIServer(pipeline_responder(tasks, "reflect")) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        result = run(config("archive", rounds=2, feedback="trace", concurrency=8), tmp_path / "runs", tasks)
        assert srv.request_count == len(tasks) + failed
        run(config("archive", rounds=2, feedback="trace", concurrency=8), tmp_path / "again", tasks)
        assert srv.request_count == len(tasks) + failed  # the re-run: no request
    report, rows = cell_files(result)
    assert report["success@1"] == (len(tasks) - failed) / len(tasks)
    assert {t: r["rounds"][0]["status"] for t, r in rows.items()} == expected
    assert sum(r["status"] == "pass" for r in rows.values()) == 250 and report["success@2"] == 1.0
