"""The runner on Asper-Bench reproduces the popularity prior's reference figures (docs/architecture.md, "Folds")."""

from __future__ import annotations

import json

import pytest

from primsel.experiments.config import parse_config
from primsel.experiments.runner import run_experiment


@pytest.mark.asper
def test_prior_with_5_folds_seed_0(asper_path, tmp_path):
    cfg = parse_config({"name": "prior", "retriever": "prior", "k": 15, "folds": 5, "seed": 0})
    result = run_experiment(cfg, tmp_path, data=asper_path, progress=False)
    report = json.loads((result.directory / result.cells[0].id / "report.json").read_text())
    assert report["n_tasks"] == 250
    assert report["recall@15"] == pytest.approx(0.595, abs=5e-4)
    assert report["complete@20"] == 35 / 250
