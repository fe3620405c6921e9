"""The experiment runner on a synthetic library and tasks: outputs, shared retrieval, resuming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primsel.reporting import write_report
from primsel.experiments.config import parse_config
from primsel.experiments.runner import run_experiment
from primsel.library import Library
from primsel.registry import register
from primsel.retrieval.base import BaseRetriever
from primsel.types import Primitive, Task

LIBRARY = Library([
    Primitive("m.A", "A", "m", "class", "class A", "A thing."),
    Primitive("m.f", "f", "m", "function", "def f(x: A) -> int", "Count.", ("m.A",)),
    Primitive("m.g", "g", "m", "function", "def g() -> None", "Greet."),
    Primitive("m.h", "h", "m", "function", "def h() -> None", "Halt."),
])
TASKS = [
    Task("1", "count things", "def p():\n    return f(A())\n", (), (), gold=frozenset({"m.f", "m.A"}), source="synthetic"),
    Task("2", "say hello", "def q():\n    g()\n", (), (), gold=frozenset({"m.g"}), source="synthetic"),
]
#: Number of fit calls per test retriever name (shared retrieval means one per spec).
FITS: dict[str, int] = {}
#: When True, ``test_boom`` fails in fit (simulates a run killed after the first retriever).
BOOM = {"on": False}


class FixedRetriever(BaseRetriever):
    """Ranks f, g, h, A for every query (scores 4, 3, 2, 1)."""

    def __init__(self) -> None:
        pass

    def fit(self, library, train_tasks=()):
        FITS["test_fixed"] = FITS.get("test_fixed", 0) + 1
        return super().fit(library, train_tasks)

    def score(self, queries):
        return {q: {"m.f": 4.0, "m.g": 3.0, "m.h": 2.0, "m.A": 1.0} for q in queries}


class BoomRetriever(BaseRetriever):
    """Ranks by id; raises in fit while ``BOOM["on"]``."""

    def __init__(self) -> None:
        pass

    def fit(self, library, train_tasks=()):
        FITS["test_boom"] = FITS.get("test_boom", 0) + 1
        if BOOM["on"]:
            raise RuntimeError("killed")
        return super().fit(library, train_tasks)

    def score(self, queries):
        return {q: {} for q in queries}


@pytest.fixture(autouse=True)
def _test_components(scoped_registry):
    """The test retrievers and generators of this module, registered for each test only."""
    register("test_fixed")(FixedRetriever)
    register("test_boom")(BoomRetriever)
    register("test_usage")(UsageRetriever)
    register("test_statuses", kind="generator")(StatusGenerator)
    register("test_flaky", kind="generator")(FlakyGenerator)
    register("test_selector_errors")(SelectorErrorRetriever)


@pytest.fixture(autouse=True)
def _reset():
    FITS.clear()
    BOOM["on"] = False
    yield
    BOOM["on"] = False


def config(grid: dict, **top) -> object:
    return parse_config({"name": "exp", "folds": 2, **top, "grid": grid}, where="exp.toml")


def run(cfg, out: Path, **kwargs):
    return run_experiment(cfg, out, tasks=TASKS, library=LIBRARY, progress=False, use_cache=False, **kwargs)


def reports(directory: Path) -> dict[str, dict]:
    """report.json of every cell without the timing entries."""
    out = {}
    for path in sorted(directory.glob("*/report.json")):
        r = json.loads(path.read_text())
        out[path.parent.name] = {k: v for k, v in r.items() if "seconds" not in k and k != "retrieval_cached"}
    return out


def test_cell_outputs_and_metrics(tmp_path):
    result = run(config({"k": [1], "closure": [False, True]}, retriever="test_fixed"), tmp_path)
    plain, closed = result.cells
    d = tmp_path / "exp" / closed.id
    assert sorted(p.name for p in d.iterdir()) == [
        "config.json", "qrels.trec", "report.json", "run.trec", "tasks.jsonl",
    ]
    r = json.loads((d / "report.json").read_text())
    # top-1 is f for both tasks; closure adds A (f depends on A).
    # task 1: gold {f, A}, selection {f, A}: P 1, R 1; task 2: gold {g}: P 0, R 0.
    assert r["set_precision_macro"] == 0.5 and r["set_recall_macro"] == 0.5 and r["set_f1_macro"] == 0.5
    assert r["set_precision_micro"] == 2 / 4 and r["set_recall_micro"] == 2 / 3
    # rankings f, g, h, A: recall@1 = (1/2 + 0) / 2, recall@2 = (1/2 + 1) / 2, recall@4 = 1
    assert r["recall@1"] == 0.25 and r["recall@2"] == 0.75 and r["recall@4"] == 1.0
    assert r["complete@5"] == 1.0 and r["mrr"] == (1 + 1 / 2) / 2
    assert r["selected"] == 2 and r["closure_added"] == 1 and r["n_tasks"] == 2
    # stubs 'def f(x: A) -> int:\n    """\n    Count.\n    """' (19 + 1 + 7 + 1 + 10 + 1 + 7 = 46
    # characters -> 12 tokens) and 'class A:\n    """\n    A thing.\n    """' (8 + 1 + 7 + 1 + 12
    # + 1 + 7 = 37 characters -> 10 tokens): tokens = ceil(characters / 4)
    assert len(LIBRARY["m.f"].text("full")) == 46 and len(LIBRARY["m.A"].text("full")) == 37
    tokens = 12 + 10
    assert r["docs_tokens"] == tokens
    rows = [json.loads(line) for line in (d / "tasks.jsonl").read_text().splitlines()]
    assert [row["task_id"] for row in rows] == ["1", "2"]
    assert rows[0]["selection"] == ["m.f", "m.A"] and rows[0]["closure_added"] == ["m.A"]
    assert rows[0]["gold"] == ["m.A", "m.f"] and rows[0]["metrics"]["recall@1"] == 0.5
    assert rows[1]["metrics"]["set_precision"] == 0.0 and rows[0]["docs_tokens"] == tokens
    assert {row["fold"] for row in rows} == {0, 1}
    trec = (d / "run.trec").read_text().splitlines()
    assert len(trec) == 2 * 4 and trec[0] == f"1 Q0 m.f 1 4 {closed.id}" and trec[3] == f"1 Q0 m.A 4 1 {closed.id}"
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["settings"]["closure"] is True and cfg["versions"]["primsel"]
    assert cfg["data"] == {"source": "synthetic", "n_tasks": 2, "fingerprint": closed.settings.dataset}
    r_plain = json.loads((tmp_path / "exp" / plain.id / "report.json").read_text())
    assert r_plain["set_precision_macro"] == 0.5 and r_plain["set_recall_macro"] == 0.25


def test_retrieval_is_shared_between_cells_differing_in_k_and_closure(tmp_path):
    run(config({"k": [1, 2, 3], "closure": [False, True]}, retriever="test_fixed"), tmp_path)
    assert FITS["test_fixed"] == 1


def test_retrieval_disk_cache_is_reused(tmp_path):
    cfg = config({"k": [1]}, retriever="test_fixed")
    run_experiment(cfg, tmp_path / "a", tasks=TASKS, library=LIBRARY, progress=False)
    run_experiment(cfg, tmp_path / "b", tasks=TASKS, library=LIBRARY, progress=False)
    assert FITS["test_fixed"] == 1
    assert reports(tmp_path / "a" / "exp") == reports(tmp_path / "b" / "exp")


def test_rerun_skips_finished_cells(tmp_path):
    cfg = config({"k": [1, 2]}, retriever="test_fixed")
    first = run(cfg, tmp_path)
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "exp").glob("*/*")}
    second = run(cfg, tmp_path)
    assert second.computed == () and set(second.skipped) == set(first.computed)
    assert FITS["test_fixed"] == 1
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "exp").glob("*/*")} == mtimes


def test_killed_run_resumes_to_the_same_report(tmp_path):
    cfg = config({"retriever": ["test_fixed", "test_boom"], "k": [1, 2]}, baseline="test_fixed")
    BOOM["on"] = True
    with pytest.raises(RuntimeError, match="killed"):
        run(cfg, tmp_path / "resumed")
    exp = tmp_path / "resumed" / "exp"
    finished = sorted(p.parent.name for p in exp.glob("*/report.json"))
    assert len(finished) == 2                      # the two test_fixed cells
    mtimes = {name: (exp / name / "report.json").stat().st_mtime_ns for name in finished}
    BOOM["on"] = False
    FITS.clear()
    resumed = run(cfg, tmp_path / "resumed")
    assert sorted(resumed.skipped) == finished and len(resumed.computed) == 2
    assert "test_fixed" not in FITS                 # finished cells were not recomputed
    assert {name: (exp / name / "report.json").stat().st_mtime_ns for name in finished} == mtimes
    run(cfg, tmp_path / "clean")
    assert reports(exp) == reports(tmp_path / "clean" / "exp")
    assert write_report(exp).read_text() == write_report(tmp_path / "clean" / "exp").read_text()


def test_cell_directory_without_report_is_recomputed(tmp_path):
    cfg = config({"k": [1]}, retriever="test_fixed")
    (cell,) = run(cfg, tmp_path).cells
    d = tmp_path / "exp" / cell.id
    before = (d / "tasks.jsonl").read_text()
    (d / "report.json").unlink()
    (d / "tasks.jsonl").write_text("partial")
    again = run(cfg, tmp_path)
    assert again.computed == (cell.id,)
    assert (d / "tasks.jsonl").read_text() == before and (d / "report.json").is_file()


def test_learned_retrievers_never_see_their_test_fold(tmp_path):
    # prior with 2 folds over 2 tasks: each task is ranked by the other task's gold only.
    (cell,) = run(config({"k": [2]}, retriever="prior"), tmp_path).cells
    rows = [json.loads(line) for line in (tmp_path / "exp" / cell.id / "tasks.jsonl").read_text().splitlines()]
    # task 1 ranked by task 2's gold {g}: top 2 = g, then A (ties by id) -> recall@2 = 1/2
    assert rows[0]["selection"] == ["m.g", "m.A"]
    # task 2 ranked by task 1's gold {A, f}: top 2 = A, f -> recall 0
    assert rows[1]["selection"] == ["m.A", "m.f"] and rows[1]["metrics"]["recall@5"] == 1.0


def test_folds_above_the_number_of_tasks_are_capped(tmp_path):
    (cell,) = run(config({"k": [1]}, retriever="prior", folds=5), tmp_path).cells
    cfg = json.loads((tmp_path / "exp" / cell.id / "config.json").read_text())
    assert cfg["settings"]["folds"] == 5 and cfg["effective_folds"] == 2


def test_a_task_without_gold_stops_the_run_before_writing(tmp_path):
    from primsel.datasets import DatasetError

    bad = [*TASKS, Task("3", "nothing", "def r():\n    return 1\n", (), (), source="synthetic")]
    with pytest.raises(DatasetError, match=r"without gold primitives .*: 3$"):
        run_experiment(config({"k": [1]}, retriever="test_fixed"), tmp_path, tasks=bad, library=LIBRARY,
                       progress=False)
    assert list(tmp_path.iterdir()) == []


class UsageRetriever(FixedRetriever):
    """FixedRetriever's ranking, plus made-up LLM usage per task (the ReportsUsage ability)."""

    def usage(self):
        return {q: {"prompt_tokens": 100 + int(q), "completion_tokens": 5, "seconds": 0.5, "calls": 5,
                    "cached": 1, "errors": 0, "unknown_names": int(q)} for q in ("1", "2")}


