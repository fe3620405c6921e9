"""Time the run explorer in headless Chromium on a large experiment.

Usage: ``python benchmarks/explorer_load.py [--run RUN_DIR] [--cells 89] [--tasks 250] [--repeat 5]``

Without ``--run`` it writes a synthetic experiment of ``--cells`` x ``--tasks`` cells and tasks
(every row with a generated program, a verdict and, when failed, an attribution; programs and
gold sets borrowed from the built-in tasks), builds its site and opens each view in a fresh
document: the index (every cell), a cell (every task of it), a task, and a comparison of two
cells. Printed per view: the time from the start of navigation to the view's first complete
render (``PRIMSEL.renderedAt``, milliseconds), median and worst of the repetitions; and the
site's size. Needs Chromium and websocket-client (see ``primsel.explore.browser``). Target: every
view under 2 s for 89 cells x 250 tasks.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path


def synthetic_run(root: Path, cells: int, tasks: int) -> Path:
    """An experiment directory of ``cells`` x ``tasks`` rows (see the module docstring)."""
    from primsel.datasets import load_builtin_tasks
    from primsel.eval.attribution import CATEGORIES
    from primsel.library import with_gold
    from primsel.simulator.library import build_library

    library = build_library()
    ids = list(library)
    builtin = with_gold(load_builtin_tasks(), library)
    rng = random.Random(0)
    directory = root / "large"
    entries = []
    for c in range(cells):
        cell_id = f"cell{c:03d}"
        k = (5, 10, 15, 20)[c % 4]
        settings = {"retriever": f"retriever{c // 8}", "k": k, "closure": bool(c % 2), "folds": 5, "seed": 0,
                    "generator": {"type": "replay", "programs": "programs.jsonl"}}
        entries.append({"id": cell_id, "label": f"retriever{c // 8} k={k}" + (" closure" if c % 2 else ""),
                        "settings": settings})
        rows, passed = [], 0
        for t in range(tasks):
            task = builtin[t % len(builtin)]
            selection = rng.sample(ids, k)
            status = "pass" if rng.random() < 0.6 else rng.choice(["fail", "error", "requires_user_input"])
            passed += status == "pass"
            attribution = None if status == "pass" else {
                "task_id": str(t + 1), "stage": "generation", "category": rng.choice(CATEGORIES),
                "line": 3, "divergence_line": 4, "expected_call": "work_calendar.add_event(Event(subject='a'))",
                "actual_call": "work_calendar.add_event(Event(subject='b'))", "missed_gold": [], "unselected": [],
                "hallucinated": [], "status": status}
            recall = len(set(selection) & task.gold) / len(task.gold)
            rows.append({"task_id": str(t + 1), "selection": selection, "closure_added": [], "gold": sorted(task.gold),
                         "metrics": {f"recall@{k}": recall, "set_recall": recall, "set_precision": recall / 2,
                                     f"complete@{k}": float(recall == 1.0)},
                         "docs_tokens": 900 + t, "status": status, "error_type": None, "message": None,
                         "program": task.program, "tokens": {"prompt": 2000 + t, "completion": 300},
                         "called_primitives": sorted(task.gold)[:5], "attribution": attribution})
        cell_dir = directory / cell_id
        cell_dir.mkdir(parents=True)
        (cell_dir / "config.json").write_text(json.dumps({"id": cell_id, "settings": settings}))
        (cell_dir / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        report = {"recall@5": rng.random(), "recall@10": rng.random(), "recall@15": rng.random(), "recall@20": rng.random(),
                  "complete@10": rng.random(), "complete@20": rng.random(), "ndcg@10": rng.random(), "mrr": rng.random(),
                  "set_f1_macro": rng.random(), "docs_tokens": 1000.0 + c, "success": passed / tasks, "complete": True,
                  "failures_wrong_arguments": float(tasks - passed)}
        (cell_dir / "report.json").write_text(json.dumps(report))
    (directory / "experiment.json").write_text(json.dumps({
        "name": "large", "description": f"synthetic: {cells} cells x {tasks} tasks",
        "data": {"source": "synthetic", "n_tasks": tasks}, "cells": entries}))
    return directory


def main(argv: list[str] | None = None) -> int:
    from primsel.explore.browser import Chromium
    from primsel.explore.site import build_site

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="an experiment directory to open (default: a synthetic one)")
    parser.add_argument("--data", help="Asper-Bench archive, for the queries of a run on it")
    parser.add_argument("--cells", type=int, default=89)
    parser.add_argument("--tasks", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="primsel-explorer-") as scratch:
        root = Path(scratch)
        start = time.perf_counter()
        run = Path(args.run) if args.run else synthetic_run(root, args.cells, args.tasks)
        made = time.perf_counter() - start
        start = time.perf_counter()
        index = build_site(run, root / "site", data=args.data)
        built = time.perf_counter() - start
        size = sum(p.stat().st_size for p in (root / "site").rglob("*") if p.is_file())
        cells = json.loads((run / "experiment.json").read_text())["cells"]
        first, second = cells[0]["id"], cells[min(1, len(cells) - 1)]["id"]
        task = json.loads((run / first / "tasks.jsonl").read_text().splitlines()[0])["task_id"]
        rows = sum(1 for c in cells for _ in (run / c["id"] / "tasks.jsonl").open())
        print(f"run: {run if args.run else 'synthetic'}; {len(cells)} cells, {rows} task rows "
              f"({'made in %.1f s, ' % made if not args.run else ''}site built in {built:.1f} s, {size / 1e6:.1f} MB)")
        url = index.resolve().as_uri()
        views = {"index": "", "cell": f"#/cell/{first}", "task": f"#/task/{first}/{task}",
                 "compare": f"#/compare/{first}/{second}"}
        with Chromium() as browser:
            for name, fragment in views.items():
                times = []
                for _ in range(args.repeat):
                    browser.open(url + fragment)
                    browser.wait_for("!!(document.body && document.body.dataset.ready === '1')", timeout=60)
                    times.append(browser.evaluate("PRIMSEL.renderedAt"))
                print(f"{name:<8} median {statistics.median(times):7.1f} ms   worst {max(times):7.1f} ms   "
                      f"({args.repeat} loads)")
            if browser.errors:
                print("console errors:", *browser.errors, sep="\n  ")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
