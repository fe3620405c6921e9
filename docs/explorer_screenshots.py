"""Make the explorer screenshots of docs/user-guide.md (docs/explorer_*.png) from the built-in tasks.

Usage: ``python docs/explorer_screenshots.py`` (needs Chromium and websocket-client). Runs a
small experiment on the built-in tasks (BM25, TF-IDF and the oracle at k = 10) whose generator
replays the tasks' reference programs from two files, each with faults injected into a different
third of them (primsel.eval.faults), writes its report and site, and saves the index, a cell, a failed task and
a comparison of two cells. Nothing of Asper-Bench is used.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    from primsel.datasets import load_builtin_tasks
    from primsel.eval.faults import KINDS, make_faults
    from primsel.experiments.config import load_config
    from primsel.experiments.runner import run_experiment
    from primsel.explore.browser import Chromium
    from primsel.explore.site import build_site
    from primsel.library import with_gold
    from primsel.simulator.library import build_library
    from primsel.reporting import write_report
    from primsel.simulator.program import load_apps, star_exports

    library = build_library()
    tasks = with_gold(load_builtin_tasks(), library)
    names = {n for m in load_apps().values() for n, v in star_exports(m).items()
             if callable(v) and getattr(v, "__module__", "").startswith("primsel.simulator.apps.")}
    with tempfile.TemporaryDirectory(prefix="primsel-screens-") as scratch:
        root = Path(scratch)
        for name, which in (("a", 1), ("b", 2)):  # two program files: faults in different tasks
            lines = []
            for i, task in enumerate(tasks):
                program = task.program
                if i % 3 == which:
                    faults = make_faults(task.id, program, names, kinds=[KINDS[i % 5]], seed=2) or \
                        make_faults(task.id, program, names, kinds=["change_constant"], seed=2)
                    program = faults[0].program if faults else program
                lines.append(json.dumps({"task_id": task.id, "program": program}))
            (root / f"programs_{name}.jsonl").write_text("\n".join(lines) + "\n")
        (root / "demo.toml").write_text(
            'name = "builtin_demo"\ndescription = "Built-in tasks; programs replayed from two files, each with '
            'faults injected into a third of the tasks."\nbaseline = "bm25"\n[generator]\ntype = "replay"\n'
            '[grid]\nretriever = ["bm25", "tfidf", "oracle"]\nk = [10]\n'
            '"generator.programs" = ["programs_a.jsonl", "programs_b.jsonl"]\n')
        result = run_experiment(load_config(root / "demo.toml"), root / "runs", tasks=tasks, library=library,
                                progress=False, use_cache=False)
        write_report(result.directory)
        url = build_site(result.directory, root / "site").resolve().as_uri()
        cells = json.loads((result.directory / "experiment.json").read_text())["cells"]
        bm25 = [c["id"] for c in cells if c["settings"]["retriever"] == "bm25"]
        cell, other = bm25[0], bm25[1]
        rows = [json.loads(x) for x in (result.directory / cell / "tasks.jsonl").read_text().splitlines()]
        failed = next(r["task_id"] for r in rows if (r.get("attribution") or {}).get("divergence_line"))
        views = {"index": "", "cell": f"#/cell/{cell}", "task": f"#/task/{cell}/{failed}",
                 "compare": f"#/compare/{cell}/{other}"}
        with Chromium(width=1280, height=860) as browser:
            for name, fragment in views.items():
                browser.open(url + fragment)
                browser.wait_for("!!(document.body && document.body.dataset.ready === '1')")
                if name == "cell":
                    browser.evaluate("(() => { const s = document.getElementById('filter-status'); s.value = 'fail';"
                                     " s.dispatchEvent(new Event('change', {bubbles: true})); })()")
                browser.screenshot(HERE / f"explorer_{name}.png")
            if browser.errors:
                print("console errors:", browser.errors, file=sys.stderr)
                return 1
    print("wrote", ", ".join(f"docs/explorer_{name}.png" for name in views))
    return 0


if __name__ == "__main__":
    sys.exit(main())