def rows_of(directory: Path, cell) -> list[dict]:
    return [json.loads(line) for line in (directory / cell.id / "tasks.jsonl").read_text().splitlines()]


def test_threshold_then_k(tmp_path):
    # scores f 4, g 3, h 2, A 1: threshold 2.5 keeps f and g; k = 1 keeps only f (k wins)
    cells = run(config({"k": [3, 1]}, retriever="test_fixed", threshold=2.5), tmp_path).cells
    assert [rows_of(tmp_path / "exp", c)[0]["selection"] for c in cells] == [["m.f", "m.g"], ["m.f"]]


def test_selector_usage_per_task_and_totals(tmp_path):
    cfg = config({"k": [1]}, retriever="test_usage")
    (cell,) = run_experiment(cfg, tmp_path / "a", tasks=TASKS, library=LIBRARY, progress=False).cells
    rows = rows_of(tmp_path / "a" / "exp", cell)
    assert [r["selection_usage"] for r in rows] == [
        {"prompt_tokens": 101, "completion_tokens": 5, "seconds": 0.5, "calls": 5, "cached": 1, "errors": 0,
         "unknown_names": 1},
        {"prompt_tokens": 102, "completion_tokens": 5, "seconds": 0.5, "calls": 5, "cached": 1, "errors": 0,
         "unknown_names": 2}]
    report = json.loads((tmp_path / "a" / "exp" / cell.id / "report.json").read_text())
    assert {k: v for k, v in report.items() if k.startswith("selector_")} == {
        "selector_prompt_tokens": 203, "selector_completion_tokens": 10, "selector_seconds": 1.0,
        "selector_calls": 10, "selector_errors": 0, "selector_unknown_names": 3, "selector_cache_hits": 2}
    # a ranking read back from the disk cache keeps the usage of the run that computed it
    run_experiment(cfg, tmp_path / "b", tasks=TASKS, library=LIBRARY, progress=False)
    assert FITS["test_fixed"] == 1                 # computed once: the second run read the cache
    assert rows_of(tmp_path / "b" / "exp", cell) == rows


