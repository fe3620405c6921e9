"""Cross-validated figures on Asper-Bench (need PRIMSEL_ASPER_BENCH; skipped otherwise)."""

from __future__ import annotations

import copy

import pytest

from primsel.eval.metrics import evaluate
from primsel.library import with_gold
from primsel.simulator.library import build_library
from primsel.retrieval import DEFAULT_RETRIEVER
from primsel.retrieval.cv import cross_validated_run

pytestmark = pytest.mark.asper


@pytest.fixture(scope="module")
def setting(asper_path):
    from primsel.datasets import load_tasks

    library = build_library()
    tasks = with_gold(load_tasks(asper_path), library)
    return library, tasks, {t.id: t.gold for t in tasks}


def test_popularity_prior_reproduces_the_design_figures(setting):
    library, tasks, gold = setting
    run, folds = cross_validated_run("prior", library, tasks, k=len(library), folds=5, seed=0)
    values = evaluate(run, gold, ["recall@15", "complete@20"])
    assert round(values["recall@15"], 3) == 0.595
    assert values["complete@20"] == 35 / 250
    assert sorted(set(folds.values())) == [0, 1, 2, 3, 4] and len(folds) == 250


def test_oracle_bound(setting):
    library, tasks, gold = setting
    run, _ = cross_validated_run("oracle", library, tasks, k=len(library))
    values = evaluate(run, gold, ["recall@15", "complete@20"])
    assert round(values["recall@15"], 3) == 0.996 and values["complete@20"] == 1.0


@pytest.mark.dense
def test_default_configuration_meets_its_target(setting):
    library, tasks, gold = setting
    run, _ = cross_validated_run(copy.deepcopy(DEFAULT_RETRIEVER), library, tasks, k=len(library), folds=5, seed=0)
    values = evaluate(run, gold, ["recall@15", "complete@20"])
    assert values["recall@15"] >= 0.80 and values["complete@20"] >= 0.50


def test_tie_aware_figures_of_bm25_and_all(setting):
    library, tasks, gold = setting
    metrics = ["recall@15", "complete@20", "recall@10"]
    bm25, _ = cross_validated_run("bm25", library, tasks, k=len(library))
    by_id, expected = evaluate(bm25, gold, metrics), evaluate(bm25, gold, metrics, ties="expected")
    assert (round(by_id["recall@15"], 3), by_id["complete@20"]) == (0.525, 27 / 250)
    assert (round(expected["recall@15"], 3), round(expected["complete@20"], 3)) == (0.511, 0.079)
    everything, _ = cross_validated_run("all", library, tasks, k=len(library))
    assert round(evaluate(everything, gold, ["recall@10"])["recall@10"], 3) == 0.214
    # every primitive ties: each of the 10 first ranks holds a given gold primitive with
    # probability 1/65, so recall@10 is 10/65 for every task
    assert evaluate(everything, gold, ["recall@10"], ties="expected")["recall@10"] == pytest.approx(10 / 65)
