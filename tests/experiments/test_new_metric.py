"""A ranking metric base defined in ``primsel/eval/metrics.py`` alone reaches every output of a
run (docs/architecture.md, "a metric column"): a toy base, ``toyhits@k`` (1 when a gold primitive
is in the first k), registered for one test, listed in an experiment's ``metrics``, is in every
cell's report.json (with its tie-aware value) and tasks.jsonl, and is a column of the report's
full table; nothing in ``primsel/experiments/results.py`` names it."""

from __future__ import annotations

import json
import math

import pytest

from primsel.eval import metrics
from primsel.eval.metrics import RankingMetric, parse_metric, per_task
from primsel.experiments.config import parse_config
from primsel.experiments.runner import run_experiment
from primsel.library import Library
from primsel.registry import register
from primsel.reporting import write_report
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
    Task("2", "halt", "def q():\n    h()\n", (), (), gold=frozenset({"m.h"}), source="synthetic"),
]


class TiedRetriever(BaseRetriever):
    """Scores f 4, g 2, h 2, A 1 for every query: g and h tie (ranked g, h by id)."""

    def __init__(self) -> None:
        pass

    def score(self, queries):
        return {q: {"m.f": 4.0, "m.g": 2.0, "m.h": 2.0, "m.A": 1.0} for q in queries}


def _hits(top, k, gold):
    return 1.0 if any(p in gold for p in top) else 0.0


def _expected_hits(groups, k, gold):
    # no gold in the first k: every group inside holds none, and the group crossing the
    # cut-off (m of its n ranks inside, r gold) puts none of its gold inside: C(n - r, m) / C(n, m)
    start, miss = 0, 1.0
    for group in groups:
        if start >= k:
            break
        n, r = len(group), sum(1 for p in group if p in gold)
        inside = min(n, k - start)
        miss *= math.comb(n - r, inside) / math.comb(n, inside)
        start += n
    return 1.0 - miss


HITS = RankingMetric("toyhits", value=_hits, expected=_expected_hits)


@pytest.fixture()
def toyhits(monkeypatch, scoped_registry):
    monkeypatch.setitem(metrics.METRICS, "toyhits", HITS)
    register("test_tied")(TiedRetriever)


def test_the_toy_metric_by_hand(toyhits):
    run = {"1": {"m.f": 4.0, "m.g": 2.0, "m.h": 2.0, "m.A": 1.0}}
    # ranking f, g, h, A: gold {h} is third; toyhits@2 0 by id; tie-aware: of g and h (one gold)
    # one is at rank 2, so h is in the first 2 with probability 1/2
    assert per_task(run, {"1": {"m.h"}}, ["toyhits@2", "toyhits@3"]) == {"1": {"toyhits@2": 0.0, "toyhits@3": 1.0}}
    assert per_task(run, {"1": {"m.h"}}, ["toyhits@2", "toyhits@3", "toyhits@1"], ties="expected") == \
        {"1": {"toyhits@2": 0.5, "toyhits@3": 1.0, "toyhits@1": 0.0}}
    with pytest.raises(ValueError, match="needs a cut-off"):
        parse_metric("toyhits")
    assert "toyhits@k" in str(pytest.raises(ValueError, parse_metric, "bogus@1").value)


@pytest.mark.slow
def test_a_metric_listed_in_an_experiment_is_recorded_everywhere_and_gets_a_column(toyhits, tmp_path):
    cfg = parse_config({"name": "exp", "folds": 2, "retriever": "test_tied", "k": 1, "metrics": ["toyhits@2"]},
                       where="exp.toml")
    (cell,) = run_experiment(cfg, tmp_path, tasks=TASKS, library=LIBRARY, progress=False, use_cache=False).cells
    d = tmp_path / "exp" / cell.id
    report = json.loads((d / "report.json").read_text())
    # task 1 (gold {f, A}): f first, toyhits@2 1; task 2 (gold {h}): f, g first, 0 by id, 1/2 tie-aware
    assert report["toyhits@2"] == 0.5 and report["tie_aware_toyhits@2"] == 0.75
    rows = [json.loads(line) for line in (d / "tasks.jsonl").read_text().splitlines()]
    assert [(row["task_id"], row["metrics"]["toyhits@2"]) for row in rows] == [("1", 1.0), ("2", 0.0)]

    text = write_report(tmp_path / "exp", n_resamples=10).read_text()
    header = next(line for line in text.splitlines() if line.startswith("| configuration |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.endswith(f"`{cell.id}` |"))
    assert [c.strip() for c in row.strip("|").split("|")][columns.index("toyhits@2")] == "0.500"


def test_the_toy_metric_is_gone_after_its_test():
    assert "toyhits" not in metrics.METRICS
    with pytest.raises(ValueError, match="unknown metric 'toyhits@2'"):
        parse_metric("toyhits@2")