def test_retrievers_without_usage_add_no_selector_entries(tmp_path):
    (cell,) = run(config({"k": [1]}, retriever="test_fixed"), tmp_path).cells
    report = json.loads((tmp_path / "exp" / cell.id / "report.json").read_text())
    assert not [k for k in report if k.startswith("selector_")]
    assert "selection_usage" not in rows_of(tmp_path / "exp", cell)[0]


STATUS_TASKS = [*TASKS,
                Task("3", "halt", "def r():\n    h()\n", (), (), gold=frozenset({"m.h"}), source="synthetic"),
                Task("4", "nothing much", "def s():\n    g()\n", (), (), gold=frozenset({"m.g"}), source="synthetic")]


class StatusGenerator:
    """Task 1: a complete-looking program marked truncated; 2: llm_error; 3: no_program; 4: ok."""

    def generate(self, task, docs):
        from primsel.types import Program

        return {
            "1": Program("1", "def p():\n    return 1\n", status="truncated",
                         raw="```python\ndef p():\n    return 1\n"),
            "2": Program("2", None, status="llm_error", raw="LLM error: no answer"),
            "3": Program("3", None, status="no_program", raw="I cannot help."),
            "4": Program("4", "def s():\n    return 1\n"),
        }[task.id]


def test_programs_that_are_not_ok_are_not_executed(tmp_path, monkeypatch):
    from primsel.simulator.sandbox import Sandbox

    executed: list[str] = []
    original = Sandbox.execute_many

    def recording(self, jobs, *args, **kwargs):
        jobs = list(jobs)
        executed.extend(task.id for task, *_ in jobs)
        return original(self, jobs, *args, **kwargs)

    monkeypatch.setattr(Sandbox, "execute_many", recording)
    cfg = config({"k": [1]}, retriever="test_fixed", generator={"type": "test_statuses"})
    (cell,) = run_experiment(cfg, tmp_path, tasks=STATUS_TASKS, library=LIBRARY, workers=1, progress=False,
                             use_cache=False).cells
    d = tmp_path / "exp" / cell.id
    assert executed == ["4"]
    rows = rows_of(tmp_path / "exp", cell)
    assert [r["status"] for r in rows] == ["truncated", "llm_error", "no_program", "pass"]
    assert rows[1]["message"] == "LLM error: no answer"
    assert [(r["seconds"], r["called_primitives"]) for r in rows[:3]] == [(0.0, [])] * 3
    report = json.loads((d / "report.json").read_text())
    assert report["success"] == 0.25
    assert {k: report[k] for k in ("status_truncated", "status_llm_error", "status_no_program", "status_pass",
                                   "status_error", "status_fail", "status_timeout")} == {
        "status_truncated": 0.25, "status_llm_error": 0.25, "status_no_program": 0.25, "status_pass": 0.25,
        "status_error": 0.0, "status_fail": 0.0, "status_timeout": 0.0}
    failures = [json.loads(line) for line in (d / "failures.jsonl").read_text().splitlines()]
    assert [(f["task_id"], f["stage"], f["category"], f["status"]) for f in failures] == [
        ("1", "llm", "truncated", "truncated"), ("2", "llm", "llm_error", "llm_error"),
        ("3", "extraction", "no_program", "no_program")]
    assert failures[0]["line"] == 2               # the last line of the cut program


