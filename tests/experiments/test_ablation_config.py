"""The committed retrieval ablation declares what the project reports."""

from __future__ import annotations

from pathlib import Path

from primsel.experiments.config import expand, load_config
from primsel.spec import canonical as canonical_spec
from primsel.spec import type_name
from primsel.retrieval import DEFAULT_RETRIEVER

ABLATION = Path(__file__).resolve().parents[2] / "experiments" / "retrieval_ablation.toml"


def test_ablation_covers_every_retriever_at_every_k_with_and_without_closure():
    cfg = load_config(ABLATION)
    cells = expand(cfg, dataset="d")
    assert cfg.name == "retrieval_ablation" and cfg.baseline == "bm25"
    assert {(c.settings.folds, c.settings.seed) for c in cells} == {(5, 0)}
    specs = {str(canonical_spec(c.settings.retriever)) for c in cells}
    wanted = ["oracle", "random", "bm25", "tfidf", "dense", "prior",
              {"type": "hybrid", "members": ["bm25", "dense"]}, DEFAULT_RETRIEVER]
    assert {str(canonical_spec(w)) for w in wanted} <= specs
    for spec in wanted:
        grid = {(c.settings.k, c.settings.closure) for c in cells
                if canonical_spec(c.settings.retriever) == canonical_spec(spec) and c.settings.selector is None}
        assert grid == {(k, closure) for k in (5, 10, 15, 20) for closure in (False, True)}
    assert [c.settings.k for c in cells if c.settings.retriever == "all"] == [65]


REPRODUCTION = ABLATION.with_name("aspera_reproduction.toml")


def test_aspera_reproduction_has_both_agents_and_two_retrievers_at_three_seeds():
    cfg = load_config(REPRODUCTION)
    assert cfg.library == "aspera" and cfg.base["generator"]["protocol"] == "aspera"
    cells = expand(cfg, dataset="d")
    kinds = [(canonical_spec(c.settings.retriever) if isinstance(c.settings.retriever, str)
              else c.settings.retriever["type"], c.settings.generator["agent"], c.settings.generator["seed"])
             for c in cells]
    assert sorted(kinds) == sorted((r, a, s) for r, a in [("all", "cck"), ("aspera_selector", "ps"),
                                                          ("oracle", "ps_generation"), ("hybrid", "ps_generation")]
                                   for s in (0, 1, 2))
    assert len({c.label for c in cells}) == 12
    assert {c.settings.k for c in cells if c.settings.retriever == "oracle"} == {15}


def test_aspera_reproduction_tests_each_cell_against_the_cck_agent_of_its_seed(tmp_path):
    import json

    from primsel.reporting import baseline_pairs, load_experiment

    cfg = load_config(REPRODUCTION)
    assert cfg.baseline == "all" and cfg.pair_on == ("generator.seed",)
    cells = expand(cfg, dataset="d")
    # the report's pairing, on the declared cells (as if every cell had finished)
    (tmp_path / "experiment.json").write_text(json.dumps({
        "name": "ps", "baseline": cfg.baseline, "pair_on": list(cfg.pair_on),
        "cells": [{"id": c.id, "label": c.label, "settings": c.settings.to_json()} for c in cells]}))
    for c in cells:
        (tmp_path / c.id).mkdir()
        (tmp_path / c.id / "report.json").write_text('{"success": 0.0}')
    pairs = baseline_pairs(load_experiment(tmp_path))
    seed = {c.id: c.settings.generator["seed"] for c in cells}
    cck = {seed[c.id]: c.id for c in cells if c.settings.retriever == "all"}
    assert {cid: pairs[cid] for cid in seed} == {cid: cck[s] for cid, s in seed.items()}


def test_ablation_has_the_calibrated_selector_on_the_default():
    cells = expand(load_config(ABLATION), dataset="d")
    chosen = [c for c in cells if c.settings.selector is not None]
    assert {canonical_spec(c.settings.retriever) == canonical_spec(DEFAULT_RETRIEVER) for c in chosen} == {True}
    assert sorted(c.settings.selector["target_recall"] for c in chosen) == [0.9, 0.95]
    assert {c.settings.k for c in chosen} == {65}


HEAVY = ABLATION.with_name("retrieval_finetuning.toml")


def test_heavier_variants_run_the_default_at_five_seeds_and_its_nested_cross_validation():
    cfg = load_config(HEAVY)
    cells = expand(cfg, dataset="d")
    default = canonical_spec(DEFAULT_RETRIEVER)
    assert sorted(c.settings.seed for c in cells
                  if canonical_spec(c.settings.retriever) == default and c.settings.k == 15) == [0, 1, 2, 3, 4]
    tuned = [c.settings.retriever for c in cells if type_name(c.settings.retriever) == "tuned"]
    assert any(t["base"]["members"] == DEFAULT_RETRIEVER["members"] and DEFAULT_RETRIEVER["weights"] in t["grid"]["weights"]
               for t in tuned)
    assert {type_name(c.settings.retriever) for c in cells} == {"hybrid", "tuned", "cooccurrence", "rerank",
                                                                 "finetuned"}
