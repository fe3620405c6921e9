"""Bootstrap intervals, the configurations' best cells and the leaderboard."""

from __future__ import annotations

import numpy as np
import pytest

from primsel.experiments.results import load_experiment
from primsel.eval.significance import bootstrap_interval
from primsel.reporting.compare import leaderboard, shown_rankings, significance
from primsel.reporting.style import ranking_key, wrap
from primsel.retrieval import DEFAULT_RETRIEVER


def test_bootstrap_interval_of_two_values_spans_both():
    # the mean of a resample of (0, 1) is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4: the
    # 2.5th percentile is 0 and the 97.5th is 1
    low, high = bootstrap_interval([0.0, 1.0], n_resamples=4000)
    assert (float(low), float(high)) == (0.0, 1.0)


def test_bootstrap_interval_of_constant_columns_is_the_value():
    values = np.array([[1.0, 0.5], [1.0, 0.5], [1.0, 0.5]])
    low, high = bootstrap_interval(values)
    assert low.tolist() == [1.0, 0.5] and high.tolist() == [1.0, 0.5]


def test_bootstrap_interval_brackets_the_mean_per_column():
    rng = np.random.default_rng(0)
    values = rng.random((200, 3))
    low, high = bootstrap_interval(values)
    assert np.all(low < values.mean(axis=0)) and np.all(values.mean(axis=0) < high)
    # the standard error of a mean of 200 uniform values is sqrt(1/12/200) = 0.0204: the 95%
    # interval is about 2 * 1.96 * 0.0204 = 0.08 wide
    assert np.all(np.abs((high - low) - 0.08) < 0.015)


@pytest.mark.parametrize(("values", "problem"), [([], "shape"), ([1.0, float("nan")], "NaN")])
def test_bootstrap_interval_rejects_bad_values(values, problem):
    with pytest.raises(ValueError, match=problem):
        bootstrap_interval(values)


def _ablation(make_run):
    return make_run([
        {"cid": "bm25_5", "retriever": "bm25", "k": 5, "recall15": (0.0, 0.5, 0.5)},
        {"cid": "bm25_10", "retriever": "bm25", "k": 10, "recall15": (0.0, 0.5, 0.5), "report": {"set_f1_macro": 0.4}},
        {"cid": "def_5", "retriever": DEFAULT_RETRIEVER, "k": 5, "recall15": (1.0, 1.0, 0.5)},
        {"cid": "def_10", "retriever": DEFAULT_RETRIEVER, "k": 10, "recall15": (1.0, 1.0, 0.5)},
        {"cid": "def_cal", "retriever": DEFAULT_RETRIEVER, "k": 65, "recall15": (1.0, 1.0, 0.5),
         "selector": {"type": "calibrated", "target_recall": 0.9}, "report": {"set_f1_macro": 0.6}},
        {"cid": "oracle_5", "retriever": "oracle", "k": 5, "recall15": (1.0, 1.0, 1.0)},
        {"cid": "tfidf_5", "retriever": "tfidf", "k": 5, "recall15": (0.5, 0.5, 0.5)},
    ])


def test_leaderboard_takes_each_configuration_at_its_best_k_and_tests_it_against_the_baseline(make_run):
    experiment = load_experiment(_ablation(make_run))
    rows = leaderboard(experiment, significance(experiment))
    assert [r.cell.id for r in rows] == ["def_5", "def_cal", "tfidf_5", "bm25_10", "oracle_5"]
    top = rows[0]
    # per-task recall@15 differences to bm25: (1, 0.5, 0): mean 0.5; the sign flips of the two
    # non-zero differences give sums 1.5, 0.5, -0.5, -1.5: only |1.5| reaches 1.5, twice of 4
    assert top.recall["mean_diff"] == pytest.approx(0.5)
    assert top.recall["p_randomisation"] == pytest.approx(2 / 4)
    assert rows[3].baseline and rows[3].recall is None
    # bm25 k=10 has the higher set F1 (0.4 against 0.3): its best k
    assert rows[3].cell.settings["k"] == 10
    assert top.interval == pytest.approx((0.5, 1.0))


def test_figures_draw_the_default_and_the_baseline_first_and_at_most_the_limit(make_run):
    experiment = load_experiment(_ablation(make_run))
    shown = shown_rankings(experiment, limit=2)
    retriever_of = {ranking_key(c): c.retriever for c in experiment.cells}
    assert {retriever_of[key] for key in shown} == {"bm25", "hybrid(classifier+finetuned+bm25+dense, method=wsum, "
                                                     "weights=1+1+0.15+0.15)"}


def test_a_figure_shows_each_retriever_once_at_the_lowest_seed_before_other_seeds(make_run):
    """Five seeds of the default and of the baseline would fill eight series with two retrievers;
    each retriever comes first at seed 0 (even where another seed ranks higher)."""
    cells = []
    for seed in range(5):
        best = 1.0 if seed == 1 else 0.5
        cells += [{"cid": f"def_s{seed}", "retriever": DEFAULT_RETRIEVER, "k": 15, "recall15": (best, 0.5, 0.5), "seed": seed},
                  {"cid": f"bm25_s{seed}", "retriever": "bm25", "k": 15, "recall15": (0.5, 0.5, 0.0), "seed": seed}]
    cells += [{"cid": "tfidf", "retriever": "tfidf", "k": 15, "recall15": (0.0, 0.5, 0.0)},
              {"cid": "dense", "retriever": "dense", "k": 15, "recall15": (0.0, 0.0, 0.0)}]
    experiment = load_experiment(make_run(cells))
    cid = {ranking_key(c): c.id for c in experiment.cells}
    assert {cid[key] for key in shown_rankings(experiment, limit=4)} == {"def_s0", "bm25_s0", "tfidf", "dense"}
    assert {cid[key] for key in shown_rankings(experiment, limit=5)} == {"def_s0", "bm25_s0", "tfidf", "dense", "def_s1"}


def test_legend_labels_break_a_grid_of_values_and_stop_after_five_lines():
    assert wrap("bm25") == "bm25"
    assert wrap("hybrid(classifier+bm25+dense, method=wsum, weights=1+0.15+0.15)") == (
        "hybrid(classifier+bm25+dense,\nmethod=wsum, weights=1+0.15+0.15)")
    grid = "grid={weights=" + "+".join(f"(1+{w}+0.15+0.15)" for w in (0.5, 1, 2, 4, 8, 16, 32, 64, 128)) + "}"
    lines = wrap(f"tuned(base=hybrid, {grid}, inner_folds=3) seed=0").split("\n")
    assert len(lines) == 5 and lines[-1].endswith(" …") and all(len(line) <= 38 + 2 for line in lines)
    assert lines[0] == "tuned(base=hybrid,"
    assert lines[1] == "grid={weights=(1+0.5+0.15+0.15)+(1+1+"     # cut after a "+", at most 38 characters