# ---------------------------------------------------------------------------------------------
# Incomplete cells (LLM requests that failed), JSON of any string, plug-in sources in the key
# ---------------------------------------------------------------------------------------------
#: Task ids the ``test_flaky`` generator answers with llm_error (the rest: no_program).
FLAKY: dict[str, set[str]] = {"llm_error": set()}
#: Task ids asked of the ``test_flaky`` generator, in order, over a test.
ASKED: list[str] = []


class FlakyGenerator:
    """llm_error for the task ids in ``FLAKY["llm_error"]``, else no_program (nothing is executed)."""

    def generate(self, task, docs):
        from primsel.types import Program

        ASKED.append(task.id)
        if task.id in FLAKY["llm_error"]:
            return Program(task.id, None, status="llm_error", raw="LLM error: HTTP 503 " + chr(0xD800))
        return Program(task.id, None, status="no_program", raw="nothing")


def test_a_cell_with_llm_errors_is_written_incomplete_and_recomputed(tmp_path):
    FLAKY["llm_error"] = {"2"}
    ASKED.clear()
    cfg = config({"k": [1]}, retriever="test_fixed", generator={"type": "test_flaky"})
    first = run(cfg, tmp_path)
    (cell,) = first.cells
    d = tmp_path / "exp" / cell.id
    report = json.loads((d / "report.json").read_text())
    assert report["complete"] is False and report["incomplete_tasks"] == 1.0 and report["status_llm_error"] == 0.5
    assert first.incomplete == (cell.id,) and (d / "failures.jsonl").is_file()
    rows = [json.loads(line) for line in (d / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows[1]["message"] == "LLM error: HTTP 503 " + chr(0xD800)     # any string round-trips
    assert "Cells finished: 0 of 1; 1 more incomplete" in write_report(tmp_path / "exp").read_text()
    assert f"`{cell.id}` *incomplete*" in (tmp_path / "exp" / "report.md").read_text()
    # the next run recomputes it; once every request succeeds, the cell is finished for good
    FLAKY["llm_error"] = set()
    second = run(cfg, tmp_path)
    assert second.computed == (cell.id,) and second.skipped == () and second.incomplete == ()
    report = json.loads((d / "report.json").read_text())
    assert report["complete"] is True and report["incomplete_tasks"] == 0.0
    third = run(cfg, tmp_path)
    assert third.computed == () and third.skipped == (cell.id,)
    assert ASKED == ["1", "2"] * 2


class SelectorErrorRetriever(FixedRetriever):
    """FixedRetriever's ranking; its (made-up) LLM selection of task 2 had one failed request."""

    def usage(self):
        return {q: {"calls": 5, "errors": int(q == "2")} for q in ("1", "2")}


def test_failed_selection_requests_make_the_cell_incomplete_and_are_not_cached(tmp_path):
    from primsel.files import cache_dir

    cfg = config({"k": [1]}, retriever="test_selector_errors")
    first = run_experiment(cfg, tmp_path / "a", tasks=TASKS, library=LIBRARY, progress=False)
    (cell,) = first.cells
    assert first.incomplete == (cell.id,)
    run_experiment(cfg, tmp_path / "b", tasks=TASKS, library=LIBRARY, progress=False)
    report = json.loads((tmp_path / "b" / "exp" / cell.id / "report.json").read_text())
    assert report["complete"] is False and report["incomplete_tasks"] == 1.0 and report["selector_errors"] == 1.0
    assert FITS["test_fixed"] == 2                 # the second run could not reuse the ranking
    assert not list((cache_dir() / "experiments" / "retrieval").glob("*.json"))


def test_reports_written_before_the_complete_key_count_as_complete(tmp_path):
    from primsel.experiments.results import is_complete

    (tmp_path / "report.json").write_text('{"recall@5": 1.0}')
    assert is_complete(tmp_path)
    (tmp_path / "report.json").write_text('{"recall@5": 1.0, "complete": false}')
    assert not is_complete(tmp_path)
    (tmp_path / "report.json").write_text('{"recall@5": 1.0')   # cut short
    assert not is_complete(tmp_path)


PLUGIN = '''
from primsel.retrieval.base import BaseRetriever


class Plugged(BaseRetriever):
    """Ranks the primitive named {first!r} first."""

    def __init__(self):
        pass

    def score(self, queries):
        return {{q: {{"m.{first}": 1.0}} for q in queries}}
'''


def test_the_retrieval_cache_key_follows_the_source_of_plug_in_retrievers(tmp_path, monkeypatch):
    import sys

    from primsel.experiments.dataset import make_dataset
    from primsel.retrieval.store import RetrievalStore

    (tmp_path / "plug_mod_key.py").write_text(PLUGIN.format(first="g"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plug_mod_key", raising=False)
    store = RetrievalStore(LIBRARY, make_dataset(TASKS))
    specs = ["plug_mod_key:Plugged", {"type": "hybrid", "members": ["test_fixed", "plug_mod_key:Plugged"]},
             {"type": "hybrid", "members": ["test_fixed", {"type": "plug_mod_key:Plugged"}]}]
    before = [store.key(spec, 2, 0) for spec in specs]
    assert store.key("test_fixed", 2, 0) == RetrievalStore(LIBRARY, make_dataset(TASKS)).key("test_fixed", 2, 0)
    (tmp_path / "plug_mod_key.py").write_text(PLUGIN.format(first="h"))
    after = [store.key(spec, 2, 0) for spec in specs]
    assert all(a != b for a, b in zip(before, after))
    assert store.key("test_fixed", 2, 0) == RetrievalStore(LIBRARY, make_dataset(TASKS)).key("test_fixed", 2, 0)


STACK = '''
from primsel.registry import build
from primsel.retrieval.base import BaseRetriever


class Stack(BaseRetriever):
    """Sums the scores of the retrievers its stages name."""

    def __init__(self, stages):
        self.stages = stages

    def fit(self, library, train_tasks=()):
        super().fit(library, train_tasks)
        self._built = [build(s).fit(library, train_tasks) for s in self.stages]
        return self

    def score(self, queries):
        out = {q: {} for q in queries}
        for stage in self._built:
            for q, scores in stage.score(queries).items():
                for p, s in scores.items():
                    out[q][p] = out[q].get(p, 0.0) + s
        return out
'''


def test_editing_a_plug_in_nested_under_stages_recomputes_its_finished_cells(tmp_path, monkeypatch, capsys):
    import io
    import sys

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "stack_mod_stale.py").write_text(STACK)
    (tmp_path / "plug_mod_stale.py").write_text(PLUGIN.format(first="g"))
    for name in ("stack_mod_stale", "plug_mod_stale"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    cfg = config({"k": [1, 2]}, retriever={"type": "stack_mod_stale:Stack",
                                            "stages": [{"type": "plug_mod_stale:Plugged"}]})

    first = run(cfg, tmp_path / "out")
    recall = {c: json.loads((tmp_path / "out" / "exp" / c / "report.json").read_text())["recall@1"]
              for c in first.computed}
    # g first: task 1 (gold f, A) finds nothing at rank 1, task 2 (gold g) all
    assert set(recall.values()) == {(0 + 1) / 2}

    (tmp_path / "plug_mod_stale.py").write_text(PLUGIN.format(first="f"))
    monkeypatch.delitem(sys.modules, "plug_mod_stale")
    log = io.StringIO()
    second = run(cfg, tmp_path / "out", log=log)
    assert second.skipped == () and set(second.computed) == set(first.computed)
    assert "recomputing 2 finished cells: the source of plug_mod_stale:Plugged changed" in log.getvalue()
    fresh = run(cfg, tmp_path / "fresh")
    for c in first.computed:
        again = json.loads((tmp_path / "out" / "exp" / c / "report.json").read_text())["recall@1"]
        new = json.loads((tmp_path / "fresh" / "exp" / c / "report.json").read_text())["recall@1"]
        # f first: task 1 finds one of its two, task 2 nothing
        assert again == new == (1 / 2 + 0) / 2

    third = run(cfg, tmp_path / "out")   # unchanged sources: finished
    assert third.computed == () and set(third.skipped) == set(first.computed)


def test_cells_written_without_recorded_sources_are_recomputed(tmp_path):
    cfg = config({"k": [1]}, retriever="test_fixed")
    first = run(cfg, tmp_path)
    path = tmp_path / "exp" / first.computed[0] / "config.json"
    recorded = json.loads(path.read_text())
    assert recorded["sources"]["retriever"]["test_fixed"] not in ("", "?")
    del recorded["sources"]
    path.write_text(json.dumps(recorded))
    assert run(cfg, tmp_path).computed == first.computed


class _RecordingBar:
    """Records what the runner tells a tqdm bar."""

    def __init__(self, total):
        self.total, self.n, self.events = total, 0, []

    def set_description_str(self, text, refresh=True):
        self.events.append(("describe", text))

    def reset(self, total=None):
        self.events.append(("reset", total))
        self.n = 0

    def update(self, n=1):
        self.events.append(("update", n))
        self.n += n


def test_fitting_shows_its_stage_and_the_task_steps_start_their_clock_after_it(tmp_path):
    from primsel.experiments.cell import RunContext, run_cell
    from primsel.experiments.config import expand
    from primsel.experiments.dataset import make_dataset
    from primsel.retrieval.store import RetrievalStore

    register("test_learner")(LearnerRetriever)
    dataset = make_dataset(TASKS)
    (cell,) = expand(config({"k": [1]}, retriever="test_learner"), dataset=dataset.fingerprint)
    ctx = RunContext(experiment="exp", library=LIBRARY, dataset=dataset,
                      store=RetrievalStore(LIBRARY, dataset, use_disk=False))
    bar = _RecordingBar(total=len(TASKS))
    run_cell(cell, ctx, tmp_path / cell.id, bar)
    stages = [text for kind, text in bar.events if kind == "describe"]
    assert stages == ["  fitting fold 1/2", "  ranking fold 1/2", "  fitting fold 2/2", "  ranking fold 2/2",
                      "  tasks"]
    first_update = next(i for i, (kind, _) in enumerate(bar.events) if kind == "update")
    assert ("reset", len(TASKS)) in bar.events[:first_update]  # the fit time feeds no ETA
    assert bar.n == len(TASKS)


class LearnerRetriever(BaseRetriever):
    """Learns nothing, but says it does (cross-validated)."""

    learns_from_tasks = True

    def __init__(self) -> None:
        pass

    def score(self, queries):
        return {q: {} for q in queries}


def test_one_name_per_retrieval_for_the_store_the_cell_record_and_the_report(tmp_path):
    """Folds capped at the number of tasks, and a depth that keeps the whole library, are the
    retrieval of the plain settings: one computation, one key, recorded by each cell and used by
    the report to draw one series."""
    from primsel.experiments.dataset import make_dataset
    from primsel.experiments.results import load_experiment
    from primsel.retrieval.store import retrieval_key
    from primsel.retrieval.store import RetrievalStore
    from primsel.reporting.style import ranking_key

    dataset = make_dataset(TASKS)
    store = RetrievalStore(LIBRARY, dataset, use_disk=False)
    plain = store.get("test_fixed", 2, 0)
    assert store.get("test_fixed", 7, 0) is plain and store.get("test_fixed", 2, 0, depth=4) is plain
    assert store.get("test_fixed", 2, 0, depth=3) is not plain
    assert plain.key == retrieval_key(dataset.fingerprint, "test_fixed", 2, 0, None) == store.retrieval_key("test_fixed", 9, 0, 40)
    assert FITS["test_fixed"] == 2                           # two retrievals computed: depth 3 and the whole library

    result = run(config({"k": [1, 2], "seed": [0, 1]}, retriever="test_fixed"), tmp_path)
    records = {c.id: json.loads((tmp_path / "exp" / c.id / "report.json").read_text()) for c in result.cells}
    for cell in result.cells:
        expected = retrieval_key(dataset.fingerprint, "test_fixed", 2, cell.settings.seed, None)
        assert records[cell.id]["retrieval_key"] == expected
    experiment = load_experiment(tmp_path / "exp")
    assert len({ranking_key(c) for c in experiment.cells}) == 2          # one per seed, k aside
    assert len({records[c.id]["retrieval_key"] for c in result.cells}) == 2


def test_the_ray_backend_ranks_the_whole_dataset_for_a_sample(tmp_path, monkeypatch):
    """With --sample, retrieval is cross-validated over every task on the Ray backend as in a
    serial run (the cells score the sample): the same files. Ray is stood in for by a module that
    runs each remote call at once."""
    import sys
    import types

    class Ref:                                # an object reference: hashable, resolved in arguments
        def __init__(self, value):
            self.value = value

    def remote(function):
        return types.SimpleNamespace(remote=lambda *args: Ref(function(*(a.value if isinstance(a, Ref) else a
                                                                           for a in args))))

    fake = types.SimpleNamespace(is_initialized=lambda: True, init=lambda **_: None, shutdown=lambda: None,
                                 remote=remote, put=Ref, get=lambda ref: ref.value,
                                 wait=lambda refs, num_returns=1: (refs[:1], refs[1:]), cancel=lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "ray", fake)
    cfg = config({"k": [1]}, retriever="prior")
    run(cfg, tmp_path / "serial", task_ids=["2"])
    run(cfg, tmp_path / "ray", task_ids=["2"], backend="ray")
    (cell,) = [p.name for p in (tmp_path / "serial" / "exp").iterdir() if p.is_dir()]
    for name in ("run.trec", "tasks.jsonl", "config.json"):
        assert (tmp_path / "ray" / "exp" / cell / name).read_bytes() == (tmp_path / "serial" / "exp" / cell / name).read_bytes()
    # the prior learns from the other fold's gold: over the whole dataset, task 2 is ranked by task
    # 1's gold {m.f, m.A} (scores 1, the tie written one float apart) and task 1 by task 2's {m.g}
    lines = [line.split() for line in (tmp_path / "ray" / "exp" / cell / "run.trec").read_text().splitlines()]
    assert [(q, p, s) for q, _, p, _, s, _ in lines][:1] == [("1", "m.g", "1")]
    assert [(p, s) for q, _, p, _, s, _ in lines if q == "2"][:2] == [
        ("m.A", "1"), ("m.f", "0.9999999999999999"),
    ]
