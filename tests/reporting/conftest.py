"""Synthetic run folders for the report's tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

TASKS = ("t1", "t2", "t3")


def write_cell(root: Path, cid: str, retriever: Any, k: int, recall15: Sequence[float], report: dict | None = None,
               closure: bool = False, selector: Any = None, seed: int = 0) -> dict:
    """A finished cell: per-task recall@15 in tasks.jsonl, a report.json whose recall@15 is
    their mean (other metrics fixed or from ``report``)."""
    settings = {"retriever": retriever, "k": k, "closure": closure, "folds": 5, "seed": seed, "dataset": "synthetic/3/abc"}
    if selector is not None:
        settings["selector"] = selector
    d = root / cid
    d.mkdir(parents=True)
    rows = [{"task_id": t, "gold": ["p"], "docs_tokens": 100.0,
             "metrics": {"recall@15": r, "set_recall": r, f"recall@{k}": r}} for t, r in zip(TASKS, recall15)]
    (d / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "config.json").write_text(json.dumps({"id": cid, "label": cid, "settings": settings}))
    full = {f"recall@{i}": min(1.0, i / 20) for i in range(1, 21)}
    full.update({"recall@15": sum(recall15) / len(recall15), "complete@20": 0.5, "ndcg@10": 0.25,
                 "set_recall_macro": 0.5, "set_f1_macro": 0.3, "docs_tokens": 1000.0 + 10 * k, "n_tasks": 3,
                 "learns": {"retriever": False, "selector": False, "generator": False}})
    full.update(report or {})
    (d / "report.json").write_text(json.dumps(full))
    return {"id": cid, "label": cid, "settings": settings}


@pytest.fixture()
def make_run(tmp_path) -> Callable[..., Path]:
    """``make_run(cells, baseline=..., name=...)``: an experiment directory of ``cells`` (each
    the keyword arguments of :func:`write_cell` besides ``root``)."""
    def make(cells: Sequence[dict], baseline: str | None = "bm25", name: str = "demo") -> Path:
        root = tmp_path / "runs" / name
        root.mkdir(parents=True)
        entries = [write_cell(root, **c) for c in cells]
        (root / "experiment.json").write_text(json.dumps({
            "name": name, "description": "A synthetic experiment.", "baseline": baseline,
            "data": {"source": "builtin", "n_tasks": 3, "fingerprint": "builtin/3/abc"}, "cells": entries}))
        return root

    return make
