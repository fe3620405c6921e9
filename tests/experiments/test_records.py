"""The run files as typed records (primsel.experiments.records): report.json's stages, one writer and one reader
each, what the run records for the report, and that reading them loads nothing the report does not need."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import primsel
import primsel.retrieval
from primsel.experiments.config import parse_config
from primsel.experiments.records import (
    AsperaFigures,
    ConfigFile,
    ManifestFile,
    TaskRow,
    Frontier,
    GenerationFigures,
    Learning,
    ReportError,
    ReportFile,
    RoundFigures,
)
from primsel.experiments.results import learning_retrievers, load_experiment, ranking_frontier
from primsel.experiments.runner import run_experiment
from primsel.files import digest
from primsel.library import Library
from primsel.registry import register
from primsel.reporting import write_report
from primsel.reporting.compare_runs import compare_runs
from primsel.reporting.export import cell_rows
from primsel.retrieval.base import BaseRetriever
from primsel.retrieval.store import retrieval_key
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
#: Keys the run records for the report beside the metrics.
RECORDED = ("learns", "frontier", "retrieval_key")


class FixedRetriever(BaseRetriever):
    """Ranks f, g, h, A for every query (scores 4, 3, 2, 1)."""

    def __init__(self) -> None:
        pass

    def score(self, queries):
        return {q: {"m.f": 4.0, "m.g": 3.0, "m.h": 2.0, "m.A": 1.0} for q in queries}


class LearningFixed(FixedRetriever):
    """The same ranking, from a retriever that says it learns from tasks."""

    learns_from_tasks = True


@pytest.fixture(autouse=True)
def _components(scoped_registry):
    register("test_rec_fixed")(FixedRetriever)
    register("test_rec_learning")(LearningFixed)


def test_a_report_with_generation_and_reflection_keys_reads_into_its_records_and_back():
    data = {
        "recall@5": 0.5, "tie_aware_recall@5": 0.4, "mrr": 0.75, "tie_aware_mrr": 0.7, "tied_tasks@5": 2.0,
        "set_recall_macro": 0.25, "set_f1_macro": 0.2, "n_tasks": 4, "selected": 5.0, "closure_added": 0.5,
        "docs_tokens": 812.5, "selector_calls": 4.0, "selector_errors": 1.0, "selector_cache_hits": 2.0,
        "success": 0.5, "status_pass": 0.5, "status_fail": 0.25, "status_llm_error": 0.25,
        "failures_wrong_primitive": 1.0, "generator_calls": 6.0, "generator_cache_hits": 3.0, "cache_hits": 3.0,
        "success@1": 0.25, "calls@1": 4.0, "cache_hits@1": 2.0, "requests@1": 2.0, "prompt_tokens@1": 400.0,
        "completion_tokens@1": 40.0, "cumulative_tokens@1": 440.0, "selection_recall@1": 0.25,
        "success@2": 0.5, "calls@2": 3.0, "cache_hits@2": 1.0, "requests@2": 2.0, "prompt_tokens@2": 300.0,
        "completion_tokens@2": 30.0, "cumulative_tokens@2": 770.0, "selection_recall@2": 0.5,
        "extraction": "aspera", "score": 50.0, "parse_failures": 0.0, "primitives_selection_micro_recall": None,
        "retrieval_seconds": 1.5, "retrieval_cached": 0.0, "llm_answers": 8.0, "llm_answers_cached": 5.0,
        "incomplete_tasks": 1.0, "complete": False, "seconds": 12.0, "a_future_key": [1, 2],
    }
    record = ReportFile.from_json(data)
    assert record.ranking.values == {"recall@5": 0.5, "mrr": 0.75}
    assert record.ranking.tie_aware == {"recall@5": 0.4, "mrr": 0.7} and record.ranking.tied(5) == 2.0
    assert record.selection.n_tasks == 4 and record.selection.recall_macro == 0.25 and record.docs_tokens == 812.5
    assert dict(record.selector_usage.values) == {"calls": 4.0, "errors": 1.0, "cached": 2.0}
    assert record.generation == GenerationFigures(success=0.5,
                                                  status={"pass": 0.5, "fail": 0.25, "llm_error": 0.25},
                                                  failures={"wrong_primitive": 1.0},
                                                  usage={"calls": 6.0, "cache_hits": 3.0}, cache_hits=3.0)
    assert record.rounds == (RoundFigures(0.25, 4.0, 2.0, 2.0, 400.0, 40.0, 440.0, 0.25),
                             RoundFigures(0.5, 3.0, 1.0, 2.0, 300.0, 30.0, 770.0, 0.5))
    assert record.aspera == AsperaFigures("aspera", {"score": 50.0, "parse_failures": 0.0,
                                                     "primitives_selection_micro_recall": None})
    assert record.run.llm_answers == 8.0 and record.complete is False and record.run.seconds == 12.0
    assert record.learning is None and record.frontier is None and record.retrieval_key is None
    assert record.extra == {"a_future_key": [1, 2]}
    assert record.metric("recall@5") == 0.5 and record.metric("set_f1_macro") == 0.2
    assert record.metric("success") == 0.5 and record.metric("score") == 50.0 and record.metric("nope") is None
    assert record.to_json() == data


def test_an_empty_report_and_the_recorded_facts_round_trip():
    assert ReportFile.from_json({}).to_json() == {}
    data = {"recall@1": 1.0, "learns": {"retriever": True, "selector": False, "generator": True},
            "frontier": {"tokens": [12.0, 23.0], "recall": [0.5, 1.0]}, "retrieval_key": "ab"}
    record = ReportFile.from_json(data)
    assert record.learning == Learning(retriever=True, selector=False, generator=True)
    assert record.frontier == Frontier(tokens=(12.0, 23.0), recall=(0.5, 1.0))
    assert record.to_json() == data
    with pytest.raises(ValueError, match="learns must be a table"):
        ReportFile.from_json({"learns": True})
    with pytest.raises(ValueError, match="2 token values but 1 recall values"):
        ReportFile.from_json({"frontier": {"tokens": [1.0, 2.0], "recall": [1.0]}})


def test_the_retrieval_key_is_the_digest_of_dataset_retriever_folds_seed_and_depth():
    assert retrieval_key("d/2/x", "bm25", 5, 0, None) == digest(["d/2/x", "bm25", 5, 0, None])
    assert retrieval_key("d/2/x", "bm25", 5, 0, None) != retrieval_key("d/2/x", "bm25", 5, 1, None)


def _run(out: Path, grid: dict, tasks=TASKS, library=LIBRARY):
    cfg = parse_config({"name": "exp", "folds": 2, "grid": grid}, where="exp.toml")
    return run_experiment(cfg, out, tasks=tasks, library=library, progress=False, use_cache=False)


def test_a_run_records_learning_the_retrieval_key_and_the_frontier(tmp_path):
    result = _run(tmp_path, {"retriever": ["test_rec_fixed", "test_rec_learning"], "k": [1]})
    fixed, learning = result.cells
    data = json.loads((tmp_path / "exp" / fixed.id / "report.json").read_text())
    assert data["learns"] == {"retriever": False, "selector": False, "generator": False}
    assert json.loads((tmp_path / "exp" / learning.id / "report.json").read_text())["learns"]["retriever"] is True
    assert data["retrieval_key"] == retrieval_key(fixed.settings.dataset, "test_rec_fixed", 2, 0, None)
    # both tasks ranked f, g, h, A; tokens = ceil(characters / 4) of the stubs: f 46 -> 12,
    # g 43 -> 11, h 42 -> 11, A 37 -> 10; recall: task 1 (gold f, A) 1/2, 1/2, 1/2, 1, task 2
    # (gold g) 0, 1, 1, 1
    assert [len(LIBRARY[p].text("full")) for p in ("m.f", "m.g", "m.h", "m.A")] == [46, 43, 42, 37]
    assert data["frontier"] == {"tokens": [12.0, 23.0, 34.0, 44.0], "recall": [0.25, 0.75, 0.75, 1.0]}
    assert ReportFile.from_json(data).to_json() == data
    experiment = load_experiment(tmp_path / "exp")
    assert learning_retrievers(experiment.cells) == ["test_rec_learning"]
    curve = ranking_frontier(experiment.cells[0])
    assert curve.tokens == (12.0, 23.0, 34.0, 44.0) and curve.mean_recall == [0.25, 0.75, 0.75, 1.0]
    assert curve.recall == ((0.5, 0.5, 0.5, 1.0), (0.0, 1.0, 1.0, 1.0))


def test_a_folder_written_before_the_recorded_facts_is_an_error_saying_to_run_again(tmp_path, monkeypatch):
    """A real run on the built-in tasks reports; its copy without learns, frontier and retrieval
    key (as report.json was written before they were recorded) is an error naming the cell."""
    monkeypatch.delenv("PRIMSEL_ASPER_BENCH", raising=False)
    _run(tmp_path / "new", {"retriever": ["bm25", "knn"], "k": [5]}, tasks=None, library=None)
    shutil.copytree(tmp_path / "new", tmp_path / "old")
    for path in sorted((tmp_path / "new" / "exp").glob("*/report.json")):
        data = json.loads(path.read_text())
        assert data["frontier"] is not None and ReportFile.from_json(data).to_json() == data
        old = tmp_path / "old" / "exp" / path.parent.name / "report.json"
        stripped = {k: v for k, v in data.items() if k not in RECORDED}
        old.write_text(json.dumps(stripped))
        assert ReportFile.from_json(stripped).to_json() == stripped
    new_text = write_report(tmp_path / "new" / "exp").read_text()
    assert "Retrievers that learn from tasks (knn)" in new_text and "Recall/tokens frontier" in new_text
    old = load_experiment(tmp_path / "old" / "exp")
    first = old.cells[0]
    message = (f"cell {first.id}: {first.directory / 'report.json'} does not record '{{}}'; delete it and run "
               "`primsel run` on the experiment again to record it")
    with pytest.raises(ReportError) as info:
        learning_retrievers(old.cells)
    assert str(info.value) == message.format("learns")
    with pytest.raises(ReportError) as info:
        ranking_frontier(first)
    assert str(info.value) == message.format("frontier")
    with pytest.raises(ReportError, match="does not record 'frontier'; delete it and run `primsel run`"):
        write_report(tmp_path / "old" / "exp")


PACKAGE = Path(primsel.__file__).parent
#: What presentation code must not import: component building, the library, the simulator.
FORBIDDEN = ("primsel.library", "primsel.simulator", "primsel.registry")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_reporting_and_explore_neither_build_components_nor_load_the_library_the_simulator_or_a_retriever():
    files = sorted([*(PACKAGE / "reporting").glob("*.py"), *(PACKAGE / "explore").glob("*.py")])
    # "from primsel import registry" counts as importing primsel.registry
    found = {f"{p.parent.name}/{p.name}: {m}" for p in files for m in _imports(p)
             if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)}
    assert found == set()
    retrievers = sorted({f"primsel.retrieval.{module}"
                         for module in primsel.retrieval.COMPONENT_MODULES["retriever"].values()})
    code = ("import sys, primsel.reporting, primsel.explore.site, primsel.explore.browser\n"
            "for name in ('compare', 'compare_runs', 'export', 'markdown', 'plots', 'report', 'style', 'summary'):\n"
            "    __import__('primsel.reporting.' + name)\n"
            f"print(sorted(m for m in sys.modules if m.startswith(('primsel.library', 'primsel.simulator', "
            f"*{retrievers!r}))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]"
    assert "primsel.retrieval.bm25" in retrievers  # the table names the retriever modules


#: Run folders written by earlier versions of primsel, of tests/experiments/fixtures/formats.toml on the
#: built-in tasks builtin-01 to -03 (each run.trec cut to those three tasks; the report is the same):
#: ``before_records`` by the version before report.json recorded ``learns``, ``frontier`` and
#: ``retrieval_key`` (files written by dict literals), ``typed_records`` by the first typed records, with the
#: report.md that version wrote.
FIXTURES = Path(__file__).parent / "fixtures"
FORMATS = ("before_records", "typed_records")


@pytest.mark.parametrize("folder", FORMATS)
def test_run_folders_of_the_two_previous_formats_load_and_their_files_round_trip(folder):
    experiment = load_experiment(FIXTURES / folder)
    assert (experiment.name, experiment.baseline) == ("formats", "bm25")
    assert [(c.label, c.finished, c.complete) for c in experiment.cells] == [
        ("bm25 k=5", True, True), ("prior k=5", True, True), ("bm25 k=5 reference", True, True)]
    for cell in experiment.cells:
        rows = cell.task_rows()
        assert [row.task_id for row in rows] == ["builtin-01", "builtin-02", "builtin-03"]
        recall = sum(row.metrics["recall@5"] for row in rows) / 3
        assert cell.report.ranking.recall(5) == pytest.approx(recall)
        data = json.loads((cell.directory / "report.json").read_text())
        assert ReportFile.from_json(data).to_json() == data
        for line in (cell.directory / "tasks.jsonl").read_text().splitlines():
            assert TaskRow.from_json(json.loads(line)).to_json() == json.loads(line)
        config = json.loads((cell.directory / "config.json").read_text())
        assert ConfigFile.from_json(config).to_json() == config
    manifest = json.loads((FIXTURES / folder / "experiment.json").read_text())
    assert ManifestFile.from_json(manifest).to_json() == manifest
    generated = experiment.cells[2]
    assert generated.report.success == 1.0 and generated.report.aspera.extraction is None
    assert [row.program.status for row in generated.task_rows()] == ["pass"] * 3  # the reference programs
    assert [row.program for row in experiment.cells[0].task_rows()] == [None] * 3


def test_the_typed_records_folder_reports_the_bytes_its_version_wrote(tmp_path):
    shutil.copytree(FIXTURES / "typed_records", tmp_path / "formats")
    written = (tmp_path / "formats" / "report.md").read_text(encoding="utf-8")
    (tmp_path / "formats" / "report.md").unlink()
    assert write_report(tmp_path / "formats").read_text(encoding="utf-8") == written


def test_the_folder_written_before_the_recorded_facts_reads_and_its_report_asks_to_run_again(tmp_path):
    shutil.copytree(FIXTURES / "before_records", tmp_path / "formats")
    experiment = load_experiment(tmp_path / "formats")
    assert [c.report.learning for c in experiment.cells] == [None] * 3
    assert len(cell_rows(experiment)) == 3  # the exports need nothing it lacks
    with pytest.raises(ReportError, match="does not record 'frontier'; delete it and run `primsel run`"):
        write_report(tmp_path / "formats")


def test_the_two_formats_compare_as_the_same_run():
    comparison = compare_runs(FIXTURES / "before_records", FIXTURES / "typed_records")
    assert [(p.cell, p.tasks, p.diff, p.up, p.down) for p in comparison.pairs] == [
        ("bm25 k=5", 3, 0.0, 0, 0), ("prior k=5", 3, 0.0, 0, 0), ("bm25 k=5 reference", 3, 0.0, 0, 0)]


def test_every_field_of_a_task_row_is_read_into_its_field_not_into_extra():
    from primsel.experiments.records import ProgramOutcome, RoundEntry, TaskRow

    row = TaskRow(task_id="7", fold=1, selection=("a",), closure_added=(), gold=("a",), metrics={"recall@5": 1.0},
                  docs_tokens=3, selection_usage={"calls": 1.0}, program=ProgramOutcome(status="pass"),
                  rounds=(RoundEntry.from_json({"round": 1, "status": "pass"}),))
    again = TaskRow.from_json(row.to_json())
    assert again.extra == {} and again == row
    assert TaskRow.from_json({**row.to_json(), "later_key": 2}).extra == {"later_key": 2}
